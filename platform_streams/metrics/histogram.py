"""A histogram accumulator cheap enough for the worker loop.

``prometheus_client.Histogram.observe`` takes a lock and walks every bucket (~2 us); the
worker records a few observations per loop iteration (and, at DEBUG, one per store
operation), always from its own thread. :class:`Histogram` is one ``bisect`` and two
additions (~0.3 us), without a lock: the only writer is the worker thread, and a scrape
reading it concurrently sees counts at most one observation apart. Counts are kept per
bucket (not cumulative) and summed when exported, so the exported ``+Inf`` bucket always
equals the exported count.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

__all__ = ["E2E_LATENCY_BUCKETS_S", "LATENCY_BUCKETS_S", "RECORD_COUNT_BUCKETS", "Histogram"]

#: seconds, 5 us .. 10 s: store operations (microseconds) to commits (up to seconds)
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.000_005, 0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5,
    0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
#: seconds, 1 ms .. 1 h: record age from its timestamp to processing
E2E_LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.001,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)
#: records per poll / per processing pass
RECORD_COUNT_BUCKETS: tuple[float, ...] = (0, 1, 10, 50, 100, 500, 1000, 2500, 5000, 10000)


class Histogram:
    """Bucket counts and a sum of observations (one writer thread)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> tuple[list[tuple[str, int]], float]:
        """``([(le, cumulative count), ..., ("+Inf", count)], sum)`` for the exposition format."""
        counts = list(self.counts)
        total = self.sum
        out: list[tuple[str, int]] = []
        running = 0
        for bound, n in zip(self.bounds, counts, strict=False):
            running += n
            out.append((_le(bound), running))
        running += counts[-1]
        out.append(("+Inf", running))
        return out, total


def _le(bound: float) -> str:
    return repr(float(bound))
