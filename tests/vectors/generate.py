#!/usr/bin/env python3
"""Writes the conformance vectors from the naive reference models in reference/.

The models share no code with the Rust core: exact Fractions and plain lists.
Files in this folder are run by every runner (Rust, Python, Node, wasm); files
in core-only/ too, but for the scenarios at the edges of u64 that no JS number
holds, which the JS runner recognises and does not run; files in server/ by
the server tests of the Node and Python bindings (the key of a client's
address). Each folder has an index.json with every file's scenario count.

    python3 tests/vectors/generate.py          # rewrite what changed
    python3 tests/vectors/generate.py --check  # fail if a committed file is stale
"""
from __future__ import annotations

import importlib
import json
import pkgutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import reference  # noqa: E402


def render(description: str, scenarios: list) -> str:
    # One step per line keeps the files reviewable in a diff.
    lines = ['{', f'  "description": {json.dumps(description)},', '  "scenarios": [']
    for i, sc in enumerate(scenarios):
        head = {k: v for k, v in sc.items() if k != "steps"}
        body = json.dumps(head)[:-1]
        if "steps" in sc:
            steps = ",\n".join("      " + json.dumps(step) for step in sc["steps"])
            body += ', "steps": [\n' + steps + "\n    ]"
        lines.append("    " + body + "}" + ("," if i + 1 < len(scenarios) else ""))
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def wanted_files() -> dict[Path, str]:
    counts: dict[str, dict[str, int]] = {}
    files: dict[Path, str] = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(reference.__path__)):
        for folder, name, description, build in getattr(importlib.import_module(f"reference.{module}"), "FILES", []):
            scenarios = build()
            files[HERE / folder / name] = render(description, scenarios)
            counts.setdefault(folder, {})[name] = len(scenarios)
    for folder, files_here in counts.items():
        index = {"files": dict(sorted(files_here.items()))}
        files[HERE / folder / "index.json"] = json.dumps(index, indent=2) + "\n"
    return files


def main() -> None:
    files = wanted_files()
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    on_disk = {p for p in HERE.glob("*.json")} | {p for p in HERE.glob("*/*.json")}
    orphans = sorted(str(p.relative_to(HERE)) for p in on_disk - set(files))
    total = sum(len(json.loads(t).get("scenarios", [])) for t in files.values())
    if "--check" in sys.argv[1:]:
        problems = [str(p.relative_to(HERE)) for p in stale] + [f"{o} (no model writes it)" for o in orphans]
        if problems:
            sys.exit(f"vectors out of date (run tests/vectors/generate.py): {', '.join(problems)}")
        print(f"vectors up to date: {total} scenarios in {sum(p.name != 'index.json' for p in files)} files")
        return
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[path])
    for orphan in orphans:
        (HERE / orphan).unlink()
    print(f"wrote {len(stale)} file(s), removed {len(orphans)}; {total} scenarios")


if __name__ == "__main__":
    main()
