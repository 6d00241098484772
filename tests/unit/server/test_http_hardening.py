"""The worker HTTP endpoint under malicious or careless clients, on the real server.

A client that is not started needs no broker: ``/health/*`` and ``/metrics`` answer, and
every input check runs before a query would need a running client. The checks that need a
running worker on the broker are in tests/integration/test_http_hardening.py.
"""

from __future__ import annotations

import logging
import socket
import struct
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from platform_streams import KafkaStreams, StreamsBuilder, StreamsConfig
from platform_streams.cli_app_loader import CliError, load_config, parse_overrides
from platform_streams.dsl import Consumed, Materialized
from platform_streams.serde import Double, Long, String
from platform_streams.server import WorkerHttpServer
from platform_streams.server.codec import MalformedKeyError, parse_key
from platform_streams.server.http import HttpLimits
from tests.integration.iq_apps import http_get

TOKEN = "s3cret-token"


def _streams(tmp_path: Path, **settings: Any) -> KafkaStreams:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=Long(), value_serde=String())).group_by_key().count(
        materialized=Materialized.as_("counts")
    )
    values: dict[str, Any] = {
        "application_id": "http-hardening",
        "bootstrap_servers": "127.0.0.1:9",
        "state_dir": tmp_path,
        "http_port": 0,
        "http_auth_token": TOKEN,
        **settings,
    }
    return KafkaStreams(builder, StreamsConfig(**values))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[WorkerHttpServer]:
    limits = HttpLimits(threads=4, channel_timeout_s=2.0, cleanup_interval_s=0.5)
    server = WorkerHttpServer(_streams(tmp_path), limits)
    server.start()
    try:
        yield server
    finally:
        server.close()


def _get(server: WorkerHttpServer, path: str, token: str | None = TOKEN) -> tuple[int, Any]:
    status, _, body = http_get(f"http://{server.address}{path}", token, timeout_s=30)
    return status, body


def _raw(server: WorkerHttpServer, request: bytes) -> bytes:
    """Send ``request`` as bytes and read until the server closes or 2 s of silence."""
    with socket.create_connection((server.address.host, server.address.port), timeout=30) as sock:
        sock.sendall(request)
        sock.settimeout(2)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            pass
    return b"".join(chunks)


