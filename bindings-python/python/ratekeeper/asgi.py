"""ASGI middleware: rate-limit every HTTP request, with RateLimit headers.

Example, with Starlette (FastAPI is the same)::

    from starlette.applications import Starlette
    from ratekeeper import KeyedLimiter, TokenBucket
    from ratekeeper.asgi import RateLimitMiddleware

    app = Starlette(routes=...)
    # Each client address: bursts of 10, then 1 request per second.
    app.add_middleware(RateLimitMiddleware, limiter=KeyedLimiter(TokenBucket(10, 1, 1.0)))

Works with any ASGI 3 application; ``RateLimitMiddleware(app, ...)`` wraps one
directly. Limits that every process shares take the asyncio classes of
``ratekeeper.redis`` the same way::

    from ratekeeper.redis import AsyncRedisLimiter

    limiter = AsyncRedisLimiter(redis.asyncio.Redis(), TokenBucket(10, 1, 1.0))
    app.add_middleware(RateLimitMiddleware, limiter=limiter)
"""

from __future__ import annotations

import inspect
import ipaddress
import operator
import re
import sys
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    MutableMapping,
    Optional,
    Sequence,
    TypeGuard,
    Union,
    cast,
)
from urllib.parse import unquote

from ratekeeper._errors import RateLimitError, RateLimitTypeError
from ratekeeper._ratekeeper import Decision, KeyedLimiter, Limiter, Policy
from ratekeeper._wait import checked_cost, flag

# ratekeeper.redis needs redis-py, which this module does not: its classes
# are told apart without importing it (see _is_redis).
if TYPE_CHECKING:
    from ratekeeper.redis import AsyncRedisLimiter, AsyncRedisPolicy

