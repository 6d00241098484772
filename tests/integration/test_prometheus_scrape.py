"""A real Prometheus scrapes a running worker; the series are checked through its HTTP API.

Prometheus is the Debian package (``.ci/run`` installs it), started by
:func:`tests.support.prometheus.running_prometheus` on a free port with a generated scrape
config (1 s interval, the worker's bearer token).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Materialized, Produced
from platform_streams.kafka import KafkaAdmin
from platform_streams.query import RangeQuery, StateQueryRequest
from platform_streams.serde import String
from tests.integration.iq_apps import STORE
from tests.integration.support_apps import Ticking, app_config, running_app, wait_until
from tests.support.kafka import new_topic, produce
from tests.support.prometheus import running_prometheus

pytestmark = pytest.mark.broker

RECORDS = 2_000
KEYS = 100


def _value(sample: dict[str, Any]) -> float:
    return float(sample["value"][1])


def _count_and_tick_app(source: str, sink: str) -> StreamsBuilder:
    """``source`` -> count per key in ``STORE``, a punctuating processor beside it, and every
    record copied to ``sink``."""
    builder = StreamsBuilder()
    stream = builder.stream(source, Consumed(key_serde=String(), value_serde=String()))
    stream.process(Ticking)
    stream.group_by_key().count(materialized=Materialized.as_(STORE))
    stream.to(sink, Produced(key_serde=String(), value_serde=String()))
    return builder


def test_prometheus_scrapes_throughput_latency_lag_and_store_series(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 4, "in"), new_topic(admin, 2, "out")
    records = [(f"k{i % KEYS}", "v") for i in range(RECORDS)]
    produce(bootstrap_servers, source, records)
    token = uuid.uuid4().hex
    config = app_config(
        bootstrap_servers,
        tmp_path / "state",
        http_port=0,
        http_auth_token=token,
        metrics_recording_level="DEBUG",
    )
    with running_app(_count_and_tick_app(source, sink), config) as streams:
        scan = StateQueryRequest.in_store(STORE).with_query(RangeQuery.with_no_bounds())

        def counted() -> bool:
            rows = [
                row
                for r in streams.query(scan).partition_results.values()
                if r.is_success()
                for row in r.result
            ]
            return len(rows) == KEYS and sum(v for _, v in rows) == RECORDS

        wait_until(counted, 30, "every record counted")
        assert streams.http_server is not None
        target = str(streams.http_server.address)
        with running_prometheus([target], tmp_path / "prometheus", bearer_token=token) as prometheus:
            prometheus.wait_for(f'up{{instance="{target}"}} == 1', timeout_s=20)
            app = f'application_id="{config.application_id}"'

            # throughput: every record once, on the one worker, spread over the four tasks
            processed = prometheus.query(f"kafka_streams_thread_process_total{{{app}}}")
            assert len(processed) == 1 and _value(processed[0]) == RECORDS
            labels = processed[0]["metric"]
            assert labels["client_id"] == config.effective_client_id
            assert labels["thread_id"].endswith("-StreamThread-1") and labels["job"] == "platform-streams"
            per_task = prometheus.query(f"sum by (task_id) (kafka_streams_task_process_total{{{app}}})")
            assert sorted(s["metric"]["task_id"] for s in per_task) == ["0_0", "0_1", "0_2", "0_3"]
            assert sum(_value(s) for s in per_task) == RECORDS
            rate = prometheus.wait_for(f"rate(kafka_streams_thread_poll_total{{{app}}}[5s]) > 0", 20)
            assert 0 < _value(rate[0]) < 10_000  # polls per second: the loop polls, but not wildly

            # latency: histograms in seconds with plausible values
            buckets = f"kafka_streams_thread_commit_latency_seconds_bucket{{{app}}}"
            p99 = prometheus.query(f"histogram_quantile(0.99, sum by (le) ({buckets}))")
            assert 0 < _value(p99[0]) <= 10
            busy = f"kafka_streams_thread_process_latency_seconds_sum{{{app}}}"
            per_record = prometheus.query(f"{busy} / kafka_streams_thread_process_total{{{app}}}")
            assert 0 < _value(per_record[0]) < 0.01
            e2e = prometheus.query(f"kafka_streams_processor_node_record_e2e_latency_seconds_count{{{app}}}")
            assert e2e and {s["metric"]["processor_node_id"] for s in e2e} == {"KSTREAM-SOURCE-0000000000"}

            # lag per input partition, from the fetch-side high watermark: caught up
            prometheus.wait_for(f"count(kafka_streams_consumer_records_lag{{{app}}}) == 4", 20)
            lag = prometheus.query(f"kafka_streams_consumer_records_lag{{{app}}}")
            assert {(s["metric"]["topic"], s["metric"]["partition"]) for s in lag} == {
                (source, str(p)) for p in range(4)
            }
            assert all(_value(s) == 0 for s in lag)

            # state store: RocksDB properties (INFO) and operation latencies (DEBUG)
            keys = prometheus.wait_for(f'kafka_streams_state_estimate_num_keys{{{app},store="{STORE}"}}', 20)
            assert {s["metric"]["store_type"] for s in keys} == {"rocksdb-state"}
            assert len({s["metric"]["task_id"] for s in keys}) == 4
            assert 0 < sum(_value(s) for s in keys) <= 2 * KEYS
            puts = prometheus.query(
                f'sum(kafka_streams_state_put_latency_seconds_count{{{app},store="{STORE}"}})'
            )
            assert _value(puts[0]) >= KEYS
            state = prometheus.query(f'kafka_streams_client_state{{{app},state="RUNNING"}}')
            assert _value(state[0]) == 1

            # punctuation (INFO): every call counted and timed
            prometheus.wait_for(f"rate(kafka_streams_thread_punctuate_total{{{app}}}[5s]) > 0", 20)
            punctuate = "kafka_streams_thread_punctuate_latency_seconds"
            calls = prometheus.query(f"{punctuate}_count{{{app}}}")
            assert calls and _value(calls[0]) > 0
            avg = prometheus.query(f"{punctuate}_sum{{{app}}} / {punctuate}_count{{{app}}}")
            assert 0 <= _value(avg[0]) < 0.1

            # DEBUG: record-cache hits and misses of the count store, record lateness per task
            reads = prometheus.query(
                f'sum(kafka_streams_record_cache_hits_total{{{app},store="{STORE}"}})'
                f' + sum(kafka_streams_record_cache_misses_total{{{app},store="{STORE}"}})'
            )
            assert _value(reads[0]) >= RECORDS  # one cached read per record counted
            hits = prometheus.query(f'sum(kafka_streams_record_cache_hits_total{{{app},store="{STORE}"}})')
            assert _value(hits[0]) >= RECORDS - KEYS  # keys stay cached: only first reads miss
            late = prometheus.query(f"sum(kafka_streams_task_record_lateness_seconds_count{{{app}}})")
            assert _value(late[0]) == RECORDS

            # topic level (KIP-613): records (INFO) and bytes (DEBUG here) in at the source
            # node per task, out at the sink node
            size = sum(len(k) + len(v) for k, v in records)
            consumed = prometheus.query(f"kafka_streams_topic_records_consumed_total{{{app}}}")
            assert {s["metric"]["task_id"] for s in consumed} == {"0_0", "0_1", "0_2", "0_3"}
            assert {(s["metric"]["topic"], s["metric"]["processor_node_id"]) for s in consumed} == {
                (source, "KSTREAM-SOURCE-0000000000")
            }
            assert sum(_value(s) for s in consumed) == RECORDS
            read = prometheus.query(f"sum(kafka_streams_topic_bytes_consumed_total{{{app}}})")
            assert _value(read[0]) == size
            out = f'{app},topic="{sink}"'
            produced = prometheus.wait_for(
                f"kafka_streams_topic_records_produced_total{{{out}}} == {RECORDS}", 20
            )
            assert produced[0]["metric"]["processor_node_id"].startswith("KSTREAM-SINK-")
            written = prometheus.query(f"kafka_streams_topic_bytes_produced_total{{{out}}}")
            assert _value(written[0]) == size
