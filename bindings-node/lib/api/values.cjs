'use strict';
// Plain helpers of the JS layer (lib/api.cjs) on values: its errors, keys and
// requests written as bytes for the backend, option checks, how objects print
// in Node, and arrays. They hold no state and know no backend; lib/redis.cjs
// uses some too.

/** Throws a TypeError (code `invalid_type`) with `message`, which names the argument. */
function invalidType(message) {
  throw Object.assign(new TypeError(message), { code: 'invalid_type' });
}

/** Throws a RangeError (code `invalid_value`) with `message`, which names the argument. */
function invalidValue(message) {
  throw Object.assign(new RangeError(message), { code: 'invalid_value' });
}

/**
 * Whether `text` is valid Unicode text: one with a lone surrogate ('\uD800')
 * has no UTF-8 form, and Node-API and wasm-bindgen (as TextEncoder) write
 * U+FFFD in its place, so that '\uD800' and '\uDC00' were one key. (A
 * runtime without isWellFormed, an older browser, asks a regular expression:
 * in `u` mode, a pair is one code point, and only a lone surrogate is Cs.)
 */
const isText = typeof String.prototype.isWellFormed === 'function' ? (text) => text.isWellFormed() : (text) => !LONE_SURROGATE.test(text);
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * `text`, refused with a RangeError (code `invalid_value`) naming `name`
 * when it is not valid Unicode text (see isText), as Python refuses it.
 */
function textOf(text, name) {
  if (!isText(text)) invalidValue(`\`${name}\` must be valid Unicode text (no lone surrogates)`);
  return text;
}

/**
 * A policy's request (`fields`: names and values alternating, as strings,
 * a value maybe a ByteKey) as the backend takes it outside the scratch:
 * refused when a string is not valid Unicode text (see textOf), a field's
 * name naming `request`, a value its field (`request.user`); `fields`
 * itself, or a copy with each ByteKey's bytes in its place. For the paths
 * that pass strings, not ASCII bytes, which cannot hold one.
 */
function requestText(fields) {
  let args = fields;
  for (let i = 0; i < fields.length; i += 2) {
    textOf(fields[i], 'request');
    const value = fields[i + 1];
    if (typeof value === 'string') {
      textOf(value, `request.${fields[i]}`);
    } else {
      if (args === fields) args = fields.slice();
      args[i + 1] = value.bytes;
    }
  }
  return args;
}

// %TypedArray%.prototype's own getters, as found at load: each reads the
// internal slots of any realm's typed array (the tag is undefined for
// anything else, never a throw).
const TypedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype);
const typedArrayTag = Object.getOwnPropertyDescriptor(TypedArrayPrototype, Symbol.toStringTag).get;
const typedArrayByteLength = Object.getOwnPropertyDescriptor(TypedArrayPrototype, 'byteLength').get;

/**
 * String.prototype.charCodeAt as found at load, called without a lookup (a
 * bound `call` reads no property JS could replace): asciiInto and
 * fieldsInto write a key or a request into memory shared with the backend,
 * and run no code of JS's meanwhile, nor does what reads an operation's
 * answer from there (see `out` in lib/api/shared.cjs). A charCodeAt, or a
 * getter of %TypedArray%.prototype.length, replaced with one that made an
 * operation of its own there wrote over the key, or the answer. They read
 * an element where they would read a typed array's `length`: an element
 * past its end (or of a detached one) is undefined, and no element read of
 * a typed array looks at its prototype.
 */
const charCodeAt = Function.prototype.call.bind(String.prototype.charCodeAt);

/**
 * Whether `value` is a Uint8Array (a Node Buffer is one), by its internal
 * slots, not `instanceof` and its own properties: one of another realm (a
 * `vm` context, Jest's Buffer) is one, and a Proxy of one or an object
 * inheriting from Uint8Array.prototype is none (their getters threw an
 * uncoded TypeError).
 */
function isUint8Array(value) {
  return typedArrayTag.call(value) === 'Uint8Array';
}

