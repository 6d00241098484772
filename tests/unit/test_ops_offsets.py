"""Offset scenarios of the reset, computed without a broker: targets, clamping, parsers.

The broker-side lookups (log end from fetches, timestamps) are covered by
tests/integration/test_ops_reset.py; here every scenario's arithmetic and every input
format the reset tool accepts is pinned, including the Java tool's clamping rule.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from platform_streams.errors import StreamsConfigError
from platform_streams.ops import (
    OffsetScenario,
    PartitionOffsetChange,
    ResetResult,
    parse_datetime_ms,
    parse_duration,
    parse_reset_plan,
)
from platform_streams.ops.offsets import PartitionBounds, TimeTarget, compute_offset_changes

P0, P1 = ("in", 0), ("in", 1)
# p0: log [2, 10] committed at 5; p1: log [0, 4] without a committed offset.
BOUNDS = {P0: PartitionBounds(earliest=2, end=10, committed=5), P1: PartitionBounds(earliest=0, end=4)}


def targets(scenario: OffsetScenario) -> dict[tuple[str, int], int | None]:
    return {(c.topic, c.partition): c.target for c in compute_offset_changes(scenario, BOUNDS)}


def change(scenario: OffsetScenario, tp: tuple[str, int]) -> PartitionOffsetChange:
    return next(c for c in compute_offset_changes(scenario, BOUNDS) if (c.topic, c.partition) == tp)


def test_to_earliest_and_latest_use_the_log_bounds() -> None:
    assert targets(OffsetScenario.to_earliest()) == {P0: 2, P1: 0}
    assert targets(OffsetScenario.to_latest()) == {P0: 10, P1: 4}
    assert change(OffsetScenario.to_earliest(), P0).current == 5


@pytest.mark.parametrize(
    ("offset", "expected", "clamped"),
    [(3, {P0: 3, P1: 3}, {P0: None, P1: None}), (1, {P0: 2, P1: 1}, {P0: "earliest", P1: None}),
     (7, {P0: 7, P1: 4}, {P0: None, P1: "latest"}), (10, {P0: 10, P1: 4}, {P0: None, P1: "latest"})],
)  # fmt: skip
def test_to_offset_is_clamped_into_each_log(
    offset: int, expected: dict[tuple[str, int], int], clamped: dict[tuple[str, int], str | None]
) -> None:
    changes = compute_offset_changes(OffsetScenario.to_offset(offset), BOUNDS)
    assert {(c.topic, c.partition): c.target for c in changes} == expected
    assert {(c.topic, c.partition): c.clamped for c in changes} == clamped
    for c in changes:
        assert c.requested == offset
        assert (c.note is not None) == (c.clamped is not None)


def test_shift_by_moves_from_the_committed_offset_and_clamps() -> None:
    assert targets(OffsetScenario.shift_by(-2)) == {P0: 3, P1: 0}
    assert targets(OffsetScenario.shift_by(4)) == {P0: 9, P1: 4}
    assert targets(OffsetScenario.shift_by(-10)) == {P0: 2, P1: 0}
    assert change(OffsetScenario.shift_by(-10), P0).requested == -5


def test_shift_by_without_committed_offset_starts_where_the_app_would() -> None:
    by_policy = {
        P1: PartitionBounds(earliest=0, end=4, start_policy="earliest"),
        P0: PartitionBounds(earliest=2, end=10, start_policy="latest"),
    }
    changes = {
        (c.topic, c.partition): c for c in compute_offset_changes(OffsetScenario.shift_by(-3), by_policy)
    }
    assert changes[P1].target == 0 and changes[P1].requested == -3
    assert changes[P0].target == 7 and "latest offset 10" in (changes[P0].note or "")


def test_from_file_sets_listed_partitions_and_leaves_the_others() -> None:
    scenario = OffsetScenario.from_plan({P0: 12, ("other", 0): 1})
    result = compute_offset_changes(scenario, BOUNDS)
    by_tp = {(c.topic, c.partition): c for c in result}
    assert by_tp[P0].target == 10 and by_tp[P0].clamped == "latest"
    assert by_tp[P1].target is None and "left unchanged" in (by_tp[P1].note or "")
    assert ("other", 0) not in by_tp


def test_time_based_scenarios_need_resolved_targets() -> None:
    scenario = OffsetScenario.to_datetime("2024-05-01T12:00:00Z")
    resolved = {P0: TimeTarget(6, "scan"), P1: TimeTarget(4, "list_offsets")}
    result = {(c.topic, c.partition): c for c in compute_offset_changes(scenario, BOUNDS, resolved)}
    assert (result[P0].target, result[P0].method, result[P0].note) == (6, "scan", None)
    assert result[P1].target == 4 and "log end" in (result[P1].note or "")
    with pytest.raises(ValueError, match="time target"):
        compute_offset_changes(scenario, BOUNDS)


def test_scenario_timestamps_and_descriptions() -> None:
    assert OffsetScenario.to_datetime("1970-01-01T00:00:01.500Z").target_timestamp_ms() == 1500
    by_duration = OffsetScenario.by_duration("PT1M")
    assert by_duration.target_timestamp_ms(now_ms=100_000) == 40_000
    assert OffsetScenario.to_earliest().target_timestamp_ms() is None
    assert by_duration.describe() == "by-duration PT1M"
    assert OffsetScenario.shift_by(-3).describe() == "shift-by -3"
    with pytest.raises(StreamsConfigError):
        OffsetScenario.to_offset(-1)
    with pytest.raises(StreamsConfigError):
        OffsetScenario.by_duration("-PT1H")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT1H", timedelta(hours=1)),
        ("PT15M", timedelta(minutes=15)),
        ("P2D", timedelta(days=2)),
        ("P1DT2H3M4.5S", timedelta(days=1, hours=2, minutes=3, seconds=4.5)),
        ("pt0.001s", timedelta(milliseconds=1)),
        ("-PT1S", timedelta(seconds=-1)),
        ("PT-0.5S", timedelta(seconds=-0.5)),
        ("PT1H-30M", timedelta(minutes=30)),
    ],
)
def test_parse_duration_accepts_java_duration_syntax(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "P", "PT", "P1DT", "1H", "PT1H2D", "P1W", "PT1.5H", "P1Y"])
def test_parse_duration_rejects_other_text(text: str) -> None:
    with pytest.raises(StreamsConfigError, match="invalid duration"):
        parse_duration(text)


def test_parse_datetime_with_zone_naive_and_invalid() -> None:
    assert parse_datetime_ms("2024-05-01T12:00:00.000Z") == 1714564800000
    assert parse_datetime_ms("2024-05-01T14:00:00.000+02:00") == 1714564800000
    assert parse_datetime_ms(datetime(2024, 5, 1, 12, tzinfo=UTC)) == 1714564800000
    naive = datetime(2024, 5, 1, 12, 0, 0)
    assert parse_datetime_ms("2024-05-01T12:00:00") == int(naive.astimezone().timestamp() * 1000)
    with pytest.raises(StreamsConfigError, match="invalid date-time"):
        parse_datetime_ms("yesterday")


def test_parse_reset_plan(tmp_path: Path) -> None:
    text = "# topic,partition,offset\nin,0,5\n\n in , 1 , 7 \n"
    assert parse_reset_plan(text) == {("in", 0): 5, ("in", 1): 7}
    path = tmp_path / "plan.csv"
    path.write_text(text)
    assert OffsetScenario.from_file(path).plan == {("in", 0): 5, ("in", 1): 7}
    for bad, message in [
        ("in,0", "expected 'topic,partition,offset'"),
        ("in,x,1", "must be integers"),
        ("in,0,-1", ">= 0"),
        ("in,0,1\nin,0,2", "listed twice"),
        ("# nothing\n", "empty"),
    ]:
        with pytest.raises(StreamsConfigError, match=message):
            parse_reset_plan(bad)
    with pytest.raises(StreamsConfigError, match="cannot read"):
        OffsetScenario.from_file(tmp_path / "missing.csv")


def test_reset_result_is_json_ready_and_summarised() -> None:
    result = ResetResult("reset", "app", dry_run=True, group_state="EMPTY", input_topics=["in"])
    result.offsets = compute_offset_changes(OffsetScenario.to_offset(12), BOUNDS)
    result.warnings.append("careful")
    data = json.loads(json.dumps(result.to_dict()))
    assert data["dry_run"] is True and data["ok"] is True
    assert data["offsets"][0] == {
        "topic": "in", "partition": 0, "current": 5, "target": 10, "earliest": 2, "end": 10,
        "requested": 12, "clamped": "latest", "method": "to_offset",
        "note": "12 is outside the log [2, 10]: clamped to the log end",
    }  # fmt: skip
    text = result.summary()
    assert text.startswith("DRY RUN")
    assert "in-0: 5 -> 10" in text and "in-1: - -> 4" in text and "WARNING: careful" in text
