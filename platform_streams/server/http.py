"""The worker HTTP endpoint: one stdlib ``ThreadingHTTPServer`` per client process.

Why the standard library: the endpoint serves probes, scrapes and point queries, a few
requests per second per instance, and must add no dependency to every deployment. Each
request runs on its own daemon thread, so a slow scan or an unreachable forwarding target
never blocks probes; the worker threads are only ever touched through
:class:`~platform_streams.runtime.store_guard.StoreGuard`. The server binds to
``http_host:http_port`` (port 0: any free port, read back from :attr:`address`).
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

from platform_streams.errors import StreamsConfigError
from platform_streams.query.metadata import HostInfo
from platform_streams.server.routes import Api

if TYPE_CHECKING:
    from platform_streams.runtime.kafka_streams import KafkaStreams

__all__ = ["WorkerHttpServer"]

log = logging.getLogger(__name__)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    api: Api


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "platform-streams"

    def _answer(self) -> None:
        response = self.server.api.handle(self.command, self.path, self.headers)
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        if response.status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="platform-streams"')
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = _answer
    do_POST = _answer
    do_PUT = _answer
    do_DELETE = _answer
    do_PATCH = _answer

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s - %s", self.address_string(), format % args)


class WorkerHttpServer:
    """Serves :class:`Api` for one client until :meth:`close`."""

    def __init__(self, streams: KafkaStreams) -> None:
        config = streams.config
        host, port = config.http_host, config.http_port or 0
        try:
            self._server = _Server((host, port), _Handler)
        except OSError as exc:
            raise StreamsConfigError(f"cannot serve HTTP on {host}:{port}: {exc}") from exc
        self._server.api = Api(streams)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, name="streams-http", daemon=True
        )

    @property
    def address(self) -> HostInfo:
        """The address actually bound (the port is known even when 0 was asked for)."""
        host, port = self._server.server_address[:2]
        return HostInfo(str(host), int(port))

    def start(self) -> None:
        self._thread.start()
        log.info("HTTP endpoint on http://%s", self.address)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
