"""What the sync and async classes share: keys, arguments, replies, the fallback."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any, Callable, Optional, Union

from ratekeeper import Decision, KeyedLimiter, Limiter, Policy, RateLimitError, Reservation
from ratekeeper._wait import _left_after, flag
from ratekeeper.redis._values import (
    _ceil_micros,
    _counted,
    _error,
    _Fallback,
    _infinite,
    _instant,
    _Key,
    _key_part,
    _micros,
    _Reply,
    _Seconds,
    _T,
    _Taken,
    _type_error,
    _utf8,
    MAX_SPAN,
)
from ratekeeper.redis._decisions import RedisDecision, RedisPolicyDecision, _Reservation
from ratekeeper.redis._limits import _Limit


def _give_back_fallback(core: _Core, taken: Iterable[tuple[Any, int, RedisDecision]], took: Optional[_Taken]) -> int:
    """Of what was taken for callers that left, ``(target, cost, answer)``
    each, gives the fallback's back (``took`` is ``None`` when it decided);
    returns the units to give back to Redis."""
    given = 0
    for target, cost, answer in taken:
        if answer.allowed and took is None:
            core.unfallback(target, cost)
        elif answer.allowed:
            given += cost
    return given


class _Core:
    """What the sync and async classes share: keys, arguments, replies, faults."""

    # The in-process class that can decide for the same target as this
    # store (a key, or a request), besides a plain Limiter.
    KEYED_FALLBACK: type = KeyedLimiter

    def __init__(
        self,
        limits: list[_Limit],
        prefix: str,
        clock: Optional[Callable[[], _Seconds]],
        on_error: _Fallback,
        batching: bool,
    ) -> None:
        if not isinstance(prefix, str):
            raise _type_error("prefix", "a str", prefix)
        if "{" in prefix or "}" in prefix:
            # Keys carry a hash tag, {...}, so that a request's keys share a
            # Cluster slot: a brace in the prefix would be the tag instead.
            raise _error(f"`prefix` must not contain '{{' or '}}' (keys carry their own hash tag): {prefix!r}")
        if not prefix:
            # A policy with a global limit is tagged by its prefix, and Redis
            # reads an empty tag, {}, as none: its keys would span slots.
            raise _error("`prefix` must not be empty (it is the hash tag of a policy with a global limit)")
        if flag(batching) is None:
            raise _type_error("batching", "a bool", batching)
        batching = bool(batching)
        if clock is not None and not callable(clock):
            raise _type_error("clock", "a callable or None", clock)
        if not (on_error in ("open", "closed") or isinstance(on_error, (Limiter, self.KEYED_FALLBACK))):
            expected = f"'open', 'closed' or an in-process Limiter or {self.KEYED_FALLBACK.__name__}"
            if isinstance(on_error, str):
                raise _error(f"`on_error` must be {expected}, not {on_error!r}")
            raise _type_error("on_error", expected, on_error)
        self.limits = limits
        # Names are written as values are, `<length>:<name>`, so that no name
        # ending like a value (`a:2:x`) shares a key with another name's.
        self.names = [_counted(limit.key) for limit in limits]
        self.named = list(zip(limits, self.names))
        self.prefix = _utf8(prefix, "prefix")
        self.clock = clock
        self.on_error = on_error
        self.batching = batching
        self.limit = min(limit.limit for limit in limits)
        # The fields a fallback Policy's limits are keyed by, beside the
        # store's: every request must have them too, so that one lacking
        # them fails at once, not only while Redis is down. Read again by
        # keys() once the Policy has had limits added: (its size, fields).
        self.fallback_fields: tuple[int, dict[str, str]] = (0, {})
        # Fields every limit is keyed by: the hash tag, so that a request's keys share a slot.
        self.common = [f for f in limits[0].by if all(f in limit.by for limit in limits)]
        self.config: list[Union[str, int]] = [len(limits)]
        for limit in limits:
            self.config += limit.args

    def _fallback_fields(self) -> dict[str, str]:
        """Each field a fallback ``Policy``'s limits are keyed by, with the
        first such limit's name, as its limits are now: one ``add``-ed after
        construction keys it by fields too. A Policy only ever gains limits,
        so its size tells when to read them again (one tuple, replaced whole,
        as threads may read it meanwhile)."""
        size, fields = self.fallback_fields
        if isinstance(self.on_error, Policy) and len(self.on_error) != size:
            limits = self.on_error.limits
            fields = {}
            for name, by in limits:
                for field in by:
                    fields.setdefault(field, name)
            self.fallback_fields = (len(limits), fields)
        return fields

    def keys(self, request: Mapping[str, _Key], argument: Optional[str] = None) -> list[bytes]:
        """Each limit's key: ``prefix{tag}:name:key``, the tag shared by all,
        the name and each value of the key written ``<length>:<bytes>``.
        A bad value's error names ``request[field]``, or ``argument`` when the
        request stands for that one argument (a limiter's ``key``)."""
        for field, name in self._fallback_fields().items():
            if field not in request:
                raise _error(f"`request` lacks the field {field!r} that on_error's limit {name!r} is keyed by")
        return self._keys_of(request, self.named, argument)

    def reset_keys(self, request: Mapping[str, _Key]) -> list[bytes]:
        """The keys ``reset(request)`` unlinks: the request's key in every
        limit keyed by fields it all gives, as an in-process ``Policy``
        resets (never a global limit's)."""
        reached = [(limit, name) for limit, name in self.named if _reaches(limit, request)]
        if not reached:
            raise _error("`request` lacks a field of each limit keyed by fields, so it resets none")
        return self._keys_of(request, reached)

    def _keys_of(
        self, request: Mapping[str, _Key], limits: list[tuple[_Limit, bytes]], argument: Optional[str] = None
    ) -> list[bytes]:
        """The keys of ``limits`` (each with its written name) for
        ``request``, which must give their fields: ``prefix{tag}:name:key``."""
        values: dict[str, bytes] = {}
        for limit, _ in limits:
            for field in limit.by:
                if field not in values:
                    if field not in request:
                        raise _error(f"`request` lacks the field {field!r} that limit {limit.name!r} is keyed by")
                    values[field] = _counted(_key_part(request[field], argument or f"request[{field!r}]"))
        # No field in common (a global limit): the whole policy on the slot of
        # its prefix. A limit keyed by fields has every field in common.
        tag = b"".join(values[f] for f in self.common) if self.common else self.prefix
        return [self.prefix + b"{" + tag + b"}:" + name + b":" + b"".join(values[f] for f in limit.by) for limit, name in limits]

    def now(self, now: Optional[_Seconds]) -> str:
        """ARGV's ``now``: the caller's, or the clock's reading, in µs; empty
        for the server's clock."""
        if now is not None:
            return _instant(now, "now")
        if self.clock is None:
            return ""
        # What the clock gave, named as the in-process classes (and the Node
        # client) name it: the caller passed no `now`. None is no instant,
        # not the server's clock, which a clock given chose against.
        return _instant(self.clock(), "clock")

    def max_wait(self, max_wait: Optional[_Seconds]) -> str:
        """ARGV's ``max_wait`` in µs, at most ``MAX_SPAN``: ``None`` and infinity mean that much."""
        if max_wait is None or _infinite(max_wait):
            return str(MAX_SPAN)
        return str(min(_micros(max_wait, "max_wait"), MAX_SPAN))

    def booking(
        self, target: Any, cost: int, reply: Optional[Sequence[int]]
    ) -> tuple[bool, float, float, RedisDecision, Optional[Fraction], Optional[Reservation]]:
        """A reserve reply (``None``: Redis failed, the fallback decides) as
        ``(ok, wait, at, decision, slot, local)``: the slot exact, ``None`` for
        the fallback's; ``local`` the in-process fallback's own booking, which
        a cancel gives back (``None`` when the fallback booked nothing)."""
        if reply is None:
            d, local = self.fallback_booking(target, cost)
            return d.allowed, d.retry_after, time.time() + d.retry_after, d, None, local
        (d,) = self.decisions(reply[2:], 1)
        slot = Fraction(reply[0] + reply[2], 1_000_000)
        return bool(reply[1]), reply[2] / 1e6, float(slot), d, slot, None

    def due(self, reply: Optional[Sequence[int]], now: Optional[_Seconds]) -> Optional[int]:
        """The slot of a reserve ``reply`` in µs on the caller's clock, when
        it booked one there, read from the clock (``clock=``, no ``now``):
        booked at the clock's reading (the reply's ``now``), a wait later.
        ``None`` when nothing was booked, when Redis failed (the fallback
        decided), on the server's clock, or at a ``now`` given: no clock to
        read again for it (see ``sleeps``)."""
        if reply is None or not reply[1] or self.clock is None or now is not None:
            return None
        return reply[0] + reply[2]

    def sleeps(self, reservation: _Reservation, elapsed: Callable[[], float]) -> Iterator[float]:
        """The sleeps of a waiting ``acquire`` until the slot of
        ``reservation``, its booking, one after another: the wait booked;
        then, when it was booked on the caller's ``clock=`` (``_due``), what
        is left until the slot on that clock, read after each sleep (a
        ``clock=`` counting coarser than the sleeper's, in tenths of a
        second, or running behind it, has not reached the slot when the wait
        has passed on the sleeper's own), until it has come there: as the
        in-process ``acquire`` waits on the limiter's clock, by the same rule
        (``ratekeeper._wait._left_after``, with ``elapsed``, the sleeper's
        own clock, telling a sleep that took its time from a test's sleep
        replaced to skip the wait). No Redis round trip: the slot is known
        from the booking. A clock that raises there (read and checked as for
        a booking) raises from the iteration, for the caller to give its
        booking back; a clock that never reaches the slot keeps the caller
        waiting, as in-process. ``timeout`` bounds none of it: it bounds the
        wait booked, at booking, as in-process.

        On the server's clock (the default: the script reads ``TIME``), one
        sleep: reading that clock again costs a round trip per ``acquire``,
        and the sleep begins once the reply is in, after the script read it,
        so a sleep that takes its wait on the sleeper's own clock ends after
        the slot there (clock rates aside), and the next call's script reads
        it a round trip later still. Only a timer that fires early (uvloop's
        count whole milliseconds, as Node's do) may end it sooner, by up to a
        millisecond, less those round trips."""
        wait = reservation.wait
        while True:
            began = elapsed()
            yield wait
            due = reservation._due
            if due is None or wait <= 0:
                return
            # Read as a booking reads it (the errors naming `clock`).
            left = max(due - int(self.now(None)), 0) / 1_000_000
            wait = _left_after(left, wait, elapsed() - began)
            if wait <= 0:
                return

    def marks(self, reply: Optional[Sequence[int]]) -> list[int]:
        """A reserve reply's marks (``[]`` for none: Redis failed): each
        limit's count then its integers, then each key's birth, which a
        guarded refund sends back as they are (PROTOCOL.md, "Guarded refund")."""
        if reply is None:
            return []
        n = len(self.limits)
        # After `now, booked, wait` and the decision at now (see decisions).
        return list(reply[3 + (6 if n == 1 else 6 + 5 * n) :])

    def unguarded(self, marks: Sequence[int]) -> list[Union[str, int]]:
        """What a refund of the booking of ``marks`` (a reply's, see
        ``marks``) sends to give it back as it is (``cancel()``: "the latest
        first"): an empty count for each limit's mark, then the keys' births,
        so that a key reset since (by any process) or expired and made again
        gives nothing back (PROTOCOL.md, "Guarded refund")."""
        if not marks:
            return []
        n = len(self.limits)
        return [*([""] * n), *marks[-n:]]

    def taken(self, reply: list[int], count: int) -> _Taken:
        """What an ``acquire`` reply of ``count`` decisions (as integers)
        took its units at: the instant decided at, and the marks and births
        that follow the decisions, which a give-back sends back (PROTOCOL.md)."""
        n = len(self.limits)
        return _Taken(Fraction(reply[0], 1_000_000), reply[1 + count * (6 if n == 1 else 6 + 5 * n) :])

    def args(self, mode: str, now: str, costs: Sequence[int], extra: Sequence[Union[str, int]] = ()) -> list[Union[str, int]]:
        """ARGV for ``mode``; ``extra``: the mode's arguments after the costs
        (``acquire`` and ``reserve``, which may write a key first, end with a nonce)."""
        args: list[Union[str, int]] = ["1", mode, now, *self.config, len(costs), *costs, *extra]
        if mode in ("acquire", "reserve"):
            # The birth of a key this call writes first where the script may
            # not call TIME (PROTOCOL.md, "ACL"): random, so that a key reset
            # and written again at the same instant of the callers' clock gets
            # another birth. Never 0, which a reply sends for no birth. From
            # the system's generator, not `random`'s: a user's random.seed()
            # neither repeats it in two processes nor sees its sequence moved.
            args.append(1 + secrets.randbits(52))
        return args

    def decisions(self, reply: _Reply, count: int) -> list[RedisDecision]:
        if isinstance(reply, (bytes, str)):
            # A 'text' reply: one string of the integers (PROTOCOL.md).
            reply = [int(number) for number in reply.split()]
        n = len(self.limits)
        # A lone limit's own answer is the combined one, which the script
        # does not send twice: read it from there.
        stride, fields = (6, (0, 2, 3, 4, 5)) if n == 1 else (6 + 5 * n, (0, 1, 2, 3, 4))
        out = []
        for j in range(count):
            base = 1 + j * stride
            starts = [base] if n == 1 else range(base + 6, base + 6 + 5 * n, 5)
            own = []
            for limit, at in zip(self.limits, starts):
                allowed, remaining, limit_, retry, reset = (reply[at + f] for f in fields)
                own.append(
                    Decision(
                        bool(allowed), remaining, limit_, retry / 1e6, reset / 1e6, name=limit.name, window=limit.window
                    )
                )
            denied_by = reply[base + 1]
            out.append(self.decision(reply[base : base + 6], own, denied_by, True))
        return out

    def decision(
        self, numbers: Sequence[int], own: list[Decision], denied_by: int, from_store: bool
    ) -> RedisDecision:
        raise NotImplementedError

    def fallbacks(
        self, target: Any, targets: Optional[list[Any]], costs: list[int], now: Optional[_Seconds], peek: bool
    ) -> list[RedisDecision]:
        """``fallback`` for each of ``costs``, for ``targets[i]`` (default ``target``):
        a batch gathers callers whose requests share their Redis keys, not
        the fields an in-process ``Policy`` may key on."""
        if targets is None:
            return [self.fallback(target, cost, now, peek) for cost in costs]
        outcomes: list[Union[RedisDecision, Exception]] = []
        for t, cost in zip(targets, costs):
            try:
                outcomes.append(self.fallback(t, cost, now, peek))
            except Exception as error:
                outcomes.append(error)
        decisions = [o for o in outcomes if isinstance(o, RedisDecision)]
        if len(decisions) < len(outcomes):
            raise _Fallbacks(outcomes)
        return decisions

    def _open_or_closed(self, allowed: bool) -> RedisDecision:
        """What ``on_error="open"`` (``allowed``) or ``"closed"`` answers."""
        # Denied: try again in a second, and (for the RateLimit header's
        # `t`, which should not say sooner) count a second to "reset" too.
        retry = 0.0 if allowed else 1.0
        own = [
            Decision(allowed, limit.limit if allowed else 0, limit.limit, retry, retry, name=limit.name, window=limit.window)
            for limit in self.limits
        ]
        remaining = self.limit if allowed else 0
        numbers = [int(allowed), 0, remaining, self.limit, _ceil_micros(retry), _ceil_micros(retry)]
        return self.decision(numbers, own, 0 if allowed else 1, False)

    def fallback(self, target: Any, cost: int, now: Optional[_Seconds], peek: bool) -> RedisDecision:
        """The decision ``on_error`` makes when Redis cannot answer."""
        if isinstance(self.on_error, str):
            return self._open_or_closed(self.on_error == "open")
        local: Any = self.on_error
        method = local.peek if peek else local.try_acquire
        try:
            d = method(cost) if isinstance(local, Limiter) else method(target, cost)
        except RateLimitError as error:
            # A cost above the fallback's limit (a stricter limit for an
            # outage, say), which it never admits: denied as "closed"
            # denies, rather than raised during an outage.
            if error.code != "cost_exceeds_limit":
                raise
            return self._open_or_closed(False)
        return self._answered(d)

    def fallback_booking(self, target: Any, cost: int) -> tuple[RedisDecision, Optional[Reservation]]:
        """``fallback`` for ``reserve``: the decision, and the in-process
        fallback's booking when it made one. It books with its own
        ``reserve`` (``max_wait=0``: now or not at all, as ``try_acquire``
        takes), whose ``cancel()`` gives the units back at the instant they
        were taken, on the fallback's clock: a refund at the time of the
        cancel would free units of a later window than theirs (and let
        through more than its limit there)."""
        if isinstance(self.on_error, str):
            return self._open_or_closed(self.on_error == "open"), None
        local: Any = self.on_error
        try:
            r = local.reserve(cost, max_wait=0) if isinstance(local, Limiter) else local.reserve(target, cost, max_wait=0)
        except RateLimitError as error:
            # As in `fallback`: a cost the fallback never admits is denied as "closed".
            if error.code != "cost_exceeds_limit":
                raise
            return self._open_or_closed(False), None
        if not r.ok:
            return self._answered(r.decision), None
        # What try_acquire would have answered: the fallback as it is now,
        # with the units taken (a peek of nothing).
        d = local.peek(0) if isinstance(local, Limiter) else local.peek(target, 0)
        return self._answered(d), r

    def _answered(self, d: Any) -> RedisDecision:
        """The in-process fallback's decision ``d`` as this store's."""
        # Each limit as the fallback's limit of its name answered, when it
        # has one (a fallback Policy), else as the fallback answered as a whole.
        mine = dict(getattr(d, "limits", ()))
        own = [
            Decision(o.allowed, o.remaining, o.limit, o.retry_after, o.reset_after, name=limit.name, window=limit.window)
            for limit in self.limits
            for o in [mine.get(limit.name, d)]
        ]
        # Rounded up to the wire's µs: a wait is never stated shorter.
        numbers = [int(d.allowed), 0, d.remaining, d.limit, _ceil_micros(d.retry_after), _ceil_micros(d.reset_after)]
        names = [limit.name for limit in self.limits]
        denied_by = getattr(d, "denied_by", None)
        index = 0 if d.allowed else names.index(denied_by) + 1 if denied_by in names else 1
        return self.decision(numbers, own, index, False)

    def unfallback(self, target: Any, cost: int) -> None:
        """Gives ``cost`` back, now, to the in-process ``on_error`` limiter
        that ``fallback`` took it from a moment ago (for a caller that left
        right after the decision; a reservation's booking goes back through
        its own ``cancel()``, at the instant it was taken)."""
        local: Any = self.on_error
        if isinstance(local, str):
            return
        if isinstance(local, Limiter):
            local.refund(cost)
        else:
            local.refund(target, cost)

    def wrap(self, numbers: Sequence[int], own: list[Decision], from_store: bool, cls: type[_T]) -> _T:
        allowed, remaining, limit, retry, reset = bool(numbers[0]), numbers[2], numbers[3], numbers[4], numbers[5]
        items = [(lim.name, lim.window, d) for lim, d in zip(self.limits, own)]
        made: Any = cls(allowed, remaining, limit, retry / 1e6, reset / 1e6, limits=items)  # type: ignore[call-arg]
        made.from_store = from_store
        return made  # type: ignore[no-any-return]


def _reaches(limit: Any, request: Mapping[str, Any]) -> bool:
    """Whether a policy's ``reset(request)`` resets ``limit`` (a ``_Limit`` or
    a ``PolicyLimit``): keyed by fields, each of them in ``request``."""
    return bool(limit.by) and all(field in request for field in limit.by)


class _Fallbacks(Exception):
    """A batch's fallback decisions when some of them failed (a fallback
    ``Policy`` refusing a caller's request): each answer or error is its
    caller's alone, as the callers' requests are their own."""

    def __init__(self, outcomes: list[Union[RedisDecision, Exception]]) -> None:
        super().__init__("a batch's fallback refused some of its callers")
        self.outcomes = outcomes


class _LimiterCore(_Core):
    def decision(self, numbers: Sequence[int], own: list[Decision], denied_by: int, from_store: bool) -> RedisDecision:
        return self.wrap(numbers, own, from_store, RedisDecision)


class _PolicyCore(_Core):
    KEYED_FALLBACK = Policy

    def decision(self, numbers: Sequence[int], own: list[Decision], denied_by: int, from_store: bool) -> RedisDecision:
        made = self.wrap(numbers, own, from_store, RedisPolicyDecision)
        made.denied_by = self.limits[denied_by - 1].name if denied_by else None
        made.limits = [(limit.name, d) for limit, d in zip(self.limits, own)]
        return made
