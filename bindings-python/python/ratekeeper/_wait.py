"""Waiting on asyncio, the context manager / decorator form of ``acquire``,
and the ``ratekeeper.limit`` decorator.

The native classes' ``acquire_async`` and ``acquiring`` methods call into
this module, since a coroutine and ``async with`` are Python's own. A
*subject* is whatever decides: a limiter, a ``KeyedLimiter`` or a
``Policy``; its *arguments* are what its ``acquire`` takes before
``timeout``: ``(cost,)``, ``(key, cost)`` or ``(request, cost)``.
"""

from __future__ import annotations

import functools
import operator
import os
import sys
import threading
import time
import traceback
import weakref
from types import TracebackType
from typing import TYPE_CHECKING, Any, AsyncGenerator, Callable, Generator, Optional, TypeVar, Union, overload

from ratekeeper._errors import RateLimitError, RateLimitTypeError

# asyncio and inspect are imported where they are used: asyncio alone took
# 54 of the 59 ms `import ratekeeper` took, for programs that never wait
# on it (the CLI, a synchronous service, a short-lived worker).
if TYPE_CHECKING:
    import asyncio

    from typing_extensions import ParamSpec

    from ratekeeper._ratekeeper import (
        KeyedLimiter,
        Limiter,
        Policy,
        Reservation,
        _Algorithm,
        _Key,
        _Request,
        _Seconds,
    )

    _P = ParamSpec("_P")
    _Subject = Union[Limiter, KeyedLimiter, Policy]

_R = TypeVar("_R")


# Moving up: a bucket keeps no record of single bookings and gives back
# exactly only its latest: a booking given back from the middle of the queue
# would let the next one share a slot with a later waiter (two units at once
# from a burst of one). On a GCRA or a leaky bucket (``_moves_up()``, the
# core's ``moves_up``: a limiter, a key of a keyed limiter, or a policy of
# that one limit) the waiters booked after it, in the same queue (the
# limiter, the key of a keyed limiter, or every request of the policy),
# give theirs back too, newest first, and book again in order, each landing
# no later than it was, as the JS acquire does on abort. A token bucket, or
# a policy of several limits with a bucket among them, cannot (a waiter
# booked again could land later: the refill a capacity clipped, or a
# limit's hold until the slowest limit's slot, is not given back): it gives
# a booking back only while it is the latest of its keys (``latest_only``).
# A window algorithm keeps each booking where it was counted (the log at its
# instant, the counters per window), so a cancelled booking is given back as
# its refund does (see the README) and nobody moves: so too a policy of
# windows only. What came since is told per key (``_rebook``, the native
# ``Shared``'s marks): a call on another key of a keyed limiter, or on
# another key in each limit of a policy, touched none of the states a
# booking holds.

# The most a loop's timer fires before its time, in seconds: uvloop's count
# in whole milliseconds from a time cached at the start of each iteration.
_EARLY = 0.002


class _Waiter:
    """An ``acquire_async`` sleeping until its slot: what it booked, how to
    book it again, and the future that wakes it when its slot moved."""

    __slots__ = ("args", "cancels", "error", "latest_only", "loop", "moved", "queue", "reservation", "task")

    def __init__(
        self,
        args: tuple[Any, ...],
        reservation: Any,
        queue: object,
        loop: asyncio.AbstractEventLoop,
        task: Optional[asyncio.Task[Any]],
    ) -> None:
        self.args = args
        self.reservation = reservation
        self.queue = queue
        # Nobody moves, and its booking is given back only while it is the
        # latest of its keys (a token bucket, or a policy of several limits
        # with a bucket among them, as it was when it booked: see "Moving up"
        # above).
        self.latest_only = False
        self.loop = loop
        # Held weakly, as is ``moved`` (whose callbacks hold the task): the
        # waiter stays in _WAITING until its coroutine ends, and a task left
        # pending on a loop closed since must still be collected, which
        # closes its coroutine and so gives its booking back.
        self.task: Optional[weakref.ReferenceType[asyncio.Task[Any]]] = None if task is None else weakref.ref(task)
        # A task may have caught a cancellation before and gone on without
        # uncancel(): only a request made since it began waiting counts.
        self.cancels = self._cancel_requests()
        self.error: Optional[BaseException] = None
        self.moved: Optional[weakref.ReferenceType[asyncio.Future[None]]] = None

    def _cancel_requests(self) -> int:
        task = None if self.task is None else self.task()
        cancelling = getattr(task, "cancelling", None)
        return 0 if cancelling is None else int(cancelling())

    def cancelling(self) -> bool:
        """Whether its task is being cancelled (known from Python 3.11)."""
        return self._cancel_requests() > self.cancels


# The sleeping acquire_async calls of each subject (by id: a waiter holds its
# subject, and the entry goes with the last waiter), in booking order.
_WAITING: dict[int, list[_Waiter]] = {}
# Reentrant: a collection during a booking may close an abandoned
# acquire_async, whose withdrawal takes the lock again on this thread (and
# waits for the withdrawal under way: see _withdraw).
_WAITING_LOCK = threading.RLock()
# The withdrawals left for later on this thread, while one is under way.
_DEFERRED = threading.local()

