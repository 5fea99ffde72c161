"""Every public class and method documents itself in help()."""

from __future__ import annotations

import doctest
import inspect
import pydoc
import sys

import pytest

import ratekeeper
from ratekeeper import Decision, RateLimitError, RateLimitTypeError, SlidingWindowLog, TokenBucket


def rendered(thing: object) -> str:
    return pydoc.plain(pydoc.render_doc(thing))


@pytest.mark.parametrize(
    "thing",
    [
        ratekeeper,
        TokenBucket,
        TokenBucket.try_acquire,
        TokenBucket.capacity,
        TokenBucket.refill_tokens,
        TokenBucket.refill_period,
        SlidingWindowLog,
        SlidingWindowLog.try_acquire,
        SlidingWindowLog.limit,
        SlidingWindowLog.window,
        Decision,
        Decision.allowed,
        Decision.remaining,
        Decision.limit,
        Decision.retry_after,
        Decision.reset_after,
        RateLimitError,
        RateLimitTypeError,
    ],
)
def test_public_items_have_docstrings(thing: object) -> None:
    doc = inspect.getdoc(thing)
    assert doc is not None and len(doc) > 20
    assert doc.splitlines()[0] in rendered(thing)


def test_help_shows_method_signatures_and_docs(capsys: pytest.CaptureFixture[str]) -> None:
    help(TokenBucket)
    text = capsys.readouterr().out
    assert "A token bucket: bursts of up to ``capacity``" in text
    assert "try_acquire(self, /, cost=1, now=None)" in text
    assert "time.monotonic()" in text
    help(SlidingWindowLog)
    text = capsys.readouterr().out
    assert "at most ``limit`` units" in text
    assert "try_acquire(self, /, cost=1, now=None)" in text


def test_method_signatures_are_introspectable() -> None:
    for limiter in (TokenBucket, SlidingWindowLog):
        acquire = inspect.signature(limiter.try_acquire)
        assert list(acquire.parameters) == ["self", "cost", "now"]
        assert acquire.parameters["cost"].default == 1
        assert acquire.parameters["now"].default is None


# An abi3 class built for 3.9 carries its constructor's signature only where the
# interpreter reads it (3.10+); CI runs 3.11.
@pytest.mark.skipif(sys.version_info < (3, 10), reason="type __text_signature__ needs 3.10+")
def test_constructor_signatures_are_shown(capsys: pytest.CaptureFixture[str]) -> None:
    help(TokenBucket)
    text = capsys.readouterr().out
    assert "TokenBucket(capacity, refill_tokens, refill_period, *, initial_tokens=None)" in text
    bucket = inspect.signature(TokenBucket)
    assert bucket.parameters["initial_tokens"].kind is inspect.Parameter.KEYWORD_ONLY
    assert list(inspect.signature(SlidingWindowLog).parameters) == ["limit", "window"]


def test_package_docstring_example_runs() -> None:
    results = doctest.testmod(ratekeeper)
    assert results.attempted >= 3
    assert results.failed == 0
