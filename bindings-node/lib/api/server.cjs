'use strict';
// The server helpers (see lib/api.cjs): Express-style middleware and a
// Fastify hook that decide each request through a KeyedLimiter, a Policy or
// one limiter every request shares (or the Redis-backed RedisLimiter and
// RedisPolicy of lib/redis.cjs), and answer 429 with the RateLimit headers.
const { invalidType, invalidValue } = require('./values.cjs');
const { IPV6_SUBNET, subnetOf, addressKey } = require('./addresses.cjs');

module.exports = function server({ badType, known }, { isLimiter }, { isKeyed }, { isPolicy }) {
  // --- Limiters kept elsewhere -------------------------------------------------
  // The Redis-backed classes of lib/redis.cjs (Node only), keyed as a
  // KeyedLimiter and a Policy are, each decision a promise. This file is
  // shared with the WebAssembly build, which has no Redis: it cannot
  // require lib/redis.cjs. That module gives its classes' brand checks to
  // the API it decides with (takeStores, under the API object's BRANDS)
  // when it loads, and only then do these helpers take them: private-field
  // checks, which no forged object (nor a Proxy) passes, as the in-process
  // classes' own; a well-known symbol on the classes would be one any
  // object could carry. So the helpers of the native build, which
  // 'ratekeeper' is on Node, take them; another build's or another copy's
  // refuse them, as 'ratekeeper/redis' refuses that build's limiters.
  // Each store: `{ isKeyed, isPolicy, names: [keyed, policy], checkCost(limiter, cost), fallbackPolicy(limiter) }`.
  const stores = [];

  /** Lets the helpers take the limiters `store` recognises (see above). */
  function takeStores(store) {
    stores.push(store);
  }

  /** The store `limiter` is one of, or undefined (an in-process limiter, or none). */
  function storeOf(limiter) {
    return stores.find((store) => store.isKeyed(limiter) || store.isPolicy(limiter));
  }

  // --- Server helpers ----------------------------------------------------------
  // How the helpers decide a request: `limiter` is a KeyedLimiter or a
  // RedisLimiter (keyed by `key(request)`, default the client's address, an
  // IPv6 one's network of `ipv6Subnet` bits: clientKey), a Policy or a
  // RedisPolicy (its request is `fields(request)`, a plain object of fields,
  // default requestFields) or one limiter every request shares (neither); a
  // Redis-backed one's decision is a promise. `cost` is a number or
  // `cost(request)`, default 1. Answers `{ limiter, outcome, decide, skips }`:
  // `outcome(request)` is what a handler answers by, the request's Decision,
  // or SKIPPED for one that `skip(request)` exempts; `decide` and `skips` are
  // the two steps alone, the handlers' public methods (the ASGI middleware's
  // decide and skips). Each function may return a promise (a key looked up
  // in a session store, say): the answer is then a promise too, taken once
  // the key and then the cost are known, so that requests are decided in the
  // order their keys come; otherwise it is the value itself, as a handler
  // decides a request of plain functions without waiting for a microtask.
  function handlerOptions(options) {
    if (options === null || typeof options !== 'object') badType('options', 'an object');
    if (isLimiter(options) || isKeyed(options) || isPolicy(options) || storeOf(options) !== undefined) {
      // middleware(policy) for middleware({ limiter: policy }): the error
      // said `limiter` must be what was given.
      invalidType('`options` must be an options object, not the limiter itself: pass { limiter }');
    }
    const given = known(options, 'the server helpers');
    const { limiter, ipv6Subnet } = given;
    // null is "not given" for the functions, as the ASGI middleware's
    // key=None, fields=None and skip=None are its defaults (it was a
    // TypeError, `key` must be a function), and for `cost`, whose default
    // is 1, as every optional argument's null is its default (it was a
    // TypeError, `cost` must be a number or a function; Python's cost=None
    // is refused, its default being a value). ipv6Subnet keeps refusing
    // null: it could mean Python's None (each address whole) or the
    // default /56.
    const key = given.key ?? undefined;
    const fields = given.fields ?? undefined;
    const skip = given.skip ?? undefined;
    const cost = given.cost ?? undefined;
    if (cost !== undefined && typeof cost !== 'function' && typeof cost !== 'number') {
      // Not badType, whose message each backend spells from a fixed list (src/shared/names.rs) without this one.
      invalidType('`cost` must be a number or a function');
    }
    if (skip !== undefined && typeof skip !== 'function') badType('skip', 'a function');
    const subnet = ipv6Subnet === undefined ? IPV6_SUBNET : subnetOf(ipv6Subnet);
    let inputOf;
    let inputName;
    // Whether the request is read by the default key or fields, the client's address.
    let byAddress = false;
    // A Redis-backed limiter as the in-process class keyed alike, its errors naming its own classes.
    const store = storeOf(limiter);
    const [keyedName, policyName] = store === undefined ? ['KeyedLimiter', 'Policy'] : store.names;
    // Each mistake below would fail every request (a 500 each), or quietly
    // limit otherwise than asked: refused here instead, with the ASGI
    // middleware's errors for the same mistakes.
    if (isKeyed(limiter) || store?.isKeyed(limiter)) {
      if (key !== undefined && typeof key !== 'function') badType('key', 'a function');
      if (fields !== undefined) invalidType(`\`fields\` is for a ${policyName}: a ${keyedName} takes \`key\``);
      byAddress = key === undefined;
      inputOf = key ?? ((request) => clientKey(request, subnet));
      inputName = 'key';
    } else if (isPolicy(limiter) || store?.isPolicy(limiter)) {
      if (key !== undefined) invalidType(`\`key\` is for a ${keyedName}: a ${policyName} takes \`fields\``);
      if (fields !== undefined && typeof fields !== 'function') badType('fields', 'a function');
      if (fields === undefined) defaultFieldsSuffice(limiter, store?.fallbackPolicy(limiter));
      byAddress = fields === undefined;
      inputOf = fields ?? ((request) => requestFields(request, subnet));
      inputName = 'fields';
    } else if (isLimiter(limiter)) {
      if (key !== undefined) invalidType(`\`key\` is for a KeyedLimiter: ${SHARED}`);
      if (fields !== undefined) invalidType(`\`fields\` is for a Policy: ${SHARED}`);
    } else {
      // Not badType, whose list (src/shared/names.rs) lacks this one.
      invalidType('`limiter` must be a ratekeeper KeyedLimiter, Policy or limiter');
    }
    // Given where no default reads an address, it would be ignored: a
    // `key` of one's own keyed each IPv6 address whole, as asked otherwise.
    if (ipv6Subnet !== undefined && !byAddress) {
      if (inputName === undefined) invalidType(`\`ipv6Subnet\` is for a KeyedLimiter or a Policy: ${SHARED_READS_NO_ADDRESS}`);
      invalidType(`\`ipv6Subnet\` is for the default \`${inputName}\`: with \`${inputName}\` of your own, apply ipKey(address, ipv6Subnet) in it`);
    }
    if (typeof cost === 'number') {
      if (store === undefined) fixedCost(limiter, cost);
      // Redis's own check of a cost, without a round trip: the error each request's tryAcquire would reject with.
      else store.checkCost(limiter, cost);
    }
    const fixed = cost ?? 1;
    const costOf = typeof cost === 'function' ? cost : () => fixed;
    const decide = (input, units) => {
      // tryAcquire reads an undefined or null cost as its default, 1: a cost
      // function that returned nothing would charge its request 1 unit,
      // whatever it meant to charge. Refused instead, as a cost of another type is.
      if (typeof units !== 'number') {
        invalidType(`\`cost\` must return a number, not ${units === null ? 'null' : typeof units}`);
      }
      return inputOf === undefined ? limiter.tryAcquire(units) : limiter.tryAcquire(input, units);
    };
    // A request that cannot be keyed fails (a 500) rather than pass
    // unlimited: a key read from a header or a session is missing exactly
    // when a client leaves it out, so passing it would let any client skip
    // the limit. (A Policy read nothing as {}, counting the request under its
    // global limits only.) Requests to exempt are named by `skip`. The
    // default's refusal says what it read: "`key` returned undefined" sent
    // an app that never passed `key` (behind a proxy over a Unix socket,
    // every request fails) looking for a function it does not have.
    const unkeyed = byAddress ? () => `${unknownAddress(inputName)}; ${UNKEYED}` : (input) => `\`${inputName}\` returned ${input}: ${UNKEYED}`;
    const withInput = (request, input) => {
      if (input === undefined || input === null) invalidType(unkeyed(input));
      return after(costOf(request), (units) => decide(input, units));
    };
    const decideRequest =
      inputOf === undefined
        ? (request) => after(costOf(request), (units) => decide(undefined, units))
        : (request) => after(inputOf(request), (input) => withInput(request, input));
    if (skip === undefined) return { limiter, outcome: decideRequest, decide: decideRequest, skips: () => false };
    // The way to exempt requests (health checks, say): a key of nothing is refused, not read as "exempt".
    const skipped = (answer) => {
      if (typeof answer !== 'boolean') invalidType(`\`skip\` must return a boolean, not ${answer === null ? 'null' : typeof answer}`);
      return answer;
    };
    return {
      limiter,
      outcome: (request) => after(skip(request), (answer) => (skipped(answer) ? SKIPPED : decideRequest(request))),
      decide: decideRequest,
      skips: (request) => after(skip(request), skipped),
    };
  }

  /**
   * Refuses a fixed `cost` that `limiter` would refuse, with tryAcquire's own
   * error, now rather than at every request (a 500 each), as the ASGI
   * middleware checks its own. Asked of a peek, which consumes nothing and
   * adds no key, for a request of every field the limiter reads; a full
   * store's refusal of that request's key is no fault of the cost.
   */
  function fixedCost(limiter, cost) {
    try {
      if (isKeyed(limiter)) limiter.peek('', cost);
      else if (isLimiter(limiter)) limiter.peek(cost);
      else limiter.peek(Object.fromEntries(limiter.limits.flatMap(({ by }) => by.map((field) => [field, '']))), cost);
    } catch (error) {
      if (error?.code !== 'store_full') throw error;
    }
  }

  const UNKEYED = 'a request that cannot be keyed is refused, not let through unlimited';

  const SHARED = 'one limiter that every request shares takes neither `key` nor `fields` (pass new KeyedLimiter(limiter) for one per key)';

  const SHARED_READS_NO_ADDRESS = 'one limiter that every request shares reads no address';

  /**
   * The default `key`: the client's address, Express's `req.ip` and
   * Fastify's `request.ip` (which follow their trust proxy settings), else
   * the socket's peer (a plain `http` server, Connect, Polka: no `ip`), as
   * the ASGI middleware's default is the scope's client host. A request
   * whose address is unknown (its socket closed, or a Unix socket's) gets
   * undefined, and is refused as a `key` returning nothing is: sharing one
   * key, all such requests would limit each other.
   */
  function clientAddress(request) {
    const ip = request.ip === undefined ? request.socket?.remoteAddress : request.ip;
    return ip === '' || ip === null ? undefined : ip;
  }

  /**
   * The default `key`: the client's address (clientAddress) as ipKey keys
   * it, an IPv6 client by its network of `subnet` bits (null: whole), so
   * that a client taking new addresses within its network, as one may at
   * will, gets no fresh limit with each; the ASGI middleware's default.
   */
  function clientKey(request, subnet) {
    const address = clientAddress(request);
    return typeof address === 'string' ? addressKey(address, subnet) : address;
  }

  /**
   * Why the default `key` or `fields` (`option`) refuses a request: the
   * server gives no client address. The ASGI middleware's words.
   */
  function unknownAddress(option) {
    return `the client's address, read by the default \`${option}\`, is unknown (a Unix socket's client, say): behind a proxy, let the server trust its forwarded address, or pass \`${option}\``;
  }

  /** The fields of requestFields. */
  const REQUEST_FIELDS = ['client', 'method', 'path'];

  /**
   * The default `fields`, the ASGI middleware's `request_fields`: `client`
   * (the default key, clientKey; unknown, the request is refused), `method`
   * and `path` (the URL's path: no query, percent-decoded, as an ASGI scope's).
   */
  function requestFields(request, subnet) {
    const client = clientKey(request, subnet);
    if (client === undefined) return undefined;
    return { client, method: request.method ?? '', path: pathOf(request) };
  }

  /**
   * Refuses a Policy keyed by a field requestFields lacks: every request
   * would fail with tryAcquire's error, now thrown here. So with a field
   * that a RedisPolicy's `fallback` (its onError Policy) is keyed by: the
   * RedisPolicy refuses a request lacking it, Redis up or down.
   */
  function defaultFieldsSuffice(limiter, fallback) {
    for (const [policy, of] of [[limiter, '`limiter`'], [fallback, "`limiter`'s onError"]]) {
      for (const { name, by } of policy?.limits ?? []) {
        const missing = by.find((field) => !REQUEST_FIELDS.includes(field));
        if (missing !== undefined) {
          invalidValue(`\`fields\` must be given: limit "${name}" of ${of} is keyed by "${missing}", which the default fields (${REQUEST_FIELDS.join(', ')}) lack`);
        }
      }
    }
  }

  /**
   * The path of the request's URL. The original URL: Express's `req.url`
   * is relative to where the middleware is mounted. An absolute-form
   * target (`GET http://host/login`, which Express and Fastify route as
   * `/login`) loses its scheme and host, or each host named would be a path
   * of its own: a new key, a fresh limit. So does a fragment (`/login#1`,
   * which Node passes on and both route as `/login`), cut before decoding:
   * an encoded `%23` is part of the path.
   */
  function pathOf(request) {
    const target = request.originalUrl ?? request.url;
    if (typeof target !== 'string') return '';
    const end = target.search(/[?#]/);
    const path = (end === -1 ? target : target.slice(0, end)).replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/]*/, '');
    // An absolute-form target without a path (`GET http://host`) names "/"
    // (RFC 9112, 3.2.2), as both route it: "" was a key of its own, a second
    // limit for "/".
    return path === '' ? '/' : unquoted(path);
  }

  // Kept: Python's unquote keeps a BOM, which TextDecoder drops by default.
  const utf8 = new TextDecoder('utf-8', { ignoreBOM: true });

  /**
   * `path` percent-decoded as ASGI servers decode a scope's path (Python's
   * `urllib.parse.unquote`): each run of `%XX` as UTF-8 bytes, an invalid
   * sequence U+FFFD; a `%` without two hex digits stays. decodeURIComponent
   * throws on both, on a path any client may send.
   */
  function unquoted(path) {
    if (!path.includes('%')) return path;
    return path.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => utf8.decode(Uint8Array.from(run.slice(1).split('%'), (hex) => parseInt(hex, 16))));
  }

  /** The outcome of a request `skip` exempts: it goes on, without RateLimit headers, charged nothing. */
  const SKIPPED = Object.freeze({ skipped: true });

  /** `then(value)`, or a promise of it once `value` settles when it is a promise. */
  function after(value, then) {
    return isThenable(value) ? Promise.resolve(value).then(then) : then(value);
  }

  function isThenable(value) {
    return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof value.then === 'function';
  }

  /**
   * The value to set for header `name`, given the one already set (`had`):
   * RateLimit-Policy and RateLimit are lists, one item per limit, so an
   * earlier helper's items (another limiter's: one for every route, then
   * one for this route) stay, ours after them, as stacked ASGI middlewares
   * send both; setting ours alone dropped the earlier limits from the
   * answer. Retry-After is one value: this denial's.
   */
  function listed(name, had, value) {
    if (name === 'Retry-After' || had === undefined || had === null || had === '') return value;
    return `${Array.isArray(had) ? had.join(', ') : had}, ${value}`;
  }

  // The reason phrase alone, as text/plain; charset=utf-8: byte for byte what
  // the ASGI middleware sends, and what Express's res.sendStatus and
  // Starlette's HTTPException answer, so that a client (or a test) sees one
  // answer whichever binding serves it.
  const TOO_MANY = 'Too Many Requests';
  const UNAVAILABLE = 'Service Unavailable';

  /** `value` as a message shows it; one that cannot be shown (a null-prototype object), as such. */
  function shown(value) {
    try {
      return String(value);
    } catch {
      return 'a value that cannot be shown';
    }
  }

  /**
   * Answers a request with `decide(request)` once it is known: `respond`
   * writes the answer and says whether the request goes on, then `pass()`
   * runs. `respond` gets null when a store made with eviction 'refuse' is
   * full and refuses the request's new key, or could not grow for it
   * (`out_of_memory`) (answered 503, without RateLimit
   * headers: there is no decision, and no wait to promise). `fail` gets any
   * other error, one thrown by `respond` included (headers already sent).
   */
  function outcomeOf(decide, request, respond, pass, failWith) {
    // Always an Error: Express and Fastify read next(undefined) or
    // done(null) as "go on", and next('route') as "skip the route", so a
    // key function that threw such a value let the request through unlimited.
    const fail = (error) => failWith(error instanceof Error ? error : new Error(`ratekeeper: the request's key, fields or cost failed: ${shown(error)}`, { cause: error }));
    const settle = (outcome) => {
      let proceed;
      try {
        proceed = respond(outcome);
      } catch (error) {
        fail(error);
        return;
      }
      // Outside the try: an error thrown further down the chain is not this one's.
      if (proceed) pass();
    };
    // A store that cannot take the request's key (full, or out of memory): 503.
    const settleError = (error) => (error?.code === 'store_full' || error?.code === 'out_of_memory' ? settle(null) : fail(error));
    let outcome;
    try {
      outcome = decide(request);
    } catch (error) {
      settleError(error);
      return;
    }
    if (isThenable(outcome)) {
      // Settled outside the promise, so that an error thrown by `pass` or
      // `fail` is the runtime's to report, as from any callback, rather than
      // a rejection nobody handles.
      outcome.then(
        (value) => queueMicrotask(() => settle(value)),
        (error) => queueMicrotask(() => settleError(error)),
      );
    } else {
      settle(outcome);
    }
  }

  /**
   * Express-style middleware `(req, res, next)`: `{ limiter: KeyedLimiter, key(req) }`
   * (default `req.ip`, an IPv6 one's network of `ipv6Subnet` bits, default
   * 56: clientKey), `{ limiter: Policy, fields(req) }` (default client,
   * method and path: requestFields) or `{ limiter }` for one limiter every
   * request shares (a RedisLimiter as a KeyedLimiter, a RedisPolicy as a
   * Policy), and `cost` optionally: a number, or
   * `cost(req)` (each function may return a promise); every response carries
   * RateLimit-Policy and RateLimit (after an earlier helper's items: see listed), and a denied request gets
   * 429 with Retry-After. A full store that refuses
   * new keys, or one out of memory, answers 503; other errors go to `next(error)`, those of writing
   * the answer included (headers already sent, say). The middleware
   * also has `decide(req)` and `skips(req)`: see withSteps.
   */
  function middleware(options) {
    const { limiter, outcome: decide, ...steps } = handlerOptions(options);
    return withSteps(function ratekeeper(req, res, next) {
      const answer = (status, body) => {
        res.statusCode = status;
        res.setHeader('Content-Type', 'text/plain; charset=utf-8');
        // Set here, as Fastify and the ASGI middleware do: Node's own
        // ServerResponse drops the body of a HEAD answer and its length with
        // it, where a HEAD response should carry GET's fields (RFC 9110).
        res.setHeader('Content-Length', String(body.length));
        res.end(body);
        return false;
      };
      const respond = (decision) => {
        if (decision === SKIPPED) return true;
        if (decision === null) return answer(503, UNAVAILABLE);
        for (const [name, value] of Object.entries(limiter.headers(decision))) res.setHeader(name, listed(name, res.getHeader?.(name), value));
        if (decision.allowed) return true;
        return answer(429, TOO_MANY);
      };
      outcomeOf(decide, req, respond, () => next(), next);
    }, steps);
  }

  /**
   * The same for Fastify: `fastify.addHook('onRequest', fastifyHook({ limiter, key }))`
   * (default key `request.ip`, by `ipv6Subnet` as above), with `decide(request)` and `skips(request)`.
   * A reply already sent when the decision comes is left as it is.
   */
  function fastifyHook(options) {
    const { limiter, outcome: decide, ...steps } = handlerOptions(options);
    return withSteps(function ratekeeper(request, reply, done) {
      const respond = (decision) => {
        // Sent while `key` or a Redis round trip was pending: Fastify's
        // `handlerTimeout`, which runs from the request's start, answered
        // 503. Fastify runs no hook past a sent reply, and drops what
        // `done` would pass on; a second answer only made it log "Reply
        // was already sent", blaming the route. (The decision is made:
        // the request counts, as one the client gave up on does.)
        if (reply.sent === true) return false;
        if (decision === SKIPPED) return true;
        if (decision === null) {
          reply.code(503).type('text/plain; charset=utf-8').send(UNAVAILABLE);
          return false;
        }
        const headers = {};
        for (const [name, value] of Object.entries(limiter.headers(decision))) headers[name] = listed(name, reply.getHeader?.(name), value);
        reply.headers(headers);
        if (decision.allowed) return true;
        // Answering from the hook: Fastify then skips the handler; done() is not called.
        reply.code(429).type('text/plain; charset=utf-8').send(TOO_MANY);
        return false;
      };
      outcomeOf(decide, request, respond, () => done(), done);
    }, steps);
  }

  /**
   * `handler` with the steps it takes for each request as methods of its
   * own, the ASGI middleware's decide and skips, for an app that answers
   * the request itself (its own 429 page), logs, or tests its `key`:
   * `decide(request)` is the request's Decision (a PolicyDecision for a
   * Policy), consumed as the handler would consume it, whatever `skip`
   * says; `skips(request)` is whether `skip` exempts the request (false
   * without `skip`). Each answers the value itself when the functions it
   * calls do, a promise of it when one answers with a promise (as the
   * handler decides), where Python's `decide` refuses an awaitable for
   * `decide_async`: `await` takes both. Their errors are the handler's
   * (thrown, or the promise rejects), a full store's `store_full` and
   * `out_of_memory` among them (the handler answers 503 for them); an error of the user's own
   * `key`, `fields`, `cost` or `skip` comes as it was thrown. Properties
   * of the handler, set once: no cost to a request; and closures, so that
   * `const { decide } = handler` works too.
   */
  function withSteps(handler, { decide, skips }) {
    return Object.assign(handler, { decide, skips });
  }

  return { middleware, fastifyHook, takeStores };
};
