"""The ``ratekeeper`` command: ``explain``'s numbers against brute force through the
binding, ``simulate`` on traces with known answers, the plot, ``--json`` and bad input."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from PIL import Image

import ratekeeper
from ratekeeper import (
    Bandwidth,
    FixedWindow,
    Gcra,
    LeakyBucket,
    Limiter,
    Policy,
    SlidingWindowCounter,
    SlidingWindowLog,
    TokenBucket,
)
from ratekeeper.cli import main
from ratekeeper.cli._explain import explain_data, fmt_seconds
from ratekeeper.cli import _simulate
from ratekeeper.cli._plot import bin_width
from ratekeeper.cli._policy import CliError
from ratekeeper.cli._simulate import Progress, generate, read_trace

NS = Fraction(1, 10**9)
# Every period below divides this, so priming here sets every phase to zero.
LCM = 27_720
BASE = 100 * LCM


def ns(n: int) -> Fraction:
    return n * NS


def run(*argv: str) -> tuple[int, str, str]:
    """Runs the command in this process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old = sys.stderr
    sys.stderr = err
    try:
        status = main(list(argv), out=out)
    except SystemExit as exit:  # argparse's own errors
        status = int(exit.code or 0)
    finally:
        sys.stderr = old
    return status, out.getvalue(), err.getvalue()


def policy_of(*limiters: Limiter) -> Policy:
    policy = Policy()
    for i, limiter in enumerate(limiters):
        policy.add(f"limit-{i}", limiter)
    return policy


def brute_force(make: Callable[[], Policy], window: int, offsets: int) -> int:
    """The most a greedy client gets in ``window`` ns through the real policy, over
    every start offset below ``offsets`` (relative to window boundaries and refill
    phases), from the worst state: full, after a unit long before set the phases."""
    best = 0
    for offset in range(offsets):
        policy = make()
        assert policy.try_acquire(None, 1, now=ns(BASE - 100 * LCM)).allowed
        admitted = 0
        start = BASE + offset
        for t in range(start, start + window):
            while policy.try_acquire(None, 1, now=ns(t)).allowed:
                admitted += 1
        best = max(best, admitted)
    return best


CASES: list[tuple[str, Callable[[], Policy], int]] = [
    ("token_bucket greedy", lambda: policy_of(TokenBucket(3, 2, ns(7))), 1),
    ("token_bucket clipped", lambda: policy_of(TokenBucket(1, 5, ns(7))), 1),
    ("token_bucket interval", lambda: policy_of(TokenBucket(4, 3, ns(6), refill="interval")), 6),
    (
        "token_bucket two bandwidths",
        lambda: policy_of(TokenBucket.from_bandwidths([Bandwidth(5, 1, ns(4)), Bandwidth(2, 1, ns(3))])),
        1,
    ),
    ("gcra", lambda: policy_of(Gcra(3, ns(5))), 1),
    ("sliding_window_log", lambda: policy_of(SlidingWindowLog(3, ns(8))), 1),
    ("sliding_window_counter", lambda: policy_of(SlidingWindowCounter(5, ns(6))), 6),
    ("fixed_window", lambda: policy_of(FixedWindow(3, ns(7))), 7),
    ("policy of a bucket and a gcra", lambda: policy_of(TokenBucket(4, 1, ns(3)), Gcra(2, ns(5))), 1),
]


@pytest.mark.parametrize(("name", "make", "offsets"), CASES, ids=[c[0] for c in CASES])
def test_explain_numbers_are_the_brute_force_worst_case(name: str, make: Callable[[], Policy], offsets: int) -> None:
    windows = [1, 2, 5, 9, 13, 20, 31]
    data = explain_data(make(), [float(w * NS) for w in windows])
    rows = {round(row["window"] * 1e9): row["max"] for row in data["combined"]["max_in_window"]}
    assert data["combined"]["exact"] is True
    for w in windows:
        assert rows[w] == brute_force(make, w, offsets), (name, w)
    assert data["combined"]["burst"] == brute_force(make, 1, offsets)


def test_leaky_bucket_admits_its_queue_then_one_per_interval() -> None:
    # A queue of 3, one unit every 4 ns: admitted only when empty, so the best client
    # sends single units and the whole queue at its last chance.
    data = explain_data(policy_of(LeakyBucket(3, ns(4))), [float(13 * NS)])
    (row,) = [r for r in data["combined"]["max_in_window"] if round(r["window"] * 1e9) == 13]
    limiter = LeakyBucket(3, ns(4))
    admitted = 0
    for t in range(BASE, BASE + 13):
        if limiter.peek(1, now=ns(t)).allowed:
            cost = 1 if t + 4 < BASE + 13 else 3
            assert limiter.try_acquire(cost, now=ns(t)).allowed
            admitted += cost
    assert row["max"] == admitted == 3 + 12 // 4


