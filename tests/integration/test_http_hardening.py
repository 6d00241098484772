"""The worker HTTP endpoint under malicious input, on running workers on the broker.

What needs no running client (timeouts, backlog, tokens, key syntax) is checked in
tests/unit/server/test_http_hardening.py; here: a request smuggled in a body must not
pause a running application, out-of-range partitions of a running store's scan are a
400, and ``run --workers 2`` hands the token to its children without any command line
(``/proc/<pid>/cmdline``) ever holding it.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import socket
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin
from platform_streams.query.metadata import HostInfo
from platform_streams.server.forwarding import ForwardError, forward
from platform_streams.server.http import HttpLimits
from tests.integration.iq_apps import STORE, QueryProcess, count_app, http_get
from tests.integration.support_apps import app_config, new_app_id, running_app, wait_until
from tests.integration.test_cli import EXAMPLE_APP, EXAMPLE_CONFIG, Cli, example_app_topics
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
    topics = example_app_topics(admin)
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


# ---------------------------------------------------------------------- framing (RFC 9112 section 6)

#: a pause hidden behind a body that ends early for a chunked reader ("0\r\n\r\n")
_HIDDEN_PAUSE = (
    f"PUT /control/pause HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 0\r\n\r\n"
).encode()

#: framing headers a front proxy and this server could read differently
_AMBIGUOUS_FRAMING = {
    "length and chunked": (b"HTTP/1.1", b"Transfer-Encoding: chunked\r\n"),
    "a tab before chunked": (b"HTTP/1.1", b"Transfer-Encoding:\tchunked\r\n"),
    "chunked, identity": (b"HTTP/1.1", b"Transfer-Encoding: chunked, identity\r\n"),
    "an unknown coding": (b"HTTP/1.1", b"Transfer-Encoding: xchunked\r\n"),
    "chunked twice": (b"HTTP/1.1", b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"),
    "two lengths": (b"HTTP/1.1", b"Content-Length: 5\r\n"),
    "Transfer-Encoding in HTTP/1.0": (
        b"HTTP/1.0",
        b"Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n",
    ),
}


def _read_until_closed(sock: socket.socket, timeout_s: float) -> tuple[bytes, bool]:
    """Everything the server sends, and whether it closed the connection within ``timeout_s``."""
    sock.settimeout(timeout_s)
    reply = b""
    try:
        while chunk := sock.recv(65536):
            reply += chunk
    except TimeoutError:
        return reply, False
    except ConnectionResetError:
        pass
    return reply, True


def test_ambiguous_framing_is_refused_and_the_connection_closed(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """Content-Length together with Transfer-Encoding (or two lengths, or a coding the
    server does not implement) is a 400 and the end of the connection: the request a
    chunked reader would find after the body's ``0\\r\\n\\r\\n`` never runs."""
    source = new_topic(admin, 2, "framing")
    config = app_config(bootstrap_servers, tmp_path, http_port=0, http_auth_token=TOKEN)
    with running_app(count_app(source), config) as streams:
        assert streams.http_server is not None
        address = streams.http_server.address
        body = b"0\r\n\r\n" + _HIDDEN_PAUSE
        for case, (version, framing) in _AMBIGUOUS_FRAMING.items():
            head = (
                b"POST /control/status " + version + b"\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                + b"\r\n" + framing + b"Content-Length: %d\r\n\r\n" % len(body)
            )  # fmt: skip
            with socket.create_connection((address.host, address.port), timeout=30) as sock:
                sock.sendall(head + body)
                reply, closed = _read_until_closed(sock, 5)
            assert reply.split(b" ", 2)[1:2] == [b"400"], (case, reply)
            assert reply.count(b"HTTP/1.") == 1 and closed, (case, closed, reply)
            assert not streams.is_paused(), case
        status, _, answer = http_get(f"http://{address}/control/status", token=TOKEN)
        assert status == 200 and answer["paused"] is False
        # plain chunked framing still works, on a connection that stays open
        with socket.create_connection((address.host, address.port), timeout=30) as sock:
            chunked = b"POST /health/live HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            sock.sendall(chunked)
            reply, closed = _read_until_closed(sock, 2)
        assert reply.startswith(b"HTTP/1.1 405 ") and not closed, reply


# ---------------------------------------------------------------------- slow clients


def _drip_sockets(host: str, port: int, sources: list[str], count: int) -> list[socket.socket]:
    """``count`` connections (round-robin over the ``sources`` addresses), each with a
    request head begun and never finished."""
    socks = []
    for i in range(count):
        try:
            source = (sources[i % len(sources)], 0)
            sock = socket.create_connection((host, port), timeout=2, source_address=source)
            sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\nX-Drip: ")
        except OSError:
            continue
        sock.setblocking(False)
        socks.append(sock)
    return socks