# A fork copies the lock as it is: held by another thread at that moment
# (a booking or a withdrawal under way), it stayed held in the child, where
# no thread would ever let it go, and every acquire_async there waited
# forever. So the forking thread takes it first (waiting for the one under
# way to end, which leaves _WAITING whole too), and parent and child each
# let it go: the logging module's way with its own lock.
if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(
        before=_WAITING_LOCK.acquire, after_in_parent=_WAITING_LOCK.release, after_in_child=_WAITING_LOCK.release
    )


def _queue_of(subject: _Subject, args: tuple[Any, ...]) -> object:
    """What a waiter of ``subject`` queues behind: ``None`` when nobody
    moves up (see "Moving up" above), else the same object for the same queue."""
    # Here, not at the top: the native module imports this one.
    from ratekeeper._ratekeeper import KeyedLimiter

    if not subject._moves_up():
        return None
    # A keyed limiter's args are (key, cost): a queue per key, named as the
    # store names it (42, "42" and b"42" are one key). A policy's requests
    # are one queue: its global limits are shared.
    return ("key", _key_bytes(args[0])) if isinstance(subject, KeyedLimiter) else ()


def _key_bytes(key: object) -> bytes:
    """A key as the store reads it: a str's UTF-8, bytes as they are, an
    int's decimal digits (the store has already accepted it).

    A subclass's text or bytes are read by ``str`` and ``bytes`` themselves,
    as an exact ``bytes``, as the store reads them: its own ``encode()`` or
    ``__eq__`` put a waiter in another queue than its key's."""
    if isinstance(key, str):
        return str.encode(key)
    if isinstance(key, bytes):
        return bytes.__getitem__(key, slice(None))
    return str(operator.index(key)).encode()  # type: ignore[arg-type]


def _wake(waiter: _Waiter) -> None:
    """Wakes ``waiter`` (on its own loop) to read its new booking, or its ``error``."""
    moved = None if waiter.moved is None else waiter.moved()
    if moved is not None and not moved.done():
        moved.set_result(None)


def _withdraw(subject: _Subject, waiter: _Waiter) -> None:
    """Gives ``waiter``'s booking back, and moves up those booked after it
    in its queue (see "Moving up" above).

    One that starts while another is under way on this thread (a collection
    during a booking closed an abandoned acquire_async) runs after it: the
    one under way holds a list of the waiters it books again, which the
    other would change under it."""
    with _WAITING_LOCK:
        deferred: Optional[list[tuple[_Subject, _Waiter]]] = getattr(_DEFERRED, "withdrawals", None)
        if deferred is not None:
            deferred.append((subject, waiter))
            return
        _DEFERRED.withdrawals = deferred = []
        try:
            try:
                _withdraw_now(subject, waiter)
            finally:
                # The deferred ones give theirs back even if this one failed.
                # Their errors have nobody to go to (their coroutines are
                # closed), so they go where Python reports those of a __del__.
                while deferred:
                    try:
                        _withdraw_now(*deferred.pop(0))
                    except Exception as error:
                        _unraisable(error, "Exception ignored in the withdrawal of a closed acquire_async")
        finally:
            # Even after a KeyboardInterrupt: else every later withdrawal on
            # this thread would be deferred to one that never comes.
            _DEFERRED.withdrawals = None


def _unraisable(error: BaseException, message: str) -> None:
    """Reports ``error``, raised where it could not be, to
    ``sys.unraisablehook``. CPython's own hook takes only its own argument
    type, which Python code cannot make (it raised ``TypeError`` in place of
    the report, out of the withdrawal that made it): for that one, the
    report is written as it writes one, to ``sys.stderr``."""
    hook = sys.unraisablehook
    if hook is not sys.__unraisablehook__:
        hook(_Unraisable(error, message))
    elif sys.stderr is not None:
        print(f"{message}:", file=sys.stderr)
        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)


class _Unraisable:
    """What a ``sys.unraisablehook`` set by Python code takes: an error
    raised where it could not be."""

    def __init__(self, error: BaseException, message: str) -> None:
        self.exc_type: type[BaseException] = type(error)
        self.exc_value: Optional[BaseException] = error
        self.exc_traceback: Optional[TracebackType] = error.__traceback__
        self.err_msg: Optional[str] = message
        self.object: object = None


