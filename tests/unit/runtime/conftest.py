"""Fixtures shared by the runtime unit tests."""

from __future__ import annotations

import pytest

from platform_streams.runtime.membership import rebalance_wait
from tests.support.manual_clock import ManualClock


@pytest.fixture
def rebalance_clock(monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    """A manual clock for ``runtime.membership.rebalance_wait`` (its monotonic time), with the repair's
    random delay at zero."""
    clock = ManualClock()
    monkeypatch.setattr(rebalance_wait.time, "monotonic", clock)
    monkeypatch.setattr(rebalance_wait.random, "random", lambda: 0.0)
    return clock