/**
 * Object.prototype.toString as found at load, called without a lookup: a
 * built-in's tag (`[object Map]`), which a Map of another realm (a `vm`
 * context's, an iframe's) has too, where `instanceof Map` is false. Read
 * in browsers and workers alike (node:util's type checks are Node's).
 */
const objectTag = Function.prototype.call.bind(Object.prototype.toString);
/** The tags of the collections and the binary data that isRequest refuses (a typed array or a DataView: ArrayBuffer.isView). */
const NOT_REQUESTS = new Set(['[object Map]', '[object Set]', '[object WeakMap]', '[object WeakSet]', '[object ArrayBuffer]', '[object SharedArrayBuffer]']);

/**
 * Whether `request`, given (not undefined or null), is an object whose own
 * enumerable keys are its fields, as a Python request is a mapping: not an
 * array (Python refuses a list), nor a collection (a Map, Set, WeakMap or
 * WeakSet) whose entries `Object.keys` does not see (their fields were read
 * as none: a policy of global limits admitted them, one keyed by a field
 * said it was missing), nor binary data (Python refuses bytes): an
 * ArrayBuffer's bytes are no keys either, and a Uint8Array's were read as
 * the fields "0", "1"... Of any realm: Array.isArray and ArrayBuffer.isView
 * read internal slots, and a collection or a buffer is told by its tag.
 */
function isRequest(request) {
  return typeof request === 'object' && !Array.isArray(request) && !ArrayBuffer.isView(request) && !NOT_REQUESTS.has(objectTag(request));
}

/**
 * A copy of the Uint8Array `bytes` (see isUint8Array), made from its
 * internal slots: wasm-bindgen's glue sizes its copy by the `length`
 * property (an own one may lie) and then writes every byte, and a
 * SharedArrayBuffer another thread writes meanwhile is read as one
 * snapshot. An empty one (a detached one is empty too, and copying it
 * would throw) is a new empty one.
 */
function bytesCopy(bytes) {
  return typedArrayByteLength.call(bytes) === 0 ? new Uint8Array(0) : new Uint8Array(bytes);
}

/** Reads UTF-8 as a key's string: a leading U+FEFF is kept, bytes that are not UTF-8 throw. */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * A key given as bytes that are not UTF-8, so that no string is the same
 * key: a copy of them, which the backend takes outside the scratch (see
 * keyArg). Its `length` is Infinity so that asciiInto and fieldsInto, which
 * write short ASCII strings into the scratch, pass it over by the test of
 * length they make of every string: a string's path makes no test of type.
 */
class ByteKey {
  constructor(bytes) {
    this.bytes = bytes;
    this.length = Infinity;
  }

  /**
   * A string no other key has, for what compares keys (the waiting
   * acquires of one key queue together): its bytes in hex behind a lone
   * surrogate, which no string key holds (see textOf).
   */
  get id() {
    return `\uDC00${this}`;
  }

  /** Its bytes in hex, `<ff 00 61>`, for messages. */
  toString() {
    return `<${Array.from(this.bytes, (b) => b.toString(16).padStart(2, '0')).join(' ')}>`;
  }
}

/**
 * The key `bytes` (a Uint8Array, see isUint8Array), as Python takes
 * `bytes`: the string whose UTF-8 they are (the same key; '' for none),
 * or a ByteKey when they are not UTF-8. Read from a copy (see bytesCopy).
 */
function bytesKey(bytes) {
  const copy = bytesCopy(bytes);
  try {
    return UTF8.decode(copy);
  } catch {
    return new ByteKey(copy);
  }
}

/**
 * A key (a string, or a ByteKey: see keyOf) as the backend takes it
 * outside the scratch: a string, refused when it is not valid Unicode
 * text (see textOf), or a ByteKey's bytes.
 */
function keyArg(key, name) {
  return typeof key === 'string' ? textOf(key, name) : key.bytes;
}

/**
 * A number as a key: its decimal string, all digits for a whole number
 * (1e21 is '1000000000000000000000', as Python spells the int, not String's
 * '1e+21'), so that the bindings and the Redis clients (lib/redis.cjs) agree.
 */