__all__ = ["RateLimitMiddleware", "client_host", "ip_key", "request_fields"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Key = Union[str, bytes, int]
Fields = Mapping[str, Key]

_TOO_MANY = b"Too Many Requests"
_UNAVAILABLE = b"Service Unavailable"
# A store that cannot take the request's key (full, or out of memory): the
# server is what is short, not the client's share.
_UNAVAILABLE_CODES = ("store_full", "out_of_memory")


class _DefaultSubnet(int):
    """The type of the default ``ipv6_subnet``: 56, told from a 56 that was
    given (an option given where no default reads an address is refused, as
    it would be ignored). An int, shown as 56."""

    __slots__ = ()


#: The default ``ipv6_subnet``: a /56, what RFC 6177 recommends giving a home
#: (ISPs hand out /48 to /64; a /64 is the least a single host gets), within
#: which a client may take a new address at will, each a fresh key were
#: addresses keyed whole. express-rate-limit's default too.
_IPV6_SUBNET: int = _DefaultSubnet(56)

# Each prefix length's netmask, as an int of 128 bits.
_NETMASKS = [((1 << 128) - 1) ^ ((1 << (128 - bits)) - 1) for bits in range(129)]


def ip_key(address: str, ipv6_subnet: Optional[int] = _IPV6_SUBNET) -> str:
    """The key of a client at ``address``, as the default ``key`` and
    ``fields`` key it: an IPv6 address is its network of ``ipv6_subnet``
    bits (default 56) in canonical text, ``2001:db8:1234:5600::/56``
    (``str(ipaddress.IPv6Network((address, ipv6_subnet), strict=False))``),
    or with ``None`` the address itself in canonical text; an IPv4-mapped one
    (``::ffff:1.2.3.4``) is its IPv4 address, ``1.2.3.4``; a zone id
    (``fe80::1%eth0``) is dropped. Anything else (an IPv4 address, a host
    name such as Starlette's TestClient's ``testclient``) is the key as it
    is. Exactly the JS helpers' ``ipKey``, so that a client has one key in
    both bindings (a Redis limiter shared across languages).

    For a ``key`` of your own that reads an address (a header your proxy
    sets): ``key=lambda scope: ip_key(address_of(scope))``. An
    ``ipv6_subnet`` other than an int from 1 to 128 or ``None`` raises
    ``RateLimitTypeError`` (``invalid_type``) or ``RateLimitError``
    (``invalid_value``) naming it, an ``address`` not a ``str``
    ``RateLimitTypeError``.
    """
    subnet = _subnet(ipv6_subnet)
    if not isinstance(address, str):
        raise RateLimitTypeError(f"`address` must be a str, not {type(address).__name__}", "invalid_type")
    return _ip_key(address, subnet)


def _subnet(ipv6_subnet: Any) -> Optional[int]:
    """``ipv6_subnet`` checked: a prefix length from 1 to 128, or ``None``
    (each address whole); the JS helpers' errors for the same mistakes. A
    bool is no int here, as for ``cost``."""
    if ipv6_subnet is None:
        return None
    if isinstance(ipv6_subnet, bool):
        raise RateLimitTypeError("`ipv6_subnet` must be an int or None, not bool", "invalid_type")
    try:
        bits = operator.index(ipv6_subnet)  # an int, or one such as numpy's
    except TypeError:
        raise RateLimitTypeError(
            f"`ipv6_subnet` must be an int or None, not {type(ipv6_subnet).__name__}", "invalid_type"
        ) from None
    if not 1 <= bits <= 128:
        raise RateLimitError(f"`ipv6_subnet` must be a prefix length from 1 to 128, not {bits}", "invalid_value")
    return bits


def _ip_key(address: str, subnet: Optional[int]) -> str:
    """``ip_key``, its ``subnet`` checked (``None``: whole addresses)."""
    # No IPv6 address lacks a colon: an IPv4 client (most, and the hot path) costs this test alone.
    if ":" not in address:
        return address
    try:
        ip = ipaddress.IPv6Address(address)
    except ValueError:
        return address
    mapped = ip.ipv4_mapped
    if mapped is not None:
        return str(mapped)
    # From its int: without the zone id.
    if subnet is None:
        return str(ipaddress.IPv6Address(int(ip)))
    return f"{ipaddress.IPv6Address(int(ip) & _NETMASKS[subnet])}/{subnet}"


def client_host(scope: Scope, *, ipv6_subnet: Optional[int] = _IPV6_SUBNET) -> Optional[str]:
    """The default ``key`` of a ``KeyedLimiter``: the client's address from the
    ASGI scope, as the JS helpers' default is ``request.ip``, keyed by
    ``ip_key``: an IPv6 client by its network of ``ipv6_subnet`` bits
    (default 56; ``None``: the address itself), an IPv4 client of a server
    listening on ``::`` (``::ffff:1.2.3.4``) by its IPv4 address.

    ``None`` where the server gives none (a Unix socket's client, say): the
    middleware then refuses the request as it refuses any ``key`` returning
    ``None`` (all such requests would otherwise share one key, and limit
    each other). In 0.1 it was ``""``.

    Behind a proxy every request comes from the proxy: let the server trust
    the proxy's forwarded address (uvicorn reads ``X-Forwarded-For`` from
    the addresses in ``--forwarded-allow-ips``, by default only 127.0.0.1;
    name the proxy's, not ``*``, with which uvicorn takes the first address
    of the header, the one a client writes: a fresh key at will), or pass
    a ``key`` that reads the forwarded address, an API key or a user id.
    """
    return _client_key(scope, _subnet(ipv6_subnet))


def _client_key(scope: Scope, subnet: Optional[int]) -> Optional[str]:
    """``client_host``, its ``subnet`` checked: the middleware's default key."""
    client = scope.get("client")
    host = client[0] if client else None
    return _ip_key(str(host), subnet) if host else None


def request_fields(scope: Scope, *, ipv6_subnet: Optional[int] = _IPV6_SUBNET) -> Optional[dict[str, Key]]:
    """The default ``fields`` of a ``Policy``: ``client`` (as ``client_host``,
    with the same ``ipv6_subnet``), ``method`` and ``path`` of the request:
    the fields and values of the JS helpers' default too.

    ``path`` is the request target's path as the JS helpers read it, and as
    Starlette routes it: without the query or a fragment (``/login#1`` is
    ``/login``), an absolute-form target without its scheme and host
    (``GET http://host/login`` is ``/login``; ``http://host`` is ``/``),
    percent-decoded as the scope's ``path`` (an encoded ``%23`` stays a
    ``#`` of the path). It is read from the scope's ``raw_path`` where that
    is what ``path`` was decoded from (uvicorn's h11 parser keeps a fragment
    and the scheme and host of an absolute-form target in both; each would
    be a path of its own, a fresh limit), else it is the scope's ``path``
    (no ``raw_path``, or a ``path`` an outer middleware rewrote).

    ``None`` where the client's address is unknown, as ``client_host``: the
    middleware refuses such a request.

    A policy's limits are keyed by some of them: ``by=["client"]`` per
    client, ``by=["client", "path"]`` per client and route, none for a
    limit on the whole app.
    """
    return _request_fields(scope, _subnet(ipv6_subnet))


def _request_fields(scope: Scope, subnet: Optional[int]) -> Optional[dict[str, Key]]:
    """``request_fields``, its ``subnet`` checked: the middleware's default fields."""
    client = _client_key(scope, subnet)
    if client is None:
        return None
    return {"client": client, "method": scope.get("method", ""), "path": _path(scope)}


# An absolute-form target's scheme and host (RFC 9112, 3.2.2), as the JS helpers' pathOf cuts them.
_SCHEME_AND_HOST = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/]*")


