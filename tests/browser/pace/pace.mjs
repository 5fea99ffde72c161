// The pacedFetch demo: a burst of COUNT requests to the test server (/api/item/N),
// paced by a GCRA at RATE per second through the `ratekeeper` package's browser
// build (served at /ratekeeper/). The table shows each request waiting, sent and
// answered; the server answers one of them 429 with Retry-After, pausing the queue.
// When all are answered, window.paceResult holds what the page saw.
import init, { Gcra, pacedFetch } from '/ratekeeper/wasm/browser.mjs';

const params = new URLSearchParams(location.search);
const COUNT = Number(params.get('count') ?? 12);
const RATE = Number(params.get('rate') ?? 10);

await init();
const gcra = Gcra.perPeriod({ burst: 1, tokens: RATE, periodMs: 1000, name: 'demo' });
document.getElementById('config').textContent =
  `${COUNT} requests at once, limiter: Gcra.perPeriod({ burst: 1, tokens: ${RATE}, periodMs: 1000 }), one every ${gcra.emissionIntervalMs} ms`;

// One request first, so that the burst does not wait for a new connection.
await (await fetch('/api/warm')).arrayBuffer();
const t0 = performance.now();
const ms = (t) => (t - t0).toFixed(1);
const rows = [];
const sent = [];
const pauses = [];
let lastResponseMs = NaN;
let admitted = 0;
let answered = 0;
const tbody = document.getElementById('rows');
const set = (id, value) => (document.getElementById(id).textContent = value);

function onEvent(event) {
  set('waiting', event.waiting);
  if (event.type === 'queued') {
    const tr = document.createElement('tr');
    tr.className = 'waiting';
    tr.innerHTML = `<td>#${event.id}</td><td>${ms(event.atMs)}</td><td>${ms(event.slotMs)}</td><td></td><td class="timeline"></td><td>waiting</td>`;
    tbody.append(tr);
    rows[event.id] = tr;
  } else if (event.type === 'sent') {
    admitted += 1;
    set('admitted', admitted);
    sent.push({ id: event.id, atMs: event.atMs - t0, slotMs: event.slotMs - t0, attempt: event.attempt });
    const tr = rows[event.id];
    tr.className = event.attempt > 0 ? 'sent retry' : 'sent';
    tr.cells[2].textContent = ms(event.slotMs);
    tr.cells[3].textContent = ms(event.atMs);
    tr.cells[4].innerHTML = `<span class="bar" style="width:${Math.round((event.atMs - t0) / 10)}px"></span>`;
    tr.cells[5].textContent = event.attempt > 0 ? `retry ${event.attempt}…` : 'sent…';
  } else if (event.type === 'response') {
    lastResponseMs = event.atMs - t0;
    const tr = rows[event.id];
    tr.cells[5].textContent = String(event.status);
    if (event.status === 200) tr.className += ' done';
  } else if (event.type === 'paused') {
    pauses.push({ answeredMs: lastResponseMs, untilMs: event.untilMs - t0, sentBefore: sent.length });
    set('paused', `server asked to wait: paused until ${ms(event.untilMs)} ms`);
  }
}

const paced = pacedFetch(fetch, gcra, { onEvent });
const responses = await Promise.all(
  Array.from({ length: COUNT }, (_, i) =>
    paced(`/api/item/${i}`).then(async (response) => {
      answered += 1;
      set('answered', answered);
      return { id: i, status: response.status, body: await response.json() };
    }),
  ),
);
window.paceResult = { emissionIntervalMs: gcra.emissionIntervalMs, sent, pauses, responses };
document.title = 'done';
