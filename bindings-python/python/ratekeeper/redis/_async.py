"""The asyncio client's calls: one round trip per decision, hot keys batched across tasks."""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Sequence
from typing import Any, Callable, Optional, Union

from redis.exceptions import NoPermissionError, NoScriptError, ResponseError

from ratekeeper import RateLimited
from ratekeeper._ratekeeper import REDIS_SCRIPT
from ratekeeper.redis._faults import _FAULTS, _denies_eval, _script_errors
from ratekeeper.redis._values import (
    _instant,
    _integers,
    _is_asyncio_client,
    _Reply,
    _Seconds,
    _T,
    _Taken,
    _TEXT,
    _timeout,
    _type_error,
    MAX_BATCH,
)
from ratekeeper.redis._decisions import AsyncRedisReservation, RedisDecision
from ratekeeper.redis._core import _Core, _Fallbacks, _give_back_fallback


# A batched async caller's answer: the decision, and what Redis took its
# units at (None when the fallback decided); and the caller as queued: its
# cost, target and future.
_Answer = tuple["RedisDecision", Optional[_Taken]]
_Waiting = tuple[int, Any, "asyncio.Future[_Answer]"]
# A key's queue of async callers: the loop they call on, and the callers.
_Queue = tuple["asyncio.AbstractEventLoop", list[_Waiting]]


class _Abandoned(Exception):
    """A round trip whose caller left while the script was reloaded (nothing
    more was sent: see ``_Async._evalsha``), or that failed after its caller
    left (see ``_Async._call``). Raised in the round trip's own
    task, whose caller is gone: what it booked or took is nothing, and so is
    what its give-back finds; a batch's sender answers nobody. Not a fault
    of reach: ``on_error`` would decide for nobody (and a batch's sender, as
    for an outage, for every caller queued behind)."""


# The stores whose queues a forked child forgets (see _forget_queues).
_STORES: weakref.WeakSet[_Async] = weakref.WeakSet()


def _forget_queues() -> None:
    """In a forked child, every store forgets its queues: they are the
    parent's loops' (of other threads, which the child does not have), and
    their lock was copied as it was. Held by another thread at the fork (a
    call joining a queue), nobody let it go there, and the child's first
    batched call of that store, on any key, blocked its event loop for ever."""
    for store in list(_STORES):
        store._queues_lock = threading.Lock()
        store._queues = {}


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_queues)