def test_explain_text_names_every_figure() -> None:
    status, out, err = run("explain", "10/second;100/minute")
    assert (status, err) == (0, "")
    assert 'limit "10/second" (token_bucket, global)' in out
    assert "most in any 1 s    19" in out  # burst 10, then 9 more within the second
    assert "most in any 1 min  199" in out
    assert "next unit after 600 ms, full again after 1 min" in out
    # Per the first of 1 s, 1 min, 1 h, 1 day that is a whole number of periods.
    assert "sustained rate     10 per 1 s (10/s)" in out
    assert "sustained rate     100 per 1 min (1.66667/s)" in out
    status, out, _ = run("explain", "1/second")
    assert "sustained rate     1 per 1 s (1/s)" in out  # not "60 per 1 min"
    status, out, _ = run("explain", "10/second;100/minute")
    assert "all 2 limits together, for a client every limit counts, all or nothing (exact)" in out
    status, out, _ = run("explain", "10/second", "--by", "user", "--by", "path")
    assert 'limit "10/second" (token_bucket, per user, path)' in out


def test_explain_sustains_calendar_months_per_average_month() -> None:
    # 4,800 months in the Gregorian 400 years, not one every 30 days.
    status, out, _ = run("explain", "1000/month", "--algorithm", "fixed_window", "--calendar", "month", "--json")
    assert status == 0
    rate = json.loads(out)["limits"][0]["sustained"]
    assert (rate["units"], rate["per_ns"]) == (4_800_000, 146_097 * 86_400 * 10**9)
    status, out, _ = run("explain", "1000/month", "--algorithm", "fixed_window", "--calendar", "month")
    assert "sustained rate     1,000 per calendar month on average (30.436875 days)" in out
    # A window counter's cycle is two windows (1 per 2 days, for 1/day): its
    # odd count over two months read "2,400 per 146097 days".
    status, out, _ = run("explain", "1/month", "--algorithm", "sliding_window_counter", "--calendar", "month")
    assert "sustained rate     1 per 2 calendar months on average (60.87375 days)" in out
    status, out, _ = run("explain", "7/month", "--algorithm", "sliding_window_counter", "--calendar", "month")
    assert "sustained rate     6 per calendar month on average (30.436875 days)" in out


@pytest.mark.parametrize(
    ("algorithm", "most", "words"),
    [
        ("fixed_window", 20, "aligned"),
        ("sliding_window_log", 10, "strict sliding window itself"),
        ("sliding_window_counter", 19, "weighs the previous window"),
        ("gcra", 19, "token bucket"),
        ("leaky_bucket", 19, "queue"),
    ],
)
def test_explain_compares_each_algorithm_with_a_strict_window(algorithm: str, most: int, words: str) -> None:
    status, out, _ = run("explain", "10/second", "--algorithm", algorithm, "--json")
    assert status == 0
    (limit,) = json.loads(out)["limits"]
    assert limit["algorithm"] == algorithm
    assert limit["strict"] == {"units": 10, "window": 1.0, "max_in_window": most, "excess": most - 10}
    assert words in limit["difference"]


def test_rates_split_as_policy_from_rates_splits_them() -> None:
    for rates in ("5/second;50/minute", "5/second, 50/minute", "5/second|50/minute"):
        status, out, _ = run("explain", rates, "--algorithm", "gcra", "--json")
        assert status == 0, rates
        assert [limit["name"] for limit in json.loads(out)["limits"]] == ["5/second", "50/minute"], rates


def test_explain_json_schema() -> None:
    status, out, _ = run("explain", "5/second;50/minute", "--by", "user", "--window", "10", "--json")
    assert status == 0
    data = json.loads(out)
    assert set(data) == {"windows", "limits", "combined"}
    assert data["windows"] == [1.0, 10.0, 60.0]
    for figures in [*data["limits"], data["combined"]]:
        assert {"exact", "burst", "sustained", "max_in_window", "lockout"} <= set(figures)
        assert isinstance(figures["burst"], int)
        assert set(figures["sustained"]) == {"units", "per_ns", "per_seconds", "per_second"}
        assert [row["window"] for row in figures["max_in_window"]] == data["windows"]
        assert all(isinstance(row["max"], int) for row in figures["max_in_window"])
        assert set(figures["lockout"]) == {"retry_after", "reset_after"}
    for limit in data["limits"]:
        assert {"name", "algorithm", "strict", "difference", "by"} <= set(limit)
        assert limit["by"] == ["user"]
    assert data["combined"]["sustained"]["per_second"] == pytest.approx(50 / 60)
    # In 10 s: 5/second admits 5 + 49 (its last refill at 9.8 s... 10 s is outside [t, t + 10 s)),
    # 50/minute admits 50 + 8: the tighter is the first.
    assert data["combined"]["max_in_window"][1]["max"] == 5 + 49
    assert data["combined"]["lockout"] == {"retry_after": 1.2, "reset_after": 60.0}


