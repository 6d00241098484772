"""A clock for pure unit tests: a callable returning ``now``, which the test moves by hand."""

from __future__ import annotations


class ManualClock:
    """Stands in for ``time.monotonic``; advance it with ``clock.now += seconds``."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
