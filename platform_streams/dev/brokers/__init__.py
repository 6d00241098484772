"""Local brokers: the embedded one (Tansu, :mod:`.embedded`) and Apache Kafka itself run
from its Maven Central jars, one node or a 3-node cluster (:mod:`.apache`, jars resolved by
:mod:`.apache_jars`), as child processes on loopback ports (:mod:`.local`), and Apache Kafka
with SASL_SSL and ACLs (:mod:`.secured`, imported by name: it needs openssl and keytool).

Used by the CLI's ``broker`` command (imported only when that command runs), the demo, the
tests and the benchmarks; clients reach any broker through :mod:`platform_streams.kafka`.
"""

from platform_streams.dev.brokers.apache import ApacheKafkaBroker, ApacheKafkaCluster
from platform_streams.dev.brokers.apache_jars import apache_kafka_missing, kafka_classpath, require_java
from platform_streams.dev.brokers.embedded import (
    DEFAULT_LOCAL_BROKER,
    LOCAL_BROKER_KINDS,
    EmbeddedBroker,
    run_embedded_broker_forever,
    run_local_broker_forever,
)
from platform_streams.dev.brokers.local import BrokerProcess, find_free_port, hostport, run_broker_forever

__all__ = [
    "DEFAULT_LOCAL_BROKER",
    "LOCAL_BROKER_KINDS",
    "ApacheKafkaBroker",
    "ApacheKafkaCluster",
    "BrokerProcess",
    "EmbeddedBroker",
    "apache_kafka_missing",
    "find_free_port",
    "hostport",
    "kafka_classpath",
    "require_java",
    "run_broker_forever",
    "run_embedded_broker_forever",
    "run_local_broker_forever",
]
