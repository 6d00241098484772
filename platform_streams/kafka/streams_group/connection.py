"""One blocking connection to a Kafka broker speaking kio's generated message types.

The Streams group protocol (StreamsGroupHeartbeat, StreamsGroupDescribe) is not spoken by
librdkafka, so these requests go over a connection of their own. The wire format of every
message is kio's (generated from Kafka's JSON message specs); this module only frames
them: a 4-byte size, the request header, the body, and the matching response header.
TLS comes from the standard library's ``ssl`` module.

Why blocking and one request at a time: the membership loop sends one heartbeat per
interval and one commit per commit interval; pipelining would buy nothing and cost
ordering guarantees the callers would then have to rebuild.
"""

from __future__ import annotations

import io
import socket
import ssl
import struct
import threading
from typing import Any, TypeVar, cast

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32
from kio.static.protocol import Entity

from platform_streams.errors import BrokerError

__all__ = ["KafkaConnection", "split_bootstrap"]

R = TypeVar("R", bound=Entity)

_API_VERSIONS_KEY = 18


def split_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` as (host, port) pairs; a bad entry names itself."""
    out: list[tuple[str, int]] = []
    for entry in bootstrap.split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        if not sep or not port.isdigit():
            raise BrokerError(f"bootstrap.servers: {entry!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise BrokerError("bootstrap.servers is empty")
    return out


class KafkaConnection:
    """A connection to one broker; ``send(request, ResponseType)`` is thread-safe."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = "platform-streams",
        tls: ssl.SSLContext | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.host = host
        self.port = port
        self._client_id = client_id
        self._lock = threading.Lock()
        self._correlation = 0
        try:
            raw = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise BrokerError(f"cannot connect to {host}:{port}: {exc}") from exc
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock: socket.socket = tls.wrap_socket(raw, server_hostname=host) if tls else raw
        self.api_versions: dict[int, tuple[int, int]] = {}
        versions = self.send(
            ApiVersionsRequest(client_software_name="platform-streams", client_software_version="1"),
            ApiVersionsResponse,
        )
        if versions.error_code != 0:
            raise BrokerError(f"ApiVersions to {host}:{port} failed with error code {versions.error_code}")
        self.api_versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys
        }

    def supports(self, api_key: int, version: int) -> bool:
        """Whether the broker accepts ``version`` of ``api_key``."""
        span = self.api_versions.get(api_key)
        return span is not None and span[0] <= version <= span[1]

    def send(self, request: Any, response_type: type[R]) -> R:
        """Send one request and read its response (kio entity types both)."""
        api_key = int(request.__api_key__)
        version = int(request.__version__)
        with self._lock:
            self._correlation += 1
            correlation = self._correlation
            buf = io.BytesIO()
            header = RequestHeader(
                request_api_key=i16(api_key),
                request_api_version=i16(version),
                correlation_id=i32(correlation),
                client_id=self._client_id,
            )
            # Request header v2 carries tagged fields; non-flexible requests use header v1,
            # which is the same bytes without them.
            if request.__flexible__:
                entity_writer(RequestHeader)(buf, header)
            else:
                buf.write(struct.pack(">hhi", api_key, version, correlation))
                cid = self._client_id.encode()
                buf.write(struct.pack(">h", len(cid)) + cid)
            entity_writer(type(request))(buf, request)
            payload = buf.getvalue()
            try:
                self._sock.sendall(struct.pack(">i", len(payload)) + payload)
                size = struct.unpack(">i", self._read_exact(4))[0]
                body = self._read_exact(size)
            except OSError as exc:
                self.close()
                raise BrokerError(f"connection to {self.host}:{self.port} failed: {exc}") from exc
        # ApiVersions answers with response header v0 whatever its version (KIP-511).
        flexible_header = bool(getattr(response_type, "__flexible__", False)) and api_key != _API_VERSIONS_KEY
        header_type = ResponseHeaderV1 if flexible_header else ResponseHeaderV0
        got, offset = entity_reader(header_type)(body, 0)
        got = cast(ResponseHeaderV0, got)
        if int(got.correlation_id) != correlation:
            self.close()
            raise BrokerError(
                f"{self.host}:{self.port} answered correlation {got.correlation_id}, expected {correlation}"
            )
        response, _ = entity_reader(response_type)(body, offset)
        return response

    def _read_exact(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self._sock.recv(n - len(chunks))
            if not chunk:
                raise OSError("connection closed by the broker")
            chunks += chunk
        return bytes(chunks)

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass
