"""Records of the TopologyTestDriver: raw records shaped like confluent-kafka's Message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from platform_streams.processor.serialized_record import SerializedRecord


class DriverRecord(SerializedRecord):
    """A record piped into (or produced by) the TopologyTestDriver: a :class:`SerializedRecord`,
    so tasks process driver input with exactly the code they run in production."""

    __slots__ = ()


@dataclass
class TestRecord:
    """A deserialized record read from (or piped into) a test topic."""

    __test__ = False  # not a pytest test class

    key: Any
    value: Any
    timestamp: int | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)

    def key_value(self) -> tuple[Any, Any]:
        return (self.key, self.value)
