'use strict';
// A policy's configuration, read from JSON text or a plain object, with the
// errors Python's reader gives (bindings-python/src/policy_config.rs): the
// same code, naming the same place (`limits[0].burst`).

const { invalidValue, isText, ownCopy } = require('./values.cjs');

/**
 * The deepest an object given as a policy's configuration nests (it needs
 * five: limits[0].by[0]): serde_json's, whose text one deeper is not JSON
 * (see serdeReading), so that an object is read as Python reads the
 * mapping it dumps to JSON text. Refused sooner (at 65), one holding a lone
 * surrogate deeper down was not JSON in JS and `invalid_value` in Python.
 */
const MAX_DEPTH = 127;

/**
 * A JSON.stringify replacer for a policy's configuration that refuses what
 * JSON cannot carry, with the `invalid_config` error the reader gives,
 * naming the place (`limits[0].burst`). JSON would write NaN and the
 * infinities as null, read as "not given", and drop a function or a
 * Symbol, so that the field took its default: a limit other than asked.
 * A BigInt that is a safe integer goes as that number; a larger one as a
 * string, which the reader refuses as it refuses any string for a number.
 */
function jsonValues() {
  const places = new WeakMap();
  // The object holding each object on the way down: its ancestors, for a cycle.
  const parents = new WeakMap();
  return function jsonValue(key, raw) {
    const value = unboxed(raw);
    const holder = places.get(this) ?? '';
    const place = Array.isArray(this) ? `${holder}[${key}]` : holder === '' ? key : `${holder}.${key}`;
    if (value !== null && typeof value === 'object') {
      if (Array.isArray(value)) holes(value, place);
      // JSON.stringify's own errors for a cycle, and for nesting deeper than
      // the engine's stack (V8's "Maximum call stack size exceeded", at
      // about 3000), have no code, and name no place.
      let depth = 0;
      for (let up = this; up !== undefined; up = parents.get(up), depth++) if (up === value) notJson(place, 'a circular reference');
      if (depth > MAX_DEPTH) notJson(place, `data nested more than ${MAX_DEPTH} deep`);
      places.set(value, place);
      parents.set(value, this);
    } else if (typeof value === 'number' && !Number.isFinite(value)) notJson(place, String(value));
    else if (typeof value === 'function' || typeof value === 'symbol') notJson(place, `a ${typeof value}`);
    else if (typeof value === 'bigint') {
      return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : `${value}n`;
    }
    return value;
  };
}

/**
 * Refuses the array `value` (at `place`) if it has a hole, naming the
 * first: JSON would write null for it, which no field takes, once it had
 * written all the rest (an array of length 2^32 - 1 holding nothing took
 * minutes, or ended in V8's uncoded "Invalid string length"). Counted by
 * its keys, which a sparse array lists without its holes.
 */
function holes(value, place) {
  const present = Object.keys(value).length;
  if (present >= value.length) return;
  let at = 0;
  while (at < present && at in value) at++;
  notJson(`${place}[${at}]`, 'a hole');
}

/**
 * A boxed number or BigInt's value, as JSON writes it (by its internal
 * slot, so from any realm: `instanceof Number` misses a `vm` context's);
 * anything else as it is.
 */
function unboxed(raw) {
  if (raw === null || typeof raw !== 'object') return raw;
  for (const valueOf of UNBOXERS) {
    try {
      return valueOf.call(raw);
    } catch {
      // Not that kind of box.
    }
  }
  return raw;
}
const UNBOXERS = [Number.prototype.valueOf, BigInt.prototype.valueOf];

function notJson(place, found) {
  throw Object.assign(new TypeError(`policy configuration: ${place || 'config'}: expected JSON data, found ${found}`), { code: 'invalid_config' });
}

