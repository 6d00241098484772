"""One blocking connection to a Kafka broker speaking kio's generated message types.

The Streams group protocol (StreamsGroupHeartbeat, StreamsGroupDescribe) is not spoken by
librdkafka, so these requests go over a connection of their own. The wire format of every
message is kio's (generated from Kafka's JSON message specs); this module only frames
them: a 4-byte size, the request header, the body, and the matching response header.
TLS comes from the standard library's ``ssl`` module; SASL (PLAIN, SCRAM) is Kafka's
SaslHandshake/SaslAuthenticate exchange right after ApiVersions, with the mechanism's
messages from :mod:`.security`.

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
import time
from typing import Any, TypeVar, cast

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest as SaslAuthenticateV1
from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse as SaslAuthenticateResponseV1
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest as SaslAuthenticateV2
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse as SaslAuthenticateResponseV2
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32
from kio.static.protocol import Entity

from platform_streams.errors import BrokerError
from platform_streams.kafka.streams_group.security import ConnectionSecurity, sasl_first_message

__all__ = ["AuthenticationFailed", "KafkaConnection", "split_bootstrap"]

R = TypeVar("R", bound=Entity)

_API_VERSIONS_KEY = 18
_SASL_AUTHENTICATE_KEY = 36


class AuthenticationFailed(BrokerError):
    """The broker refused the SASL mechanism or the credentials: every broker of the cluster
    would, so callers do not try the next one."""


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"


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
        security: ConnectionSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._client_id = client_id
        self._lock = threading.Lock()
        self._correlation = 0
        #: when the broker's SASL session ends (``connections.max.reauth.ms``): the owner
        #: connects again before then (:meth:`session_expiring`); None: it does not end
        self.session_ends_at: float | None = None
        tls = security.tls if security is not None and security.tls is not None else tls
        try:
            raw = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise BrokerError(f"cannot connect to {host}:{port}: {exc}") from exc
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._sock: socket.socket = tls.wrap_socket(raw, server_hostname=host) if tls else raw
        except OSError as exc:
            raw.close()
            raise BrokerError(f"TLS handshake with {host}:{port} failed: {exc}") from exc
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
        if security is not None and security.mechanism is not None:
            try:
                self._authenticate(security)
            except BrokerError:
                self.close()
                raise

    def _authenticate(self, security: ConnectionSecurity) -> None:
        """SaslHandshake, then SaslAuthenticate until the mechanism is done. A refusal is one
        line naming the mechanism and the broker's reason, never the credentials."""
        mechanism = security.mechanism
        where = f"{self.host}:{self.port}"
        shake = self.send(SaslHandshakeRequest(mechanism=str(mechanism)), SaslHandshakeResponse)
        if shake.error_code != 0:
            raise AuthenticationFailed(
                f"SASL handshake with {where} failed: the broker does not enable sasl.mechanism "
                f"{mechanism} (it enables: {', '.join(shake.mechanisms) or 'none'})"
            )
        v2 = self.supports(_SASL_AUTHENTICATE_KEY, 2)
        message: bytes | None
        message, step = sasl_first_message(security)
        lifetime_ms = 0
        while message is not None:
            answer: SaslAuthenticateResponseV1 | SaslAuthenticateResponseV2
            if v2:
                answer = self.send(SaslAuthenticateV2(auth_bytes=message), SaslAuthenticateResponseV2)
            else:
                answer = self.send(SaslAuthenticateV1(auth_bytes=message), SaslAuthenticateResponseV1)
            if answer.error_code != 0:
                reason = " ".join((answer.error_message or "").split()) or "no reason given"
                raise AuthenticationFailed(
                    f"SASL authentication failed at {where} (sasl.mechanism {mechanism}): "
                    f"{_error_name(int(answer.error_code))}: {reason}"
                )
            lifetime_ms = int(answer.session_lifetime.total_seconds() * 1000)
            message = step(answer.auth_bytes)
        if lifetime_ms > 0:
            # connect again at 85% of the session (librdkafka re-authenticates at 90%)
            self.session_ends_at = time.monotonic() + lifetime_ms * 0.85 / 1000.0

    def session_expiring(self) -> bool:
        """Whether the SASL session is about to end: the broker closes the connection then."""
        return self.session_ends_at is not None and time.monotonic() >= self.session_ends_at

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
