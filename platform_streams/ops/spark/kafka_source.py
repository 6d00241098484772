"""Planned Kafka offset ranges as an RDD of records: Spark's own Kafka source, or confluent-kafka.

Two readers give the same records (:data:`~.kafka_ranges.RawRecord`), one Spark partition
per planned range, in offset order within it:

* ``spark-kafka``: ``spark.read.format("kafka")`` -- how Spark users read Kafka; the
  connector's tasks fetch on the executors of a real cluster. It needs the connector jars
  on the session (:mod:`.connector`, docs/spark.md);
* ``confluent``: each Spark task reads its range with confluent-kafka
  (:func:`~.kafka_ranges.read_offset_ranges`), which needs nothing but the Python
  environment: the fallback.

The setting ``reader`` (argument, else ``$PLATFORM_STREAMS_SPARK_KAFKA_READER``, else
``"auto"``) chooses; ``auto`` takes Spark's source when the session can load it and the
connection settings translate to the Java client, and otherwise falls back with a logged
warning. Either way the *driver* plans the ranges (:func:`~.kafka_ranges.plan_offset_ranges`)
and Spark's source gets them as explicit ``startingOffsets``/``endingOffsets``: its own
"latest" comes from ListOffsets, which some brokers answer wrongly, and explicit offsets also keep
both readers on exactly the same records.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal, get_args

from pyspark import RDD
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from platform_streams.ops.spark.kafka_ranges import (
    OffsetRange,
    RawRecord,
    admin_conf,
    read_offset_ranges,
    reader_conf,
    visible_end,
)

__all__ = ["READER_ENV", "KafkaReader", "kafka_source_available", "read_ranges", "resolve_reader"]

log = logging.getLogger(__name__)

KafkaReader = Literal["auto", "spark-kafka", "confluent"]
#: Environment variable naming the reader when no argument does.
READER_ENV = "PLATFORM_STREAMS_SPARK_KAFKA_READER"
_warned: set[str] = set()


def kafka_source_available(spark: SparkSession) -> bool:
    """Whether ``format("kafka")`` resolves on this session (the connector jars are loaded)."""
    try:
        jvm: Any = spark._jvm  # None on a Spark Connect session: no JVM to ask (-> False)
        conf = spark._jsparkSession.sessionState().conf()
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource("kafka", conf)
        return True
    except Exception as exc:  # py4j wraps the JVM's ClassNotFound / AnalysisException
        log.debug("kafka data source not loadable: %s", exc)
        return False


def resolve_reader(
    spark: SparkSession, consumer_conf: Mapping[str, Any], reader: KafkaReader | None = None
) -> Literal["spark-kafka", "confluent"]:
    """The reader to use: ``reader``, else ``$PLATFORM_STREAMS_SPARK_KAFKA_READER``, else auto.

    ``spark-kafka`` raises ``RuntimeError`` when Spark's source cannot be used; ``auto``
    falls back to ``confluent`` with a warning (once per reason).
    """
    chosen = reader or os.environ.get(READER_ENV) or "auto"
    if chosen not in get_args(KafkaReader):
        raise ValueError(f"reader / ${READER_ENV} must be one of {get_args(KafkaReader)}, not {chosen!r}")
    if chosen == "confluent":
        return "confluent"
    problem = _untranslatable(consumer_conf)
    if problem is None and not kafka_source_available(spark):
        problem = (
            "the session has no kafka data source (spark-sql-kafka-0-10 jars: "
            "`python -m platform_streams.ops.spark.connector`, or spark.jars.packages; docs/spark.md)"
        )
    if problem is None:
        return "spark-kafka"
    if chosen == "spark-kafka":
        raise RuntimeError(f"reader 'spark-kafka' cannot be used: {problem}")
    if problem not in _warned:
        _warned.add(problem)
        log.warning(
            "reading Kafka with confluent-kafka in Spark tasks instead of Spark's source: %s", problem
        )
    return "confluent"


def read_ranges(
    spark: SparkSession,
    consumer_conf: Mapping[str, Any],
    ranges: Sequence[OffsetRange],
    *,
    isolation_level: str = "read_committed",
    reader: KafkaReader | None = None,
    timeout_s: float = 60.0,
) -> RDD[RawRecord]:
    """The records of ``ranges`` (non-empty), one Spark partition per range, in offset order."""
    if resolve_reader(spark, consumer_conf, reader) == "confluent":
        conf = reader_conf(consumer_conf, isolation_level)
        return spark.sparkContext.parallelize(list(ranges), len(ranges)).mapPartitions(
            partial(_read_with_confluent, conf, timeout_s)
        )
    options = _source_options(consumer_conf, isolation_level)
    conf = reader_conf(consumer_conf, isolation_level)
    by_topic: dict[str, list[OffsetRange]] = {}
    for rng in ranges:
        by_topic.setdefault(rng.topic, []).append(rng)
    frames = [
        frame
        for topic, topic_ranges in by_topic.items()
        if (frame := _topic_frame(spark, options, conf, topic, topic_ranges, timeout_s)) is not None
    ]
    if not frames:
        return spark.sparkContext.emptyRDD()
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionAll(other)
    return frame.rdd.map(_raw_record)


def _read_with_confluent(
    conf: Mapping[str, Any], timeout_s: float, ranges: Iterable[OffsetRange]
) -> Iterator[RawRecord]:
    return read_offset_ranges(conf, ranges, timeout_s=timeout_s)


def _topic_frame(
    spark: SparkSession,
    options: Mapping[str, str],
    conf: Mapping[str, Any],
    topic: str,
    ranges: Sequence[OffsetRange],
    timeout_s: float,
) -> DataFrame | None:
    """One topic's ranges through Spark's source (None: no record to read).

    A partition's ranges are contiguous, so each partition is read ``[first start, last
    end)``, split into as many Spark partitions as there are planned ranges
    (``minPartitions``); the end is moved back over trailing invisible offsets
    (:func:`~.kafka_ranges.visible_end`), which Spark's source would wait for.
    """
    bounds: dict[int, tuple[int, int]] = {}
    for rng in ranges:
        low, high = bounds.get(rng.partition, (rng.start, rng.end))
        bounds[rng.partition] = (min(low, rng.start), max(high, rng.end))
    starts: dict[str, int] = {}
    ends: dict[str, int] = {}
    for partition, (low, high) in sorted(bounds.items()):
        stop = visible_end(conf, topic, partition, low, high, timeout_s=timeout_s)
        if stop > low:
            starts[str(partition)], ends[str(partition)] = low, stop
    if not starts:
        return None
    frame = (
        spark.read.format("kafka")
        .options(**options)
        .option("assign", json.dumps({topic: [int(p) for p in starts]}))
        .option("startingOffsets", json.dumps({topic: starts}))
        .option("endingOffsets", json.dumps({topic: ends}))
        .option("minPartitions", str(len(ranges)))
        .load()
    )
    return frame.select(
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        F.unix_millis("timestamp").alias("timestamp_ms"),
        "headers",
    )


def _raw_record(row: Any) -> RawRecord:
    topic, partition, offset, key, value, ts, headers = row
    return (
        topic,
        partition,
        offset,
        bytes(key) if key is not None else None,
        bytes(value) if value is not None else None,
        ts,
        [(h[0], bytes(h[1]) if h[1] is not None else None) for h in headers] if headers is not None else None,
    )


def _source_options(consumer_conf: Mapping[str, Any], isolation_level: str) -> dict[str, str]:
    """The Java client settings (``kafka.*`` options) for librdkafka's connection settings."""
    conf = admin_conf(consumer_conf)
    options = {
        "kafka.bootstrap.servers": str(conf["bootstrap.servers"]),
        "kafka.isolation.level": isolation_level,
        "kafka.allow.auto.create.topics": "false",
        "includeHeaders": "true",
    }
    if "security.protocol" in conf:
        options["kafka.security.protocol"] = str(conf["security.protocol"]).upper()
    mechanism = conf.get("sasl.mechanism", conf.get("sasl.mechanisms"))
    if mechanism is not None:
        options["kafka.sasl.mechanism"] = str(mechanism)
        module = _JAAS_MODULES[str(mechanism)]
        user, password = json.dumps(str(conf["sasl.username"])), json.dumps(str(conf["sasl.password"]))
        options["kafka.sasl.jaas.config"] = f"{module} required username={user} password={password};"
    if "ssl.ca.location" in conf:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = str(conf["ssl.ca.location"])
    if "ssl.certificate.location" in conf:
        # The PEM contents, not the paths: the Java client takes a PEM keystore only as one file
        # holding key and chain (librdkafka has two), and contents travel to a cluster's executors
        # with the options. Both settings are PASSWORD-typed in the Java client: logged as [hidden].
        options["kafka.ssl.keystore.type"] = "PEM"
        options["kafka.ssl.keystore.certificate.chain"] = _pem_file(conf, "ssl.certificate.location")
        options["kafka.ssl.keystore.key"] = _pem_file(conf, "ssl.key.location")
    return options