def _path(scope: Scope) -> str:
    """The ``path`` field of ``request_fields`` (see there): the JS helpers' ``pathOf``."""
    path: str = scope.get("path", "")
    raw = scope.get("raw_path")
    if not isinstance(raw, bytes) or not isinstance(path, str):
        return path
    # Latin-1, as Node reads a request line: every byte a character.
    target = raw.decode("latin-1")
    # uvicorn puts root_path in front of both: the target follows it.
    root = scope.get("root_path", "")
    root = root if isinstance(root, str) and root and target.startswith(root) and path.startswith(root) else ""
    target = target[len(root) :]
    if unquote(root + target) != path:
        return path
    target = re.split(r"[?#]", target, maxsplit=1)[0]
    scheme_and_host = _SCHEME_AND_HOST.match(target)
    if scheme_and_host is not None:
        target = target[scheme_and_host.end() :]
    return root + (unquote(target) if target else "/")


#: The fields of ``request_fields``.
REQUEST_FIELDS = ("client", "method", "path")


class RateLimitMiddleware:
    """Rate-limit the HTTP requests of an ASGI app.

    ``limiter`` decides each request, with ``try_acquire`` (no waiting) at a
    cost of ``cost`` units, with the options, defaults and errors of the JS
    helpers (``middleware``, ``fastifyHook``):

    - a ``KeyedLimiter``: one limiter per key; ``key(scope)`` maps a
      request's ASGI scope to its key (``str``, ``bytes`` or ``int``;
      default ``client_host``, the client's address, an IPv6 one's network:
      see ``ipv6_subnet``);
    - a ``Policy``: ``fields(scope)`` maps the scope to the request's
      fields, a mapping (default ``request_fields``: ``client``, ``method``
      and ``path``), and every limit of the policy must allow the request.
      A limit keyed by a field the default lacks, without ``fields``,
      raises ``RateLimitError`` (``invalid_value``) naming ``fields`` at
      once, as each request's ``try_acquire`` would; a ``fields`` answer
      that lacks one raises that ``try_acquire`` error (the server answers
      500);
    - a limiter: one limiter for every request;
    - an ``AsyncRedisLimiter`` or an ``AsyncRedisPolicy`` of
      ``ratekeeper.redis`` (limits every process shares), read as a
      ``KeyedLimiter`` (``key``) and a ``Policy`` (``fields``) are, with the
      same defaults, options and answers. Each request awaits its round trip;
      while Redis cannot be reached the store's ``on_error`` decides, and an
      error ``on_error`` does not answer (``ScriptError``, say) propagates.
      A ``RedisLimiter`` or ``RedisPolicy``, which would block the event
      loop for each round trip, raises ``RateLimitTypeError``
      (``invalid_type``) saying to use the ``Async`` class.

    ``ipv6_subnet`` (default 56) is how the default ``key`` and ``fields``
    key an IPv6 client: by its network of that many bits
    (``2001:db8:1234:5600::/56``, see ``ip_key``). Such a client usually
    holds a whole network (RFC 6177 recommends a /56 for a home; a /64 is
    the least a single host gets) and may take a new address in it at will,
    each a fresh limit were addresses keyed whole, as ``None`` keys them. An
    IPv4-mapped address (``::ffff:1.2.3.4``) is keyed as its IPv4 address
    either way. A value other than an int or ``None`` raises
    ``RateLimitTypeError`` (``invalid_type``), an int outside 1 to 128
    ``RateLimitError`` (``invalid_value``); given beside a ``key`` or
    ``fields`` of your own (call ``ip_key`` in it) or a limiter every
    request shares, which read no default, ``RateLimitTypeError``.

    ``key`` is for a ``KeyedLimiter`` and ``fields`` for a ``Policy``: given
    for another limiter (``key`` with a ``Policy``, as 0.1 took it, say),
    or not callable, it raises ``RateLimitTypeError`` (``invalid_type``).

    ``cost`` is an int, the cost of every request (checked at once against
    the limiter), or ``cost(scope)``, a function returning a request's,
    called after ``key``, as the JS helpers take a number or
    ``cost(request)``: an answer other than an ``int`` raises
    ``RateLimitTypeError`` naming ``cost``, one the limiter refuses its
    ``RateLimitError`` naming ``cost`` (the server answers 500, charging
    nothing).

    A ``key`` or ``fields`` that returns ``None`` fails the request with
    ``RateLimitTypeError`` naming it (the server answers 500), charging
    nothing, and so does a default one for a client of unknown address: a
    key read from a header or a session is missing exactly when a client
    leaves it out, so letting such a request through unlimited would let
    any client skip the limit. To exempt requests (health checks,
    say), pass ``skip(scope)``: a request it answers ``True`` for goes to
    the app undecided, without RateLimit headers, charged nothing (it is
    called first, for HTTP requests; an answer other than a ``bool`` raises
    ``RateLimitTypeError`` naming ``skip``).

    ``key``, ``fields``, ``skip`` and a ``cost`` function may each be a coroutine
    function (``async def``: a key looked up in a session store, say) or
    return any awaitable, as the JS helpers' functions may return promises:
    the middleware awaits the answer, then checks it as a plain one (the
    key or fields first, then the cost). A request whose functions all answer at
    once is decided without an ``await``. A
    denied request is answered ``429 Too Many Requests`` with the
    ``RateLimit-Policy``, ``RateLimit`` and ``Retry-After`` headers (a
    policy lists every limit), and the app never sees it. An allowed
    response gets ``RateLimit-Policy`` and ``RateLimit``. Middlewares in a
    row each add their items, the outer one's first: the order the request
    meets the limits, as a policy lists its own in its order; in one line of
    each field, in front of an inner middleware's or the app's own items, as
    the JS helpers send them. Lifespan and
    WebSocket scopes pass through untouched: a WebSocket handshake is not
    limited (the JS helpers' Fastify hook limits ``@fastify/websocket``'s).

    A keyed store (or a policy's) made with ``eviction="refuse"`` that is
    full refuses a new key with ``RateLimitError`` (``store_full``), and one
    that could not grow for it with ``RateLimitMemoryError``
    (``out_of_memory``): the request is answered ``503 Service
    Unavailable``, without RateLimit headers (there is no decision to
    describe, and no wait to promise: room comes back when some held key is
    fresh again, or memory is freed). Any other error propagates (the
    server answers 500).
    """

    def __init__(
        self,
        app: ASGIApp,
        limiter: Union[KeyedLimiter, Policy, Limiter, AsyncRedisLimiter, AsyncRedisPolicy],
        *,
        key: Optional[Callable[[Scope], Any]] = None,
        fields: Optional[Callable[[Scope], Any]] = None,
        cost: Union[int, Callable[[Scope], Union[int, Awaitable[int]]]] = 1,
        skip: Optional[Callable[[Scope], Union[bool, Awaitable[bool]]]] = None,
        ipv6_subnet: Optional[int] = _IPV6_SUBNET,
    ) -> None:
        self.app = app
        self.limiter = limiter
        if skip is not None and not callable(skip):
            raise RateLimitTypeError(f"`skip` must be a function, not {type(skip).__name__}", "invalid_type")
        self._skip = skip
        # Checked here, as is what follows: each mistake would fail every
        # request (a 500 each), or quietly limit otherwise than asked. The
        # JS helpers refuse the same mistakes with the same errors.
        subnet = _subnet(ipv6_subnet)
        input_of: Optional[Callable[[Scope], Any]] = None
        self._input_name = "key"
        # Whether the request is read by the default key or fields, the
        # client's address (client_host or request_fields passed by name
        # is the default itself).
        by_address = False
        # A store of ratekeeper.redis: each decision a round trip, awaited.
        self._remote = _is_async_redis_limiter(limiter) or _is_async_redis_policy(limiter)
        # What the errors below name: a Redis store's own classes, as the JS helpers' do.
        keyed, policy = ("an AsyncRedisLimiter", "an AsyncRedisPolicy") if self._remote else ("a KeyedLimiter", "a Policy")
        if isinstance(limiter, Limiter):
            for option, function, kind in (("key", key, "KeyedLimiter"), ("fields", fields, "Policy")):
                if function is not None:
                    raise RateLimitTypeError(
                        f"`{option}` is for a {kind}: one limiter that every request shares takes neither "
                        "`key` nor `fields` (pass KeyedLimiter(limiter) for one per key)",
                        "invalid_type",
                    )
        elif isinstance(limiter, KeyedLimiter) or _is_async_redis_limiter(limiter):
            if fields is not None:
                raise RateLimitTypeError(f"`fields` is for {policy}: {keyed} takes `key`", "invalid_type")
            by_address = key is None or key is client_host
            input_of = (lambda scope: _client_key(scope, subnet)) if by_address else _function("key", key)
        elif isinstance(limiter, Policy) or _is_async_redis_policy(limiter):
            if key is not None:
                raise RateLimitTypeError(f"`key` is for {keyed}: {policy} takes `fields`", "invalid_type")
            if fields is None:
                _default_fields_suffice(limiter)
            by_address = fields is None or fields is request_fields
            input_of = (lambda scope: _request_fields(scope, subnet)) if by_address else _function("fields", fields)
            self._input_name = "fields"
        else:
            for sync in ("RedisLimiter", "RedisPolicy"):
                if _is_redis(limiter, sync):
                    # Every request would stop the event loop, and every
                    # other request with it, for its round trip to Redis.
                    raise RateLimitTypeError(
                        f"`limiter`: a {sync} would block the event loop for each request's round trip to Redis: "
                        f"use Async{sync}, with a redis.asyncio client",
                        "invalid_type",
                    )
            raise RateLimitTypeError("`limiter` must be a ratekeeper KeyedLimiter, Policy or limiter", "invalid_type")
        # Given where no default reads an address, it would be ignored: a
        # `key` of one's own keyed each IPv6 address whole, as asked otherwise.
        if ipv6_subnet is not _IPV6_SUBNET and not by_address:
            if input_of is None:
                raise RateLimitTypeError(
                    "`ipv6_subnet` is for a KeyedLimiter or a Policy: one limiter that every request shares reads no address",
                    "invalid_type",
                )
            name = self._input_name
            raise RateLimitTypeError(
                f"`ipv6_subnet` is for the default `{name}`: with `{name}` of your own, apply ip_key(address, ipv6_subnet) in it",
                "invalid_type",
            )
        # What a request that cannot be keyed is refused with. The default's
        # says what it read: "`key` returned None" sent an app that never
        # passed `key` (behind a proxy over a Unix socket, every request
        # fails) looking for a function it does not have.
        self._unkeyed = (
            f"{_unknown_address(self._input_name)}; {_UNKEYED}"
            if by_address
            else f"`{self._input_name}` returned None: {_UNKEYED}"
        )
        self._cost_of: Optional[Callable[[Scope], Any]] = None
        self._cost = 1
        if callable(cost):
            self._cost_of = cost
        elif isinstance(cost, bool) or not hasattr(type(cost), "__index__"):
            raise RateLimitTypeError(f"`cost` must be an int or a function, not {type(cost).__name__}", "invalid_type")
        elif isinstance(limiter, (Limiter, KeyedLimiter, Policy)):
            self._cost = checked_cost(limiter, cost)
        else:
            # As each request's try_acquire would check it (ratekeeper.redis
            # is loaded: the limiter is one of its classes).
            from ratekeeper.redis._values import _cost

            self._cost = _cost(cost, limiter._core.limit)
        # `key` or `fields`, whichever the limiter reads (None: it reads neither).
        self._key = input_of

    def decide(self, scope: Scope) -> Decision:
        """Decide the request of ``scope``: its Decision (a PolicyDecision for
        a policy). Raises ``RateLimitTypeError`` when ``key`` or ``fields``
        returns ``None`` or ``cost`` no int, or when one answers with an
        awaitable (closed unawaited), or for a limiter of ``ratekeeper.redis``
        (its decision is a round trip): ``decide_async`` awaits them."""
        if self._remote:
            raise RateLimitTypeError(
                "`decide` answers at once, and a limiter of ratekeeper.redis decides over a round trip: "
                "await decide_async(scope)",
                "invalid_type",
            )
        key = None
        if self._key is not None:
            name = self._input_name
            key = _checked_key(_answer_now(self._key(scope), name, "decide"), self._unkeyed)
        cost_of = self._cost_of
        units = self._cost if cost_of is None else _returned_cost(_answer_now(cost_of(scope), "cost", "decide"))
        # In process: the decision itself.
        return cast(Decision, self._try_acquire(key, units))

    async def decide_async(self, scope: Scope) -> Decision:
        """``decide``, awaiting ``key`` (or ``fields``) and ``cost`` where they
        answer with an awaitable (coroutine functions)."""
        decision = self._decision(scope)
        return decision if isinstance(decision, Decision) else await decision

    def skips(self, scope: Scope) -> bool:
        """Whether ``skip`` exempts the request of ``scope`` (``False`` without
        ``skip``). An awaitable answer is refused as ``decide`` refuses one."""
        if self._skip is None:
            return False
        return _checked_skip(_answer_now(self._skip(scope), "skip", "skips"))

    # How the middleware decides a request: the steps of `skips` and then
    # `decide`, in plain calls until a function answers with an awaitable,
    # then in a coroutine that awaits it and takes the steps left (as the JS
    # helpers go on once a promise settles). A request of sync functions
    # meets no await, nor a coroutine made for it.

    def _outcome(self, scope: Scope) -> Union[Decision, None, Awaitable[Optional[Decision]]]:
        """The request's Decision, or None when ``skip`` exempts it; or an
        awaitable of either."""
        skip = self._skip
        if skip is not None:
            skipped = skip(scope)
            if type(skipped) is not bool and _is_awaitable(skipped):
                return self._outcome_after(scope, skipped)
            if _checked_skip(skipped):
                return None
        return self._decision(scope)

    async def _outcome_after(self, scope: Scope, skipped: Awaitable[Any]) -> Optional[Decision]:
        if _checked_skip(await skipped):
            return None
        return await self.decide_async(scope)

    def _decision(self, scope: Scope) -> Union[Decision, Awaitable[Decision]]:
        key: Any = None
        if self._key is not None:
            key = self._key(scope)
            if type(key) not in _PLAIN and inspect.isawaitable(key):
                return self._decision_after(scope, key)
            _checked_key(key, self._unkeyed)
        cost_of = self._cost_of
        if cost_of is None:
            units = self._cost
        else:
            units = cost_of(scope)
            if type(units) is not int:
                if inspect.isawaitable(units):
                    return self._try_acquire_after(key, units)
                units = _returned_cost(units)
        return self._try_acquire(key, units)

    async def _decision_after(self, scope: Scope, key: Awaitable[Any]) -> Decision:
        checked = _checked_key(await key, self._unkeyed)
        cost_of = self._cost_of
        if cost_of is None:
            units = self._cost
        else:
            units = cost_of(scope)
            if type(units) is not int and _is_awaitable(units):
                units = await units
            units = _returned_cost(units)
        decision = self._try_acquire(checked, units)
        return decision if isinstance(decision, Decision) else await decision

    async def _try_acquire_after(self, key: Any, units: Awaitable[Any]) -> Decision:
        decision = self._try_acquire(key, _returned_cost(await units))
        return decision if isinstance(decision, Decision) else await decision

    def _try_acquire(self, key: Any, units: int) -> Union[Decision, Awaitable[Decision]]:
        """The limiter's decision, or a Redis store's awaitable of it (its round trip)."""
        limiter = self.limiter
        if isinstance(limiter, Limiter):
            return limiter.try_acquire(units)
        return limiter.try_acquire(key, units)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            decision = self._decision(scope) if self._skip is None else self._outcome(scope)
            if decision is not None and not isinstance(decision, Decision):
                decision = await decision
        except RateLimitError as error:
            if error.code not in _UNAVAILABLE_CODES:
                raise
            await _answer(scope, send, 503, [], _UNAVAILABLE)
            return
        if decision is None:
            await self.app(scope, receive, send)
            return
        headers = [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in decision.headers().items()
        ]
        if not decision:
            await _answer(scope, send, 429, headers, _TOO_MANY)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = _outer_first(message.get("headers", ()), headers)
            await send(message)

        await self.app(scope, receive, send_with_headers)