class _Async:
    """The asyncio client's calls, as ``_Sync``'s."""

    _core: _Core

    def _connect(self, client: Any, core: _Core) -> None:
        if not hasattr(client, "evalsha") or _is_asyncio_client(client) is False:
            expected = "a redis.asyncio.Redis client (for a sync one, use the class without Async)"
            raise _type_error("client", expected, client)
        self._client = client
        self._core = core
        self._script = client.register_script(REDIS_SCRIPT)
        # Per key, the loop whose callers queue there, and those callers
        # (each loop in a thread of its own may share this limiter: the
        # dict is changed under the lock; a queue, only on its loop).
        self._queues: dict[tuple[bytes, ...], _Queue] = {}
        self._queues_lock = threading.Lock()
        _STORES.add(self)

    async def _evalsha(self, keys: list[bytes], args: list[Union[str, int]], left: Callable[[], bool]) -> Any:
        """``_Sync._evalsha`` on asyncio: ``EVALSHA``; on a ``NOSCRIPT``,
        ``SCRIPT LOAD`` and ``EVALSHA`` once more; on a second, ``EVAL``.
        Taken here step by step, not by redis-py's script object, so that
        once ``left()`` (its caller gone: cancelled, or every caller of a
        batch) a ``NOSCRIPT`` or a reload that ends sends nothing more and
        raises ``_Abandoned``, as the Node client's ``evaluate`` stops once
        ``abandoned()``. (Sent, the decision was nobody's: its units taken
        ahead of the callers still there until its give-back came, and on a
        bucket with a booking behind it, never.)"""
        count = len(keys)
        try:
            return await self._client.evalsha(self._script.sha, count, *keys, *args)
        except NoScriptError:
            if left():
                raise _Abandoned from None
        await self._client.script_load(REDIS_SCRIPT)
        if left():
            raise _Abandoned
        try:
            return await self._client.evalsha(self._script.sha, count, *keys, *args)
        except NoScriptError as missing:
            # Flushed again since the SCRIPT LOAD (see _Sync._evalsha).
            if left():
                raise _Abandoned from None
            try:
                return await self._client.eval(REDIS_SCRIPT, count, *keys, *args)
            except NoPermissionError as denied:
                if _denies_eval(denied):
                    raise missing from None
                raise

    async def _call(self, keys: list[bytes], args: list[Union[str, int]], left: Callable[[], bool] = lambda: False, /) -> Any:
        """One call of the script; ``left()`` says whether its caller is gone
        (see ``_evalsha``): never, for a give-back, whose caller is gone already.
        (Positional only: a test's stand-in may take it as ``*rest``.)"""
        try:
            reply: _Reply = await self._evalsha(keys, args, left)
        except _FAULTS as error:
            if isinstance(error, ResponseError):
                _script_errors(error)  # raised, unless a fault
            if left():
                # Its caller left while it was in flight: a fault now is no
                # outage of anybody's (see _Abandoned), as the Node client's
                # ask rejects once gone().
                raise _Abandoned from error
            raise
        return reply

    async def _decide(
        self, target: Any, keys: list[bytes], mode: str, costs: list[int], now: Optional[_Seconds], targets: Optional[list[Any]] = None
    ) -> list[RedisDecision]:
        return (await self._decide_taken(target, keys, mode, costs, now, targets))[0]

    async def _decide_taken(
        self,
        target: Any,
        keys: list[bytes],
        mode: str,
        costs: list[int],
        now: Optional[_Seconds],
        targets: Optional[list[Any]] = None,
        left: Callable[[], bool] = lambda: False,
    ) -> tuple[list[RedisDecision], Optional[_Taken]]:
        """``_Sync._decide_taken`` on asyncio; once ``left()``, a reload sends nothing more (see ``_evalsha``)."""
        wire_now = self._core.now(now)
        try:
            reply = _integers(await self._call(keys, self._core.args(mode, wire_now, costs, _TEXT), left))
        except _FAULTS:
            return self._core.fallbacks(target, targets, costs, now, mode == "peek"), None
        return self._core.decisions(reply, len(costs)), self._core.taken(reply, len(costs))

    async def _acquire(self, target: Any, keys: list[bytes], cost: int, now: Optional[_Seconds]) -> RedisDecision:
        if not self._core.batching or now is not None:
            return (await self._take(target, keys, [cost], now))[0]
        queue_key = tuple(keys)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_Answer] = loop.create_future()
        lead: Optional[_Queue] = None  # a new queue, which this call starts
        with self._queues_lock:
            entry = self._queues.get(queue_key)
            # A loop that is not running (stopped or closed with a batch
            # under way) sends nothing until it runs again: its queue is
            # replaced, its tasks keep the entry they were given.
            alone = entry is not None and entry[0] is not loop and entry[0].is_running()
            if entry is not None and entry[0] is loop:
                entry[1].append((cost, target, future))
            elif not alone:
                # None, or left by a loop that stopped with a batch under way.
                lead = (loop, [])
                self._queues[queue_key] = lead
        if alone:
            # Another loop's callers queue on this key (one client on
            # several loops): this call goes alone.
            return (await self._take(target, keys, [cost], now))[0]
        if lead is not None:
            # The round trips run in a task of their own, so that cancelling
            # one caller cancels no other caller's decision.
            self._spawn(keys, queue_key, lead, [(cost, target, future)])
        try:
            answer, took = await future
        except asyncio.CancelledError:
            # Cancelled once its answer had come, before it ran: what Redis
            # took for it is given back, as for one cancelled before.
            if future.done() and not future.cancelled() and future.exception() is None:
                answer, took = future.result()
                self._give_back(keys, [(target, cost, answer)], took)
            raise
        return answer

    async def _take(self, target: Any, keys: list[bytes], costs: list[int], now: Optional[_Seconds]) -> list[RedisDecision]:
        """One round trip taking ``costs`` for one caller, in a task of its
        own: cancelled during it, the caller leaves at once, and what the
        script took (it runs all the same once sent) is given back when Redis
        answers, as a batched caller's is; a reload of the script under way
        then sends nothing more (see ``_evalsha``)."""
        call, answer = _alone(lambda left: self._decide_taken(target, keys, "acquire", costs, now, None, left))
        try:
            return (await answer)[0]
        except asyncio.CancelledError:
            call.add_done_callback(lambda done: self._untake(done, target, keys, costs))
            raise

    def _untake(
        self, call: asyncio.Future[tuple[list[RedisDecision], Optional[_Taken]]], target: Any, keys: list[bytes], costs: list[int]
    ) -> None:
        """Gives back what ``call`` (``_take``'s) took, its caller gone."""
        if call.cancelled() or call.exception() is not None:
            return  # nothing taken, or nothing known of it
        answers, took = call.result()
        self._give_back(keys, [(target, cost, answer) for cost, answer in zip(costs, answers)], took)

    def _spawn(self, keys: list[bytes], queue_key: tuple[bytes, ...], entry: _Queue, batch: list[_Waiting]) -> None:
        _keep(asyncio.ensure_future(self._send(keys, queue_key, entry, batch)))

    def _give_back(self, keys: list[bytes], taken: list[tuple[Any, int, RedisDecision]], took: Optional[_Taken]) -> None:
        """Gives back what was taken for callers that left (cancelled), ``(target,
        cost, answer)`` each: to Redis as ``took`` says in a task of its own
        (on a bucket only while nothing was taken since, as ``_Sync``'s;
        nothing to a key reset since, by its birth), or (``None``) to the fallback."""
        given = _give_back_fallback(self._core, taken, took)
        if not given:
            return
        assert took is not None

        async def give_back() -> None:
            try:
                await self._refund(keys, given, took.at, took.marks)
            except Exception:
                pass  # the script refused (a key of another type): nobody to tell, its caller is gone

        _keep(asyncio.ensure_future(give_back()))

    def _end(self, queue_key: tuple[bytes, ...], entry: _Queue) -> None:
        """Takes ``entry`` out of the queues, unless another replaced it."""
        with self._queues_lock:
            if self._queues.get(queue_key) is entry:
                del self._queues[queue_key]

    async def _send(self, keys: list[bytes], queue_key: tuple[bytes, ...], entry: _Queue, batch: list[_Waiting]) -> None:
        """Sends ``batch`` as one call, then the batch gathered meanwhile in ``entry``."""
        queue = entry[1]
        try:
            await self._answer(keys, queue, batch)
            # The next batch goes once the callers just answered have run:
            # one that calls again at once joins it, rather than going alone
            # while every other waits for its answer.
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            # This task was cancelled (its loop ending): nobody would send
            # the callers gathered meanwhile, and later ones would queue
            # behind them for ever.
            self._end(queue_key, entry)
            for _, _, f in batch + queue:
                f.cancel()
            raise
        # Only this loop's callers append to its queue: no lock needed here.
        following, queue[:] = queue[:MAX_BATCH], queue[MAX_BATCH:]
        if following:
            self._spawn(keys, queue_key, entry, following)
        else:
            self._end(queue_key, entry)

    async def _answer(self, keys: list[bytes], queue: list[_Waiting], batch: list[_Waiting]) -> None:
        """Decides ``batch`` (cost, caller's target, future) in one call and answers each caller."""
        # A caller cancelled before its batch left (an asyncio.wait_for's
        # timeout) is not sent, as a thread that left is not (_Sync's
        # `sent`): sent, Redis took its units ahead of the callers still
        # there, denying them what its give-back returned only afterwards.
        batch = [waiting for waiting in batch if not waiting[2].done()]
        if not batch:
            return
        targets = [t for _, t, _ in batch]
        try:
            costs = [c for c, _, _ in batch]
            answers: Sequence[Union[RedisDecision, Exception]]
            # Every caller of the batch cancelled meanwhile: a reload sends
            # nothing more (see _evalsha), and nobody is answered; the
            # callers queued behind go next, as after any batch.
            def left() -> bool:
                return all(f.done() for _, _, f in batch)

            try:
                answers, took = await self._decide_taken(targets[0], keys, "acquire", costs, None, targets, left)
            except _Fallbacks as mixed:
                answers, took = mixed.outcomes, None
            except _Abandoned:
                return
            if took is None:
                # Redis did not answer: the callers that queued meanwhile
                # are decided by the fallback now, rather than each batch
                # waiting for its own round trip to fail. Later ones ask Redis.
                queued, queue[:] = queue[:], []
                for cost, target, f in queued:
                    if not f.done():
                        try:
                            f.set_result((self._core.fallback(target, cost, None, False), None))
                        except Exception as error:
                            f.set_exception(error)
            # A caller cancelled meanwhile never sees its answer: what Redis
            # took for it is given back, at the instant it was decided (on a
            # bucket only while nothing was taken since: see _give_back).
            gone = []
            for (cost, target, f), answer in zip(batch, answers):
                if isinstance(answer, Exception):
                    if not f.done():
                        f.set_exception(answer)  # the fallback refused this caller alone
                elif f.done():
                    gone.append((target, cost, answer))
                else:
                    f.set_result((answer, took))
            self._give_back(keys, gone, took)
        except Exception as error:
            for _, _, f in batch:
                if not f.done():
                    f.set_exception(error)

    async def _unlink(self, keys: list[bytes]) -> int:
        """``reset``'s one ``UNLINK`` of ``keys``: how many Redis held. A
        booking made before gives nothing back since, whichever client reset
        the key: its give-back carries the key's birth (PROTOCOL.md,
        "Guarded refund")."""
        return int(await self._client.unlink(*keys))

    async def _refund(
        self,
        keys: list[bytes],
        cost: int,
        taken_at: Optional[_Seconds],
        marks: Sequence[Union[str, int]] = (),
    ) -> None:
        """``_Sync._refund`` on asyncio."""
        at = "" if taken_at is None else _instant(taken_at, "taken_at")
        try:
            await self._call(keys, self._core.args("refund", self._core.now(None), [cost], [at, *marks]))
        except _FAULTS:
            pass  # Redis unreachable: nothing to give back to (see "Faults")

    async def _reserve(
        self,
        target: Any,
        keys: list[bytes],
        cost: int,
        max_wait: Optional[_Seconds],
        now: Optional[_Seconds],
        gone: Callable[[], bool] = lambda: False,
    ) -> AsyncRedisReservation:
        """A booking, made in a task of its own: cancelled during the round
        trip, the caller leaves at once, and what the script booked (it runs
        all the same once sent) is given back when Redis answers, as
        ``_take`` gives back what it took. Nothing is sent when the caller
        left before that task started, nor when ``gone()`` says that the
        one awaiting this call (``_wait``'s) did; nothing more once a
        reload of the script under way ends after either left (see
        ``_evalsha``)."""
        booking, booked = _alone(lambda left: self._book(target, keys, cost, max_wait, now, left), gone)
        try:
            return await booked
        except asyncio.CancelledError:
            _detached(_give_back(booking))
            raise

    async def _book(
        self,
        target: Any,
        keys: list[bytes],
        cost: int,
        max_wait: Optional[_Seconds],
        now: Optional[_Seconds],
        left: Callable[[], bool] = lambda: False,
    ) -> AsyncRedisReservation:
        args = self._core.args("reserve", self._core.now(now), [cost], [self._core.max_wait(max_wait)])
        try:
            reply: Optional[list[int]] = await self._call(keys, args, left)
        except _FAULTS:
            reply = None
        ok, wait, at, decision, slot, local = self._core.booking(target, cost, reply)
        marks = self._core.marks(reply)

        async def cancel() -> None:
            if slot is None:
                # The fallback's booking (if any), at the instant it took it
                # (its own reset, by ours, stops it there).
                if local is not None:
                    local.cancel()
            else:
                # In a task of its own: a cancel() cancelled (a timeout's)
                # before the refund went still gives the booking back, as a
                # second cancel() does nothing (the refund may have gone).
                # With the keys' births: nothing to a key reset since.
                await _shielded(self._refund(keys, cost, slot, self._core.unguarded(marks)))

        async def release() -> None:
            # As _Sync's: guarded on Redis, as cancel() to the fallback.
            if slot is None:
                await cancel()
            else:
                await _shielded(self._refund(keys, cost, slot, marks))

        reservation = AsyncRedisReservation(ok, wait, at, cost, decision, cancel, release)
        reservation._due = self._core.due(reply, now)  # for acquire (see _Core.sleeps)
        return reservation

    async def _wait(
        self, book: Callable[[float, Callable[[], bool]], Awaitable[AsyncRedisReservation]], timeout: Optional[_Seconds]
    ) -> None:
        """``_Sync._wait`` on asyncio. Cancelled while it sleeps, or during its
        booking's round trip, it raises at once and the booking is given back
        in a task of its own (once Redis answers, for one in flight).
        ``book(left, gone)`` books within ``left`` seconds, sending nothing
        once ``gone()`` (this caller left before it did)."""
        limit = _timeout(timeout)
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            left = math.inf if deadline is None else max(deadline - time.monotonic(), 0.0)
            booking, booked = _alone(lambda gone: book(left, gone))
            try:
                reservation = await booked
            except asyncio.CancelledError:
                # Cancelled while the script runs: it may book all the same.
                # The caller leaves at once, as the Node client's acquire
                # rejects at once on an abort: waiting here for Redis's answer
                # (and the give-back's round trip) made an asyncio.timeout run
                # over by that much, and for ever while Redis did not answer.
                # The booking, when it comes, is given back in a task of its own.
                _detached(_give_back(booking))
                raise
            if reservation.ok:
                try:
                    # On the caller's clock= until the slot has come there,
                    # the loop's clock telling a sleep that took its time
                    # (see _Core.sleeps).
                    for wait in self._core.sleeps(reservation, asyncio.get_running_loop().time):
                        await asyncio.sleep(wait)
                except BaseException:
                    # As above: the cancellation (or the error of the
                    # caller's clock, read for what is left) is raised at
                    # once, whatever the give-back meets (Redis gone
                    # meanwhile), which goes on in a task of its own. Given
                    # back only while the latest, as _Sync's.
                    _detached(reservation._give_back())
                    raise
                return
            if reservation.from_store or reservation.wait > left:
                raise RateLimited(f"would wait {reservation.wait:.6f} s, more than the timeout", reservation.wait)
            await asyncio.sleep(reservation.wait)


