"""Changelog compaction on Spark: exactly the latest value per key, as SST snapshots and Parquet."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from platform_streams.kafka import KafkaAdmin, TopicPartition, TopicSpec, create_consumer
from platform_streams.ops.spark.compaction import compact_changelog
from platform_streams.processor.partitioner import default_partition
from platform_streams.serde import String
from tests.integration.support_apps import new_app_id
from tests.spark.support import snapshot_content
from tests.support.kafka import new_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def test_compaction_gives_exactly_the_latest_value_per_key(
    spark: Any, bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    app, store = new_app_id("compact"), "kv"
    topic = f"{app}-{store}-changelog"
    admin.create_topics([TopicSpec(topic, 3)])
    rng = random.Random(6)
    # high bytes check the sort order (RocksDB compares unsigned), short keys the prefix order
    keys = [f"k{i:03d}".encode() for i in range(80)] + [bytes([0x80, i]) for i in range(4)]
    keys += [b"\xff", b"\x00", b"k", b"k0"]
    expected: dict[int, dict[bytes, bytes]] = {0: {}, 1: {}}
    records: list[Any] = []
    for i in range(2_000):
        key = rng.choice(keys)
        partition = default_partition(key, 2)  # partitions 0 and 1 get updates and tombstones
        value = None if rng.random() < 0.2 else f"v{i}".encode()
        records.append((key, value, partition))
        if value is None:
            expected[partition].pop(key, None)
        else:
            expected[partition][key] = value
    # partition 2: every key ends deleted -> an empty snapshot that still covers its offsets
    records += [(b"a", b"1", 2), (b"b", b"2", 2), (b"a", None, 2), (b"b", None, 2)]
    placed = produce(bootstrap_servers, topic, records)
    last = {p: max(o for pp, o in placed if pp == p) for p in range(3)}

    location = tmp_path / "snapshots"
    result = compact_changelog(
        spark,
        {"bootstrap.servers": bootstrap_servers},
        app,
        store,
        location,
        max_offsets_per_task=300,  # several tasks per partition: duplicates meet in the shuffle
        key_serde=String(),
        value_serde=String(),
    )

    assert len(result.ranges) > 3
    manifests = {m.partition: m for m in result.manifests}
    assert sorted(manifests) == [0, 1, 2]
    for p in (0, 1):
        manifest = manifests[p]
        assert (manifest.offset, manifest.record_count) == (last[p], len(expected[p]))
        assert manifest.changelog_topic == topic and manifest.checksum.startswith("sha256:")
        assert snapshot_content(location, manifest, tmp_path / f"p{p}") == sorted(expected[p].items())
    assert (manifests[2].offset, manifests[2].record_count, manifests[2].sst_file) == (last[2], 0, None)

    rows = spark.read.parquet(result.parquet_uri).collect()
    assert {(r["partition"], bytes(r["key"])): bytes(r["value"]) for r in rows} == {
        (p, k): v for p in (0, 1) for k, v in expected[p].items()
    }
    decoded = next(r for r in rows if bytes(r["key"]) == b"k")
    assert decoded["key_decoded"] == '"k"'


def test_empty_changelog_writes_no_snapshot(
    spark: Any, bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    app = new_app_id("empty")
    admin.create_topics([TopicSpec(f"{app}-kv-changelog", 2)])
    result = compact_changelog(spark, {"bootstrap.servers": bootstrap_servers}, app, "kv", tmp_path)
    assert result.manifests == [] and result.ranges == []


def test_snapshot_stops_before_records_written_for_uncommitted_input(
    spark: Any, bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """Changelog records carry the input offset they were written for (``__ps_src``); the
    snapshot covers only the prefix whose input the application committed."""
    app = new_app_id("cut")
    source, changelog = new_topic(admin, 1, "in"), f"{app}-kv-changelog"
    admin.create_topics([TopicSpec(changelog, 1)])
    committer = create_consumer({"bootstrap.servers": bootstrap_servers, "group.id": app})
    try:
        committer.commit(offsets=[TopicPartition(source, 0, 10)], asynchronous=False)  # input < 10 is done
    finally:
        committer.close()
    written_for = [3, 7, 9, 12, 8, 13]  # input offsets; 12 is not committed: the cut is there
    for i, position in enumerate(written_for):
        produce(
            bootstrap_servers,
            changelog,
            [(b"k%d" % (i % 2), b"v%d" % i, 0)],
            headers=[("__ps_src", b"%d" % position)],
        )
    result = compact_changelog(
        spark,
        {"bootstrap.servers": bootstrap_servers},
        app,
        "kv",
        tmp_path,
        source_topics=[source],
        parquet=False,
    )
    [manifest] = result.manifests
    assert result.cuts == {0: 3}
    assert (manifest.offset, manifest.record_count) == (2, 2)
    assert snapshot_content(tmp_path, manifest, tmp_path / "check") == [(b"k0", b"v2"), (b"k1", b"v1")]