#: What a sync key, fields, skip or cost function answers, told from an
#: awaitable by its type alone: inspect.isawaitable's checks (an ABC's among
#: them) cost some 190 ns a call, for each function of every request.
_PLAIN = frozenset({str, bytes, int, bool, dict, type(None)})


def _is_awaitable(answer: Any) -> bool:
    return type(answer) not in _PLAIN and inspect.isawaitable(answer)


def _answer_now(answer: Any, name: str, caller: str) -> Any:
    """The answer of function ``name`` to ``caller`` (``decide``, ``skips``),
    which cannot await it: an awaitable is closed (a coroutine left unawaited
    warns) and refused."""
    if _is_awaitable(answer):
        close = getattr(answer, "close", None)
        if callable(close):
            close()
        raise RateLimitTypeError(
            f"`{name}` returned an awaitable, which {caller}() cannot await"
            + (": use `await decide_async(scope)`" if caller == "decide" else " (the middleware awaits it)"),
            "invalid_type",
        )
    return answer


_UNKEYED = "a request that cannot be keyed is refused, not let through unlimited"


def _unknown_address(option: str) -> str:
    """Why the default ``key`` or ``fields`` (``option``) refuses a request:
    the server gives no client address. The JS helpers' words."""
    return (
        f"the client's address, read by the default `{option}`, is unknown (a Unix socket's client, say): "
        f"behind a proxy, let the server trust its forwarded address, or pass `{option}`"
    )


