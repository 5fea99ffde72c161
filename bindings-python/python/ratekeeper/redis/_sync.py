"""The sync client's calls: one round trip per decision, hot keys batched across threads."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Callable, Optional, Union

from redis.exceptions import ResponseError

from ratekeeper import RateLimited
from ratekeeper._ratekeeper import REDIS_SCRIPT
from ratekeeper.redis._faults import _FAULTS, _script_errors, ScriptError
from ratekeeper.redis._values import (
    _instant,
    _is_asyncio_client,
    _Reply,
    _Seconds,
    _taken_at,
    _TEXT,
    _timeout,
    _type_error,
    MAX_BATCH,
)
from ratekeeper.redis._decisions import RedisDecision, RedisReservation
from ratekeeper.redis._core import _Core, _Fallbacks, _give_back_fallback


class _Slot:
    """One caller's place in a thread batch."""

    __slots__ = ("cost", "down", "error", "event", "gone", "lead", "result", "taken_at", "target")

    def __init__(self, cost: int, target: Any) -> None:
        self.cost = cost
        self.target = target
        self.event = threading.Event()
        self.result: Optional[RedisDecision] = None
        # The instant Redis took the units at (None: the fallback decided).
        self.taken_at: Optional[Fraction] = None
        self.error: Optional[BaseException] = None
        self.lead: Optional[list[_Slot]] = None
        # Interrupted while its batch was under way: whoever answers gives back.
        self.gone = False
        # Queued behind a round trip Redis did not answer: it asks the fallback itself.
        self.down = False


