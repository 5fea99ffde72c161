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

/**
 * `text` cut at each `separator` outside a quoted string (where `\` escapes
 * the next character), as Structured Fields (RFC 9651) read a list and an
 * item's parameters: a `,` or `;` in a policy's name or in an unknown
 * parameter's value (`note="x;r=0"`) cuts nothing. A string left open runs
 * to the end, and that member reads as no item.
 */
function splitOutsideStrings(text, separator) {
  const parts = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    if (quoted && text[i] === '\\') i++;
    else if (text[i] === '"') quoted = !quoted;
    else if (text[i] === separator && !quoted) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

/** Thrown by parsesAs where the text breaks structured-field syntax (caught there only). */
const BROKEN = Symbol('broken');
// The characters of RFC 9651's grammar (section 3): a key's, a token's, a
// byte sequence's (base64), a digit.
const KEY_START = /[a-z*]/;
const KEY_CHAR = /[a-z0-9_\-.*]/;
const TOKEN_START = /[A-Za-z*]/;
const TOKEN_CHAR = /[!#$%&'*+\-.^_`|~0-9A-Za-z:/]/;
const BASE64_CHAR = /[A-Za-z0-9+/=]/;
const DIGIT = /[0-9]/;
/** Reads a Display String's bytes, refusing what is not UTF-8 (section 4.2.10). */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * `value` (a field's value, or null when absent) when it parses as a
 * Structured Field List, or as a Dictionary (the older draft's `RateLimit:
 * limit=10, remaining=0, reset=30`), by RFC 9651's rules (section 4.2);
 * else null. A field that fails to parse is ignored as a whole (section
 * 4.2: "the entire field value MUST be ignored"): read member by member,
 * `"a";r=0;t=5, ;;` paused as if it were well-formed.
 */
function structured(value) {
  return value !== null && (parsesAs(value, false) || parsesAs(value, true)) ? value : null;
}

/**
 * Whether `text` parses as a Structured Field List (or, `dictionary`, a
 * Dictionary): checked only, the values read as text by parseRateLimit.
 * Every bare type of RFC 9651 parses, its Date and Display String too.
 */
function parsesAs(text, dictionary) {
  let at = 0;
  const broken = () => {
    throw BROKEN;
  };
  const is = (chars) => at < text.length && chars.test(text[at]);
  const skip = (chars) => {
    while (at < text.length && chars.includes(text[at])) at++;
  };
  const key = () => {
    if (!is(KEY_START)) broken();
    while (is(KEY_CHAR)) at++;
  };
  // An Integer or Decimal (section 4.2.4): at most 15 digits, or 12 and 3 decimals.
  const number = (integerOnly) => {
    if (text[at] === '-') at++;
    if (!is(DIGIT)) broken();
    const start = at;
    let dot = -1;
    for (;;) {
      if (is(DIGIT)) at++;
      else if (dot < 0 && text[at] === '.') {
        if (at - start > 12) broken();
        dot = at++;
      } else break;
      if (at - start > (dot < 0 ? 15 : 16)) broken();
    }
    if (dot >= 0 && (integerOnly || at - dot - 1 < 1 || at - dot - 1 > 3)) broken();
  };
  // A String (section 4.2.5): printable ASCII, `\` escaping only `"` and `\`.
  const string = () => {
    at++;
    for (;;) {
      if (at >= text.length) broken();
      const c = text.charCodeAt(at++);
      if (c === 0x22) return;
      if (c === 0x5c) {
        if (text[at] !== '"' && text[at] !== '\\') broken();
        at++;
      } else if (c < 0x20 || c > 0x7e) broken();
    }
  };
  // A Display String (section 4.2.10): `%"`, printable ASCII with
  // lowercase `%xx` escapes, whose bytes are UTF-8.
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
      UTF8.decode(new Uint8Array(bytes));
    } catch {
      broken();
    }
  };
  const bareItem = () => {
    const c = text[at];
    if (c === '-' || is(DIGIT)) number(false);
    else if (c === '"') string();
    else if (is(TOKEN_START)) {
      at++;
      while (is(TOKEN_CHAR)) at++;
    } else if (c === ':') {
      at++;
      while (is(BASE64_CHAR)) at++;
      if (text[at++] !== ':') broken();
    } else if (c === '?') {
      at++;
      if (text[at] !== '0' && text[at] !== '1') broken();
      at++;
    } else if (c === '@') {
      at++;
      number(true);
    } else if (c === '%') displayString();
    else broken();
  };
  const parameters = () => {
    while (text[at] === ';') {
      at++;
      skip(' ');
      key();
      if (text[at] === '=') {
        at++;
        bareItem();
      }
    }
  };
  // An Item or an Inner List (section 4.2.1.1), with its parameters.
  const member = () => {
    if (text[at] === '(') {
      at++;
      for (;;) {
        skip(' ');
        if (text[at] === ')') break;
        bareItem();
        parameters();
        if (text[at] !== ' ' && text[at] !== ')') broken();
      }
      at++;
    } else bareItem();
    parameters();
  };
  try {
    skip(' ');
    while (at < text.length) {
      if (dictionary) {
        // A key alone is `true`, with parameters of its own.
        key();
        if (text[at] === '=') {
          at++;
          member();
        } else parameters();
      } else member();
      skip(' \t');
      if (at >= text.length) break;
      if (text[at++] !== ',') broken();
      skip(' \t');
      // A trailing comma.
      if (at >= text.length) broken();
    }
    return true;
  } catch (error) {
    if (error === BROKEN) return false;
    throw error;
  }
}

/**
 * The quota unit a policy's `qu` names: a String (section 3.1.2), its
 * `requests` also spelt `request` (as the draft's registry lists it); null
 * for anything else (a token, a Boolean), which makes the policy malformed.
 */
function quotaUnit(text) {
  const match = text === null ? null : /^\s*"((?:[^"\\]|\\.)*)"\s*$/.exec(text);
  if (match === null) return null;
  return match[1] === 'request' ? 'requests' : match[1];
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
  // A number as the headers write one; NaN (ignored) for anything else,
  // where Number() would read a blank value as 0, "nothing remaining".
  const count = (text) => (text !== null && /^\s*\d+(\.\d+)?\s*$/.test(text) ? Number(text) : NaN);
  // The newer draft's `r`, `t`, `q` and `w`: each a non-negative Integer
  // (RFC 9651: at most 15 digits). A Decimal (`t=1.5`) is another type,
  // so the item (or policy) is malformed, as with `t=-1`: ignored, not rounded.
  const integer = (text) => (text !== null && /^\s*\d{1,15}\s*$/.test(text) ? Number(text) : NaN);
  let pause = null;
  const exhausted = (remaining, reset) => {
    if (remaining === 0 && Number.isFinite(reset) && reset >= 0) pause = Math.max(pause ?? 0, reset * 1000);
  };
  // Each member of a structured list: its name (the quoted string or bare
  // token before the first `;`; for the older draft, a `key=value`) and its
  // parameters, by key.
  const members = (value) =>
    splitOutsideStrings(value, ',').map((member) => {
      const [name, ...parts] = splitOutsideStrings(member, ';');
      const params = {};
      for (const part of parts) {
        // Its text, read as a number where used (the drafts differ). A
        // parameter without a value is a Boolean (RFC 9651): no number, but there.
        const at = part.indexOf('=');
        if (at >= 0) params[part.slice(0, at).trim().toLowerCase()] = part.slice(at + 1);
        else params[part.trim().toLowerCase()] = null;
      }
      return { name: name.trim(), params };
    });
  // Each name's policies, in the order listed. Names may repeat: helpers in
  // a row (one limiter for every route, then one for a route) each add an
  // item, and both are "default" unless named. The n-th RateLimit item of a
  // name goes with the n-th policy of that name, as a server lists both
  // fields in one order; keyed by name alone, every item went with the last
  // policy, and an exhausted limit of 4 per 2 s paused a unit's share of the
  // other's 10 per 1 s (0.1 s, not 0.5): a 429 every few requests.
  const policies = new Map();
  const policy = structured(headers.get('ratelimit-policy'));
  if (policy !== null) {
    for (const { name, params } of members(policy)) {
      if (policies.has(name)) policies.get(name).push(params);
      else policies.set(name, [params]);
    }
  }
  const value = structured(headers.get('ratelimit'));
  if (value !== null) {
    // The older draft's dictionary (`remaining=0, reset=30`): its members'
    // own values, and their parameters too, since servers cut its members
    // at `;` as well (`limit=100; remaining=0; reset=30`, api.close.com's).
    // An item's parameters only stand for it without `r`
    // (`"default"; remaining=0; reset=30`): the newer draft's `r` and `t`
    // govern theirs (`"a";r=5;remaining=0`).
    const flat = {};
    // How many items of each name came before (see policies).
    const seen = new Map();
    for (const { name, params } of members(value)) {
      const at = name.startsWith('"') ? -1 : name.indexOf('=');
      if (at >= 0) Object.assign(flat, { [name.slice(0, at).trim().toLowerCase()]: name.slice(at + 1) }, params);
      else if (!('r' in params) && 'remaining' in params) exhausted(count(params.remaining), count(params.reset ?? null));
      if (at >= 0) continue;
      const nth = seen.get(name) ?? 0;
      seen.set(name, nth + 1);
      if (!('r' in params)) continue;
      // The same policy's window, from a well-formed item (see above): the
      // n-th of its name, or the last when fewer are listed (one policy for
      // several items of a name).
      const same = policies.get(name) ?? [];
      const matched = same[Math.min(nth, same.length - 1)] ?? {};
      const { q = null, w = null } = matched;
      // What `q` counts (`qu`, section 3.1.2): requests when not said.
      const unit = 'qu' in matched ? quotaUnit(matched.qu) : 'requests';
      const window = integer(q) >= 0 && integer(w) > 0 && unit !== null ? integer(w) : NaN;
      // One unit's share of it; for q = 0, none to share, the window itself.
      // A unit that is no request (a byte) earns no request back in its
      // share: `qu="content-bytes";q=65535;w=10` cut `t=10` to 0.15 ms, and
      // the queue went on into the server's 429s. Then `t` (or the window) alone.
      const share = window > 0 && unit === 'requests' ? window / integer(q) : Infinity;
      exhausted(integer(params.r), Math.min('t' in params ? integer(params.t) : window, share));
    }
    if ('remaining' in flat) exhausted(count(flat.remaining), count(flat.reset ?? null));
  }
  const remaining = headers.get('ratelimit-remaining');
  if (remaining !== null) exhausted(count(remaining), count(headers.get('ratelimit-reset')));
  return pause;
}

module.exports = { parseRetryAfter, ageOf, parseRateLimit };
