"""A real Prometheus scrapes every RocksDB metric of a worker, and each moves when the store is written.

The metrics are Kafka Streams' property-based RocksDB metrics (KIP-607, ``RocksDBMetrics``:
``estimate-num-keys``, ``size-all-mem-tables``, ``estimate-live-data-size``,
``estimate-pending-compaction-bytes``, ``block-cache-usage``/``-capacity``/``-pinned-usage``,
``background-errors``) plus the worker's count of open RocksDB stores. The application runs
with ``rocksdb_memory_budget`` (so memtables are charged to the block cache, which must then
move with them) and a ``rocksdb_config_setter`` that makes memtables small (256 KiB: RocksDB
flushes them itself, no commit needed) and turns automatic compaction off with a level-0
trigger of one file, so every flush leaves compaction debt behind: pending compaction bytes
move, and the setter is seen to have reached the running store. Commits are far apart: the
first batch stays in the stores' write overlays (nothing in RocksDB yet: the baseline), the
second is large enough to spill from the overlays into RocksDB.
``background-errors`` moves only on a failing flush: tests/grafana/test_alerts.py fills a
store's disk for that; here it is scraped and 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Materialized
from platform_streams.kafka import KafkaAdmin
from platform_streams.serde import String
from tests.integration.iq_apps import STORE
from tests.integration.support_apps import app_config, running_app
from tests.support.kafka import new_topic, produce
from tests.support.prometheus import running_prometheus

pytestmark = pytest.mark.broker

BUDGET = 32 * 1024 * 1024
#: distinct keys of the second batch, into the one task's store: its write overlay spills
#: into RocksDB every 20,000 (rocksdb_columns.MAX_PENDING), and RocksDB flushes a full
#: memtable at the next write after it filled: three spills make at least two flushes
SECOND = 60_000


def compaction_debt(store_name: str, options: Any, table: Any) -> None:
    """Small memtables, flushed by RocksDB; every flushed file stays in level 0 and counts as
    pending compaction."""
    options.set_write_buffer_size(256 * 1024)
    options.set_disable_auto_compactions(True)
    options.set_level_zero_file_num_compaction_trigger(1)


def _sum(prometheus: Any, expr: str) -> float:
    samples = prometheus.query(f"sum({expr})")
    return float(samples[0]["value"][1]) if samples else -1.0


def test_every_rocksdb_metric_is_scraped_and_moves_when_the_store_is_written(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source = new_topic(admin, 1, "in")
    produce(bootstrap_servers, source, [(f"first-{i}", "v") for i in range(200)])
    config = app_config(
        bootstrap_servers,
        tmp_path / "state",
        http_port=0,
        commit_interval_ms=600_000,  # no commit during the test: RocksDB flushes on its own
        statestore_cache_max_bytes=0,
        rocksdb_memory_budget="32MiB",
        rocksdb_config_setter=f"{__name__}.compaction_debt",
    )
    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=String(), value_serde=String())).group_by_key().count(
        materialized=Materialized.as_(STORE)
    )
    with running_app(builder, config) as streams:
        assert streams.http_server is not None
        target = str(streams.http_server.address)
        with running_prometheus([target], tmp_path / "prometheus") as prometheus:
            app = f'application_id="{config.application_id}"'
            store = f'{{{app},store="{STORE}"}}'
            prometheus.wait_for(f"sum(kafka_streams_state_estimate_num_keys{store}) >= 200", 60)
            opened = prometheus.wait_for(f"kafka_streams_thread_rocksdb_open_stores{{{app}}} == 1", 20)
            assert len(opened) == 1
            capacity = prometheus.query(f"kafka_streams_state_block_cache_capacity_bytes{store}")
            assert len(capacity) == 1 and {float(s["value"][1]) for s in capacity} == {BUDGET}
            errors = prometheus.query(f"kafka_streams_state_background_errors{store}")
            assert len(errors) == 1 and all(float(s["value"][1]) == 0 for s in errors)

            moving = {
                "estimate_num_keys": "",
                "estimate_live_data_size_bytes": "",
                "estimate_pending_compaction_bytes": "",
                "size_all_mem_tables_bytes": "max_over_time",
                "block_cache_usage_bytes": "max_over_time",
                "block_cache_pinned_usage_bytes": "max_over_time",
            }

            def expr(metric: str) -> str:
                series = f"kafka_streams_state_{metric}{store}"
                return f"{moving[metric]}({series}[5m])" if moving[metric] else series

            before = {metric: _sum(prometheus, expr(metric)) for metric in moving}
            produce(bootstrap_servers, source, [(f"second-{i}", "v") for i in range(SECOND)])
            prometheus.wait_for(f"sum(kafka_streams_state_estimate_num_keys{store}) >= {SECOND}", 180)
            for metric in moving:
                prometheus.wait_for(f"sum({expr(metric)}) > {before[metric]}", 30)