def _drip(socks: list[socket.socket]) -> list[socket.socket]:
    """Send one more byte on each socket; returns those the server has not closed."""
    alive = []
    for sock in socks:
        try:
            if sock.recv(1024) == b"":
                sock.close()
                continue
        except BlockingIOError:
            pass
        except OSError:
            sock.close()
            continue
        try:
            sock.send(b"a")
        except OSError:
            sock.close()
            continue
        alive.append(sock)
    return alive


def _live(host: str, port: int) -> bytes:
    """The status line of ``GET /health/live`` on a new connection, or why there was none (3 s)."""
    try:
        with socket.create_connection((host, port), timeout=3) as sock:
            sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            reply, _ = _read_until_closed(sock, 3)
    except OSError as exc:
        return repr(exc).encode()
    return reply.split(b"\r\n", 1)[0] or b"(no answer within 3 s)"


def _flood_while_probing(
    host: str, port: int, sources: list[str], seconds: float
) -> tuple[list[bytes], list[tuple[float, int]]]:
    """510 dripping connections from ``sources`` for ``seconds`` (a byte a second each),
    probing ``/health/live`` every second: ``(probe status lines, [(seconds in, connections
    the server still holds)])``."""
    socks = _drip_sockets(host, port, sources, 510)
    probes, held = [], []
    try:
        start = time.monotonic()
        end = start + seconds
        while time.monotonic() < end:
            probes.append(_live(host, port))
            socks = _drip(socks)
            held.append((time.monotonic() - start, len(socks)))
            time.sleep(1)
        held.append((time.monotonic() - start, len(_drip(socks))))
        return probes, held
    finally:
        for sock in socks:
            sock.close()


