"""The Python API is the one tests/surface/surface.json pairs with JS's, name for name.

Every public name of ``ratekeeper``, ``ratekeeper.redis`` and ``ratekeeper.asgi``
(their ``__all__``), every public member of their classes, and each method's
parameters and defaults as ``inspect`` shows them, are the mapping's Python
side; the type stubs are held to the same runtime by ``mypy.stubtest``
(scripts/python.sh). The JS half is tests/js/surface.test.cjs: a name added
to one binding and not to the mapping, or to the mapping and not to a
binding, fails one of them.
"""

from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path
from typing import Any, Optional

import pytest

import ratekeeper

SURFACE = json.loads(
    (Path(__file__).resolve().parent / ".." / ".." / "tests" / "surface" / "surface.json").read_text(encoding="utf-8")
)

# Dunder methods that are part of a class's API (len(), bool(), calling, with).
PROTOCOL = {"__len__", "__bool__", "__call__", "__enter__", "__aenter__"}
# What a class inherits from these is Python's, not the binding's.
BUILTIN_BASES = (BaseException, tuple, object)


def split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def name_of(spec: str) -> str:
    """The bare name of a Python spec: ``async ratekeeper.x(...)`` -> ``x``."""
    spec = spec.removeprefix("async ")
    return spec.split("(", 1)[0].rsplit(".", 1)[-1]


def signature(fn: Any, name: str) -> str:
    """``name(params)`` as the mapping writes it: no ``self``, no annotations, ``*`` before keyword-only ones."""
    params: list[str] = []
    star = False
    for p in inspect.signature(fn).parameters.values():
        if p.name in ("self", "cls") and not params:
            continue
        if p.kind is p.VAR_POSITIONAL:
            params.append(f"*{p.name}")
            star = True
        elif p.kind is p.VAR_KEYWORD:
            params.append(f"**{p.name}")
        else:
            if p.kind is p.KEYWORD_ONLY and not star:
                params.append("*")
                star = True
            params.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    prefix = "async " if inspect.iscoroutinefunction(fn) else ""
    return f"{prefix}{name}({', '.join(params)})"


def resolve(qualified: str) -> Any:
    """The object ``ratekeeper.redis.RedisLimiter`` names."""
    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module), name)


def builtin_base(cls: type) -> type:
    return next(base for base in BUILTIN_BASES if issubclass(cls, base))


def members(cls: type) -> dict[str, str]:
    """Public members of ``cls``: name -> ``method``, ``property`` or ``static``."""
    inherited = set(dir(builtin_base(cls)))
    out: dict[str, str] = {}
    for name in dir(cls):
        if name in inherited or (name.startswith("_") and name not in PROTOCOL):
            continue
        attr = inspect.getattr_static(cls, name)
        if isinstance(attr, (staticmethod, classmethod)) or type(attr).__name__ == "classmethod_descriptor":
            out[name] = "static"
        elif callable(attr):
            out[name] = "method"
        else:
            out[name] = "property"
    # Fields declared on the class and set on each instance (a RedisDecision's
    # from_store, an error's code).
    for klass in cls.__mro__:
        if klass in BUILTIN_BASES or klass.__module__ == "builtins":
            continue
        for name in inspect.get_annotations(klass):
            if not name.startswith("_"):
                out.setdefault(name, "property")
    return out


TYPES = {name_of(t["python"]): t for t in SURFACE["types"] if t["python"]}


def rows(t: dict[str, Any], which: str) -> list[list[Any]]:
    """A type's member rows, its base's (``extends``) first, replaced by its own of the same name."""
    own: list[list[Any]] = t.get(which, [])
    if "extends" not in t:
        return own
    py_names = {name_of(r[0]) for r in own if r[0]}
    js_names = {n for r in own if r[1] for n in ([r[1]] if isinstance(r[1], str) else r[1])}
    base = [r for r in rows(TYPES[t["extends"]], which) if not (r[0] and name_of(r[0]) in py_names) and r[1] not in js_names]
    return base + own


def example(value: Any) -> Any:
    """A mapping example's argument: ``{"example": Type}`` is an instance built from that type's example."""
    if isinstance(value, list):
        return [example(v) for v in value]
    if isinstance(value, dict) and "example" in value:
        return instance(TYPES[value["example"]])
    return value


def instance(t: dict[str, Any]) -> Any:
    return resolve(t["python"].split("(", 1)[0])(*example(t["example"]["python"]))


def test_the_exports_are_the_mapped_ones() -> None:
    import ratekeeper.asgi
    import ratekeeper.redis

    actual = {f"{m.__name__}.{n}" for m in (ratekeeper, ratekeeper.redis, ratekeeper.asgi) for n in m.__all__}
    mapped = {e[0].split("(", 1)[0] for e in SURFACE["exports"] if e[0]}
    assert sorted(actual - mapped) == [], "exported, but not in tests/surface/surface.json"
    assert sorted(mapped - actual) == [], "in tests/surface/surface.json, but not exported"


@pytest.mark.parametrize("spec", [e[0] for e in SURFACE["exports"] if e[0] and "(" in e[0]])
def test_an_exported_function_has_the_mapped_parameters(spec: str) -> None:
    qualified = spec.split("(", 1)[0]
    module, _, name = qualified.rpartition(".")
    assert f"{module}.{signature(resolve(qualified), name)}" == spec


@pytest.mark.parametrize("t", SURFACE["types"], ids=lambda t: name_of(t["python"]))
def test_a_class_has_the_mapped_members(t: dict[str, Any]) -> None:
    qualified = t["python"].split("(", 1)[0]
    cls = resolve(qualified)
    if "(" in t["python"]:
        assert f"{qualified.rpartition('.')[0]}.{signature(cls, cls.__name__)}" == t["python"]
    actual = members(cls)
    want: dict[str, tuple[str, Optional[str]]] = {}
    for row in rows(t, "members"):
        if row[0]:
            want[name_of(row[0])] = ("method" if "(" in row[0] else "property", row[0])
    for row in rows(t, "static"):
        if row[0]:
            want[name_of(row[0])] = ("static", row[0])
    assert sorted(set(actual) - set(want)) == [], "members the mapping lacks"
    assert sorted(set(want) - set(actual)) == [], "members the class lacks"
    for name, (kind, spec) in want.items():
        assert actual[name] == kind, f"{name} is a {kind} in the mapping"
        if spec and "(" in spec:
            assert signature(getattr(cls, name), name) == spec


@pytest.mark.parametrize("t", [t for t in SURFACE["types"] if "defaults" in t], ids=lambda t: name_of(t["python"]))
def test_the_defaults_are_the_mapped_ones(t: dict[str, Any]) -> None:
    made = instance(t)
    for name, value in t["defaults"].items():
        actual = getattr(made, name)
        assert (list(actual) if isinstance(actual, tuple) else actual) == value, name
