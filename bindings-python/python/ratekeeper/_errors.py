"""The exceptions raised by ratekeeper (raised from Rust, defined here)."""

from __future__ import annotations


class RateLimitError(ValueError):
    """The base of ratekeeper's exceptions; raised itself for a bad argument.

    ``code`` is a stable, machine-readable string from the Rust core:
    ``zero_value``, ``too_large``, ``overflow``, ``cost_exceeds_limit``,
    ``invalid_value`` or ``invalid_type``; ``invalid_syntax`` for a rate
    string that does not parse, ``invalid_config`` for a policy
    configuration that does not describe a policy; for encoded state
    (``restore``, ``from_bytes``) ``state_truncated``, ``state_corrupt``,
    ``state_version`` or ``state_mismatch``; ``store_full`` for a keyed store
    at its ``max_keys``; ``out_of_memory`` (raised as the subclass
    ``RateLimitMemoryError``) for a keyed store that could not grow. The
    message names the argument.
    The subclass ``RateLimited`` (code ``rate_limited``) is raised by the
    waiting forms when they may not wait long enough. ``try_acquire`` never
    raises for a denial: it returns a Decision with ``allowed=False``.
    """

    code: str

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code

    def __reduce__(self) -> tuple[type[RateLimitError], tuple[object, ...]]:
        return (type(self), (str(self), self.code))


class RateLimitTypeError(RateLimitError, TypeError):
    """An argument of the wrong type (code ``invalid_type``; ``invalid_config``
    for a policy configuration that is not JSON at all).

    Both ``except ValueError`` (through RateLimitError) and
    ``except TypeError`` catch it.
    """


class RateLimitMemoryError(RateLimitError, MemoryError):
    """A keyed store (or a policy's) that could not grow for the request
    (code ``out_of_memory``): no memory for its table of keys, a long key's
    bytes or a key's log of events, where the allocation that failed would
    otherwise have ended the process. The request changed nothing, and the
    store goes on answering for the keys it holds (a flood of new keys into
    a store without ``max_keys`` fails its own requests, not the process).

    Both ``except MemoryError``, Python's own exception for an allocation
    that fails, and ``except RateLimitError`` (``.code``) catch it.
    """


class RateLimited(RateLimitError):
    """A request the limiter would admit only after more than the allowed wait.

    Raised by ``acquire``, ``acquire_async`` and ``acquiring`` (with
    ``timeout``) instead of waiting; nothing was booked. ``retry_after`` is
    the wait, in seconds, that the request would have needed. ``code`` is
    ``rate_limited``.
    """

    retry_after: float

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message, "rate_limited")
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[type[RateLimitError], tuple[object, ...]]:
        return (type(self), (str(self), self.retry_after))


RateLimitError.__module__ = "ratekeeper"
RateLimitTypeError.__module__ = "ratekeeper"
RateLimitMemoryError.__module__ = "ratekeeper"
RateLimited.__module__ = "ratekeeper"
