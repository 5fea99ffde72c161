"""The Python examples of the markdown files run as written, and the values
their comments state are the values they give (doc_examples.py says how
those are read). The Redis examples run in tests/redis/test_redis_store.py."""

from __future__ import annotations

import asyncio
import pickle
import time
from typing import Any, Optional

import pytest
from doc_examples import ROOT, Block, Claim, blocks, needs_redis, not_run, run

import ratekeeper


class Called:
    """What the placeholder ``call_the_api()`` returns: a sync call's value, or awaited."""

    def __await__(self) -> Any:
        return iter(())


class Filled:
    """A ``rewrite`` putting in what the text leaves to the reader; each
    substitution must find its text (``used``), so that none outlives the
    example it was made for."""

    def __init__(self, substitutions: dict[str, str]) -> None:
        self.substitutions = substitutions
        self.used: set[str] = set()

    def __call__(self, block: Block) -> str:
        source = block.source
        for placeholder, value in self.substitutions.items():
            if placeholder in source:
                self.used.add(placeholder)
                source = source.replace(placeholder, value)
        return source


def examples(path: str) -> list[Block]:
    """The blocks of ``path`` that run here; the others are marked, and few."""
    every = blocks(path, "python")
    assert every, f"{path} has no Python example"
    for block in every:
        assert block.marker is None or needs_redis(block) or not_run(block), f"{block.where}: {block.marker!r}"
    return [block for block in every if block.marker is None]


def run_all(path: str, names: dict[str, Any], substitutions: Optional[dict[str, str]] = None) -> list[Claim]:
    """Runs the examples of ``path`` in ``names``; answers the claims checked."""
    rewrite = Filled(substitutions or {})
    checked = asyncio.run(run(examples(path), names, rewrite))
    assert rewrite.used == set(rewrite.substitutions), f"{path} no longer holds {set(rewrite.substitutions) - rewrite.used}"
    return checked


def test_the_python_readme_examples_run_and_state_true_values() -> None:
    # What the text leaves to the reader: a request handler, the API the
    # examples limit, a limiter and a cost in the generic ones, and modules.
    names: dict[str, Any] = {
        "handle": lambda: None,
        "call_the_api": Called,
        "limiter": ratekeeper.TokenBucket(10, 1, 1.0),
        "cost": 1,
        "time": time,
        "pickle": pickle,
    }
    checked = run_all("bindings-python/README.md", names, {"Starlette(routes=...)": "Starlette(routes=[])"})
    stated = {claim.statement for claim in checked}
    # Those the README states now (a claim the reader no longer recognised
    # would vanish from here silently otherwise).
    assert {
        "limiter.headers(decision)",
        "g.max_in_window(1.0)",
        "(g.burst, g.sustained)",
        "(g.retry_after, g.reset_after)",
        "(g.strict, g.excess)",
        "(p.max_in_window(60), [l.name for l in p.limits])",
    } <= stated, "\n".join(map(str, checked))


def test_the_repository_readme_python_example_runs() -> None:
    run_all("README.md", {})


def test_the_pypi_readme_example_runs() -> None:
    # PYPI.md is the long description pip and PyPI show (pyproject's readme).
    run_all("bindings-python/PYPI.md", {})
    assert 'readme = "PYPI.md"' in (ROOT / "bindings-python/pyproject.toml").read_text()


# The files whose every fenced block is run, or marked as not run, and what
# runs each language's blocks.
DOCUMENTS = [
    "README.md",
    "core/README.md",
    "core/redis/PROTOCOL.md",
    "bindings-python/README.md",
    "bindings-python/PYPI.md",
    "bindings-node/README.md",
    "bindings-wasm/README.md",
]
RUN_BY = {
    "python": "this file, and tests/redis/test_redis_store.py for those marked `needs Redis`",
    "js": "tests/js/docs.test.cjs (napi and wasm), tests/redis/docs.test.cjs for those marked `needs Redis`",
    "rust": "cargo test: core/README.md's by the core crate, README.md's by docs/ (ratekeeper-docs)",
    "console": "test_cli.py: each `$ ratekeeper ...` line, and what README.md shows it print",
    "toml": "docs/src/lib.rs: the core README's dependency line names this version and real features",
}


@pytest.mark.parametrize("path", DOCUMENTS)
def test_every_block_is_run_or_says_why_not(path: str) -> None:
    for block in blocks(path):
        if not_run(block):
            continue
        assert block.language in RUN_BY, f"{block.where}: a ```{block.language} block that no test runs"
        assert block.marker is None or needs_redis(block), f"{block.where}: marker {block.marker!r}"
        if block.language == "console":
            commands = [line for line in block.source.splitlines() if line.startswith("$ ")]
            assert commands and all(line.startswith("$ ratekeeper ") for line in commands), block.where