def _wait(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting until {what}")
        time.sleep(0.1)


# ---------------------------------------------------------------------- the token


def test_an_empty_token_is_refused_and_bearer_without_a_value_never_passes(
    server: WorkerHttpServer, tmp_path: Path
) -> None:
    for empty in ("", "   ", "\n"):
        with pytest.raises(ValidationError, match="http_auth_token") as caught:
            _streams(tmp_path, http_auth_token=empty)
        assert "must not be empty" in str(caught.value)
    with pytest.raises(CliError, match="http_auth_token: must not be empty"):
        load_config(None, [], env={"PLATFORM_STREAMS_APPLICATION_ID": "a",
                                   "PLATFORM_STREAMS_BOOTSTRAP_SERVERS": "k:9",
                                   "PLATFORM_STREAMS_HTTP_AUTH_TOKEN": ""})  # fmt: skip
    # a token read from a Secret file keeps its newline: trimmed, not refused
    trimmed = StreamsConfig(application_id="a", bootstrap_servers="k:9", http_auth_token=" tok\n")
    assert trimmed.http_auth_token is not None and trimmed.http_auth_token.get_secret_value() == "tok"
    # on the real server: "Bearer" with no value, or with spaces only, is refused
    for header in (b"Authorization: Bearer\r\n", b"Authorization: Bearer   \r\n", b"Authorization: \r\n"):
        reply = _raw(server, b"GET /state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + header + b"\r\n")
        assert reply.split(b"\r\n", 1)[0] in (b"HTTP/1.1 401 Unauthorized", b"HTTP/1.1 403 Forbidden"), reply
    assert _get(server, "/state")[0] == 200


# ---------------------------------------------------------------------- connections


def test_idle_and_half_sent_connections_hold_no_thread_and_are_closed(server: WorkerHttpServer) -> None:
    threads_before = threading.active_count()
    sockets = []
    try:
        for i in range(200):
            sock = socket.create_connection((server.address.host, server.address.port), timeout=30)
            if i % 2:  # half of them send half a request and stop
                sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            sockets.append(sock)
        # the endpoint still answers, and the held sockets cost no thread each
        assert _get(server, "/health/live", token=None)[0] == 200
        assert threading.active_count() <= threads_before + 2, threading.enumerate()
        # channel_timeout: the server closes every one of them (recv sees the end of stream)
        for sock in sockets:
            sock.settimeout(60)
            assert sock.recv(1024) == b""
    finally:
        for sock in sockets:
            sock.close()
    assert _get(server, "/health/live", token=None)[0] == 200


def test_the_listen_backlog_queues_a_burst(server: WorkerHttpServer) -> None:
    # ss shows a listening socket's backlog as its Send-Q (the kernel caps it at somaxconn)
    out = subprocess.run(
        ["ss", "-ltnH", f"sport = :{server.address.port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    assert out and int(out[2]) == min(1024, somaxconn), out


def test_a_body_is_read_as_a_body_and_never_runs_as_a_request(server: WorkerHttpServer) -> None:
    smuggled = b"GET /stores HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n\r\n"
    first = b"POST /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    reply = _raw(server, first + b"Content-Length: %d\r\n\r\n" % len(smuggled) + smuggled)
    assert reply.count(b"HTTP/1.1 ") == 1, reply  # one request, one answer: the body was a body
    assert reply.startswith(b"HTTP/1.1 405"), reply
    # a body beyond the limit is refused before any route sees it
    big = b"POST /health/live HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (1024 * 1024)
    assert _raw(server, big).startswith(b"HTTP/1.1 413"), "a 1 MiB body must be refused unread"


def test_clients_that_go_away_leave_no_traceback(
    server: WorkerHttpServer, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for _ in range(30):
        sock = socket.create_connection((server.address.host, server.address.port), timeout=30)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % TOKEN.encode())
        # SO_LINGER 0: close() resets the connection, so the server's write fails (EPIPE/ECONNRESET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    status, _ = _get(server, "/health/live", token=None)
    assert status == 200
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err and "ConnectionReset" not in err, err
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.exc_info], caplog.text


# ---------------------------------------------------------------------- numbers and keys


def test_out_of_range_numbers_are_400_with_a_message(server: WorkerHttpServer) -> None:
    for path, word in [
        ("/stores/counts/windows?from=0&to=18446744073709551616", "to"),
        ("/stores/counts/windows?from=-1&to=5", "from"),
        ("/stores/counts/windows/1?from=0&to=18446744073709551616", "to"),
        ("/stores/counts/range?limit=99999999999999999999", "limit"),
        ("/stores/counts/keys/99999999999999999999", "99999999999999999999"),
    ]:
        status, body = _get(server, path)
        assert status == 400 and word in body["error"], (path, status, body)


def test_long_and_number_keys_are_strict_ascii(server: WorkerHttpServer) -> None:
    for text in ("\u0663", "1_0", " 1", "1 ", "+", "0x10", "\uff11"):
        with pytest.raises(MalformedKeyError):
            parse_key(text, Long())
        status, body = _get(server, "/stores/counts/keys/" + urllib.parse.quote(text))
        assert status == 400 and "error" in body, (text, status, body)
    assert parse_key("-42", Long()) == -42 and parse_key("+7", Long()) == 7
    for text in ("1_0.5", "\u0663.5", " 1.5"):
        with pytest.raises(MalformedKeyError):
            parse_key(text, Double())
    assert parse_key("-1.5e3", Double()) == -1500.0
    for number in ("\u0663", "1_0"):
        status, body = _get(server, f"/stores/counts/range?limit={urllib.parse.quote(number)}")
        assert status == 400 and "limit" in body["error"], (number, body)


# ---------------------------------------------------------------------- exposure and secrets


def test_a_non_loopback_endpoint_without_a_token_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="platform_streams.server.http")
    cases = [("0.0.0.0", None, True), ("0.0.0.0", TOKEN, False), ("127.0.0.1", None, False)]
    for host, token, warned in cases:
        caplog.clear()
        server = WorkerHttpServer(_streams(tmp_path, http_host=host, http_auth_token=token))
        server.close()
        assert ("without http_auth_token" in caplog.text) is warned, (host, token, caplog.text)


def test_secrets_are_refused_on_the_command_line_and_never_echoed(tmp_path: Path) -> None:
    for item in (f"http_auth_token={TOKEN}", f"http.auth.token={TOKEN}", f"consumer.sasl.password={TOKEN}"):
        with pytest.raises(CliError, match="secret on the command line") as caught:
            parse_overrides([item])
        assert TOKEN not in str(caught.value)
    assert parse_overrides(["poll_ms=5"]) == {"poll_ms": "5"}
    # a list-valued token in a file: the error names the field, never the value
    path = tmp_path / "streams.yaml"
    path.write_text(f"application_id: a\nbootstrap_servers: k:9\nhttp_auth_token: [{TOKEN}]\n")
    with pytest.raises(CliError, match="http_auth_token") as caught:
        load_config(path, [], env={})
    assert TOKEN not in str(caught.value)
    for bad in ([TOKEN], {"t": TOKEN}, f"{TOKEN} x", 42):
        with pytest.raises(ValidationError) as raised:
            StreamsConfig(application_id="a", bootstrap_servers="k:9", http_auth_token=bad)
        assert TOKEN not in str(raised.value) and "http_auth_token" in str(raised.value)
        assert TOKEN not in repr(raised.value.errors())
