"""Waiting on asyncio, and the context manager / decorator form of ``acquire``.

The native limiter's ``acquire_async`` and ``acquiring`` methods call into
this module, since a coroutine and ``async with`` are Python's own.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

if TYPE_CHECKING:
    from typing_extensions import ParamSpec

    from ratekeeper._ratekeeper import Limiter

    _P = ParamSpec("_P")

_R = TypeVar("_R")


async def acquire_async(limiter: Limiter, cost: int, timeout: Optional[float]) -> None:
    """Book like ``acquire``, then sleep until the slot on the event loop.

    Booking happens when the coroutine first runs, so a coroutine that is
    never awaited books nothing. Any exception during the sleep (above all
    ``asyncio.CancelledError``) gives the booking back before propagating.
    """
    reservation = limiter._book(cost, timeout)
    if reservation.wait > 0:
        try:
            # Looked up on every call, so that a test may replace asyncio.sleep.
            await asyncio.sleep(reservation.wait)
        except BaseException:
            reservation.cancel()
            raise


class Acquiring:
    """``limiter.acquire(cost, timeout)`` as a context manager and decorator.

    Made by ``limiter.acquiring(cost, timeout)``. ``with`` and ``async with``
    acquire before the block (``acquire`` / ``acquire_async``); leaving the
    block gives nothing back. Used as a decorator, it acquires before every
    call: with ``acquire_async`` for a coroutine function, ``acquire``
    otherwise. ``timeout=0`` never waits: ``RateLimited`` is raised at once
    when the limiter says no.
    """

    __slots__ = ("_cost", "_limiter", "_timeout")

    def __init__(self, limiter: Limiter, cost: int, timeout: Optional[float]) -> None:
        self._limiter = limiter
        self._cost = cost
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"{self._limiter!r}.acquiring(cost={self._cost!r}, timeout={self._timeout!r})"

    def __enter__(self) -> None:
        self._limiter.acquire(self._cost, self._timeout)

    def __exit__(self, *exc_info: object) -> None:
        return None

    async def __aenter__(self) -> None:
        await self._limiter.acquire_async(self._cost, self._timeout)

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    def __call__(self, func: Callable[_P, _R]) -> Callable[_P, _R]:
        """Decorate ``func`` so that every call first acquires."""

        async def acquire_then_await(*args: Any, **kwargs: Any) -> Any:
            async with self:
                return await func(*args, **kwargs)  # type: ignore[misc]

        def acquire_then_call(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        wrapper = acquire_then_await if inspect.iscoroutinefunction(func) else acquire_then_call
        return functools.wraps(func)(wrapper)

