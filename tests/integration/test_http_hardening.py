"""The worker HTTP endpoint under hostile input, on running workers on the broker (issue 13).

What needs no running client (timeouts, backlog, tokens, key syntax) is checked in
tests/unit/server/test_http_hardening.py; here: a request smuggled in a body must not
pause a running application, out-of-range partitions of a running store's scan are a
400, and ``run --workers 2`` hands the token to its children without any command line
(``/proc/<pid>/cmdline``) ever holding it.
"""

from __future__ import annotations

import json
import re
import socket
import urllib.parse
import uuid
from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin
from tests.integration.iq_apps import STORE, count_app, http_get
from tests.integration.support_apps import app_config, running_app, wait_until
from tests.integration.test_cli import EXAMPLE_APP, EXAMPLE_CONFIG, Cli
from tests.support.kafka import new_topic, produce

pytestmark = pytest.mark.broker

TOKEN = "h13-s3cret-token"


def test_a_request_in_a_body_is_not_executed(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source = new_topic(admin, 2, "smuggle")
    config = app_config(bootstrap_servers, tmp_path, http_port=0, http_auth_token=TOKEN)
    with running_app(count_app(source), config) as streams:
        assert streams.http_server is not None
        address = streams.http_server.address
        smuggled = (
            f"PUT /control/pause HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Length: 0\r\n\r\n"
        ).encode()
        request = (
            f"POST /control/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Length: {len(smuggled)}\r\n\r\n"
        ).encode()
        with socket.create_connection((address.host, address.port), timeout=30) as sock:
            sock.sendall(request + smuggled)
            sock.settimeout(3)
            reply = b""
            try:
                while chunk := sock.recv(65536):
                    reply += chunk
            except TimeoutError:
                pass  # keep-alive: the server waits for a next request that never comes
        assert reply.count(b"HTTP/1.1 ") == 1 and reply.startswith(b"HTTP/1.1 405"), reply
        assert not streams.is_paused()
        status, _, body = http_get(f"http://{address}/control/status", token=TOKEN)
        assert status == 200 and body["paused"] is False


def test_out_of_range_partitions_of_a_scan_are_400(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source = new_topic(admin, 2, "ranges")
    produce(bootstrap_servers, source, [("k1", "v"), ("k2", "v")])
    config = app_config(bootstrap_servers, tmp_path, http_port=0)
    with running_app(count_app(source), config) as streams:
        assert streams.http_server is not None
        base = f"http://{streams.http_server.address}/stores/{STORE}/range"
        wait_until(lambda: len(http_get(base)[2]["rows"]) == 2, 60, "both keys counted")
        for partitions in ("99999999999999999999", "2", "-1", "0,18446744073709551616", "\u0661", "1_0"):
            status, _, body = http_get(f"{base}?partitions={urllib.parse.quote(partitions)}")
            assert status == 400 and "partitions" in body["error"], (partitions, status, body)
        status, _, body = http_get(f"{base}?partitions=0,1")
        assert status == 200 and body["complete"] is True


def test_run_with_workers_passes_the_token_through_the_environment(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    topics = {
        "ORDERS_TOPIC": new_topic(admin, 2, "orders"),
        "BIG_ORDERS_TOPIC": new_topic(admin, 2, "big-orders"),
        "ORDERS_BY_CUSTOMER_TOPIC": new_topic(admin, 2, "orders-by-customer"),
    }
    settings = {
        "bootstrap_servers": bootstrap_servers,
        "application_id": f"h13-workers-{uuid.uuid4().hex[:8]}",
        "state_dir": tmp_path / "state",
        "http_port": 0,
    }
    overrides = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    app = Cli(
        tmp_path,
        *("run", EXAMPLE_APP, "--config", EXAMPLE_CONFIG, "--workers", "2", *overrides),
        env={**topics, "PLATFORM_STREAMS_HTTP_AUTH_TOKEN": TOKEN},
    )

    def endpoints() -> list[str]:
        found = re.findall(r"HTTP endpoint on http://(\S+)", app.stderr)
        return found if len(found) == 2 else []

    try:
        served = wait_until(endpoints, 120, "both workers serving HTTP")
        pids = [int(p) for p in re.search(r"pids \[(\d+), (\d+)\]", app.stderr).groups()]  # type: ignore[union-attr]
        for pid in [app.proc.pid, *pids]:
            assert TOKEN.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        for endpoint in served:
            assert http_get(f"http://{endpoint}/state")[0] == 401
            status, _, body = http_get(f"http://{endpoint}/state", token=TOKEN)
            assert status == 200 and body["application_id"] == settings["application_id"]
        # and the command line itself refuses the token
        refused = Cli(tmp_path, "run", EXAMPLE_APP, "--set", f"http_auth_token={TOKEN}")
        assert refused.proc.wait(60) == 2
        assert "secret on the command line" in refused.stderr and TOKEN not in refused.stderr
    finally:
        assert app.stop(60) == 0, app.stderr
    assert json.dumps(app.stderr).count(TOKEN) == 0
