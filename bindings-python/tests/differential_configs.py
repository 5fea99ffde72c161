"""The Python side of the cross-binding test of policy configurations
(tests/differential/configs.test.cjs).

Reads a JSON list of configurations' JSON texts and prints, for each, what
``Policy`` made of the text and of the mapping ``json.loads`` reads from it:
the limits and each limit's ``limit`` (a cost of 0 decided with every field
given), or the error's code, whether it is a TypeError, and its message. Not a
pytest module: the test runs it as

    .venv/bin/python bindings-python/tests/differential_configs.py TEXTS.json
"""

from __future__ import annotations

import json
import sys
from typing import Any

import ratekeeper

Record = dict[str, Any]


def outcome(config: object) -> Record:
    """What ``Policy(config)`` answers."""
    try:
        policy = ratekeeper.Policy(config)  # type: ignore[arg-type]
    except ratekeeper.RateLimitError as error:
        return {"code": error.code, "type": isinstance(error, TypeError), "message": str(error)}
    limits = [[limit.name, list(limit.by)] for limit in policy.limits]
    request = {field: "v" for _, by in limits for field in by}
    decided = [d.limit for _, d in policy.try_acquire(request, 0, now=0).limits]
    return {"limits": limits, "decided": decided}


def repeats_a_key(text: str) -> bool:
    """Whether an object of ``text`` gives a key twice (a mapping cannot)."""
    repeated = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal repeated
        repeated = repeated or len({key for key, _ in items}) < len(items)
        return dict(items)

    json.loads(text, object_pairs_hook=pairs)
    return repeated


def main(path: str) -> None:
    records = []
    for text in json.load(open(path, encoding="utf-8")):
        record: Record = {"text": outcome(text)}
        try:
            mapping = json.loads(text)
        except ValueError:
            mapping = None
        if isinstance(mapping, dict):
            record["mapping"] = outcome(mapping)
            record["repeats"] = repeats_a_key(text)
        records.append(record)
    json.dump(records, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
