"""Hostile and odd arguments: objects whose protocols lie, raise or re-enter.

Each must end in the package's own error (``RateLimitError`` or
``RateLimitTypeError``, naming the argument) or in the right answer: never
a crash of the interpreter, a bare Python error raised by the binding's own
arithmetic, or an answer silently wrong. A call that once aborted the
interpreter runs in a child process, so that the suite reports it.
"""

from __future__ import annotations

import asyncio
import operator
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator, Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

import ratekeeper
from ratekeeper import Gcra, RateLimitError, RateLimitTypeError


def run_child(*code: str) -> str:
    """Runs the pieces of ``code`` in a fresh interpreter and returns what it
    printed; a crash (an abort, a segfault) fails the test with what it said."""
    source = "\n".join(textwrap.dedent(piece) for piece in code)
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"the interpreter died ({done.returncode}): {done.stderr[-2000:]}"
    return done.stdout


# A sequence whose __len__ says sys.maxsize (or 2^40) and that holds nothing.
LYING = """
import sys
import ratekeeper

class Lying:
    def __init__(self, length):
        self.length = length
    def __len__(self):
        return self.length
    def __getitem__(self, index):
        raise IndexError(index)
"""


def test_data_whose_len_lies_is_refused_not_an_abort() -> None:
    # Read as a sequence of ints, `data` was copied into a buffer of len(data)
    # bytes before any item was read: a length that lied was an allocation of
    # 2^63 bytes, which failed and aborted the interpreter.
    printed = run_child(
        LYING,
        """
        for length in (sys.maxsize, 2**40):
            for call in (lambda d: ratekeeper.Gcra(1, 1).restore(d), lambda d: ratekeeper.Gcra.from_bytes(d, 1, 1)):
                try:
                    call(Lying(length))
                except ratekeeper.RateLimitTypeError as error:
                    print(error.code, error)
        """
    )
    assert printed.splitlines() == ["invalid_type `data` must be bytes"] * 4


def test_listed_arguments_whose_len_lies_are_read_item_by_item() -> None:
    # The same copy sized by __len__ in `Decision._unpickle`'s limits (what
    # a pickle holds) and `_rebook`'s lists: a capacity overflow (a panic)
    # at sys.maxsize, an abort at 2^40.
    printed = run_child(
        LYING,
        """
        numbers = (True, 0, 1, 0, 0)
        for length in (sys.maxsize, 2**40):
            decision = ratekeeper.Decision._unpickle(numbers, float("nan"), Lying(length), None)
            print(decision.headers())
            limiter = ratekeeper.Gcra(1, 1)
            print(limiter._rebook(0, False, Lying(length), Lying(length)))
        """
    )
    assert printed.splitlines() == ["{}", "[]"] * 2


def test_a_buffer_is_read_as_its_bytes() -> None:
    limiter = Gcra(3, 1)
    limiter.try_acquire(2, now=10)
    data = limiter.to_bytes()
    for buffer in (bytearray(data), memoryview(data), memoryview(b"--" + data)[2:]):
        restored = Gcra(3, 1)
        restored.restore(buffer)
        assert restored.peek(now=10) == limiter.peek(now=10)
    with pytest.raises(RateLimitTypeError, match="`data` must be bytes"):
        Gcra(3, 1).restore(list(data))  # type: ignore[arg-type]
    with pytest.raises(RateLimitTypeError, match="`data` must be bytes"):
        Gcra(3, 1).restore(range(3))  # type: ignore[arg-type]
    assert ratekeeper.Gcra.from_bytes(bytearray(data), 3, 1).peek(now=10) == limiter.peek(now=10)


class Ratio:
    """A number of seconds known only by its ``as_integer_ratio()``."""

    def __init__(self, numerator: int, denominator: int) -> None:
        self.ratio = (numerator, denominator)

    def as_integer_ratio(self) -> tuple[int, int]:
        return self.ratio


def test_a_ratio_is_read_by_the_sign_of_both_terms() -> None:
    # The binding's division assumed the positive denominator Fraction and
    # Decimal give: -1/-2 was refused as negative, 1/-2 as too large.
    assert Gcra(1, Ratio(-1, -2)).emission_interval == 0.5  # type: ignore[arg-type]
    with pytest.raises(RateLimitError) as raised:
        Gcra(1, 1).try_acquire(now=Ratio(1, -2))  # type: ignore[arg-type]
    assert (raised.value.code, str(raised.value)) == ("invalid_value", "`now` must not be negative")


def test_a_ratio_of_zero_denominator_is_no_number() -> None:
    # Was the ZeroDivisionError of the binding's own division.
    with pytest.raises(RateLimitError) as raised:
        Gcra(1, 1).try_acquire(now=Ratio(1, 0))  # type: ignore[arg-type]
    assert (raised.value.code, str(raised.value)) == ("invalid_value", "`now` must be a finite number")
    with pytest.raises(RateLimitError, match="`emission_interval` must be a finite number"):
        Gcra(1, Ratio(1, 0))  # type: ignore[arg-type]


def test_a_zero_that_cannot_be_compared_is_a_zero() -> None:
    # A duration of 0 ns is asked whether it was positive, for the words of
    # the error: one without comparisons raised TypeError from its `>`.
    for zero in (Ratio(0, 5), Ratio(1, 10**12)):
        with pytest.raises(RateLimitError) as raised:
            Gcra(1, zero)  # type: ignore[arg-type]
        assert raised.value.code == "zero_value"
        assert "`emission_interval`" in str(raised.value)


