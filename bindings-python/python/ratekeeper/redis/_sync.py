"""The sync client's calls: one round trip per decision, hot keys batched across threads."""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any, Callable, Optional, Union

from redis.exceptions import NoPermissionError, NoScriptError, RedisClusterException, RedisError, ResponseError

from ratekeeper import RateLimited
from ratekeeper._ratekeeper import REDIS_SCRIPT
from ratekeeper.redis._faults import _FAULTS, _denies_eval, _script_errors, ScriptError
from ratekeeper.redis._values import (
    _instant,
    _is_asyncio_client,
    _Reply,
    _integers,
    _Seconds,
    _T,
    _Taken,
    _TEXT,
    _timeout,
    _type_error,
    MAX_BATCH,
)
from ratekeeper.redis._decisions import RedisDecision, RedisReservation
from ratekeeper.redis._core import _Core, _Fallbacks, _give_back_fallback


# How often a waiting caller looks again whether its turn came without a
# word: a wake-up is lost when the thread setting it is interrupted (Ctrl-C,
# a signal handler's exception: Python runs those between any two bytecodes
# of the main thread), and a sender may leave before answering. A safety
# net for those alone, not a poll for the rate.
_RECHECK = 0.1


class _Wake:
    """A caller's wake-up, as ``threading.Event`` but with no Python code
    between its steps: an Event's wait is a Condition's, which an
    interruption breaks midway (raising "release unlocked lock" instead);
    a lock's acquire and release are one C call each."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:
            pass  # set already

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until set (at most ``timeout`` seconds), and unsets."""
        return self._lock.acquire(timeout=-1 if timeout is None else timeout)


class _Slot:
    """One caller's place in a thread batch."""

    __slots__ = ("batch", "cost", "event", "gone", "held", "target")

    def __init__(self, cost: int, target: Any) -> None:
        self.cost = cost
        self.target = target
        self.event = _Wake()
        # Held by the caller's thread for as long as it is in the call: a
        # `with` releases it however the call ends, so the others can tell
        # a caller that left even when it was interrupted before saying so.
        self.held = threading.Lock()
        # Left (interrupted), said under the lock: whoever answers gives back.
        self.gone = False
        self.batch: Optional[_Batch] = None


def _here(slot: _Slot) -> bool:
    """Whether ``slot``'s caller is still in its call."""
    return not slot.gone and slot.held.locked()


class _Batch:
    """Callers sent in one round trip, by the first of them still there."""

    __slots__ = ("outcome", "sender", "sent", "slots")

    def __init__(self) -> None:
        self.slots: list[_Slot] = []
        self.sent: list[_Slot] = []
        self.sender: Optional[_Slot] = None
        # Set in one step, under the lock: each sent caller's answer (or
        # error), and what Redis took at (None: the fallback decided).
        # A caller missing from the answers asks the fallback itself.
        self.outcome: Optional[tuple[dict[_Slot, Union[RedisDecision, Exception]], Optional[_Taken]]] = None


class _Queue:
    """A key's batches: the one under way, those gathered behind it."""

    __slots__ = ("sending", "waiting")

    def __init__(self) -> None:
        self.sending: Optional[_Batch] = None
        self.waiting: list[_Batch] = []


def _close_idle(client: Any) -> None:
    """Closes ``client``'s idle connections (they connect again when next used)."""
    if getattr(client, "connection", None) is not None:
        client.connection.disconnect()  # a single-connection client's
    nodes = client.get_nodes() if hasattr(client, "get_nodes") else []  # a RedisCluster's
    for each in [client, *(node.redis_connection for node in nodes)]:
        pool = getattr(each, "connection_pool", None)
        if pool is not None:
            try:
                pool.disconnect(inuse_connections=False)
            except TypeError:
                # redis-py before 7: a BlockingConnectionPool's disconnect()
                # takes no argument (and closes the connections in use too).
                # Those versions check a connection for unread data as they
                # hand it out, and connect again: nothing to close.
                pass


# The stores whose batches a forked child forgets (see _forget_batches).
_STORES: weakref.WeakSet[_Sync] = weakref.WeakSet()