def _checked_key(key: Any, refusal: str) -> Any:
    """``key``, the answer of ``key`` or ``fields``: ``None`` fails the
    request, with the middleware's ``refusal``."""
    if key is None:
        raise RateLimitTypeError(refusal, "invalid_type")
    return key


def _is_redis(limiter: object, name: str) -> bool:
    """Whether ``limiter`` is of class ``name`` of ``ratekeeper.redis``,
    without importing it (it needs redis-py, which this module does not): a
    limiter of its classes exists only once it was imported."""
    redis = sys.modules.get("ratekeeper.redis")
    return redis is not None and isinstance(limiter, getattr(redis, name))


def _is_async_redis_limiter(limiter: object) -> TypeGuard[AsyncRedisLimiter]:
    return _is_redis(limiter, "AsyncRedisLimiter")


def _is_async_redis_policy(limiter: object) -> TypeGuard[AsyncRedisPolicy]:
    return _is_redis(limiter, "AsyncRedisPolicy")


def _function(name: str, function: Optional[Callable[[Scope], Any]]) -> Optional[Callable[[Scope], Any]]:
    """Option ``name``, ``function``, checked: ``None`` or a function."""
    if function is not None and not callable(function):
        raise RateLimitTypeError(f"`{name}` must be a function, not {type(function).__name__}", "invalid_type")
    return function


