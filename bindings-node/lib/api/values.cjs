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
 * SharedArrayBuffer where there is one (a browser page that is not
 * cross-origin isolated has none; ArrayBuffer stands in for it).
 */
const SharedBuffer = typeof SharedArrayBuffer === 'function' ? SharedArrayBuffer : ArrayBuffer;

/**
 * `value`'s tag, or '' where reading it throws. The tag is read through
 * the object (its Symbol.toStringTag): a Proxy whose get trap throws on a
 * key its target lacks (a "strict" object) threw that error from
 * isRequest, no limiter error, where it is a request.
 */
function tagOf(value) {
  try {
    return objectTag(value);
  } catch {
    return '';
  }
}

/**
 * The `valueOf` of each primitive's wrapper by its tag: it throws unless
 * called on such a wrapper (of any realm), by its internal slot.
 */
const BOXED = new Map([
  ['[object String]', String.prototype.valueOf],
  ['[object Number]', Number.prototype.valueOf],
  ['[object Boolean]', Boolean.prototype.valueOf],
  ['[object Symbol]', Symbol.prototype.valueOf],
  ['[object BigInt]', BigInt.prototype.valueOf],
]);

/**
 * Whether `value` has an own `callee`, as every function's `arguments`
 * has (a strict function's cannot even be deleted), never throwing (a
 * Proxy's trap may: then none).
 */
function hasCallee(value) {
  try {
    return Object.prototype.hasOwnProperty.call(value, 'callee');
  } catch {
    return false;
  }
}

/**
 * Whether `value`, whose tag is `tag`, is what the tag says: a primitive
 * boxed (a String object, `Object(1n)`...), or a function's `arguments`
 * (whose own `callee` every one has, never enumerable). One that only
 * says so (its Symbol.toStringTag) is none.
 */
function isBoxedOrArguments(value, tag) {
  // Never throwing: a Proxy's trap may (then none), as in tagOf.
  try {
    if (tag === '[object Arguments]') return Object.prototype.hasOwnProperty.call(value, 'callee') && !Object.prototype.propertyIsEnumerable.call(value, 'callee');
    const valueOf = BOXED.get(tag);
    if (valueOf === undefined) return false;
    valueOf.call(value);
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether `request`, given (not undefined or null), is an object whose own
 * enumerable keys are its fields, as a Python request is a mapping: not an
 * array (Python refuses a list), nor a collection (a Map, Set, WeakMap or
 * WeakSet) whose entries `Object.keys` does not see (their fields were read
 * as none: a policy of global limits admitted them, one keyed by a field
 * said it was missing), nor binary data (Python refuses bytes): an
 * ArrayBuffer's bytes are no keys either, and a Uint8Array's were read as
 * the fields "0", "1"... Nor a primitive boxed (Python refuses a str, and
 * so does this, unboxed: a String object's characters were read as the
 * fields "0", "1"..., a Number's as none), nor a function's `arguments`
 * (its values were read as the fields "0", "1"...). Of any realm:
 * Array.isArray and ArrayBuffer.isView read internal slots; a collection,
 * a buffer or a primitive boxed of this realm is told by its prototype,
 * and one of another realm by its tag, a primitive boxed then by its
 * internal slot (see isBoxedOrArguments). By the tag alone, a Map whose
 * tag is its own (a subclass's, or one set on it) was read as a request of
 * no fields.
 */
function isRequest(request) {
  if (typeof request !== 'object' || Array.isArray(request) || ArrayBuffer.isView(request)) return false;
  // A plain object of this realm (most requests) is no collection, buffer
  // nor primitive boxed. A function's `arguments` has that prototype too,
  // and its tag tells it, read only of one with an own `callee` (as every
  // `arguments` has): read of every plain object, the tag cost its call
  // 4.5 ns, where this costs 3.
  const prototype = Object.getPrototypeOf(request);
  if (prototype === Object.prototype || prototype === null) return !hasCallee(request) || !isBoxedOrArguments(request, tagOf(request));
  // Written out: a loop over the constructors cost a class instance's call
  // 100 ns. A primitive boxed, by its prototype here: a subclass's (a class
  // extending String) is told by its tag and slot below, as one of another
  // realm is (as instanceof, five more cost a class instance's call 7 ns).
  if (
    request instanceof Map ||
    request instanceof Set ||
    request instanceof WeakMap ||
    request instanceof WeakSet ||
    request instanceof ArrayBuffer ||
    request instanceof SharedBuffer ||
    prototype === String.prototype ||
    prototype === Number.prototype ||
    prototype === Boolean.prototype ||
    prototype === Symbol.prototype ||
    prototype === BigInt.prototype
  ) {
    return false;
  }
  const tag = tagOf(request);
  return !NOT_REQUESTS.has(tag) && !isBoxedOrArguments(request, tag);
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
  isText,
  requestText,
  hasField,
  ownCopy,
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
