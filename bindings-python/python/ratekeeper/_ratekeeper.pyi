"""Stubs for the native module; import these names from ``ratekeeper``."""

from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable, Iterable, Literal, Mapping, Optional, Union, final, overload

from typing_extensions import Self, TypeAlias, disjoint_base

from ratekeeper._policy import PolicyLimit
from ratekeeper._wait import Acquiring

__all__ = [
    "Bandwidth",
    "Decision",
    "FixedWindow",
    "Gcra",
    "Guarantee",
    "KeyedLimiter",
    "LeakyBucket",
    "Limiter",
    "Policy",
    "PolicyDecision",
    "REDIS_SCRIPT",
    "Reservation",
    "SlidingWindowCounter",
    "SlidingWindowLog",
    "TokenBucket",
    "__version__",
    "guarantee",
]

__version__: str
# The Lua script of distributed limits on Redis (see ratekeeper.redis and core/redis/PROTOCOL.md).
REDIS_SCRIPT: str

# Seconds: int (exact), float (rounded to the nanosecond), Decimal or Fraction (exact).
_Seconds: TypeAlias = Union[float, Decimal, Fraction]
_Clock: TypeAlias = Callable[[], _Seconds]
_Refill: TypeAlias = Literal["greedy", "interval"]
# Keys of a KeyedLimiter and values of a policy's request: an int is its decimal string.
_Key: TypeAlias = Union[str, bytes, int]
_Request: TypeAlias = Optional[Mapping[str, _Key]]
_Eviction: TypeAlias = Literal["nearest_fresh", "refuse"]
_Data: TypeAlias = Union[bytes, bytearray, memoryview]
_Calendar: TypeAlias = Literal["day", "week", "month"]
_Algorithm: TypeAlias = Literal[
    "token_bucket", "gcra", "leaky_bucket", "sliding_window_log", "sliding_window_counter", "fixed_window"
]

@disjoint_base
class Decision:
    """The outcome of one request.

    Built from Python (a store's answer), ``name`` and each name of
    ``limits`` follow the rule of limiters' names: printable ASCII, not empty."""

    def __new__(
        cls,
        allowed: bool,
        remaining: int,
        limit: int,
        retry_after: _Seconds,
        reset_after: _Seconds,
        *,
        name: str = "default",
        window: _Seconds = 0.0,
        limits: Optional[Iterable[tuple[str, _Seconds, Decision]]] = None,
    ) -> Self: ...
    def __reduce__(self) -> tuple[Any, ...]: ...
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
        """Seconds to wait until the same request would be allowed (0.0 when allowed).

        Given a float or int ``now``, the float whose sum with ``now`` reaches
        that instant (on the epoch, up to a quarter of a microsecond longer)."""

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
class PolicyDecision(Decision):
    """The outcome of one request against a ``Policy``.

    Made by a ``Policy`` (or copied from one), not subclassable: a ``RedisPolicy``'s
    answer, ``ratekeeper.redis.RedisPolicyDecision``, is a ``Decision``
    with the same ``denied_by`` and ``limits``, but not a ``PolicyDecision``."""

    @property
    def denied_by(self) -> Optional[str]:
        """The name of the limit that denied, or ``None`` when allowed."""

    @property
    def limits(self) -> list[tuple[str, Decision]]:
        """Every limit's own decision, as ``(name, Decision)``, in the policy's order."""

@final
class Reservation:
    """A booking made by ``limiter.reserve()``: proceed after ``wait`` seconds."""

    @property
    def _seq(self) -> int: ...
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

    def _give_back(self) -> None: ...
    def __bool__(self) -> bool: ...

