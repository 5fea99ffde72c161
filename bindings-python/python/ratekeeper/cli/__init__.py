"""The ``ratekeeper`` command: ``explain`` a policy's guarantees, ``simulate`` traffic through it.

``python -m ratekeeper explain "10/second;100/minute"`` prints, computed exactly by the core,
the most units admitted in any window, the largest burst, the sustained rate, how long a
locked-out client waits, and how each algorithm differs from a strict sliding window.
``python -m ratekeeper simulate "10/second" --generate poisson --rate 20 --duration 60``
replays a trace (or a file: ``--trace trace.csv``) and reports offered, admitted and denied
traffic; ``--plot out.png`` draws it (needs ``pip install 'ratekeeper[plot]'``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence, TextIO

import ratekeeper

from ratekeeper.cli._explain import run_explain
from ratekeeper.cli._policy import CliError, add_policy_arguments, build_policy

__all__ = ["main"]


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    if value < 1e-9:  # a limiter counts whole nanoseconds: it would be shown as 0 ns
        raise argparse.ArgumentTypeError(f"{text!r} is shorter than 1 ns, the shortest duration a limiter counts")
    if value * 1e9 >= 2**64:  # the longest duration a limiter counts
        raise argparse.ArgumentTypeError(f"{text!r} is too long (the limit is 2^64 nanoseconds, about 584 years)")
    return value


def parser() -> argparse.ArgumentParser:
    """The command line of ``ratekeeper``."""
    top = argparse.ArgumentParser(
        prog="ratekeeper", description="Explain a rate-limiting policy's guarantees, or simulate traffic through it."
    )
    top.add_argument("--version", action="version", version=f"ratekeeper {ratekeeper.__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="{explain,simulate}")

    explain = commands.add_parser("explain", help="what a policy guarantees, exactly")
    add_policy_arguments(explain)
    explain.add_argument(
        "--window", action="append", type=_positive_seconds, metavar="SECONDS", help="another window to report (repeatable)"
    )
    explain.add_argument("--json", action="store_true", help="print a JSON document")

    simulate = commands.add_parser("simulate", help="replay a traffic trace through a policy")
    add_policy_arguments(simulate)
    trace = simulate.add_argument_group("traffic (a trace file or a generator)")
    trace.add_argument("--trace", metavar="FILE", help="CSV (timestamp,key,cost) or JSON lines; - for standard input")
    trace.add_argument("--generate", choices=("steady", "bursty", "poisson"), help="generate the trace instead")
    trace.add_argument("--rate", dest="gen_rate", type=float, default=None, metavar="R", help="generated requests per second")
    trace.add_argument(
        "--duration", type=float, default=60.0, metavar="D", help="generated seconds of traffic (default 60; at most 10,000,000 events)"
    )
    trace.add_argument("--keys", type=int, default=1, metavar="K", help="generated distinct keys (default 1, at most 10,000,000)")
    trace.add_argument("--seed", type=int, default=0, metavar="S", help="generator seed (default 0)")
    simulate.add_argument("--plot", metavar="OUT", help="draw offered/admitted rate and remaining capacity (.png or .svg)")
    simulate.add_argument("--top", type=int, default=5, metavar="N", help="how many of the longest waits to list (default 5)")
    simulate.add_argument("--json", action="store_true", help="print a JSON document")
    simulate.add_argument("--quiet", action="store_true", help="no progress bar")
    return top


def _simulate_command(args: argparse.Namespace, out: TextIO) -> int:
    from ratekeeper.cli._simulate import generate, read_trace, run_simulate

    if bool(args.trace) == bool(args.generate):
        raise CliError("argument --trace: give exactly one of --trace or --generate")
    if args.generate:
        if args.gen_rate is None:
            raise CliError("argument --rate: --generate needs --rate (requests per second)")
        trace = generate(args.generate, args.gen_rate, args.duration, args.keys, args.seed)
    else:
        trace = read_trace(args.trace)
    if args.top < 0:
        raise CliError("argument --top: must be at least 0")
    policy = build_policy(args)
    return run_simulate(policy, trace, as_json=args.json, quiet=args.quiet, plot=args.plot, out=out, top=args.top)


def main(argv: Optional[Sequence[str]] = None, out: Optional[TextIO] = None) -> int:
    """Runs the command line ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    args = parser().parse_args(argv)
    out = out or sys.stdout
    try:
        if args.command == "explain":
            return run_explain(build_policy(args), args.window, args.json, out)
        return _simulate_command(args, out)
    except CliError as err:
        print(f"ratekeeper {args.command}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader (`| head`) left: stop quietly, as Unix tools do.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaces the closed pipe until exit
        return 0
