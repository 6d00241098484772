"""Key queries of tables fed by topics that ordinary Python producers wrote.

confluent-kafka's default partitioner (``consistent_random``) places keys by CRC32, not by
Java's murmur2: routed key queries answered 404 "key not found" for most keys. The client
now detects such topics as it consumes them and answers key queries of their stores by
asking every partition; murmur2-produced topics keep the single-hop path.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from platform_streams import KafkaStreams
from platform_streams.kafka import KafkaAdmin
from platform_streams.processor.partitioner import default_partition
from platform_streams.query import KeyQuery, RangeQuery, StateQueryRequest
from platform_streams.query.placement import PRODUCER_SETTING
from platform_streams.serde import String
from tests.integration.iq_apps import STORE, count_app, http_get
from tests.integration.support_apps import app_config, new_app_id, running_app, wait_until
from tests.support.kafka import new_topic, produce

pytestmark = pytest.mark.broker

PARTITIONS = 4


def _records(keys: int) -> list[tuple[str, str]]:
    return [(f"user-{i:03d}", "v") for i in range(keys) for _ in range(i % 3 + 1)]


def _scanned(streams: KafkaStreams) -> dict[str, int]:
    result = streams.query(StateQueryRequest.in_store(STORE).with_query(RangeQuery.with_no_bounds()))
    rows: dict[str, int] = {}
    for answer in result.partition_results.values():
        if answer.is_success():
            rows.update(answer.result)
    return rows


def _metric(streams: KafkaStreams, name: str) -> dict[str, float]:
    body, _ = streams.metrics.render()
    return {
        next(v for k, v in s.labels.items() if k in ("topic", "store")): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == name
    }


def _key_value(streams: KafkaStreams, key: str) -> Any:
    """The local API: a key query of every partition this client hosts (Kafka's default)."""
    request = StateQueryRequest.in_store(STORE).with_query(KeyQuery.with_key(key))
    only = streams.query(request).get_only_partition_result()
    return None if only is None else only.get_result()


def test_keys_of_a_consistent_random_topic_are_found_locally_and_over_http(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="platform_streams.query.placement")
    source = new_topic(admin, PARTITIONS, "crc")
    records = _records(50)
    expected = dict(Counter(k for k, _ in records))
    placed = produce(bootstrap_servers, source, records, partitioner="consistent_random")
    pairs = zip(records, placed, strict=True)
    misplaced = sum(p != default_partition(k.encode(), PARTITIONS) for (k, _), (p, _o) in pairs)
    assert misplaced > 0, "the producer's default partitioner does not place by murmur2"
    app_id = new_app_id("crc")
    config = app_config(bootstrap_servers, tmp_path / "a", app_id, http_port=0)
    with running_app(count_app(source), config) as streams:
        wait_until(lambda: _scanned(streams) == expected, 60, "every key counted")
        assert streams.http_server is not None
        url = f"http://{streams.http_server.address}"
        service = streams.interactive_queries
        assert not service.key_routable(STORE)
        assert _metric(streams, "kafka_streams_source_topic_murmur2_mismatches_total")[source] == misplaced
        assert _metric(streams, "kafka_streams_source_topic_murmur2_placed") == {source: 0.0}
        warnings = [r.getMessage() for r in caplog.records if source in r.getMessage()]
        assert len(warnings) == 1 and PRODUCER_SETTING in warnings[0]

        meta = streams.query_metadata_for_key(STORE, "user-007")
        assert not meta.is_available() and meta.partition == -1 and PRODUCER_SETTING in meta.reason
        status, _, body = http_get(f"{url}/stores/{STORE}/metadata/user-007")
        assert status == 200 and body["active_host"] is None and source in body["reason"]

        for key, count in sorted(expected.items()):
            assert _key_value(streams, key) == count, key
            status, _, body = http_get(f"{url}/stores/{STORE}/keys/{urllib.parse.quote(key)}")
            assert status == 200 and body["value"] == count and body["scatter"], (key, body)
            crc_partition = placed[records.index((key, "v"))][0]
            assert body["partition"] == crc_partition
        status, _, body = http_get(f"{url}/stores/{STORE}/keys/nobody")
        assert status == 404 and body["error"] == "key not found" and body["partitions"] == [0, 1, 2, 3]
        assert _metric(streams, "kafka_streams_store_key_query_scatter_total")[STORE] == len(expected) + 1

    # a restart knows the verdict before consuming anything: from the state directory ...
    fresh = KafkaStreams(count_app(source), config)
    assert not fresh.interactive_queries.key_routable(STORE)
    # ... and an instance with an empty state directory learns it from the metadata topic
    other = app_config(bootstrap_servers, tmp_path / "b", app_id, http_port=0)
    with running_app(count_app(source), other) as streams:
        wait_until(lambda: not streams.interactive_queries.key_routable(STORE), 60, "the verdict is shared")
        assert streams.interactive_queries.placement.misplaced[source] in ("metadata topic", "consumed")


def test_murmur2_produced_topics_keep_single_hop_key_queries(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source = new_topic(admin, PARTITIONS, "mm2")
    records = _records(40)
    expected = dict(Counter(k for k, _ in records))
    produce(bootstrap_servers, source, records, partitioner="murmur2_random")
    config = app_config(bootstrap_servers, tmp_path, http_port=0)
    with running_app(count_app(source), config) as streams:
        wait_until(lambda: _scanned(streams) == expected, 60, "every key counted")
        assert streams.http_server is not None
        url = f"http://{streams.http_server.address}"
        for key, count in sorted(expected.items()):
            status, _, body = http_get(f"{url}/stores/{STORE}/keys/{urllib.parse.quote(key)}")
            assert status == 200 and body["value"] == count and "scatter" not in body
            meta = streams.query_metadata_for_key(STORE, key)
            assert meta.is_available()
            assert meta.partition == default_partition(String().serialize(key) or b"", PARTITIONS)
        assert streams.interactive_queries.key_routable(STORE)
        assert _metric(streams, "kafka_streams_store_key_query_scatter_total") == {}
        assert _metric(streams, "kafka_streams_source_topic_murmur2_mismatches_total") == {}
        assert _metric(streams, "kafka_streams_source_topic_murmur2_placed") == {source: 1.0}


def test_window_key_queries_of_a_consistent_random_topic_merge_every_partition(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    from platform_streams import StreamsBuilder
    from platform_streams.dsl import Consumed, Materialized
    from platform_streams.dsl.windows import TimeWindows

    source = new_topic(admin, PARTITIONS, "crcw")
    records = _records(30)
    expected = dict(Counter(k for k, _ in records))
    base = 1_700_000_000_000 - 1_700_000_000_000 % 60_000
    produce(bootstrap_servers, source, records, partitioner="consistent_random", timestamp_ms=base + 5)
    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=String(), value_serde=String())).group_by_key().windowed_by(
        TimeWindows.of_size_with_no_grace(60_000)
    ).count(materialized=Materialized.as_("wcounts"))
    config = app_config(bootstrap_servers, tmp_path, http_port=0)
    with running_app(builder, config) as streams:
        assert streams.http_server is not None
        url = f"http://{streams.http_server.address}/stores/wcounts/windows"

        def every_window() -> bool:
            status, _, body = http_get(f"{url}?from=0&to={base + 60_000}&limit=1000")
            return status == 200 and body["complete"] and len(body["rows"]) == len(expected)

        wait_until(every_window, 60, "every key's window counted")
        assert not streams.interactive_queries.key_routable("wcounts")
        for key, count in sorted(expected.items()):
            status, _, body = http_get(f"{url}/{urllib.parse.quote(key)}?from=0&to={base + 60_000}")
            assert status == 200 and body["scatter"], body
            assert body["windows"] == [{"start_ms": base, "value": count}], (key, body)
            status, _, body = http_get(f"{url}/{urllib.parse.quote(key)}")  # every window of the key
            assert [(w["window"]["start_ms"], w["value"]) for w in body["windows"]] == [(base, count)]
        status, _, body = http_get(f"{url}/nobody")
        assert status == 200 and body["windows"] == [] and body["complete"]