/**
 * A policy's configuration as the backend reads it: plain data, as
 * `JSON.parse` makes it (src/policy_config.rs), each object without a
 * prototype, so that only its own fields are read. JSON text is parsed
 * here, by the engine's own parser; an object goes through JSON and back
 * (see `jsonValues`), so that only its own enumerable fields count, and
 * getters and `toJSON` as in JSON text. Undefined for an object whose
 * toJSON answers undefined.
 *
 * `{ data, refused }`: `refused` is what serde's reading (Rust's, Python's
 * `Policy(text)`) refuses in that text and `JSON.parse` takes, as its
 * error (see `serdeReading`), for the caller to throw unless the backend
 * finds the data of the wrong shape first, as serde says that first in
 * Python; a count written past 2^53 - 1 is in `data` as the BigInt of
 * its digits. A string with a lone surrogate is refused here.
 */
function configRead(config) {
  const text = typeof config === 'string' ? config : JSON.stringify(config, jsonValues());
  if (text === undefined) return undefined;
  let data;
  try {
    data = JSON.parse(text, ownFields);
  } catch (error) {
    throw Object.assign(new TypeError(`policy configuration: config is not JSON (${error.message})`), { code: 'invalid_config' });
  }
  const { refused, exact } = serdeReading(text);
  for (const [i, field, digits] of exact) data.limits[i][field] = digits;
  return { data, refused };
}

/** The data of `configRead`: what lib/redis.cjs reads of a RedisPolicy's limits, once `Policy` took them. */
function configData(config) {
  return configRead(config)?.data;
}

/**
 * What serde_json's reading of a policy's configuration (the core's
 * `PolicyConfig`, in Rust and in Python's `Policy(text)`) refuses in `text`,
 * JSON that `JSON.parse` took, so that one text is read alike in every
 * binding; not by serde_json itself, whose parser and readers were a
 * quarter of the WebAssembly download (bindings-wasm/README.md).
 *
 * - A number out of f64's range, or containers nested 128 deep, which
 *   serde_json does not read as JSON: thrown, `invalid_config` "config
 *   is not JSON", as a text JSON.parse refuses, before anything else.
 * - A string (a key or a value) with a lone surrogate, which serde_json
 *   refuses as it reads the text: thrown next (Python says it only of text
 *   that is JSON otherwise), `invalid_value` naming the field of the limit
 *   the first is in (`rate`), else `config`, as the other strings of a
 *   policy are refused.
 * - A count (`burst`, `max_keys`) written as a float (`2.0`, `2e0`, `-0`,
 *   which serde_json reads as -0.0), which serde refuses where it expects
 *   a u64; and a field of the configuration or of a limit given twice
 *   (`JSON.parse` keeps the last). `refused`: the first in the text, as a
 *   TypeError `invalid_config` naming its place.
 * - `exact`: each count of the last `limits` written in digits past 2^53 -
 *   1 and up to 2^64 - 1, `[limit, field, BigInt]`: JSON.parse rounds it
 *   to a number (2^64 - 1 to 2^64, then refused as out of range).
 *
 * One pass over the tokens, which are JSON's (the text parsed), keeping
 * the containers open (`container`): never recursive, however deep.
 */
