"""Ask librdkafka whether a client property exists (and takes a value) without making a client.

Why: a typo in a pass-through setting (``num.stream.thread`` instead of
``num.stream.threads``) used to surface only when the first Kafka client was created,
deep inside ``start()``, as a librdkafka error that said neither where the key came from
nor what was meant. The settings layer calls :func:`client_property_problem` while it
validates, so the error names the key, its layer and a suggestion, and exits as a
configuration error.

How: confluent-kafka applies a configuration dict to a fresh ``rd_kafka_conf_t`` in
order, before it creates anything. A dict of the property under test followed by a
property that cannot exist (:data:`_SENTINEL`) therefore always fails in that phase --
on the tested key if librdkafka rejects it (unknown, or a bad value), else on the
sentinel -- and no client, thread or connection is ever made. Which client class is used
matters only for the keys confluent-kafka handles itself (``on_commit`` is a consumer
callback, ``on_delivery`` a producer one).

:func:`known_property_names` lists librdkafka properties for suggestions: librdkafka has
no API that lists them, so a list taken from its CONFIGURATION.md is filtered through
librdkafka itself (a name this librdkafka does not know is never suggested).
"""

from __future__ import annotations

import functools
import re
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaException, Producer

from platform_streams.kafka.errors import as_kafka_error

__all__ = ["ClientRole", "client_property_problem", "known_property_names"]

#: which librdkafka client a property is meant for: ``consumer`` checks with a consumer
#: (consumer-only callbacks), the rest with a producer (the admin client is one too)
ClientRole = Literal["client", "consumer", "producer", "admin"]

_SENTINEL = "platform.streams.no.such.property"
_NO_SUCH = re.compile(r'No such configuration property:?\s*"([^"]+)"')
_SECRET_MARKERS = ("password", "secret", "jaas", "token", "credential", "oauthbearer.config", "key.pem")

# Global and topic properties of librdkafka 2.x (CONFIGURATION.md), callbacks and
# deprecated ones left out: the candidates for "did you mean".
_CANDIDATES = """
builtin.features client.id metadata.broker.list bootstrap.servers message.max.bytes
message.copy.max.bytes receive.message.max.bytes max.in.flight.requests.per.connection max.in.flight
metadata.recovery.strategy metadata.recovery.rebootstrap.trigger.ms topic.metadata.refresh.interval.ms
metadata.max.age.ms topic.metadata.refresh.fast.interval.ms topic.metadata.refresh.sparse
topic.metadata.propagation.max.ms topic.blacklist debug socket.timeout.ms socket.send.buffer.bytes
socket.receive.buffer.bytes socket.keepalive.enable socket.nagle.disable socket.max.fails
broker.address.ttl broker.address.family socket.connection.setup.timeout.ms connections.max.idle.ms
reconnect.backoff.ms reconnect.backoff.max.ms statistics.interval.ms log_level log.queue
log.thread.name log.connection.close enable.random.seed internal.termination.signal
api.version.request api.version.request.timeout.ms allow.auto.create.topics security.protocol
ssl.cipher.suites ssl.curves.list ssl.sigalgs.list ssl.key.location ssl.key.password ssl.key.pem
ssl.certificate.location ssl.certificate.pem ssl.ca.location https.ca.location https.ca.pem ssl.ca.pem
ssl.ca.certificate.stores ssl.crl.location ssl.keystore.location ssl.keystore.password ssl.providers
enable.ssl.certificate.verification ssl.endpoint.identification.algorithm sasl.mechanisms
sasl.mechanism sasl.kerberos.service.name sasl.kerberos.principal sasl.kerberos.kinit.cmd
sasl.kerberos.keytab sasl.kerberos.min.time.before.relogin sasl.username sasl.password
sasl.oauthbearer.config enable.sasl.oauthbearer.unsecure.jwt sasl.oauthbearer.method
sasl.oauthbearer.client.id sasl.oauthbearer.client.secret sasl.oauthbearer.scope
sasl.oauthbearer.extensions sasl.oauthbearer.token.endpoint.url plugin.library.paths group.id
group.instance.id partition.assignment.strategy session.timeout.ms heartbeat.interval.ms
group.protocol.type group.protocol group.remote.assignor coordinator.query.interval.ms
max.poll.interval.ms enable.auto.commit auto.commit.interval.ms enable.auto.offset.store
queued.min.messages queued.max.messages.kbytes fetch.wait.max.ms fetch.queue.backoff.ms
fetch.message.max.bytes max.partition.fetch.bytes fetch.max.bytes fetch.min.bytes
fetch.error.backoff.ms isolation.level enable.partition.eof check.crcs client.rack transactional.id
transaction.timeout.ms enable.idempotence enable.gapless.guarantee queue.buffering.max.messages
queue.buffering.max.kbytes queue.buffering.max.ms linger.ms message.send.max.retries retries
retry.backoff.ms retry.backoff.max.ms queue.buffering.backpressure.threshold compression.codec
compression.type batch.num.messages batch.size delivery.report.only.error
sticky.partitioning.linger.ms client.dns.lookup enable.metrics.push request.required.acks acks
request.timeout.ms message.timeout.ms delivery.timeout.ms partitioner compression.level
auto.offset.reset
"""


def _probe(role: ClientRole, key: str, value: Any) -> str | None:
    """librdkafka's complaint about ``key=value``, or None when it accepts it (module docstring)."""
    conf: dict[str, Any] = {key: value, _SENTINEL: "x"}
    try:
        if role == "consumer":
            Consumer({"group.id": "platform-streams-config-check", **conf})
        else:
            Producer(conf)
    except (KafkaException, ValueError, TypeError) as exc:
        err = as_kafka_error(exc)
        reason = err.str() if err is not None else str(exc)
        missing = _NO_SUCH.search(reason)
        if missing is not None and missing.group(1) == _SENTINEL:
            return None
        return reason
    return None  # pragma: no cover - the sentinel always fails


def client_property_problem(role: ClientRole, key: str, value: Any) -> str | None:
    """Why librdkafka rejects ``key=value`` for a ``role`` client, or None when it is fine.

    ``"unknown"`` when no such property exists; otherwise librdkafka's message about the
    value, with the value itself left out for secret-looking keys.
    """
    reason = _probe(role, key, value)
    if reason is None:
        return None
    missing = _NO_SUCH.search(reason)
    if missing is not None and missing.group(1) == key:
        return "unknown"
    secret = any(marker in key.lower() for marker in _SECRET_MARKERS)
    if secret and str(value) and str(value) in reason:
        return f"invalid value for librdkafka property {key!r} (not shown: a secret)"
    return reason


@functools.cache
def known_property_names() -> frozenset[str]:
    """librdkafka property names worth suggesting, as this librdkafka knows them."""
    return frozenset(
        name for name in _CANDIDATES.split() if client_property_problem("client", name, "") != "unknown"
    )