function numberKey(n, name) {
  if (!Number.isInteger(n)) {
    // As Python refuses a float: 1.5 or NaN names no whole number.
    invalidValue(`\`${name}\` must be a whole number or a string, not ${n}`);
  }
  return Number.isSafeInteger(n) ? String(n) : BigInt(n).toString();
}

/**
 * Writes `key` into `bytes` when it is ASCII and fits, and returns its
 * length; else -1 (for a ByteKey too). How the hot keyed operations pass a
 * short key through memory shared with the native half: a string argument
 * costs more to read.
 * Runs no code of JS's (see charCodeAt), so that no other operation writes
 * `bytes` before the caller's reads them.
 */
function asciiInto(bytes, key) {
  const n = key.length;
  // Longer than `bytes` (detached, of wasm memory that grew): its last byte is not there.
  if (n > 0 && bytes[n - 1] === undefined) return -1;
  for (let i = 0; i < n; i++) {
    const c = charCodeAt(key, i);
    if (c > 0x7f) return -1;
    bytes[i] = c;
  }
  return n;
}

/**
 * Writes a policy's request (`fields`: names and values alternating, as
 * strings) into `bytes`, each string as its length in one byte, then its
 * characters; returns the bytes written, or -1 when a string is not ASCII
 * or longer than 255 characters, a value is a ByteKey, or the whole does
 * not fit (the request then goes as strings). Reading strings through the
 * engine's API took most of a policy's call (src/shared/request.rs
 * with_request_bytes reads these).
 */
function fieldsInto(bytes, fields) {
  // As asciiInto, no code of JS's runs: not an iterator of `fields` either
  // (the JS layer's own array, without holes).
  let at = 0;
  for (let f = 0; f < fields.length; f++) {
    const text = fields[f];
    const n = text.length;
    // Its length and its characters go into bytes at to at + n.
    if (n > 255 || bytes[at + n] === undefined) return -1;
    bytes[at++] = n;
    for (let i = 0; i < n; i++) {
      const c = charCodeAt(text, i);
      if (c > 0x7f) return -1;
      bytes[at++] = c;
    }
  }
  return at;
}

