"""ASGI middleware: rate-limit every HTTP request, with RateLimit headers.

Example, with Starlette (FastAPI is the same)::

    from starlette.applications import Starlette
    from ratekeeper import KeyedLimiter, TokenBucket
    from ratekeeper.asgi import RateLimitMiddleware

    app = Starlette(routes=...)
    # Each client address: bursts of 10, then 1 request per second.
    app.add_middleware(RateLimitMiddleware, limiter=KeyedLimiter(TokenBucket(10, 1, 1.0)))

Works with any ASGI 3 application; ``RateLimitMiddleware(app, ...)`` wraps one
directly.
"""

from __future__ import annotations

import operator
from typing import Any, Awaitable, Callable, Iterable, Mapping, MutableMapping, Optional, Sequence, Union

from ratekeeper._errors import RateLimitError, RateLimitTypeError
from ratekeeper._ratekeeper import Decision, KeyedLimiter, Limiter, Policy
from ratekeeper._wait import checked_cost

__all__ = ["RateLimitMiddleware", "client_host", "request_fields"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Key = Union[str, bytes, int]
Fields = Mapping[str, Key]

_TOO_MANY = b"Too Many Requests"
_UNAVAILABLE = b"Service Unavailable"


def client_host(scope: Scope) -> str:
    """The default key of a ``KeyedLimiter``: the client's address from the ASGI
    scope ("" if the server gives none).

    Behind a proxy every request comes from the proxy: pass a ``key`` that
    reads the forwarded address, an API key or a user id instead.
    """
    client = scope.get("client")
    return str(client[0]) if client else ""


def request_fields(scope: Scope) -> dict[str, Key]:
    """The default request of a ``Policy``: the fields ``client`` (as
    ``client_host``), ``method`` and ``path`` of the ASGI scope.

    A policy's limits are keyed by some of them: ``by=["client"]`` per
    client, ``by=["client", "path"]`` per client and route, none for a
    limit on the whole app.
    """
    return {"client": client_host(scope), "method": scope.get("method", ""), "path": scope.get("path", "")}


#: The fields of ``request_fields``.
REQUEST_FIELDS = ("client", "method", "path")


class RateLimitMiddleware:
    """Rate-limit the HTTP requests of an ASGI app.

    ``limiter`` decides each request, with ``try_acquire`` (no waiting) at a
    cost of ``cost`` units:

    - a ``KeyedLimiter``: one limiter per key; ``key(scope)`` maps a
      request's ASGI scope to its key (``str``, ``bytes`` or ``int``;
      default ``client_host``, the client's address);
    - a ``Policy``: ``key(scope)`` maps the scope to the request's fields,
      a mapping (default ``request_fields``: ``client``, ``method`` and
      ``path``), and every limit of the policy must allow the request;
    - a limiter: one limiter for every request (then ``key`` is not taken).

    ``cost`` is an int, the cost of every request (checked at once against
    the limiter), or ``cost(scope)``, a function returning a request's,
    called after ``key``, as the JS helpers take a number or
    ``cost(request)``: an answer other than an ``int`` raises
    ``RateLimitTypeError`` naming ``cost``, one the limiter refuses its
    ``RateLimitError`` naming ``cost`` (the server answers 500, charging
    nothing).

    A ``key`` that returns ``None`` fails the request with
    ``RateLimitTypeError`` naming ``key`` (the server answers 500), charging
    nothing: a key read from a header or a session is missing exactly when
    a client leaves it out, so letting such a request through unlimited
    would let any client skip the limit. To exempt requests (health checks,
    say), pass ``skip(scope)`` (a plain function, not a coroutine, as
    ``key`` is): a request it answers ``True`` for goes to
    the app undecided, without RateLimit headers, charged nothing (it is
    called first, for HTTP requests; an answer other than a ``bool`` raises
    ``RateLimitTypeError`` naming ``skip``). A
    denied request is answered ``429 Too Many Requests`` with the
    ``RateLimit-Policy``, ``RateLimit`` and ``Retry-After`` headers (a
    policy lists every limit), and the app never sees it. An allowed
    response gets ``RateLimit-Policy`` and ``RateLimit``. Middlewares in a
    row each add their items, the outer one's first: the order the request
    meets the limits, as a policy lists its own in its order. Lifespan and
    WebSocket scopes pass through untouched.

    A keyed store (or a policy's) made with ``eviction="refuse"`` that is
    full refuses a new key with ``RateLimitError`` (``store_full``): the
    request is answered ``503 Service Unavailable``, without RateLimit
    headers (there is no decision to describe, and no wait to promise: room
    comes back when some held key is fresh again). Any other error
    propagates (the server answers 500).
    """

    def __init__(
        self,
        app: ASGIApp,
        limiter: Union[KeyedLimiter, Policy, Limiter],
        *,
        key: Optional[Callable[[Scope], Any]] = None,
        cost: Union[int, Callable[[Scope], int]] = 1,
        skip: Optional[Callable[[Scope], bool]] = None,
    ) -> None:
        self.app = app
        self.limiter = limiter
        if skip is not None and not callable(skip):
            raise RateLimitTypeError(f"`skip` must be a function, not {type(skip).__name__}", "invalid_type")
        self._skip = skip
        # Checked here, as is what follows: each mistake would fail every
        # request (a 500 each).
        if isinstance(limiter, Limiter):
            if key is not None:
                raise RateLimitTypeError(
                    "`key` needs `limiter` to be a KeyedLimiter or a Policy, not one limiter "
                    "that every request shares: pass KeyedLimiter(limiter) for one per key",
                    "invalid_type",
                )
        elif isinstance(limiter, KeyedLimiter):
            key = key or client_host
        elif isinstance(limiter, Policy):
            if key is None:
                key = request_fields
                for name in limiter.names:
                    missing = [field for field in limiter.keyed_by(name) if field not in REQUEST_FIELDS]
                    if missing:
                        raise RateLimitError(
                            f"limit {name!r} of `limiter` is keyed by {missing[0]!r}, which the default "
                            f"request (fields {', '.join(REQUEST_FIELDS)}) lacks: pass a `key` "
                            "returning the request's fields",
                            "invalid_value",
                        )
        else:
            raise RateLimitTypeError("`limiter` must be a ratekeeper KeyedLimiter, Policy or limiter", "invalid_type")
        self._cost_of: Optional[Callable[[Scope], Any]] = None
        self._cost = 1
        if callable(cost):
            self._cost_of = cost
        elif isinstance(cost, bool) or not hasattr(type(cost), "__index__"):
            raise RateLimitTypeError(f"`cost` must be an int or a function, not {type(cost).__name__}", "invalid_type")
        else:
            self._cost = checked_cost(limiter, cost)
        self._key: Optional[Callable[[Scope], Any]] = key

    def decide(self, scope: Scope) -> Decision:
        """Decide the request of ``scope``: its Decision (a PolicyDecision for
        a policy). Raises ``RateLimitTypeError`` when ``key`` returns ``None``
        or ``cost`` no int."""
        limiter = self.limiter
        if isinstance(limiter, Limiter):
            return limiter.try_acquire(self._units(scope))
        assert self._key is not None
        key = self._key(scope)
        if key is None:
            raise RateLimitTypeError(
                "`key` returned None: a request that cannot be keyed is refused, not let through unlimited",
                "invalid_type",
            )
        if isinstance(limiter, KeyedLimiter):
            return limiter.try_acquire(key, self._units(scope))
        return limiter.try_acquire(key, self._units(scope))

    def _units(self, scope: Scope) -> int:
        """The cost of the request of ``scope``."""
        if self._cost_of is None:
            return self._cost
        return _returned_cost(self._cost_of(scope))

    def skips(self, scope: Scope) -> bool:
        """Whether ``skip`` exempts the request of ``scope`` (``False`` without ``skip``)."""
        if self._skip is None:
            return False
        skipped = self._skip(scope)
        if not isinstance(skipped, bool):
            raise RateLimitTypeError(f"`skip` must return a bool, not {type(skipped).__name__}", "invalid_type")
        return skipped

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._skip is not None and scope["type"] == "http" and self.skips(scope):
            await self.app(scope, receive, send)
            return
        try:
            decision = self.decide(scope) if scope["type"] == "http" else None
        except RateLimitError as error:
            if error.code != "store_full":
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
    """``had`` with ``ours`` added, each before the first header of its name
    already there (an inner middleware's items, or the app's): the items are
    listed in the order the request meets the limits, outer first, as the
    JS helpers list theirs and a policy its own."""
    merged = list(had)
    for name, value in ours:
        at = next((i for i, header in enumerate(merged) if bytes(header[0]).lower() == name), len(merged))
        merged.insert(at, (name, value))
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
