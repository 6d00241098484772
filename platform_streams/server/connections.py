"""How the worker endpoint's waitress server guards its connections.

Three things waitress alone does not do:

* **One reading of a request's length.** A request carrying both ``Content-Length`` and
  ``Transfer-Encoding``, two ``Content-Length`` fields, ``chunked`` more than once, or a
  ``Transfer-Encoding`` in an HTTP/1.0 request can be framed two ways: a proxy in front
  that reads one length and this server that reads the other disagree on where the body
  ends, and what one takes for body bytes the other runs as a second request (request
  smuggling). RFC 9112 section 6.1 and 6.3: such a request is a 400 and the connection
  is closed after it, so nothing sent behind it on that connection runs. (waitress would
  take the chunked framing, ignore the length, and keep the connection open; it already
  answers 501 and closes for a transfer coding it does not implement.)
* **A deadline for each request to arrive.** waitress's ``channel_timeout`` counts from
  the last byte received, so a client that drips a byte every few seconds holds its
  connection forever. Here a request's head and body must arrive within
  :attr:`Guard.request_timeout_s` of its first byte (checked every cleanup interval).
* **Idle connections bounded per client and in total, the stalest giving way.** waitress
  stops accepting at its connection limit: 500 dripping connections then lock everyone
  out, the liveness probe included, until they leave. Here a connection is *stalled*
  while it waits for a complete request -- part of one sent, or idle after its last
  answer -- for at least :attr:`Guard.grace_s`, or has sent nothing at all for
  :attr:`Guard.silent_grace_s` (longer: a client opening many connections at once may
  take seconds to write on each, and a burst must not be cut short). A client address
  with :attr:`Guard.per_client` waiting connections that opens another loses its
  stalest stalled one, and every cleanup interval each client is trimmed to that many;
  at the total limit the endpoint keeps accepting while any connection is stalled and
  closes the stalest for each new one. A probe that sends its request at once is never the stalest, so it gets
  in whatever a flood holds. Connections with a request read or being answered are never
  closed for room: a burst of real requests waits in the kernel's backlog as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser, ParsingError, TransferEncodingNotImplemented, get_header_lines
from waitress.server import TcpWSGIServer

__all__ = ["Guard", "GuardedServer", "framing_error"]

log = logging.getLogger(__name__)

_REPORT_EVERY_S = 60.0


@dataclass(frozen=True, slots=True)
class Guard:
    """The limits :class:`GuardedServer` enforces beyond waitress's own (module docstring)."""

    per_client: int
    request_timeout_s: float
    grace_s: float
    silent_grace_s: float


def framing_error(header_plus: bytes) -> str | None:
    """Why the request head ``header_plus`` (request line and fields) has ambiguous
    framing, or None. Reads the raw fields: waitress joins repeated ones with commas."""
    request_line, _, fields = header_plus.partition(b"\r\n")
    lengths = 0
    encodings = 0
    codings: list[bytes] = []
    for line in get_header_lines(fields):
        name, colon, value = line.partition(b":")
        normal = name.strip(b" \t").lower().replace(b"_", b"-")
        if not colon or normal not in (b"content-length", b"transfer-encoding"):
            continue
        if normal != name.lower():
            return f"malformed field name {name.decode('latin-1')!r}"
        if normal == b"content-length":
            lengths += 1
        else:
            encodings += 1
            codings += [c.strip(b" \t").lower() for c in value.split(b",") if c.strip(b" \t")]
    if lengths > 1:
        return "more than one Content-Length field"
    if not encodings:
        return None
    if lengths:
        return "both Content-Length and Transfer-Encoding (RFC 9112 section 6.1)"
    if request_line.rstrip().endswith(b"HTTP/1.0"):
        return "Transfer-Encoding in an HTTP/1.0 request (RFC 9112 section 6.1)"
    if codings.count(b"chunked") > 1:
        return "chunked applied more than once (RFC 9112 section 6.1)"
    return None


class _StrictParser(HTTPRequestParser):
    def parse_header(self, header_plus: bytes) -> None:
        problem = framing_error(header_plus)
        # parse first so that the 400 carries the request's HTTP version
        try:
            super().parse_header(header_plus)
        except TransferEncodingNotImplemented:
            if problem is None:
                raise  # 501, and waitress closes the connection
        if problem is not None:
            # waitress answers a ParsingError with 400 and closes the connection after it
            raise ParsingError(f"ambiguous request framing: {problem}")


class _GuardedChannel(HTTPChannel):
    parser_class = _StrictParser
    #: when the request being read got its first byte (meaningful while one is read)
    request_started = 0.0
    #: whether the client has sent anything yet
    spoke = False

    def __init__(self, server: GuardedServer, sock: Any, addr: Any, adj: Any, map: Any = None) -> None:
        super().__init__(server, sock, addr, adj, map)
        #: the client's address (its port left out): what the per-client limit counts by
        self.client = str(addr[0]) if isinstance(addr, tuple) and addr else str(addr)
        server.joined(self)

    def received(self, data: bytes) -> bool:
        before = self.request
        self.spoke = self.spoke or bool(data)
        done: bool = super().received(data)
        if self.request is not None and self.request is not before:
            self.request_started = time.time()
        return done

    def del_channel(self, map: Any = None) -> None:
        self.server.left(self)
        super().del_channel(map)

    def stalled_since(self, now: float, guard: Guard) -> float | None:
        """Since when this connection has waited for a complete request, if stalled (see
        the module docstring) and nothing is read, answered or being sent; else None."""
        if self.requests or self.total_outbufs_len or self.will_close or self.close_when_flushed:
            return None
        if self.request is not None:
            since, grace = self.request_started, guard.grace_s
        elif self.spoke:  # idle after an answer (or after the client's last byte)
            since, grace = self.last_activity, guard.grace_s
        else:
            since, grace = self.creation_time, guard.silent_grace_s
        return since if now - since >= grace else None