def _default_fields_suffice(policy: Union[Policy, AsyncRedisPolicy]) -> None:
    """Refuses a policy keyed by a field ``request_fields`` lacks: every
    request would fail with try_acquire's error, raised here instead. So
    with a field that an ``AsyncRedisPolicy``'s ``on_error`` ``Policy`` is
    keyed by: the Redis policy refuses a request lacking it, Redis up or
    down (as the JS helpers refuse it)."""
    fallback = getattr(policy, "_core").on_error if _is_async_redis_policy(policy) else None
    for of, limits in (("`limiter`", policy.limits), ("`limiter`'s on_error", fallback.limits if isinstance(fallback, Policy) else ())):
        for name, by in limits:
            missing = [field for field in by if field not in REQUEST_FIELDS]
            if missing:
                raise RateLimitError(
                    f"`fields` must be given: limit {name!r} of {of} is keyed by {missing[0]!r}, "
                    f"which the default fields ({', '.join(REQUEST_FIELDS)}) lack",
                    "invalid_value",
                )


def _checked_skip(skipped: Any) -> bool:
    checked = flag(skipped)
    if checked is None:
        raise RateLimitTypeError(f"`skip` must return a bool, not {type(skipped).__name__}", "invalid_type")
    return checked


def _returned_cost(units: Any) -> int:
    """What a ``cost`` function returned, as an int. Another answer fails the
    request (``None`` included, which the JS helpers refuse too rather than
    charge a default 1); the limiter checks the int's value, naming ``cost``."""
    if type(units) is int:
        return units
    if not isinstance(units, bool):
        try:
            return operator.index(units)  # an int, or one such as numpy's
        except TypeError:
            pass
    raise RateLimitTypeError(f"`cost` must return an int, not {type(units).__name__}", "invalid_type")