def _pem_file(conf: Mapping[str, Any], setting: str) -> str:
    """The text of the PEM file named by ``setting`` (never echoed: it may be a private key)."""
    try:
        return Path(str(conf[setting])).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise RuntimeError(f"{setting}: cannot read the PEM file ({type(exc).__name__})") from None


_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
#: librdkafka connection settings :func:`_source_options` translates (or may ignore)
_TRANSLATED = {
    "bootstrap.servers",
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
}
#: the key header the Java client's PEM keystore reads: unencrypted PKCS#8 only (an encrypted
#: key's ssl.key.password is not translated; PKCS#1/SEC1 keys are refused by the Java client)
_PKCS8_KEY = "-----BEGIN PRIVATE KEY-----"


def _untranslatable(consumer_conf: Mapping[str, Any]) -> str | None:
    """Why Spark's source cannot connect like confluent-kafka does, or None."""
    conf = admin_conf(consumer_conf)
    if "bootstrap.servers" not in conf:
        return "no bootstrap.servers"
    mechanism = conf.get("sasl.mechanism", conf.get("sasl.mechanisms"))
    if mechanism is not None and (str(mechanism) not in _JAAS_MODULES or "sasl.username" not in conf):
        return f"SASL mechanism {mechanism} is not translated to the Java client"
    other = sorted(k for k in conf if k not in _TRANSLATED and not k.startswith(("socket.", "client.dns.")))
    if other:
        return f"connection settings {other} are not translated to the Java client"
    if ("ssl.certificate.location" in conf) != ("ssl.key.location" in conf):
        return "a client certificate needs both ssl.certificate.location and ssl.key.location"
    if "ssl.key.location" in conf:
        try:
            key = _pem_file(conf, "ssl.key.location")
        except RuntimeError as exc:
            return str(exc)
        if _PKCS8_KEY not in key:
            return "ssl.key.location is not an unencrypted PKCS#8 PEM key (all the Java client reads)"
    return None