class GuardedServer(TcpWSGIServer):
    """waitress's TCP server with :class:`Guard`'s limits (see the module docstring)."""

    channel_class = _GuardedChannel
    # waitress's own (declared on its untyped base class)
    next_channel_cleanup: float = 0.0
    in_connection_overflow: bool = False

    def __init__(self, application: Any, guard: Guard, **kw: Any) -> None:
        self.guard = guard
        self._clients: dict[str, set[_GuardedChannel]] = {}
        self._closed_for_room = 0
        self._reported_at = 0.0
        super().__init__(application, **kw)

    # -- bookkeeping (I/O thread) ------------------------------------------------------

    def joined(self, channel: _GuardedChannel) -> None:
        self._clients.setdefault(channel.client, set()).add(channel)

    def left(self, channel: _GuardedChannel) -> None:
        client: str = getattr(channel, "client", "")
        peers = self._clients.get(client)
        if peers is not None:
            peers.discard(channel)
            if not peers:
                del self._clients[client]

    def _stalest(self, channels: Iterable[_GuardedChannel], now: float) -> _GuardedChannel | None:
        best: tuple[float, _GuardedChannel] | None = None
        for channel in channels:
            since = channel.stalled_since(now, self.guard)
            if since is not None and (best is None or since < best[0]):
                best = (since, channel)
        return best[1] if best is not None else None

    # -- waitress's hooks ----------------------------------------------------------------

    def readable(self) -> bool:
        """Accept while below the total, or while a stalled connection can make room."""
        now = time.time()
        if now >= self.next_channel_cleanup:
            self.next_channel_cleanup = now + self.adj.cleanup_interval
            self.maintenance(now)
        if not self.accepting:
            return False
        full = len(self.active_channels) >= self.adj.connection_limit
        blocked = full and self._stalest(self.active_channels.values(), now) is None
        if blocked and not self.in_connection_overflow:
            log.warning(
                "HTTP endpoint: %d connections, each with a request under way: new ones wait in the backlog",
                len(self.active_channels),
            )
        self.in_connection_overflow = blocked
        return not blocked

    def handle_accept(self) -> None:
        try:
            pair = self.accept()
            if pair is None:
                return
            sock, addr = pair
            self.set_socket_options(sock)
        except OSError:  # the client went away before its connection was accepted
            return
        self._admit(self.channel_class(self, sock, addr, self.adj, map=self._map))

    def _admit(self, channel: _GuardedChannel) -> None:
        """Make room for ``channel`` if its client or the endpoint is at its limit.

        Nothing stalled to close: it is let in anyway (a probe must not be refused because
        a flood's connections are younger than the grace); the total stays bounded because
        :meth:`readable` stops accepting, and :meth:`maintenance` trims each client later.
        """
        now = time.time()
        waiting = [c for c in self._clients.get(channel.client, ()) if c is not channel and not c.requests]
        if len(waiting) >= self.guard.per_client:
            self._make_room(self._stalest(waiting, now))
        if len(self.active_channels) > self.adj.connection_limit:
            others = (c for c in self.active_channels.values() if c is not channel)
            self._make_room(self._stalest(others, now))
        self._report(now)

    def _make_room(self, victim: _GuardedChannel | None) -> None:
        if victim is not None:
            self._closed_for_room += 1
            victim.handle_close()

    def _report(self, now: float) -> None:
        """One warning a minute at most: a flood must not flood the log too."""
        if not self._closed_for_room or now - self._reported_at < _REPORT_EVERY_S:
            return
        log.warning(
            "HTTP endpoint: closed %d stalled connections to make room "
            "(at most %d waiting per client address, %d connections in total)",
            self._closed_for_room,
            self.guard.per_client,
            self.adj.connection_limit,
        )
        self._reported_at = now
        self._closed_for_room = 0

    def maintenance(self, now: float) -> None:
        """waitress's idle timeout, the deadline of a request under way, and each client
        trimmed to its limit of waiting connections (the stalest stalled ones go)."""
        super().maintenance(now)
        cutoff = now - self.guard.request_timeout_s
        for channel in list(self.active_channels.values()):
            if channel.request is not None and not channel.requests and channel.request_started < cutoff:
                channel.will_close = True
        for peers in list(self._clients.values()):
            waiting = [c for c in peers if not c.requests and not c.will_close]
            excess = len(waiting) - self.guard.per_client
            if excess > 0:
                guard = self.guard
                stalled = [(since, c) for c in waiting if (since := c.stalled_since(now, guard)) is not None]
                for _, channel in sorted(stalled, key=lambda pair: pair[0])[:excess]:
                    channel.will_close = True
                    self._closed_for_room += 1
        self._report(now)
