'use strict';
// The JS API of ratekeeper, written once for both builds: the napi addon
// (bindings-node/index.js passes it native.js) and the WebAssembly build
// (scripts/wasm.sh bundles this file and lib/api/ into bindings-wasm/pkg/, as
// api.cjs for Node and api.mjs for browsers and workers).
//
// `createApi(backend)` takes the native half of a build — the same functions
// under the same names in both: one constructor function per algorithm
// returning a handle (a core AnyLimiter), then tryAcquire / peek / reserve /
// refund / reconfigure / headers / config / noop on a handle, typeError /
// checkName / checkMillis / takeError, and scratch() — and returns the public
// classes and helpers.
//
// Speed: an operation returns `allowed` and writes its numbers into a shared
// Float64Array (`scratch()`), from which the JS layer builds the decision as a
// plain object literal. Building the object here costs a few nanoseconds;
// building it through Node-API cost several times the decision itself.
// Arguments are type-checked here (typeof is free in JS, a Node-API type
// check is not); values are checked by the core, which throws with `.code`.

// The parts, one concept each, in lib/api/: values.cjs (plain helpers),
// shared.cjs (what the classes share over one backend), waiting.cjs (the
// waiting acquire), limiters.cjs, keyed.cjs, policy.cjs, server.cjs (the
// Express and Fastify helpers), addresses.cjs (how they key a client's
// address: ipKey). Each but values.cjs and addresses.cjs is a function of
// the parts before it, called once per backend.
const values = require('./api/values.cjs');
const shared = require('./api/shared.cjs');
const waiting = require('./api/waiting.cjs');
const limiters = require('./api/limiters.cjs');
const keyed = require('./api/keyed.cjs');
const policy = require('./api/policy.cjs');
const server = require('./api/server.cjs');
const { ipKey } = require('./api/addresses.cjs');

/** The public classes and helpers over the backend `B`. */
function createApi(B) {
  const common = shared(B);
  const waits = waiting(common);
  const classes = limiters(common, waits);
  const keyedParts = keyed(common, waits, classes);
  const policyParts = policy(common, waits, classes, keyedParts);
  const { middleware, fastifyHook, takeStores } = server(common, classes, keyedParts, policyParts);
  const { KeyedLimiter, isKeyed, configurationOf } = keyedParts;
  const { Policy, isPolicy } = policyParts;
  const { Limiter, TokenBucket, Gcra, LeakyBucket, SlidingWindowLog, SlidingWindowCounter, FixedWindow, isLimiter } = classes;
  const api = {
    Limiter,
    TokenBucket,
    Gcra,
    LeakyBucket,
    SlidingWindowLog,
    SlidingWindowCounter,
    FixedWindow,
    KeyedLimiter,
    Policy,
    RateLimited: common.RateLimited,
    middleware,
    fastifyHook,
    ipKey,
  };
  // For lib/redis.cjs, which takes this API's classes as its in-process
  // ones: brand checks, as the classes check each other (see isLimiter);
  // takeStores, by which it lets the server helpers take its own classes
  // (see lib/api/server.cjs); and what a policy takes of a KeyedLimiter
  // (see configurationOf in lib/api/keyed.cjs).
  Object.defineProperty(api, values.BRANDS, { value: { isLimiter, isKeyed, isPolicy, takeStores, configurationOf } });
  return api;
}

const { numberKey, isUint8Array, isRequest, bytesCopy, bytesKey, keyArg, asciiInto, fieldsInto, inspected, inspectedOther, inspectSymbol, onlyKnown, isSignal, listen, unlisten, abortedNow, reasonOf, ownCopy, BRANDS, textOf, requestText, hasField } = values;
const { configData } = require('./api/config.cjs');
module.exports = {
  createApi,
  hasField,
  numberKey,
  isUint8Array,
  isRequest,
  bytesCopy,
  bytesKey,
  keyArg,
  asciiInto,
  fieldsInto,
  inspected,
  inspectedOther,
  inspectSymbol,
  onlyKnown,
  isSignal,
  listen,
  unlisten,
  abortedNow,
  reasonOf,
  configData,
  ownCopy,
  BRANDS,
  textOf,
  requestText,
};
