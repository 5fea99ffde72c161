"""The code blocks of the project's markdown files, run as the tests of what
they say (test_doc_examples.py; the Redis ones in tests/redis/).

A file's ```python blocks run in order, in one namespace (a later example
uses what an earlier one made), statement by statement, as the body of one
coroutine (they ``await``). A value the text states in a comment is checked
against what the statement gives:

- ``expression  # VALUE``, or ``# VALUE`` on the lines right under it, where
  VALUE is a Python literal, alone or before a ``": "`` that opens prose
  (``g.max_in_window(1.0)  # 19: a burst of 10, then 9 more``); an
  assignment's VALUE is the name's value once assigned;
- ``expression  # same as OTHER``: OTHER, evaluated after it, is equal.

Any other comment is prose, read by people only. A block is left out by a
marker on the line before its fence, ``<!-- example: needs Redis ... -->``
(run by the Redis suite) or ``<!-- example: not run (why) -->``.
tests/js/doc-examples.cjs does the same for the ```js blocks.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import tokenize
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[2]

_BLOCK = re.compile(
    r"^(?:<!-- example: (?P<marker>[^\n]*?) -->\n)?```(?P<language>[a-z]*)\n(?P<source>.*?)^```$", re.S | re.M
)
# The part of a comment that may state a value: all of it, or what comes
# before any ": " (prose follows).
_PROSE = re.compile(r": ")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a markdown file."""

    path: Path
    line: int  # the line of its first line of code, in the file (1-based)
    language: str
    source: str
    marker: Optional[str]  # the text of `<!-- example: ... -->` right before it

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(relative: str, language: Optional[str] = None) -> list[Block]:
    """The fenced blocks of ``relative`` (a path from the repository root), in
    order; only those of ``language`` when given."""
    path = ROOT / relative
    text = path.read_text()
    found = []
    for match in _BLOCK.finditer(text):
        line = text.count("\n", 0, match.start("source")) + 1
        block = Block(path, line, match["language"], match["source"], match["marker"])
        if language is None or block.language == language:
            found.append(block)
    return found


def needs_redis(block: Block) -> bool:
    """Whether ``block`` is marked as run by the Redis suite."""
    return block.marker is not None and block.marker.startswith("needs Redis")


def not_run(block: Block) -> bool:
    """Whether ``block`` is marked as not run, saying why."""
    return block.marker is not None and re.fullmatch(r"not run \(.+\)", block.marker) is not None


@dataclass(frozen=True)
class Claim:
    """A value a comment states for a statement."""

    where: str  # file:line
    statement: str
    comment: str

    def __str__(self) -> str:
        return f"{self.where}: {self.statement}  # {self.comment}"


def _comments(source: str) -> dict[int, tuple[str, bool]]:
    """Each line's comment: its text, and whether it is the whole line."""
    found = {}
    lines = source.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row, column = token.start
            found[row] = (token.string[1:].strip(), not lines[row - 1][:column].strip())
    return found


def _literal(comment: str) -> tuple[bool, Any]:
    """Whether ``comment`` states a literal value, and the value."""
    for end in [len(comment), *(match.start() for match in _PROSE.finditer(comment))]:
        try:
            return True, ast.literal_eval(comment[:end].strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return False, None


def _same_as(comment: str) -> Optional[str]:
    """The expression of a ``same as EXPRESSION`` comment, if it is one."""
    if not comment.startswith("same as "):
        return None
    expression = comment[len("same as ") :].strip()
    try:
        ast.parse(expression, mode="eval")
    except SyntaxError:
        return None
    return expression


def _claims(statement: ast.stmt, comments: dict[int, tuple[str, bool]]) -> list[str]:
    """The comments stating a value for ``statement`` (an expression or an
    assignment): the one at its end, then the whole-line comments right
    under it."""
    stated: list[str] = []
    if not isinstance(statement, (ast.Expr, ast.Assign)):
        return stated
    end = statement.end_lineno or statement.lineno
    candidates = []
    if end in comments and not comments[end][1]:
        candidates.append(comments[end][0])
    row = end + 1
    while row in comments and comments[row][1]:
        candidates.append(comments[row][0])
        row += 1
    for comment in candidates:
        if _literal(comment)[0] or _same_as(comment) is not None:
            stated.append(comment)
    return stated


def _check(value: Any, comment: str, names: dict[str, Any], where: str, statement: str) -> None:
    other = _same_as(comment)
    if other is not None:
        expected = eval(compile(other, where, "eval"), names)
    else:
        expected = _literal(comment)[1]
    assert value == expected, f"{where}: `{statement}` is {value!r}, where the text says {comment!r}"


async def run(
    examples: Iterable[Block],
    names: dict[str, Any],
    rewrite: Callable[[Block], str] = lambda block: block.source,
) -> list[Claim]:
    """Runs ``examples`` in order in ``names`` and checks what their comments
    state; answers the claims checked. ``rewrite`` may give a block's source
    with what the text leaves to the reader filled in."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    checked = []
    for block in examples:
        source = rewrite(block)
        filename = str(block.path.relative_to(ROOT))
        tree = ast.parse(source, filename)
        ast.increment_lineno(tree, block.line - 1)
        comments = {row + block.line - 1: comment for row, comment in _comments(source).items()}
        for statement in tree.body:
            where = f"{filename}:{statement.lineno}"
            text = ast.unparse(statement)
            stated = _claims(statement, comments)
            if isinstance(statement, ast.Expr):
                code = compile(ast.Expression(statement.value), filename, "eval", flags=flags)
                # A coroutine when the statement awaits (top-level await).
                value = eval(code, names)
                if code.co_flags & inspect.CO_COROUTINE:
                    value = await value
            else:
                code = compile(ast.Module([statement], type_ignores=[]), filename, "exec", flags=flags)
                result = eval(code, names)
                if code.co_flags & inspect.CO_COROUTINE:
                    await result
                value = None
                if stated:
                    targets = statement.targets if isinstance(statement, ast.Assign) else []
                    assert len(targets) == 1 and isinstance(targets[0], ast.Name), (
                        f"{where}: a value is stated for `{text}`, which assigns no one name"
                    )
                    value = names[targets[0].id]
            for comment in stated:
                _check(value, comment, names, where, text)
                checked.append(Claim(where, text, comment))
    return checked