function serdeReading(text) {
  const open = [];
  let refused;
  // What serde_json does not read in JSON text: its words.
  let unread;
  // The field of the first string with a lone surrogate.
  let lone;
  // The counts of the last `limits` read, each as last written: its digits, or undefined.
  let counts = new Map();
  let key = false;
  for (let i = 0; i < text.length; ) {
    const c = text[i];
    const at = open[open.length - 1];
    if (c === '"') {
      // A string, to its closing quote (not a regular expression: V8's
      // overflowed its stack on a few million characters).
      let end = i + 1;
      let escaped = false;
      while (text[end] !== '"') {
        if (text[end] === '\\') {
          escaped = true;
          end++;
        }
        end++;
      }
      const value = escaped ? JSON.parse(text.slice(i, end + 1)) : text.slice(i + 1, end);
      i = end + 1;
      if (lone === undefined && !isText(value)) {
        // The field it is in: a limit's key is no field's value.
        lone = at?.role === WITHIN ? at.field : at?.role === LIMIT && !key ? at.key : 'config';
      }
      if (!key) continue;
      // Any field given twice: one no limit has is refused first, as unknown, by the backend.
      if (at.keys !== undefined) {
        if (at.keys.has(value)) refused ??= configError(`${at.place}: duplicate field \`${value}\``);
        at.keys.add(value);
      }
      at.key = value;
      // A field given again is its last value (JSON.parse's), whatever it
      // is: the digits of an earlier one, or of an earlier `limits`, are
      // not put into it (a `limits` last not an array had no limit to hold
      // them; a count last `"x"` was read as those digits).
      if (at.role === TOP && value === 'limits') counts = new Map();
      else if (at.role === LIMIT) counts.delete(`${at.index} ${value}`);
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      let end = i + 1;
      while (end < text.length && NUMBER_PART.includes(text[end])) end++;
      const number = text.slice(i, end);
      i = end;
      // serde_json's "number out of range": a float past f64's. Python's
      // serde_json rounds to the nearest float (float_roundtrip), as JSON.parse.
      if (!Number.isFinite(Number(number))) unread ??= 'number out of range';
      if (at?.role !== LIMIT || (at.key !== 'burst' && at.key !== 'max_keys')) continue;
      const float = /[.eE]/.test(number) || number === '-0';
      if (float) refused ??= configError(`${at.place}.${at.key}: expected a whole number from 0 to 2^64 - 1, found the float ${number}`);
      counts.set(`${at.index} ${at.key}`, float ? undefined : [at.index, at.key, number]);
    } else {
      i++;
      if (c === '{' || c === '[') {
        open.push(container(at, c === '['));
        if (open.length >= SERDE_DEPTH) unread ??= 'recursion limit exceeded';
        key = c === '{';
      } else if (c === '}' || c === ']') {
        open.pop();
      } else if (c === ':') {
        key = false;
      } else if (c === ',') {
        if (at.array) at.index++;
        else key = true;
      }
      // Else whitespace, or a letter of `true`, `false` or `null`.
    }
  }
  if (unread !== undefined) throw configError(`config is not JSON (${unread})`);
  if (lone !== undefined) invalidValue(`\`${lone}\` must be valid Unicode text (no lone surrogates)`);
  const exact = [];
  for (const count of counts.values()) {
    const digits = count === undefined || count[2].startsWith('-') ? undefined : BigInt(count[2]);
    if (digits > MAX_SAFE && digits <= U64_MAX) exact.push([count[0], count[1], digits]);
  }
  return { refused, exact };
}

// What follows a number's first character in JSON.
const NUMBER_PART = '0123456789.eE+-';
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const U64_MAX = 2n ** 64n - 1n;
// The containers serde_json reads nested: one more is its "recursion limit exceeded".
const SERDE_DEPTH = 128;
// What a container of a configuration is: the configuration, its `limits`,
// one of those, a value inside a limit's field, or anything else.
const [TOP, LIMITS, LIMIT, WITHIN, OTHER] = [0, 1, 2, 3, 4];

/**
 * A container opened inside `parent` (none: the text's), an array or an
 * object: what it is, its place in messages, the keys of an object whose
 * repeats serde refuses, the index of an array's current element.
 */
function container(parent, array) {
  const role = parent === undefined ? (array ? OTHER : TOP)
    : parent.role === TOP && parent.key === 'limits' && !parent.array ? (array ? LIMITS : OTHER)
    : parent.role === LIMITS ? (array ? OTHER : LIMIT)
    : parent.role === LIMIT || parent.role === WITHIN ? WITHIN
    : OTHER;
  const inner = { array, role, index: 0, key: undefined };
  if (role === TOP) Object.assign(inner, { place: 'config', keys: new Set() });
  if (role === LIMIT) Object.assign(inner, { place: `limits[${parent.index}]`, index: parent.index, keys: new Set() });
  if (role === WITHIN) inner.field = parent.role === LIMIT ? parent.key : parent.field;
  return inner;
}

function configError(message) {
  return Object.assign(new TypeError(`policy configuration: ${message}`), { code: 'invalid_config' });
}

function ownFields(_key, value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? ownCopy(value) : value;
}

module.exports = { configRead, configData };
