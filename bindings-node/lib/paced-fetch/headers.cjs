'use strict';
// pacedFetch: what a response says of when to ask again: `Retry-After`
// (delay-seconds, or an HTTP-date from the response's `Date`, RFC 9110; less the response's `Age`) and
// the `RateLimit` / `RateLimit-Policy` fields (the IETF draft, and the older
// `RateLimit-Remaining` / `RateLimit-Reset`).

/**
 * Milliseconds to wait from a `Retry-After` value (delay-seconds or an
 * HTTP-date, RFC 9110), or null for anything else ("1.5", "-1", "5 May"),
 * which is ignored. `wallNow`: the wall clock's milliseconds, or a function
 * reading them, called only for a date; a date against a time that is no
 * finite number reads as none (its NaN paused the queue for ever).
 * `ageSeconds`: how long ago the response was made (see ageOf), spent
 * already of delay-seconds, which count from then.
 * `responseDate`: the response's `Date` (null when it has none). A date
 * counts from it, plus `ageSeconds`, the server's now by its own clock
 * (RFC 9110, section 10.2.3: "the time of the response"), so that a client
 * clock off from the server's waits what the server asked: against the
 * local clock, one an hour behind waited the hour, one ahead not at all.
 * Without a valid Date (or through CORS, which hides it unless exposed),
 * against the wall clock. A date is the same instant either way.
 */
function parseRetryAfter(value, wallNow, ageSeconds = 0, responseDate = null) {
  if (value === null || value === undefined) return null;
  const text = String(value).trim();
  if (/^\d+$/.test(text)) return Math.max(0, Number(text) - ageSeconds) * 1000;
  const now = typeof wallNow === 'function' ? wallNow() : wallNow;
  if (!Number.isFinite(now)) return null;
  const date = httpDate(text, now);
  if (date === null) return null;
  const sent = responseDate === null || responseDate === undefined ? null : httpDate(String(responseDate).trim(), now);
  return Math.max(0, sent === null ? date - now : date - (sent + ageSeconds * 1000));
}

// The three forms of an HTTP-date (RFC 9110, section 5.6.7), all GMT and
// case-sensitive. Not Date.parse: it reads the zoneless asctime form as
// local time (a retry hours early or late), and dates into junk ("5 May").
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTH = `(${MONTHS.join('|')})`;
const TIME = '(\\d\\d):(\\d\\d):(\\d\\d)';
const DAY_NAME = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const IMF_FIXDATE = new RegExp(`^${DAY_NAME}, (\\d\\d) ${MONTH} (\\d{4}) ${TIME} GMT$`);
const RFC850_DATE = new RegExp(`^(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day, (\\d\\d)-${MONTH}-(\\d\\d) ${TIME} GMT$`);
const ASCTIME_DATE = new RegExp(`^${DAY_NAME} ${MONTH} ([ \\d]\\d) ${TIME} (\\d{4})$`);

/** Unix milliseconds of the HTTP-date `text`, or null when it is none (or names no real instant). */
function httpDate(text, wallNow) {
  let fields;
  let match;
  if ((match = IMF_FIXDATE.exec(text))) {
    const [, day, month, year, ...time] = match;
    fields = [year, month, day, ...time];
  } else if ((match = RFC850_DATE.exec(text))) {
    const [, day, month, yy, ...time] = match;
    // A date more than 50 years ahead is in the latest past year ending so
    // (RFC 9110): the latest year ending so, from the next century down,
    // not more than 50 years ahead. Not this century's alone: on 31 Dec
    // 2099, 01-Jan-00 is tomorrow (2100), not a century ago.
    const now = new Date(wallNow);
    const limit = new Date(wallNow);
    limit.setUTCFullYear(now.getUTCFullYear() + 50);
    const [h, m, s] = time.map(Number);
    let year = now.getUTCFullYear() - (now.getUTCFullYear() % 100) + 100 + Number(yy);
    while (Date.UTC(year, MONTHS.indexOf(month), Number(day), h, m, s) > limit.getTime()) year -= 100;
    fields = [year, month, day, ...time];
  } else if ((match = ASCTIME_DATE.exec(text))) {
    const [, month, day, hour, minute, second, year] = match;
    fields = [year, month, day, hour, minute, second];
  } else {
    return null;
  }
  const [year, month, day, hour, minute, second] = fields.map((f, i) => (i === 1 ? MONTHS.indexOf(f) : Number(f)));
  // A leap second, 23:59:60 (RFC 9110's time-of-day runs to it), is a real
  // date: read as the next day's 00:00:00, which it ends. Refused as 31 Feb
  // is, a 429 dated then was returned unretried, and the queue went on.
  const leap = hour === 23 && minute === 59 && second === 60;
  const at = Date.UTC(year, month, day, hour, minute, leap ? 59 : second);
  // Date.UTC carries what overflows (31 Feb, 25:00) into the next field: that is no date.
  const back = new Date(at);
  const real =
    back.getUTCFullYear() === year &&
    back.getUTCDate() === day &&
    back.getUTCHours() === hour &&
    back.getUTCMinutes() === minute &&
    back.getUTCSeconds() === (leap ? 59 : second);
  return real ? at + (leap ? 1000 : 0) : null;
}

