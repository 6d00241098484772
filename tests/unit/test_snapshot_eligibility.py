"""Which changelogs ``snapshot truncate`` may cut and which stores ``snapshot create`` snapshots.

Only stores the workers restore from a snapshot (persistent RocksDB key-value stores, as the
run-time config builds them): an in-memory store is always rebuilt from its changelog, so a
cut below a snapshot would leave it with a hole; window/session changelogs are bounded by
their retention and never cut (docs/spark.md, "Changelogs bounded by snapshots").
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dsl import Consumed, Grouped, Materialized, StreamsBuilder, TimeWindows
from platform_streams.errors import StreamsError
from platform_streams.kafka import KafkaAdmin, TopicSpec
from platform_streams.ops.changelog_truncation import logged_stores
from platform_streams.serde import String
from platform_streams.state import Stores
from platform_streams.topology import Topology
from tests.support.kafka import produce

S = String()


def _topology() -> Topology:
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed(key_serde=S, value_serde=S)).group_by_key(
        Grouped(key_serde=S, value_serde=S)
    )
    grouped.count(materialized=Materialized.as_("counts"))  # the run-time default store type
    grouped.count(materialized=Materialized.as_(Stores.in_memory_key_value_store("memory")))
    windowed = grouped.windowed_by(TimeWindows.of_size_and_grace(10_000, 0))
    windowed.count(materialized=Materialized.as_("windows"))
    return builder.build()


def _config(**more: Any) -> StreamsConfig:
    return StreamsConfig(**{"application_id": "app", "bootstrap_servers": "b:9092", **more})


def test_only_persistent_key_value_changelogs_are_truncated() -> None:
    assert set(logged_stores(_topology(), _config())) == {"counts"}
    # the run-time config makes the DSL's default stores in-memory: nothing is restored from snapshots
    assert logged_stores(_topology(), _config(default_dsl_store="in_memory")) == {}
    with pytest.raises(StreamsError, match="memory"):
        logged_stores(_topology(), _config(), ["memory"])


def test_snapshots_are_made_only_of_stores_restored_from_them() -> None:
    pytest.importorskip("pyspark")
    from platform_streams.ops.spark.compaction import snapshot_stores

    assert set(snapshot_stores(_topology(), _config())) == {"counts"}
    assert snapshot_stores(_topology(), _config(default_dsl_store="in_memory")) == {}


@pytest.mark.broker
@pytest.mark.apache_kafka
def test_a_full_compaction_of_a_truncated_key_value_changelog_is_refused(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """After a truncation the key-value changelog no longer holds the keys last written below
    the cut: a full ``snapshot create`` reading it from its start would publish a snapshot
    without them (the planner silently raises a start below the log start to it)."""
    pytest.importorskip("pyspark")
    from platform_streams.ops.spark.compaction import compact_changelog

    if not admin.supports("delete_records"):
        pytest.skip("the broker has no DeleteRecords: its changelogs cannot be truncated")
    app = f"full-{uuid.uuid4().hex[:10]}"
    topic = f"{app}-kv-changelog"
    policy = {"cleanup.policy": "compact,delete", "retention.ms": "-1", "retention.bytes": "-1"}
    admin.create_topics([TopicSpec(topic, 2, config=policy)])
    produce(bootstrap_servers, topic, [("a", "1", 1), ("b", "2", 1), ("a", "3", 1)])
    admin.delete_records({(topic, 1): 2})
    conf = {"bootstrap.servers": bootstrap_servers}
    with pytest.raises(ValueError, match=r"partitions \[1\] .*truncat"):
        compact_changelog(None, conf, app, "kv", str(tmp_path), parquet=False)  # type: ignore[arg-type]
    assert not any(tmp_path.iterdir())  # nothing published


def test_a_key_value_changelog_with_a_deleting_retention_is_read_from_its_start(tmp_path: Path) -> None:
    """A user's ``cleanup.policy=compact,delete`` on a key-value changelog lets retention move
    its start: restores and standbys read it from the log start as Kafka Streams does (not
    from offset 0, which would refuse it as truncated), and it is never truncated."""
    from platform_streams import Topology as PapiTopology
    from platform_streams.kafka import OFFSET_BEGINNING
    from platform_streams.processor.task_id import TaskId
    from platform_streams.runtime.restore.standby import StandbyTask
    from platform_streams.topology.compiler import compile_topology

    topology = PapiTopology()
    topology.add_source("src", "in", key_serde=S, value_serde=S)
    topology.add_processor("p", lambda: None, "src")  # type: ignore[arg-type,return-value]
    retained = {"cleanup.policy": "compact,delete", "retention.ms": "86400000"}
    for name, log_config in (("kept", None), ("expiring", retained)):
        builder = Stores.key_value_store_builder(Stores.persistent_key_value_store(name), S, S)
        topology.add_state_store(builder.with_logging_enabled(log_config), "p")
    config = _config(state_dir=tmp_path)
    with pytest.raises(StreamsError, match="expiring"):
        logged_stores(topology, config, ["expiring"])
    assert set(logged_stores(topology, config)) == {"kept"}
    task = StandbyTask(TaskId(0, 0), compile_topology(topology), config, tmp_path / "0_0")
    try:
        starts = {("app-kept-changelog", 0): 0, ("app-expiring-changelog", 0): OFFSET_BEGINNING}
        assert task.start_offsets == starts
    finally:
        task.close(clean=False)


@pytest.mark.broker
def test_a_live_client_without_the_setting_blocks_truncation(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """The opt-in is every client's: each publishes it in its heartbeat, and a live client
    that does not (an older version, or one run without the setting) blocks the truncation."""
    import json

    from platform_streams.ops.changelog_truncation import read_standby_holders, refuse_unopted
    from platform_streams.runtime.membership.control_channel import control_topic_name

    app = f"optin-{uuid.uuid4().hex[:8]}"
    config = _config(
        application_id=app,
        bootstrap_servers=bootstrap_servers,
        state_dir=tmp_path,
        state_snapshot_location=str(tmp_path),
        state_snapshot_truncate_changelogs=True,
    )
    topic = control_topic_name(app)
    admin.create_topics([TopicSpec(topic, 1, config={"cleanup.policy": "compact"})])

    def member(process: str, **more: Any) -> tuple[str, str, int]:
        data = {"process": process, "active": [], "standby": [], "host": None, **more}
        return f"member/{process}", json.dumps(data), 0

    produce(bootstrap_servers, topic, [member("opted", truncate_changelogs=True)])
    holders = read_standby_holders(config, expiry_ms=60_000)
    refuse_unopted(holders)  # every live client runs with it
    produce(bootstrap_servers, topic, [member("older")])
    holders = read_standby_holders(config, expiry_ms=60_000)
    with pytest.raises(StreamsError, match=r"older.*state.snapshot.truncate.changelogs"):
        refuse_unopted(holders)


@pytest.mark.broker
@pytest.mark.apache_kafka
def test_an_incremental_read_below_the_log_start_is_refused_not_raised_to_it(
    bootstrap_servers: str, admin: KafkaAdmin
) -> None:
    """An incremental snapshot reads from its base snapshot's offset + 1; a truncation after the
    base was chosen would make that offset vanish, and the planner's clamp to the log start
    would silently leave the records between them out of the snapshot."""
    pytest.importorskip("pyspark")
    from platform_streams.ops.spark.kafka_ranges import plan_offset_ranges

    if not admin.supports("delete_records"):
        pytest.skip("the broker has no DeleteRecords: its changelogs cannot be truncated")
    topic = f"ranges-{uuid.uuid4().hex[:10]}"
    policy = {"cleanup.policy": "compact,delete", "retention.ms": "-1", "retention.bytes": "-1"}
    admin.create_topics([TopicSpec(topic, 1, config=policy)])
    produce(bootstrap_servers, topic, [(f"k{i}", "v", 0) for i in range(5)])
    admin.delete_records({(topic, 0): 3})
    conf = {"bootstrap.servers": bootstrap_servers}
    with pytest.raises(ValueError, match=rf"{topic}-0.*offset 1.*starts at 3"):
        plan_offset_ranges(conf, [topic], start={(topic, 0): 1}, strict_start=True)
    # without strict_start (a backfill from old committed offsets) the start is raised, as before
    [whole] = plan_offset_ranges(conf, [topic], start={(topic, 0): 1})
    assert (whole.start, whole.end) == (3, 5)
