"""Connect-style control on the worker HTTP endpoint: status, pause, resume, restart."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from examples.orders_app import build_topology
from platform_streams import KafkaStreams, State, StreamsConfig
from platform_streams.kafka import KafkaAdmin
from tests.support.kafka import GROUP_TIMING, consume_all, new_topic, produce

pytestmark = pytest.mark.broker


def _call(base: str, method: str, path: str, token: str | None = "s3cret") -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(base + path, method=method, data=b"" if method != "GET" else None)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_pause_resume_restart_over_http(admin: KafkaAdmin, bootstrap_servers: str, tmp_path: Path) -> None:
    orders, big, by_customer = (new_topic(admin, 2, p) for p in ("orders", "big", "bycust"))
    config = StreamsConfig(
        application_id=f"control-{uuid.uuid4().hex[:8]}",
        bootstrap_servers=bootstrap_servers,
        state_dir=tmp_path,
        commit_interval_ms=100,
        http_port=0,
        http_auth_token="s3cret",
        consumer_config={"fetch.wait.max.ms": 10},
        **{k.replace(".", "_"): v for k, v in GROUP_TIMING.items()},
    )
    streams = KafkaStreams(build_topology(orders, big, by_customer), config)
    streams.start()
    try:
        streams.wait_for_state(State.RUNNING, timeout_s=30)
        assert streams.http_server is not None
        base = f"http://{streams.http_server.address}"
        assert _call(base, "PUT", "/control/pause", token=None)[0] == 401
        assert _call(base, "PUT", "/control/pause", token="wrong")[0] == 403

        status, body = _call(base, "PUT", "/control/pause")
        assert status == 200 and body["paused"] is True and streams.is_paused()
        produce(
            bootstrap_servers,
            orders,
            [(f"o{i}", json.dumps({"customer": "c", "amount": 5})) for i in range(10)],
        )
        assert consume_all(bootstrap_servers, by_customer, 10, timeout_s=3) == []  # paused: nothing moves
        assert streams.state() is State.RUNNING  # still in the group, partitions kept

        status, body = _call(base, "PUT", "/control/resume")
        assert status == 200 and body["paused"] is False
        assert len(consume_all(bootstrap_servers, by_customer, 10, timeout_s=60)) == 10

        old = [w.name for w in streams.workers]
        status, body = _call(base, "POST", "/control/restart")
        assert status == 202 and body["restarting"] is True
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            [w.name for w in streams.workers] == old or streams.state() is not State.RUNNING
        ):
            time.sleep(0.1)
        assert [w.name for w in streams.workers] != old and streams.state() is State.RUNNING
        produce(bootstrap_servers, orders, [("o99", json.dumps({"customer": "c", "amount": 5}))])
        # the new workers rejoin the group first (a join takes ~3 s on this broker)
        assert len(consume_all(bootstrap_servers, by_customer, 11, timeout_s=60)) == 11
        assert _call(base, "GET", "/control/status")[1]["state"] == "RUNNING"
        assert _call(base, "GET", "/control/pause")[0] == 405
    finally:
        streams.close(timeout_s=30)


@pytest.mark.apache_kafka
def test_concurrent_restart_workers_calls_run_one_after_the_other(
    admin: KafkaAdmin, bootstrap_servers: str, tmp_path: Path, broker_kind: str
) -> None:
    """``restart_workers()`` from several Python threads at once: each call replaces the
    workers it finds (no call fails on workers another call already removed), and the client
    then processes new input. On the embedded broker, members that leave and join again in
    quick succession wedge the group until the repair (docs/brokers.md), which can take
    minutes for three restarts in a row, so there only the restarts themselves are checked."""
    import threading

    from platform_streams.query import KeyQuery, StateQueryRequest
    from tests.integration.iq_apps import STORE, count_app
    from tests.integration.support_apps import app_config, running_app, wait_until

    source = new_topic(admin, 2, "restarts")
    config = app_config(bootstrap_servers, tmp_path)
    with running_app(count_app(source), config) as streams:
        results: list[bool | BaseException] = []

        def restart() -> None:
            try:
                results.append(streams.restart_workers(timeout_s=60))
            except BaseException as exc:  # the test reports it
                results.append(exc)

        threads = [threading.Thread(target=restart) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        assert results == [True] * 3
        assert len(streams.workers) == config.num_stream_threads
        if broker_kind == "tansu":
            return
        produce(bootstrap_servers, source, [("k", "v")] * 3)

        def counted() -> bool:
            request = StateQueryRequest.in_store(STORE).with_query(KeyQuery.with_key("k"))
            answers = streams.query(request).partition_results.values()
            return any(a.is_success() and a.result == 3 for a in answers)

        wait_until(counted, 60, "the new input counted after the restarts")
