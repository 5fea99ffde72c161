"""The script's numbers, keys and costs: what a caller gives, checked and converted for the wire."""

from __future__ import annotations

import hashlib
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Literal, NamedTuple, Optional, TypeVar, Union

from ratekeeper import KeyedLimiter, Limiter, Policy, RateLimitError, RateLimitTypeError

# The script every decision runs (protocol 1, core/redis/PROTOCOL.md): the same
# bytes the Rust crate (``ratekeeper::redis::REDIS_SCRIPT``) and the Node client
# (``REDIS_SCRIPT`` of ``ratekeeper/redis``) ship, exported for deployments that
# load or check it themselves (``SCRIPT LOAD``, ``SCRIPT EXISTS``).
from ratekeeper._ratekeeper import REDIS_SCRIPT as REDIS_SCRIPT

#: The script's SHA-1 in hex, what ``EVALSHA`` calls (the Node client's ``REDIS_SCRIPT_SHA``).
REDIS_SCRIPT_SHA = hashlib.sha1(REDIS_SCRIPT.encode(), usedforsecurity=False).hexdigest()

#: The largest value a configuration may let the script's arithmetic reach
#: (2^51 µs or units), so that every sum of such values stays exact in Lua.
MAX_EXACT = 1 << 51
#: The latest ``now`` the caller's clock may give: 2^52 µs after the epoch (2112).
MAX_NOW = 1 << 52
#: The longest window and the longest ``max_wait``: 2^50 µs (35 years), so that
#: a booked slot plus two windows stays exact until ``MAX_NOW`` and beyond.
MAX_SPAN = 1 << 50
#: The most callers of a hot key sent in one batch (``try_acquire_batch``
#: sends its costs as given): the script runs atomically, every other command
#: on the server waiting for it, for a time that grows with the batch (README,
#: "Hot keys"). The Node client's is the same.
MAX_BATCH = 1024
# acquire and peek ask for their reply as one string of integers ('text'),
# which redis-py reads far faster than an array of them (PROTOCOL.md).
_TEXT = ("text",)
# A reply: an array of integers, or a 'text' reply (str with decode_responses).
_Reply = Union[Sequence[int], bytes, str]

_Seconds = Union[int, float, Decimal, Fraction]
_Key = Union[str, bytes, int]
_Request = Optional[Mapping[str, _Key]]
# What decides when Redis cannot answer: for a RedisLimiter, a KeyedLimiter
# (a key's target); for a RedisPolicy, a Policy (a request's).
_KeyFallback = Union[Literal["open", "closed"], Limiter, KeyedLimiter]
_RequestFallback = Union[Literal["open", "closed"], Limiter, Policy]
_Fallback = Union[_KeyFallback, _RequestFallback]
_T = TypeVar("_T")


class _Taken(NamedTuple):
    """What an ``acquire`` took its units at, for a give-back once their
    caller left: the instant it decided at, in s, and each limit's mark as
    it left the key (PROTOCOL.md, "Guarded refund"), which the give-back
    sends back so that a bucket gives the units back only while nothing
    was taken there since, then each key's birth, so that a key reset since
    (by any client) gives nothing back."""

    at: Fraction
    marks: list[int]


def _integers(reply: _Reply) -> list[int]:
    """A script's reply as integers: an array, or a 'text' reply (PROTOCOL.md)."""
    if isinstance(reply, (bytes, str)):
        return [int(number) for number in reply.split()]
    return list(reply)


def _error(message: str, code: str = "invalid_value") -> RateLimitError:
    return RateLimitError(message, code)


def _type_error(name: str, expected: str, value: object) -> RateLimitTypeError:
    return RateLimitTypeError(f"`{name}` must be {expected}, not {type(value).__name__}", "invalid_type")


def _is_asyncio_client(client: object) -> Optional[bool]:
    """Whether ``client`` is redis-py's asyncio client (or a subclass), or its
    sync one; ``None`` for anything else (another library, a test's fake)."""
    for cls in type(client).__mro__:
        module = cls.__module__
        if module == "redis" or module.startswith("redis."):
            return module.startswith("redis.asyncio")
    return None


