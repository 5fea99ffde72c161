"""ASGI middleware: rate-limit every HTTP request, with RateLimit headers.

Example, with Starlette (FastAPI is the same)::

    from starlette.applications import Starlette
    from ratekeeper import TokenBucket
    from ratekeeper.asgi import RateLimitMiddleware

    app = Starlette(routes=...)
    # Each client address: bursts of 10, then 1 request per second.
    app.add_middleware(RateLimitMiddleware, limiter=lambda: TokenBucket(10, 1, 1.0))

Works with any ASGI 3 application; ``RateLimitMiddleware(app, ...)`` wraps one
directly.
"""

from __future__ import annotations

import types
from typing import Any, Awaitable, Callable, Hashable, Mapping, MutableMapping, Optional, Union

from ratekeeper._ratekeeper import Limiter

__all__ = ["RateLimitMiddleware", "client_host"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_BODY = b"Too Many Requests"


def client_host(scope: Scope) -> str:
    """The default key: the client's address from the ASGI scope ("" if the server gives none).

    Behind a proxy every request comes from the proxy: pass a ``key`` that
    reads the forwarded address, an API key or a user id instead.
    """
    client = scope.get("client")
    return str(client[0]) if client else ""


class RateLimitMiddleware:
    """Rate-limit the HTTP requests of an ASGI app, one limiter per key.

    ``limiter`` is either a ratekeeper limiter, which every request shares,
    or a factory: a callable taking no argument and returning a new limiter,
    called once for each distinct key. ``key(scope)`` maps a request's ASGI
    scope to its key (default: ``client_host``, the client's address); a key
    of ``None`` lets the request through unlimited (health checks, say).
    Each request costs ``cost`` units, decided by ``try_acquire`` without
    waiting.

    A denied request is answered ``429 Too Many Requests`` with the
    ``RateLimit-Policy``, ``RateLimit`` and ``Retry-After`` headers, and the
    app never sees it. An allowed response gets ``RateLimit-Policy`` and
    ``RateLimit``. Lifespan and WebSocket scopes pass through untouched.

    The limiters live in a plain dict that keeps every key it has seen
    (``limiters``): fine for a bounded set of keys (API keys, tenants). The
    core's keyed store, with expiry, will replace it in a later release.
    """

    def __init__(
        self,
        app: ASGIApp,
        limiter: Union[Limiter, Callable[[], Limiter]],
        *,
        key: Optional[Callable[[Scope], Optional[Hashable]]] = None,
        cost: int = 1,
    ) -> None:
        self.app = app
        self._cost = cost
        self._limiters: dict[Hashable, Limiter] = {}
        self._shared: Optional[Limiter] = None
        self._factory: Optional[Callable[[], Limiter]] = None
        if isinstance(limiter, Limiter):
            if key is not None:
                raise TypeError(
                    "`key` needs `limiter` to be a factory (a callable returning a new "
                    "limiter per key), not one limiter that every request would share"
                )
            self._shared = limiter
        elif callable(limiter):
            self._factory = limiter
        else:
            raise TypeError("`limiter` must be a ratekeeper limiter or a callable returning one")
        self._key = key or client_host

    @property
    def limiters(self) -> Mapping[Hashable, Limiter]:
        """The limiters made by the factory so far, by key (read-only)."""
        return types.MappingProxyType(self._limiters)

    def limiter_for(self, scope: Scope) -> Optional[Limiter]:
        """The limiter deciding a request, or ``None`` when it goes unlimited."""
        if self._shared is not None:
            return self._shared
        key = self._key(scope)
        if key is None:
            return None
        limiter = self._limiters.get(key)
        if limiter is None:
            assert self._factory is not None
            limiter = self._factory()
            if not isinstance(limiter, Limiter):
                raise TypeError(f"the limiter factory returned {limiter!r}, not a ratekeeper limiter")
            self._limiters[key] = limiter
        return limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limiter = self.limiter_for(scope) if scope["type"] == "http" else None
        if limiter is None:
            await self.app(scope, receive, send)
            return
        decision = limiter.try_acquire(self._cost)
        headers = [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in limiter.headers(decision).items()
        ]
        if not decision:
            headers += [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(_BODY)).encode("latin-1")),
            ]
            await send({"type": "http.response.start", "status": 429, "headers": headers})
            await send({"type": "http.response.body", "body": _BODY})
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", ()), *headers]
            await send(message)

        await self.app(scope, receive, send_with_headers)
