"""Dead letters that do not fit (the production error's origin headers: test_dead_letter.py).

A dead-letter record is the failed record plus ~1 KB of ``__streams.errors.*`` headers, so a
record near the producer's ``message.max.bytes`` (or the dead-letter topic's
``max.message.bytes``) makes a dead letter that cannot be written. The app must go on: the
dead letter is written without its payload, says so in ``__streams.errors.payload.truncated``
and is counted in ``kafka_streams_task_dead_letter_truncated_records_total``.

KIP-1034 (Kafka's ``ExceptionHandlerUtils.buildDeadLetterQueueRecord``): the
``__streams.errors.topic/partition/offset`` headers name the input record the task was
processing (the handler's ``ErrorHandlerContext``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from platform_streams import KafkaStreams, State, StreamsBuilder
from platform_streams.dsl import Consumed, Produced
from platform_streams.kafka import KafkaAdmin
from platform_streams.processor.exception_handlers import (
    HEADER_EXCEPTION,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_TOPIC,
)
from platform_streams.serde import Json, String
from tests.integration.support_apps import app_config, running_app, wait_until
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

S, J = String(), Json()

#: the header a dead letter written without (part of) its payload carries
TRUNCATED = "__streams.errors.payload.truncated"
TRUNCATED_METRIC = "kafka_streams_task_dead_letter_truncated_records_total"


def _metric(streams: KafkaStreams, name: str) -> float:
    return sum(
        sample.value
        for family in streams.metrics.registry.collect()
        for sample in family.samples
        if sample.name == name
    )


def _pass_through(source: str, sink: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    stream = builder.stream(source, Consumed(key_serde=S, value_serde=J))
    stream.to(sink, Produced(key_serde=S, value_serde=J))
    return builder


def _run_poison(
    bootstrap: str,
    admin: KafkaAdmin,
    tmp_path: Path,
    guarantee: str,
    poison_bytes: int,
    dlq_config: dict[str, str] | None = None,
    after_start: Callable[[str], None] | None = None,
) -> None:
    """40 good records around one ``poison_bytes`` record that is not JSON, produced once the
    app runs (after ``after_start(dead-letter topic)``)."""
    source, sink = new_topic(admin, 1, "pp-in"), new_topic(admin, 1, "pp-out")
    dlq = new_topic(admin, 1, "pp-dlq", config=dlq_config)
    good = [(f"g{i}", json.dumps({"id": i})) for i in range(40)]
    poison = b"{" + b"x" * (poison_bytes - 1)  # not JSON: a deserialization error
    config = app_config(
        bootstrap,
        tmp_path,
        processing_guarantee=guarantee,
        deserialization_exception_handler="log_and_continue",
        errors_dead_letter_queue_topic_name=dlq,
    )
    isolation = "read_committed" if guarantee == "exactly_once_v2" else "read_uncommitted"
    with running_app(_pass_through(source, sink), config) as streams:
        if after_start is not None:
            after_start(dlq)
        placed = produce(bootstrap, source, [*good[:20], ("poison", poison), *good[20:]])
        out = consume_all(bootstrap, sink, 40, timeout_s=45, isolation=isolation)
        dead = consume_all(bootstrap, dlq, 1, timeout_s=30, isolation=isolation)
        wait_until(lambda: _metric(streams, TRUNCATED_METRIC) >= 1, 10, "the truncation is counted")
        assert streams.state() is State.RUNNING
        assert all(w.failure is None for w in streams.workers)
        truncated = _metric(streams, TRUNCATED_METRIC)
    # every good record once: none stuck behind the poison record, none written twice
    assert sorted(r.key or b"" for r in out) == sorted(k.encode() for k, _ in good)
    assert len(consume_all(bootstrap, dlq, 2, timeout_s=3, isolation=isolation)) == 1
    assert truncated == 1
    record = dead[0]
    assert record.key == b"poison" and record.value is None
    headers = dict(record.headers)
    assert headers[TRUNCATED] == f"value={poison_bytes}".encode()
    assert headers[HEADER_EXCEPTION] == b"DeserializationError"
    partition, offset = placed[20]
    assert (headers[HEADER_TOPIC], headers[HEADER_PARTITION], headers[HEADER_OFFSET]) == (
        source.encode(),
        str(partition).encode(),
        str(offset).encode(),
    )


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_a_poison_record_too_large_to_dead_letter_whole_does_not_stop_the_app(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, guarantee: str
) -> None:
    """999,000 bytes: the record fits the producer's 1,000,000-byte message.max.bytes, its
    dead letter (plus the error headers) does not: a dead letter that cannot be written
    whole must not stop the app, or it would stop again at the same record on every start."""
    _run_poison(bootstrap_servers, admin, tmp_path, guarantee, 999_000)


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_a_dead_letter_is_sized_to_the_dead_letter_topics_own_limit(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, guarantee: str
) -> None:
    """The dead-letter topic's ``max.message.bytes`` (50,000) is below the producer's limit:
    Apache Kafka refuses the 200 kB dead letter in its produce response (a refused record
    aborts the transaction under exactly-once); the dead letter is cut to that limit first."""
    _run_poison(bootstrap_servers, admin, tmp_path, guarantee, 200_000, {"max.message.bytes": "50000"})


def _enforces_max_message_bytes(bootstrap: str, admin: KafkaAdmin) -> bool:
    """Whether the broker refuses a record over a topic's ``max.message.bytes`` (Tansu does
    not enforce it: docs/brokers.md)."""
    topic = new_topic(admin, 1, "limit-probe", config={"max.message.bytes": "1000"})
    producer = ck.Producer({"bootstrap.servers": bootstrap})
    errors: list[ck.KafkaError] = []
    producer.produce(topic, b"x" * 5000, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    return errors[0] is not None


def _lower_max_message_bytes(bootstrap: str, admin: KafkaAdmin, max_bytes: int) -> Callable[[str], None]:
    """Set a topic's ``max.message.bytes`` while the app runs (the app read it at its start)."""

    def lower(topic: str) -> None:
        client = AdminClient({"bootstrap.servers": bootstrap, "client.id": f"alter-{uuid.uuid4().hex[:8]}"})
        entry = ConfigEntry("max.message.bytes", str(max_bytes), incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
        for future in client.incremental_alter_configs([resource]).values():
            future.result(timeout=30)
        wait_until(
            lambda: admin.describe_topic_configs([topic])[topic].get("max.message.bytes") == str(max_bytes),
            10,
            "the broker has the topic's new limit",
        )
        time.sleep(1)  # described by the controller; give the log layer a moment to apply it

    return lower


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_a_dead_letter_the_broker_refuses_for_its_size_is_written_again_cut(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, guarantee: str
) -> None:
    """The dead-letter topic's limit drops to 50,000 after the app read it at its start: the
    200 kB dead letter fits the app's limit and the broker refuses it in its produce response.
    At-least-once writes it again cut at once; exactly-once aborts the transaction (a refused
    record makes it abortable), processes the input again and writes it cut."""
    if not _enforces_max_message_bytes(bootstrap_servers, admin):
        pytest.skip("the broker does not enforce max.message.bytes (Tansu)")
    lower = _lower_max_message_bytes(bootstrap_servers, admin, 50_000)
    _run_poison(bootstrap_servers, admin, tmp_path, guarantee, 200_000, after_start=lower)
