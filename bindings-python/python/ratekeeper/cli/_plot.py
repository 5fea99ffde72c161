"""``simulate --plot``: offered and admitted rate over time, and the remaining capacity,
drawn with matplotlib (the ``plot`` extra: ``pip install ratekeeper[plot]``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from ratekeeper.cli._policy import CliError

if TYPE_CHECKING:
    from ratekeeper import Policy
    from ratekeeper.cli._simulate import Replay, Trace

FORMATS = (".png", ".svg")
# The most bins; fewer for short traces, about 20 events a bin.
BINS = 200


def check_plot_target(path: str) -> None:
    """Fails, before any replay, when the plot cannot be drawn: another format, or no matplotlib."""
    if Path(path).suffix.lower() not in FORMATS:
        raise CliError(f"argument --plot: {path!r} must end in .png or .svg")
    if importlib.util.find_spec("matplotlib") is None:
        raise CliError("argument --plot: needs matplotlib; install it with: pip install 'ratekeeper[plot]'")


def plot_replay(policy: Policy, trace: Trace, result: Replay, path: str) -> None:
    """Writes the picture of ``result`` to ``path`` (PNG or SVG, by its suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    times = np.asarray(trace.times, dtype=float)
    costs = np.asarray(trace.costs, dtype=float)
    allowed = np.asarray(result.allowed, dtype=bool)
    remaining = np.asarray(result.remaining, dtype=float)
    start, end = float(times[0]), float(times[-1])
    span = max(end - start, 1e-9)
    bins = max(10, min(BINS, len(trace) // 20))
    edges = np.linspace(start, start + span, bins + 1)
    width = span / bins
    index = np.minimum(((times - start) / width).astype(np.int64), bins - 1)
    offered = np.bincount(index, weights=costs, minlength=bins) / width
    admitted = np.bincount(index, weights=costs * allowed, minlength=bins) / width
    lowest = np.full(bins, np.nan)
    np.fmin.at(lowest, index, remaining)
    centers = (edges[:-1] + edges[1:]) / 2

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5), sharex=True, height_ratios=(2, 1))
    top.fill_between(centers, offered, step="mid", alpha=0.3, color="tab:gray", label="offered")
    top.step(centers, admitted, where="mid", color="tab:blue", label="admitted")
    top.set_ylabel("units / s")
    names = ", ".join(policy.names)
    top.set_title(f"{len(trace):,} events through {names}")
    top.legend(loc="upper right")
    bottom.step(centers, lowest, where="mid", color="tab:green")
    bottom.set_ylabel("remaining")
    bottom.set_xlabel("time (s)")
    bottom.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
