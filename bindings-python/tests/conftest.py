"""Fixtures shared by the tests."""

from __future__ import annotations

import asyncio
import time

import pytest
from limiters import FakeClock


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """A fake clock that time.sleep and asyncio.sleep advance."""
    fake = FakeClock(50.0)
    monkeypatch.setattr(time, "sleep", fake.sleep)
    monkeypatch.setattr(asyncio, "sleep", fake.async_sleep)
    return fake
