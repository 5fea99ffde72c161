'use strict';
// ratekeeper/redis: the Redis keys of a target (a key's parts, each counted,
// joined under the hash tag), and the marks resets are counted under.

const { numberKey, isUint8Array, bytesKey, textOf, hasField } = require('../api.cjs');
const { typeError } = require('./values.cjs');

/**
 * `part` (a string, or a Buffer of bytes that are not UTF-8) as a key writes
 * it: `<length in UTF-8 bytes>:<part>`, so that parts side by side read back one way.
 */
function counted(part) {
  if (typeof part === 'string') return `${Buffer.byteLength(part)}:${part}`;
  return Buffer.concat([Buffer.from(`${part.length}:`), part]);
}

/**
 * A key part: a string, a number standing for its decimal string, or a
 * Uint8Array standing for the string whose UTF-8 it is (as in-process, and
 * as Python's bytes), a Buffer of its bytes when they are not UTF-8. A
 * string with a lone surrogate is refused, as in-process (see textOf): the
 * client would send U+FFFD in its place, two keys as one.
 */
function keyPart(value, name) {
  if (typeof value === 'string') return textOf(value, name);
  if (typeof value === 'number') return numberKey(value, name);
  if (isUint8Array(value)) {
    const key = bytesKey(value);
    return typeof key === 'string' ? key : Buffer.from(key.bytes.buffer, key.bytes.byteOffset, key.bytes.byteLength);
  }
  throw typeError(name, 'a string, a number or a Uint8Array');
}

/**
 * `parts` (strings and Buffers) as one key: a string when every part is
 * one, else a Buffer (a key holding bytes that are not UTF-8).
 */
function joined(parts) {
  if (parts.every((part) => typeof part === 'string')) return parts.join('');
  return Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part) : part)));
}

/**
 * What finds the hot-key queue of `key` (see acquireOne): the key itself,
 * or a Buffer's bytes, as Latin-1, behind a lone surrogate, which no string
 * key holds (see textOf): one queue per key, never one for two keys.
 */
function keyId(key) {
  return typeof key === 'string' ? key : `\uDC00${key.toString('latin1')}`;
}

/** Whether a policy's `reset(request)` resets `limit` (`{ by }`): keyed by fields, each of them in `request`. */
const reaches = (limit, request) => limit.by.length > 0 && limit.by.every((field) => hasField(request, field));

module.exports = { counted, keyPart, joined, keyId, reaches };
