"""The offset-gap guard's logic (pure: records are stand-ins with an offset).

The broker behaviour it answers is Tansu's: a fetch that returns a later batch while an
earlier one is still being stored (docs/brokers.md); the real-broker side is in
``tests/integration/test_offset_gap_guard.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from platform_streams.runtime.workers.offset_gaps import OffsetGapGuard
from tests.support.manual_clock import ManualClock

TOPIC = "app-by-key-repartition"
TP = (TOPIC, 0)


@dataclass
class Rec:
    at: int

    def offset(self) -> int:
        return self.at


def recs(*offsets: int) -> list[Rec]:
    return [Rec(o) for o in offsets]


@pytest.fixture
def seeks() -> list[tuple[tuple[str, int], int]]:
    return []


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def guard(seeks: list[tuple[tuple[str, int], int]], clock: ManualClock) -> OffsetGapGuard:
    return OffsetGapGuard(frozenset({TOPIC}), lambda tp, o: seeks.append((tp, o)), settle_s=0.5, clock=clock)


def offsets(run: list[Rec]) -> list[int]:
    return [r.at for r in run]


def test_contiguous_runs_pass_whole_and_unguarded_topics_are_not_looked_at(
    guard: OffsetGapGuard, seeks: list
) -> None:
    assert offsets(guard.admit(TP, recs(5, 6, 7))) == [5, 6, 7]  # the first run after an assignment
    assert offsets(guard.admit(TP, recs(8, 9))) == [8, 9]
    assert offsets(guard.admit(("user-input", 0), recs(0, 40))) == [0, 40]
    assert seeks == [] and guard.refetches == 0


def test_a_run_starting_past_the_next_offset_is_dropped_and_the_gap_fetched_again(
    guard: OffsetGapGuard, seeks: list
) -> None:
    guard.admit(TP, recs(454, 455, 456))
    assert guard.admit(TP, recs(460, 461)) == []  # what the soak run lost: 457..459
    assert seeks == [(TP, 457)] and guard.refetches == 1
    assert guard.admit(TP, recs(461, 462)) == []  # a stale run of the same batch: seek again
    assert offsets(guard.admit(TP, recs(457, 458, 459, 460, 461))) == [457, 458, 459, 460, 461]
    assert offsets(guard.admit(TP, recs(462))) == [462]
    assert guard.accepted == 0


def test_a_gap_inside_a_run_keeps_the_records_before_it(guard: OffsetGapGuard, seeks: list) -> None:
    guard.admit(TP, recs(0))
    assert offsets(guard.admit(TP, recs(1, 2, 5, 6))) == [1, 2]
    assert seeks == [(TP, 3)]
    assert offsets(guard.admit(TP, recs(3, 4, 5, 6))) == [3, 4, 5, 6]


def test_a_gap_still_there_after_the_settle_time_is_real(
    guard: OffsetGapGuard, seeks: list, clock: ManualClock
) -> None:
    """Transaction markers an earlier exactly-once run left: the offsets never come. Only a
    fetch made after the settle time counts (a batch after the seek made past it): an
    early answer that arrives late, or a stale run of the same batch, does not."""
    guard.new_batch()
    guard.admit(TP, recs(0, 1))
    assert guard.admit(TP, recs(3, 4)) == []
    clock.now += 0.2
    guard.new_batch()
    assert guard.admit(TP, recs(3, 4)) == []  # still within the settle time: fetch again
    clock.now += 0.4
    guard.new_batch()
    assert guard.admit(TP, recs(3, 4)) == []  # past it, but this fetch may be from before
    assert guard.admit(TP, recs(3, 4)) == []  # a stale run of the same batch decides nothing
    guard.new_batch()
    assert offsets(guard.admit(TP, recs(3, 4, 6))) == [3, 4]  # offset 2 accepted; 5 is a new gap
    assert guard.accepted == 1 and seeks == [(TP, 2)] * 4 + [(TP, 5)]
    clock.now += 0.6
    guard.new_batch()
    assert guard.admit(TP, recs(6, 7)) == []
    guard.new_batch()
    assert offsets(guard.admit(TP, recs(6, 7))) == [6, 7]
    assert guard.accepted == 2


def test_the_first_records_must_start_at_the_position_the_consumer_was_given(
    guard: OffsetGapGuard, seeks: list
) -> None:
    """A fetch from the committed offset can skip too (the soak's loss came right after
    the workers started)."""
    guard.expect({TP: 457, ("user-input", 0): 3, (TOPIC, 1): None})
    assert guard.admit(TP, recs(460)) == []
    assert seeks == [(TP, 457)]
    assert offsets(guard.admit((TOPIC, 1), recs(9, 10))) == [9, 10]  # no committed offset


def test_forget_and_a_position_before_the_next_offset_start_over(guard: OffsetGapGuard, seeks: list) -> None:
    guard.admit(TP, recs(10, 11))
    guard.forget([TP])
    assert offsets(guard.admit(TP, recs(3, 4))) == [3, 4]  # reassigned at the committed offset
    assert offsets(guard.admit(TP, recs(0, 1))) == [0, 1]  # someone else rewound it
    guard.forget()
    assert offsets(guard.admit(TP, recs(50))) == [50]
    assert seeks == []


def test_a_failed_seek_drops_the_records_after_the_gap_and_tries_again(clock: ManualClock) -> None:
    """Dropped records are never committed (the commit is the last queued and processed
    record's); accepting the gap instead would lose the missing ones."""
    calls: list[int] = []

    def failing(tp: tuple[str, int], offset: int) -> None:
        calls.append(offset)
        if len(calls) == 1:
            raise RuntimeError("Local: Erroneous state")

    guard = OffsetGapGuard(frozenset({TOPIC}), failing, clock=clock)
    guard.admit(TP, recs(0))
    assert guard.admit(TP, recs(2, 3)) == []
    assert guard.admit(TP, recs(2, 3)) == []
    assert calls == [1, 1] and guard.refetches == 1 and guard.accepted == 0
