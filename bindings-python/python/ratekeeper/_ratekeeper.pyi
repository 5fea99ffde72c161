"""Stubs for the native module; import these names from ``ratekeeper``."""

from decimal import Decimal
from fractions import Fraction
from typing import Callable, Iterable, Literal, Optional, Union, final

from typing_extensions import Self, TypeAlias, disjoint_base

from ratekeeper._wait import Acquiring

__all__ = [
    "Bandwidth",
    "Decision",
    "FixedWindow",
    "Gcra",
    "LeakyBucket",
    "Limiter",
    "Reservation",
    "SlidingWindowCounter",
    "SlidingWindowLog",
    "TokenBucket",
    "__version__",
]

__version__: str

# Seconds: int (exact), float (rounded to the nanosecond), Decimal or Fraction (exact).
_Seconds: TypeAlias = Union[float, Decimal, Fraction]
_Clock: TypeAlias = Callable[[], _Seconds]
_Refill: TypeAlias = Literal["greedy", "interval"]

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

    def headers(self) -> dict[str, str]:
        """The HTTP RateLimit header values of this decision, as a dict."""

    def __bool__(self) -> bool: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Reservation:
    """A booking made by ``limiter.reserve()``: proceed after ``wait`` seconds."""

    @property
    def ok(self) -> bool:
        """Whether the units were booked."""

    @property
    def wait(self) -> float:
        """Seconds from the reservation until the booked slot (when not ``ok``: the wait needed)."""

    @property
    def at(self) -> float:
        """The slot, in seconds on the limiter's clock: ``now + wait``."""

    @property
    def cost(self) -> int:
        """The units the reservation asked for."""

    @property
    def decision(self) -> Optional[Decision]:
        """Why nothing was booked (a denied Decision), or ``None`` when ``ok``."""

    def cancel(self) -> None:
        """Gives the booking back, exactly at its slot."""

    def __bool__(self) -> bool: ...

