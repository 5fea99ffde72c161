"""The sync client's calls: one round trip per decision, hot keys batched across threads."""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
import weakref
from collections.abc import Generator, Iterable, Sequence
from types import GeneratorType
from typing import Any, Callable, NamedTuple, Optional, Union, cast

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
from ratekeeper.redis._core import _Core, _Fallbacks, _give_back_fallback, _mark


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


class _Doing:
    """A reset or a give-back under way through a store, listed in its book
    (``_Book``) until it ends, for the other threads to wait for. Its thread
    is in it exactly while ``frame``, the generator whose frame runs it
    (``_own_frame``), runs: the interpreter clears ``gi_running`` however
    that frame ends, an exception raised at any of its bytecodes included,
    with no code of ours to run. So one left listed by a thread interrupted
    before it could take it out (Ctrl-C twice, a signal handler's exception
    in its ``finally``) is told from one under way, and nobody waits for it
    (see ``_Sync._settled``). A wait on one hinges on no lock held for it
    being let go by a ``with`` as the interruption passes (and on no
    cleanup running): only the store's ``_order_lock`` is taken with
    ``with``, around changes of the book in memory, never a round trip, as
    the batches' ``_lock`` is. (CPython 3.10 to 3.13 raise no asynchronous
    exception between a ``with``'s ``__enter__`` and its block; 3.14 could,
    as ``__enter__`` returned, until gh-148874 was fixed.)"""

    __slots__ = ("done", "frame", "marks", "reset", "thread", "waits")

    def __init__(self, marks: frozenset[int], frame: GeneratorType[None, None, Any], reset: bool) -> None:
        self.marks = marks
        self.frame = frame
        self.reset = reset
        self.thread = threading.get_ident()
        # A reset's: the give-backs on their way to its keys as it was
        # listed, which it waits for before its UNLINK (see _Sync._wait_out).
        self.waits: tuple[_Doing, ...] = ()
        # Set once it is out of the book: its waiters go on at once (and
        # look again every _RECHECK, should its thread leave before saying).
        self.done = _Wake()

    def here(self) -> bool:
        """Whether its thread is still in it."""
        return self.frame.gi_running


class _Book(NamedTuple):
    """A sync store's resets and give-backs, replaced whole (one assignment,
    under the store's ``_order_lock``) at each change: a thread interrupted
    as it makes one leaves the book as it was before or after, never half
    changed (a reset taken out but not counted, say)."""

    # Per mark of a Redis key (see _Async._forgot), the resets that found it,
    # or may have (one that raised, or whose thread left it unsaid).
    resets: tuple[int, ...]
    # The resets under way: their UNLINK sent, or waiting to be, not counted yet.
    resetting: tuple[_Doing, ...]
    # The give-backs on their way to Redis: each decided before any reset
    # listed after it began, which sends its UNLINK once they are done.
    giving: tuple[_Doing, ...]


_NO_RESETS = _Book((0,) * 256, (), ())


def _marks(keys: Iterable[bytes]) -> frozenset[int]:
    """The marks of ``keys``, under which their resets are counted (see ``_Async._forgot``)."""
    return frozenset(_mark(key) for key in keys)


def _counted(resets: tuple[int, ...], found: Iterable[frozenset[int]]) -> tuple[int, ...]:
    """``resets`` with one more reset counted on each of the marks of each of ``found``."""
    counts = list(resets)
    for marks in found:
        for mark in marks:
            counts[mark] += 1
    return tuple(counts)


