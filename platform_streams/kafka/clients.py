"""Factories for librdkafka clients: the one place where Kafka clients get built.

Going through these factories (instead of calling ``Consumer(conf)`` directly) gives
every client of the library the same three guarantees:

* the configuration is checked before librdkafka sees it (keys must be strings), and a
  librdkafka configuration error becomes a :class:`StreamsConfigError` (a ``ValueError``)
  that names the key *as the caller spelled it*, even when librdkafka reports the
  canonical name of an alias (``acks`` is reported as ``request.required.acks``);
* the effective configuration is logged at DEBUG with secrets redacted, so "which
  settings did this client really run with" is answerable from the logs;
* ``allow.auto.create.topics`` defaults to ``false``: brokers such as Tansu create any
  unknown topic a producer writes to or a metadata request names, with a default
  partition count, which would silently break co-partitioning. Topics are always
  created explicitly (see :class:`platform_streams.kafka.admin.KafkaAdmin`). A caller
  may still set it to ``true`` explicitly;
* librdkafka's own log lines go to Python logging, at DEBUG, on the logger
  ``platform_streams.kafka.librdkafka`` (their librdkafka level is in the text): left to
  itself librdkafka prints to stderr, and an unreachable broker alone is ~20 ``FAIL``
  lines a second that bury the one line saying what is wrong. A caller's own ``logger``
  is kept.
"""

from __future__ import annotations

import logging
import re
import ssl
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from platform_streams.errors import StreamsConfigError
from platform_streams.kafka.errors import as_kafka_error

__all__ = [
    "LibrdkafkaLog",
    "create_admin",
    "create_consumer",
    "create_producer",
    "group_membership",
    "redact_config",
]

_log = logging.getLogger(__name__)

_ClientT = TypeVar("_ClientT")

# Substrings of configuration keys whose values must never reach a log line.
_SECRET_MARKERS: tuple[str, ...] = (
    "password",
    "secret",
    "jaas",
    "token",
    "credential",
    "oauthbearer.config",
    "ssl.key.pem",
    "ssl_key",
    "ssl.keystore",
    "basic.auth",
    "private",
)

_REDACTED = "[redacted]"

# librdkafka reports the offending property inside double quotes.
_PROPERTY_IN_MESSAGE = re.compile(r'property:?\s*"([^"]+)"')


def redact_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of ``conf`` that is safe to log: secrets and callables are masked."""
    safe: dict[str, Any] = {}
    for key, value in conf.items():
        lowered = str(key).lower()
        if any(marker in lowered for marker in _SECRET_MARKERS):
            safe[key] = _REDACTED
        elif callable(value):
            safe[key] = f"<callable {getattr(value, '__qualname__', type(value).__name__)}>"
        else:
            safe[key] = value
    return safe


class LibrdkafkaLog:
    """The ``logger`` given to every client: librdkafka's lines at DEBUG (module docstring).

    confluent-kafka calls ``log(level, "%s [%s] %s", facility, client name, text)`` from the
    client's poll/flush/consume; the level it maps from syslog goes into the message.
    """

    def __init__(self, name: str = "platform_streams.kafka.librdkafka") -> None:
        self._log = logging.getLogger(name)

    def log(self, level: int, msg: str, *args: object) -> None:
        if self._log.isEnabledFor(logging.DEBUG):
            self._log.debug("%s " + msg, logging.getLevelName(level), *args)


_LIBRDKAFKA_LOG = LibrdkafkaLog()


# The last authentication or TLS failure of any client, per bootstrap.servers: librdkafka
# reports those only to the error callback and retries, so a request that then times out
# says "transport failure" -- the callers that fail name this instead (credential_error).
_credential_errors: dict[str, str] = {}
_CREDENTIAL_MARKERS = ("authentication", "ssl handshake failed", "certificate", "ssl routines")


def _record_credential_error(servers: str, error: KafkaError) -> None:
    text = error.str()
    if error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL) or any(
        marker in text.lower() for marker in _CREDENTIAL_MARKERS
    ):
        _credential_errors[servers] = text


def credential_error(conf: Mapping[str, Any]) -> str | None:
    """The last authentication/TLS failure seen by a client of ``conf``'s bootstrap servers,
    led by the reason when it is our own certificate's dates (:func:`_certificate_dates`)."""
    seen = _credential_errors.get(str(conf.get("bootstrap.servers", "")))
    if seen is None:
        return None
    dates = _certificate_dates(conf)
    return f"{dates} (the broker answered: {seen})" if dates else seen