@disjoint_base
class Limiter:
    """A rate limiter; the base class of every algorithm class."""

    def try_acquire(self, cost: int = 1, now: Optional[_Seconds] = None) -> Decision:
        """Take ``cost`` units if the limiter has them, and say what happened."""

    def peek(self, cost: int = 1, now: Optional[_Seconds] = None) -> Decision:
        """The Decision ``try_acquire`` would give, consuming nothing."""

    def reserve(
        self, cost: int = 1, *, max_wait: Optional[_Seconds] = None, now: Optional[_Seconds] = None
    ) -> Reservation:
        """Book ``cost`` units for the earliest slot they fit, within ``max_wait`` seconds."""

    def refund(self, cost: int, *, taken_at: Optional[_Seconds] = None) -> None:
        """Give back ``cost`` units taken at ``taken_at`` and not used."""

    def reconfigure(self, other: Self, *, now: Optional[_Seconds] = None) -> None:
        """Replace this limiter's limits with those of ``other``, keeping its state."""

    def acquire(self, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """Wait until ``cost`` units are ours, their slot come on the limiter's clock;
        raise ``RateLimited`` at once when the wait booked would pass ``timeout``."""

    async def acquire_async(self, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """``acquire`` for asyncio."""

    def acquiring(self, cost: int = 1, timeout: Optional[_Seconds] = None) -> Acquiring:
        """``acquire`` as a context manager and decorator, for sync and async code."""

    def _book(self, cost: int = 1, timeout: Optional[_Seconds] = None, *, waiter: bool = False) -> Optional[Reservation]: ...
    def _left(self, reservation: Reservation) -> float: ...
    def _gives_back_anywhere(self) -> bool: ...
    def _moves_up(self) -> bool: ...
    def _rebook(
        self,
        since: int,
        latest_only: bool,
        cancels: list[tuple[Reservation, tuple[Any, ...]]],
        requests: list[tuple[Any, ...]],
    ) -> Optional[list[Union[Reservation, BaseException]]]: ...
    def _noop(self, cost: object = None, now: object = None) -> None: ...
    def headers(self, decision: Decision) -> dict[str, str]:
        """The HTTP RateLimit header values of ``decision``, as a dict.

        A policy's decision (a ``PolicyDecision``, a ``RedisPolicyDecision``)
        raises ``RateLimitTypeError`` (``invalid_type``): ``policy.headers``
        takes it."""

    def to_bytes(self) -> bytes:
        """The limiter's state as bytes, for ``restore`` and ``from_bytes``."""

    def restore(self, data: _Data) -> None:
        """Replace this limiter's state with the one ``data`` holds."""

    @classmethod
    def from_bytes(cls, data: _Data, *args: Any, **kwargs: Any) -> Self:
        """A limiter made by ``cls(*args, **kwargs)``, holding the state ``data``."""

    def __reduce__(self) -> tuple[Any, ...]: ...

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
        """The limiter's name, as its RateLimit headers spell it.

        A name is a structured-field string in the headers: printable ASCII
        (space to ``~``) and not empty, or the constructor raises
        ``RateLimitError`` (``invalid_value``)."""

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

    def __reduce__(self) -> tuple[Any, ...]: ...
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

    @overload
    @classmethod
    def from_bytes(
        cls,
        data: _Data,
        capacity: int,
        refill_tokens: int,
        refill_period: _Seconds,
        *,
        initial_tokens: Optional[int] = None,
        refill: _Refill = "greedy",
        name: str = "default",
        clock: Optional[_Clock] = None,
    ) -> TokenBucket: ...
    @overload
    @classmethod
    def from_bytes(
        cls, data: _Data, bandwidths: Iterable[Bandwidth], *, name: str = "default", clock: Optional[_Clock] = None
    ) -> TokenBucket:
        """A bucket holding the state ``data``, made as the constructor or
        ``from_bandwidths`` makes it: ``TokenBucket.from_bytes(data, bucket.bandwidths)``."""

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
    @staticmethod
    def with_calendar(
        limit: int, calendar: _Calendar, *, name: str = "default", clock: Optional[_Clock] = None
    ) -> SlidingWindowCounter:
        """Windows of the UTC calendar: at most ``limit`` units each day, ISO week or month."""

    @property
    def calendar(self) -> Optional[_Calendar]:
        """The calendar of the windows, or ``None``."""

@final
class FixedWindow(Limiter):
    """At most ``limit`` units in each aligned window of ``window`` seconds."""

    def __new__(
        cls, limit: int, window: _Seconds, *, name: str = "default", clock: Optional[_Clock] = None
    ) -> FixedWindow: ...
    @staticmethod
    def with_calendar(
        limit: int, calendar: _Calendar, *, name: str = "default", clock: Optional[_Clock] = None
    ) -> FixedWindow:
        """Windows of the UTC calendar: at most ``limit`` units each day, ISO week or month."""

    @property
    def calendar(self) -> Optional[_Calendar]:
        """The calendar of the windows, or ``None``."""

@final
class KeyedLimiter:
    """One limiter per key, all configured like ``limiter``, in one store."""

    def __new__(
        cls, limiter: Limiter, *, max_keys: Optional[int] = None, eviction: _Eviction = "nearest_fresh"
    ) -> KeyedLimiter: ...
    def try_acquire(self, key: _Key, cost: int = 1, now: Optional[_Seconds] = None) -> Decision:
        """Take ``cost`` units from ``key``'s limiter if it has them, and say what happened."""

    def peek(self, key: _Key, cost: int = 1, now: Optional[_Seconds] = None) -> Decision:
        """The Decision ``try_acquire`` would give, consuming nothing."""

    def reserve(
        self, key: _Key, cost: int = 1, *, max_wait: Optional[_Seconds] = None, now: Optional[_Seconds] = None
    ) -> Reservation:
        """Book ``cost`` units of ``key``'s limiter for the earliest slot they fit."""

    def refund(self, key: _Key, cost: int, *, taken_at: Optional[_Seconds] = None) -> None:
        """Give back ``cost`` units taken at ``taken_at`` and not used."""

    def acquire(self, key: _Key, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """Wait until ``cost`` units of ``key``'s limiter are ours, their slot come on the limiter's clock;
        raise ``RateLimited`` at once when the wait booked would pass ``timeout``."""

    async def acquire_async(self, key: _Key, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """``acquire`` for asyncio."""

    def acquiring(self, key: _Key, cost: int = 1, timeout: Optional[_Seconds] = None) -> Acquiring:
        """``acquire`` as a context manager and decorator, for sync and async code."""

    def _book(self, key: _Key, cost: int = 1, timeout: Optional[_Seconds] = None, *, waiter: bool = False) -> Optional[Reservation]: ...
    def _left(self, reservation: Reservation) -> float: ...
    def _gives_back_anywhere(self) -> bool: ...
    def _moves_up(self) -> bool: ...
    def _rebook(
        self,
        since: int,
        latest_only: bool,
        cancels: list[tuple[Reservation, tuple[Any, ...]]],
        requests: list[tuple[Any, ...]],
    ) -> Optional[list[Union[Reservation, BaseException]]]: ...
    def _noop(self, key: object = None, cost: object = None, now: object = None) -> None: ...
    def try_acquire_batch(self, key: _Key, costs: Iterable[int], now: Optional[_Seconds] = None) -> list[Decision]:
        """Decide each of ``costs`` for ``key``, in order, with one lookup."""

    def headers(self, decision: Decision) -> dict[str, str]:
        """The HTTP RateLimit header values of ``decision``, as a dict.

        A policy's decision (a ``PolicyDecision``, a ``RedisPolicyDecision``)
        raises ``RateLimitTypeError`` (``invalid_type``): ``policy.headers``
        takes it."""

    def reclaim(self, now: Optional[_Seconds] = None) -> None:
        """Drop every key back to fresh at ``now``."""

    def reset(self, key: _Key) -> bool:
        """Put ``key`` back to fresh, as a key never seen; whether it was held."""

    def __len__(self) -> int: ...
    @property
    def limit(self) -> int:
        """The most units a key admits at once."""

    @property
    def window(self) -> float:
        """Seconds over which a key's ``limit`` units are granted."""

    @property
    def algorithm(self) -> str:
        """Every key's algorithm, e.g. ``"gcra"``."""

    @property
    def name(self) -> str:
        """The store's name, as its RateLimit headers spell it."""

    @property
    def max_keys(self) -> Optional[int]:
        """The most keys the store holds, or ``None``."""

    @property
    def eviction(self) -> _Eviction:
        """What happens at ``max_keys``."""

    @property
    def limiter(self) -> Limiter:
        """A fresh limiter of every key's configuration (and the store's name and clock)."""

@final
class Policy:
    """Several limits, each keyed by fields of the request (or global), decided together.

    Its clock by default is ``time.time`` once a limit follows a calendar,
    else ``time.monotonic``."""

    def __new__(
        cls,
        config: Union[None, str, Mapping[str, Any]] = None,
        *,
        algorithm: Optional[_Algorithm] = None,
        by: Optional[Iterable[str]] = None,
        clock: Optional[_Clock] = None,
    ) -> Policy: ...
    @staticmethod
    def from_rates(
        rates: str,
        *,
        algorithm: Optional[_Algorithm] = "token_bucket",
        by: Optional[Iterable[str]] = (),
        clock: Optional[_Clock] = None,
    ) -> Policy:
        """A policy of one limit per rate of ``rates`` (``"10/second;100/day"``)."""

    @staticmethod
    def from_config(config: Union[str, Mapping[str, Any]], *, clock: Optional[_Clock] = None) -> Policy:
        """A policy from a configuration: a dict ``{"limits": [...]}`` or its JSON."""

    def add(self, name: str, limiter: Union[Limiter, KeyedLimiter], *, by: Optional[Iterable[str]] = None) -> None:
        """Add a limit called ``name``, keyed by the request fields ``by``.

        Each key starts as a fresh copy of ``limiter``'s configuration (not
        its state nor its name); a ``KeyedLimiter`` brings its ``max_keys``
        and ``eviction`` too, not its keys. ``name`` is unique in the policy
        and follows the rule of limiters' names (printable ASCII, not empty),
        and ``by`` names no field twice, or ``RateLimitError``
        (``invalid_value``) is raised.

        A calendar limit added to a policy without a clock of its own that
        holds state on ``time.monotonic`` raises ``RateLimitError``."""

    def try_acquire(self, request: _Request = None, cost: int = 1, now: Optional[_Seconds] = None) -> PolicyDecision:
        """Take ``cost`` units from every limit if each has them, and say what happened."""

    def peek(self, request: _Request = None, cost: int = 1, now: Optional[_Seconds] = None) -> PolicyDecision:
        """The PolicyDecision ``try_acquire`` would give, consuming nothing."""

    def reserve(
        self, request: _Request = None, cost: int = 1, *, max_wait: Optional[_Seconds] = None, now: Optional[_Seconds] = None
    ) -> Reservation:
        """Book ``cost`` units of every limit for the earliest slot they all fit."""

    def refund(self, request: _Request, cost: int, *, taken_at: Optional[_Seconds] = None) -> None:
        """Give back ``cost`` units taken at ``taken_at`` and not used, in every limit."""

    def acquire(self, request: _Request = None, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """Wait until ``cost`` units of every limit are ours, their slot come on the policy's clock;
        raise ``RateLimited`` at once when the wait booked would pass ``timeout``."""

    async def acquire_async(
        self, request: _Request = None, cost: int = 1, timeout: Optional[_Seconds] = None
    ) -> None:
        """``acquire`` for asyncio."""

    def acquiring(self, request: _Request = None, cost: int = 1, timeout: Optional[_Seconds] = None) -> Acquiring:
        """``acquire`` as a context manager and decorator, for sync and async code."""

    def _book(
        self, request: _Request = None, cost: int = 1, timeout: Optional[_Seconds] = None, *, waiter: bool = False
    ) -> Optional[Reservation]: ...
    def _left(self, reservation: Reservation) -> float: ...
    def _gives_back_anywhere(self) -> bool: ...
    def _moves_up(self) -> bool: ...
    def _rebook(
        self,
        since: int,
        latest_only: bool,
        cancels: list[tuple[Reservation, tuple[Any, ...]]],
        requests: list[tuple[Any, ...]],
    ) -> Optional[list[Union[Reservation, BaseException]]]: ...
    def _single(self) -> Optional[Limiter]: ...
    def _noop(self, request: object = None, cost: object = None, now: object = None) -> None: ...
    def headers(self, decision: PolicyDecision) -> dict[str, str]:
        """The HTTP RateLimit header values of ``decision``, every limit it lists."""

    def reclaim(self, now: Optional[_Seconds] = None) -> None:
        """Drop the keys of every limit that are back to fresh at ``now``."""

    def reset(self, request: _Request) -> int:
        """Put ``request``'s key back to fresh in every limit keyed by fields it all gives; how many held it."""

    def keyed_by(self, name: str) -> tuple[str, ...]:
        """The fields limit ``name`` is keyed by (empty for a global limit); ``RateLimitError``
        (``invalid_value``) for a name no limit has."""

    def __len__(self) -> int:
        """The number of limits (JS: ``policy.size``)."""

    @property
    def names(self) -> tuple[str, ...]:
        """The limits' names, in order."""

    @property
    def limits(self) -> tuple[PolicyLimit, ...]:
        """The limits, in order: each a ``PolicyLimit`` ``(name, by)``, as JS's ``policy.limits`` lists ``{ name, by }``."""

@final
class Guarantee:
    """What a limiter or policy guarantees, exactly and in the worst case (made by ``guarantee``)."""

    def max_in_window(self, window: _Seconds) -> int:
        """The most units admitted in any window of ``window`` seconds, ``[t, t + window)``;
        a fraction of a nanosecond counts as a whole one."""

    @property
    def name(self) -> str:
        """The limit's name, or ``"policy"`` for a whole policy."""

    @property
    def algorithm(self) -> str:
        """The algorithm's name, or ``"policy"`` for a whole policy."""

    @property
    def exact(self) -> bool:
        """Whether every figure is attained (else a safe upper bound)."""

    @property
    def burst(self) -> int:
        """The most units admitted at one instant."""

    @property
    def sustained(self) -> Optional[tuple[int, int]]:
        """The sustained rate exactly, ``(units, nanoseconds)`` (``None`` for a policy with no limits)."""

    @property
    def per_second(self) -> Optional[float]:
        """The sustained rate in units per second."""

    @property
    def retry_after(self) -> float:
        """Seconds a client that has spent everything waits for one more unit."""

    @property
    def reset_after(self) -> float:
        """Seconds until that client's limiter is fresh (full) again."""

    @property
    def strict(self) -> Optional[tuple[int, float]]:
        """The strict sliding window of the same nominal rate, ``(N, W seconds)`` (``None`` for a policy)."""

    @property
    def excess(self) -> Optional[int]:
        """How many more units than that strict window it admits in a window of ``W`` (``None`` for a policy)."""

    @property
    def limits(self) -> tuple[Guarantee, ...]:
        """A policy's limits, each with its own guarantee (empty for a limiter)."""

def guarantee(subject: Union[Limiter, KeyedLimiter, Policy]) -> Guarantee:
    """The guarantee of ``subject``'s configuration, of each key for a ``KeyedLimiter`` (its state is ignored)."""