async def _give_back(booking: asyncio.Future[AsyncRedisReservation]) -> None:
    """Waits for ``booking`` and gives back what it booked, if anything, for
    a caller that left meanwhile: nobody holds it to cancel it, so (as a
    waiting acquire's) only while it is still the latest on a bucket."""
    # Waited for, not awaited: cancelled (its caller left before it
    # started), it booked nothing, and this task goes on uncancelled.
    await asyncio.wait([booking])
    if booking.cancelled() or booking.exception() is not None:
        return  # it booked nothing
    await booking.result()._give_back()


def _alone(
    start: Callable[[Callable[[], bool]], Awaitable[_T]], gone: Callable[[], bool] = lambda: False
) -> tuple[asyncio.Future[_T], asyncio.Future[_T]]:
    """A round trip in a task of its own, and the shield its caller awaits:
    cancelled, the caller leaves at once while the round trip goes on (its
    caller gives back what it took). ``start(left)`` makes the round trip,
    ``left()`` saying whether the caller left (a reload of the script then
    sends nothing more: see ``_Async._evalsha``). Cancelled before that task
    started (or ``gone()`` by then, the caller's own caller having left), the
    caller is gone and nothing is sent: the task ends cancelled, before
    ``start`` is called. Sent all the same, Redis took its units ahead of
    the callers still there until its give-back came (on a bucket with a
    booking behind it, never), as a batched caller's was (see _answer)."""
    shields: list[asyncio.Future[_T]] = []

    def left() -> bool:
        # The shield is cancelled with the caller (Task.cancel cancels what it awaits), at once.
        return gone() or (bool(shields) and shields[0].cancelled())

    async def unless_left() -> _T:
        if left():
            raise asyncio.CancelledError
        return await start(left)

    task = asyncio.ensure_future(unless_left())
    shields.append(asyncio.shield(task))
    return task, shields[0]


# The tasks in flight that no caller may be left to await (batches,
# give-backs), kept referenced until they finish.
_TASKS: set[asyncio.Future[Any]] = set()


def _keep(task: asyncio.Future[Any]) -> None:
    """Holds ``task`` until it is done: the loop keeps only a weak reference."""
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)


def _detached(work: Awaitable[_T]) -> asyncio.Future[_T]:
    """``work`` in a task of its own, kept until done, for a caller that
    leaves (or may leave) before it ends: once nobody waits for it, its
    error (a ScriptError) is retrieved all the same, which asyncio would
    otherwise log as "Task exception was never retrieved". Still pending
    when its loop ends (``asyncio.run`` returning), it is cancelled with
    the loop's other tasks."""
    task = asyncio.ensure_future(work)
    _keep(task)
    task.add_done_callback(_retrieved)
    return task


def _shielded(work: Awaitable[_T]) -> asyncio.Future[_T]:
    """``work`` in a task of its own (see ``_detached``), shielded from its
    caller's cancellation; its error reaches a caller still waiting."""
    return asyncio.shield(_detached(work))


def _retrieved(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