class Pairs(Mapping[str, str]):
    """A mapping whose ``items()`` gives ``pairs``, whatever they are."""

    def __init__(self, pairs: list[Any]) -> None:
        self.pairs = pairs

    def __getitem__(self, field: str) -> str:
        raise KeyError(field)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return len(self.pairs)

    def items(self) -> Any:
        return self.pairs


def test_a_mapping_whose_items_are_not_pairs_is_no_request() -> None:
    # Each item was read as a pair by pyo3, whose errors went out as they
    # were: a bare ValueError (a tuple of 3) or TypeError (a str).
    policy = ratekeeper.Policy.from_rates("2/second", by=["u"])
    for pairs in ([("u", "a", "b")], ["ua"], [("u",)]):
        with pytest.raises(RateLimitTypeError, match="^`request` must be a mapping of str field names") as raised:
            policy.try_acquire(Pairs(pairs), now=0)
        assert raised.value.code == "invalid_type"
    assert policy.try_acquire(Pairs([("u", "a")]), now=0).allowed


def test_an_index_only_of_the_instance_is_no_integer() -> None:
    # `__index__` set on an instance, not its class, is no integer to
    # operator.index, which acquire_async's queues read keys with: the store
    # took it, then acquire_async raised a bare TypeError after booking, and
    # the booking was never given back (the next caller waited twice as long).
    def three() -> int:
        return 3

    odd = types.SimpleNamespace(__index__=three)
    with pytest.raises(TypeError, match="cannot be interpreted as an integer"):
        operator.index(odd)
    with pytest.raises(RateLimitTypeError, match="^`cost` must be an int$"):
        Gcra(5, 1).try_acquire(odd, now=0)  # type: ignore[arg-type]
    with pytest.raises(RateLimitTypeError, match="^`now` must be a number of seconds"):
        Gcra(5, 1).try_acquire(now=odd)  # type: ignore[arg-type]
    store = ratekeeper.KeyedLimiter(Gcra(1, 10.0, clock=lambda: 0.0))
    store.try_acquire(3)
    before = store.peek(3)

    async def wait() -> None:
        await store.acquire_async(odd)  # type: ignore[arg-type]

    with pytest.raises(RateLimitTypeError, match="^`key` must be a str, bytes or int$"):
        asyncio.run(wait())
    assert store.peek(3) == before


def test_an_index_of_the_class_is_read_as_operator_index_reads_it() -> None:
    class Index:
        def __init__(self, value: object) -> None:
            self.value = value

        def __index__(self) -> Any:
            return self.value

    store = ratekeeper.KeyedLimiter(Gcra(1, 10.0))
    assert store.try_acquire(Index(42), now=0).allowed  # type: ignore[arg-type]
    assert not store.try_acquire("42", now=0).allowed
    assert Gcra(5, 1).try_acquire(Index(3), now=0).remaining == 2  # type: ignore[arg-type]
    assert Gcra(5, Index(2)).emission_interval == 2.0  # type: ignore[arg-type]
    with pytest.raises(RateLimitTypeError, match="^`cost` must be an int$"):
        Gcra(5, 1).try_acquire(Index(1.5), now=0)  # type: ignore[arg-type]


class Unwritable(float):
    """A float whose ``str()`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("no words")


def test_a_duration_rounding_to_zero_that_cannot_be_written_is_still_a_zero() -> None:
    # Its str() was read for the words of the error, and its RuntimeError
    # went out instead of the binding's.
    with pytest.raises(RateLimitError) as raised:
        Gcra(1, Unwritable(1e-10))
    assert raised.value.code == "zero_value"
    assert "`emission_interval`" in str(raised.value)
    assert Gcra(1, Unwritable(0.5)).emission_interval == 0.5


class NoComparisons(float):
    """A float whose comparisons raise."""

    def __gt__(self, other: object) -> bool:
        raise RuntimeError("no comparisons")

    def __lt__(self, other: object) -> bool:
        raise RuntimeError("no comparisons")


def test_max_in_window_counts_an_exact_part_of_a_nanosecond() -> None:
    # Rounded to the nearest ns, then up when the float of that was below
    # the float of the window: the part of a nanosecond that a Fraction or a
    # Decimal of 10^9 s holds was lost to the float, and the instant it
    # reaches was not counted. A float is the whole ns whose float it is.
    guarantee = ratekeeper.guarantee(ratekeeper.FixedWindow(1, 1e-9))  # one unit each ns
    cases: list[tuple[Any, int]] = [
        (Fraction(3 * 10**18 + 1, 3 * 10**9), 10**18 + 1),  # 10^9 s and a third of a ns
        (Decimal("1000000000.0000000004"), 10**18 + 1),
        (1e9 + 2**-23, 10**18 + 119),  # the float of 10^9 s and 119 ns
        (2e-9, 2),
        (NoComparisons(2.4e-9), 3),
        (Fraction(7, 3 * 10**9), 3),
        (Decimal("1e-40"), 1),
        (Decimal("0e-40"), 0),
        (5, 5 * 10**9),
        (2.4e-9, 3),
    ]
    for window, most in cases:
        assert guarantee.max_in_window(window) == most, window
