"""``Position`` and ``PositionBound``: how far a store's content has read its input.

A position maps ``topic -> partition -> offset`` of the last input record a store's state
reflects (Kafka Streams' ``Position``). Queries carry a :class:`PositionBound`; a store
that has not reached the bound answers ``NOT_UP_TO_BOUND`` instead of returning data
older than the caller already saw (read-your-writes across queries and instances).

Here a store's position is its task's: a task processes its records one at a time, so
once the task processed offset ``o`` every store of the task reflects every record up to
``o`` (a record that did not touch a store still counts as seen). That costs nothing on
the hot path -- the task already remembers the last offset it processed per partition --
whereas Kafka Streams updates a position object on every store write.

Positions survive restarts in ``<task dir>/.position`` (:func:`read_position_file` /
:func:`write_position_file`), written after each commit; see
:mod:`platform_streams.query.task_positions` for why the file may lag the store but never
lead it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from platform_streams.state.private_files import write_private

__all__ = [
    "POSITION_FILE_NAME",
    "Position",
    "PositionBound",
    "read_position_file",
    "write_position_file",
]

log = logging.getLogger(__name__)

POSITION_FILE_NAME = ".position"
_VERSION = 1


class Position:
    """Offsets per topic partition (immutable from the outside: methods return copies)."""

    __slots__ = ("_offsets",)

    def __init__(self, offsets: Mapping[str, Mapping[int, int]] | None = None) -> None:
        self._offsets: dict[str, dict[int, int]] = {
            topic: {int(p): int(o) for p, o in parts.items()}
            for topic, parts in (offsets or {}).items()
            if parts
        }

    @classmethod
    def empty_position(cls) -> Position:
        """A position that has seen nothing (dominates only empty positions)."""
        return cls()

    @classmethod
    def from_map(cls, offsets: Mapping[str, Mapping[int, int]]) -> Position:
        return cls(offsets)

    @classmethod
    def from_partition_offsets(cls, offsets: Mapping[tuple[str, int], int]) -> Position:
        """From ``{(topic, partition): offset}`` (the shape the runtime keeps)."""
        grouped: dict[str, dict[int, int]] = {}
        for (topic, partition), offset in offsets.items():
            grouped.setdefault(topic, {})[partition] = offset
        return cls(grouped)

    def with_component(self, topic: str, partition: int, offset: int) -> Position:
        """A copy where ``topic``/``partition`` is at least ``offset``."""
        copy = Position(self._offsets)
        parts = copy._offsets.setdefault(topic, {})
        parts[partition] = max(offset, parts.get(partition, offset))
        return copy

    def merge(self, other: Position) -> Position:
        """The component-wise maximum of both positions."""
        merged = Position(self._offsets)
        for topic, parts in other._offsets.items():
            mine = merged._offsets.setdefault(topic, {})
            for partition, offset in parts.items():
                if offset > mine.get(partition, -1):
                    mine[partition] = offset
        return merged

    def dominates(self, other: Position) -> bool:
        """True if every component of ``other`` is present here with an offset >= it."""
        for topic, parts in other._offsets.items():
            mine = self._offsets.get(topic)
            if mine is None:
                return False
            for partition, offset in parts.items():
                if mine.get(partition, -1) < offset:
                    return False
        return True

    def get_topics(self) -> set[str]:
        return set(self._offsets)

    def get_partition_positions(self, topic: str) -> dict[int, int]:
        return dict(self._offsets.get(topic, {}))

    def is_empty(self) -> bool:
        return not self._offsets

    def to_dict(self) -> dict[str, dict[str, int]]:
        """JSON shape: partitions as strings (JSON object keys)."""
        return {
            t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(self._offsets.items())
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Position:
        """Parse :meth:`to_dict` output; raises ValueError on anything else."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a position is a JSON object of topics, got {type(data).__name__}")
        offsets: dict[str, dict[int, int]] = {}
        for topic, parts in data.items():
            if not isinstance(topic, str) or not isinstance(parts, Mapping):
                raise ValueError(f"bad position entry for {topic!r}")
            try:
                offsets[topic] = {int(p): int(o) for p, o in parts.items()}
            except (TypeError, ValueError):
                raise ValueError(f"bad partition offsets for topic {topic!r}: {parts!r}") from None
        return cls(offsets)

    def __iter__(self) -> Iterator[tuple[str, int, int]]:
        for topic, parts in self._offsets.items():
            for partition, offset in parts.items():
                yield topic, partition, offset

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Position) and self._offsets == other._offsets

    def __hash__(self) -> int:
        return hash(tuple(sorted(self)))

    def __repr__(self) -> str:
        return f"Position({self.to_dict()})"


class PositionBound:
    """The least position a query result must reflect (``unbounded()`` accepts any)."""

    __slots__ = ("_position",)

    def __init__(self, position: Position | None) -> None:
        self._position = position

    @classmethod
    def unbounded(cls) -> PositionBound:
        return cls(None)

    @classmethod
    def at(cls, position: Position) -> PositionBound:
        return cls(position)

    def is_unbounded(self) -> bool:
        return self._position is None

    @property
    def position(self) -> Position:
        if self._position is None:
            raise ValueError("an unbounded PositionBound has no position")
        return self._position

    def satisfied_by(self, position: Position, partition: int | None = None) -> bool:
        """True if ``position`` reaches the bound; with ``partition``, only that partition's
        components count (Kafka Streams' rule: a store partition answers for itself, so a
        bound taken from a whole-store result applies partition by partition)."""
        if self._position is None:
            return True
        if partition is None:
            return position.dominates(self._position)
        for topic, parts in self._position._offsets.items():
            wanted = parts.get(partition)
            if wanted is not None and position._offsets.get(topic, {}).get(partition, -1) < wanted:
                return False
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PositionBound) and self._position == other._position

    def __hash__(self) -> int:
        return hash(self._position)

    def __repr__(self) -> str:
        return (
            "PositionBound.unbounded()" if self._position is None else f"PositionBound.at({self._position!r})"
        )


def read_position_file(task_dir: Path) -> Position:
    """The persisted position of a task (empty when missing or unreadable: never too high)."""
    path = task_dir / POSITION_FILE_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            raise ValueError(f"unknown position file version in {path}")
        return Position.from_dict(data.get("position", {}))
    except FileNotFoundError:
        return Position()
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable position file %s: %s", path, exc)
        return Position()


def write_position_file(task_dir: Path, position: Position) -> None:
    """Replace the task's position file atomically (temp file + rename).

    No fsync: after a machine crash the file may be the previous one or missing, which
    only makes the position lower -- bounded queries then wait, they never read too early.
    """
    data = json.dumps({"version": _VERSION, "position": position.to_dict()})
    write_private(task_dir / POSITION_FILE_NAME, data.encode("utf-8"))
