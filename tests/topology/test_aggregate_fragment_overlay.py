"""A fused aggregation's miss read inside a batch, where RocksDB's pending overlay holds what
the cache flushed since the last commit (state/wrappers/aggregate_fragment.py reads
``RocksDBBytesMap.pending`` then the column family, as ``RocksDBBytesMap.get`` does).

The TopologyTestDriver commits after every record, so its overlay is always empty; here one
task processes hundreds of records per call with a cache of a few entries, no commit
between: evicted entries land in the overlay -- values, and deletes (None) of aggregates
that turned None -- and their keys come back within the batch. The fused run (the fragment
in line) must send and store exactly what the step alone does (Kafka Streams'
``KStreamAggregate``: a key's aggregate after a delete starts again from the initializer,
``KStreamAggregateProcessorTest`` / ``KTableAggregateTest`` in
streams/src/test/java/org/apache/kafka/streams/kstream/internals/).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import platform_streams.state.timestamped_kv_store as timestamped_kv_store
from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Consumed, Grouped, Materialized, Produced
from platform_streams.serde import Bytes, Long, String
from platform_streams.state.rocksdb import RocksDBBytesMap
from platform_streams.testing.records import DriverRecord
from tests.support.tasks import build_tasks

B, S = Bytes(), String()


def _topology() -> Topology:
    def add(key: bytes, value: str, aggregate: int) -> int | None:
        return None if value == "x" else aggregate + len(value)

    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed(key_serde=B, value_serde=S))
        .group_by_key(Grouped(key_serde=B, value_serde=S))
        .aggregate(lambda: 100, add, materialized=Materialized.as_("sums").with_value_serde(Long()))
        .to_stream()
        .to("out", Produced(key_serde=B, value_serde=Long()))
    )
    return builder.build()


def _cycling() -> list[DriverRecord]:
    """23 keys in turn, every eleventh record deleting its key's aggregate (value ``x``)."""
    return [
        DriverRecord(
            "in", 0, i, b"k%d" % (i * 7 % 23), b"x" if i % 11 == 5 else b"ab"[: 1 + i % 2], 1_000 + i, None
        )
        for i in range(600)
    ]


def _deleted_then_back() -> list[DriverRecord]:
    """``a`` gets an aggregate (committed with the first batch), then in the second batch its
    delete is evicted to the overlay (None over the committed value) and ``a`` comes back:
    its aggregate starts again from the initializer, not from the committed value."""
    fillers = [b"f%d" % i for i in range(12)]
    first = ([b"a", *fillers] * 24)[:300]
    second = ([b"a", *fillers] * 24)[:300]
    keys = first + second
    values = [b"ab"] * 300 + [b"x" if i % 26 == 0 else b"a" for i in range(300)]
    return [
        DriverRecord("in", 0, i, k, v, 1_000 + i, None)
        for i, (k, v) in enumerate(zip(keys, values, strict=True))
    ]


def _run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, in_line: bool, records: list[DriverRecord]
) -> tuple[list[Any], dict[Any, Any]]:
    if not in_line:  # the step alone (direct_aggregate), as before the fragment
        monkeypatch.setattr(timestamped_kv_store, "aggregate_fragment", lambda *args: None)
    (task,), collector = build_tasks(_topology(), tmp_path, statestore_cache_max_bytes=1_500)
    assert ("put_clean" in task.graph.batches["in"].__ps_source__) is in_line  # type: ignore[attr-defined]
    overlays: list[dict[bytes, bytes | None]] = []
    for start in range(0, len(records), 300):  # two batches of 300, a commit after each
        task.add_records(("in", 0), records[start : start + 300])
        assert task.process(300) == 300
        layer = task.context.stores["sums"]
        while not hasattr(layer, "_map"):
            layer = layer.wrapped
        bytes_map = layer._map
        assert type(bytes_map) is RocksDBBytesMap
        overlays.append(dict(bytes_map.pending))
        task.flush_caches()
        task.flush_stores()
    # the overlay held both kinds while the batches read it
    values = [value for overlay in overlays for value in overlay.values()]
    assert None in values and any(value is not None for value in values)
    table = dict(task.context.stores["sums"].all())
    task.close()
    return collector.sent, table


@pytest.mark.parametrize("records", [_cycling, _deleted_then_back])
def test_a_miss_reads_the_overlay_as_the_step_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, records: Any
) -> None:
    step_sent, step_table = _run(tmp_path / "step", monkeypatch, in_line=False, records=records())
    monkeypatch.undo()
    fused_sent, fused_table = _run(tmp_path / "fused", monkeypatch, in_line=True, records=records())
    assert fused_sent == step_sent and fused_table == step_table
    assert len(step_sent) > 300 and step_table
    assert any(topic.endswith("-changelog") and value is None for topic, _k, value, *_ in step_sent)