def _withdraw_now(subject: _Subject, waiter: _Waiter) -> None:
    """``_withdraw``'s work (lock held)."""
    booker: Any = subject  # its arguments vary by class
    queue = _WAITING.get(id(subject), [])
    if waiter not in queue:
        waiter.reservation.cancel()  # taken out by another's withdrawal
        return
    if waiter.queue is None:
        # Nobody moves: the booking is given back as its refund does; but
        # a token bucket, or a policy of several limits with a bucket among
        # them, gives it back only while it is the latest booking of its
        # keys (see "Moving up" above), else its slot goes unused. Neither
        # reads the clock: one that raises (the caller's ``clock=``, as it
        # raised in the wait) keeps nothing from being given back, as in JS.
        if waiter.latest_only:
            try:
                booker._rebook(waiter.reservation._seq, True, [(waiter.reservation, waiter.args)], [])
            except Exception as error:
                _unraisable(error, "Exception ignored while an acquire_async was withdrawn")
        else:
            waiter.reservation.cancel()
        _leave(subject, queue, {id(waiter)})
        return
    at = queue.index(waiter)
    # Behind it, a waiter in no queue: booked after a limit was added to a
    # policy of one limit that moves up (of several since), it shares that
    # limit but is never booked again. Given back from the middle of their
    # queue, this booking would free the slot at its end, which the next
    # caller would share with that waiter (two units at once from a burst of
    # one). So nobody moves, and nothing is given back (its slot goes
    # unused), as the JS acquire does. (Only a policy's waiters can be in a
    # queue and in none: a limiter's algorithm, and so its keys', never
    # changes.)
    if any(w.queue is None for w in queue[at + 1 :]):
        _leave(subject, queue, {id(waiter)})
        return
    later = [w for w in queue[at + 1 :] if w.queue == waiter.queue]
    # Cancelled too (many tasks at once), or on a loop closed since: given
    # back with the rest, and taken out now (nobody is waiting there, and a
    # cancelled one's own withdrawal then has nothing to do).
    staying = [w for w in later if not w.cancelling() and not w.loop.is_closed()]
    # Everything given back (newest first) and booked again in one native
    # step, so that no other thread's call takes a slot between, and only
    # if nobody but the waiters booked on their keys since: a thread's
    # ``acquire``, a ``reserve()`` the caller holds, a reset, a reconfigure
    # or a restore since would make those behind move up into slots others
    # hold (two units at once from a burst of one). Told per key (a call on
    # another key of a keyed limiter, or on another key of each limit of a
    # policy, touched none of theirs), from the cancelled waiter's booking
    # on (a later waiter gone, cancelled or of another key, is none of
    # those).
    try:
        rebooked = booker._rebook(
            waiter.reservation._seq,
            False,
            [(w.reservation, w.args) for w in [*reversed(later), waiter]],
            [w.args for w in staying],
        )
    except Exception as error:
        # The clock failed, read before anything was given back (and only
        # with waiters staying, to book them again: with nobody left behind
        # it, the booking is given back without it): nobody moves, nothing
        # is given back (its slot goes unused), and the withdrawal ends; the
        # error goes where a finalizer's would, not in place of the
        # cancellation under way. (The JS acquire gives every booking back
        # there and fails the waiters behind with the clock's error; these
        # keep their slots instead.)
        _leave(subject, queue, {id(waiter)})
        _unraisable(error, "Exception ignored while an acquire_async was withdrawn")
        return
    if rebooked is None:
        # Nobody moves, and nothing is given back: its slot goes unused.
        _leave(subject, queue, {id(waiter)})
        return
    gone = {id(w) for w in later if w not in staying}
    gone.add(id(waiter))
    for other, booking in zip(staying, rebooked):
        given_back = other.reservation
        if isinstance(booking, BaseException):  # the limiter refused: that waiter fails
            other.error = booking
        else:
            other.reservation = booking
        try:
            other.loop.call_soon_threadsafe(_wake, other)
        except RuntimeError:
            # Its loop closed just now: nobody is waiting there. Its new
            # booking is not the latest, so it is never given back (that
            # would free the slot at the end of the queue): it goes unused,
            # and the waiter keeps the one given back above, whose cancel()
            # (when its coroutine is closed) does nothing.
            other.reservation = given_back
            gone.add(id(other))
    _leave(subject, queue, gone)


def _leave(subject: _Subject, queue: list[_Waiter], gone: set[int]) -> None:
    """Takes the waiters whose ids are in ``gone`` out of ``subject``'s
    ``queue``, and the queue out of ``_WAITING`` once empty (lock held)."""
    if len(gone) == 1:
        # One waiter, as each that goes (at the front, as they go in
        # order): read up to its place only. The queue rebuilt for each,
        # waiters served all at once (a clock that jumped ahead, a laptop
        # asleep) took a time of the square of their number.
        (only,) = gone
        for at, waiter in enumerate(queue):
            if id(waiter) == only:
                del queue[at]
                break
    else:
        queue[:] = [w for w in queue if id(w) not in gone]
    if not queue:
        _WAITING.pop(id(subject), None)


# The waiting ``acquire`` of limiters, keyed limiters and policies, set on
# the native classes by ``ratekeeper/__init__.py`` (``set_acquire``): the
# booking is native (``_book``), the sleep is Python code, called by Python
# code. A daemon thread still asleep when the interpreter exits is ended by
# CPython (before 3.14) as it takes the GIL back, with ``pthread_exit``,
# which unwinds the thread's stack: through the frames of a native method
# that slept, that crashed the process (SIGSEGV at exit) where a thread
# asleep in Python code ends quietly.

