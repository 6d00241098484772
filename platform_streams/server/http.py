"""The worker HTTP endpoint: :class:`~platform_streams.server.routes.Api` served by waitress.

Why waitress, not the standard library's ``ThreadingHTTPServer``: the stdlib server has no
timeouts (an idle or half-sent connection holds a thread forever: 200 such sockets took a
worker from 29 to 223 threads and +70 MB that were never returned), a listen backlog of 5
(a 1,000-request burst overflowed it: SYNs dropped, retried a second later), never reads
request bodies (a body carrying a second request was executed as one) and prints a
traceback for every client that goes away. waitress is a mature, pure-Python (no C build)
WSGI server of the Pylons project with exactly what that needs: one I/O thread that
buffers each request whole -- headers and body, both size-capped -- before a fixed pool
of :data:`HttpLimits.threads` runs it, so a slow or idle client costs a socket, never a
thread; ``channel_timeout`` closes idle and half-sent connections; ``connection_limit``
bounds the sockets; ``backlog`` lets a burst queue in the kernel; disconnects are handled
quietly. What waitress lacks -- one reading of a request's length (no smuggling), a
deadline for a whole request to arrive, idle connections bounded per client so a flood
cannot lock the liveness probe out -- server/connections.py adds. (cheroot has the same
features but a thread per connection in flight; an ASGI stack would add an event loop
and several dependencies for routes that are synchronous.)

The server binds ``http_host:http_port`` (port 0: any free port, read back from
:attr:`WorkerHttpServer.address`). Requests run on the pool's threads; the worker threads
are only ever touched through :class:`~platform_streams.runtime.store_guard.StoreGuard`.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from waitress import wasyncore
from waitress.adjustments import Adjustments

from platform_streams.errors import StreamsConfigError
from platform_streams.query.metadata import HostInfo
from platform_streams.server.connections import Guard, GuardedServer
from platform_streams.server.routes import Api

if TYPE_CHECKING:
    from platform_streams.kafka_streams import KafkaStreams

__all__ = ["HttpLimits", "WorkerHttpServer"]

log = logging.getLogger(__name__)

# waitress warns on every request that waits for a pool thread ("Task queue depth is 3"):
# under a burst that is expected and would flood the worker's log. Unless configured otherwise.
_queue_log = logging.getLogger("waitress.queue")
if _queue_log.level == logging.NOTSET:
    _queue_log.setLevel(logging.ERROR)


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """What one endpoint may spend on its clients (tests shorten the timeouts).

    ``threads`` bounds the requests answered at once (the rest wait, already read, in a
    queue); a query forwarded to another instance holds its thread for at most the
    forwarding timeout (10 s). ``connection_limit`` bounds open sockets: at it, a new
    connection closes the one that has waited longest for a complete request (for at
    least ``eviction_grace_s`` after part of a request or after its last answer, or
    ``silent_eviction_grace_s`` without a byte); with none such, new connections wait in
    the kernel's ``backlog``. A client address keeps at most ``connections_per_client``
    connections waiting for a request (the stalest such beyond go). ``request_timeout_s`` bounds the time
    from a request's first byte to its last (head and body: a byte dripped now and then
    does not extend it); ``channel_timeout_s`` closes a connection that sent nothing for
    that long (idle keep-alive); both are checked every ``cleanup_interval_s``. Bodies (no
    route reads one) above ``max_body_bytes`` get 413. See server/connections.py.
    """

    threads: int = 8
    connection_limit: int = 500
    connections_per_client: int = 64
    backlog: int = 1024
    request_timeout_s: float = 10.0
    channel_timeout_s: float = 30.0
    eviction_grace_s: float = 1.0
    silent_eviction_grace_s: float = 5.0
    cleanup_interval_s: float = 5.0
    max_header_bytes: int = 64 * 1024
    max_body_bytes: int = 64 * 1024


class _WsgiApp:
    """Adapts :class:`Api` (method, raw target, headers) to WSGI."""

    def __init__(self, api: Api) -> None:
        self._api = api

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        # REQUEST_URI is the target as sent: PATH_INFO is already percent-decoded, which
        # would split a key holding an encoded "/" into two path segments.
        target = environ.get("REQUEST_URI") or environ.get("PATH_INFO", "/")
        headers = {"Authorization": environ.get("HTTP_AUTHORIZATION")}
        response = self._api.handle(environ["REQUEST_METHOD"], target, headers)
        reply_headers = [
            ("Content-Type", response.content_type),
            ("Content-Length", str(len(response.body))),
            *response.headers.items(),
        ]
        if response.status == 401:
            reply_headers.append(("WWW-Authenticate", 'Bearer realm="platform-streams"'))
        start_response(f"{response.status} {HTTPStatus(response.status).phrase}", reply_headers)
        return [response.body]


def _listen_socket(host: str, port: int) -> socket.socket:
    """One bound socket for ``host:port`` (a name resolving to several addresses binds the first)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) is only reachable from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class WorkerHttpServer:
    """Serves :class:`Api` for one client until :meth:`close`."""

    def __init__(self, streams: KafkaStreams, limits: HttpLimits | None = None) -> None:
        config = streams.config
        host, port = config.http_host, config.http_port or 0
        limits = limits or HttpLimits()
        try:
            sock = _listen_socket(host, port)
        except OSError as exc:
            raise StreamsConfigError(f"cannot serve HTTP on {host}:{port}: {exc}") from exc
        adjustments = Adjustments(
            sockets=[sock],
            threads=limits.threads,
            connection_limit=limits.connection_limit,
            backlog=limits.backlog,
            channel_timeout=limits.channel_timeout_s,
            cleanup_interval=limits.cleanup_interval_s,
            max_request_header_size=limits.max_header_bytes,
            max_request_body_size=limits.max_body_bytes,
            asyncore_use_poll=True,  # select() cannot watch descriptors above 1024
            log_socket_errors=False,  # a client that goes away is not the server's error
            expose_tracebacks=False,
            ident="platform-streams",
        )
        guard = Guard(
            limits.connections_per_client,
            limits.request_timeout_s,
            limits.eviction_grace_s,
            limits.silent_eviction_grace_s,
        )
        self._server = GuardedServer(
            _WsgiApp(Api(streams)),
            guard,
            map={},
            _sock=sock,
            adj=adjustments,
            bind_socket=False,
            sockinfo=(sock.family, sock.type, sock.proto, sock.getsockname()),
        )
        self._stopping = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="streams-http", daemon=True)
        if config.http_auth_token is None and not is_loopback(host):
            log.warning(
                "the HTTP endpoint listens on %s without http_auth_token: anyone who can reach it "
                "can read the stores and pause or restart the application (set a token, or restrict "
                "access, e.g. with a NetworkPolicy)",
                host,
            )

    @property
    def address(self) -> HostInfo:
        """The address actually bound (the port is known even when 0 was asked for)."""
        host, port = self._server.socket.getsockname()[:2]
        return HostInfo(str(host), int(port))

    def start(self) -> None:
        self._thread.start()
        log.info("HTTP endpoint on http://%s", self.address)

    def _serve(self) -> None:
        """waitress's I/O loop (``server.run``), one poll at a time until :meth:`close` stops it."""
        server = self._server
        while server._map and not self._stopping.is_set():
            wasyncore.loop(timeout=server.adj.asyncore_loop_timeout, use_poll=True, map=server._map, count=1)

    def close(self) -> None:
        """Stop the I/O loop, let requests in flight finish (5 s), then close every socket.

        Why in this order, and the sockets closed here rather than on the I/O thread: waitress
        wakes its loop through a pipe (the trigger) that the pool's threads write to after
        each response. A close done inside the loop (a thunk handed to ``pull_trigger``)
        raced with that: the loop, woken by a response, could run the thunk -- closing the
        pipe -- before ``pull_trigger`` had written its own byte, which then went to a closed
        descriptor (OSError EBADF at teardown under load) or to whatever had reused its
        number. Now the pipe is closed last, once no thread is left that could write to it.
        """
        if self._closed:
            return
        self._closed = True
        server = self._server
        if self._thread.is_alive():
            self._stopping.set()
            server.pull_trigger()  # wake the loop now rather than after its poll timeout
            self._thread.join(5)
        server.task_dispatcher.shutdown(timeout=5)
        if self._thread.is_alive() or server.task_dispatcher.threads:
            # a thread that is still running may pull the trigger: keep its pipe open (two
            # descriptors) rather than let it write to a closed or reused one
            log.warning("HTTP endpoint: threads still running after 5 s; its wake-up pipe stays open")
            for channel in list(server._map.values()):
                if channel is not server.trigger:
                    wasyncore.dispatcher.close(channel)
            server._map.clear()
        else:
            wasyncore.close_all(server._map)
