// Runs the web build in the page and in a worker, then writes the results into the
// DOM (#results, window.__ratekeeperResults) and sets #status[data-state] to done/failed.
import init, * as api from '/bindings-wasm/web.mjs';
import { fixedScenario, pacing } from './scenarios.mjs';
import { runVectors } from './vectors.mjs';

const status = document.getElementById('status');

function row(table, cells, ok) {
  const tr = document.createElement('tr');
  cells.forEach((text, i) => {
    const td = document.createElement('td');
    td.textContent = text;
    if (i === cells.length - 1 && ok !== undefined) td.className = ok ? 'pass' : 'fail';
    tr.append(td);
  });
  document.getElementById(table).append(tr);
}

function inWorker() {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL('./worker.mjs', import.meta.url), { type: 'module' });
    const timer = setTimeout(() => reject(new Error('worker timed out')), 15_000);
    worker.onmessage = ({ data }) => {
      clearTimeout(timer);
      worker.terminate();
      data.ok ? resolve(data.result) : reject(new Error(`worker: ${data.error}`));
    };
    worker.onerror = (event) => {
      clearTimeout(timer);
      reject(new Error(`worker: ${event.message}`));
    };
  });
}

function burstSummary({ burst }) {
  const allowed = burst.filter((d) => d.allowed).length;
  const retry = [...new Set(burst.filter((d) => !d.allowed).map((d) => d.retryAfterMs))].join(', ');
  return `${allowed} allowed, ${burst.length - allowed} denied, retryAfterMs ${retry}`;
}

function show(fixed, vectors, worker, paced) {
  row('fixed', ['bucket of 5 (1/s), 12 requests at 0 ms', burstSummary(fixed)]);
  row('fixed', ['the same in a module worker', burstSummary(worker)]);
  row('fixed', ['log of 1 per 1000 ms at 0 / 999 / 1000 ms', Object.values(fixed.logAt).map((a) => (a ? 'allowed' : 'denied')).join(' / ')]);
  row('fixed', ['GCRA 10/s, burst 2: three at 0 ms', fixed.gcraBurst.map((d) => (d.allowed ? 'allowed' : `denied (retry ${d.retryAfterMs} ms)`)).join(', ')]);
  row('fixed', ['headers of the third', Object.entries(fixed.gcraHeaders).map(([k, v]) => `${k}: ${v}`).join(' | ')]);
  row('fixed', ['leaky queue of 3 (100 ms): four bookings at 0 ms', fixed.queueWaits.map((w) => (w === null ? 'full' : `wait ${w} ms`)).join(', ')]);
  for (const [what, e] of Object.entries(fixed.errors)) row('fixed', [what, e ? `${e.name} code=${e.code}: ${e.message}` : 'no error']);
  row('fixed', ['default now (performance.now())', fixed.defaultNow.map((d) => `${d.allowed ? 'allowed' : 'denied'} (retryAfterMs ${d.retryAfterMs.toFixed(3)})`).join(', ')]);
  row('fixed', [`acquire x6 on 1 per ${paced.intervalMs} ms (resolved at, ms)`, paced.resolved.map((t) => t.toFixed(1)).join(', ')]);
  for (const [dir, run] of Object.entries(vectors)) {
    for (const r of run.results) row('vectors', [dir + r.file, r.name, r.inexpressible ? `inexpressible: ${r.inexpressible}` : (r.problem ?? 'pass')], r.problem === null || r.problem === undefined);
    const passed = run.results.filter((r) => r.problem === null).length;
    const inexpressible = run.results.filter((r) => r.inexpressible).length;
    row('vectors', [dir, `index.json: ${run.total}`, `${passed} passed, ${inexpressible} inexpressible`], passed + inexpressible === run.total);
  }
}

const results = { userAgent: navigator.userAgent };
let state = 'done';
try {
  await init();
  results.fixed = fixedScenario(api);
  results.vectors = await runVectors(api, new URL('/tests/vectors/', location.href));
  results.worker = await inWorker();
  results.pacing = await pacing(api);
  show(results.fixed, results.vectors, results.worker, results.pacing);
  status.textContent = `done in ${navigator.userAgent.match(/Chrome\/[\d.]+/)?.[0] ?? 'this browser'}`;
} catch (error) {
  results.error = `${error?.name}: ${error?.message}\n${error?.stack ?? ''}`;
  status.textContent = `failed: ${results.error}`;
  state = 'failed';
}
window.__ratekeeperResults = results;
document.getElementById('results').textContent = JSON.stringify(results, null, 2);
status.dataset.state = state; // last: the test waits for it