_ACQUIRE_DOC = """Wait until ``cost`` units of {what} are ours, then return; raise
``RateLimited`` if that would take longer than ``timeout`` seconds.

Books the earliest slot (as ``reserve`` does, so waiters are served
first come, first served) and sleeps until it with ``time.sleep``,
releasing the GIL; no polling. Then it reads the limiter's clock and
sleeps again what is left, until the slot has come on that clock, so
that a ``clock=`` coarser than ``time.monotonic`` or behind it never lets
it go before its slot (a ``time.sleep`` replaced to skip the wait, which
took less than half its time on ``time.monotonic``, is trusted). A clock
that never reaches the slot, one standing still, keeps the thread
waiting until an exception ends the wait (nothing cancels a thread):
do not use one with ``acquire``, unless ``time.sleep`` moves it.
``timeout`` (default ``None``: no bound) bounds the booked wait, on the
limiter's clock, and is checked before booking: a longer wait raises
``RateLimited`` at once, with ``.retry_after``, booking nothing, and
``timeout=0`` never sleeps; once booked, the call waits for its slot.
If the wait is interrupted (Ctrl-C, any exception, the clock's too), the
booking is given back before the exception propagates (a bucket's only
while no other booking came after it: else its slot goes unused, as one
given back from the middle would be shared)."""


def _left_after(left: float, slept: float, took: float) -> float:
    """What is left to sleep until a booking's slot, after a sleep of
    ``slept`` seconds that took ``took`` seconds on the sleeper's own clock
    (an ``acquire``'s ``time.monotonic``, an ``acquire_async``'s loop's):
    ``left``, what is left on the limiter's clock, read once the sleep ended
    (0 once the slot has come there), or 0 for a sleep trusted as it is.
    The Redis clients' ``acquire`` waits on the caller's ``clock=`` by this
    rule too (``ratekeeper.redis._core._Core.sleeps``).

    One rule for ``acquire`` and ``acquire_async``: each sleeps again what is
    left on the limiter's clock until its slot has come there, never before,
    as the JS acquire waits. The clocks differ: a loop's timer fires a little
    early (uvloop's count in milliseconds), and a ``clock=`` of the caller's
    may count coarser than the sleeper's (in tenths of a second, say) or run
    behind it. A sleep trusted when more than 2 ms was left, or when that
    clock had not moved, let the call go before its slot on the limiter's
    clock, which its ``try_acquire`` still refused. A clock that never
    reaches the slot (one standing still) keeps it waiting: an
    ``acquire_async`` until its task is cancelled (``asyncio.wait_for``, say),
    an ``acquire`` until an exception ends it (Ctrl-C): nothing cancels a
    thread. ``timeout`` is no bound there: it bounds the booked wait on the
    limiter's clock, checked at booking, as in JS; on a clock behind the
    sleeper's, or counting coarser, the slot comes later on the sleeper's,
    and giving up there would refuse a call its limiter admitted, its wait
    spent.

    Trusted still, as it always was, when it took less than half its time on
    the sleeper's clock too: no sleep, but a test's ``time.sleep`` or
    ``asyncio.sleep``, replaced to skip the wait, which the limiter's clock
    (the machine's, say) never follows. Sleeping again there waited for that
    clock in earnest, or for ever. Only with more than 2 ms left, or a clock
    that did not move: less is a timer's that fired early (a replaced sleep
    that moved the limiter's clock a little short of the slot stands for one).
    """
    if 2 * took < slept and (left > _EARLY or left >= slept):
        return 0.0
    return left


def _sleep_until(subject: _Subject, reservation: Reservation) -> None:
    """Sleeps until the slot of ``reservation``, an ``acquire``'s booking of
    ``subject``, on its clock (see ``_left_after``); an exception during the
    wait (the sleep's, or the clock's read for what is left) gives it back
    (``Reservation._give_back``) before propagating."""
    try:
        wait = reservation.wait
        while wait > 0:
            # Both looked up on every call, so that a test may replace them.
            began = time.monotonic()
            time.sleep(wait)
            took = time.monotonic() - began
            wait = _left_after(subject._left(reservation), wait, took)
    except BaseException:
        reservation._give_back()
        raise


# `None` (no wait) is told by each, not by _sleep_until: an acquire that
# does not wait then makes no Python call but its own.


