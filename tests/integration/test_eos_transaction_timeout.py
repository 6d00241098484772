"""Exactly-once: a transaction that outlives ``transaction.timeout.ms`` (here: a commit waiting
for an async call of 22 s while the eager transaction is open on Apache Kafka, whose default
is 10 s) is aborted by the broker, which fences the producer. The worker treats that as a
fenced producer -- tasks closed uncommitted, producer replaced, input processed again -- and
the output is exact. confluent_kafka raises the fatal error from ``flush`` wrapped in a
SystemError (a delivery report ran while it was pending); the worker used to die on it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Produced
from platform_streams.kafka import KafkaAdmin
from platform_streams.processor import AsyncOptions
from platform_streams.serde import String
from tests.integration.support_apps import app_config, running_app, wait_until
from tests.support.kafka import consume_all, new_topic, produce

# both copies on the Kafka side of make test: the Tansu side is the long pole
pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka, pytest.mark.kafka_side]

S = String()


def test_a_transaction_the_broker_timed_out_is_processed_again_exactly(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 1, "txn-timeout-in"), new_topic(admin, 1, "txn-timeout-out")
    calls: list[str] = []

    def upper(value: str) -> str:
        calls.append(value)
        if len(calls) == 1:
            time.sleep(22)  # the first call only: the commit waits past transaction.timeout.ms
        return value.upper()

    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=S, value_serde=S)).map_values_async(
        upper, AsyncOptions(timeout_s=60)
    ).to(sink, Produced(key_serde=S, value_serde=S))
    config = app_config(bootstrap_servers, tmp_path, processing_guarantee="exactly_once_v2")
    with running_app(builder.build(), config):
        produce(bootstrap_servers, source, [("k1", "a"), ("k2", "b")])
        wait_until(
            lambda: len(consume_all(bootstrap_servers, sink, 10, 2, "read_committed")) >= 2,
            120,
            "both records' outputs committed",
        )
        out = consume_all(bootstrap_servers, sink, 10, 2, "read_committed")
    assert sorted((r.key, r.value) for r in out) == [(b"k1", b"A"), (b"k2", b"B")]