class _Sync:
    """The sync client's calls: EVALSHA with a NOSCRIPT fallback, faults, batching."""

    _core: _Core

    def _connect(self, client: Any, core: _Core) -> None:
        # An asyncio client's calls return coroutines, which failed far from here.
        if not hasattr(client, "evalsha") or _is_asyncio_client(client):
            expected = "a redis.Redis (or RedisCluster) client (for a redis.asyncio one, use the Async class)"
            raise _type_error("client", expected, client)
        self._client = client
        self._core = core
        self._script = client.register_script(REDIS_SCRIPT)
        self._lock = threading.Lock()
        self._queues: dict[tuple[bytes, ...], list[_Slot]] = {}

    def _call(self, keys: list[bytes], args: list[Union[str, int]]) -> Any:
        try:
            reply: _Reply = self._script(keys=keys, args=args)
        except ResponseError as error:
            _script_errors(error)
            raise
        return reply

    def _decide(
        self, target: Any, keys: list[bytes], mode: str, costs: list[int], now: Optional[_Seconds], targets: Optional[list[Any]] = None
    ) -> list[RedisDecision]:
        """One round trip deciding ``costs`` in order; ``targets[i]`` (default
        ``target``) is whom the fallback decides the ``i``-th for."""
        return self._decide_taken(target, keys, mode, costs, now, targets)[0]

    def _decide_taken(
        self, target: Any, keys: list[bytes], mode: str, costs: list[int], now: Optional[_Seconds], targets: Optional[list[Any]] = None
    ) -> tuple[list[RedisDecision], Optional[Fraction]]:
        """``_decide``, with the instant Redis took the units at (``None`` when the fallback decided)."""
        wire_now = self._core.now(now)
        try:
            reply = self._call(keys, self._core.args(mode, wire_now, costs, _TEXT))
        except _FAULTS:
            return self._core.fallbacks(target, targets, costs, now, mode == "peek"), None
        return self._core.decisions(reply, len(costs)), _taken_at(reply)

    def _acquire(self, target: Any, keys: list[bytes], cost: int, now: Optional[_Seconds]) -> RedisDecision:
        if not self._core.batching or now is not None:
            return self._decide(target, keys, "acquire", [cost], now)[0]
        queue_key = tuple(keys)
        slot = _Slot(cost, target)
        with self._lock:
            queue = self._queues.get(queue_key)
            if queue is None:
                self._queues[queue_key] = []
                batch: Optional[list[_Slot]] = [slot]
            else:
                queue.append(slot)
                batch = None
        if batch is None:
            try:
                slot.event.wait()
            except BaseException:
                self._abandon(queue_key, slot)
                raise
            if slot.lead is None:
                if slot.error is not None:
                    raise slot.error
                if slot.down:
                    # In this thread: an error of the fallback's for this
                    # request, or an interruption meanwhile, is this caller's.
                    return self._core.fallback(target, cost, None, False)
                assert slot.result is not None
                return slot.result
            batch = slot.lead
        # This thread leads: it sends its batch, answers every caller in it,
        # and hands the batch gathered meanwhile to the first of its callers.
        down = False
        try:
            answers, taken_at = self._decide_taken(
                target, keys, "acquire", [s.cost for s in batch], None, [s.target for s in batch]
            )
            self._deliver(keys, batch, answers, taken_at)
            down = taken_at is None
        except _Fallbacks as mixed:
            self._deliver(keys, batch, mixed.outcomes, None)
            down = True
        except ScriptError as error:
            # The script refused the call: every request of the batch alike.
            for s in batch:
                s.error = error
        except BaseException:
            # This thread was interrupted during its round trip (Ctrl-C, or a
            # signal handler's exception, of any type: a SIGALRM timeout's):
            # it leaves, and the others' requests go on, sent by the next of
            # them (what Redis may have taken meanwhile stays taken: never
            # more admitted), rather than each raising its interruption.
            slot.lead = batch
            self._abandon(queue_key, slot)
            raise
        self._hand_on(queue_key, down)
        for s in batch:
            if s is not slot:
                s.event.set()
        if slot.error is not None:
            raise slot.error
        assert slot.result is not None
        return slot.result

    def _hand_on(self, queue_key: tuple[bytes, ...], down: bool = False) -> None:
        """Hands the batch gathered meanwhile to the first of its callers, who
        sends it; or ends the queue when nobody waits. When Redis did not
        answer (``down``), every caller gathered asks the fallback at once, each
        in its own thread, rather than each batch waiting for its own round
        trip to fail. (Decided here, an interruption of this thread, Ctrl-C,
        was caught as another caller's error, raised in that caller's thread.)"""
        with self._lock:
            following = self._queues[queue_key]
            if down:
                del self._queues[queue_key]
                for s in following:
                    s.down = True
            elif following:
                self._queues[queue_key] = following[MAX_BATCH:]
                following = following[:MAX_BATCH]
                following[0].lead = following
            else:
                del self._queues[queue_key]
        if down:
            for s in following:
                s.event.set()
        elif following:
            following[0].event.set()

    def _deliver(
        self, keys: list[bytes], batch: list[_Slot], answers: Sequence[Union[RedisDecision, Exception]], taken_at: Optional[Fraction]
    ) -> None:
        """Answers each caller of ``batch`` (a decision, or its own error);
        what was taken for one that left meanwhile (interrupted, see
        ``_abandon``) is given back."""
        gone = []
        with self._lock:
            for s, answer in zip(batch, answers):
                if isinstance(answer, Exception):
                    s.error = answer
                    continue
                s.result, s.taken_at = answer, taken_at
                if s.gone:
                    gone.append((s.target, s.cost, answer))
        self._give_back(keys, gone, taken_at)

    def _give_back(self, keys: list[bytes], taken: list[tuple[Any, int, RedisDecision]], taken_at: Optional[Fraction]) -> None:
        """Gives back what was taken for callers that left, ``(target, cost,
        answer)`` each: to Redis at ``taken_at``, or (``None``) to the fallback."""
        given = _give_back_fallback(self._core, taken, taken_at)
        if given:
            with contextlib.suppress(Exception):
                self._refund(keys, given, taken_at)

    def _abandon(self, queue_key: tuple[bytes, ...], slot: _Slot) -> None:
        """A waiting caller interrupted (Ctrl-C, a signal handler's exception)
        leaves its place: out of the queue, or, when it was handed a batch to
        send, the batch goes on to the next caller in it, so that nobody
        behind waits for a sender that left."""
        with self._lock:
            queue = self._queues.get(queue_key)
            if queue is not None and slot in queue:
                queue.remove(slot)
                return
            lead, slot.lead = slot.lead, None
            # In a batch another caller sends: that caller gives back what
            # Redis takes for this one, unless the answer came already.
            slot.gone = lead is None and slot.result is None
            answered = lead is None and slot.result is not None
        if answered:
            assert slot.result is not None
            self._give_back(list(queue_key), [(slot.target, slot.cost, slot.result)], slot.taken_at)
        if lead is None:
            return
        others = [s for s in lead if s is not slot]
        if others:
            others[0].lead = others
            others[0].event.set()
        else:
            self._hand_on(queue_key)

    def _refund(self, keys: list[bytes], cost: int, taken_at: Optional[_Seconds]) -> None:
        at = "" if taken_at is None else _instant(taken_at, "taken_at")
        try:
            self._call(keys, self._core.args("refund", self._core.now(None), [cost], [at]))
        except _FAULTS:
            pass  # Redis unreachable: nothing to give back to (see "Faults")

    def _reserve(
        self, target: Any, keys: list[bytes], cost: int, max_wait: Optional[_Seconds], now: Optional[_Seconds]
    ) -> RedisReservation:
        args = self._core.args("reserve", self._core.now(now), [cost], [self._core.max_wait(max_wait)])
        try:
            reply: Optional[list[int]] = self._call(keys, args)
        except _FAULTS:
            reply = None
        ok, wait, at, decision, slot = self._core.booking(target, cost, reply)

        def cancel() -> None:
            if slot is None:
                self._core.unfallback(target, cost)
            else:
                self._refund(keys, cost, slot)

        return RedisReservation(ok, wait, at, cost, decision, cancel)

    def _wait(self, book: Callable[[float], RedisReservation], timeout: Optional[_Seconds]) -> None:
        """Books (``book(max_wait)``), then sleeps once until the slot; while
        Redis is unreachable, retries after the fallback's ``retry_after``."""
        limit = _timeout(timeout)
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            left = math.inf if deadline is None else max(deadline - time.monotonic(), 0.0)
            reservation = book(left)
            if reservation.ok:
                try:
                    time.sleep(reservation.wait)
                except BaseException:
                    # Interrupted (Ctrl-C, a signal handler's exception): the
                    # booking goes back, as the in-process acquire's does.
                    with contextlib.suppress(Exception):
                        reservation.cancel()
                    raise
                return
            if reservation.decision.from_store or reservation.wait > left:
                raise RateLimited(f"would wait {reservation.wait:.6f} s, more than the timeout", reservation.wait)
            time.sleep(reservation.wait)
