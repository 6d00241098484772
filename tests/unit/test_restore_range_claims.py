"""Changelog ranges written for committed input (platform_streams/runtime/restore/restore_ranges.py).

No Java counterpart: Kafka Streams has no source-position filter to skip (its at-least-once
restore applies every changelog record). These pin the claims a range makes and when a
restore may trust one; the restores themselves run against the broker in
tests/integration/test_stateful_counts.py and tests/integration/test_eos_crash.py.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from platform_streams.processor.source_position import SOURCE_HEADER
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.restore import restore_ranges
from platform_streams.runtime.restore.changelog_filter import CommittedInputFilter
from platform_streams.runtime.restore.restore_ranges import (
    RANGE_KEY_PREFIX,
    ChangelogRange,
    RestoreRanges,
    TaskRanges,
    Written,
)

IN = ("in", 0)
CL = ("app-counts-changelog", 0)
TASK = TaskId(0, 0)


@dataclass
class _Task:
    task_id: TaskId = TASK
    partitions: list[tuple[str, int]] = field(default_factory=lambda: [IN])
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    changelog_partitions: frozenset[tuple[str, int]] = frozenset({CL})


def _restored_with(ranges: RestoreRanges, committed: int = 50, end: int = 30) -> None:
    """The control channel read a range of task 0_0: input committed to 50, changelog [0, end)."""
    record = TaskRanges({IN: committed}, {CL: ChangelogRange(0, end, False)})
    ranges.on_record(RANGE_KEY_PREFIX + "0_0", record.to_json())


def _published() -> tuple[RestoreRanges, list[tuple[str, dict[str, Any]]]]:
    sent: list[tuple[str, dict[str, Any]]] = []
    return RestoreRanges(publish=lambda key, value: sent.append((key, value))), sent


def test_a_range_round_trips_through_its_control_record() -> None:
    ranges = TaskRanges({IN: 120}, {CL: ChangelogRange(0, 57, True)})
    assert TaskRanges.from_json(ranges.to_json()) == ranges
    assert TaskRanges.from_json({"inputs": "garbage"}) is None


def test_a_range_is_trusted_only_with_the_same_inputs_committed_at_least_as_far() -> None:
    ranges = TaskRanges({IN: 120}, {CL: ChangelogRange(0, 57, False)})
    assert ranges.trusted([IN], {IN: 120})
    assert ranges.trusted([IN], {IN: 500})
    assert not ranges.trusted([IN], {IN: 119}), "offsets reset backwards: the claim no longer holds"
    assert not ranges.trusted([IN], {IN: None})
    assert not ranges.trusted([IN, ("other", 0)], {IN: 120, ("other", 0): 9}), "the task's inputs changed"


def test_a_new_instance_continues_a_range_only_when_nothing_lies_between() -> None:
    at_least_once = ChangelogRange(10, 57, False)
    assert at_least_once.continued_by(57)
    assert not at_least_once.continued_by(58), "one record between: another instance's uncommitted write"
    exactly_once = ChangelogRange(10, 57, True)
    assert exactly_once.continued_by(58), "the offset between is the last transaction's commit marker"
    assert not exactly_once.continued_by(59)
    assert not exactly_once.continued_by(50), "a first write before the end: another log"


def test_an_instance_publishes_its_acknowledged_writes_after_a_commit() -> None:
    ranges, sent = _published()
    assert ranges.for_restore(TASK, [IN], {IN: 40}) == {}  # nothing published before
    task = _Task(committed={IN: 90})
    ranges.after_commit([task], Written({CL: 57}, {CL: 80}, False))
    assert sent == [
        (RANGE_KEY_PREFIX + "0_0", {"inputs": [["in", 0, 90]], "changelogs": [[*CL, 57, 81, False]]})
    ]
    ranges.after_commit([task], Written({CL: 57}, {CL: 85}, False))
    assert len(sent) == 1, "at most every PUBLISH_EVERY_S a task"
    ranges.after_commit([task], Written({CL: 57}, {CL: 85}, False), force=True)
    assert sent[-1][1]["changelogs"] == [[*CL, 57, 86, False]]


def test_an_instance_without_writes_keeps_what_it_restored_with_under_its_own_commit() -> None:
    ranges, sent = _published()
    ranges.on_record(
        RANGE_KEY_PREFIX + "0_0", TaskRanges({IN: 50}, {CL: ChangelogRange(0, 30, False)}).to_json()
    )
    assert ranges.for_restore(TASK, [IN], {IN: 50}) == {CL: ChangelogRange(0, 30, False)}
    ranges.after_commit(
        [_Task()], Written({}, {}, False)
    )  # no input processed: the committed offset at its start
    assert sent[-1][1] == {"inputs": [["in", 0, 50]], "changelogs": [[*CL, 0, 30, False]]}


def test_a_continued_range_grows_and_a_broken_chain_starts_at_the_first_write() -> None:
    ranges, sent = _published()
    ranges.on_record(
        RANGE_KEY_PREFIX + "0_0", TaskRanges({IN: 50}, {CL: ChangelogRange(0, 30, False)}).to_json()
    )
    ranges.for_restore(TASK, [IN], {IN: 50})
    ranges.after_commit([_Task(committed={IN: 70})], Written({CL: 30}, {CL: 44}, False))
    assert sent[-1][1]["changelogs"] == [[*CL, 0, 45, False]]
    ranges.for_restore(TASK, [IN], {IN: 70})  # a new instance: records 45..47 lie before its first write
    ranges.after_commit([_Task(committed={IN: 80})], Written({CL: 48}, {CL: 52}, False))
    assert sent[-1][1]["changelogs"] == [[*CL, 48, 53, False]]


def test_an_untrusted_range_is_neither_applied_nor_continued() -> None:
    ranges, sent = _published()
    ranges.on_record(
        RANGE_KEY_PREFIX + "0_0", TaskRanges({IN: 50}, {CL: ChangelogRange(0, 30, False)}).to_json()
    )
    assert ranges.for_restore(TASK, [IN], {IN: 20}) == {}
    ranges.after_commit([_Task(committed={IN: 25})], Written({CL: 30}, {CL: 31}, False))
    assert sent[-1][1]["changelogs"] == [[*CL, 30, 32, False]]


def test_nothing_is_claimed_for_an_input_partition_never_committed() -> None:
    ranges, sent = _published()
    ranges.for_restore(TASK, [IN], {IN: None})
    ranges.after_commit([_Task()], Written({CL: 0}, {CL: 9}, False))
    assert sent == []


def test_a_tombstone_or_a_foreign_record_forgets_the_range() -> None:
    ranges, _ = _published()
    ranges.on_record(
        RANGE_KEY_PREFIX + "0_0", TaskRanges({IN: 50}, {CL: ChangelogRange(0, 30, False)}).to_json()
    )
    ranges.on_record(RANGE_KEY_PREFIX + "0_0", None)
    assert ranges.for_restore(TASK, [IN], {IN: 50}) == {}
    ranges.on_record(RANGE_KEY_PREFIX + "not-a-task", {"inputs": []})  # ignored, no error


@dataclass
class _Msg:
    offset_: int
    header: bytes | None

    def offset(self) -> int:
        return self.offset_

    def topic(self) -> str:
        return CL[0]

    def partition(self) -> int:
        return CL[1]

    def headers(self) -> list[tuple[str, bytes]] | None:
        return None if self.header is None else [(SOURCE_HEADER, self.header)]


def test_the_filter_applies_a_trusted_range_unread_and_judges_the_rest() -> None:
    record_filter = CommittedInputFilter([IN], {IN: 100})
    record_filter.trust({CL: (10, 20)})
    select = record_filter.batch_for_partition(*CL)
    inside = [_Msg(o, b"999") for o in range(10, 20)]  # headers a judge would skip: never read
    assert select(inside) == inside
    crossing = [_Msg(18, b"999"), _Msg(19, b"999"), _Msg(20, b"5"), _Msg(21, b"100")]
    assert [m.offset() for m in select(crossing)] == [18, 19, 20]
    after = [_Msg(30, b"150"), _Msg(31, b"99")]
    assert [m.offset() for m in select(after)] == [31]
    assert record_filter.trusted_records == 12
    assert record_filter.skipped == 2
    assert select([]) == []


def test_a_thread_closing_its_instance_keeps_the_one_another_thread_began() -> None:
    ranges, sent = _published()
    ranges.for_restore(TASK, [IN], {IN: 50})  # this thread's instance
    other = threading.Thread(target=lambda: ranges.closed(TASK, clean=True))
    other.start()
    other.join()
    ranges.after_commit([_Task(committed={IN: 60})], Written({CL: 0}, {CL: 9}, False))
    assert sent[-1][1]["changelogs"] == [[*CL, 0, 10, False]]
    ranges.closed(TASK, clean=True)
    ranges.after_commit([_Task(committed={IN: 70})], Written({CL: 0}, {CL: 12}, False), force=True)
    assert len(sent) == 1, "a closed instance publishes nothing"


def test_after_a_dirty_close_on_another_thread_an_instance_claims_none_of_its_writes() -> None:
    """The closed instance's records may still land (in flight in the other thread's producer)."""
    ranges, sent = _published()
    _restored_with(ranges)
    closer = threading.Thread(target=lambda: ranges.closed(TASK, clean=False))
    closer.start()
    closer.join()
    ranges.for_restore(TASK, [IN], {IN: 50})
    ranges.after_commit([_Task(committed={IN: 60})], Written({CL: 30}, {CL: 39}, False))
    assert sent[-1][1]["changelogs"] == [[*CL, 0, 30, False]], "only what it restored with"
    ranges.closed(TASK, clean=False)  # the same thread: its next instance waited for its records
    ranges.for_restore(TASK, [IN], {IN: 60})
    ranges.after_commit([_Task(committed={IN: 70})], Written({CL: 45}, {CL: 49}, False))
    assert sent[-1][1]["changelogs"] == [[*CL, 45, 50, False]]


def test_a_source_topic_reused_as_changelog_gets_no_range() -> None:
    """Sinks write it, not the store; its restore judges offsets against the committed one."""
    ranges, sent = _published()
    ranges.for_restore(TASK, [IN], {IN: 50})
    task = _Task(committed={IN: 60}, changelog_partitions=frozenset({CL, IN}))
    ranges.after_commit([task], Written({CL: 0, IN: 55}, {CL: 9, IN: 80}, False))
    assert sent[-1][1]["changelogs"] == [[*CL, 0, 10, False]]
    record_filter = CommittedInputFilter([IN], {IN: 60})
    record_filter.trust({IN: (55, 81), CL: (0, 10)})
    assert record_filter.trusted == {CL: (0, 10)}


def test_a_restore_waits_once_for_a_control_channel_that_never_catches_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(restore_ranges, "CATCH_UP_S", 0.3)
    ranges = RestoreRanges(publish=lambda key, value: None, caught_up=lambda: False)
    started = time.monotonic()
    ranges.for_restore(TASK, [IN], {IN: 50})
    ranges.for_restore(TaskId(0, 1), [("in", 1)], {("in", 1): 50})
    assert time.monotonic() - started < 0.5, "the second restore did not wait again"