def test_slow_drip_connections_cannot_starve_health(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """510 connections that each send a byte a second and never finish a request head:
    ``/health/live`` keeps answering (a client's idle connections are bounded and the
    stalest give way to new ones), and no head may take longer than the deadline to arrive."""
    limits = HttpLimits()
    source = new_topic(admin, 2, "drip")
    config = app_config(bootstrap_servers, tmp_path, http_port=0, http_auth_token=TOKEN)
    with running_app(count_app(source), config) as streams:
        assert streams.http_server is not None
        host, port = streams.http_server.address.host, streams.http_server.address.port
        # one address: the client keeps connections_per_client of them; then the deadline ends all
        deadline = limits.request_timeout_s + limits.cleanup_interval_s + 3
        probes, held = _flood_while_probing(host, port, ["127.0.0.1"], deadline)
        assert all(p == b"HTTP/1.1 200 OK" for p in probes), probes
        trimmed = limits.eviction_grace_s + limits.cleanup_interval_s + 1
        assert [n for t, n in held if trimmed < t < limits.request_timeout_s - 1], held
        assert all(n <= limits.connections_per_client for t, n in held if trimmed < t), held
        assert held[-1][1] == 0, f"still open {deadline:.0f}s into dripping a request head: {held}"
        # ten addresses: the endpoint's total is reached; the stalest give way to a probe
        probes, _ = _flood_while_probing(host, port, [f"127.0.0.{i}" for i in range(2, 12)], 5)
        assert all(p == b"HTTP/1.1 200 OK" for p in probes), probes
        assert _live(host, port) == b"HTTP/1.1 200 OK"


# ---------------------------------------------------------------------- control


def test_concurrent_restarts_coalesce(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """30 ``POST /control/restart`` at once: one restart runs (202), the others are told one
    is already under way (409), and nothing is logged as failed."""
    caplog.set_level(logging.INFO, logger="platform_streams")
    source = new_topic(admin, 2, "restarts")
    config = app_config(bootstrap_servers, tmp_path, http_port=0, http_auth_token=TOKEN)
    with running_app(count_app(source), config) as streams:
        assert streams.http_server is not None
        url = f"http://{streams.http_server.address}/control/restart"
        old = [w.name for w in streams.workers]
        start = threading.Barrier(30)
        answers: list[tuple[int, dict[str, object]]] = []

        def restart() -> None:
            request = urllib.request.Request(url, method="POST", data=b"")
            request.add_header("Authorization", f"Bearer {TOKEN}")
            start.wait()
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    answers.append((response.status, json.loads(response.read())))
            except urllib.error.HTTPError as exc:
                answers.append((exc.code, json.loads(exc.read())))

        threads = [threading.Thread(target=restart) for _ in range(30)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        statuses = sorted(status for status, _ in answers)
        assert statuses == [202] + [409] * 29, statuses
        assert all("already" in str(body["error"]) for status, body in answers if status == 409), answers
        wait_until(
            lambda: [w.name for w in streams.workers] != old and streams.state().value == "RUNNING",
            60,
            "the workers replaced once and the client RUNNING again",
        )
        assert len(streams.workers) == len(old)
        failed = [
            r.getMessage() for r in caplog.records if "fail" in r.getMessage() or r.levelno >= logging.ERROR
        ]
        assert not failed, failed


# ---------------------------------------------------------------------- forwarding


class _RecordingProxy:
    """A little HTTP proxy on 127.0.0.1: records every request it gets (with its
    Authorization header) and answers each with its own error page."""

    PAGE = b"<html>proxy error page: upstream said no</html>"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                proxy.seen.append((self.requestline, self.headers.get("Authorization")))
                self.send_response(502)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(proxy.PAGE)))
                self.end_headers()
                self.wfile.write(proxy.PAGE)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def _recording_proxy() -> Iterator[_RecordingProxy]:
    proxy = _RecordingProxy()
    try:
        yield proxy
    finally:
        proxy.close()


def test_forwarding_between_instances_ignores_the_proxy_environment(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two instances started with ``http_proxy`` pointing at a recording proxy: a key
    query forwarded to the other instance goes straight to it (the proxy never sees the
    bearer token), and an owner that does not answer is a 502 naming it, not an upstream page."""
    source = new_topic(admin, 4, "proxied")
    keys = [f"k{i:02d}" for i in range(40)]
    produce(bootstrap_servers, source, [(k, "v") for k in keys])
    app_id = new_app_id("proxied")
    common = {"bootstrap": bootstrap_servers, "app_id": app_id, "input": source, "token": TOKEN}
    with _recording_proxy() as proxy:
        with monkeypatch.context() as env:  # the workers inherit it; this test's own calls do not
            for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
                env.setenv(name, proxy.url)
            for name in ("no_proxy", "NO_PROXY"):
                env.delenv(name, raising=False)
            first = QueryProcess(tmp_path / "a.log", state_dir=tmp_path / "a", **common)
            second = QueryProcess(tmp_path / "b.log", state_dir=tmp_path / "b", **common)
        try:
            url_a, url_b = first.wait_ready(), second.wait_ready()

            def owners() -> dict[str, str]:
                found = {}
                for key in keys:
                    status, _, meta = http_get(f"{url_a}/stores/{STORE}/metadata/{key}", TOKEN)
                    if status != 200 or meta["active_host"] not in (first.address, second.address):
                        return {}
                    found[key] = meta["active_host"]
                return found if set(found.values()) == {first.address, second.address} else {}

            owner = wait_until(owners, 60, "each instance owns some keys and A knows which", interval_s=0.2)
            of_b = [k for k in keys if owner[k] == second.address]
            wait_until(
                lambda: http_get(f"{url_b}/stores/{STORE}/keys/{of_b[0]}", TOKEN)[0] == 200, 30, "B counted"
            )
            for key in of_b:
                status, headers, body = http_get(f"{url_a}/stores/{STORE}/keys/{key}", TOKEN)
                # >= 1: at-least-once may count a record twice across the instances' rebalance
                assert status == 200 and body["value"] >= 1 and not body["stale"], (key, status, body)
                assert headers.get("X-Forwarded-To") == second.address
            assert proxy.seen == [], proxy.seen
            # the owner stops answering: a one-line 502 naming it, nothing of any upstream
            # (require_active: no stale copy instead, should A take over during the wait)
            second.proc.send_signal(signal.SIGSTOP)
            try:
                query = f"{url_a}/stores/{STORE}/keys/{of_b[0]}?require_active=true"
                status, _, body = http_get(query, TOKEN, timeout_s=60)
            finally:
                second.proc.send_signal(signal.SIGCONT)
            assert status == 502, (status, body)
            assert second.address in body["error"] and "\n" not in body["error"], body
            assert proxy.seen == [], proxy.seen
        finally:
            first.close()
            second.close()


def test_an_upstream_error_is_not_relayed(monkeypatch: pytest.MonkeyPatch) -> None:
    """What another "instance" answers with an error status, or a redirect, is a
    ForwardError naming the instance -- never its body, and a redirect is never followed
    (it would carry the token elsewhere)."""
    with _recording_proxy() as elsewhere:
        answers = {
            "/error": (500, b"UPSTREAM STACK TRACE with secrets", {}),
            "/moved": (302, b"", {"Location": f"{elsewhere.url}/stolen"}),
        }

        class Upstream(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body, headers = answers[self.path.split("?", 1)[0]]
                self.send_response(status)
                for name, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
        threading.Thread(target=upstream.serve_forever, daemon=True).start()
        monkeypatch.setenv("http_proxy", elsewhere.url)
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        host = HostInfo("127.0.0.1", upstream.server_address[1])
        try:
            for path in answers:
                with pytest.raises(ForwardError) as caught:
                    forward(host, path, {}, TOKEN, timeout_s=10)
                message = str(caught.value)
                assert str(host) in message and "UPSTREAM" not in message and "\n" not in message, message
                assert TOKEN not in message
        finally:
            upstream.shutdown()
            upstream.server_close()
        assert elsewhere.seen == [], elsewhere.seen
