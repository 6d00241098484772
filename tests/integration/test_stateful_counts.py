"""Stateful counts on the broker: exact results, restore from the changelog, restore of the tail.

The output of a count is a changelog stream: the last value per key is the count (the
output topic would be compacted in production). Restores are observed through the
workers' restore accounting (``TaskStateLifecycle.total_restored``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from platform_streams import KafkaStreams, StreamsBuilder, StreamsConfig
from platform_streams.dsl import Consumed, Materialized, Produced
from platform_streams.kafka import KafkaAdmin, log_end_offsets
from platform_streams.serde import Long, String
from platform_streams.state import OffsetCheckpoint
from tests.integration.support_apps import app_config, running_app, wait_until
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

S, L = String(), Long()
KEYS = 1_000  # x20 inputs each: enough for restores of several thousand changelog records
PARTITIONS = 4


def _count_app(source: str, sink: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed(key_serde=S, value_serde=S))
        .group_by_key()
        .count(materialized=Materialized.as_("counts"))
        .to_stream()
        .to(sink, Produced(key_serde=S, value_serde=L))
    )
    return builder


def _latest_counts(bootstrap: str, sink: str) -> dict[str, int]:
    """Last value per key of the output (what a compacted topic keeps)."""
    ends = log_end_offsets({"bootstrap.servers": bootstrap}, [(sink, p) for p in range(PARTITIONS)])
    records = consume_all(bootstrap, sink, sum(ends.values()), timeout_s=30)
    assert len(records) >= sum(ends.values())  # the app may still be writing: more is fine
    latest: dict[str, int] = {}
    for record in records:
        assert record.key is not None and record.value is not None
        latest[record.key.decode()] = L.deserialize(record.value)
    return latest


def _wait_for_counts(bootstrap: str, sink: str, expected: int, timeout_s: float = 120) -> dict[str, int]:
    def done() -> dict[str, int]:
        latest = _latest_counts(bootstrap, sink)
        return latest if len(latest) == KEYS and all(v >= expected for v in latest.values()) else {}

    return wait_until(done, timeout_s, f"every key counted {expected} times", interval_s=0.5)


def _restored(streams: KafkaStreams) -> int:
    return sum(worker.state_lifecycle.total_restored for worker in streams.workers)


def _trusted(streams: KafkaStreams) -> int:
    """Changelog records restored without reading their headers (runtime/restore/restore_ranges.py)."""
    return sum(sum(w.state_lifecycle.last_trusted.values()) for w in streams.workers)


def _checkpoints(config: StreamsConfig) -> dict[Path, dict[tuple[str, int], int]]:
    root = Path(config.state_dir) / config.application_id
    return {path: OffsetCheckpoint(path).read() for path in root.glob("*/.checkpoint")}


def _changelog_end(bootstrap: str, changelog: str) -> dict[tuple[str, int], int]:
    return log_end_offsets({"bootstrap.servers": bootstrap}, [(changelog, p) for p in range(PARTITIONS)])


def test_count_is_exact_and_survives_state_loss_and_restores_only_the_tail(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, PARTITIONS, "counts-in"), new_topic(admin, PARTITIONS, "counts-out")
    config = app_config(bootstrap_servers, tmp_path / "state", default_key_serde="string")
    changelog = f"{config.application_id}-counts-changelog"
    app = _count_app(source, sink)

    # 1. 20,000 records over 1,000 keys: every count is exactly 20. (It was 200,000 over 10,000:
    #    ten times the CI time for the same checks, and at load 25 over the 60 s wait.)
    produce(bootstrap_servers, source, [(f"k{i % KEYS}", "x") for i in range(20 * KEYS)])
    with running_app(app, config) as streams:
        assert _restored(streams) == 0
        counts = _wait_for_counts(bootstrap_servers, sink, 20)
    assert set(counts.values()) == {20}
    first_checkpoints = _checkpoints(config)
    assert first_checkpoints, "a clean close writes the task checkpoints"

    # 2. Local state lost: the whole changelog is replayed, then counting continues exactly.
    shutil.rmtree(Path(config.state_dir) / config.application_id)
    changelog_records = sum(_changelog_end(bootstrap_servers, changelog).values())
    assert changelog_records >= KEYS
    produce(bootstrap_servers, source, [(f"k{i}", "x") for i in range(KEYS)])
    with running_app(app, config) as streams:
        assert _restored(streams) == changelog_records
        # the first run closed cleanly: its changelog ranges (written for committed input) are
        # restored without reading each record's source-position header
        assert _trusted(streams) == changelog_records
        counts = _wait_for_counts(bootstrap_servers, sink, 21)
    assert set(counts.values()) == {21}

    # 3. State intact but its checkpoint is old (a crash after the stores were written): only
    #    the changelog records after the checkpointed offsets are replayed.
    for path, offsets in first_checkpoints.items():
        OffsetCheckpoint(path).write(offsets)
    ends = _changelog_end(bootstrap_servers, changelog)
    checkpointed = {tp: o for offsets in first_checkpoints.values() for tp, o in offsets.items()}
    tail = sum(ends[tp] - (checkpointed.get(tp, -1) + 1) for tp in ends)
    assert 0 < tail < sum(ends.values())
    produce(bootstrap_servers, source, [(f"k{i}", "x") for i in range(KEYS)])
    with running_app(app, config) as streams:
        assert _restored(streams) == tail
        # the second run continued the first one's ranges: the tail is in them too
        assert _trusted(streams) == tail
        counts = _wait_for_counts(bootstrap_servers, sink, 22)
    assert set(counts.values()) == {22}


def test_source_table_restores_from_its_source_topic_under_optimization(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """``topology_optimization="all"``: no changelog topic; a lost table is rebuilt from its topic."""
    users, orders, sink = (new_topic(admin, 2, name) for name in ("users", "orders", "enriched"))
    config = app_config(bootstrap_servers, tmp_path / "state", topology_optimization="all")
    builder = StreamsBuilder(config)
    table = builder.table(users, Consumed(key_serde=S, value_serde=S), Materialized.as_("users-store"))
    builder.stream(orders, Consumed(key_serde=S, value_serde=S)).join(table, lambda o, u: f"{o}@{u}").to(
        sink, Produced(key_serde=S, value_serde=S)
    )
    topology = builder.build()
    produce(bootstrap_servers, users, [(f"u{i}", f"name{i}") for i in range(100)])
    with running_app(topology, config) as streams:
        # nothing committed yet: the table is built by processing its topic, not by a restore
        # (a source topic reused as changelog is restored only up to the committed offset)
        assert _restored(streams) == 0
        produce(bootstrap_servers, orders, [(f"u{i}", f"o{i}") for i in range(100)])
        first = consume_all(bootstrap_servers, sink, 100, timeout_s=30)
    assert f"{config.application_id}-users-store-changelog" not in admin.list_topics()
    shutil.rmtree(Path(config.state_dir) / config.application_id)
    with running_app(topology, config) as streams:
        assert _restored(streams) == 100
        produce(bootstrap_servers, orders, [(f"u{i}", f"again{i}") for i in range(100)])
        records = consume_all(bootstrap_servers, sink, 200, timeout_s=30)
    assert sorted(r.value or b"" for r in first) == sorted(f"o{i}@name{i}".encode() for i in range(100))
    # two sink partitions: the second run's records are picked by value, not by position
    assert sorted(r.value or b"" for r in records if (r.value or b"").startswith(b"again")) == sorted(
        f"again{i}@name{i}".encode() for i in range(100)
    )