def _certificate_dates(conf: Mapping[str, Any]) -> str | None:
    """"our certificate X expired on D" (or is not valid yet), else None.

    Why look: a Java broker answers a client certificate that is out of date with the TLS
    alert "certificate unknown", the same as for one from an unknown CA, so the client's
    error alone does not say what to fix. The file is read with the ``ssl`` module's
    certificate decoder (no extra dependency); any failure to read it means no hint.
    """
    path = conf.get("ssl.certificate.location")
    if not path:
        return None
    try:
        decoded = ssl._ssl._test_decode_cert(str(path))  # type: ignore[attr-defined]
        not_before, not_after = (ssl.cert_time_to_seconds(decoded[k]) for k in ("notBefore", "notAfter"))
    except (AttributeError, KeyError, OSError, ValueError, ssl.SSLError):
        return None
    now = time.time()
    if now > not_after:
        return f"our certificate {path} expired on {decoded['notAfter']}"
    if now < not_before:
        return f"our certificate {path} is not valid before {decoded['notBefore']}"
    return None


def _prepared(conf: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """Validate key types and apply the library-wide defaults (see module docstring)."""
    bad = [key for key in conf if not isinstance(key, str)]
    if bad:
        raise StreamsConfigError(
            f"{kind} configuration keys must be str, got {', '.join(repr(k) for k in bad)}"
        )
    prepared = dict(conf)
    prepared.setdefault("allow.auto.create.topics", False)
    prepared.setdefault("logger", _LIBRDKAFKA_LOG)
    if "error_cb" not in prepared and prepared.get("security.protocol"):
        servers = str(prepared.get("bootstrap.servers", ""))
        prepared["error_cb"] = lambda error: _record_credential_error(servers, error)
    return prepared


def _culprit_key(
    build: Callable[[dict[str, Any]], object], conf: Mapping[str, Any], base: Mapping[str, Any]
) -> str | None:
    """Find which of the caller's keys librdkafka rejects by trying them one at a time.

    Only used on the error path, when librdkafka named a property the caller did not
    write (an alias, or a key rejected for its value type). ``log_level=0`` keeps the
    throw-away clients quiet.
    """
    for key, value in conf.items():
        if key in base:
            continue
        try:
            build({**base, "log_level": 0, key: value})
        except (KafkaException, ValueError, TypeError):
            return key
    return None


def _build(
    factory: Callable[[dict[str, Any]], _ClientT],
    conf: Mapping[str, Any],
    kind: str,
    probe_base: Mapping[str, Any],
) -> _ClientT:
    """Create a client, turning librdkafka config errors into a StreamsConfigError."""
    prepared = _prepared(conf, kind)
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug("creating Kafka %s with config %s", kind, redact_config(prepared))
    try:
        return factory(prepared)
    except (KafkaException, ValueError, TypeError) as exc:
        err = as_kafka_error(exc)
        reason = err.str() if err is not None else str(exc)
        match = _PROPERTY_IN_MESSAGE.search(reason)
        named = match.group(1) if match else None
        key = named if named in prepared else _culprit_key(factory, prepared, probe_base)
        if key is None and "group.id" in reason:
            key = "group.id"
        if key is None:
            raise StreamsConfigError(f"invalid Kafka {kind} configuration: {reason}") from exc
        shown = redact_config({key: prepared.get(key)})[key]
        alias = f" (librdkafka property {named!r})" if named and named != key else ""
        raise StreamsConfigError(
            f"invalid Kafka {kind} configuration key {key!r}={shown!r}{alias}: {reason}"
        ) from exc


def create_consumer(conf: Mapping[str, Any]) -> Consumer:
    """Create a ``Consumer``; ``group.id`` is required by librdkafka even for assign()."""
    return _build(Consumer, conf, "consumer", {"group.id": "platform-streams-config-check"})


def create_producer(conf: Mapping[str, Any]) -> Producer:
    """Create a ``Producer`` (transactional or not: that is decided by ``conf``)."""
    return _build(Producer, conf, "producer", {})


def create_admin(conf: Mapping[str, Any]) -> AdminClient:
    """Create a raw ``AdminClient``; most code wants :class:`KafkaAdmin` instead."""
    return _build(AdminClient, conf, "admin", {})


#: librdkafka's serialized consumer group metadata: this magic, then the generation (int32)
_GROUP_METADATA_MAGIC = b"CGMDv2:"


def group_membership(consumer: Consumer) -> tuple[str | None, int | None]:
    """The consumer's member id and the generation it last joined (None when unknown).

    For log lines about a rebalance that does not finish. confluent-kafka exposes the
    member id, and the generation only inside the serialized group metadata (librdkafka's
    ``rd_kafka_consumer_group_metadata_write``: magic, generation in host byte order, ...);
    an unknown layout gives None rather than a wrong number.
    """
    try:
        member = consumer.memberid() or None
        raw = consumer.consumer_group_metadata()
    except (KafkaException, RuntimeError):
        return None, None
    if isinstance(raw, bytes) and raw.startswith(_GROUP_METADATA_MAGIC) and len(raw) >= 11:
        offset = len(_GROUP_METADATA_MAGIC)
        return member, int.from_bytes(raw[offset : offset + 4], sys.byteorder, signed=True)
    return member, None