def _micros(seconds: object, name: str) -> int:
    """Seconds as whole microseconds, the nearest (halves up) to the exact value (a float's own too)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float, Decimal, Fraction)):
        raise _type_error(name, "a number of seconds (int, float, Decimal or Fraction)", seconds)
    # A float or a Decimal may be NaN or infinite; an int or a Fraction not.
    if isinstance(seconds, Decimal):
        finite = seconds.is_finite()
    else:
        finite = not isinstance(seconds, float) or math.isfinite(seconds)
    if not finite:
        raise _error(f"`{name}` must be a finite number")
    micros: Optional[int] = None
    if isinstance(seconds, float):
        # The float's own value to the nearest µs, halves up, as an exact
        # type's (and as the core reads a float): the product rounds first,
        # to a quarter of a µs at epoch seconds, and round() takes a half to
        # the even µs. Only a product within its rounding of a half can
        # round otherwise than the exact value: that one is read exactly.
        scaled = seconds * 1_000_000
        nearest = round(scaled)
        if abs(abs(scaled - nearest) - 0.5) > abs(scaled) * 2**-52:
            micros = nearest
    if micros is None:
        exact = Fraction(seconds) * 1_000_000
        micros = math.floor(exact + Fraction(1, 2))
    if micros < 0:
        raise _error(f"`{name}` must not be negative")
    return micros


def _timeout(timeout: object) -> Optional[float]:
    """An ``acquire``'s ``timeout`` in seconds, checked as the in-process
    acquire checks it: ``None`` (or infinity) for no bound, else a number of
    seconds of at least 0, the errors naming ``timeout``."""
    if timeout is None or _infinite(timeout):
        return None
    return _micros(timeout, "timeout") / 1_000_000


def _infinite(seconds: object) -> bool:
    """Whether ``seconds`` is +infinity, a float's or a ``Decimal``'s, as the
    in-process limiters read "no bound"."""
    if isinstance(seconds, Decimal):  # is_infinite first: a signaling NaN refuses comparisons
        return seconds.is_infinite() and seconds > 0
    return isinstance(seconds, float) and seconds == math.inf


def _duration(seconds: float, name: str) -> int:
    """A limiter's duration (a float of whole nanoseconds) as whole microseconds, at least 1."""
    micros = round(seconds * 1_000_000)
    if micros < 1 or abs(seconds * 1_000_000 - micros) > 1e-4 * max(1, seconds * 1e-3):
        raise _error(f"`{name}` must be a whole number of microseconds on Redis, not {seconds!r} s")
    return micros


def _exact(value: int, name: str, what: str, bound: int = MAX_EXACT) -> None:
    if value > bound:
        power = bound.bit_length() - 1
        raise _error(f"`{name}`: {what} is {value}, above 2^{power} (the limit of exact arithmetic on Redis)", "overflow")


def _ceil_micros(seconds: float) -> int:
    """A wait in seconds as whole µs, rounded up."""
    return math.ceil(seconds * 1e6)


def _instant(value: _Seconds, name: str) -> str:
    """ARGV's form of the instant ``value`` (seconds): whole µs, at most ``MAX_NOW``."""
    micros = _micros(value, name)
    if micros > MAX_NOW:
        raise _error(f"`{name}`: more than 2^52 µs after the Unix epoch", "overflow")
    return str(micros)


def _utf8(text: str, name: str) -> bytes:
    """``text`` as UTF-8, refused (``invalid_value``) when it holds a lone surrogate, as in-process."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise _error(f"`{name}` must be valid Unicode text (no lone surrogates)") from None


def _counted(part: bytes) -> bytes:
    """``part`` as a key writes it: ``<length>:<bytes>``, so that parts side by side read back one way."""
    return b"%d:%s" % (len(part), part)


def _key_part(value: object, name: str) -> bytes:
    """A key's value as the in-process store reads it: a str's UTF-8, bytes as
    they are, an integer (an ``int``, or any ``__index__`` one: NumPy's, an
    ``IntEnum``) as its decimal digits."""
    if isinstance(value, str):
        return _utf8(value, name)
    if isinstance(value, bytes):
        return value
    number = _integer(value, name, "a str, bytes or int")
    try:
        return b"%d" % number
    except ValueError:
        # Past sys.get_int_max_str_digits(): Python's bare ValueError, as in-process.
        raise _error(
            f"`{name}` has more digits than Python writes as text (an int key is its decimal digits; see sys.set_int_max_str_digits)"
        ) from None


def _integer(value: object, name: str, expected: str) -> int:
    """``value`` as an ``int`` (through ``__index__``), never a bool."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            pass
    raise _type_error(name, expected, value)


def _costs(costs: object, limit: int) -> list[int]:
    """A batch's costs, each checked by ``_cost``."""
    if not isinstance(costs, Iterable):
        raise _type_error("costs", "an iterable of int", costs)
    return [_cost(c, limit) for c in costs]


def _units(cost: object) -> int:
    """``cost`` as a whole number of units, from 0 to 2^64 - 1: the in-process
    classes' bound, which every method checks before any limit (so a cost
    beyond it is ``invalid_value`` there, not ``cost_exceeds_limit``)."""
    units = _integer(cost, "cost", "an int")
    if units < 0:
        raise _error("`cost` must not be negative")
    if units > 2**64 - 1:
        raise _error("`cost` must be at most 2^64 - 1")
    return units


def _refunded(cost: object) -> int:
    """A refund's cost: any number of units, as in-process (a refund gives
    back at most what was taken), not only up to the limit. The script
    reads one past 2^53 inexactly, which changes nothing: every algorithm
    gives back at most what it holds, and it holds less than 2^52."""
    return _units(cost)


def _cost(cost: object, limit: int) -> int:
    cost = _units(cost)
    if cost > limit:
        raise _error(f"`cost`: {cost} is more than the limit {limit}", "cost_exceeds_limit")
    return cost
