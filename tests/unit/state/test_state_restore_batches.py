"""How ``ChangelogReader`` cuts what it reads into restore batches (pure logic, no broker).

Kafka Streams restores in batches of the records it keeps (``StoreChangelogReader`` ->
``ProcessorStateManager.restore``), and the restore listener and the remaining-records
metric step by them: whatever the consumed batches look like, every applied batch but the
last holds exactly ``batch_size`` kept records and ends at the offset of its last record;
skipped records (the filter, records without key) still move the store's position.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from platform_streams.processor.serialized_record import SerializedRecord
from platform_streams.state import restore_read_ahead
from platform_streams.state.manager import FROM_BEGINNING, ChangelogPartition
from platform_streams.state.restore import ChangelogReader


def _msg(offset: int, key: bytes | None, value: bytes | None) -> SerializedRecord:
    return SerializedRecord("c", 0, offset, key, value, 1000 + offset)


class _Manager:
    def __init__(self, *, timestamps: bool = False) -> None:
        self.timestamps = timestamps
        self.applied: list[tuple[list[tuple[bytes, bytes | None]], int | None, list[int] | None]] = []

    def changelog_offsets_to_restore(self) -> list[ChangelogPartition]:
        return [ChangelogPartition("s", "app-s-changelog", 0, FROM_BEGINNING)]

    def restores_with_timestamps(self, store: str) -> bool:
        return self.timestamps

    def get_store(self, name: str) -> Any:
        return None  # no store: read from the log's start

    def restore(
        self, store: str, batch: list[tuple[bytes, bytes | None]], *, last_offset: int | None, timestamps: Any
    ) -> None:
        self.applied.append((list(batch), last_offset, None if timestamps is None else list(timestamps)))


def _consumed(monkeypatch: pytest.MonkeyPatch, batches: list[list[SerializedRecord]]) -> None:
    class _Reader:  # stands in for kafka.PartitionReader: what one partition's consumer returns
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def batches(self, **kwargs: Any) -> Iterator[list[SerializedRecord]]:
            yield from batches

        def close(self) -> None:
            pass

    monkeypatch.setattr(restore_read_ahead, "PartitionReader", _Reader)  # where the restore opens it


def test_batches_hold_exactly_batch_size_kept_records(monkeypatch: pytest.MonkeyPatch) -> None:
    # offsets 0..11 in uneven consumed batches; 3 and 7 filtered out, 5 has no key
    msgs = [_msg(o, None if o == 5 else b"k%d" % o, b"v%d" % o) for o in range(12)]
    _consumed(monkeypatch, [msgs[0:2], msgs[2:9], msgs[9:10], msgs[10:12]])
    manager = _Manager(timestamps=True)
    reader = ChangelogReader({}, batch_size=3, record_filter=lambda m: m.offset() not in (3, 7))
    assert reader.restore(manager) == {"s": 9}  # type: ignore[arg-type]
    keys = [[k for k, _ in batch] for batch, _, _ in manager.applied]
    assert keys == [[b"k0", b"k1", b"k2"], [b"k4", b"k6", b"k8"], [b"k9", b"k10", b"k11"], []]
    # each full batch ends at its last kept record; the final call moves to the last offset read
    assert [last for _, last, _ in manager.applied] == [2, 8, 11, 11]
    assert manager.applied[1][2] == [1004, 1006, 1008]  # timestamps stay parallel to records


def test_remainder_is_applied_at_the_end_with_the_last_offset_read(monkeypatch: pytest.MonkeyPatch) -> None:
    msgs = [_msg(o, b"k%d" % o, None if o == 1 else b"v") for o in range(5)]
    _consumed(monkeypatch, [msgs])
    manager = _Manager()
    reader = ChangelogReader({}, batch_size=3, record_filter=lambda m: m.offset() != 4)
    assert reader.restore(manager) == {"s": 4}  # type: ignore[arg-type]
    assert manager.applied == [
        ([(b"k0", b"v"), (b"k1", None), (b"k2", b"v")], 2, None),
        ([(b"k3", b"v")], 4, None),  # the skipped record 4 still moves the position
    ]


class _GcWatchingManager(_Manager):
    """Notes whether the cyclic collector was on while each batch was applied."""

    def __init__(self) -> None:
        super().__init__()
        self.collector_on: list[bool] = []

    def restore(
        self, store: str, batch: list[tuple[bytes, bytes | None]], *, last_offset: int | None, timestamps: Any
    ) -> None:
        self.collector_on.append(gc.isenabled())
        super().restore(store, batch, last_offset=last_offset, timestamps=timestamps)


@pytest.mark.parametrize("enabled_before", [True, False])
def test_the_collector_is_paused_while_a_partition_is_replayed(
    monkeypatch: pytest.MonkeyPatch, enabled_before: bool
) -> None:
    # every consumed record is a GC-tracked object living for one batch: the automatic
    # collector's young collections cost a quarter of a restore's CPU, so the full batches of a
    # replay are applied with it paused, and the setting the restore found is restored
    msgs = [_msg(o, b"k%d" % o, b"v") for o in range(7)]
    _consumed(monkeypatch, [msgs[0:4], msgs[4:7]])
    manager = _GcWatchingManager()
    was = gc.isenabled()
    (gc.enable if enabled_before else gc.disable)()
    try:
        assert ChangelogReader({}, batch_size=3).restore(manager) == {"s": 7}  # type: ignore[arg-type]
        assert manager.collector_on[:2] == [False, False]  # the two full batches
        assert gc.isenabled() is enabled_before
    finally:
        (gc.enable if was else gc.disable)()
