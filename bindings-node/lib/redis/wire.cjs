'use strict';
// ratekeeper/redis: what goes to Redis and back: the script and its SHA-1,
// a command sent with the user's client (ioredis or node-redis), a reply
// read as integers, the errors no retry mends, a bound on a round trip.

const { createHash, getRandomValues } = require('node:crypto');
const { typeError } = require('./values.cjs');

/** The script EVALSHA runs (core/redis/ratekeeper.lua): see redisScript. */
const REDIS_SCRIPT = redisScript();

/**
 * The script, as the native addon holds it (the core embeds it); where no
 * addon loads (macOS, Windows, arm64, musl: index.js fell back to the
 * WebAssembly build, whose .wasm leaves it out, being for browsers too), the
 * copy the package ships as lib/ratekeeper.lua (scripts/package.sh), so that
 * this module loads wherever 'ratekeeper' does. (It threw the addon's error
 * there, which told to reinstall.) Without either (a checkout, not packed),
 * the addon's error.
 */
function redisScript() {
  try {
    return require('../../native.js').REDIS_SCRIPT;
  } catch (error) {
    try {
      return require('node:fs').readFileSync(require('node:path').join(__dirname, '..', 'ratekeeper.lua'), 'utf8');
    } catch {
      throw error;
    }
  }
}

/** The SHA-1 of the script: what EVALSHA calls. */
const REDIS_SCRIPT_SHA = createHash('sha1').update(REDIS_SCRIPT).digest('hex');

/**
 * Sends a command (an array of strings, and Buffers for keys of bytes that
 * are not UTF-8) with the user's client: ioredis or
 * node-redis. `key` is the command's first key, which a node-redis cluster
 * routes by (ioredis's Cluster finds it in the command itself).
 */
function commandSender(client) {
  if (client !== null && typeof client === 'object') {
    // ioredis (Redis and Cluster): `call(name, ...args)`; its `sendCommand` takes a Command object.
    if (typeof client.call === 'function' && typeof client.evalsha === 'function') {
      // The arguments as one array (ioredis flattens it), not spread: a
      // batch of some 125,000 costs spread overflows V8's stack.
      return (command) => client.call(command[0], command.slice(1));
    }
    // node-redis v4 in legacyMode: its sendCommand takes a callback (and
    // returns nothing); the promise API is under `v4`.
    // (v4's `v4` getter throws outside legacyMode.)
    if (client.options?.legacyMode === true && typeof client.v4?.sendCommand === 'function') return commandSender(client.v4);
    if (typeof client.sendCommand === 'function') {
      // node-redis v4 and later, `createCluster`: `sendCommand(firstKey, isReadonly, args)`.
      if (typeof client.getSlotRandomNode === 'function') {
        return (command, key) => client.sendCommand(key, false, command);
      }
      // node-redis v4 and later, `createClient`: `sendCommand([name, ...args])`.
      return (command) => client.sendCommand(command);
    }
  }
  throw typeError('client', 'an ioredis client or a node-redis (redis v4+) client or cluster');
}

/** A script's reply as numbers: an array, or one string of integers ('text' mode, PROTOCOL.md). */
function integers(reply) {
  const numbers = Array.isArray(reply) ? reply.map(Number) : typeof reply === 'string' || Buffer.isBuffer(reply) ? String(reply).split(' ').map(Number) : [];
  if (numbers.length === 0 || !numbers.every(Number.isSafeInteger)) {
    // Not the script's reply (a client that resolves to something else): not
    // an outage that onError may hide.
    const shown = typeof reply === 'string' ? reply.slice(0, 80) : String(reply).slice(0, 80);
    const error = new TypeError(`ratekeeper: the client resolved the script's call to ${shown}, not its reply of integers`);
    error.code = 'invalid_reply';
    throw error;
  }
  return numbers;
}

/**
 * An error reply that no retry mends, which onError must not hide: the
 * script's own (a bug or a configuration it refuses), a NOPERM (the ACL user
 * may not run the script), a command the script calls refused to that user
 * (Redis 7.0 words it "can't run this command", 7.2 on "ACL failure in
 * script", both after ERR), a WRONGTYPE (a key of the limiter's
 * holds another type), the script failing on a key's value it did not
 * write (`user_script:<line>:`). Not a fault of the store's reach.
 */
function isScriptError(error) {
  return error instanceof Error && /^(ERR .*)?ratekeeper:|NOPERM|can't run this command|ACL failure in script|WRONGTYPE|user_script:\d+:/.test(error.message ?? '');
}

/** Rejects with a TimeoutError after `ms`; the late answer, if any, is dropped (and its error caught). */
function within(promise, ms) {
  if (ms === Infinity) return promise;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new DOMException(`Redis did not answer within ${ms} ms`, 'TimeoutError')), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/**
 * A call's nonce, the last argument of an `acquire` or a `reserve`: the
 * birth of a key it writes first where the script may not call TIME
 * (PROTOCOL.md, "ACL"), random so that a key reset and written again at the
 * same instant of the callers' clock gets another birth. 52 random bits
 * plus 1: never 0 (a reply's "no birth"), below 2^53 (exact in Lua).
 */
function nonce() {
  const [high, low] = getRandomValues(new Uint32Array(2));
  return (high & 0xfffff) * 2 ** 32 + low + 1;
}

module.exports = { REDIS_SCRIPT, REDIS_SCRIPT_SHA, commandSender, integers, isScriptError, within, nonce };
