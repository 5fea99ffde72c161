"""The policy a command works on: from rate strings, a JSON or TOML file, or flags."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from ratekeeper import Policy, RateLimitError

ALGORITHMS = (
    "token_bucket",
    "gcra",
    "leaky_bucket",
    "sliding_window_log",
    "sliding_window_counter",
    "fixed_window",
)


class CliError(Exception):
    """A bad argument: the message names it; the command exits with status 2."""


def add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments that describe a policy, shared by every command."""
    source = parser.add_argument_group("policy (rate strings with flags, or a file)")
    source.add_argument(
        "rates",
        nargs="?",
        help='rate strings, such as "10/second;100/minute" (one limit per rate)',
    )
    source.add_argument(
        "--config",
        metavar="FILE",
        help='a JSON or TOML policy configuration: {"limits": [{"name": ..., "rate": ..., ...}]}',
    )
    source.add_argument("--algorithm", choices=ALGORITHMS, default=None, help="the algorithm (default: token_bucket)")
    source.add_argument("--burst", type=int, default=None, metavar="N", help="a bucket's capacity, a GCRA's burst, a queue's length")
    source.add_argument("--calendar", choices=("day", "week", "month"), default=None, help="calendar windows (window algorithms)")
    source.add_argument(
        "--by",
        action="append",
        default=None,
        metavar="FIELD",
        help="a request field every limit is keyed by (repeatable; simulate maps the trace's key to it)",
    )


def _load_file(path: str) -> Any:
    file = Path(path)
    try:
        text = file.read_bytes()
    except OSError as err:
        raise CliError(f"argument --config: cannot read {path}: {err.strerror}") from None
    if file.suffix.lower() == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - only on Python < 3.11
            import tomli as tomllib
        try:
            return tomllib.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
            raise CliError(f"argument --config: {path} is not valid TOML: {err}") from None
    try:
        return json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CliError(f"argument --config: {path} is not valid JSON: {err}") from None


def policy_config(args: argparse.Namespace) -> dict[str, Any]:
    """The policy configuration the arguments describe, as ``Policy`` takes it."""
    if bool(args.rates) == bool(args.config):
        which = "both" if args.rates else "neither"
        raise CliError(f"argument rates: give exactly one of rates or --config (got {which})")
    if args.config:
        config = _load_file(args.config)
        if not isinstance(config, dict):
            raise CliError(f'argument --config: {args.config} must hold an object {{"limits": [...]}}')
        if any(v is not None for v in (args.algorithm, args.burst, args.calendar, args.by)):
            raise CliError("argument --config: the file describes the whole policy; drop --algorithm/--burst/--calendar/--by")
        return config
    rates: str = args.rates
    by = list(args.by or [])
    limit: dict[str, Any] = {"algorithm": args.algorithm or "token_bucket", "by": by}
    if args.burst is not None:
        # Checked here: the configuration's own message would name its JSON.
        if not 1 <= args.burst < 2**64:
            raise CliError(f"argument --burst: must be a whole number from 1 to 2^64 - 1, not {args.burst}")
        limit["burst"] = args.burst
    if args.calendar is not None:
        limit["calendar"] = args.calendar
    # One limit per rate, split as Policy.from_rates splits them.
    parts = [part.strip() for part in re.split(r"[;,|]", rates) if part.strip()]
    if not parts:
        raise CliError("argument rates: no rate given")
    try:
        # Its errors, for the rates as the user wrote them: a rate given twice
        # would otherwise be a limit whose `name` (the CLI's) is taken.
        Policy.from_rates(";".join(parts))
    except (RateLimitError, TypeError, ValueError) as err:
        raise CliError(f"argument rates: {err}") from None
    return {"limits": [{"name": part, "rate": part, **limit} for part in parts]}


def build_policy(args: argparse.Namespace) -> Policy:
    """The ``Policy`` the arguments describe; a ``CliError`` naming the argument otherwise."""
    config = policy_config(args)
    source = "--config" if args.config else "rates"
    try:
        policy = Policy(config)
    except (RateLimitError, TypeError, ValueError) as err:
        raise CliError(f"argument {source}: {err}") from None
    if len(policy) == 0:
        raise CliError(f"argument {source}: the policy has no limits")
    return policy
