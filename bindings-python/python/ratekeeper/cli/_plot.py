"""``simulate --plot``: offered and admitted rate over time, and the remaining capacity,
drawn with matplotlib (the ``plot`` extra: ``pip install ratekeeper[plot]``)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import TYPE_CHECKING

from ratekeeper.cli._policy import CliError

if TYPE_CHECKING:
    from ratekeeper import Policy
    from ratekeeper.cli._simulate import Replay, Trace

FORMATS = (".png", ".svg")
# About this many bins, fewer for short traces (at least ~20 events a bin).
BINS = 120


def bin_width(span: float, events: int) -> float:
    """A round bin width (1, 2 or 5 times a power of ten seconds) giving about ``BINS``
    bins, so that bins line up with whole seconds, minutes..."""
    target = max(span, 1e-9) / max(1, min(BINS, events // 20))
    power = 10.0 ** math.floor(math.log10(target))
    for step in (1.0, 2.0, 5.0, 10.0):
        if step * power >= target:
            return step * power
    return 10.0 * power


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
    width = bin_width(float(times[-1]) - float(times[0]), len(trace))
    first = math.floor(float(times[0]) / width)
    index = np.floor(times / width).astype(np.int64) - first
    bins = int(index[-1]) + 1
    offered = np.bincount(index, weights=costs, minlength=bins) / width
    admitted = np.bincount(index, weights=costs * allowed, minlength=bins) / width
    lowest = np.full(bins, np.nan)
    highest = np.full(bins, np.nan)
    np.fmin.at(lowest, index, remaining)
    np.fmax.at(highest, index, remaining)
    centers = (np.arange(bins) + first + 0.5) * width

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5), sharex=True, gridspec_kw={"height_ratios": (2, 1)})
    top.fill_between(centers, offered, step="mid", alpha=0.3, color="tab:gray", label="offered")
    top.step(centers, admitted, where="mid", color="tab:blue", label="admitted")
    top.set_ylabel(f"units / s (per {width:g} s)")
    names = ", ".join(policy.names)
    top.set_title(f"{len(trace):,} events through {names}")
    top.legend(loc="upper right")
    bottom.fill_between(centers, lowest, highest, step="mid", alpha=0.4, color="tab:green", label="range")
    bottom.step(centers, highest, where="mid", color="tab:green", linewidth=1)
    bottom.set_ylabel("remaining\n(after each decision)")
    bottom.set_xlabel("time (s)")
    bottom.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