def test_explain_reads_json_and_toml_files(tmp_path: Path) -> None:
    config = {"limits": [{"name": "per-user", "algorithm": "gcra", "rate": "10/second", "burst": 3, "by": ["user"]}]}
    (tmp_path / "p.json").write_text(json.dumps(config))
    (tmp_path / "p.toml").write_text(
        '[[limits]]\nname = "per-user"\nalgorithm = "gcra"\nrate = "10/second"\nburst = 3\nby = ["user"]\n'
    )
    answers = []
    for name in ("p.json", "p.toml"):
        status, out, _ = run("explain", "--config", str(tmp_path / name), "--json")
        assert status == 0
        answers.append(json.loads(out))
    assert answers[0] == answers[1]
    (limit,) = answers[0]["limits"]
    assert (limit["name"], limit["burst"]) == ("per-user", 3)
    # Compared with 3 per 300 ms (its burst, earned back at 10/s): 5 in any 300 ms.
    assert answers[0]["windows"] == [0.3, 1.0, 60.0]
    assert [row["max"] for row in limit["max_in_window"]] == [3 + 2, 3 + 9, 3 + 599]


@pytest.mark.parametrize(
    ("argv", "argument"),
    [
        (["explain", "10 per fortnight"], "argument rates"),
        (["explain"], "argument rates"),
        (["explain", "10/second", "--config", "x.json"], "argument rates"),
        (["explain", "--config", "/nonexistent/p.json"], "argument --config"),
        (["explain", "10/second", "--algorithm", "magic"], "argument --algorithm"),
        (["explain", "10/second", "--window", "-1"], "argument --window"),
        (["explain", "10/second", "--window", "1e30"], "argument --window"),
        (["explain", "7/second", "--algorithm", "gcra"], "argument rates"),
        (["explain", "10/second", "--burst", "-1"], "argument --burst: must be a whole number from 1"),
        (["explain", "10/second", "--burst", "0"], "argument --burst: must be a whole number from 1"),
        (["explain", "10/second", "--burst", str(2**64)], "argument --burst: must be a whole number from 1"),
        (["simulate", "10/second"], "argument --trace"),
        (["simulate", "10/second", "--generate", "steady"], "argument --rate"),
        (["simulate", "10/second", "--generate", "steady", "--rate", "-5"], "argument --rate"),
        (["simulate", "10/second", "--generate", "steady", "--rate", "5", "--keys", "0"], "argument --keys"),
        (["simulate", "10/second", "--generate", "steady", "--rate", "5", "--keys", "10000001"], "argument --keys"),
        (["simulate", "10/second", "--generate", "poisson", "--rate", "20", "--duration", "1e12"], "argument --duration"),
        (["simulate", "10/second", "--generate", "steady", "--rate", "5", "--plot", "out.gif"], "argument --plot"),
        (["simulate", "10/second", "--trace", "/nonexistent.csv"], "argument --trace"),
    ],
)
def test_bad_input_exits_non_zero_naming_the_argument(argv: list[str], argument: str) -> None:
    status, out, err = run(*argv)
    assert status == 2
    assert argument in err
    assert out == ""


@pytest.mark.parametrize("rates", ["10/second;10/second", "10/second; 10 / 1 second"])
def test_a_rate_given_twice_is_named_as_from_rates_names_it(rates: str) -> None:
    # Not as a taken `name`, which the user never gave: the CLI names each limit by its rate.
    status, _, err = run("explain", rates)
    assert status == 2
    assert "argument rates: `rates` lists one rate twice" in err


def test_an_empty_part_of_the_rates_is_skipped_as_before() -> None:
    status, out, _ = run("explain", "10/second;", "--json")
    assert status == 0
    assert [limit["name"] for limit in json.loads(out)["limits"]] == ["10/second"]


