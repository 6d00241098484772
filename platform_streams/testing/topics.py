"""Input and output topics of the TopologyTestDriver (Kafka Streams' TestInputTopic/TestOutputTopic)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from platform_streams.processor.record import Headers
from platform_streams.serde import Serde
from platform_streams.testing.records import DriverRecord, TestRecord

if TYPE_CHECKING:
    from platform_streams.testing.driver import TopologyTestDriver


class TestInputTopic:
    """Pipes records into the driver; timestamps default to the topic's own advancing clock."""

    __test__ = False

    def __init__(
        self,
        driver: TopologyTestDriver,
        name: str,
        key_serde: Serde,
        value_serde: Serde,
        start_timestamp_ms: int,
        auto_advance_ms: int,
    ) -> None:
        self._driver = driver
        self.name = name
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._time = start_timestamp_ms
        self._auto_advance = auto_advance_ms

    def pipe_input(
        self, key: Any = None, value: Any = None, timestamp_ms: int | None = None, headers: Headers = None
    ) -> None:
        """Pipe one record (Kafka Streams' ``pipeInput(key, value, timestamp)``)."""
        if timestamp_ms is None:
            timestamp_ms = self._time
            self._time += self._auto_advance
        self._driver.pipe_raw(
            self.name,
            self._key_serde.serialize(key),
            self._value_serde.serialize(value),
            timestamp_ms,
            headers,
        )

    def pipe_record(self, record: TestRecord) -> None:
        self.pipe_input(record.key, record.value, record.timestamp, record.headers or None)

    def pipe_value_list(self, values: Iterable[Any]) -> None:
        for value in values:
            self.pipe_input(None, value)

    def pipe_key_value_list(self, pairs: Iterable[tuple[Any, Any]]) -> None:
        for key, value in pairs:
            self.pipe_input(key, value)

    def pipe_record_list(self, records: Iterable[TestRecord]) -> None:
        for record in records:
            self.pipe_record(record)

    def advance_time(self, ms: int) -> None:
        """Move this topic's default timestamp forward."""
        self._time += ms


class TestOutputTopic:
    """Reads (and consumes) what the topology wrote to a topic."""

    __test__ = False

    def __init__(self, queue: deque[DriverRecord], name: str, key_serde: Serde, value_serde: Serde) -> None:
        self._queue = queue
        self.name = name
        self._key_serde = key_serde
        self._value_serde = value_serde

    def read_record(self) -> TestRecord:
        if not self._queue:
            raise IndexError(f"no more records in output topic {self.name!r}")
        raw = self._queue.popleft()
        return TestRecord(
            self._key_serde.deserialize(raw.key()),
            self._value_serde.deserialize(raw.value()),
            raw.timestamp()[1],
            list(raw.headers() or []),
        )

    def read_value(self) -> Any:
        return self.read_record().value

    def read_key_value(self) -> tuple[Any, Any]:
        return self.read_record().key_value()

    def read_records_to_list(self) -> list[TestRecord]:
        return [self.read_record() for _ in range(len(self._queue))]

    def read_values_to_list(self) -> list[Any]:
        return [r.value for r in self.read_records_to_list()]

    def read_key_values_to_list(self) -> list[tuple[Any, Any]]:
        return [r.key_value() for r in self.read_records_to_list()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        """Latest value per key; a None value (tombstone) removes the key, as Kafka Streams does."""
        result: dict[Any, Any] = {}
        for key, value in self.read_key_values_to_list():
            if value is None:
                result.pop(key, None)
            else:
                result[key] = value
        return result

    def get_queue_size(self) -> int:
        return len(self._queue)

    def is_empty(self) -> bool:
        return not self._queue