def _limiter_acquire(self: Limiter, /, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
    reservation = self._book(cost, timeout)
    if reservation is not None:
        _sleep_until(self, reservation)


def _keyed_acquire(self: KeyedLimiter, /, key: _Key, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
    reservation = self._book(key, cost, timeout)
    if reservation is not None:
        _sleep_until(self, reservation)


def _policy_acquire(
    self: Policy, /, request: _Request = None, cost: int = 1, timeout: Optional[_Seconds] = None
) -> None:
    reservation = self._book(request, cost, timeout)
    if reservation is not None:
        _sleep_until(self, reservation)


def set_acquire(limiter: type[Limiter], keyed: type[KeyedLimiter], policy: type[Policy]) -> None:
    """Sets ``acquire`` on the native classes ``Limiter``, ``KeyedLimiter``
    and ``Policy`` (see above)."""
    for cls, method, what in (
        (limiter, _limiter_acquire, "the limiter"),
        (keyed, _keyed_acquire, "``key``'s limiter"),
        (policy, _policy_acquire, "every limit"),
    ):
        method.__name__ = "acquire"
        method.__qualname__ = f"{cls.__name__}.acquire"
        method.__doc__ = _ACQUIRE_DOC.format(what=what)
        # help() shows the arguments as the native methods' do; the types
        # are the stubs' (some, such as _Key, exist only there).
        method.__annotations__ = {}
        setattr(cls, "acquire", method)


async def acquire_async(subject: _Subject, args: tuple[Any, ...], timeout: Optional[_Seconds]) -> None:
    """Book like ``acquire``, then sleep until the slot on the event loop.

    Booking happens when the coroutine first runs, so a coroutine that is
    never awaited books nothing. Any exception during the sleep (above all
    ``asyncio.CancelledError``) gives the booking back before propagating;
    the ``acquire_async`` calls of a GCRA or a leaky bucket (or of a policy
    of that one limit) booked after it move up into the slots it left; a
    token bucket, or a policy of several limits with a bucket among them,
    moves nobody and gives the booking back only while it is the latest of
    its keys (see "Moving up" at the top of this module).
    """
    import asyncio

    booker: Any = subject  # its arguments vary by class
    # Before booking: without a running asyncio loop (another runner) this
    # raises, and nothing is booked to give back.
    loop = asyncio.get_running_loop()
    with _WAITING_LOCK:
        reservation = booker._book(*args, timeout, waiter=True)
        if reservation is None:  # no wait
            return
        waiter = _Waiter(args, reservation, _queue_of(subject, args), loop, asyncio.current_task())
        # As it gives back when it books (a limit added later does not change
        # how its own booking is held).
        waiter.latest_only = waiter.queue is None and not booker._gives_back_anywhere()
        _WAITING.setdefault(id(subject), []).append(waiter)
    wait = reservation.wait
    try:
        while wait > 0:
            moved: asyncio.Future[None] = loop.create_future()
            waiter.moved = weakref.ref(moved)
            began = loop.time()
            # Looked up on every call, so that a test may replace asyncio.sleep.
            sleeping = asyncio.ensure_future(asyncio.sleep(wait))
            try:
                await asyncio.wait((sleeping, moved), return_when=asyncio.FIRST_COMPLETED)
            finally:
                try:
                    sleeping.cancel()
                except RuntimeError:
                    # Its loop is closed (an abandoned call, closed when
                    # collected): nothing left to cancel there, and the
                    # withdrawal below still runs.
                    pass
            # A replaced asyncio.sleep (a test's) that failed: its error,
            # not a wait taken as slept.
            failed = sleeping.exception() if sleeping.done() and not sleeping.cancelled() else None
            if failed is not None:
                raise failed
            if moved.done():
                if waiter.error is not None:
                    raise waiter.error
                # Booked again, earlier (however many withdrawals moved it
                # before this task ran): the wait to the latest booking.
                wait = booker._left(waiter.reservation)
                continue
            # Slept, on the loop's clock: what is left on the limiter's, if
            # it is to be slept again (see _left_after).
            took = loop.time() - began
            wait = _left_after(booker._left(waiter.reservation), wait, took)
    except BaseException:
        _withdraw(subject, waiter)
        raise
    with _WAITING_LOCK:
        _leave(subject, _WAITING.get(id(subject), []), {id(waiter)})


class Acquiring:
    """``acquire(..., timeout)`` as a context manager and decorator.

    Made by ``x.acquiring(...)`` for a limiter, a ``KeyedLimiter`` or a
    ``Policy`` ``x``, or by ``ratekeeper.limit``. ``with`` and ``async with``
    acquire before the block (``acquire`` / ``acquire_async``); leaving the
    block gives nothing back. Used as a decorator, it acquires before every
    call: with ``acquire_async`` for a coroutine function, ``acquire``
    otherwise. ``timeout=0`` never waits: ``RateLimited`` is raised at once
    when the answer is no.

    A generator function (``def`` with ``yield``) or an async generator
    function (``async def`` with ``yield``) stays one, and acquires at the
    first iteration (the first ``next`` / ``send``, or ``__anext__`` /
    ``asend``), not when it is called: a generator never iterated takes
    nothing, and ``RateLimited`` is raised by that first iteration. An async
    generator waits with ``acquire_async``, never blocking the event loop.
    Values sent in, exceptions thrown in and closing reach the generator
    decorated, as with ``yield from``.
    """

    __slots__ = ("_args", "_subject", "_timeout")

    def __init__(self, subject: _Subject, args: tuple[Any, ...], timeout: Optional[_Seconds]) -> None:
        self._subject: Any = subject  # its arguments vary by class
        self._args = args
        self._timeout = timeout

    def __repr__(self) -> str:
        args = ", ".join(map(repr, self._args))
        return f"{self._subject!r}.acquiring({args}, timeout={self._timeout!r})"

    def __enter__(self) -> None:
        # `acquire`'s steps, without its call (a decorated function's every call).
        reservation = self._subject._book(*self._args, self._timeout)
        if reservation is not None:
            _sleep_until(self._subject, reservation)

    def __exit__(self, *exc_info: object) -> None:
        return None

    async def __aenter__(self) -> None:
        await self._subject.acquire_async(*self._args, self._timeout)

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    def __call__(self, func: Callable[_P, _R]) -> Callable[_P, _R]:
        """Decorate ``func`` so that every call first acquires (a generator's
        or async generator's: its first iteration). A ``staticmethod`` or
        ``classmethod`` stays one, its function decorated. A cost above the
        limit raises here, as ``ratekeeper.limit`` refuses it: no call could
        pay it; so does an object that is not callable (``RateLimitTypeError``)."""
        checked_cost(self._subject, self._args[-1])
        return _decorate(func, lambda args, kwargs: self)


class KeyedAcquiring:
    """``ratekeeper.limit(..., key=key)``: a decorator that acquires before
    every call, from the key ``key(*args, **kwargs)`` gives for that call's
    arguments (for a ``Policy``: the request it gives).

    It waits, raises and treats generators as ``Acquiring`` does; the key is
    read when the call acquires (a generator's: at its first iteration). No
    context manager: a ``with`` block has no arguments to read a key from.
    """

    __slots__ = ("_cost", "_field", "_key", "_subject", "_timeout")

    def __init__(
        self,
        subject: Union[KeyedLimiter, Policy],
        key: Callable[..., Any],
        field: Optional[str],
        cost: int,
        timeout: Optional[_Seconds],
    ) -> None:
        self._subject = subject
        self._key = key
        # The request field the key goes in (a policy made from rates for
        # ``key``), or None: the key (or request) goes as it is.
        self._field = field
        self._cost = cost
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"KeyedAcquiring({self._subject!r}, key={self._key!r}, cost={self._cost!r}, timeout={self._timeout!r})"

    def _entering(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Acquiring:
        """What the call with ``args`` and ``kwargs`` acquires."""
        key = self._key(*args, **kwargs)
        if self._field is not None:
            # Refused as a KeyedLimiter refuses it, as with one rate: the
            # request this makes is none the caller wrote.
            if not _is_key(key):
                raise RateLimitTypeError("`key` must be a str, bytes or int", "invalid_type")
            key = {self._field: key}
        return Acquiring(self._subject, (key, self._cost), self._timeout)

    def __call__(self, func: Callable[_P, _R]) -> Callable[_P, _R]:
        """Decorate ``func`` so that every call first acquires for its key (a
        generator's or async generator's: at its first iteration). A
        ``staticmethod`` or ``classmethod`` stays one, its function decorated;
        an object that is not callable raises ``RateLimitTypeError``."""
        return _decorate(func, self._entering)


def _is_key(key: object) -> bool:
    """Whether a ``KeyedLimiter`` takes ``key``: a str, bytes, an int (not a
    bool), or what has an ``__index__`` (NumPy's ints), as the int it is."""
    if isinstance(key, (str, bytes)):
        return True
    if isinstance(key, int):
        return not isinstance(key, bool)
    try:
        operator.index(key)  # type: ignore[arg-type]
    except Exception:  # as the store reads it: any failure is no int
        return False
    return True


def _decorate(
    func: Callable[_P, _R], entering: Callable[[tuple[Any, ...], dict[str, Any]], Acquiring]
) -> Callable[_P, _R]:
    """``func`` wrapped to enter ``entering(args, kwargs)`` before each call
    with ``args`` and ``kwargs`` (see ``Acquiring.__call__``)."""
    if isinstance(func, (staticmethod, classmethod)):
        # Not callable as such before Python 3.10, and never a coroutine
        # function to inspect: its function is.
        method: Any = type(func)(_decorate(func.__func__, entering))
        return method  # type: ignore[no-any-return]
    if not callable(func):
        # Else every call would take its units, then fail (a `property`
        # decorated from outside, say).
        raise RateLimitTypeError(f"`func` must be callable, not {type(func).__name__}", "invalid_type")
    guarded: Any = func  # the kinds below are told apart at run time

    async def acquire_then_await(*args: Any, **kwargs: Any) -> Any:
        async with entering(args, kwargs):
            return await guarded(*args, **kwargs)

    def acquire_then_call(*args: Any, **kwargs: Any) -> Any:
        with entering(args, kwargs):
            return guarded(*args, **kwargs)

    def acquire_then_yield_from(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        inner = guarded(*args, **kwargs)  # runs nothing yet
        with entering(args, kwargs):
            pass
        return (yield from inner)

    async def acquire_then_async_yield_from(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        inner = guarded(*args, **kwargs)  # runs nothing yet
        async with entering(args, kwargs):
            pass
        # `yield from` for async generators, which have none: each value
        # sent, exception thrown (but closing's) and closing is passed on.
        try:
            value = await inner.__anext__()
            while True:
                try:
                    sent = yield value
                except GeneratorExit:
                    raise  # closes `inner` below
                except BaseException as thrown:
                    value = await inner.athrow(thrown)
                else:
                    value = await inner.asend(sent)
        except StopAsyncIteration:
            return
        finally:
            await inner.aclose()  # at once when it has already finished

    import inspect

    # An object is what its class's __call__ is (`async def __call__`), and
    # a partial what it wraps (inspect reads a partial of a function, not of
    # such an object: decorated as sync, it blocked the loop while it waited).
    inner: Any = func
    while isinstance(inner, functools.partial):
        inner = inner.func
    plain = inspect.isfunction(inner) or inspect.ismethod(inner)
    call = None if plain else getattr(type(inner), "__call__", None)

    def kind(test: Callable[[Any], bool]) -> bool:
        return test(func) or test(inner) or (call is not None and test(call))

    wrapper: Callable[..., Any]
    if kind(inspect.isasyncgenfunction):
        wrapper = acquire_then_async_yield_from
    elif kind(inspect.isgeneratorfunction):
        wrapper = acquire_then_yield_from
    elif kind(inspect.iscoroutinefunction):
        wrapper = acquire_then_await
    else:
        wrapper = acquire_then_call
    return functools.wraps(func)(wrapper)


# The largest count a call takes (a u64).
_MAX_COUNT = 2**64 - 1


def checked_cost(subject: Union[Limiter, KeyedLimiter, Policy], cost: Any) -> int:
    """``cost``, the cost of every call to come, checked once against
    ``subject``: an int from 0 to its limit (a policy's: its tightest
    limit's), so that a bad one fails where it is given, not on every call.
    The same errors as a decision's, with the core's words."""
    from ratekeeper._ratekeeper import Policy, guarantee

    if isinstance(cost, bool):
        raise RateLimitTypeError("`cost` must be an int, not bool", "invalid_type")
    try:
        units = operator.index(cost)  # an int, or one such as numpy's
    except TypeError:
        raise RateLimitTypeError(f"`cost` must be an int, not {type(cost).__name__}", "invalid_type") from None
    if units < 0:
        raise RateLimitError("`cost` must not be negative", "invalid_value")
    # What no call takes, whatever the limit (an empty policy has none): as a
    # call refuses it, not once per call.
    if units > _MAX_COUNT:
        raise RateLimitError("`cost` must be at most 2^64 - 1", "invalid_value")
    limit = guarantee(subject).burst if isinstance(subject, Policy) else subject.limit
    if units > limit:
        raise RateLimitError(
            f"`cost` {units} exceeds the limit {limit}, so it could never be allowed", "cost_exceeds_limit"
        )
    return units


def flag(value: object) -> Optional[bool]:
    """``value`` as a flag, or ``None`` when it is none: a ``bool``, or
    NumPy's (``numpy.bool_``, no int to NumPy either), told as the native
    module tells one (pyo3's rule: a ``Decision``'s ``allowed``), so that
    one rule holds for every flag. Any other value with a truth is not one."""
    if isinstance(value, bool):
        return value
    kind = type(value)
    if getattr(kind, "__module__", None) == "numpy" and kind.__name__ in ("bool_", "bool"):
        return bool(value)
    return None


@overload
def limit(
    rates: Union[str, Limiter, Policy],
    *,
    algorithm: _Algorithm = ...,
    wait: bool = ...,
    timeout: Optional[_Seconds] = ...,
    cost: int = ...,
    key: None = ...,
) -> Acquiring: ...


@overload
def limit(
    rates: Union[str, Limiter, KeyedLimiter],
    *,
    algorithm: _Algorithm = ...,
    wait: bool = ...,
    timeout: Optional[_Seconds] = ...,
    cost: int = ...,
    key: Callable[..., _Key],
) -> KeyedAcquiring: ...


@overload
def limit(
    rates: Policy,
    *,
    algorithm: _Algorithm = ...,
    wait: bool = ...,
    timeout: Optional[_Seconds] = ...,
    cost: int = ...,
    key: Callable[..., _Request],
) -> KeyedAcquiring: ...


def limit(
    rates: Union[str, Limiter, KeyedLimiter, Policy],
    *,
    algorithm: _Algorithm = "token_bucket",
    wait: bool = True,
    timeout: Optional[_Seconds] = None,
    cost: int = 1,
    key: Optional[Callable[..., Any]] = None,
) -> Union[Acquiring, KeyedAcquiring]:
    """A decorator limiting how often the decorated function runs.

    ``@ratekeeper.limit("5/second")`` admits calls at that rate, across every
    caller (thread or task) of the function: ``rates`` is a rate string
    (``"10/second;100/day"``: every rate at once, ``Policy.from_rates`` with
    ``algorithm``; one rate makes that one limiter, named by the rate), or a
    limiter or ``Policy`` already built. Works on sync
    and async functions (``async def``: waits with ``asyncio.sleep``), and
    on generator and async generator functions, which stay generators and
    acquire at their first iteration, not when called (see ``Acquiring``).

    ``key``, a function of the call's arguments (``key(*args, **kwargs)``,
    a method's ``self`` included), limits each key apart: ``@limit("5/second",
    key=lambda user, *a, **k: user)`` admits 5 calls a second per user, one
    user's calls taking nothing from another's. The key is a ``str``,
    ``bytes`` or ``int``, as a ``KeyedLimiter`` takes it, and the limits are
    one: a rate string's are kept per key (a ``KeyedLimiter`` of its limiter;
    several rates, a policy keyed by the field ``"key"``); a limiter is the
    configuration of every key's own (``KeyedLimiter(limiter)``: its state
    is not used); a ``KeyedLimiter`` is used as it is. With a ``Policy``,
    ``key`` gives the call's request instead (``lambda user, *a, **k:
    {"user": user}``). What ``key`` raises propagates, and a key of a wrong
    type raises the limiter's ``RateLimitTypeError``, on the call. The
    result is then a ``KeyedAcquiring``, a decorator only. A
    ``KeyedLimiter`` without ``key`` raises ``RateLimitTypeError``, and a
    ``Policy`` with a limit keyed by a field ``RateLimitError``
    (``invalid_value``): without ``key`` no call has a request.

    ``wait=True`` (default) makes a call wait for its slot, and raise
    ``RateLimited`` when that would take longer than ``timeout`` seconds
    (default ``None``: no bound); ``wait=False`` raises ``RateLimited`` at
    once instead of waiting (a value that is not a bool, nor NumPy's,
    raises ``RateLimitTypeError``). Each call costs ``cost`` units (a cost above
    the limit is refused here, as no call could ever pay it). Without
    ``key``, the result is also a context manager (``with
    ratekeeper.limit(...):``).
    """
    from ratekeeper._ratekeeper import KeyedLimiter, Limiter, Policy

    # A bool, as every flag of the library: "no" or 0 there is more likely a
    # mistake than a truth value meant.
    waits = flag(wait)
    if waits is None:
        raise RateLimitTypeError(f"`wait` must be a bool, not {type(wait).__name__}", "invalid_type")
    wait = waits
    if not wait and timeout is not None:
        raise RateLimitTypeError("`timeout` applies only with wait=True", "invalid_type")
    if key is not None and not callable(key):
        raise RateLimitTypeError(f"`key` must be a callable, not {type(key).__name__}", "invalid_type")
    subject: Union[Limiter, KeyedLimiter, Policy]
    field: Optional[str] = None
    if isinstance(rates, (Limiter, Policy, KeyedLimiter)):
        subject = rates
    elif isinstance(rates, str):
        policy = Policy.from_rates(rates, algorithm=algorithm)
        # One rate: its own limiter, named by the rate, whose waiters wait
        # as those of a policy of that one limit would.
        single = policy._single()
        if single is not None:
            subject = single
        elif key is None:
            subject = policy
        else:
            # Several per key: every limit keyed by the field the key goes in.
            subject, field = Policy.from_rates(rates, algorithm=algorithm, by=("key",)), "key"
    else:
        raise RateLimitTypeError(
            f"`rates` must be a rate string, a limiter, a KeyedLimiter or a Policy, not {type(rates).__name__}",
            "invalid_type",
        )
    if key is None:
        if isinstance(subject, KeyedLimiter):
            raise RateLimitTypeError(
                "a KeyedLimiter needs `key`, a function of the call's arguments giving its key", "invalid_type"
            )
        cost = checked_cost(subject, cost)
        if isinstance(subject, Policy):
            # Every call's request would be None, which such a limit refuses.
            for name in subject.names:
                by = subject.keyed_by(name)
                if by:
                    raise RateLimitError(
                        f"`key` must be given: limit {name!r} of `rates` is keyed by {by[0]!r}, "
                        "and without `key` no call has a request",
                        "invalid_value",
                    )
            return subject.acquiring(None, cost, timeout if wait else 0)
        return subject.acquiring(cost, timeout if wait else 0)
    if isinstance(subject, Limiter):
        subject = KeyedLimiter(subject)
    cost = checked_cost(subject, cost)
    # `timeout` checked here by `acquiring`, as it is without `key`, rather
    # than by every call. A target it always takes stands in for the keys.
    if isinstance(subject, Policy):
        subject.acquiring(None, cost, timeout if wait else 0)
    else:
        subject.acquiring(0, cost, timeout if wait else 0)
    return KeyedAcquiring(subject, key, field, cost, timeout if wait else 0)