def test_bad_config_file_and_trace_lines(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    status, _, err = run("explain", "--config", str(tmp_path / "bad.json"))
    assert status == 2 and "argument --config" in err and "not valid JSON" in err
    (tmp_path / "unknown.json").write_text(json.dumps({"limits": [{"name": "a", "rate": "1/second", "bogus": 1}]}))
    status, _, err = run("explain", "--config", str(tmp_path / "unknown.json"))
    assert status == 2 and "argument --config" in err and "bogus" in err
    # A wrong value named by its place in the file, not by a line and column
    # of the JSON the file's data was dumped to again (a TOML file has none).
    wrong = {"limits": [{"name": "a", "rate": "1/second"}, {"name": "b", "rate": "1/minute", "burst": "20"}]}
    (tmp_path / "wrong.json").write_text(json.dumps(wrong, indent=2))
    status, _, err = run("explain", "--config", str(tmp_path / "wrong.json"))
    assert status == 2 and "limits[1].burst" in err and "line 1" not in err
    (tmp_path / "t.csv").write_text("0.0,a,1\nsoon,a,1\n")
    status, _, err = run("simulate", "10/second", "--trace", str(tmp_path / "t.csv"))
    assert status == 2 and "argument --trace" in err and "line 2" in err
    for bad, words in [
        ('{"timestamp": 0}\n[1, 2]\n', "line 2"),
        ('{"timestamp": 0}\n{"key": "a"}\n', '"timestamp"'),
        ('{"timestamp": "soon"}\n', "not a number"),
        ('{"timestamp": 0, "cost": -1}\n', "cost"),
        ('{"timestamp": 0}\n{"timestamp": 1,\n', "line 2: not JSON"),
        # JSON's booleans are not the numbers 0 and 1 (they were, as times).
        ('{"timestamp": false}\n{"timestamp": true}\n', "line 1: timestamp false is not a number"),
        ('{"timestamp": 0, "cost": true}\n', "cost true is not a number"),
    ]:
        (tmp_path / "t.jsonl").write_text(bad)
        status, _, err = run("simulate", "10/second", "--trace", str(tmp_path / "t.jsonl"))
        assert status == 2 and "argument --trace" in err and words in err, (bad, err)
    # A null key is no key, as a missing one (it was the key "None").
    (tmp_path / "null.jsonl").write_text('{"timestamp": 0, "key": null}\n{"timestamp": 0.5}\n')
    assert _simulate.read_trace(str(tmp_path / "null.jsonl")).keys == ["", ""]
    status, _, err = run("explain", "10/second", "--window", "1e-10")
    assert status == 2 and "argument --window" in err and "shorter than 1 ns" in err
    (tmp_path / "big.csv").write_text("0.0,a,11\n")
    status, _, err = run("simulate", "10/second", "--trace", str(tmp_path / "big.csv"))
    assert status == 2 and "argument --trace" in err and "cost" in err


TRACE = """timestamp,key,cost
0.0,a,1
0.1,a,1
0.2,a,1
1.0,a,1
1.1,a,1
0.5,b,1
1.5,a,2
"""


def known_answer(data: dict[str, Any]) -> None:
    # 2 per aligned second: a's third call at 0.2 s waits for 1.0 s; at 1.5 s, 2 more
    # do not fit with 1.0 and 1.1 taken (0.5 s to the next window).
    assert data["events"] == 7
    assert data["keys"]["a"] == {
        "offered": 6,
        "admitted": 4,
        "denied": 2,
        "units_offered": 7,
        "units_admitted": 4,
        "longest_wait": pytest.approx(0.8),
    }
    assert data["keys"]["b"]["admitted"] == 1 and data["keys"]["b"]["denied"] == 0
    assert data["overall"]["offered"] == 7 and data["overall"]["denied"] == 2
    assert data["denied_by"] == {"2/second": 2}
    assert data["denied_most_by"] == "2/second"
    waits = [(w["key"], w["time"], w["retry_after"]) for w in data["longest_waits"]]
    assert waits == [("a", 0.2, pytest.approx(0.8)), ("a", 1.5, pytest.approx(0.5))]


def test_simulate_csv_trace_with_known_answer(tmp_path: Path) -> None:
    (tmp_path / "trace.csv").write_text(TRACE)
    args = ["simulate", "2/second", "--algorithm", "fixed_window", "--by", "user", "--trace", str(tmp_path / "trace.csv")]
    status, out, _ = run(*args, "--json")
    assert status == 0
    known_answer(json.loads(out))
    status, text, _ = run(*args)
    assert status == 0
    assert 'denied by: "2/second" 2 (100.0%)' in text
    assert re.search(r"^a +6 +4 +2 +33\.3%  800 ms$", text, re.M)
    assert "longest waits: 800 ms (a at 0.200 s), 500 ms (a at 1.500 s)" in text
    # None asked for: no line listing none (it printed "longest waits: ").
    status, text, _ = run(*args, "--top", "0")
    assert status == 0 and "denied by" in text and "longest waits" not in text
    # `--trace -` reads standard input, as the console script gets it from a pipe.
    piped = subprocess.run(
        [sys.executable, "-m", "ratekeeper", *args[:-1], "-", "--json"],
        input=TRACE.encode(),
        capture_output=True,
        check=True,
    )
    known_answer(json.loads(piped.stdout))


def test_simulate_json_lines_trace_in_any_order(tmp_path: Path) -> None:
    lines = []
    for row in reversed(TRACE.splitlines()[1:]):
        t, key, cost = row.split(",")
        lines.append(json.dumps({"timestamp": float(t), "key": key, "cost": int(cost)}))
    (tmp_path / "trace.jsonl").write_text("\n".join(lines) + "\n")
    status, out, _ = run(
        "simulate", "2/second", "--algorithm", "fixed_window", "--by", "user", "--trace", str(tmp_path / "trace.jsonl"), "--json"
    )
    assert status == 0
    known_answer(json.loads(out))


def test_simulate_global_limit_counts_every_key_together(tmp_path: Path) -> None:
    (tmp_path / "trace.csv").write_text("0,a\n0,b\n0,c\n")
    status, out, _ = run("simulate", "2/second", "--trace", str(tmp_path / "trace.csv"), "--json")
    assert status == 0
    data = json.loads(out)
    assert data["overall"]["admitted"] == 2 and data["keys"]["c"]["denied"] == 1


def test_the_shortest_window_and_the_least_cost_are_taken(tmp_path: Path) -> None:
    # 1 ns is the shortest duration a limiter counts, and a cost of 0 is
    # always allowed: both are taken, not refused as out of bounds.
    status, out, err = run("explain", "10/second", "--window", "1e-9")
    assert (status, err) == (0, "") and re.search(r"most in any 1 ns +10$", out, re.M)
    # A cost written "0.0" is read the slow way, which names a line at fault: the same bounds.
    for zero in ("0", "0.0"):
        (tmp_path / "trace.csv").write_text(f"0.0,a,1\n0.1,a,{zero}\n0.2,a,1\n")
        status, out, err = run("simulate", "1/second", "--algorithm", "fixed_window", "--trace", str(tmp_path / "trace.csv"), "--json")
        assert (status, err) == (0, "")
        overall = json.loads(out)["overall"]
        assert (overall["admitted"], overall["denied"], overall["units_admitted"]) == (2, 1, 1)


def test_simulate_names_the_limit_that_denied_most_and_the_longest_waits_earliest_first(tmp_path: Path) -> None:
    # 2 per second and 3 per minute, aligned windows: the per-second limit
    # denies at 0.2 s, the per-minute one at 1.1 s and 1.2 s.
    (tmp_path / "trace.csv").write_text("0.0,a\n0.1,a\n0.2,a\n1.0,a\n1.1,a\n1.2,a\n")
    args = ["simulate", "2/second;3/minute", "--algorithm", "fixed_window", "--trace", str(tmp_path / "trace.csv")]
    status, out, _ = run(*args, "--json")
    assert status == 0
    data = json.loads(out)
    assert data["denied_by"] == {"3/minute": 2, "2/second": 1}
    assert data["denied_most_by"] == "3/minute"
    # Two equal waits (each half a second before its window ends): the earlier listed first.
    (tmp_path / "ties.csv").write_text("0.0,a\n0.5,a\n1.0,a\n1.5,a\n")
    status, out, _ = run("simulate", "1/second", "--algorithm", "fixed_window", "--trace", str(tmp_path / "ties.csv"), "--json")
    assert status == 0
    waits = [(w["time"], w["retry_after"]) for w in json.loads(out)["longest_waits"]]
    assert waits == [(0.5, 0.5), (1.5, 0.5)]


def test_plot_bins_hold_about_twenty_events_each() -> None:
    # About 120 round bins over the trace, fewer where it holds fewer than
    # 20 events a bin: 100 events over 100 s are 5 bins of 20 s, not 100 of 1 s.
    assert bin_width(100, 100) == 20.0
    assert bin_width(3600, 100_000) == 50.0  # 3600 / 120 = 30, rounded up to 50
    assert bin_width(100, 10) == 100.0  # one bin


def test_simulate_report_shows_long_keys_whole_up_to_a_bound(tmp_path: Path) -> None:
    # Cut to 16 characters, these two keys were one.
    long = "x" * 60
    (tmp_path / "trace.csv").write_text(f"0,user-000000000001\n0,user-000000000002\n0,{long}\n")
    status, out, _ = run("simulate", "1/second", "--by", "user", "--trace", str(tmp_path / "trace.csv"), "--quiet")
    assert status == 0
    assert re.search(r"^user-000000000001 +1 +1 +0 ", out, re.M)
    assert re.search(r"^user-000000000002 +1 +1 +0 ", out, re.M)
    assert re.search(r"^x{46}\u2026 +1 +1 +0 ", out, re.M)


def test_simulate_names_a_refused_event_by_its_time(tmp_path: Path) -> None:
    # The trace is replayed in time order: "event 1" was the file's third line.
    (tmp_path / "trace.csv").write_text("t,key,cost\n2,b,1\n1.5,a,500\n")
    status, _, err = run("simulate", "10/second", "--trace", str(tmp_path / "trace.csv"))
    assert status == 2
    assert "argument --trace: the event at 1.5 (key 'a', cost 500): `cost` 500 exceeds the limit 10" in err


def test_generators_are_seeded_and_shaped() -> None:
    steady = generate("steady", 10, 3, 2, 0)
    assert len(steady) == 30 and steady.times[:3] == [0.0, 0.1, 0.2] and steady.keys[:3] == ["k0", "k1", "k0"]
    # rate * duration of them, on the numbers as given: 0.29 * 100 is
    # 28.999999999999996 in floats, and 28 were made.
    assert len(generate("steady", 0.29, 100, 1, 0)) == 29
    bursty = generate("bursty", 50, 2, 3, 1)
    assert len(bursty) == 100 and all(t % 1 < 0.1 for t in bursty.times)
    assert bursty.times == sorted(bursty.times)
    a, b = generate("poisson", 200, 5, 4, 7), generate("poisson", 200, 5, 4, 7)
    assert (a.times, a.keys) == (b.times, b.keys)
    assert 800 < len(a) < 1200 and set(a.keys) == {"k0", "k1", "k2", "k3"}
    assert generate("poisson", 200, 5, 4, 8).times != a.times


@pytest.mark.parametrize("kind", ["steady", "bursty", "poisson"])
def test_a_generated_trace_beyond_the_bound_is_refused_before_it_is_built(kind: str) -> None:
    # 2e13 events: terabytes of memory, or days of replay. Refused at once.
    status, out, err = run("simulate", "10/second", "--generate", kind, "--rate", "20", "--duration", "1e12", "--quiet")
    assert (status, out) == (2, "")
    assert err == (
        "ratekeeper simulate: error: argument --duration: 1e+12 s at --rate 20 would generate 2e+13 events,"
        " more than the 10,000,000 a generated trace may hold (shorten --duration or lower --rate)\n"
    )


def test_the_bound_counts_the_events_each_generator_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _simulate.MAX_EVENTS == 10_000_000  # as the README and --help say
    monkeypatch.setattr(_simulate, "MAX_EVENTS", 100)
    assert len(generate("steady", 100, 1, 1, 0)) == 100
    assert len(generate("bursty", 50, 2, 1, 0)) == 100
    for kind, rate, duration in [("steady", 101, 1), ("poisson", 10, 10.1), ("bursty", 34, 2.5)]:
        with pytest.raises(CliError, match="^argument --duration: .* more than the 100 a generated trace may hold"):
            generate(kind, rate, duration, 1, 0)
    # Bursts of 1000 in each whole second, dropped past the end only after they are made.
    with pytest.raises(CliError, match="would generate 1e\\+03 events"):
        generate("bursty", 1000, 1e-3, 1, 0)
    # A count past any float is refused too, not an OverflowError.
    for kind in ("steady", "bursty", "poisson"):
        with pytest.raises(CliError, match="would generate inf events"):
            generate(kind, 1e300, 1e300, 1, 0)
    with pytest.raises(CliError, match="^argument --keys: must be at most 100$"):
        generate("steady", 10, 1, 101, 0)


def test_bursts_keep_the_fraction_of_a_rate() -> None:
    # The rate's fraction is spread over the seconds: 15.9 per second made 15
    # in each second (150 in 10 s, where steady made 159), and 0.5 made none.
    assert len(generate("bursty", 15.9, 10, 1, 0)) == 159 == len(generate("steady", 15.9, 10, 1, 0))
    half = generate("bursty", 0.5, 10, 1, 0)
    assert [int(t) for t in half.times] == [1, 3, 5, 7, 9]
    # Below one a second, only the seconds that hold one are visited: a
    # year at 0.001 per second walked all its 31,536,000 seconds.
    done: list[int] = []
    worker = threading.Thread(target=lambda: done.append(len(generate("bursty", 0.001, 1e9, 1, 0))), daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert done == [1_000_000]
    # Nothing generated is named as such, not as an empty --trace.
    for kind in ("steady", "bursty"):
        with pytest.raises(CliError, match="^argument --duration: 1 s at --rate 0.5 generates no events"):
            generate(kind, 0.5, 1, 1, 0)
    status, _, err = run("simulate", "10/second", "--generate", "bursty", "--rate", "0.5", "--duration", "1")
    assert status == 2 and "argument --duration" in err and "--trace" not in err


def test_steady_traffic_at_the_limit_is_all_admitted_and_above_it_is_cut() -> None:
    status, out, _ = run("simulate", "10/second", "--generate", "steady", "--rate", "10", "--duration", "5", "--json")
    assert status == 0 and json.loads(out)["overall"]["denied"] == 0
    status, out, _ = run("simulate", "10/second", "--generate", "steady", "--rate", "20", "--duration", "10", "--json")
    overall = json.loads(out)["overall"]
    # A burst of 10, then 10 per second: the bound of explain, attained.
    bound = ratekeeper.guarantee(Policy.from_rates("10/second")).max_in_window(10)
    assert overall["admitted"] == bound == 10 + 99


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_simulate_plot_is_a_valid_image(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"plot{suffix}"
    status, text, _ = run(
        "simulate", "10/second", "--generate", "bursty", "--rate", "30", "--duration", "20", "--keys", "2", "--plot", str(out)
    )
    assert status == 0 and f"plot written to {out}" in text
    data = out.read_bytes()
    if suffix == ".png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        with Image.open(out) as image:
            image.verify()
        with Image.open(out) as image:
            assert image.size[0] > 300 and image.size[1] > 200
    else:
        root = ET.fromstring(data)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert len(list(root.iter())) > 50


def test_plot_without_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name: str, package: Optional[str] = None) -> Any:
        return None if name == "matplotlib" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    status, _, err = run("simulate", "1/second", "--generate", "steady", "--rate", "1", "--plot", str(tmp_path / "p.png"))
    assert status == 2 and "argument --plot" in err and "ratekeeper[plot]" in err
    assert not (tmp_path / "p.png").exists()


def test_progress_bar_draws_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setitem(sys.modules, "tqdm", None)  # the plain bar, without tqdm
    bar = Progress(10, quiet=False)
    bar.update(5)
    bar.close()
    assert "5/10" in capsys.readouterr().err
    quiet = Progress(10, quiet=True)
    quiet.update(10)
    quiet.close()
    assert capsys.readouterr().err == ""


def test_read_trace_accepts_a_header_and_missing_costs(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("time,key\n2.5,x\n1.5,y\n\n")
    trace = read_trace(str(tmp_path / "t.csv"))
    assert (trace.times, trace.keys, trace.costs) == ([1.5, 2.5], ["y", "x"], [1, 1])


def test_console_script_and_module_run() -> None:
    script = Path(sys.executable).parent / "ratekeeper"
    assert script.exists()
    for command in ([str(script)], [sys.executable, "-m", "ratekeeper"]):
        done = subprocess.run(
            [*command, "explain", "3/second", "--json"], capture_output=True, text=True, check=True, env=dict(os.environ)
        )
        assert json.loads(done.stdout)["combined"]["burst"] == 3


def test_durations_are_never_shown_longer_as_windows_nor_shorter_as_waits() -> None:
    # Exact where a unit spells it shortly; else rounded in the safe direction.
    assert fmt_seconds(6000) == "100 min"  # was "1.667 h", 1.2 s longer than the window of its figure
    assert fmt_seconds(1000) == "1000 s"
    # A short number is below 10,000 of its unit: 10,000 s is in hours, rounded down.
    assert (fmt_seconds(9999), fmt_seconds(10_000)) == ("166.65 min", "2.777 h")
    assert fmt_seconds(1 / 3) == "333.333 ms"
    assert fmt_seconds(1 / 3, up=True) == "333.334 ms"
    # One unit per ns: a span of 2.4 ns holds three instants, never read as 2 ns.
    g = ratekeeper.guarantee(ratekeeper.TokenBucket(1, 1, 1e-9))
    assert (g.max_in_window(2e-9), g.max_in_window(2.4e-9)) == (2, 3)
    # A label of any length stands apart from its figure ("1.5 min909").
    status, out, _ = run("explain", "10/second", "--window", "90")
    assert status == 0 and "most in any 1.5 min 909" in out


def test_fmt_seconds() -> None:
    assert [fmt_seconds(s) for s in (0, 1e-9, 0.1, 1, 90, 3600, 86_400, 172_800)] == [
        "0 s",
        "1 ns",
        "100 ms",
        "1 s",
        "1.5 min",
        "1 h",
        "1 day",
        "2 days",
    ]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"ratekeeper {ratekeeper.__version__}\n"


def readme_sessions() -> list[tuple[list[str], str]]:
    """The ``$ ratekeeper ...`` sessions of the repository's README: each
    command's arguments and the output shown under it."""
    readme = Path(__file__).resolve().parents[2] / "README.md"
    sessions = []
    for block in re.findall(r"```console\n(.*?)```", readme.read_text(), re.S):
        command, _, output = block.partition("\n")
        if command.startswith("$ ratekeeper "):
            sessions.append((shlex.split(command)[2:], output))
    return sessions


@pytest.mark.parametrize(("argv", "shown"), readme_sessions(), ids=lambda v: str(v)[:40])
def test_the_readme_shows_what_the_command_prints(argv: list[str], shown: str, tmp_path: Path) -> None:
    # The plot goes to a scratch file; the replay's own speed varies.
    if "--plot" in argv:
        argv[argv.index("--plot") + 1] = str(tmp_path / "plot.png")
    status, out, err = run(*argv)
    assert status == 0, err
    speed = re.compile(r" in [0-9.]+ s \([0-9,]+ events/s\)")
    printed = speed.sub("", out).replace(str(tmp_path / "plot.png"), "docs/simulate.png")
    assert printed == speed.sub("", shown)


@pytest.mark.parametrize("path", ["bindings-python/README.md", "bindings-python/PYPI.md"])
def test_the_python_readmes_commands_run(path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``$ ratekeeper ...`` lines of the package's READMEs, which show no
    output: each runs as written (its comment dropped), in a folder holding
    the trace the text leaves to the reader."""
    readme = Path(__file__).resolve().parents[2] / path
    commands = [
        shlex.split(line[2:], comments=True)[1:]
        for block in re.findall(r"```console\n(.*?)```", readme.read_text(), re.S)
        for line in block.splitlines()
        if line.startswith("$ ratekeeper ")
    ]
    assert commands, path
    (tmp_path / "trace.csv").write_text("timestamp,key,cost\n0,alice,1\n0.05,bob,1\n0.1,alice,2\n")
    monkeypatch.chdir(tmp_path)
    for argv in commands:
        status, out, err = run(*argv)
        assert status == 0 and out, (argv, err)
        if "--json" in argv:
            json.loads(out)


def test_a_csv_header_after_blank_lines_is_a_header_on_every_path(tmp_path: Path) -> None:
    # A cost written "2.0" takes the line-by-line path, which took the header for
    # data when blank lines came before it (the quick path skipped it).
    (tmp_path / "t.csv").write_text("\n\ntimestamp,key,cost\n0,a,1\n0.5,a,2.0\n")
    trace = read_trace(str(tmp_path / "t.csv"))
    assert (trace.times, trace.keys, trace.costs) == ([0.0, 0.5], ["a", "a"], [1, 2])


def test_a_json_line_holding_two_values_is_named_not_read_as_two_events(tmp_path: Path) -> None:
    # Joined into one array, the second value on line 1 became an event of its own
    # (read quickly) or shifted every later line by one, the last one dropped.
    two = '{"timestamp": 1}, {"timestamp": 2}\n'
    for text in (two + '{"timestamp": 3}\n', two + '{"timestamp": "3"}\n'):
        (tmp_path / "t.jsonl").write_text(text)
        status, _, err = run("simulate", "10/second", "--trace", str(tmp_path / "t.jsonl"))
        assert status == 2 and "t.jsonl line 1: not JSON" in err, (text, err)


def test_a_timestamp_beyond_a_float_is_named_not_a_traceback(tmp_path: Path) -> None:
    big = '{"timestamp": 1%s}\n' % ("0" * 400)  # 1e400 as a JSON int: no float holds it
    for text in (big, '{"timestamp": 0}\n{"timestamp": "1"}\n' + big):
        (tmp_path / "t.jsonl").write_text(text)
        status, _, err = run("simulate", "10/second", "--trace", str(tmp_path / "t.jsonl"))
        assert status == 2 and "argument --trace" in err and "line" in err and "not finite" in err, err
    # Past Python's 4,300 digits, json.loads itself refuses the number (a ValueError).
    (tmp_path / "t.jsonl").write_text('{"timestamp": 0}\n{"timestamp": 1%s}\n' % ("0" * 5000))
    status, _, err = run("simulate", "10/second", "--trace", str(tmp_path / "t.jsonl"))
    assert status == 2 and "t.jsonl line 2: not JSON" in err, err


@pytest.mark.parametrize("text", ["timestamp,key\n1,a\n0.5,b\n", '{"timestamp": 1, "key": "a"}\n{"timestamp": 0.5, "key": "b"}\n'])
def test_a_trace_starting_with_a_byte_order_mark_is_read(tmp_path: Path, text: str) -> None:
    # As spreadsheets and PowerShell write UTF-8: the mark is not part of the first field.
    (tmp_path / "t.txt").write_bytes(b"\xef\xbb\xbf" + text.encode())
    trace = read_trace(str(tmp_path / "t.txt"))
    assert (trace.times, trace.keys) == ([0.5, 1.0], ["b", "a"])


@pytest.mark.parametrize("cost", ["NaN", "Infinity", "1e400"])
def test_a_json_cost_that_is_no_finite_number_is_named_not_a_traceback(tmp_path: Path, cost: str) -> None:
    # json.loads reads these as floats (1e400 as infinity), which int() refused
    # with an OverflowError or a ValueError out of the command.
    (tmp_path / "t.jsonl").write_text('{"timestamp": 0}\n{"timestamp": 1, "cost": %s}\n' % cost)
    status, _, err = run("simulate", "10/second", "--trace", str(tmp_path / "t.jsonl"))
    assert status == 2 and "t.jsonl line 2: cost" in err and "is not finite" in err, err


# Unix timestamps, as a server's log writes them: a float's step there is 2^-22 s
# (238 ns), so 100 ms after a time written to the millisecond was read as up to
# 238 ns short of it.
EPOCH = 1_764_500_000


@pytest.mark.parametrize("form", ["csv", "json"])
def test_a_trace_of_unix_timestamps_is_decided_at_the_times_written(tmp_path: Path, form: str) -> None:
    # One request every 100 ms through 10 per second, a burst of 1: each finds its
    # token, as the library decides given the times exactly. Read as floats, 80 of
    # the 200 were denied, each told to retry after 238 ns.
    stamps = [f"{EPOCH + k // 10}.{k % 10}" for k in range(200)]
    if form == "csv":
        text = "".join(f"{t},a\n" for t in stamps)
    else:
        text = "".join(f'{{"timestamp": {t}, "key": "a"}}\n' for t in stamps)
    (tmp_path / "t.txt").write_text(text)
    policy = Policy({"limits": [{"name": "10/second", "rate": "10/second", "burst": 1}]})
    assert all(policy.try_acquire(None, 1, now=Decimal(t)).allowed for t in stamps)
    status, out, err = run("simulate", "10/second", "--burst", "1", "--trace", str(tmp_path / "t.txt"), "--json")
    assert status == 0, err
    assert json.loads(out)["overall"] == {
        "offered": 200,
        "admitted": 200,
        "denied": 0,
        "units_offered": 200,
        "units_admitted": 200,
        "longest_wait": 0.0,
    }


def test_exact_timestamps_keep_their_order_and_every_reading_path(tmp_path: Path) -> None:
    # Two times a float cannot tell apart (100 ns apart, one float), written out of
    # order; a cost written 2.0 and a timestamp as a JSON string take the line-by-line paths.
    csv_text = f"timestamp,key,cost\n{EPOCH}.0000001,b,2.0\n{EPOCH},a,1\n{EPOCH}.3,c\n"
    json_text = (
        f'{{"timestamp": "{EPOCH}.0000001", "key": "b", "cost": 2.0}}\n'
        f'{{"timestamp": {EPOCH}, "key": "a"}}\n{{"timestamp": {EPOCH}.3, "key": "c"}}\n'
    )
    for text in (csv_text, json_text):
        (tmp_path / "t.txt").write_text(text)
        trace = read_trace(str(tmp_path / "t.txt"))
        assert trace.keys == ["a", "b", "c"] and trace.costs == [1, 2, 1]
        assert trace.nows == [EPOCH, Decimal(f"{EPOCH}.0000001"), Decimal(f"{EPOCH}.3")]
    # Times a float holds to the nanosecond are passed as read.
    (tmp_path / "t.csv").write_text("0.1,a\n4000000.000000001,a\n")
    assert read_trace(str(tmp_path / "t.csv")).nows is None
