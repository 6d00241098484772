"""Queries while an active task restores (KIP-535): lags, standbys, and the HTTP endpoint's
staleness bound.

Translated from Kafka Streams' ``LagFetchIntegrationTest#shouldFetchLagsDuringRestoration``
(the restoring store's lag at restore start is ``(0, end, end)``, the caught-up one's
``(end, end, 0)``) and ``StoreQueryIntegrationTest#shouldQuerySpecificStalePartitionStores``
/ ``#shouldQueryOnlyActivePartitionStoresByDefault`` (a standby answers only a caller that
accepts stale stores), extended to the worker HTTP endpoint: two real clients with one
standby replica each; the one whose active task restores is held in the middle of that
restore (a restore listener waits), so the state under test lasts as long as the test needs.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from platform_streams import KafkaStreams, State
from platform_streams.kafka import KafkaAdmin, log_end_offsets
from platform_streams.processor.partitioner import default_partition
from platform_streams.query import LagInfo
from platform_streams.serde import String
from platform_streams.state import StateRestoreListener
from tests.integration.iq_apps import STORE, count_app, http_get
from tests.integration.support_apps import app_config, running_app, wait_until
from tests.support.kafka import new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

PARTITIONS = 2
#: a client held in a restore callback must not be dropped from the group meanwhile
_SLOW_POLLS = {"max_poll_interval_ms": 120_000}


class _HeldRestore(StateRestoreListener):
    """Holds the first restore that learns its changelog's end until ``release`` is set."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        self.held: tuple[str, int] | None = None

    def on_log_end(self, store_name: str, tp: tuple[str, int], log_start: int, log_end: int) -> None:
        if self.held is None and log_end > 0:
            self.held = tp
            self.reached.set()
            self.release.wait(120)


def _partition_of(key: str) -> int:
    return default_partition(String().serialize(key) or b"", PARTITIONS)


def test_a_restoring_active_is_refused_unless_staleness_is_accepted_and_a_standby_answers_with_its_lag(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source = new_topic(admin, PARTITIONS, "in")
    records = [(f"k{i:03d}", "v") for i in range(60) for _ in range(i % 3 + 1)]
    expected = dict(Counter(k for k, _ in records))
    produce(bootstrap_servers, source, records)
    config_a = app_config(
        bootstrap_servers, tmp_path / "a", num_standby_replicas=1, http_port=0, **_SLOW_POLLS
    )
    app_id = config_a.application_id
    changelog = f"{app_id}-{STORE}-changelog"
    config_b = app_config(
        bootstrap_servers, tmp_path / "b", app_id=app_id, num_standby_replicas=1, http_port=0, **_SLOW_POLLS
    )
    with running_app(count_app(source), config_a) as first:
        assert first.http_server is not None
        url_a, host_a = f"http://{first.http_server.address}", str(first.http_server.address)

        def counted() -> bool:
            for key, count in expected.items():
                status, _, body = http_get(f"{url_a}/stores/{STORE}/keys/{key}")
                if status != 200 or body["value"] != count:
                    return False
            return True

        wait_until(counted, 60, "the first client counted every key")
        def settled() -> dict[int, int] | None:
            found = log_end_offsets(
                {"bootstrap.servers": bootstrap_servers}, [(changelog, p) for p in range(PARTITIONS)]
            )
            ends = {p: end for (_, p), end in found.items()}
            lags = first.all_local_store_partition_lags().get(STORE)
            # an active running task: at the end of its changelog (Kafka: position = end offset)
            wanted = {p: LagInfo(ends[p], ends[p]) for p in range(PARTITIONS)}
            return ends if all(e > 1 for e in ends.values()) and lags == wanted else None

        ends = wait_until(settled, 30, "the first client reports its stores at their changelogs' ends")

        held = _HeldRestore()
        second = KafkaStreams(count_app(source), config_b)
        second.set_global_state_restore_listener(held)
        try:
            second.start()
            assert held.reached.wait(90), "the second client never restored an active task"
            assert held.held is not None
            partition = held.held[1]
            end = ends[partition]
            key = next(k for k in expected if _partition_of(k) == partition)
            assert second.http_server is not None
            url_b, host_b = f"http://{second.http_server.address}", str(second.http_server.address)

            # the restoring active: from nothing, to the end it learned (Kafka: (0, end, end))
            assert second.all_local_store_partition_lags()[STORE][partition] == LagInfo(0, end)
            # the standby the first client keeps of it catches up to the end
            wait_until(
                lambda: first.all_local_store_partition_lags().get(STORE, {}).get(partition)
                == LagInfo(end, end),
                60,
                "the first client's standby of the restoring task caught up",
            )

            def placed() -> bool:
                # each instance learns the other's tasks from the metadata topic, in its own time:
                # both views, the first client's API and the second's HTTP endpoint, must agree
                meta = first.query_metadata_for_key(STORE, key)
                if str(meta.active_host) != host_b or {str(h) for h in meta.standby_hosts} != {host_a}:
                    return False
                status, _, seen = http_get(f"{url_b}/stores/{STORE}/metadata/{key}")
                return status == 200 and seen["active_host"] == host_b and seen["standby_hosts"] == [host_a]

            wait_until(placed, 30, "the metadata names the restoring client active, the first standby")
            status, _, meta = http_get(f"{url_b}/stores/{STORE}/metadata/{key}")
            assert status == 200 and meta["active_host"] == host_b and meta["standby_hosts"] == [host_a]

            # no staleness accepted: a clear 503 naming the reason, from either instance
            for url in (url_b, url_a):
                status, headers, body = http_get(f"{url}/stores/{STORE}/keys/{key}")
                assert status == 503, (url, status, body)
                assert body["reason"] == "restoring" and body["lag"] == end, body
                assert f"restoring, {end} records behind" in body["error"] and host_b in body["error"], body
                assert "\n" not in body["error"]

            # staleness accepted: the standby answers, saying how stale it is
            bound = end - 1  # the restoring copy is too far behind to qualify
            for url in (url_a, url_b):
                status, headers, body = http_get(f"{url}/stores/{STORE}/keys/{key}?max_lag={bound}")
                assert status == 200, (url, status, body)
                assert body["value"] == expected[key] and body["stale"] is True, body
                assert body["lag"] == 0 and body["served_by"] == host_a, body
                assert headers.get("X-Streams-Lag") == "0", headers
            # a bound the restoring copy meets lets it answer too, from what it has (nothing yet)
            status, _, body = http_get(f"{url_b}/stores/{STORE}/keys/{key}?max_lag={end}&local=true")
            assert status == 404 and body["lag"] == end and body["served_by"] == host_b, (status, body)
            status, _, body = http_get(f"{url_b}/stores/{STORE}/keys/{key}?max_lag=1x")
            assert status == 400 and "max_lag" in body["error"], body

            held.release.set()
            wait_until(
                lambda: second.state() is State.RUNNING
                and (http_get(f"{url_b}/stores/{STORE}/keys/{key}")[2] or {}).get("stale") is False,
                60,
                "the second client restored and answers fresh",
            )
            status, headers, body = http_get(f"{url_b}/stores/{STORE}/keys/{key}")
            assert status == 200 and body["value"] == expected[key] and body["lag"] == 0, body
        finally:
            held.release.set()
            assert second.close(timeout_s=60)