def _own_frame(work: Callable[[GeneratorType[None, None, _T]], _T]) -> _T:
    """``work(frame)``, run in the frame of the generator ``frame``, which is
    running (``gi_running``) while ``work`` runs, and only then (see ``_Doing``)."""
    handed: list[GeneratorType[None, None, _T]] = []

    def run() -> Generator[None, None, _T]:
        return work(handed.pop())
        yield  # (never reached: it makes `run` a generator)

    frame = cast("GeneratorType[None, None, _T]", run())
    handed.append(frame)
    try:
        next(frame)
    except StopIteration as done:
        return cast(_T, done.value)
    raise AssertionError("a reset or give-back yielded")  # never: `run` returns


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
        # The resets and give-backs under way are the other threads' too,
        # whose frames the child copied running: waited for, they never
        # ended. A reset among them counts as one that found its keys (its
        # UNLINK, sent from the parent, may reach Redis at any time).
        store._order_lock = threading.Lock()
        book = store._book
        store._book = _Book(_counted(book.resets, [doing.marks for doing in book.resetting]), (), ())


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
        # This store's resets and the give-backs ordered with them (see
        # _giving_back); the lock guards each change of the book, never a
        # round trip.
        self._order_lock = threading.Lock()
        self._book = _NO_RESETS
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
        resets = self._resets_of(keys)
        try:
            reply = _integers(self._call(keys, self._core.args(mode, wire_now, costs, _TEXT)))
        except _FAULTS:
            return self._core.fallbacks(target, targets, costs, now, mode == "peek"), None
        return self._core.decisions(reply, len(costs)), self._core.taken(reply, len(costs), resets)

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
            # Nothing once a reset found one of its keys since (see _giving_back).
            with contextlib.suppress(ScriptError):
                self._giving_back(keys, took.resets, lambda: self._refund(keys, given, took.at, took.marks))

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
        """``reset``'s one ``UNLINK`` of ``keys``: how many Redis held, each
        counted as forgotten on its mark (see ``_Async._forgot``); one that
        raised may have run all the same, and counts as having found them.
        Sent once the give-backs on their way to its keys' marks are done
        (see ``_after_give_backs``); one decided meanwhile waits for this
        reset (see ``_giving_back``)."""
        marks = _marks(keys)
        return _own_frame(lambda frame: self._reset_in(frame, keys, marks))

    def _reset_in(self, frame: GeneratorType[None, None, int], keys: list[bytes], marks: frozenset[int]) -> int:
        """``_unlink``, in ``frame`` (see ``_own_frame``)."""
        me = _Doing(marks, frame, reset=True)
        found = False
        try:
            with self._order_lock:
                book = self._settled()
                me.waits = tuple(doing for doing in book.giving if doing.marks & marks)
                self._book = book._replace(resetting=(*book.resetting, me))
            self._after_give_backs(list(me.waits))
            found = True  # sent, it may run whatever comes back
            try:
                held = int(self._client.unlink(*keys))
            except (RedisError, RedisClusterException):
                raise
            except BaseException:
                # Interrupted between sending it and reading its reply: as
                # in _call, the reply stays unread in a pooled connection,
                # for the next command to read as its own. The idle ones go.
                _close_idle(self._client)
                raise
            found = held > 0
            return held
        finally:
            self._ended(me, found)

    def _after_give_backs(self, giving: list[_Doing]) -> None:
        """Waits for the give-backs ``giving``, on their way to the keys of a
        reset (listed before it): sent on any connection of the pool, from
        any thread, nothing else orders them before the reset's ``UNLINK``,
        and one landing after it, and after the key's next unit, freed that
        unit (two at once from a limit of one). One whose thread left it is
        not waited for (see ``_wait_out``)."""
        for doing in giving:
            self._wait_out(doing)

    def _after_resets(self, resetting: list[_Doing]) -> bool:
        """Waits for the resets ``resetting``, under way on the keys of a
        give-back; whether it could (see ``_wait_out``)."""
        return all(self._wait_out(doing) for doing in resetting)

    def _wait_out(self, doing: _Doing) -> bool:
        """Waits until ``doing`` is out of the book, or its thread left it
        (then it is taken out by the next look, see ``_settled``): never for
        a thread that is gone. Answers ``False``, at once, for one that
        cannot end while this thread waits for it: under way in this very
        thread (a signal handler's call that interrupted it), or a reset
        waiting for a give-back under way in it (a signal handler's
        give-back, on top of that one, waited for the reset, which waited
        for the give-back under it, for ever)."""
        while doing.here() and self._listed(doing):
            if self._held_here(doing):
                return False
            if doing.done.wait(_RECHECK):
                doing.done.set()  # for whoever else waits for it
        return True

    def _held_here(self, doing: _Doing) -> bool:
        """Whether ``doing`` waits for this thread: under way in it, or a
        reset whose give-backs to wait for (``waits``) count one under way
        in it, still listed (see ``_wait_out``)."""
        me = threading.get_ident()
        if doing.thread == me:
            return True
        return any(each.thread == me and each.here() and self._listed(each) for each in doing.waits)

    def _listed(self, doing: _Doing) -> bool:
        book = self._book
        return doing in (book.resetting if doing.reset else book.giving)

    def _giving_back(self, keys: Sequence[bytes], resets: int, refund: Callable[[], None]) -> None:
        """Runs ``refund()``, the give-back of a call on ``keys`` sent when
        ``_resets_of(keys)`` was ``resets``, unless a reset found one of them
        since (PROTOCOL.md: nothing is given back for a call sent before a
        reset of one of its keys through this store). Ordered with this
        store's resets, whatever thread makes them: while one of its keys'
        marks is being reset, it waits for the reset's end and looks again
        (an ``UNLINK`` in flight is not counted yet, and a refund sent
        meanwhile could land after the key's next unit), and gives nothing
        back for one under way in its own thread; once decided, it is on
        its way, and a reset begun meanwhile waits for it (see
        ``_after_give_backs``)."""
        marks = _marks(keys)
        _own_frame(lambda frame: self._give_back_in(frame, marks, resets, refund))

    def _give_back_in(
        self, frame: GeneratorType[None, None, None], marks: frozenset[int], resets: int, refund: Callable[[], None]
    ) -> None:
        """``_giving_back``, in ``frame`` (see ``_own_frame``)."""
        me = _Doing(marks, frame, reset=False)
        while True:
            with self._order_lock:
                book = self._settled()
                resetting = [doing for doing in book.resetting if doing.marks & marks]
                if not resetting:
                    if _count(book, marks) != resets:
                        return  # a reset found one of its keys since the call was sent
                    self._book = book._replace(giving=(*book.giving, me))
                    break
            if not self._after_resets(resetting):
                # Under a reset of its keys in this thread, or under a
                # give-back in this thread that such a reset waits for: that
                # reset may find them, and it cannot end first. Less, never more.
                return
        try:
            refund()
        finally:
            self._ended(me)

    def _ended(self, doing: _Doing, found: bool = False) -> None:
        """``doing`` out of the book, as its thread ends it: a reset counted
        on its marks when it ``found`` its keys (or may have). In one change
        of the book: interrupted here, it stays listed until it is
        ``_settled`` (a reset as one that found its keys), never taken out
        uncounted."""
        with self._order_lock:
            book = self._book
            if doing in book.resetting:
                others = tuple(each for each in book.resetting if each is not doing)
                self._book = book._replace(resets=_counted(book.resets, [doing.marks] if found else []), resetting=others)
            elif doing in book.giving:
                self._book = book._replace(giving=tuple(each for each in book.giving if each is not doing))
        doing.done.set()

    def _settled(self) -> _Book:
        """Under the order lock: the book, with the resets and give-backs
        whose threads left them without taking them out (see ``_Doing``)
        taken out: a reset counted on its marks, as one that may have found
        its keys (its ``UNLINK`` may have run); a give-back dropped (its
        refund, if sent, may land any time: nobody can know when)."""
        book = self._book
        # Asked once each: a thread may leave one while this looks.
        left = [doing for doing in (*book.resetting, *book.giving) if not doing.here()]
        if left:
            book = _Book(
                _counted(book.resets, [doing.marks for doing in left if doing.reset]),
                tuple(doing for doing in book.resetting if doing not in left),
                tuple(doing for doing in book.giving if doing not in left),
            )
            self._book = book
        for doing in left:
            doing.done.set()
        return book

    def _resets_of(self, keys: Sequence[bytes]) -> int:
        """``_Async._resets_of`` for this store: the resets counted on the
        marks of ``keys``, a sum of counts that only grow. Read before a call
        is sent: a reset under way then (or begun since) counts as after it
        once it ends. A reset whose thread left it unsaid is counted first
        (see ``_settled``), so that a call sent since counts as after it."""
        book = self._book
        if book.resetting and not all(doing.here() for doing in book.resetting):
            with self._order_lock:
                book = self._settled()
        # (_count(book, _marks(keys)), without its calls: every call reads it.)
        resets = book.resets
        if len(keys) == 1:
            return resets[_mark(keys[0])]
        return sum(resets[mark] for mark in {_mark(key) for key in keys})

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
        resets = self._resets_of(keys)
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
            else:  # unless a reset found one of its keys since (see _giving_back)
                self._giving_back(keys, resets, lambda: self._refund(keys, cost, slot, self._core.unguarded(marks)))

        def release() -> None:
            # A waiting acquire's booking: on a bucket, given back only while
            # it is the latest (PROTOCOL.md, "Guarded refund"); the
            # fallback's, as cancel() gives it back.
            if slot is None:
                cancel()
            else:
                self._giving_back(keys, resets, lambda: self._refund(keys, cost, slot, marks))

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


def _count(book: _Book, marks: frozenset[int]) -> int:
    """The resets ``book`` counts on ``marks``."""
    return sum(book.resets[mark] for mark in marks)
