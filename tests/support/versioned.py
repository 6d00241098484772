"""VersionedKeyValueStoreIntegrationTest's processor and data tracker, shared by its translations.

Source: apache/kafka streams/src/test/java/org/apache/kafka/streams/integration/
VersionedKeyValueStoreIntegrationTest.java (``VersionedStoreContentCheckerProcessor``,
``DataTracker``): each record is written to the versioned store (the value ``"delete"`` is a
``delete()`` call, None a tombstone put), then every version written so far is read back with
``get(key, as_of)`` and the latest with ``get(key)``; the processor forwards the number of
failed checks (0 when the store answers like Kafka's).
"""

from __future__ import annotations

from typing import Any

from platform_streams.processor import Processor, Record
from platform_streams.serde import Integer, String
from platform_streams.state import Stores
from platform_streams.state.timestamped import ValueAndTimestamp

STORE_NAME = "versioned-store"
HISTORY_RETENTION = 3_600_000
DELETE_VALUE_KEYWORD = "delete"


class DataTracker:
    """key -> timestamp -> value (None: a tombstone or a delete)."""

    def __init__(self) -> None:
        self.data: dict[int, dict[int, str | None]] = {}

    def add(self, key: int, timestamp: int, value: str | None) -> None:
        self.data.setdefault(key, {})[timestamp] = None if value == DELETE_VALUE_KEYWORD else value


def store_builder() -> Any:
    return Stores.versioned_key_value_store_builder(
        Stores.persistent_versioned_key_value_store(STORE_NAME, HISTORY_RETENTION), Integer(), String()
    )


class VersionedStoreContentCheckerProcessor(Processor):
    def __init__(self, write_to_store: bool, data: DataTracker | None = None) -> None:
        self.write_to_store = write_to_store
        self.data = data if data is not None else DataTracker()

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store(STORE_NAME)

    def process(self, record: Record) -> None:
        if self.write_to_store:
            if record.value == DELETE_VALUE_KEYWORD:
                self.store.delete(record.key, record.timestamp)
            else:
                self.store.put(record.key, record.value, record.timestamp)
            self.data.add(record.key, record.timestamp, record.value)
        self.context.forward(Record(record.key, self.check_store_contents(), record.timestamp))

    def check_store_contents(self) -> int:
        failed = 0
        for key, versions in self.data.data.items():
            max_ts, value_for_max = -1, None
            for ts, expected in versions.items():
                if ts > max_ts:
                    max_ts, value_for_max = ts, expected
                if not _matches(self.store.get(key, ts), expected, ts):
                    failed += 1
            if not _matches(self.store.get(key), value_for_max, max_ts):
                failed += 1
        return failed


def _matches(record: Any, expected: str | None, timestamp: int) -> bool:
    if expected is None:
        return record is None
    return record is not None and record.value == expected and record.timestamp == timestamp


#: shouldPutGetAndDelete / shouldRestore's input: (timestamp offset, [(key, value)...])
INPUT_BATCHES: list[tuple[int, list[tuple[int, str | None]]]] = [
    (0, [(1, "a0"), (2, "b0"), (3, None)]),
    (5, [(1, "a5"), (2, None), (3, "c5")]),
    (2, [(1, "a2"), (2, "b2"), (3, None)]),  # out-of-order data
    (5, [(1, "a5_new"), (2, "b5"), (3, None)]),  # replace existing records
    (7, [(1, DELETE_VALUE_KEYWORD), (2, DELETE_VALUE_KEYWORD), (3, DELETE_VALUE_KEYWORD)]),  # delete
]


def key_value_store_builder() -> Any:
    """The non-versioned store the manual-upgrade cases start from (same name and changelog)."""
    return Stores.key_value_store_builder(Stores.persistent_key_value_store(STORE_NAME), Integer(), String())


class KeyValueStoreContentCheckerProcessor(Processor):
    """``KeyValueStoreContentCheckerProcessor``: puts each record into a plain key-value store,
    then forwards how many keys read back other than last written."""

    def __init__(self) -> None:
        self.data: dict[int, Any] = {}

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store(STORE_NAME)

    def stored(self, record: Record) -> Any:
        """What the record puts into the store."""
        return record.value

    def process(self, record: Record) -> None:
        if record.value == DELETE_VALUE_KEYWORD:
            raise ValueError(f"'delete' is not supported by {type(self).__name__}")
        value = self.stored(record)
        self.store.put(record.key, value)
        self.data[record.key] = value
        failed = sum(1 for key, value in self.data.items() if self.store.get(key) != value)
        self.context.forward(Record(record.key, failed, record.timestamp))


def timestamped_key_value_store_builder() -> Any:
    """The timestamped store the manual-upgrade case starts from (same name and changelog)."""
    return Stores.timestamped_key_value_store_builder(
        Stores.persistent_key_value_store(STORE_NAME), Integer(), String()
    )


class TimestampedStoreContentCheckerProcessor(KeyValueStoreContentCheckerProcessor):
    """``TimestampedStoreContentCheckerProcessor``: the same over a timestamped store, each
    value under its record's timestamp (a None value: a delete, as Kafka's
    ``ValueAndTimestamp.make(null, ts)`` is null)."""

    def stored(self, record: Record) -> Any:
        return None if record.value is None else ValueAndTimestamp(record.value, record.timestamp)
