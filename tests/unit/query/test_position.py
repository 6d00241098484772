"""Positions, bounds and the persisted position file."""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_streams.query import Position, PositionBound
from platform_streams.query.position import POSITION_FILE_NAME, read_position_file, write_position_file


def test_dominates_is_componentwise() -> None:
    p = Position({"in": {0: 10, 1: 5}})
    assert p.dominates(Position({"in": {0: 10}}))
    assert p.dominates(Position({"in": {0: 3, 1: 5}}))
    assert p.dominates(Position())
    assert not p.dominates(Position({"in": {0: 11}}))
    assert not p.dominates(Position({"in": {2: 0}}))
    assert not p.dominates(Position({"other": {0: 0}}))


def test_merge_takes_the_maximum_and_leaves_operands_unchanged() -> None:
    a = Position({"in": {0: 10}})
    b = Position({"in": {0: 4, 1: 7}, "x": {0: 1}})
    merged = a.merge(b)
    assert merged == Position({"in": {0: 10, 1: 7}, "x": {0: 1}})
    assert a == Position({"in": {0: 10}})
    assert merged.with_component("in", 0, 3) == merged
    assert merged.with_component("in", 0, 30).get_partition_positions("in") == {0: 30, 1: 7}


def test_from_partition_offsets_and_dict_round_trip() -> None:
    p = Position.from_partition_offsets({("in", 0): 3, ("in", 2): 9})
    assert p.to_dict() == {"in": {"0": 3, "2": 9}}
    assert Position.from_dict(p.to_dict()) == p
    with pytest.raises(ValueError):
        Position.from_dict({"in": {"zero": 1}})
    with pytest.raises(ValueError):
        Position.from_dict(["in"])  # type: ignore[arg-type]


def test_bounds() -> None:
    p = Position({"in": {0: 10}})
    assert PositionBound.unbounded().satisfied_by(Position())
    assert PositionBound.at(Position({"in": {0: 10}})).satisfied_by(p)
    assert not PositionBound.at(Position({"in": {0: 11}})).satisfied_by(p)
    with pytest.raises(ValueError):
        _ = PositionBound.unbounded().position
    # per partition: a store partition only answers for its own components
    whole = PositionBound.at(Position({"in": {0: 10, 1: 99}, "rep": {0: 4}}))
    assert not whole.satisfied_by(p)
    assert not whole.satisfied_by(p, partition=0)  # rep-0 is missing
    assert whole.satisfied_by(Position({"in": {0: 10}, "rep": {0: 4}}), partition=0)
    assert not whole.satisfied_by(Position({"in": {0: 10}, "rep": {0: 4}}), partition=1)
    assert whole.satisfied_by(Position(), partition=2)


def test_position_file_round_trip_and_distrust(tmp_path: Path) -> None:
    assert read_position_file(tmp_path).is_empty()
    p = Position({"in": {0: 10, 3: 2}})
    write_position_file(tmp_path, p)
    assert read_position_file(tmp_path) == p
    (tmp_path / POSITION_FILE_NAME).write_text("{not json")
    assert read_position_file(tmp_path).is_empty()
    (tmp_path / POSITION_FILE_NAME).write_text('{"version": 99, "position": {}}')
    assert read_position_file(tmp_path).is_empty()
