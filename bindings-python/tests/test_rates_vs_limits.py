"""Rate strings against the ``limits`` library itself.

The core promises (``Rate``'s docs) that a string ``limits`` reads as rates
is read here as the same amounts and periods, but for what ``limits`` reads
by mistake: a count or multiple of 0 (``zero_value``), a number beyond 64
bits (``overflow``), one rate listed twice (``Policy.from_rates``:
``invalid_value``) and a ``:`` before a separator; and that every other
string is ``invalid_syntax``. The core's own tests check spellings verified
by hand; here the real parser decides, over strings built from the
grammar's parts and its near misses: every case and plural, Python's
``\\s`` (Unicode spaces, U+001C to U+001F) and what it does not match (a
zero-width space, U+180E), the letters Python's case folding lets ``[a-z]``
match (``ſ``, ``K``, ``İ``, ``ı``), digits that are not ``[0-9]``, signs,
fractions and every separator.
"""

from __future__ import annotations

import random

import limits

import ratekeeper
from ratekeeper import RateLimitError

# Each part of the grammar: what it takes, then near misses, drawn less often.
SPACES = (["", " ", "\t", "\n", "\x0b", "\x1c", "\x1f", "\x85", "\xa0", "\u2028", "\u3000"], ["\u180e", "\u200b", "\ufeff"])
NUMBERS = (["1", "10", "0", "00", "007", "60", "18446744073709551615"], ["18446744073709551616", "\u0661", "+1", "-1", "1.5"])
PERS = (["/", "per", "PER", "pEr"], ["//", "p", "pe r"])
UNITS = (["second", "minute", "hour", "day", "month", "year"], ["sec", "week", "s", ""])
PLURALS = (["", "s", "S"], ["\u017f", "es"])
JOINS = ([";", ",", "|"], [":;", ";;", "", " ", ":"])


def pick(rng: random.Random, part: tuple[list[str], list[str]]) -> str:
    good, odd = part
    return rng.choice(odd if rng.random() < 0.1 else good)


def canonical(amount: int, seconds: int) -> str:
    """The name ``Policy.from_rates`` gives a rate: ``Rate``'s ``Display``."""
    for name, length in [("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1)]:
        if seconds % length == 0:
            return f"{amount}/{name}" if seconds == length else f"{amount}/{seconds // length} {name}s"
    raise AssertionError(seconds)


def one(rng: random.Random) -> str:
    """One rate, or a near miss of one."""

    def space() -> str:
        return pick(rng, SPACES) if rng.random() < 0.5 else ""

    unit = "".join(c.upper() if rng.random() < 0.3 else c for c in pick(rng, UNITS)) + pick(rng, PLURALS)
    if rng.random() < 0.02:
        unit = unit.replace("s", "\u017f").replace("i", rng.choice(["\u0130", "\u0131"]))
    text = space() + pick(rng, NUMBERS) + space() + pick(rng, PERS) + space()
    if rng.random() < 0.5:
        text += pick(rng, NUMBERS) + space()
    return text + unit + space()


def ours(text: str) -> tuple[str, object]:
    try:
        policy = ratekeeper.Policy.from_rates(text)  # token buckets: any count
    except RateLimitError as error:
        return "error", error.code
    return "ok", [limit.name for limit in policy.limits]


def theirs(text: str) -> tuple[str, object]:
    try:
        rates = limits.parse_many(text)
    except ValueError:
        return "error", None
    return "ok", [canonical(rate.amount, rate.get_expiry()) for rate in rates]


def test_rate_strings_read_as_limits_reads_them() -> None:
    rng = random.Random(105)
    agreed = 0
    for _ in range(20_000):
        parts = [one(rng) for _ in range(rng.randint(1, 3))]
        text = parts[0] + "".join(pick(rng, JOINS) + part for part in parts[1:])
        (we, ours_said), (they, theirs_said) = ours(text), theirs(text)
        if we == they == "ok":
            assert ours_said == theirs_said, text
            agreed += 1
        elif we == "error" and they == "ok":
            assert isinstance(theirs_said, list)
            mistake = (
                ours_said in ("zero_value", "overflow")
                or (ours_said == "invalid_value" and len(set(theirs_said)) < len(theirs_said))
                or (ours_said == "invalid_syntax" and ":" in text)
            )
            assert mistake, f"{text!r}: limits reads {theirs_said}, we refuse it ({ours_said})"
        elif we == "ok":
            raise AssertionError(f"{text!r}: we read {ours_said}, limits refuses it")
        else:
            # Refused by both: ours names the first rate at fault, which may
            # be a mistake limits reads before the syntax error it refuses.
            assert ours_said in ("invalid_syntax", "zero_value", "overflow", "invalid_value"), text
    # Enough of them are rates for the agreement to mean something.
    assert agreed > 2_000
