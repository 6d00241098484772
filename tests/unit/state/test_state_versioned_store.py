"""RocksDBVersionedStoreTest translated: the versioned bytes store on both backends.

Source: apache/kafka streams/src/test/java/org/apache/kafka/streams/state/internals/
RocksDBVersionedStoreTest.java. Each test is the Java test of the same name (snake_case),
run once on RocksDB and once in memory (the store runs over either backend). The Java
``dropped-records-total`` sensor check reads the store's ``expired_records`` counter.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import pytest

from platform_streams.state.stores import storage_backend
from platform_streams.state.versioned_store import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    VersionedBytesStore,
)

from .conftest import FakeContext

STORE_NAME = "myversionedrocks"
HISTORY_RETENTION = 300_000
GRACE_PERIOD = HISTORY_RETENTION
SEGMENT_INTERVAL = HISTORY_RETENTION // 3
BASE_TIMESTAMP = 10
LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1


class DataRecord(NamedTuple):
    key: str
    value: str | None
    timestamp: int


def as_list(*items: object) -> list[object]:
    return list(items)


def _make(context: FakeContext, persistent: bool, history_retention: int) -> VersionedBytesStore:
    store = VersionedBytesStore(
        STORE_NAME, storage_backend(STORE_NAME, persistent), history_retention, SEGMENT_INTERVAL
    )
    store.init(context, store)
    return store


@pytest.fixture
def store(context: FakeContext, persistent: bool) -> Iterator[VersionedBytesStore]:
    store = _make(context, persistent, HISTORY_RETENTION)
    yield store
    store.close()


def _b(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def put_to_store(
    store: VersionedBytesStore, key: str, value: str | None, timestamp: int, expected_valid_to: int
) -> None:
    assert store.put(key.encode(), _b(value), timestamp) == expected_valid_to


class Found(NamedTuple):
    value: str
    timestamp: int
    valid_to: int | None


def _found(found: tuple[bytes, int, int | None] | None) -> Found | None:
    return None if found is None else Found(found[0].decode(), found[1], found[2])


def delete_from_store(store: VersionedBytesStore, key: str, timestamp: int) -> Found | None:
    return _found(store.delete(key.encode(), timestamp))


def verify_get_value_from_store(store: VersionedBytesStore, key: str, value: str, timestamp: int) -> None:
    latest = store.get_latest(key.encode())
    assert latest is not None
    assert (latest[0].decode(), latest[1]) == (value, timestamp)


def verify_get_null_from_store(store: VersionedBytesStore, key: str) -> None:
    assert store.get_latest(key.encode()) is None


def _valid_to(expected: int) -> int | None:
    return None if expected == PUT_RETURN_CODE_VALID_TO_UNDEFINED else expected


def verify_timestamped_get_value_from_store(store: VersionedBytesStore, key: str, *args: object) -> None:
    if len(args) == 4:
        as_of, value, timestamp, valid_to = args
        # type: ignore[arg-type]
        assert _found(store.get_as_of(key.encode(), as_of)) == Found(value, timestamp, _valid_to(valid_to))
        return
    time_from, time_to, order, values, timestamps, valid_tos = args
    # type: ignore[arg-type]
    found = [Found(v.decode(), ts, vt) for v, ts, vt in store.versions(key.encode(), time_from, time_to)]
    if order == "ascending":
        found.reverse()
    # type: ignore[call-overload]
    expected = [Found(v, t, _valid_to(vt)) for v, t, vt in zip(values, timestamps, valid_tos, strict=True)]
    assert found == expected


def verify_timestamped_get_null_from_store(store: VersionedBytesStore, key: str, *args: int) -> None:
    if len(args) == 1:
        assert store.get_as_of(key.encode(), args[0]) is None
    else:
        assert list(store.versions(key.encode(), args[0], args[1])) == []


def verify_expired_record_sensor(store: VersionedBytesStore, expected: int) -> None:
    assert store.expired_records == expected


def restore(store: VersionedBytesStore, records: list[DataRecord]) -> None:
    store.restore_batch([(r.key.encode(), _b(r.value)) for r in records], [r.timestamp for r in records])


def test_should_put_latest(store: VersionedBytesStore) -> None:
    """shouldPutLatest."""
    put_to_store(store, "k", "v", BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "v2", BASE_TIMESTAMP + 1, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    verify_get_value_from_store(store, "k", "v2", BASE_TIMESTAMP + 1)
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP, "v", BASE_TIMESTAMP, BASE_TIMESTAMP + 1
    )
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP + 1, "v2", BASE_TIMESTAMP + 1, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP + 2, "v2", BASE_TIMESTAMP + 1, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )


def test_should_put_null_as_latest(store: VersionedBytesStore) -> None:
    """shouldPutNullAsLatest."""
    put_to_store(store, "k", None, BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, BASE_TIMESTAMP + 1, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    verify_get_null_from_store(store, "k")
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP)
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP + 1)
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP + 2)


def test_should_put_older_with_non_null_latest(store: VersionedBytesStore) -> None:
    """shouldPutOlderWithNonNullLatest."""
    put_to_store(store, "k", "v", BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "v2", BASE_TIMESTAMP - 2, BASE_TIMESTAMP)
    put_to_store(store, "k", "v1", BASE_TIMESTAMP - 1, BASE_TIMESTAMP)
    put_to_store(store, "k", "v4", BASE_TIMESTAMP - 4, BASE_TIMESTAMP - 2)

    verify_get_value_from_store(store, "k", "v", BASE_TIMESTAMP)
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP, "v", BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP - 1, "v1", BASE_TIMESTAMP - 1, BASE_TIMESTAMP
    )
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP - 2, "v2", BASE_TIMESTAMP - 2, BASE_TIMESTAMP - 1
    )
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP - 3, "v4", BASE_TIMESTAMP - 4, BASE_TIMESTAMP - 2
    )


def test_should_put_older_with_null_latest(store: VersionedBytesStore) -> None:
    """shouldPutOlderWithNullLatest."""
    put_to_store(store, "k", None, BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "v2", BASE_TIMESTAMP - 2, BASE_TIMESTAMP)
    put_to_store(store, "k", "v1", BASE_TIMESTAMP - 1, BASE_TIMESTAMP)
    put_to_store(store, "k", "v4", BASE_TIMESTAMP - 4, BASE_TIMESTAMP - 2)

    verify_get_null_from_store(store, "k")
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP)
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP - 1, "v1", BASE_TIMESTAMP - 1, BASE_TIMESTAMP
    )
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP - 2, "v2", BASE_TIMESTAMP - 2, BASE_TIMESTAMP - 1
    )
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP - 3, "v4", BASE_TIMESTAMP - 4, BASE_TIMESTAMP - 2
    )


def test_should_put_older_null_with_non_null_latest(store: VersionedBytesStore) -> None:
    """shouldPutOlderNullWithNonNullLatest."""
    put_to_store(store, "k", "v", BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, BASE_TIMESTAMP - 2, BASE_TIMESTAMP)
    put_to_store(store, "k", None, BASE_TIMESTAMP - 1, BASE_TIMESTAMP)
    put_to_store(store, "k", None, BASE_TIMESTAMP - 4, BASE_TIMESTAMP - 2)
    put_to_store(store, "k", "v5", BASE_TIMESTAMP - 5, BASE_TIMESTAMP - 4)
    put_to_store(store, "k", "v3", BASE_TIMESTAMP - 3, BASE_TIMESTAMP - 2)
    put_to_store(store, "k", None, BASE_TIMESTAMP - 6, BASE_TIMESTAMP - 5)

    verify_get_value_from_store(store, "k", "v", BASE_TIMESTAMP)
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP, "v", BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP - 1)
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP - 2)
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP - 3, "v3", BASE_TIMESTAMP - 3, BASE_TIMESTAMP - 2
    )
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP - 4)
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP - 5, "v5", BASE_TIMESTAMP - 5, BASE_TIMESTAMP - 4
    )
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP - 6)


def test_should_put_older_null_with_null_latest(store: VersionedBytesStore) -> None:
    """shouldPutOlderNullWithNullLatest."""
    put_to_store(store, "k", None, BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, BASE_TIMESTAMP - 2, BASE_TIMESTAMP)
    put_to_store(store, "k", None, BASE_TIMESTAMP - 1, BASE_TIMESTAMP)
    put_to_store(store, "k", None, BASE_TIMESTAMP - 4, BASE_TIMESTAMP - 2)
    put_to_store(store, "k", "v3", BASE_TIMESTAMP - 3, BASE_TIMESTAMP - 2)
    put_to_store(store, "k", "v5", BASE_TIMESTAMP - 5, BASE_TIMESTAMP - 4)
    put_to_store(store, "k", None, BASE_TIMESTAMP - 6, BASE_TIMESTAMP - 5)

    verify_get_null_from_store(store, "k")
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP)
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP - 1)
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP - 2)
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP - 3, "v3", BASE_TIMESTAMP - 3, BASE_TIMESTAMP - 2
    )
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP - 4)
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP - 5, "v5", BASE_TIMESTAMP - 5, BASE_TIMESTAMP - 4
    )
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP - 6)


def test_should_put_repeat_timestamp_as_latest(store: VersionedBytesStore) -> None:
    """shouldPutRepeatTimestampAsLatest."""
    put_to_store(store, "k", "to_be_replaced", BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "b", BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    verify_get_value_from_store(store, "k", "b", BASE_TIMESTAMP)
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP, "b", BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP - 1)

    put_to_store(store, "k", None, BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    verify_get_null_from_store(store, "k")
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP)
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP - 1)

    put_to_store(store, "k", None, BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    verify_get_null_from_store(store, "k")
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP)
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP - 1)

    put_to_store(store, "k", "b", BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    verify_get_value_from_store(store, "k", "b", BASE_TIMESTAMP)
    verify_timestamped_get_value_from_store(
        store, "k", BASE_TIMESTAMP, "b", BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )
    verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP - 1)


def _verify_history_with_repeat_timestamps(
    store: VersionedBytesStore, values: tuple[str, str, str] = ("vp5", "vn5", "vn6")
) -> None:
    """The history both the put and the restore of the repeated-timestamp records leave
    (with ``values`` at SEGMENT_INTERVAL + 5, - 5 and - 6; the empty-vs-null case has "")."""
    at_plus_5, at_minus_5, at_minus_6 = values
    verify_get_null_from_store(store, "k")
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL + 30)
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL + 15)
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL + 6, at_plus_5, SEGMENT_INTERVAL + 5, SEGMENT_INTERVAL + 10
    )
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL + 2)
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL)
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 1)
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL - 5, at_minus_5, SEGMENT_INTERVAL - 5, SEGMENT_INTERVAL - 1
    )
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL - 6, at_minus_6, SEGMENT_INTERVAL - 6, SEGMENT_INTERVAL - 5
    )
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 8)


def test_should_put_repeat_timestamps(store: VersionedBytesStore) -> None:
    """shouldPutRepeatTimestamps."""
    put_to_store(store, "k", "to_be_replaced", SEGMENT_INTERVAL + 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL + 20)
    put_to_store(
        store, "k", "to_be_replaced", SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL + 20
    )  # replace existing None with non-None, with timestamps spanning segments
    put_to_store(
        store, "k", None, SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL + 20
    )  # replace existing non-None with None
    put_to_store(store, "k", "to_be_replaced", SEGMENT_INTERVAL - 1, SEGMENT_INTERVAL + 20)
    put_to_store(store, "k", "to_be_replaced", SEGMENT_INTERVAL + 1, SEGMENT_INTERVAL + 20)
    put_to_store(
        store, "k", None, SEGMENT_INTERVAL - 1, SEGMENT_INTERVAL + 1
    )  # replace existing non-None with None
    put_to_store(
        store, "k", None, SEGMENT_INTERVAL + 1, SEGMENT_INTERVAL + 20
    )  # replace existing non-None with None, with timestamps spanning segments
    put_to_store(store, "k", None, SEGMENT_INTERVAL + 10, SEGMENT_INTERVAL + 20)
    put_to_store(store, "k", None, SEGMENT_INTERVAL + 5, SEGMENT_INTERVAL + 10)
    put_to_store(
        store, "k", "vp5", SEGMENT_INTERVAL + 5, SEGMENT_INTERVAL + 10
    )  # replace existing None with non-None
    put_to_store(store, "k", "to_be_replaced", SEGMENT_INTERVAL - 5, SEGMENT_INTERVAL - 1)
    put_to_store(
        store, "k", "vn5", SEGMENT_INTERVAL - 5, SEGMENT_INTERVAL - 1
    )  # replace existing non-None with non-None
    put_to_store(
        store, "k", None, SEGMENT_INTERVAL + 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )  # replace existing non-None (latest value) with None
    put_to_store(
        store, "k", None, SEGMENT_INTERVAL + 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )  # replace existing None with None
    put_to_store(store, "k", "vn6", SEGMENT_INTERVAL - 6, SEGMENT_INTERVAL - 5)

    _verify_history_with_repeat_timestamps(store)


def _verify_history_in_multiple_segments(store: VersionedBytesStore) -> None:
    """The history both the put and the restore into multiple segments leave."""
    verify_get_null_from_store(store, "k")
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL + 30)
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL + 15, "vp10", SEGMENT_INTERVAL + 10, SEGMENT_INTERVAL + 20
    )
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL + 5)
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL + 2)
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL)
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 1)
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL - 5, "vn10", SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL - 1
    )
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 15)


def test_should_put_into_multiple_segments(store: VersionedBytesStore) -> None:
    """shouldPutIntoMultipleSegments."""
    put_to_store(store, "k", None, SEGMENT_INTERVAL - 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "vn10", SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, SEGMENT_INTERVAL - 1, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, SEGMENT_INTERVAL + 1, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "vp10", SEGMENT_INTERVAL + 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, SEGMENT_INTERVAL + 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    _verify_history_in_multiple_segments(store)


def _verify_history_moved_to_older_segment(store: VersionedBytesStore) -> None:
    """The history both the put and the restore of records moved to an older segment leave."""
    verify_get_value_from_store(store, "k", "vp20", SEGMENT_INTERVAL + 20)
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL + 30, "vp20", SEGMENT_INTERVAL + 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL + 15, "vp10", SEGMENT_INTERVAL + 10, SEGMENT_INTERVAL + 20
    )
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL + 5, "vp1", SEGMENT_INTERVAL + 1, SEGMENT_INTERVAL + 10
    )
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL, "vn1", SEGMENT_INTERVAL - 1, SEGMENT_INTERVAL + 1
    )
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL - 1, "vn1", SEGMENT_INTERVAL - 1, SEGMENT_INTERVAL + 1
    )
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL - 2, "vn2", SEGMENT_INTERVAL - 2, SEGMENT_INTERVAL - 1
    )
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL - 5, "vn10", SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL - 2
    )


def test_should_move_record_to_older_segment_during_put(store: VersionedBytesStore) -> None:
    """shouldMoveRecordToOlderSegmentDuringPut."""
    put_to_store(store, "k", "vp20", SEGMENT_INTERVAL + 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "vp10", SEGMENT_INTERVAL + 10, SEGMENT_INTERVAL + 20)
    put_to_store(store, "k", "vn10", SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL + 10)
    put_to_store(store, "k", "vn2", SEGMENT_INTERVAL - 2, SEGMENT_INTERVAL + 10)
    put_to_store(store, "k", "vn1", SEGMENT_INTERVAL - 1, SEGMENT_INTERVAL + 10)
    put_to_store(store, "k", "vp1", SEGMENT_INTERVAL + 1, SEGMENT_INTERVAL + 10)

    _verify_history_moved_to_older_segment(store)


def test_should_move_record_to_older_segment_with_nulls_during_put(store: VersionedBytesStore) -> None:
    """shouldMoveRecordToOlderSegmentWithNullsDuringPut."""
    put_to_store(store, "k", None, SEGMENT_INTERVAL + 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, SEGMENT_INTERVAL - 1, SEGMENT_INTERVAL + 20)
    put_to_store(store, "k", None, SEGMENT_INTERVAL + 1, SEGMENT_INTERVAL + 20)
    put_to_store(store, "k", None, SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL - 1)
    put_to_store(store, "k", None, SEGMENT_INTERVAL + 10, SEGMENT_INTERVAL + 20)
    put_to_store(store, "k", "vp5", SEGMENT_INTERVAL + 5, SEGMENT_INTERVAL + 10)
    put_to_store(store, "k", "vn5", SEGMENT_INTERVAL - 5, SEGMENT_INTERVAL - 1)
    put_to_store(store, "k", "vn6", SEGMENT_INTERVAL - 6, SEGMENT_INTERVAL - 5)

    _verify_history_with_repeat_timestamps(store)


def test_should_fall_through_to_existing_older_segment_as_latest_during_put(
    store: VersionedBytesStore,
) -> None:
    """shouldFallThroughToExistingOlderSegmentAsLatestDuringPut."""
    put_to_store(store, "k", None, SEGMENT_INTERVAL - 5, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "vn6", SEGMENT_INTERVAL - 6, SEGMENT_INTERVAL - 5)
    put_to_store(store, "k", "vp20", SEGMENT_INTERVAL + 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, SEGMENT_INTERVAL + 10, SEGMENT_INTERVAL + 20)
    put_to_store(store, "k", None, SEGMENT_INTERVAL - 1, SEGMENT_INTERVAL + 10)
    put_to_store(store, "k", "vn2", SEGMENT_INTERVAL - 2, SEGMENT_INTERVAL - 1)

    verify_get_value_from_store(store, "k", "vp20", SEGMENT_INTERVAL + 20)
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL + 30, "vp20", SEGMENT_INTERVAL + 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL + 12)
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL)
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 1)
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL - 2, "vn2", SEGMENT_INTERVAL - 2, SEGMENT_INTERVAL - 1
    )
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 5)
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL - 6, "vn6", SEGMENT_INTERVAL - 6, SEGMENT_INTERVAL - 5
    )


def test_should_put_non_latest_tombstone_into_new_segment_with_valid_to(store: VersionedBytesStore) -> None:
    """shouldPutNonLatestTombstoneIntoNewSegmentWithValidTo."""
    put_to_store(store, "k", "vp30", SEGMENT_INTERVAL + 30, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(
        store, "k", None, SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL + 30
    )  # this put should result in tombstone with validTo=SEGMENT_INTERVAL+30
    put_to_store(store, "k", "vn5", SEGMENT_INTERVAL - 5, SEGMENT_INTERVAL + 30)
    put_to_store(store, "k", "vn1", SEGMENT_INTERVAL - 1, SEGMENT_INTERVAL + 30)
    put_to_store(store, "k", None, SEGMENT_INTERVAL - 2, SEGMENT_INTERVAL - 1)

    verify_get_value_from_store(store, "k", "vp30", SEGMENT_INTERVAL + 30)
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL + 10, "vn1", SEGMENT_INTERVAL - 1, SEGMENT_INTERVAL + 30
    )
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL - 1, "vn1", SEGMENT_INTERVAL - 1, SEGMENT_INTERVAL + 30
    )
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 2)
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL - 5, "vn5", SEGMENT_INTERVAL - 5, SEGMENT_INTERVAL - 2
    )
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 10)


def test_should_delete(store: VersionedBytesStore) -> None:
    """shouldDelete."""
    put_to_store(store, "k", "vp20", SEGMENT_INTERVAL + 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "vp10", SEGMENT_INTERVAL + 10, SEGMENT_INTERVAL + 20)
    put_to_store(store, "k", "vn10", SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL + 10)
    put_to_store(store, "k", "vn2", SEGMENT_INTERVAL - 2, SEGMENT_INTERVAL + 10)

    deleted = delete_from_store(store, "k", SEGMENT_INTERVAL - 5)  # delete from segment
    assert deleted.value == "vn10"
    assert deleted.timestamp == SEGMENT_INTERVAL - 10

    deleted = delete_from_store(store, "k", SEGMENT_INTERVAL + 10)  # delete existing timestamp
    assert deleted.value == "vp10"
    assert deleted.timestamp == SEGMENT_INTERVAL + 10

    deleted = delete_from_store(store, "k", SEGMENT_INTERVAL + 10)  # delete the same timestamp again
    assert deleted is None

    deleted = delete_from_store(store, "k", SEGMENT_INTERVAL + 25)  # delete from latest value store
    assert deleted.value == "vp20"
    assert deleted.timestamp == SEGMENT_INTERVAL + 20


def test_should_not_put_expired(store: VersionedBytesStore) -> None:
    """shouldNotPutExpired."""
    put_to_store(store, "k", "v", HISTORY_RETENTION + 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    # grace period has not elapsed
    put_to_store(store, "k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    verify_get_value_from_store(store, "k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD)

    # grace period has elapsed, so this put does not take place
    put_to_store(store, "k2", "v2", HISTORY_RETENTION + 9 - GRACE_PERIOD, PUT_RETURN_CODE_NOT_PUT)
    verify_get_null_from_store(store, "k2")

    verify_expired_record_sensor(store, 1)


def test_should_not_delete_expired(store: VersionedBytesStore) -> None:
    """shouldNotDeleteExpired."""
    put_to_store(store, "k1", "v1", 1, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k2", "v2", 1, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(
        store, "kother", "vother", HISTORY_RETENTION + 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )  # use separate key to advance stream time

    # grace period has not elapsed
    deleted = delete_from_store(store, "k1", HISTORY_RETENTION + 10 - GRACE_PERIOD)
    assert deleted.value == "v1"
    assert deleted.timestamp == 1
    verify_get_null_from_store(store, "k1")

    # grace period has elapsed, so this delete does not take place
    deleted = delete_from_store(store, "k2", HISTORY_RETENTION + 9 - GRACE_PERIOD)
    assert deleted is None  # return value is None even though record exists because delete did not take place
    verify_get_value_from_store(store, "k2", "v2", 1)

    verify_expired_record_sensor(store, 1)


def test_should_get_from_older_segments(store: VersionedBytesStore) -> None:
    """shouldGetFromOlderSegments."""
    # use a different key to create three different segments
    put_to_store(store, "ko", None, SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "ko", None, 2 * SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "ko", None, 3 * SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    # return None after visiting all segments
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 20)

    # insert data to create non-empty (first) segment
    put_to_store(store, "k", "v", SEGMENT_INTERVAL - 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 30)
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL - 15, "v", SEGMENT_INTERVAL - 20, SEGMENT_INTERVAL - 10
    )
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 5)

    # insert data to create non-empty (third) segment
    put_to_store(store, "k", "v2", 3 * SEGMENT_INTERVAL - 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, 3 * SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    # presence of non-empty later segment does not affect results of getting from earlier segment
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 30)
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL - 15, "v", SEGMENT_INTERVAL - 20, SEGMENT_INTERVAL - 10
    )
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 5)


def test_should_not_get_expired(store: VersionedBytesStore) -> None:
    """shouldNotGetExpired."""
    put_to_store(store, "k", "v_old", 0, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "v", SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    # old record has not yet expired
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL - 11, "v_old", 0, SEGMENT_INTERVAL - 10
    )

    put_to_store(
        store, "ko", "vo", HISTORY_RETENTION + SEGMENT_INTERVAL - 11, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )

    # old record still has not yet expired
    verify_timestamped_get_value_from_store(
        store, "k", SEGMENT_INTERVAL - 11, "v_old", 0, SEGMENT_INTERVAL - 10
    )

    put_to_store(
        store, "ko", "vo2", HISTORY_RETENTION + SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )

    # old record is expired now
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 11)


def test_should_get_expired_if_latest_value(store: VersionedBytesStore) -> None:
    """shouldGetExpiredIfLatestValue."""
    put_to_store(store, "k", "v", 1, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "ko", "vo_old", 1, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "ko", "vo_new", HISTORY_RETENTION + 12, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    # expired get on key where latest satisfies timestamp bound still returns data
    verify_timestamped_get_value_from_store(store, "k", 10, "v", 1, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    # same expired get on key where latest value does not satisfy timestamp bound does not return data
    verify_timestamped_get_null_from_store(store, "ko", 10)


def test_should_distinguish_empty_and_null(store: VersionedBytesStore) -> None:
    """shouldDistinguishEmptyAndNull."""
    put_to_store(store, "k", None, SEGMENT_INTERVAL + 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL + 20)
    put_to_store(store, "k", None, SEGMENT_INTERVAL - 1, SEGMENT_INTERVAL + 20)
    put_to_store(store, "k", None, SEGMENT_INTERVAL + 1, SEGMENT_INTERVAL + 20)
    put_to_store(store, "k", None, SEGMENT_INTERVAL + 10, SEGMENT_INTERVAL + 20)
    # empty string is serialized as an empty byte array, which is different from None (tombstone)
    put_to_store(store, "k", "", SEGMENT_INTERVAL + 5, SEGMENT_INTERVAL + 10)
    put_to_store(store, "k", "", SEGMENT_INTERVAL - 5, SEGMENT_INTERVAL - 1)
    put_to_store(store, "k", "", SEGMENT_INTERVAL - 6, SEGMENT_INTERVAL - 5)

    _verify_history_with_repeat_timestamps(store, ("", "", ""))


def test_should_get_record_versions_from_older_segments(store: VersionedBytesStore) -> None:
    """shouldGetRecordVersionsFromOlderSegments."""
    # use a different key to create three different segments
    put_to_store(store, "ko", None, SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "ko", None, 2 * SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "ko", None, 3 * SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    # return None after visiting all segments (the key does not exist.)
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 20, SEGMENT_INTERVAL)

    # insert data to create non-empty (first) segment
    put_to_store(store, "k", "v1", SEGMENT_INTERVAL - 30, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "v2", SEGMENT_INTERVAL - 25, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, SEGMENT_INTERVAL - 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, SEGMENT_INTERVAL - 15, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "v3", SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "v4", SEGMENT_INTERVAL - 5, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    # return None for the query with a time range prior to inserting values
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 40, SEGMENT_INTERVAL - 35)

    # return values for the query with query time range in which values are still valid and there
    # are multiple tombstones
    verify_timestamped_get_value_from_store(
        store,
        "k",
        SEGMENT_INTERVAL - 30,
        SEGMENT_INTERVAL - 5,
        "any",
        as_list("v4", "v3", "v2", "v1"),
        as_list(SEGMENT_INTERVAL - 5, SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL - 25, SEGMENT_INTERVAL - 30),
        as_list(
            PUT_RETURN_CODE_VALID_TO_UNDEFINED,
            SEGMENT_INTERVAL - 5,
            SEGMENT_INTERVAL - 20,
            SEGMENT_INTERVAL - 25,
        ),
    )

    # return values for the query with time range (MIN, MAX)
    verify_timestamped_get_value_from_store(
        store,
        "k",
        LONG_MIN,
        LONG_MAX,
        "any",
        as_list("v4", "v3", "v2", "v1"),
        as_list(SEGMENT_INTERVAL - 5, SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL - 25, SEGMENT_INTERVAL - 30),
        as_list(
            PUT_RETURN_CODE_VALID_TO_UNDEFINED,
            SEGMENT_INTERVAL - 5,
            SEGMENT_INTERVAL - 20,
            SEGMENT_INTERVAL - 25,
        ),
    )

    # return the latest record (retrieve only from the latestValueStore)
    verify_timestamped_get_value_from_store(
        store,
        "k",
        SEGMENT_INTERVAL - 4,
        SEGMENT_INTERVAL,
        "any",
        as_list("v4"),
        as_list(SEGMENT_INTERVAL - 5),
        as_list(PUT_RETURN_CODE_VALID_TO_UNDEFINED),
    )

    # return one value for the query with time fromTimeStamp = toTimestamp
    verify_timestamped_get_value_from_store(
        store,
        "k",
        SEGMENT_INTERVAL - 5,
        SEGMENT_INTERVAL - 5,
        "any",
        as_list("v4"),
        as_list(SEGMENT_INTERVAL - 5),
        as_list(PUT_RETURN_CODE_VALID_TO_UNDEFINED),
    )

    # return one values for the query with time fromTimeStamp = toTimestamp
    verify_timestamped_get_value_from_store(
        store,
        "k",
        SEGMENT_INTERVAL - 4,
        SEGMENT_INTERVAL - 4,
        "any",
        as_list("v4"),
        as_list(SEGMENT_INTERVAL - 5),
        as_list(PUT_RETURN_CODE_VALID_TO_UNDEFINED),
    )

    # return values before insertion of any tombstone
    verify_timestamped_get_value_from_store(
        store,
        "k",
        SEGMENT_INTERVAL - 31,
        SEGMENT_INTERVAL - 21,
        "any",
        as_list("v2", "v1"),
        as_list(SEGMENT_INTERVAL - 25, SEGMENT_INTERVAL - 30),
        as_list(SEGMENT_INTERVAL - 20, SEGMENT_INTERVAL - 25),
    )

    # return values for the query with time range that covers both tombstones
    verify_timestamped_get_value_from_store(
        store,
        "k",
        SEGMENT_INTERVAL - 24,
        SEGMENT_INTERVAL - 11,
        "any",
        as_list("v2"),
        as_list(SEGMENT_INTERVAL - 25),
        as_list(SEGMENT_INTERVAL - 20),
    )

    # return values for the query with time range that after insertion of tombstones
    verify_timestamped_get_value_from_store(
        store,
        "k",
        SEGMENT_INTERVAL - 11,
        SEGMENT_INTERVAL - 4,
        "any",
        as_list("v4", "v3"),
        as_list(SEGMENT_INTERVAL - 5, SEGMENT_INTERVAL - 10),
        as_list(PUT_RETURN_CODE_VALID_TO_UNDEFINED, SEGMENT_INTERVAL - 5),
    )

    # return all the records that are valid during the query time range but inserted beforehand
    verify_timestamped_get_value_from_store(
        store,
        "k",
        SEGMENT_INTERVAL - 26,
        SEGMENT_INTERVAL - 5,
        "any",
        as_list("v4", "v3", "v2", "v1"),
        as_list(SEGMENT_INTERVAL - 5, SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL - 25, SEGMENT_INTERVAL - 30),
        as_list(
            PUT_RETURN_CODE_VALID_TO_UNDEFINED,
            SEGMENT_INTERVAL - 5,
            SEGMENT_INTERVAL - 20,
            SEGMENT_INTERVAL - 25,
        ),
    )

    # return the valid record that has been inserted at the end of query time range (validFrom =
    # query upper time bound)
    verify_timestamped_get_value_from_store(
        store,
        "k",
        SEGMENT_INTERVAL - 15,
        SEGMENT_INTERVAL - 10,
        "any",
        as_list("v3"),
        as_list(SEGMENT_INTERVAL - 10),
        as_list(SEGMENT_INTERVAL - 5),
    )

    # return None in the time range where no value is valid
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 19, SEGMENT_INTERVAL - 16)

    # insert data to create non-empty (third) segment
    put_to_store(store, "k", "v5", 3 * SEGMENT_INTERVAL - 30, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", None, 3 * SEGMENT_INTERVAL - 20, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    # presence of non-empty earlier segment does not affect results of getting from later segment
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 40, SEGMENT_INTERVAL - 35)
    verify_timestamped_get_value_from_store(
        store,
        "k",
        SEGMENT_INTERVAL - 30,
        SEGMENT_INTERVAL - 26,
        "any",
        as_list("v1"),
        as_list(SEGMENT_INTERVAL - 30),
        as_list(SEGMENT_INTERVAL - 25),
    )
    verify_timestamped_get_null_from_store(store, "k", SEGMENT_INTERVAL - 19, SEGMENT_INTERVAL - 16)


def test_should_get_record_versions_in_ascending_order(store: VersionedBytesStore) -> None:
    """shouldGetRecordVersionsInAscendingOrder."""

    # insert data to create non-empty (first) segment
    put_to_store(store, "k", "v1", SEGMENT_INTERVAL - 30, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "v2", SEGMENT_INTERVAL - 25, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "v3", SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "v4", SEGMENT_INTERVAL - 5, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    # return values in ascending order
    verify_timestamped_get_value_from_store(
        store,
        "k",
        SEGMENT_INTERVAL - 30,
        SEGMENT_INTERVAL - 5,
        "ascending",
        as_list("v1", "v2", "v3", "v4"),
        as_list(SEGMENT_INTERVAL - 30, SEGMENT_INTERVAL - 25, SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL - 5),
        as_list(
            SEGMENT_INTERVAL - 25,
            SEGMENT_INTERVAL - 10,
            SEGMENT_INTERVAL - 5,
            PUT_RETURN_CODE_VALID_TO_UNDEFINED,
        ),
    )


def test_should_get_record_versions_from_multiple_old_segments_in_ascending_order(
    store: VersionedBytesStore,
) -> None:
    """shouldGetRecordVersionsFromMultipleOldSegmentsInAscendingOrder."""

    # insert data to create two non-empty segments
    put_to_store(store, "k", "v1", SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "v2", SEGMENT_INTERVAL - 5, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    put_to_store(store, "k", "v3", 2 * SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "v4", 2 * SEGMENT_INTERVAL - 5, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    # return values from two old segments + latestValueStore in ascending order
    verify_timestamped_get_value_from_store(
        store,
        "k",
        LONG_MIN,
        LONG_MAX,
        "ascending",
        as_list("v1", "v2", "v3", "v4"),
        as_list(
            SEGMENT_INTERVAL - 10, SEGMENT_INTERVAL - 5, 2 * SEGMENT_INTERVAL - 10, 2 * SEGMENT_INTERVAL - 5
        ),
        as_list(
            SEGMENT_INTERVAL - 5,
            2 * SEGMENT_INTERVAL - 10,
            2 * SEGMENT_INTERVAL - 5,
            PUT_RETURN_CODE_VALID_TO_UNDEFINED,
        ),
    )


def test_should_not_get_expired_record_versions(store: VersionedBytesStore) -> None:
    """shouldNotGetExpiredRecordVersions."""
    put_to_store(store, "k", "v_old", 0, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "v", SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    # old record has not yet expired
    verify_timestamped_get_value_from_store(
        store,
        "k",
        0,
        SEGMENT_INTERVAL - 11,
        "any",
        as_list("v_old"),
        as_list(0),
        as_list(SEGMENT_INTERVAL - 10),
    )

    put_to_store(
        store, "ko", "vo", HISTORY_RETENTION + SEGMENT_INTERVAL - 11, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )

    # old record still has not yet expired
    verify_timestamped_get_value_from_store(
        store,
        "k",
        0,
        SEGMENT_INTERVAL - 11,
        "any",
        as_list("v_old"),
        as_list(0),
        as_list(SEGMENT_INTERVAL - 10),
    )

    put_to_store(
        store, "ko", "vo2", HISTORY_RETENTION + SEGMENT_INTERVAL - 10, PUT_RETURN_CODE_VALID_TO_UNDEFINED
    )

    # old record is expired now
    verify_timestamped_get_null_from_store(store, "k", 0, SEGMENT_INTERVAL - 11)


def test_should_get_expired_if_latest_version_value(store: VersionedBytesStore) -> None:
    """shouldGetExpiredIfLatestVersionValue."""
    put_to_store(store, "k", "v", 1, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "ko", "vo_old", 1, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "ko", "vo_new", HISTORY_RETENTION + 12, PUT_RETURN_CODE_VALID_TO_UNDEFINED)

    # expired get on key where latest satisfies timestamp bound still returns data
    verify_timestamped_get_value_from_store(
        store, "k", 0, 10, "any", as_list("v"), as_list(1), as_list(PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    )
    # same expired get on key where latest value does not satisfy timestamp bound does not return data
    verify_timestamped_get_null_from_store(store, "ko", 0, 10)


def test_should_restore(store: VersionedBytesStore) -> None:
    """shouldRestore."""
    records = []
    records.append(DataRecord("k", "vp20", SEGMENT_INTERVAL + 20))
    records.append(DataRecord("k", "vp10", SEGMENT_INTERVAL + 10))
    records.append(DataRecord("k", "vn10", SEGMENT_INTERVAL - 10))
    records.append(DataRecord("k", "vn2", SEGMENT_INTERVAL - 2))
    records.append(DataRecord("k", "vn1", SEGMENT_INTERVAL - 1))
    records.append(DataRecord("k", "vp1", SEGMENT_INTERVAL + 1))

    restore(store, records)

    _verify_history_moved_to_older_segment(store)


def test_should_restore_with_nulls(store: VersionedBytesStore) -> None:
    """shouldRestoreWithNulls."""
    records = []
    records.append(DataRecord("k", None, SEGMENT_INTERVAL + 20))
    records.append(DataRecord("k", None, SEGMENT_INTERVAL - 1))
    records.append(DataRecord("k", None, SEGMENT_INTERVAL + 1))
    records.append(DataRecord("k", None, SEGMENT_INTERVAL - 10))
    records.append(DataRecord("k", None, SEGMENT_INTERVAL + 10))
    records.append(DataRecord("k", "vp5", SEGMENT_INTERVAL + 5))
    records.append(DataRecord("k", "vn5", SEGMENT_INTERVAL - 5))
    records.append(DataRecord("k", "vn6", SEGMENT_INTERVAL - 6))

    restore(store, records)

    _verify_history_with_repeat_timestamps(store)


def test_should_restore_with_nulls_and_repeat_timestamps(store: VersionedBytesStore) -> None:
    """shouldRestoreWithNullsAndRepeatTimestamps."""
    records = []
    records.append(DataRecord("k", "to_be_replaced", SEGMENT_INTERVAL + 20))
    records.append(DataRecord("k", None, SEGMENT_INTERVAL - 10))
    records.append(
        DataRecord("k", "to_be_replaced", SEGMENT_INTERVAL - 10)
    )  # replaces existing None with non-None, with timestamps spanning segments
    records.append(DataRecord("k", None, SEGMENT_INTERVAL - 10))  # replaces existing non-None with None
    records.append(DataRecord("k", "to_be_replaced", SEGMENT_INTERVAL - 1))
    records.append(DataRecord("k", "to_be_replaced", SEGMENT_INTERVAL + 1))
    records.append(DataRecord("k", None, SEGMENT_INTERVAL - 1))  # replaces existing non-None with None
    records.append(
        DataRecord("k", None, SEGMENT_INTERVAL + 1)
    )  # replaces existing non-None with None, with timestamps spanning segments
    records.append(DataRecord("k", None, SEGMENT_INTERVAL + 10))
    records.append(DataRecord("k", None, SEGMENT_INTERVAL + 5))
    records.append(DataRecord("k", "vp5", SEGMENT_INTERVAL + 5))  # replaces existing None with non-None
    records.append(DataRecord("k", "to_be_replaced", SEGMENT_INTERVAL - 5))
    # replaces existing non-None with non-None
    records.append(DataRecord("k", "vn5", SEGMENT_INTERVAL - 5))
    records.append(
        DataRecord("k", None, SEGMENT_INTERVAL + 20)
    )  # replaces existing non-None (latest value) with None
    records.append(DataRecord("k", None, SEGMENT_INTERVAL + 20))  # replaces existing None with None
    records.append(DataRecord("k", "vn6", SEGMENT_INTERVAL - 6))

    restore(store, records)

    _verify_history_with_repeat_timestamps(store)


def test_should_restore_multiple_batches(store: VersionedBytesStore) -> None:
    """shouldRestoreMultipleBatches."""
    records = []
    records.append(DataRecord("k", None, SEGMENT_INTERVAL - 20))
    records.append(DataRecord("k", "vn10", SEGMENT_INTERVAL - 10))
    records.append(DataRecord("k", None, SEGMENT_INTERVAL - 1))

    moreRecords = []
    moreRecords.append(DataRecord("k", None, SEGMENT_INTERVAL + 1))
    moreRecords.append(DataRecord("k", "vp10", SEGMENT_INTERVAL + 10))
    moreRecords.append(DataRecord("k", None, SEGMENT_INTERVAL + 20))

    restore(store, records)
    restore(store, moreRecords)

    _verify_history_in_multiple_segments(store)


def test_should_not_restore_expired(store: VersionedBytesStore) -> None:
    """shouldNotRestoreExpired."""
    records = []
    records.append(DataRecord("k", "v", HISTORY_RETENTION + 10))
    records.append(
        DataRecord("k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD)
    )  # grace period has not elapsed
    records.append(
        DataRecord("k2", "v2", HISTORY_RETENTION + 9 - GRACE_PERIOD)
    )  # grace period has elapsed, so this record should not be restored

    restore(store, records)

    verify_get_value_from_store(store, "k", "v", HISTORY_RETENTION + 10)
    verify_get_value_from_store(store, "k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD)
    verify_get_null_from_store(store, "k2")

    verify_expired_record_sensor(store, 0)


def test_should_restore_even_if_record_would_be_expired_by_end_of_batch(store: VersionedBytesStore) -> None:
    """shouldRestoreEvenIfRecordWouldBeExpiredByEndOfBatch."""
    records = []
    records.append(
        DataRecord("k2", "v2", HISTORY_RETENTION - GRACE_PERIOD)
    )  # this record will be older than grace period by the end of the batch, but should still be restored
    records.append(DataRecord("k", "v", HISTORY_RETENTION + 10))

    restore(store, records)

    verify_get_value_from_store(store, "k2", "v2", HISTORY_RETENTION - GRACE_PERIOD)
    verify_get_value_from_store(store, "k", "v", HISTORY_RETENTION + 10)


def test_should_allow_zero_history_retention(context: FakeContext, persistent: bool) -> None:
    """shouldAllowZeroHistoryRetention."""
    store = _make(context, persistent, 0)
    try:
        put_to_store(store, "k", "v", BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
        verify_get_value_from_store(store, "k", "v", BASE_TIMESTAMP)
        verify_timestamped_get_value_from_store(store, "k", BASE_TIMESTAMP, "v", BASE_TIMESTAMP, -1)
        verify_timestamped_get_value_from_store(store, "k", BASE_TIMESTAMP + 1, "v", BASE_TIMESTAMP, -1)
        put_to_store(store, "k", "updated", BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
        verify_get_value_from_store(store, "k", "updated", BASE_TIMESTAMP)
        verify_timestamped_get_value_from_store(store, "k", BASE_TIMESTAMP, "updated", BASE_TIMESTAMP, -1)
        put_to_store(store, "k", "v2", BASE_TIMESTAMP + 2, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
        verify_get_value_from_store(store, "k", "v2", BASE_TIMESTAMP + 2)
        verify_timestamped_get_value_from_store(store, "k", BASE_TIMESTAMP + 2, "v2", BASE_TIMESTAMP + 2, -1)
        verify_timestamped_get_null_from_store(store, "k", BASE_TIMESTAMP + 1)
        delete_from_store(store, "k", BASE_TIMESTAMP + 3)
        verify_get_null_from_store(store, "k")
        put_to_store(store, "k2", "v", BASE_TIMESTAMP + 2, PUT_RETURN_CODE_NOT_PUT)
        verify_get_null_from_store(store, "k2")
        verify_expired_record_sensor(store, 1)
    finally:
        store.close()


def test_reopened_store_keeps_versions_and_stream_time(context: FakeContext) -> None:
    """Not in Kafka's test: a closed RocksDB store reopens with its versions and its grace."""
    store = _make(context, True, HISTORY_RETENTION)
    put_to_store(store, "k", "v1", BASE_TIMESTAMP, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    put_to_store(store, "k", "v2", SEGMENT_INTERVAL * 4, PUT_RETURN_CODE_VALID_TO_UNDEFINED)
    store.close()
    store = _make(context, True, HISTORY_RETENTION)
    try:
        verify_timestamped_get_value_from_store(
            store, "k", SEGMENT_INTERVAL * 4 - 1, "v1", BASE_TIMESTAMP, SEGMENT_INTERVAL * 4
        )
        put_to_store(store, "k3", "x", BASE_TIMESTAMP, PUT_RETURN_CODE_NOT_PUT)
    finally:
        store.close()