def _outer_first(
    had: Iterable[Sequence[bytes]], ours: list[tuple[bytes, bytes]]
) -> list[Sequence[bytes]]:
    """``had`` with ``ours`` added, each in front of the items of its name
    already there (an inner middleware's, or the app's), in the same field
    line: the items are listed in the order the request meets the limits,
    outer first, as the JS helpers list theirs and a policy its own. One
    line, as the JS helpers send it: RateLimit and RateLimit-Policy are
    lists, which RFC 9110 (5.3) lets a sender join, and a client that reads
    one line of a field (Go's ``Header.Get``) saw only the outer limit when
    each middleware sent a line of its own."""
    merged = list(had)
    for name, value in ours:
        at = next((i for i, header in enumerate(merged) if bytes(header[0]).lower() == name), None)
        if at is None:
            merged.append((name, value))
            continue
        their_name, theirs = merged[at][0], bytes(merged[at][1])
        merged[at] = (their_name, value + b", " + theirs if theirs.strip() else value)
    return merged


async def _answer(scope: Scope, send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    """Answers the request itself: ``status``, ``headers`` and a plain-text ``body``."""
    headers = [
        *headers,
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode("latin-1")),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    # A response to HEAD has no content (RFC 9110), only its length.
    await send({"type": "http.response.body", "body": b"" if scope.get("method") == "HEAD" else body})
