"""What the embedded Tansu broker cannot show, proven on Apache Kafka itself.

The broker notes (README "Two brokers") list what is degraded on Tansu; each test here
runs the real feature on Apache Kafka (``kafka_bootstrap_servers``: one KRaft node from
Maven Central's jars) and, where the platform detects the feature, checks the Tansu side
degrades instead of breaking:

* capabilities are probed, not named: every probe says yes on Kafka and no on Tansu;
* log compaction really compacts a store's changelog, and a restore from scratch reads
  the compacted log and rebuilds exact state (Kafka Streams' restore, StoreChangelogReader);
* consumed repartition records are deleted after commit (Kafka Streams'
  ``TaskManager.maybePurgeCommittedRecords``); skipped on Tansu;
* a co-partitioned input grown with CreatePartitions is refused with a clear error
  (Kafka Streams' ``CopartitionedTopicsEnforcer``);
* log ends and time lookups come from ListOffsets directly, exact;
* a member whose group moved on cannot commit offsets in a transaction: Kafka alone refuses
  it (KIP-447), which is why the runtime's membership-check commits are off there; Tansu
  takes it (so they stay on there);
* the KIP-848 consumer group protocol (``group.protocol=consumer``) works with this client:
  members get their partitions from the broker's assignor, and the ``range`` assignor gives
  a member the same partition numbers of two co-partitioned topics (the runtime itself stays
  on the classic protocol, which both brokers speak);
* a 3-broker KRaft cluster keeps every acknowledged record when a broker is killed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from platform_streams import KafkaStreams, StreamsBuilder
from platform_streams.dev.brokers import ApacheKafkaCluster
from platform_streams.dsl import Consumed, Materialized, Produced, Repartitioned
from platform_streams.errors import CoPartitioningError, TaskMigratedError
from platform_streams.kafka import (
    KafkaAdmin,
    TopicPartition,
    TopicSpec,
    create_consumer,
    create_producer,
    log_end_offsets,
    offsets_for_time,
    read_partition_range,
)
from platform_streams.kafka.capabilities import stale_group_metadata
from platform_streams.runtime.broker_calls import retrying
from platform_streams.serde import Long, String
from tests.integration.support_apps import app_config, running_app, wait_until
from tests.support.kafka import GROUP_TIMING, consume_all, new_group_id, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

S, L = String(), Long()
FEATURES = (
    "delete_records",
    "txn_offset_commit_fencing",
    "exact_list_offsets",
    "aborts_fenced_transactions",
    "offsets_only_transactions",
)


@pytest.fixture(scope="module")
def kafka_admin(kafka_bootstrap_servers: str) -> KafkaAdmin:
    return KafkaAdmin(kafka_bootstrap_servers)


def _kafka_like(broker_kind: str, admin: KafkaAdmin, feature: str) -> bool:
    """Which branch a two-broker test takes: by kind, or by probe on an external cluster."""
    return broker_kind == "kafka" or (broker_kind == "external" and admin.supports(feature))


def _records_in_log(bootstrap: str, admin: KafkaAdmin, topic: str, partition: int = 0) -> tuple[int, int]:
    """(records readable, offsets spanned) of one partition, from its log start to its end."""
    start = admin.list_offsets([(topic, partition)], "earliest")[(topic, partition)][0]
    end = log_end_offsets({"bootstrap.servers": bootstrap}, [(topic, partition)])[(topic, partition)]
    conf = {"bootstrap.servers": bootstrap, "group.id": "unused", "fetch.wait.max.ms": 10}
    read = sum(1 for _ in read_partition_range(conf, topic, partition, start, end_offset=end, timeout_s=30))
    return read, end - start


def test_capabilities_are_probed_not_named(tansu_bootstrap_servers: str, kafka_admin: KafkaAdmin) -> None:
    with KafkaAdmin(tansu_bootstrap_servers) as tansu:
        assert {f: tansu.supports(f) for f in FEATURES} == dict.fromkeys(FEATURES, False)
    assert {f: kafka_admin.supports(f) for f in FEATURES} == dict.fromkeys(FEATURES, True)


def test_log_compaction_compacts_a_changelog_and_restore_reads_the_compacted_log(
    kafka_bootstrap_servers: str, kafka_admin: KafkaAdmin, tmp_path: Path
) -> None:
    bootstrap, admin = kafka_bootstrap_servers, kafka_admin
    source, sink = new_topic(admin, 1, "compact-in"), new_topic(admin, 1, "compact-out")
    # segments roll after 200 ms, and a 1% dirty log is worth cleaning: compaction within seconds
    log_config = {"segment.ms": "200", "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed(key_serde=S, value_serde=S))
        .group_by_key()
        .count(materialized=Materialized(store_name="counts", log_config=log_config).with_caching_disabled())
        .to_stream()
        .to(sink, Produced(key_serde=S, value_serde=L))
    )
    config = app_config(bootstrap, tmp_path / "state", default_key_serde="string")
    changelog = f"{config.application_id}-counts-changelog"
    keys = [f"k{i}" for i in range(10)]
    expected = dict.fromkeys(keys, 0)

    def feed(rounds: int) -> None:
        produce(bootstrap, source, [(k, "x") for _ in range(rounds) for k in keys])
        for k in keys:
            expected[k] += rounds

    with running_app(builder, config):
        feed(50)  # 500 changelog records for 10 keys
        assert admin.describe_topic_configs([changelog])[changelog]["cleanup.policy"] == "compact"

        def compacted() -> bool:
            feed(1)  # a later append rolls the segment, so the cleaner may take the older ones
            read, spanned = _records_in_log(bootstrap, admin, changelog)
            return spanned >= 500 and read < spanned // 4

        wait_until(compacted, 120, "the log cleaner compacted the changelog", interval_s=1.0)
        ends = {(source, 0): sum(expected.values())}
        wait_until(
            lambda: admin.committed_offsets(config.application_id, list(ends)) == ends, 60, "all input"
        )
    shutil.rmtree(tmp_path / "state")  # lose the state: a restore from the compacted changelog
    read, spanned = _records_in_log(bootstrap, admin, changelog)
    with running_app(builder, config) as streams:
        restored = sum(worker.state_lifecycle.total_restored for worker in streams.workers)
        assert 0 < restored <= read < spanned, (restored, read, spanned)
        feed(1)
        total = sum(expected.values())
        ends = {(source, 0): total}
        wait_until(
            lambda: admin.committed_offsets(config.application_id, list(ends)) == ends, 60, "all input"
        )
    latest: dict[str, int] = {}
    for record in consume_all(bootstrap, sink, total, timeout_s=60):
        assert record.key is not None and record.value is not None
        latest[record.key.decode()] = L.deserialize(record.value)
    assert latest == expected, "the state restored from the compacted changelog is exact"


def test_repartition_records_are_purged_after_commit_where_the_broker_deletes_records(
    bootstrap_servers: str, broker_kind: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 2, "purge-in"), new_topic(admin, 2, "purge-out")
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed(key_serde=S, value_serde=S))
        .select_key(lambda k, v: v)
        .repartition(Repartitioned(key_serde=S, value_serde=S, num_partitions=2))
        .to(sink, Produced(key_serde=S, value_serde=S))
    )
    config = app_config(bootstrap_servers, tmp_path, repartition_purge_interval_ms=0)
    repartition = f"{config.application_id}-KSTREAM-REPARTITION-0000000002-repartition"
    produce(bootstrap_servers, source, [(f"o{i}", f"c{i % 13}") for i in range(600)])
    parts = [(repartition, p) for p in range(2)]
    with running_app(builder, config) as streams:
        assert len(consume_all(bootstrap_servers, sink, 600, timeout_s=60)) == 600
        ends = log_end_offsets({"bootstrap.servers": bootstrap_servers}, parts)
        assert sum(ends.values()) >= 600
        if _kafka_like(broker_kind, admin, "delete_records"):
            # Kafka Streams deletes what its committed offsets cover (maybePurgeCommittedRecords)
            wait_until(
                lambda: {tp: o for tp, (o, _ts) in admin.list_offsets(parts, "earliest").items()} == ends,
                60,
                "the repartition topic was purged up to the committed offsets",
            )
            # the worker records a purge after DeleteRecords returns: the broker can show the
            # new start offsets a moment before that (failed once under load)
            wait_until(
                lambda: any(w.repartition_purger.purged for w in streams.workers),
                30,
                "a worker recorded its purge",
            )
        else:
            # Tansu drops the connection on DeleteRecords: detected, warned about once, skipped
            wait_until(
                lambda: not any(w.repartition_purger.enabled for w in streams.workers),
                30,
                "the purger found DeleteRecords unsupported",
            )
            assert not any(w.repartition_purger.purged for w in streams.workers)
            assert all(o == 0 for o, _ts in admin.list_offsets(parts, "earliest").values())


def test_a_copartitioned_input_grown_with_create_partitions_is_refused(
    kafka_bootstrap_servers: str, kafka_admin: KafkaAdmin, tmp_path: Path
) -> None:
    bootstrap, admin = kafka_bootstrap_servers, kafka_admin
    left, right = new_topic(admin, 2, "cp-left"), new_topic(admin, 2, "cp-right")
    sink = new_topic(admin, 2, "cp-out")
    builder = StreamsBuilder()
    table = builder.table(right, Consumed(key_serde=S, value_serde=S))
    (
        builder.stream(left, Consumed(key_serde=S, value_serde=S))
        .join(table, lambda v, t: f"{v}+{t}")
        .to(sink, Produced(key_serde=S, value_serde=S))
    )
    config = app_config(bootstrap, tmp_path, default_key_serde="string", default_value_serde="string")
    with running_app(builder, config):
        pass
    admin.create_partitions(left, 3)  # a real CreatePartitions (Tansu has none)
    assert admin.partition_counts([left])[left] == 3
    streams = KafkaStreams(builder, config)
    with pytest.raises(CoPartitioningError) as refused:
        streams.start()
    streams.close(timeout_s=30)
    assert refused.value.partition_counts == {left: 3, right: 2}
    assert left in str(refused.value) and "same number of partitions" in str(refused.value)


def test_log_ends_and_time_lookups_come_from_list_offsets_directly(
    kafka_bootstrap_servers: str, kafka_admin: KafkaAdmin
) -> None:
    bootstrap, admin = kafka_bootstrap_servers, kafka_admin
    topic = new_topic(admin, 1, "times")
    base = int(time.time() * 1000) - 600_000
    # 40 records in 8 batches (Tansu would answer the last batch's start + 1 for the end)
    for batch in range(8):
        produce(
            bootstrap,
            topic,
            [("k", str(i)) for i in range(5)],
            timestamp_ms=[base + (batch * 5 + i) * 1000 for i in range(5)],
        )
    conf = {"bootstrap.servers": bootstrap}
    tp = (topic, 0)
    assert log_end_offsets(conf, [tp], admin=admin) == {tp: 40} == log_end_offsets(conf, [tp])
    lookups, warnings = offsets_for_time(admin, conf, base + 17_500, {tp: (0, 40)})
    assert warnings == []
    assert (lookups[tp].offset, lookups[tp].method, lookups[tp].record_timestamp) == (
        18,
        "list_offsets",
        base + 18_000,
    )
    beyond, _ = offsets_for_time(admin, conf, base + 100_000, {tp: (0, 40)})
    assert (beyond[tp].offset, beyond[tp].method) == (40, "list_offsets")


def test_exactly_once_commits_the_offsets_of_input_that_produced_nothing(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """Input that a filter drops leaves a transaction with offsets and no records. Tansu keeps
    such a transaction's offsets only for a producer's first one (``offsets_only_transactions``),
    so after the first commit the group's offsets stood still there; a group repair's re-commit
    of saved offsets is the same kind of transaction."""
    source = new_topic(admin, 1, "dropped-in")
    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=S, value_serde=S)).filter(lambda k, v: False).to(
        new_topic(admin, 1, "dropped-out"), Produced(key_serde=S, value_serde=S)
    )
    config = app_config(
        bootstrap_servers, tmp_path / "state", processing_guarantee="exactly_once_v2", commit_interval_ms=100
    )
    committed = lambda: admin.committed_offsets(config.application_id, [(source, 0)])[(source, 0)]  # noqa: E731
    with running_app(builder.build(), config):
        for end in (3, 6, 9):  # three commits, each its own transaction
            produce(bootstrap_servers, source, [("k", "v")] * 3)
            wait_until(lambda end=end: committed() == end, 60, f"the offsets up to {end} committed")


def test_require_stable_waits_out_a_pending_transactional_offset_commit(
    bootstrap_servers: str, broker_kind: str, admin: KafkaAdmin
) -> None:
    """``committed_offsets(require_stable=True)`` answers once a pending transactional offset
    commit is decided, instead of failing with UNSTABLE_OFFSET_COMMIT (which Kafka answers
    while the commit markers are not written yet): the ``offsets_only_transactions`` probe
    reads right after a commit, and an error there twice made Kafka look unsupported."""
    if not _kafka_like(broker_kind, admin, "txn_offset_commit_fencing"):
        pytest.skip("KIP-447 stable offsets are Kafka's")
    topic, group = new_topic(admin, 1, "stable"), new_group_id("stable")
    txn_id = new_group_id("txn")
    producer = create_producer({"bootstrap.servers": bootstrap_servers, "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    pending = [TopicPartition(topic, 0, 5)]
    producer.send_offsets_to_transaction(pending, stale_group_metadata(group, -1, ""), 30)
    committer = threading.Timer(1.5, lambda: producer.commit_transaction(30))
    committer.start()  # pending for 1.5 s: the read below starts while the offsets are unstable
    try:
        assert admin.committed_offsets(group, [(topic, 0)], 30.0, require_stable=True) == {(topic, 0): 5}
    finally:
        committer.join()


def _owns(consumers: list[Any], sizes: list[int]) -> bool:
    for consumer in consumers:
        consumer.poll(0.1)
    return [len(c.assignment()) for c in consumers] == sizes


def test_a_stale_members_transactional_offset_commit_is_refused_by_kafka_alone(
    bootstrap_servers: str, broker_kind: str, admin: KafkaAdmin
) -> None:
    topic = new_topic(admin, 2, "stale")
    conf = {
        "bootstrap.servers": bootstrap_servers,
        "group.id": new_group_id("stale"),
        "enable.auto.commit": False,
        **GROUP_TIMING,
    }
    first = create_consumer(conf)
    second = create_consumer(conf)
    producer = create_producer(
        {"bootstrap.servers": bootstrap_servers, "transactional.id": new_group_id("tx")}
    )
    try:
        first.subscribe([topic])
        wait_until(lambda: _owns([first], [2]), 60, "the first member owns both partitions", interval_s=0)
        stale = first.consumer_group_metadata()  # generation 1
        second.subscribe([topic])
        wait_until(
            lambda: _owns([first, second], [1, 1]), 60, "a rebalance split the partitions", interval_s=0
        )
        producer.init_transactions(30)
        producer.begin_transaction()
        offsets = [TopicPartition(topic, 0, 1), TopicPartition(topic, 1, 1)]

        def zombie_commit() -> None:
            producer.send_offsets_to_transaction(offsets, stale, 10)

        if _kafka_like(broker_kind, admin, "txn_offset_commit_fencing"):
            with pytest.raises(TaskMigratedError, match="moved on without this member"):
                retrying(zombie_commit, "send_offsets_to_transaction", 30)
            producer.abort_transaction(10)
            assert admin.committed_offsets(conf["group.id"], [(topic, 0), (topic, 1)]) == {
                (topic, 0): None,
                (topic, 1): None,
            }
        else:  # Tansu takes it: hence the runtime's membership-check commits on such a broker
            retrying(zombie_commit, "send_offsets_to_transaction", 30)
            producer.commit_transaction(10)
            assert admin.committed_offsets(conf["group.id"], [(topic, 0)]) == {(topic, 0): 1}
    finally:
        first.close()
        second.close()


def test_the_kip848_consumer_protocol_splits_copartitioned_topics_alike(
    kafka_bootstrap_servers: str, kafka_admin: KafkaAdmin
) -> None:
    left, right = new_topic(kafka_admin, 4, "kip848-l"), new_topic(kafka_admin, 4, "kip848-r")
    conf = {
        "bootstrap.servers": kafka_bootstrap_servers,
        "group.id": new_group_id("kip848"),
        "group.protocol": "consumer",
        "group.remote.assignor": "range",
        "enable.auto.commit": False,
    }
    members = [create_consumer(conf) for _ in range(2)]
    try:
        for member in members:
            member.subscribe([left, right])

        def split() -> list[set[tuple[str, int]]] | None:
            for member in members:
                member.poll(0.1)
            owned = [{(tp.topic, tp.partition) for tp in m.assignment()} for m in members]
            return owned if all(len(o) == 4 for o in owned) else None

        owned = wait_until(split, 60, "both members own their share (ConsumerGroupHeartbeat)", interval_s=0)
        assert owned[0].isdisjoint(owned[1])
        for mine in owned:
            assert {p for t, p in mine if t == left} == {p for t, p in mine if t == right}
    finally:
        for member in members:
            member.close()


@pytest.mark.slow
@pytest.mark.servers_side  # three JVMs for ~100 s: off the Tansu side, the long pole
def test_a_three_broker_cluster_keeps_acknowledged_records_when_a_broker_is_killed() -> None:
    with ApacheKafkaCluster(kill_with_parent=True) as cluster:
        bootstrap = cluster.bootstrap_servers
        pids = [node.pid for node in cluster.nodes]
        with KafkaAdmin(bootstrap) as admin:
            topic = f"replicated-{time.time_ns()}"
            admin.create_topics([TopicSpec(topic, 3)])  # replication factor: the cluster default, 3
            producer_conf = {"acks": "all", "enable.idempotence": True}
            produce(bootstrap, topic, [(f"k{i}", str(i)) for i in range(300)], conf=producer_conf)
            victim = cluster.nodes[0]
            victim.kill()  # kill -9 one of three: min.insync.replicas=2 still holds
            produce(bootstrap, topic, [(f"k{i}", str(i)) for i in range(300, 600)], conf=producer_conf)
            values = sorted(int(r.value or b"-1") for r in consume_all(bootstrap, topic, 600, timeout_s=90))
            assert values == list(range(600)), "every acknowledged record survives the failover"
            cluster.restart_node(0)
            assert victim.is_running()
    assert not any(_alive(pid) for pid in pids if pid is not None), "the cluster left a broker running"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cli_broker_kafka_runs_until_ctrl_c_and_leaves_nothing_running(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "platform_streams.cli", "broker", "--broker", "kafka", "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    try:
        assert proc.stdout is not None
        line = ""
        deadline = time.monotonic() + 180
        while "ready" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
        assert "Apache Kafka" in line and "bootstrap.servers=" in line, line
        bootstrap = line.split("bootstrap.servers=")[1].split()[0]
        java_pid = int(line.split("(pid ")[1].split(",")[0])
        with KafkaAdmin(bootstrap) as admin:
            topic = new_topic(admin, 1, "cli")
            produce(bootstrap, topic, [("k", "v")])
            assert len(consume_all(bootstrap, topic, 1, timeout_s=30)) == 1
        proc.send_signal(signal.SIGINT)
        assert proc.wait(90) == 0
        wait_until(lambda: not _alive(java_pid), 30, "the broker's JVM exited")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
