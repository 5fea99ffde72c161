"""A policy's limits as ``Policy.limits`` lists them (made in Rust, defined here)."""

from __future__ import annotations

from typing import NamedTuple


class PolicyLimit(NamedTuple):
    """One limit of a ``Policy``, as ``Policy.limits`` lists it: its ``name``
    and the request fields it is keyed by (``by``; empty for a global limit).

    A tuple, so ``name, by = limit`` unpacks it, as JS's ``{ name, by }``
    destructures."""

    name: str
    by: tuple[str, ...]


PolicyLimit.__module__ = "ratekeeper"
