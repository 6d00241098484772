"""The HTTP endpoint's input handling, served for a client that is not started (no broker needed).

Everything here must be a 4xx (or 503 for "not running yet") with a JSON error, never a
crash; the broker suite checks the same endpoint on running applications.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from platform_streams import KafkaStreams, StreamsBuilder, StreamsConfig
from platform_streams.dsl import Consumed, Materialized
from platform_streams.serde import Long, String
from platform_streams.server import WorkerHttpServer
from platform_streams.server.codec import MalformedKeyError, dumps, parse_key
from platform_streams.state.windowed import TimeWindow, Windowed

TOKEN = "s3cret-token"


@pytest.fixture
def base_url(tmp_path: Path) -> Iterator[str]:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=Long(), value_serde=String())).group_by_key().count(
        materialized=Materialized.as_("counts")
    )
    config = StreamsConfig(
        application_id="http-unit",
        bootstrap_servers="127.0.0.1:9",
        state_dir=tmp_path,
        http_port=0,
        http_auth_token=TOKEN,
    )
    streams = KafkaStreams(builder, config)
    server = WorkerHttpServer(streams)
    server.start()
    try:
        yield f"http://{server.address}"
    finally:
        server.close()


def _get(url: str, token: str | None = TOKEN, method: str = "GET") -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_token_is_required_except_for_health(base_url: str) -> None:
    assert _get(f"{base_url}/stores/counts/keys/1", token=None)[0] == 401
    status, body = _get(f"{base_url}/stores/counts/keys/1", token="wrong")
    assert status == 403 and "token" in body["error"]
    assert _get(f"{base_url}/metrics", token="wrong")[0] == 403
    status, body = _get(f"{base_url}/health/live", token=None)
    assert status == 200 and body["state"] == "CREATED"
    status, body = _get(f"{base_url}/health/ready", token=None)
    assert status == 503 and body["ready"] is False


def test_bad_input_is_a_4xx_with_a_json_error(base_url: str) -> None:
    status, body = _get(f"{base_url}/stores/nope/keys/1")
    assert status == 404 and "nope" in body["error"]
    status, body = _get(f"{base_url}/stores/counts/keys/not-a-number")
    assert status == 400 and "not-a-number" in body["error"]
    assert _get(f"{base_url}/stores/counts/keys/99999999999999999999999")[0] == 400  # beyond a long
    assert _get(f"{base_url}/stores/counts/range?limit=0")[0] == 400
    assert _get(f"{base_url}/stores/counts/range?limit=abc")[0] == 400
    assert _get(f"{base_url}/stores/counts/range?from=x")[0] == 400
    assert _get(f"{base_url}/stores/counts/windows?from=1")[0] == 400
    assert _get(f"{base_url}/stores/counts/windows/1?from=yesterday")[0] == 400
    assert _get(f"{base_url}/no/such/path")[0] == 404
    assert _get(f"{base_url}/stores/counts/keys/1", method="DELETE")[0] == 405
    # a well-formed query on a client that is not running yet: 503, retry later
    assert _get(f"{base_url}/stores/counts/keys/1")[0] == 503


def test_garbage_on_the_socket_does_not_kill_the_server(base_url: str) -> None:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"\x00\x01 garbage\r\n\r\n")
        reply = sock.recv(1024)
    assert b"400" in reply  # the server answers a non-HTTP request line with a bare 400
    assert _get(f"{base_url}/health/live", token=None)[0] == 200


def test_metrics_are_served_in_text_format(base_url: str) -> None:
    request = urllib.request.Request(f"{base_url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        text = response.read().decode()
        assert response.headers["Content-Type"].startswith("text/plain")
    assert 'kafka_streams_client_state{application_id="http-unit"' in text


def test_key_parsing_follows_the_key_serde() -> None:
    assert parse_key("42", Long()) == 42
    assert parse_key("k/1", String()) == "k/1"
    with pytest.raises(MalformedKeyError):
        parse_key("4.2", Long())
    with pytest.raises(MalformedKeyError):
        parse_key(str(2**70), Long())


def test_values_become_json() -> None:
    document = {"b": b"text", "raw": b"\xff", "w": Windowed("k", TimeWindow(0, 10)), "t": (1, 2)}
    assert json.loads(dumps(document)) == {
        "b": "text",
        "raw": {"base64": "/w=="},
        "w": {"key": "k", "start_ms": 0, "end_ms": 10},
        "t": [1, 2],
    }
