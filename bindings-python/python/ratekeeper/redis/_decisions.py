"""What the Redis-backed classes answer: decisions and reservations."""

from __future__ import annotations

from typing import Any, Callable, Optional

from ratekeeper import Decision
from ratekeeper.redis._faults import _FAULTS


def _numbers(decision: Decision) -> str:
    """The five numbers as ``Decision``'s repr writes them."""
    return Decision.__repr__(decision)[len("Decision(") : -1]


class RedisDecision(Decision):
    """A ``Decision`` made by a Redis-backed limiter.

    ``from_store`` is ``False`` when Redis could not be reached and the
    limiter's ``on_error`` policy decided instead.
    """

    from_store: bool

    def __repr__(self) -> str:
        return f"{type(self).__name__}({_numbers(self)}, from_store={self.from_store})"


class RedisPolicyDecision(RedisDecision):
    """A ``RedisPolicy``'s answer: a ``RedisDecision`` (so a ``Decision``)
    combining every limit's, with ``denied_by`` and ``limits`` as a
    ``PolicyDecision`` has them.

    It is not a ``PolicyDecision``: ``isinstance(d, ratekeeper.PolicyDecision)``
    is ``False``, since that class is native and cannot be subclassed (only a
    ``Policy`` makes one). Test for ``Decision`` (or this class), or read
    ``denied_by``. ``allowed`` only if every limit allowed; ``remaining``
    and ``limit`` are the tightest limit's, ``retry_after`` and
    ``reset_after`` the longest. ``denied_by`` names the limit that denied
    (the one with the longest wait), ``None`` when allowed; ``limits`` lists
    ``(name, Decision)`` for every limit, in the policy's order.
    """

    denied_by: Optional[str]
    limits: list[tuple[str, Decision]]

    def __repr__(self) -> str:
        # As a PolicyDecision's: which limit denied, not every limit's answer.
        return f"{type(self).__name__}({_numbers(self)}, denied_by={self.denied_by!r}, from_store={self.from_store})"


class _Reservation:
    """What both kinds of reservation hold; ``cancel`` is each one's own."""

    __slots__ = ("_cancel", "_due", "_release", "at", "cost", "decision", "from_store", "ok", "wait")

    def __init__(
        self,
        ok: bool,
        wait: float,
        at: float,
        cost: int,
        decision: RedisDecision,
        cancel: Callable[[], Any],
        release: Optional[Callable[[], Any]] = None,
    ) -> None:
        # Annotated here, for the type checkers that read a library's
        # attributes only from annotations (pyright --verifytypes).
        self.ok: bool = ok
        self.wait: float = wait
        self.at: float = at
        self.cost: int = cost
        # As in-process: the decision only says why nothing was booked.
        self.decision: Optional[RedisDecision] = None if ok else decision
        self.from_store: bool = decision.from_store
        self._cancel: Optional[Callable[[], Any]] = cancel if ok and cost else None
        # What a waiting acquire that does not go ahead gives back (see
        # _give_back): the booking, on a bucket only while it is the latest.
        self._release: Optional[Callable[[], Any]] = (release or cancel) if ok and cost else None
        # The slot in µs on the caller's clock, when the booking read it
        # (``clock=``; set by the store that booked: see ``_Core.due``): what
        # a waiting ``acquire`` reads that clock again for (see
        # ``_Core.sleeps``); None on the server's clock, or the fallback's.
        self._due: Optional[int] = None

    def _take(self, release: bool) -> Optional[Callable[[], Any]]:
        """The give-back to run (``release``: the guarded one), once for both."""
        chosen = self._release if release else self._cancel
        self._cancel = self._release = None
        return chosen

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return f"{type(self).__name__}(ok={self.ok}, wait={self.wait!r}, at={self.at!r}, cost={self.cost})"


class RedisReservation(_Reservation):
    """A booking made by ``reserve()`` on Redis: proceed after ``wait`` seconds.

    ``ok``: ``cost`` units are booked for the slot ``at`` (seconds since the
    Unix epoch, on the clock that decided); later requests, from any process,
    are served after it, and ``decision`` is ``None``. Not ``ok``: nothing
    was booked; ``decision`` (a denied ``RedisDecision``) says why and
    ``wait`` is the wait that was needed. ``from_store`` is ``False`` when
    Redis could not be reached and ``on_error`` decided (a booking then held
    by the in-process fallback, or nothing). ``cancel()`` gives an unused
    booking back: to Redis at its slot, or to the fallback at the instant it
    was taken there (the fallback's own reservation's ``cancel()``).
    """

    __slots__ = ()

    def cancel(self) -> None:
        """Gives the booking back at its slot, once (later calls do nothing);
        nothing once a reset through the same limiter or policy found its
        key since it was booked. When Redis cannot be reached, the booking stays
        (it expires with its key)."""
        self._run(self._take(False))

    def _give_back(self) -> None:
        """What a waiting ``acquire`` that does not go ahead gives back, once
        (a ``cancel()`` too): on a bucket limit (GCRA, token bucket), the
        booking only while it is still the latest on its key (another
        process may have booked behind it, whose slot it would hand out a
        second time), else nothing (its slot goes unused); on a window, the
        booking where it was counted; to the fallback, as ``cancel()``."""
        self._run(self._take(True))

    @staticmethod
    def _run(give_back: Optional[Callable[[], Any]]) -> None:
        if give_back is not None:
            try:
                give_back()
            except _FAULTS:
                pass


class AsyncRedisReservation(_Reservation):
    """``RedisReservation`` of the async classes, the same but for
    ``await reservation.cancel()`` (a separate class: its ``cancel`` is a coroutine)."""

    __slots__ = ()

    async def cancel(self) -> None:
        """Gives the booking back at its slot, once (later calls do nothing). When
        Redis cannot be reached, the booking stays (it expires with its key).
        Cancelled, it gives back all the same (the refund runs on in a task
        of its own), and a ``ScriptError`` it meets then has nobody to go to."""
        await self._run(self._take(False))

    async def _give_back(self) -> None:
        """``RedisReservation._give_back``, awaited (cancelled, it gives back all the same)."""
        await self._run(self._take(True))

    @staticmethod
    async def _run(give_back: Optional[Callable[[], Any]]) -> None:
        if give_back is not None:
            try:
                await give_back()
            except _FAULTS:
                pass