def _forget_batches() -> None:
    """In a forked child, every store forgets the batches under way: their
    callers are the parent's other threads, which the child does not have.
    Each looked there for ever (its ``held`` lock was copied held), and a
    call of the child on a key one of them was batched for waited for them
    for ever; so did any call, had one of them held the store's lock."""
    for store in list(_STORES):
        store._lock = threading.Lock()
        store._queues = {}


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_batches)


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
        self._queues: dict[tuple[bytes, ...], _Queue] = {}
        _STORES.add(self)

    def _evalsha(self, keys: list[bytes], args: list[Union[str, int]]) -> Any:
        """One ``EVALSHA`` of the script (redis-py loads it on a ``NOSCRIPT``
        and tries once more), or, when that one meets a ``NOSCRIPT`` too, an
        ``EVAL`` of the script itself."""
        try:
            return self._script(keys=keys, args=args)
        except NoScriptError as missing:
            # Flushed again between redis-py's SCRIPT LOAD and its second
            # EVALSHA (SCRIPT FLUSH, a restart, a failover): EVAL needs no
            # cache, and fills it. Else on_error answered the whole batch,
            # and every caller queued behind it, as if Redis were away.
            try:
                return self._client.eval(REDIS_SCRIPT, len(keys), *keys, *args)
            except NoPermissionError as denied:
                # An ACL user allowed EVALSHA and SCRIPT LOAD only: the
                # NOSCRIPT stands, answered by on_error as before. Only for
                # EVAL itself, as the Node client: another NOPERM (a key
                # refused since) is raised, a ScriptError, as from EVALSHA.
                if _denies_eval(denied):
                    raise missing from None
                raise

    def _call(self, keys: list[bytes], args: list[Union[str, int]]) -> Any:
        try:
            reply: _Reply = self._evalsha(keys, args)
        except ResponseError as error:
            _script_errors(error)
            raise
        except (RedisError, RedisClusterException):
            raise
        except BaseException:
            # Interrupted (Ctrl-C, a signal handler's exception) between
            # sending the script and reading its reply, redis-py (8.1) puts
            # the connection back in its pool with the reply unread and hands
            # it out as it is: the next command reads that reply as its own,
            # and each later one the reply before its own. Which connection
            # is not known: the idle ones go.
            _close_idle(self._client)
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
    ) -> tuple[list[RedisDecision], Optional[_Taken]]:
        """``_decide``, with what Redis took the units at (``None`` when the fallback decided)."""
        wire_now = self._core.now(now)
        try:
            reply = _integers(self._call(keys, self._core.args(mode, wire_now, costs, _TEXT)))
        except _FAULTS:
            return self._core.fallbacks(target, targets, costs, now, mode == "peek"), None
        return self._core.decisions(reply, len(costs)), self._core.taken(reply, len(costs))

    def _acquire(self, target: Any, keys: list[bytes], cost: int, now: Optional[_Seconds]) -> RedisDecision:
        if not self._core.batching or now is not None:
            return self._decide(target, keys, "acquire", [cost], now)[0]
        queue_key = tuple(keys)
        slot = _Slot(cost, target)
        with slot.held:
            with self._lock:
                self._join(queue_key, slot)
            try:
                answer = self._answer(keys, queue_key, slot)
            except BaseException:
                self._leave(keys, queue_key, slot)
                raise
        if answer is None:
            # Queued behind a round trip Redis did not answer. In this
            # thread: an error of the fallback's for this request, or an
            # interruption meanwhile, is this caller's.
            return self._core.fallback(target, cost, None, False)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def _join(self, queue_key: tuple[bytes, ...], slot: _Slot) -> None:
        """Under the lock: ``slot`` joins the last batch gathered for its key."""
        queue = self._queues.get(queue_key)
        if queue is None:
            queue = self._queues[queue_key] = _Queue()
        if not queue.waiting or len(queue.waiting[-1].slots) >= MAX_BATCH:
            queue.waiting.append(_Batch())
        slot.batch = queue.waiting[-1]
        slot.batch.slots.append(slot)

    def _answer(self, keys: list[bytes], queue_key: tuple[bytes, ...], slot: _Slot) -> Union[RedisDecision, Exception, None]:
        """Waits for ``slot``'s answer, and sends its batch when its turn comes."""
        batch = slot.batch
        assert batch is not None
        while batch.outcome is None:
            with self._lock:
                turn = batch.outcome is None and self._next(queue_key) is slot
                if turn:
                    queue = self._queues[queue_key]
                    batch.sender = slot
                    queue.sending = batch
                    del queue.waiting[0]
                    batch.sent = [s for s in batch.slots if _here(s)]
            if turn:
                self._send(keys, queue_key, batch)
            else:
                # Looked at again now and then, not only when woken (see _RECHECK).
                slot.event.wait(_RECHECK)
        return batch.outcome[0].get(slot)

    def _next(self, queue_key: tuple[bytes, ...]) -> Optional[_Slot]:
        """Under the lock: the caller whose turn it is to send its batch (the
        first still there of the first batch), or ``None`` while one is under
        way or when nobody waits (the queue ends). Each change is a state the
        others can go on from, should this thread be interrupted midway."""
        queue = self._queues.get(queue_key)
        if queue is None:
            return None
        sending = queue.sending
        if sending is not None and sending.outcome is None:
            assert sending.sender is not None
            if _here(sending.sender):
                return None
            if sending not in queue.waiting:
                # Its sender left before answering (interrupted): its callers
                # are sent again, first (what Redis may have taken meanwhile
                # stays taken: never more admitted).
                queue.waiting.insert(0, sending)
        queue.sending = None
        waiting = queue.waiting
        # Answered already (Redis down), or every caller left: nobody to send.
        while waiting and (waiting[0].outcome is not None or not any(map(_here, waiting[0].slots))):
            del waiting[0]
        if not waiting:
            del self._queues[queue_key]
            return None
        return next(s for s in waiting[0].slots if _here(s))

    def _send(self, keys: list[bytes], queue_key: tuple[bytes, ...], batch: _Batch) -> None:
        """Sends ``batch`` in one round trip, answers its callers (what was
        taken for one that left is given back), and wakes the next sender.
        When Redis did not answer, every caller gathered meanwhile asks the
        fallback at once, each in its own thread, rather than each batch
        waiting for its own round trip to fail. (Decided here, an
        interruption of this thread, Ctrl-C, was caught as another caller's
        error, and raised in that caller's thread.)"""
        sent = batch.sent
        answers: Sequence[Union[RedisDecision, Exception]]
        down = False
        try:
            answers, took = self._decide_taken(
                sent[0].target, keys, "acquire", [s.cost for s in sent], None, [s.target for s in sent]
            )
            down = took is None
        except _Fallbacks as mixed:
            answers, took, down = mixed.outcomes, None, True
        except ScriptError as error:
            # The script refused the call: every request of the batch alike.
            answers, took = [error] * len(sent), None
        with self._lock:
            batch.outcome = (dict(zip(sent, answers)), took)
            gone = [(s.target, s.cost, a) for s, a in zip(sent, answers) if isinstance(a, RedisDecision) and not _here(s)]
            wake = sent[1:]  # (sent[0] is this thread's)
            if down:
                for waiting in self._queues[queue_key].waiting:
                    waiting.outcome = ({}, None)
                    wake += waiting.slots
            following = self._next(queue_key)
        # Woken after the answers are set: should this thread be interrupted
        # here, the others find them when they look again.
        for s in [*wake, following]:
            if s is not None:
                s.event.set()
        self._give_back(keys, gone, took)

    def _give_back(self, keys: list[bytes], taken: list[tuple[Any, int, RedisDecision]], took: Optional[_Taken]) -> None:
        """Gives back what was taken for callers that left, ``(target, cost,
        answer)`` each: to Redis as ``took`` says, or (``None``) to the
        fallback. On Redis with the call's marks: on a bucket, only while
        nothing was taken since (another process may have booked behind
        them, whose slot a plain refund would hand out a second time)."""
        given = _give_back_fallback(self._core, taken, took)
        if given:
            assert took is not None
            # The script refusing (a key of another type): nobody to tell.
            # Not any Exception: a signal handler's is this thread's to raise.
            # With the keys' births: nothing to a key reset since.
            with contextlib.suppress(ScriptError):
                self._refund(keys, given, took.at, took.marks)

    def _leave(self, keys: list[bytes], queue_key: tuple[bytes, ...], slot: _Slot) -> None:
        """A caller interrupted (Ctrl-C, a signal handler's exception) leaves:
        its batch goes on without it, sent by the next of its callers when
        it was this caller's to send; what Redis took for it is given back,
        here when the answer came already, else by whoever answers."""
        with self._lock:
            slot.gone = True
            assert slot.batch is not None
            outcome = slot.batch.outcome
            following = self._next(queue_key)
        if following is not None:
            following.event.set()
        answer = None if outcome is None else outcome[0].get(slot)
        if isinstance(answer, RedisDecision):
            assert outcome is not None
            self._give_back(keys, [(slot.target, slot.cost, answer)], outcome[1])

    def _unlink(self, keys: list[bytes]) -> int:
        """``reset``'s one ``UNLINK`` of ``keys``: how many Redis held. A
        booking made before gives nothing back since, whichever client (or
        thread, or signal handler) reset the key: its give-back carries the
        key's birth (PROTOCOL.md, "Guarded refund"), so no give-back waits
        for a reset, nor a reset for a give-back."""
        try:
            return int(self._client.unlink(*keys))
        except (RedisError, RedisClusterException):
            raise
        except BaseException:
            # Interrupted between sending it and reading its reply: as in
            # _call, the reply stays unread in a pooled connection, for the
            # next command to read as its own. The idle ones go.
            _close_idle(self._client)
            raise

    def _refund(
        self, keys: list[bytes], cost: int, taken_at: Optional[_Seconds], marks: Sequence[Union[str, int]] = ()
    ) -> None:
        """A refund; with a booking's ``marks`` (its reply's), guarded: a
        bucket gives back only while the booking is the latest on its key,
        and no key born since gives back (see ``_Core.unguarded``)."""
        at = "" if taken_at is None else _instant(taken_at, "taken_at")
        try:
            self._call(keys, self._core.args("refund", self._core.now(None), [cost], [at, *marks]))
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
        ok, wait, at, decision, slot, local = self._core.booking(target, cost, reply)
        marks = self._core.marks(reply)

        def cancel() -> None:
            if slot is None:
                # The fallback's booking (if any), at the instant it took it
                # (its own reset, by ours, stops it there).
                if local is not None:
                    local.cancel()
            else:  # with the keys' births: nothing to a key reset since
                self._refund(keys, cost, slot, self._core.unguarded(marks))

        def release() -> None:
            # A waiting acquire's booking: on a bucket, given back only while
            # it is the latest (PROTOCOL.md, "Guarded refund"); the
            # fallback's, as cancel() gives it back.
            if slot is None:
                cancel()
            else:
                self._refund(keys, cost, slot, marks)

        reservation = RedisReservation(ok, wait, at, cost, decision, cancel, release)
        reservation._due = self._core.due(reply, now)  # for acquire (see _Core.sleeps)
        return reservation

    def _wait(self, book: Callable[[float], RedisReservation], timeout: Optional[_Seconds]) -> None:
        """Books (``book(max_wait)``), then sleeps until the slot (on the
        caller's ``clock=``, until it has come there: see ``_Core.sleeps``);
        while Redis is unreachable, retries after the fallback's ``retry_after``."""
        limit = _timeout(timeout)
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            left = math.inf if deadline is None else max(deadline - time.monotonic(), 0.0)
            reservation = book(left)
            if reservation.ok:
                try:
                    # Both looked up here, so that a test may replace them.
                    for wait in self._core.sleeps(reservation, time.monotonic):
                        time.sleep(wait)
                except BaseException:
                    # Interrupted (Ctrl-C, a signal handler's exception; or
                    # the caller's clock, read for what is left, raised): the
                    # booking goes back while it is the latest, as the
                    # in-process acquire's does; from the middle of a
                    # bucket's line (another process booked behind it) it
                    # handed the next caller a slot already taken.
                    with contextlib.suppress(Exception):
                        reservation._give_back()
                    raise
                return
            if reservation.from_store or reservation.wait > left:
                raise RateLimited(f"would wait {reservation.wait:.6f} s, more than the timeout", reservation.wait)
            time.sleep(reservation.wait)

