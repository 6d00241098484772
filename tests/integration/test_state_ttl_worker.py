"""State TTL on a real worker and broker: interactive queries, the changelog, a restore.

A count with ``Materialized.with_ttl`` (README "State TTL"): the expired key is gone from
interactive queries, a tombstone for it is in the changelog and in the output (the table's
delete), and after the local state is wiped, the store restored from the changelog agrees --
the expired key stays gone, the key refreshed before its expiry stays.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from platform_streams import KafkaStreams, StreamsBuilder
from platform_streams.dsl import Consumed, Materialized, Produced
from platform_streams.kafka import KafkaAdmin
from platform_streams.query import KeyQuery, StateQueryRequest
from platform_streams.serde import Long, String
from tests.integration.iq_apps import scan_rows
from tests.integration.support_apps import app_config, read_to_end, running_app, wait_until
from tests.support.kafka import new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

S, L = String(), Long()
STORE = "counts"
TTL_MS = 10_000


def _app(source: str, sink: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    # a sweep at every advance of stream time, so the test need not align to its interval
    counts = (
        builder.stream(source, Consumed(key_serde=S, value_serde=S))
        .group_by_key()
        .count(materialized=Materialized.as_(STORE).with_ttl(TTL_MS, sweep_interval=1))
    )
    counts.to_stream().to(sink, Produced(key_serde=S, value_serde=L))
    return builder


def _rows(streams: KafkaStreams) -> dict[str, Any]:
    return scan_rows(streams, STORE)


def _key(streams: KafkaStreams, key: str) -> Any:
    request = StateQueryRequest.in_store(STORE).with_query(KeyQuery.with_key(key)).with_partitions({0})
    return streams.query(request).partition_results[0].get_result()


def test_an_expired_key_is_gone_from_queries_the_changelog_and_a_restore(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 1, "ttl-in"), new_topic(admin, 1, "ttl-out")
    base = int(time.time() * 1000) - 600_000
    config = app_config(bootstrap_servers, tmp_path)
    with running_app(_app(source, sink), config) as streams:
        produce(bootstrap_servers, source, [("a", "v"), ("b", "v")], timestamp_ms=[base, base + 1_000])
        wait_until(lambda: _rows(streams) == {"a": 1, "b": 1}, 60, "a and b counted")
        wait_until(lambda: len(read_to_end(bootstrap_servers, sink, 1)) == 2, 60, "both counts written")
        # a is refreshed at +8 s (alive until +18 s); c at +12 s moves stream time past b's
        # expiry (+11 s), and the sweep deletes b
        later = [base + 8_000, base + 12_000]
        produce(bootstrap_servers, source, [("a", "v"), ("c", "v")], timestamp_ms=later)
        wait_until(lambda: _rows(streams) == {"a": 2, "c": 1}, 60, "b expired, a and c counted")
        assert _key(streams, "b") is None and _key(streams, "a") == 2

        def with_tombstone() -> list[tuple[str, int | None]]:
            records = read_to_end(bootstrap_servers, sink, 1)
            rows = [(S.deserialize(r.key), L.deserialize(r.value)) for r in records]
            return rows if ("b", None) in rows else []

        out = wait_until(with_tombstone, 60, "b's tombstone")
        assert out == [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", None)]
    changelog = read_to_end(bootstrap_servers, f"{config.application_id}-{STORE}-changelog", 1)
    last = {S.deserialize(r.key): r.value for r in changelog}
    assert last["b"] is None and last["a"] is not None and last["c"] is not None

    shutil.rmtree(tmp_path / config.application_id)  # the restart restores from the changelog
    with running_app(_app(source, sink), config) as streams:
        rows = wait_until(lambda: _rows(streams), 60, "the restored store answers")
        assert rows == {"a": 2, "c": 1}
        assert _key(streams, "b") is None
