"""The exceptions raised by ratekeeper (raised from Rust, defined here)."""

from __future__ import annotations


class RateLimitError(ValueError):
    """A bad argument to a ratekeeper limiter.

    ``code`` is a stable, machine-readable string from the Rust core:
    ``zero_value``, ``too_large``, ``overflow``, ``cost_exceeds_limit``,
    ``invalid_value`` or ``invalid_type``. The message names the argument.
    A denied request is not an error: it returns a Decision with
    ``allowed=False``.
    """

    code: str

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code

    def __reduce__(self) -> tuple[type[RateLimitError], tuple[str, str]]:
        return (type(self), (str(self), self.code))


class RateLimitTypeError(RateLimitError, TypeError):
    """An argument of the wrong type (code ``invalid_type``).

    Both ``except ValueError`` (through RateLimitError) and
    ``except TypeError`` catch it.
    """


RateLimitError.__module__ = "ratekeeper"
RateLimitTypeError.__module__ = "ratekeeper"
