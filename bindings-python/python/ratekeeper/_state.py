"""Pickling support: limiters pickle as their constructor call and their state."""

from __future__ import annotations

from typing import Any, Optional

from ratekeeper._ratekeeper import Limiter


def rebuild(
    cls: type[Limiter], method: Optional[str], args: tuple[Any, ...], kwargs: dict[str, Any], data: bytes
) -> Limiter:
    """``cls(*args, **kwargs)`` (or ``cls.method(...)``) holding the state ``data``."""
    factory = getattr(cls, method) if method else cls
    limiter: Limiter = factory(*args, **kwargs)
    limiter.restore(data)
    return limiter