/**
 * Seconds since the response of `headers` was made, by the `Age` a cache
 * adds to a response it serves (RFC 9111, section 5.1): 0 without one. As
 * that section tells caches, a list counts by its first member, and an
 * invalid value (not a non-negative integer) is ignored.
 */
function ageOf(headers) {
  const value = headers.get('age');
  if (value === null) return 0;
  const first = value.split(',')[0].trim();
  return /^\d+$/.test(first) ? Number(first) : 0;
}

/** Thrown by parse where the text breaks structured-field syntax (caught there only). */
const BROKEN = Symbol('broken');
// The characters of RFC 9651's grammar (section 3): a key's, a token's, a digit.
const KEY_START = /[a-z*]/;
const KEY_CHAR = /[a-z0-9_\-.*]/;
const TOKEN_START = /[A-Za-z*]/;
const TOKEN_CHAR = /[!#$%&'*+\-.^_`|~0-9A-Za-z:/]/;
const DIGIT = /[0-9]/;
// A Byte Sequence's content (section 4.2.7): base64 (A-Z a-z 0-9 + /)
// that decodes, else parsing fails. Its `=` padding may be left out (the
// RFC asks parsers not to fail for that), as atob reads base64: groups of
// four, then two or three characters, padded to four or not. An `=`
// elsewhere (`:a=b:`), or one character left over (`:a:`), decodes to
// nothing: checked by the alphabet alone, such a field was read.
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;
/** Reads a Display String's bytes, refusing what is not UTF-8 (section 4.2.10). */
const UTF8 = new TextDecoder('utf-8', { fatal: true });
/** The value of a parameter written as its key alone (`;ok`): Boolean true, written as nothing. */
const TRUE = Object.freeze({ type: 'boolean', value: true, text: null });

/**
 * The members of `value` (a field's value, or null when absent) parsed as a
 * Structured Field List, else as a Dictionary (the older draft's `RateLimit:
 * limit=10, remaining=0, reset=30`), by RFC 9651's rules (section 4.2);
 * null when absent or neither. A field that fails to parse is ignored as a
 * whole (section 4.2: "the entire field value MUST be ignored"): read
 * member by member, `"a";r=0;t=5, ;;` paused as if it were well-formed.
 *
 * Each member is `{ key, item, params }`: `key`, a Dictionary member's key
 * (null in a List); `item`, its Item or Inner List (null for a Dictionary
 * key alone); `params`, its parameters, a Map of key to Item (a key alone
 * to TRUE). An Item is `{ type, value, text }`: its type (`integer`,
 * `decimal`, `string`, `token`, `bytes`, whose value is its base64,
 * `boolean`, `date`, `displaystring`, or `innerlist`, whose value is its
 * items, each `{ item, params }`), its value, and the text it was written as.
 * One pass checks the field and reads it. Checked by one scanner, then
 * cut at `,` and `;` by another, it was read by two grammars: the second
 * took `\` for an escape in a Display String too, where it is a character,
 * and one ending in it (`s=%"x\"`) ran on over what followed, whose `r` and
 * `t` were then not read (`"a";s=%"x\";r=0;t=5` paused nothing).
 */
function structured(value) {
  return value === null ? null : (parse(value, false) ?? parse(value, true));
}

/** The members of `text` as a List (or, `dictionary`, a Dictionary), as structured returns them; null where it breaks the syntax. */
function parse(text, dictionary) {
  let at = 0;
  const broken = () => {
    throw BROKEN;
  };
  const is = (chars) => at < text.length && chars.test(text[at]);
  const skip = (chars) => {
    while (at < text.length && chars.includes(text[at])) at++;
  };
  const key = () => {
    const start = at;
    if (!is(KEY_START)) broken();
    while (is(KEY_CHAR)) at++;
    return text.slice(start, at);
  };
  // An Integer or Decimal (section 4.2.4): at most 15 digits, or 12 and 3 decimals.
  const number = (integerOnly) => {
    const start = at;
    if (text[at] === '-') at++;
    if (!is(DIGIT)) broken();
    const digits = at;
    let dot = -1;
    for (;;) {
      if (is(DIGIT)) at++;
      else if (dot < 0 && text[at] === '.') {
        if (at - digits > 12) broken();
        dot = at++;
      } else break;
      if (at - digits > (dot < 0 ? 15 : 16)) broken();
    }
    if (dot >= 0 && (integerOnly || at - dot - 1 < 1 || at - dot - 1 > 3)) broken();
    return { type: dot < 0 ? 'integer' : 'decimal', value: Number(text.slice(start, at)) };
  };
  // A String (section 4.2.5): printable ASCII, `\` escaping only `"` and `\`.
  const string = () => {
    let value = '';
    at++;
    for (;;) {
      if (at >= text.length) broken();
      const c = text.charCodeAt(at++);
      if (c === 0x22) return { type: 'string', value };
      if (c === 0x5c) {
        if (text[at] !== '"' && text[at] !== '\\') broken();
        value += text[at++];
      } else if (c < 0x20 || c > 0x7e) broken();
      else value += text[at - 1];
    }
  };
  // A Display String (section 4.2.10): `%"`, printable ASCII with
  // lowercase `%xx` escapes, whose bytes are UTF-8. `\` escapes nothing.
  const displayString = () => {
    at++;
    if (text[at++] !== '"') broken();
    const bytes = [];
    for (;;) {
      if (at >= text.length) broken();
      const c = text.charCodeAt(at++);
      if (c < 0x20 || c > 0x7e) broken();
      if (c === 0x22) break;
      if (c === 0x25) {
        const hex = text.slice(at, at + 2);
        if (!/^[0-9a-f]{2}$/.test(hex)) broken();
        bytes.push(parseInt(hex, 16));
        at += 2;
      } else bytes.push(c);
    }
    try {
      return { type: 'displaystring', value: UTF8.decode(new Uint8Array(bytes)) };
    } catch {
      return broken();
    }
  };
  const bareItem = () => {
    const start = at;
    const c = text[at];
    let item;
    if (c === '-' || is(DIGIT)) item = number(false);
    else if (c === '"') item = string();
    else if (is(TOKEN_START)) {
      at++;
      while (is(TOKEN_CHAR)) at++;
      item = { type: 'token', value: text.slice(start, at) };
    } else if (c === ':') {
      const end = text.indexOf(':', at + 1);
      if (end < 0 || !BASE64.test(text.slice(at + 1, end))) broken();
      item = { type: 'bytes', value: text.slice(at + 1, end) };
      at = end + 1;
    } else if (c === '?') {
      at++;
      if (text[at] !== '0' && text[at] !== '1') broken();
      item = { type: 'boolean', value: text[at++] === '1' };
    } else if (c === '@') {
      at++;
      item = { ...number(true), type: 'date' };
    } else if (c === '%') item = displayString();
    else broken();
    item.text = text.slice(start, at);
    return item;
  };
  // Parameters (section 4.2.3.2): a key again replaces the first's value.
  const parameters = () => {
    const params = new Map();
    while (text[at] === ';') {
      at++;
      skip(' ');
      const name = key();
      if (text[at] === '=') {
        at++;
        params.set(name, bareItem());
      } else params.set(name, TRUE);
    }
    return params;
  };
  // An Item or an Inner List (section 4.2.1.1), with its parameters.
  const member = () => {
    let item;
    if (text[at] === '(') {
      const start = at++;
      const items = [];
      for (;;) {
        skip(' ');
        if (text[at] === ')') break;
        items.push({ item: bareItem(), params: parameters() });
        if (text[at] !== ' ' && text[at] !== ')') broken();
      }
      at++;
      item = { type: 'innerlist', value: items, text: text.slice(start, at) };
    } else item = bareItem();
    return { item, params: parameters() };
  };
  try {
    // A Dictionary's by key: a key again replaces the first's member, in its place (section 4.2.2).
    const members = dictionary ? new Map() : [];
    skip(' ');
    while (at < text.length) {
      if (dictionary) {
        const name = key();
        // A key alone is `true`, with parameters of its own.
        if (text[at] === '=') {
          at++;
          members.set(name, { key: name, ...member() });
        } else members.set(name, { key: name, item: null, params: parameters() });
      } else members.push({ key: null, ...member() });
      skip(' \t');
      if (at >= text.length) break;
      if (text[at++] !== ',') broken();
      skip(' \t');
      // A trailing comma.
      if (at >= text.length) broken();
    }
    return dictionary ? [...members.values()] : members;
  } catch (error) {
    if (error === BROKEN) return null;
    throw error;
  }
}

/**
 * The quota unit a policy's `qu` names: a String (section 3.1.2), its
 * `requests` also spelt `request` (as the draft's registry lists it); null
 * for anything else (a token, a Boolean), which makes the policy malformed.
 */
function quotaUnit(item) {
  if (item.type !== 'string') return null;
  return item.value === 'request' ? 'requests' : item.value;
}

/**
 * The name by which a member of `RateLimit` and one of `RateLimit-Policy`
 * pair: its item as written (`"api"`, a token), or a Dictionary key alone;
 * null for the older draft's `key=value`, which names no policy.
 */
function nameOf({ key, item }) {
  if (key === null) return item.text;
  return item === null ? key : null;
}

/**
 * Milliseconds until the server allows requests again, from its RateLimit
 * headers, when it says nothing is left (else null). Understands the IETF
 * draft's structured `RateLimit: "name";r=0;t=30` (a list: several
 * policies, the longest exhausted one wins; other parameters ignored), its
 * older `RateLimit: limit=10, remaining=0, reset=30` (or cut at `;`), and separate
 * `RateLimit-Remaining` / `RateLimit-Reset`. Never throws. A `RateLimit` or
 * `RateLimit-Policy` field that breaks structured-field syntax is ignored
 * as a whole (see structured); in a well-formed one, a member that is no
 * policy's (as below) is ignored alone.
 *
 * `t` is when the quota is whole again, which for a bucket may be long after
 * its next unit: with the same policy's `RateLimit-Policy: "name";q=5;w=5`,
 * the pause is at most one unit's share of its window (w / q seconds), as
 * long as a bucket takes to earn a unit back. A window that has not reset by
 * then answers the next request 429 with its Retry-After, which pauses again.
 * Only where the unit is a request: a policy whose `qu` names another
 * (`"content-bytes"`, `"concurrent-requests"`) bounds nothing by its share,
 * and one whose `qu` is no String is malformed, as below.
 * Where a name repeats (helpers in a row, each limiter "default"), the n-th
 * item of that name goes with the n-th policy of that name.
 *
 * `t` is optional (draft-ietf-httpapi-ratelimit-headers, section 4.1),
 * and the draft gives its absence no meaning beyond an example of a quota
 * "that has no time window". With `r=0` and no `t`, the same policy's
 * window `w` stands for it: the policy grants `q` units per `w` seconds, so
 * its whole quota is back within `w`, and the pause is again at most one
 * unit's share (`w` itself for `q=0`, or for a unit that is no request).
 * Without such a window nothing says
 * how long, and the item is ignored: a 429 with Retry-After will say.
 * A `t` that is there but malformed (`t=-1`, `t="5"`, a bare `t`, or a
 * Decimal, `t=1.5`: `t` is a non-negative Integer, section 4.1.2) makes the
 * item malformed, and ignored (section 7: malformed fields MUST be
 * ignored), never read as absent, and so does a malformed `r`; so is a
 * policy without its required `q`, or with a window of 0 (`w` is a
 * non-zero Integer), a `q` or `w` that is no Integer or a `qu` that is no
 * String: it bounds nothing.
 * The older draft's `remaining` and `reset` may have decimals.
 */
function parseRateLimit(headers) {
  // A number as the separate `RateLimit-Remaining` / `RateLimit-Reset`
  // write one; NaN (ignored) for anything else, where Number() would read a
  // blank value as 0, "nothing remaining".
  const count = (text) => (text !== null && /^\s*\d+(\.\d+)?\s*$/.test(text) ? Number(text) : NaN);
  // The older draft's `remaining` and `reset` in `RateLimit`: a
  // non-negative Integer or Decimal; NaN for another type, or none.
  const number = (item) => (item !== undefined && (item.type === 'integer' || item.type === 'decimal') && item.value >= 0 ? item.value : NaN);
  // The newer draft's `r`, `t`, `q` and `w`: each a non-negative Integer.
  // A Decimal (`t=1.5`) is another type, so the item (or policy) is
  // malformed, as with `t=-1`: ignored, not rounded.
  const integer = (item) => (item !== undefined && item.type === 'integer' && item.value >= 0 ? item.value : NaN);
  let pause = null;
  const exhausted = (remaining, reset) => {
    if (remaining === 0 && Number.isFinite(reset) && reset >= 0) pause = Math.max(pause ?? 0, reset * 1000);
  };
  // Each name's policies (their parameters), in the order listed. Names may
  // repeat: helpers in a row (one limiter for every route, then one for a
  // route) each add an item, and both are "default" unless named. The n-th
  // RateLimit item of a name goes with the n-th policy of that name, as a
  // server lists both fields in one order; keyed by name alone, every item
  // went with the last policy, and an exhausted limit of 4 per 2 s paused a
  // unit's share of the other's 10 per 1 s (0.1 s, not 0.5): a 429 every
  // few requests.
  const policies = new Map();
  for (const member of structured(headers.get('ratelimit-policy')) ?? []) {
    const name = nameOf(member);
    if (name === null) continue;
    if (policies.has(name)) policies.get(name).push(member.params);
    else policies.set(name, [member.params]);
  }
  // The older draft's dictionary (`remaining=0, reset=30`): its members'
  // own values, and their parameters too, since servers cut its members
  // at `;` as well (`limit=100; remaining=0; reset=30`, api.close.com's).
  const flat = new Map();
  // How many items of each name came before (see policies).
  const seen = new Map();
  for (const member of structured(headers.get('ratelimit')) ?? []) {
    const { params } = member;
    const name = nameOf(member);
    if (name === null) {
      flat.set(member.key, member.item);
      for (const [key, item] of params) flat.set(key, item);
      continue;
    }
    // An item's parameters only stand for the older draft's members without
    // `r` (`"default"; remaining=0; reset=30`): the newer draft's `r` and
    // `t` govern theirs (`"a";r=5;remaining=0`).
    if (!params.has('r') && params.has('remaining')) exhausted(number(params.get('remaining')), number(params.get('reset')));
    const nth = seen.get(name) ?? 0;
    seen.set(name, nth + 1);
    if (!params.has('r')) continue;
    // The same policy's window, from a well-formed item (see above): the
    // n-th of its name, or the last when fewer are listed (one policy for
    // several items of a name).
    const same = policies.get(name) ?? [];
    const matched = same[Math.min(nth, same.length - 1)] ?? new Map();
    const q = integer(matched.get('q'));
    const w = integer(matched.get('w'));
    // What `q` counts (`qu`, section 3.1.2): requests when not said.
    const unit = matched.has('qu') ? quotaUnit(matched.get('qu')) : 'requests';
    const window = q >= 0 && w > 0 && unit !== null ? w : NaN;
    // One unit's share of it; for q = 0, none to share, the window itself.
    // A unit that is no request (a byte) earns no request back in its
    // share: `qu="content-bytes";q=65535;w=10` cut `t=10` to 0.15 ms, and
    // the queue went on into the server's 429s. Then `t` (or the window) alone.
    const share = window > 0 && unit === 'requests' ? window / q : Infinity;
    exhausted(integer(params.get('r')), Math.min(params.has('t') ? integer(params.get('t')) : window, share));
  }
  if (flat.has('remaining')) exhausted(number(flat.get('remaining')), number(flat.get('reset')));
  const remaining = headers.get('ratelimit-remaining');
  if (remaining !== null) exhausted(count(remaining), count(headers.get('ratelimit-reset')));
  return pause;
}

module.exports = { parseRetryAfter, ageOf, parseRateLimit };
