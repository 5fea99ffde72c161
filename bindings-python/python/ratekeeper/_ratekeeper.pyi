"""Stubs for the native module; import these names from ``ratekeeper``."""

from typing import final

__all__ = ["TokenBucket", "SlidingWindowLog", "Decision", "__version__"]

__version__: str

@final
class Decision:
    """The outcome of one request against a limiter."""

    @property
    def allowed(self) -> bool:
        """Whether the request was admitted (and its cost consumed)."""

    @property
    def remaining(self) -> int:
        """Units still available now, after this request's cost if it was admitted."""

    @property
    def limit(self) -> int:
        """The most units the limiter can ever hold: its capacity or limit."""

    @property
    def retry_after(self) -> float:
        """Seconds to wait until the same request would be allowed (0.0 when allowed)."""

    @property
    def reset_after(self) -> float:
        """Seconds until the limiter is back to its fresh state."""

    def __bool__(self) -> bool: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class TokenBucket:
    """A token bucket: bursts of up to ``capacity``, refilled continuously."""

    def __new__(
        cls,
        capacity: int,
        refill_tokens: int,
        refill_period: float,
        *,
        initial_tokens: int | None = None,
    ) -> TokenBucket: ...
    def try_acquire(self, cost: int = 1, now: float | None = None) -> Decision:
        """Take ``cost`` tokens if the bucket holds them, and say what happened."""

    @property
    def capacity(self) -> int:
        """The most tokens the bucket holds."""

    @property
    def refill_tokens(self) -> int:
        """Tokens added every ``refill_period``."""

    @property
    def refill_period(self) -> float:
        """Seconds over which ``refill_tokens`` are added."""

@final
class SlidingWindowLog:
    """At most ``limit`` units in any window of ``window`` seconds."""

    def __new__(cls, limit: int, window: float) -> SlidingWindowLog: ...
    def try_acquire(self, cost: int = 1, now: float | None = None) -> Decision:
        """Record ``cost`` units if the window has room for them, and say what happened."""

    @property
    def limit(self) -> int:
        """The most units admitted in any window."""

    @property
    def window(self) -> float:
        """The window's length in seconds."""
