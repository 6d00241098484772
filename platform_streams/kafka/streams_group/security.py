"""The streams-group connection's security, from the application's librdkafka-style settings.

The heartbeats, describes and commits of a streams member go over the project's own
connection (:mod:`.connection`), not librdkafka's, yet they must reach the broker as the same
principal as the application's other clients. So this module reads the properties those
clients are given (``security.protocol``, ``ssl.*``, ``sasl.*``) with librdkafka's meaning
and defaults, and turns them into a stdlib ``ssl`` context and a SASL exchange over Kafka's
SaslHandshake/SaslAuthenticate messages: PLAIN (one exchange) and SCRAM-SHA-256/512 (the
``scramp`` library; SCRAM is not written here). GSSAPI and OAUTHBEARER need token machinery
this connection does not have: they are refused naming the mechanism, as is every property
that would change how the connection authenticates and that cannot be honoured (a PKCS#12
keystore, in-memory PEM keys) -- silently ignoring one would connect as someone else, or not
verify the broker.

No error names a credential's value: they name the property, the mechanism and the
broker's reason.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from platform_streams.errors import BrokerError

__all__ = [
    "SASL_MECHANISMS",
    "ConnectionSecurity",
    "connection_security",
    "sasl_first_message",
    "security_properties",
]

#: the SASL mechanisms the streams-group connection speaks
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: properties that change how the connection authenticates and that it cannot honour
_REFUSED = {
    "ssl.keystore.location": "a PKCS#12 keystore; use ssl.certificate.location and ssl.key.location (PEM)",
    "ssl.certificate.pem": "an in-memory certificate; use ssl.certificate.location",
    "ssl.key.pem": "an in-memory key; use ssl.key.location",
    "ssl.engine.location": "an OpenSSL engine",
    "ssl.providers": "OpenSSL providers",
    "ssl.crl.location": "a certificate revocation list",
}
_PREFIXES = ("security.", "ssl.", "ssl_", "sasl.", "enable.ssl.")


def security_properties(conf: Mapping[str, Any]) -> dict[str, str]:
    """The connection-security properties of a librdkafka client's settings (``security.protocol``,
    ``ssl.*``, ``sasl.*``); the rest (group, fetch, client id ...) is not this connection's."""
    return {k: str(v) for k, v in conf.items() if k.startswith(_PREFIXES)}


@dataclass(frozen=True)
class ConnectionSecurity:
    """How to secure one connection: TLS context (or None) and SASL mechanism (or None)."""

    protocol: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = field(default="", repr=False)


def _flag(props: Mapping[str, str], key: str, default: bool) -> bool:
    value = props.get(key)
    if value is None:
        return default
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise BrokerError(f"{key} must be true or false, got {value!r}")


def _tls_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """librdkafka's TLS settings as an ``ssl.SSLContext`` (verify the broker by default, with
    the system's CAs unless ``ssl.ca.location``/``ssl.ca.pem`` says otherwise)."""
    for key, why in _REFUSED.items():
        if props.get(key):
            raise BrokerError(
                f"{key} is not supported by the streams-group connection (group_protocol='streams'): {why}"
            )
    ca_location = props.get("ssl.ca.location", "").strip()
    ca_pem = props.get("ssl.ca.pem", "").strip()
    try:
        if ca_location and ca_location != "probe":
            if os.path.isdir(ca_location):
                context = ssl.create_default_context(capath=ca_location)
            else:
                context = ssl.create_default_context(cafile=ca_location)
        else:
            context = ssl.create_default_context()
        if ca_pem:
            context.load_verify_locations(cadata=ca_pem)
    except (OSError, ssl.SSLError) as exc:
        raise BrokerError(f"ssl.ca.location/ssl.ca.pem: cannot load the CA certificates: {exc}") from exc
    # librdkafka's default since 2.0 is "https": the broker's certificate must name the host
    identification = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if identification not in ("https", "none", ""):
        raise BrokerError(
            f"ssl.endpoint.identification.algorithm must be https or none, got {identification!r}"
        )
    context.check_hostname = identification == "https"
    if not _flag(props, "enable.ssl.certificate.verification", True):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert = props.get("ssl.certificate.location", "").strip()
    key = props.get("ssl.key.location", "").strip()
    if key and not cert:
        raise BrokerError("ssl.key.location is set without ssl.certificate.location")
    if cert:
        key_password = props.get("ssl.key.password") or None
        try:
            context.load_cert_chain(cert, key or None, password=key_password)
        except (OSError, ssl.SSLError) as exc:
            # the reason is OpenSSL's (never the password); a wrong ssl.key.password reads as
            # a key that cannot be decrypted
            raise BrokerError(
                f"ssl.certificate.location/ssl.key.location: cannot load the client certificate "
                f"{cert!r}: {getattr(exc, 'reason', None) or exc.strerror or type(exc).__name__}"
            ) from exc
    ciphers = props.get("ssl.cipher.suites", "").strip()
    if ciphers:
        try:
            context.set_ciphers(ciphers)
        except ssl.SSLError as exc:
            raise BrokerError(f"ssl.cipher.suites: {ciphers!r} selects no cipher") from exc
    return context


def connection_security(props: Mapping[str, Any] | None) -> ConnectionSecurity:
    """Read librdkafka-style ``props`` (None: PLAINTEXT); a bad or unsupported setting raises
    :class:`BrokerError` naming the property."""
    props = {str(k): str(v) for k, v in (props or {}).items()}
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in _PROTOCOLS:
        raise BrokerError(f"security.protocol must be one of {', '.join(_PROTOCOLS)}, got {protocol!r}")
    tls = _tls_context(props) if protocol in ("SSL", "SASL_SSL") else None
    if not protocol.startswith("SASL_"):
        return ConnectionSecurity(protocol, tls)
    # librdkafka's default mechanism is GSSAPI
    mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "GSSAPI").strip()
    if mechanism not in SASL_MECHANISMS:
        raise BrokerError(
            f"sasl.mechanism {mechanism} is not supported by the streams-group connection "
            f"(group_protocol='streams'); it speaks {', '.join(SASL_MECHANISMS)}"
        )
    username, password = props.get("sasl.username", ""), props.get("sasl.password", "")
    if not username or not password:
        missing = "sasl.username" if not username else "sasl.password"
        raise BrokerError(f"{missing} is required for sasl.mechanism {mechanism}")
    return ConnectionSecurity(protocol, tls, mechanism, username, password)


#: one SASL exchange: the client's message, the server's answer -> the next message or None
SaslStep = Callable[[bytes], bytes | None]


def sasl_first_message(security: ConnectionSecurity) -> tuple[bytes, SaslStep]:
    """The mechanism's first message and the function that answers each server message
    (None once the client has nothing more to send; a bad server answer raises)."""
    if security.mechanism == "PLAIN":
        # RFC 4616: authzid (empty), authcid, password, NUL-separated; the broker's answer is empty
        first = b"\x00" + security.username.encode() + b"\x00" + security.password.encode()
        return first, lambda _answer: None
    from scramp import ScramClient, ScramException

    client = ScramClient([security.mechanism], security.username, security.password)
    state = {"sent_final": False}

    def step(answer: bytes) -> bytes | None:
        try:
            if not state["sent_final"]:
                client.set_server_first(answer.decode())
                state["sent_final"] = True
                return str(client.get_client_final()).encode()
            client.set_server_final(answer.decode())
            return None
        except ScramException as exc:
            raise BrokerError(f"{security.mechanism}: the broker's answer did not verify ({exc})") from exc

    return str(client.get_client_first()).encode(), step
