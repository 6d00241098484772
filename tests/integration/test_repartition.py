"""Repartitioning on the real broker: the internal topic exists, is sized right, and routes by key."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Grouped, Materialized, Produced, Repartitioned
from platform_streams.kafka import KafkaAdmin
from platform_streams.processor.partitioner import default_partition
from platform_streams.serde import Integer, Long, String
from tests.integration.support_apps import active_tasks, app_config, read_to_end, running_app, wait_until
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

S, INT = String(), Integer()


def _rekey_app(source: str, sink: str, repartitioned: Repartitioned) -> StreamsBuilder:
    """Re-key by the value's customer id, repartition, then tag each record with its task's partition."""
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed(key_serde=S, value_serde=S))
        .select_key(lambda k, v: v.split(":")[0])
        .repartition(repartitioned)
        .map_values(lambda k, v: f"{k}/{v}")
        .to(sink, Produced(key_serde=S, value_serde=S))
    )
    return builder


def _records(n: int) -> list[tuple[str, str]]:
    return [(f"order-{i}", f"customer-{i % 37}:{i}") for i in range(n)]


@pytest.mark.parametrize(("num_partitions", "expected_partitions"), [(None, 4), (3, 3)])
def test_repartition_topic_is_created_sized_and_keyed(
    bootstrap_servers: str,
    admin: KafkaAdmin,
    tmp_path: Path,
    num_partitions: int | None,
    expected_partitions: int,
) -> None:
    source, sink = new_topic(admin, 4, "orders"), new_topic(admin, 4, "by-customer")
    records = _records(2_000)
    produce(bootstrap_servers, source, records)
    config = app_config(bootstrap_servers, tmp_path)
    builder = _rekey_app(
        source, sink, Repartitioned(key_serde=S, value_serde=S, num_partitions=num_partitions)
    )
    internal = f"{config.application_id}-KSTREAM-REPARTITION-0000000002-repartition"
    assert "KSTREAM-REPARTITION-0000000002-repartition" in builder.build().internal_topics
    with running_app(builder, config) as streams:
        assert admin.list_topics()[internal] == expected_partitions
        # sub-topology 0 reads the source (4 tasks), sub-topology 1 the repartition topic
        tasks = active_tasks(streams)
        assert [t for t in tasks if t.startswith("0_")] == [f"0_{p}" for p in range(4)]
        assert [t for t in tasks if t.startswith("1_")] == [f"1_{p}" for p in range(expected_partitions)]
        outputs = consume_all(bootstrap_servers, sink, len(records), timeout_s=30)
        repartitioned = consume_all(bootstrap_servers, internal, len(records), timeout_s=30)
    expected = Counter((v.split(":")[0], f"{v.split(':')[0]}/{v}") for _, v in records)
    assert Counter((r.key.decode(), r.value.decode()) for r in outputs if r.key and r.value) == expected
    assert len(repartitioned) == len(records)
    for record in repartitioned:
        assert record.key is not None
        assert record.partition == default_partition(record.key, expected_partitions), record
    assert len({r.partition for r in repartitioned}) == expected_partitions  # 37 keys spread over all


def test_named_repartition_uses_the_given_topic_name(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 2, "in"), new_topic(admin, 2, "out")
    produce(bootstrap_servers, source, [(f"k{i}", f"c{i % 5}:{i}") for i in range(100)])
    config = app_config(bootstrap_servers, tmp_path)
    builder = _rekey_app(source, sink, Repartitioned(key_serde=S, value_serde=S, name="by-customer"))
    with running_app(builder, config):
        assert admin.list_topics()[f"{config.application_id}-by-customer-repartition"] == 2
        assert len(consume_all(bootstrap_servers, sink, 100, timeout_s=30)) == 100


def test_restart_with_existing_internal_topics_reuses_them(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 2, "in"), new_topic(admin, 2, "out")
    config = app_config(bootstrap_servers, tmp_path)
    builder = _rekey_app(source, sink, Repartitioned(key_serde=S, value_serde=S))
    produce(bootstrap_servers, source, [("a", "x:1")])
    with running_app(builder, config):
        assert len(consume_all(bootstrap_servers, sink, 1, timeout_s=30)) == 1
    produce(bootstrap_servers, source, [("b", "y:2")])
    with running_app(builder, config):
        values = sorted(r.value or b"" for r in consume_all(bootstrap_servers, sink, 2, timeout_s=30))
    assert values == [b"x/x:1", b"y/y:2"]


def test_group_by_repartitions_by_the_new_key_before_counting(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 4, "orders"), new_topic(admin, 4, "counts")
    records = _records(1_000)
    produce(bootstrap_servers, source, records)
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed(key_serde=S, value_serde=S))
        .group_by(lambda k, v: v.split(":")[0], Grouped(key_serde=S, value_serde=S))
        .count(materialized=Materialized.as_("per-customer"))
        .to_stream()
        .to(sink, Produced(key_serde=S, value_serde=Long()))
    )
    config = app_config(bootstrap_servers, tmp_path)
    internal = f"{config.application_id}-per-customer-repartition"
    expected = Counter(v.split(":")[0] for _, v in records)

    def latest() -> dict[str, int]:
        counts = {
            r.key.decode(): Long().deserialize(r.value)
            for r in read_to_end(bootstrap_servers, sink, 4)
            if r.key and r.value
        }
        return counts if counts == expected else {}

    with running_app(builder, config):
        assert admin.list_topics()[internal] == 4
        wait_until(latest, 30, "every customer counted", interval_s=0.5)
        repartitioned = consume_all(bootstrap_servers, internal, len(records), timeout_s=30)
    assert len(repartitioned) == len(records)
    assert all(r.key and r.partition == default_partition(r.key, 4) for r in repartitioned)
