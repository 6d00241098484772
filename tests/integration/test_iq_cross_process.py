"""Two worker processes of one application: each answers for every key, forwarding to the owner."""

from __future__ import annotations

import urllib.parse
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from platform_streams.kafka import KafkaAdmin
from tests.integration.iq_apps import QueryProcess, http_get
from tests.integration.support_apps import new_app_id, wait_until
from tests.support.kafka import new_topic, produce

pytestmark = pytest.mark.broker

TASKS = ["0_0", "0_1", "0_2", "0_3"]


@contextmanager
def _two_processes(bootstrap: str, tmp_path: Path, source: str, prefix: str) -> Iterator[tuple[Any, ...]]:
    """Two ``iq_runner.py`` processes of one new application on ``source``, HTTP ready:
    ``(process A, process B, url A, url B, token)``; both are closed afterwards."""
    app_id, token = new_app_id(prefix), uuid.uuid4().hex
    common = {"bootstrap": bootstrap, "app_id": app_id, "input": source, "token": token}
    first = QueryProcess(tmp_path / "a.log", state_dir=tmp_path / "a", **common)
    second = QueryProcess(tmp_path / "b.log", state_dir=tmp_path / "b", **common)
    try:
        yield first, second, first.wait_ready(), second.wait_ready(), token
    finally:
        first.close()
        second.close()


def _scan_is(url: str, token: str, expected: Counter[str]) -> bool:
    """True once a scan of ``counts`` through ``url`` is complete and equals ``expected``."""
    status, _, body = http_get(f"{url}/stores/counts/range?limit=1000", token)
    return status == 200 and body["complete"] and {r["key"]: r["value"] for r in body["rows"]} == expected


def test_a_key_owned_by_the_other_process_is_answered_through_forwarding(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source = new_topic(admin, 4, "in")
    records = [(f"user/{i:03d}", "v") for i in range(120) for _ in range(i % 4 + 1)]
    expected = Counter(k for k, _ in records)
    produce(bootstrap_servers, source, records)
    with _two_processes(bootstrap_servers, tmp_path, source, "iq") as (first, second, url_a, url_b, token):

        def split() -> bool:
            state_a, state_b = http_get(f"{url_a}/state", token)[2], http_get(f"{url_b}/state", token)[2]
            tasks_a = [t for w in state_a["workers"] for t in w["active_tasks"]]
            tasks_b = [t for w in state_b["workers"] for t in w["active_tasks"]]
            seen_by_a = {i["host"]: sorted(i["active_tasks"]) for i in state_a["instances"]}
            return (
                state_a["state"] == state_b["state"] == "RUNNING"
                and len(tasks_a) == len(tasks_b) == 2
                and sorted(tasks_a + tasks_b) == TASKS
                and seen_by_a.get(first.address) == sorted(tasks_a)
                and seen_by_a.get(second.address) == sorted(tasks_b)
            )

        wait_until(split, 60, "each process runs two tasks and A knows who runs what", interval_s=0.2)

        wait_until(
            lambda: _scan_is(url_a, token, expected),
            30,
            "A's scan (local + B's partitions) sees every count",
            interval_s=0.2,
        )

        forwarded = 0
        for key, count in sorted(expected.items()):
            path = f"/stores/counts/keys/{urllib.parse.quote(key, safe='')}"
            status, headers, body = http_get(url_a + path, token)
            assert status == 200, body
            assert body["value"] == count and body["key"] == key and not body["stale"]
            owner = http_get(f"{url_a}/stores/counts/metadata/{urllib.parse.quote(key, safe='')}", token)[2]
            assert body["served_by"] == owner["active_host"]
            if owner["active_host"] == second.address:
                forwarded += 1
                assert headers.get("X-Forwarded-To") == second.address
        assert 0 < forwarded < len(expected), forwarded

        # every process serves its own metrics, on its own port
        processed: dict[str, float] = {}
        for url in (url_a, url_b):
            request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read().decode()
            lines = [
                line for line in text.splitlines() if line.startswith("kafka_streams_thread_process_total")
            ]
            assert len(lines) == 1
            assert "kafka_streams_store_key_query_scatter_total" not in text, "murmur2 input: one hop"
            assert "kafka_streams_source_topic_murmur2_placed{" in text
            client = lines[0].split('client_id="', 1)[1].split('"', 1)[0]
            processed[client] = float(lines[0].rsplit(" ", 1)[1])
        assert len(processed) == 2 and sum(processed.values()) >= len(records)  # at-least-once

        # the other way round, and errors survive the hop
        status, _, body = http_get(f"{url_b}/stores/counts/keys/nobody", token)
        assert status == 404 and body["error"] == "key not found"
        assert http_get(f"{url_a}/stores/counts/keys/user%2F001", "wrong")[0] == 403


def test_keys_of_a_consistent_random_topic_are_answered_by_scatter_gather_across_processes(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """confluent-kafka's default partitioner (CRC32): each process asks every partition's
    owner once and merges, so every key is found whichever process is asked."""
    source = new_topic(admin, 4, "crc")
    records = [(f"user/{i:03d}", "v") for i in range(60) for _ in range(i % 3 + 1)]
    expected = Counter(k for k, _ in records)
    produce(bootstrap_servers, source, records, partitioner="consistent_random")
    with _two_processes(bootstrap_servers, tmp_path, source, "iqcrc") as (_a, _b, url_a, url_b, token):

        def split_and_counted() -> bool:
            state_a, state_b = http_get(f"{url_a}/state", token)[2], http_get(f"{url_b}/state", token)[2]
            tasks_a = [t for w in state_a["workers"] for t in w["active_tasks"]]
            tasks_b = [t for w in state_b["workers"] for t in w["active_tasks"]]
            if sorted(tasks_a + tasks_b) != TASKS or not tasks_a or not tasks_b:
                return False
            return _scan_is(url_a, token, expected)

        wait_until(split_and_counted, 90, "both processes run tasks and every key is counted", interval_s=0.2)
        for url in (url_a, url_b):
            for key, count in sorted(expected.items()):
                status, _, body = http_get(
                    f"{url}/stores/counts/keys/{urllib.parse.quote(key, safe='')}", token
                )
                assert status == 200, (url, key, body)
                assert body["value"] == count and body["scatter"] and body["complete"], body
            status, _, body = http_get(f"{url}/stores/counts/keys/nobody", token)
            assert status == 404 and body["error"] == "key not found", body
            meta = http_get(f"{url}/stores/counts/metadata/user%2F001", token)[2]
            assert meta["active_host"] is None and "murmur2_random" in meta["reason"]
        for url in (url_a, url_b):
            request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read().decode()
            scatter = [
                line
                for line in text.splitlines()
                if line.startswith("kafka_streams_store_key_query_scatter_total") and 'store="counts"' in line
            ]
            assert len(scatter) == 1 and float(scatter[0].rsplit(" ", 1)[1]) == len(expected) + 1