@disjoint_base
class Limiter:
    """A rate limiter; the base class of every algorithm class."""

    def try_acquire(self, cost: int = 1, now: Optional[_Seconds] = None) -> Decision:
        """Take ``cost`` units if the limiter has them, and say what happened."""

    def peek(self, cost: int = 1, now: Optional[_Seconds] = None) -> Decision:
        """The Decision ``try_acquire`` would give, consuming nothing."""

    def reserve(
        self, cost: int = 1, *, max_wait: _Seconds = ..., now: Optional[_Seconds] = None
    ) -> Reservation:
        """Book ``cost`` units for the earliest slot they fit, within ``max_wait`` seconds."""

    def refund(self, cost: int, *, taken_at: Optional[_Seconds] = None) -> None:
        """Give back ``cost`` units taken at ``taken_at`` and not used."""

    def reconfigure(self, other: Self, *, now: Optional[_Seconds] = None) -> None:
        """Replace this limiter's limits with those of ``other``, keeping its state."""

    def acquire(self, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """Wait until ``cost`` units are ours; raise ``RateLimited`` past ``timeout``."""

    async def acquire_async(self, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """``acquire`` for asyncio."""

    def acquiring(self, cost: int = 1, timeout: Optional[_Seconds] = None) -> Acquiring:
        """``acquire`` as a context manager and decorator, for sync and async code."""

    def _book(self, cost: int, timeout: Optional[_Seconds] = None) -> Reservation: ...
    def _noop(self, cost: object = None, now: object = None) -> None: ...
    def headers(self, decision: Decision) -> dict[str, str]:
        """The HTTP RateLimit header values of ``decision``, as a dict."""

    @property
    def limit(self) -> int:
        """The most units admitted at once."""

    @property
    def window(self) -> float:
        """Seconds over which ``limit`` units are granted (RateLimit-Policy's ``w``)."""

    @property
    def algorithm(self) -> str:
        """The algorithm's name, e.g. ``"token_bucket"``."""

    @property
    def name(self) -> str:
        """The limiter's name, as its RateLimit headers spell it."""

@final
class Bandwidth:
    """One rule of a token bucket, for ``TokenBucket.from_bandwidths``."""

    def __new__(
        cls,
        capacity: int,
        refill_tokens: int,
        refill_period: _Seconds,
        *,
        initial_tokens: Optional[int] = None,
        refill: _Refill = "greedy",
    ) -> Bandwidth: ...
    @property
    def capacity(self) -> int:
        """The most tokens this bandwidth holds."""

    @property
    def refill_tokens(self) -> int:
        """Tokens added every ``refill_period``."""

    @property
    def refill_period(self) -> float:
        """Seconds over which ``refill_tokens`` are added."""

    @property
    def initial_tokens(self) -> int:
        """Tokens held at the bucket's first call."""

    @property
    def refill(self) -> _Refill:
        """``"greedy"`` or ``"interval"``."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class TokenBucket(Limiter):
    """A token bucket: bursts of up to ``capacity``, refilled exactly."""

    def __new__(
        cls,
        capacity: int,
        refill_tokens: int,
        refill_period: _Seconds,
        *,
        initial_tokens: Optional[int] = None,
        refill: _Refill = "greedy",
        name: str = "default",
        clock: Optional[_Clock] = None,
    ) -> TokenBucket: ...
    @staticmethod
    def from_bandwidths(
        bandwidths: Iterable[Bandwidth], *, name: str = "default", clock: Optional[_Clock] = None
    ) -> TokenBucket:
        """A token bucket enforcing every one of ``bandwidths`` (1 to 4)."""

    @property
    def bandwidths(self) -> tuple[Bandwidth, ...]:
        """Every bandwidth the bucket enforces."""

    @property
    def capacity(self) -> int:
        """The most tokens the bucket holds (of its first bandwidth)."""

    @property
    def refill_tokens(self) -> int:
        """Tokens added every ``refill_period`` (of its first bandwidth)."""

    @property
    def refill_period(self) -> float:
        """Seconds over which ``refill_tokens`` are added (of its first bandwidth)."""

    @property
    def initial_tokens(self) -> int:
        """Tokens held at the first call (of its first bandwidth)."""

    @property
    def refill(self) -> _Refill:
        """``"greedy"`` or ``"interval"`` (of its first bandwidth)."""

@final
class Gcra(Limiter):
    """The generic cell rate algorithm: one unit every ``emission_interval``, ``burst`` at once."""

    def __new__(
        cls,
        burst: int,
        emission_interval: _Seconds,
        *,
        name: str = "default",
        clock: Optional[_Clock] = None,
    ) -> Gcra: ...
    @staticmethod
    def per_period(
        burst: int,
        tokens: int,
        period: _Seconds,
        *,
        name: str = "default",
        clock: Optional[_Clock] = None,
    ) -> Gcra:
        """A Gcra admitting ``burst`` at once and ``tokens`` every ``period`` seconds."""

    @property
    def burst(self) -> int:
        """The most units admitted at once."""

    @property
    def emission_interval(self) -> float:
        """Seconds between two units at the sustained rate."""

@final
class LeakyBucket(Limiter):
    """A queue: units leave exactly ``interval`` seconds apart, at most ``capacity`` queued."""

    def __new__(
        cls, capacity: int, interval: _Seconds, *, name: str = "default", clock: Optional[_Clock] = None
    ) -> LeakyBucket: ...
    @property
    def capacity(self) -> int:
        """The most units the queue holds."""

    @property
    def interval(self) -> float:
        """Seconds each unit takes to leave."""

@final
class SlidingWindowLog(Limiter):
    """At most ``limit`` units in any window of ``window`` seconds, exactly."""

    def __new__(
        cls, limit: int, window: _Seconds, *, name: str = "default", clock: Optional[_Clock] = None
    ) -> SlidingWindowLog: ...

@final
class SlidingWindowCounter(Limiter):
    """About ``limit`` units per ``window`` seconds, from two counts."""

    def __new__(
        cls, limit: int, window: _Seconds, *, name: str = "default", clock: Optional[_Clock] = None
    ) -> SlidingWindowCounter: ...

@final
class FixedWindow(Limiter):
    """At most ``limit`` units in each aligned window of ``window`` seconds."""

    def __new__(
        cls, limit: int, window: _Seconds, *, name: str = "default", clock: Optional[_Clock] = None
    ) -> FixedWindow: ...