/** The deepest a policy's configuration nests (it needs five: limits[0].by[0]). */
const MAX_DEPTH = 64;

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
 * - A string (a key or a value) with a lone surrogate, which serde_json
 *   refuses as it reads the text: thrown at once, `invalid_value` naming
 *   the field of the limit it is in (`rate`), else `config`, as the other
 *   strings of a policy are refused.
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
      if (!isText(value)) {
        // The field it is in: a limit's key is no field's value.
        const field = at?.role === WITHIN ? at.field : at?.role === LIMIT && !key ? at.key : 'config';
        invalidValue(`\`${field}\` must be valid Unicode text (no lone surrogates)`);
      }
      if (!key) continue;
      // Any field given twice: one no limit has is refused first, as unknown, by the backend.
      if (at.keys !== undefined) {
        if (at.keys.has(value)) refused ??= configError(`${at.place}: duplicate field \`${value}\``);
        at.keys.add(value);
      }
      at.key = value;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      let end = i + 1;
      while (end < text.length && NUMBER_PART.includes(text[end])) end++;
      const number = text.slice(i, end);
      i = end;
      if (at?.role !== LIMIT || (at.key !== 'burst' && at.key !== 'max_keys')) continue;
      const float = /[.eE]/.test(number) || number === '-0';
      if (float) refused ??= configError(`${at.place}.${at.key}: expected a whole number from 0 to 2^64 - 1, found the float ${number}`);
      counts.set(`${at.index} ${at.key}`, float ? undefined : [at.index, at.key, number]);
    } else {
      i++;
      if (c === '{' || c === '[') {
        const inner = container(at, c === '[');
        if (inner.role === LIMITS) counts = new Map();
        open.push(inner);
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

/**
 * Throws a TypeError (code `invalid_type`) naming the first key of `options`
 * not in `known`, and listing those `what` takes: a misspelt option would
 * otherwise be ignored (`intialTokens`: a bucket starting full).
 */
function onlyKnown(options, known, what) {
  for (const option of Object.keys(options)) {
    if (!known.includes(option)) invalidType(`\`${option}\` is not an option of ${what}, which takes ${known.join(', ')}`);
  }
}

/**
 * How Node's console.log and util.inspect show an object of `kind`: its
 * class and `shown`, a plain object (as `Map(2) { ... }` shows a Map's
 * entries). Browsers ignore the symbol; their consoles list the getters.
 */
function inspected(kind, shown, depth, options, inspect) {
  if (typeof inspect !== 'function') return `[${kind}]`;
  if (depth < 0) return options.stylize(`[${kind}]`, 'special');
  // `shown` stands for the object's own properties: the depth left is its.
  return `${kind} ${inspect(shown, { ...options, depth })}`;
}
const inspectSymbol = Symbol.for('nodejs.util.inspect.custom');

/**
 * How Node's console.log and util.inspect show `self`, a `this` that the
 * custom inspection of a class `kind` refuses (its getters would throw): a
 * Proxy of one of its objects (a reactive wrapper's), which util.inspect
 * asks the target's inspection to show, or an object inheriting from one.
 * Showing a value must never throw. A Proxy is shown as with util.inspect's
 * `showProxy`, `Proxy [ <target>, <handler> ]` (read without running a
 * trap), its target by the class's own inspection; anything else, asked
 * again for it (the set of those under way), as Node shows an object
 * without one.
 */
function inspectedOther(self, kind, depth, options, inspect) {
  if (typeof inspect !== 'function' || self === null || typeof self !== 'object') return `[${kind}]`;
  // Returned as itself, util.inspect shows it by its own properties.
  if (othersShown.has(self)) return self;
  othersShown.add(self);
  try {
    return inspect(self, { ...options, depth, showProxy: true });
  } finally {
    othersShown.delete(self);
  }
}
const othersShown = new WeakSet();
/**
 * A limiter's method counting bookings of a slot to come, reconfigures and
 * restores, by anyone (a symbol of the global registry, which
 * lib/paced-fetch.cjs, a module of its own, reads too).
 */
const BOOKINGS = Symbol.for('ratekeeper.bookings');
/** A limiter's method answering whether the bookings behind one given back move up (read by pacedFetch too). */
const MOVES_UP = Symbol.for('ratekeeper.movesUp');
/** A limiter's method reading its own clock: pacedFetch's default `clock` (read by pacedFetch too). */
const NOW = Symbol.for('ratekeeper.now');
/**
 * The API object's brand checks, `{ isLimiter, isKeyed, isPolicy }`,
 * `takeStores` (lib/api/server.cjs) and `configurationOf`
 * (lib/api/keyed.cjs), for lib/redis.cjs: a symbol of this
 * module's own, under a property that is not enumerable, so that they are
 * not part of the public API.
 */
const BRANDS = Symbol('ratekeeper.brands');

/**
 * A plain array of the elements of the array `value` (of its first `most`
 * only, the rest left holes), each read once; anything else as it is. What
 * the backend reads is then what was checked here (an element's getter
 * may answer otherwise the second time), and an array that is a Proxy,
 * an array to Array.isArray and to wasm-bindgen, is one to Node-API too,
 * which reads no Proxy as an array.
 */
function plainArray(value, most = Infinity) {
  if (!Array.isArray(value)) return value;
  const n = value.length;
  const copy = new Array(n);
  for (let i = 0; i < Math.min(n, most); i++) copy[i] = value[i];
  return copy;
}

/**
 * `plainArray(value)` when `value` is an array whose every element has
 * type `type` (a hole has none), else undefined: read up to the first
 * that has not, so that an array of length 2^32 - 1 with a hole at the
 * start is refused at once, where copying it first took minutes.
 */
function arrayOf(value, type) {
  if (!Array.isArray(value)) return undefined;
  const n = value.length;
  const copy = [];
  for (let i = 0; i < n; i++) {
    const element = value[i];
    if (typeof element !== type) return undefined;
    copy.push(element);
  }
  return copy;
}

/** Whether `value` is an AbortSignal (duck-typed, as `fetch` takes any realm's). */
function isSignal(value) {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof value.aborted === 'boolean' &&
    typeof value.addEventListener === 'function' &&
    typeof value.removeEventListener === 'function'
  );
}

// The listeners of each signal a wait listens to, behind one listener of
// the signal's own: Node warns (MaxListenersExceededWarning) once more than
// ten listen to one signal, and one signal (a server's shutdown signal, a
// request's) passed to many waits is the common case, not a leak.
const listening = new WeakMap();

/**
 * Calls `listener` once when `signal` aborts, as `addEventListener('abort',
 * listener, { once: true })` does (a listener added twice is called once,
 * one removed while the abort is dispatched is not called), through one
 * listener per signal. Throws what the signal's addEventListener throws (a
 * polyfill's), `listener` then not listening.
 */
function listen(signal, listener) {
  let listeners = listening.get(signal);
  if (listeners === undefined) {
    const own = new Set();
    const dispatch = () => {
      const called = [...own];
      let failed = false;
      let failure;
      for (const each of called) {
        if (!own.has(each)) continue;
        own.delete(each);
        try {
          each();
        } catch (error) {
          // The others are still called, as the signal calls its listeners.
          if (!failed) [failed, failure] = [true, error];
        }
      }
      if (listening.get(signal) === listeners) listening.delete(signal);
      if (failed) throw failure;
    };
    signal.addEventListener('abort', dispatch, { once: true });
    listeners = { own, dispatch };
    listening.set(signal, listeners);
  }
  listeners.own.add(listener);
}

/**
 * Stops `listener` listening to `signal`'s abort, never throwing: a signal
 * whose removeEventListener throws (a polyfill's) passes isSignal, and its
 * callers run in timers, where a throw would end a Node process and leave
 * the waits behind unsettled. Such a listener stays, and finds its wait
 * settled.
 */
function unlisten(signal, listener) {
  const listeners = listening.get(signal);
  if (listeners === undefined || !listeners.own.delete(listener) || listeners.own.size > 0) return;
  listening.delete(signal);
  try {
    signal.removeEventListener('abort', listeners.dispatch);
  } catch {
    // kept listening: see above
  }
}

/**
 * Whether `signal` is aborted now, never throwing: a waiter's is read
 * while another one is withdrawn, in an abort listener, where a throw
 * would leave the waiters behind given back and not yet booked again
 * (see unlisten). A getter that throws says not aborted.
 */
function abortedNow(signal) {
  try {
    return signal.aborted === true;
  } catch {
    return false;
  }
}

/** `signal.reason`, or what reading it threw: what an aborted wait rejects with. */
function reasonOf(signal) {
  try {
    return signal.reason;
  } catch (error) {
    return error;
  }
}

/**
 * The own enumerable properties of `value`, each read once, in an object
 * without a prototype: one inherited (a polluted `Object.prototype.maxKeys`)
 * is none.
 */
function ownCopy(value) {
  return Object.assign(Object.create(null), value);
}

/**
 * Whether `request` gives the field `field`: an own enumerable property, as
 * `Object.keys` reads a request's fields (and JSON.stringify would): a
 * non-enumerable one is none, in process and on Redis alike.
 */
function hasField(request, field) {
  return Object.prototype.propertyIsEnumerable.call(request, field);
}

module.exports = {
  textOf,
  requestText,
  hasField,
  ownCopy,
  configRead,
  configData,
  invalidType,
  invalidValue,
  numberKey,
  isUint8Array,
  isRequest,
  bytesCopy,
  bytesKey,
  keyArg,
  asciiInto,
  fieldsInto,
  onlyKnown,
  inspected,
  inspectedOther,
  inspectSymbol,
  BOOKINGS,
  MOVES_UP,
  NOW,
  BRANDS,
  plainArray,
  arrayOf,
  isSignal,
  listen,
  unlisten,
  abortedNow,
  reasonOf,
};
