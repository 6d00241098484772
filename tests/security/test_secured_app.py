"""An exactly-once stateful application on a secured cluster with only its documented ACLs.

The node: SASL_SSL (SCRAM-SHA-512), mTLS, ``StandardAuthorizer`` (tests/security/conftest.py).
The ACLs: ``platform_streams.ops.acls.acl_sets`` -- what ``platform-streams acls APP`` prints.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from platform_streams import KafkaStreams
from platform_streams.config import StreamsConfig
from platform_streams.dev.brokers.secured import SecuredKafkaBroker
from platform_streams.kafka import create_consumer, create_producer
from platform_streams.ops.acls import acl_sets
from tests.integration.ops_apps import build_topology
from tests.security.conftest import Principal, make_topics

pytestmark = [pytest.mark.kafka_side]

WORDS = ["a", "bb", "a", "ccc", "bb", "a", "dddd", "a", "eeeee", "bb"] * 10


def app_config(user: Principal, app_id: str, state: Path, **more: object) -> StreamsConfig:
    client = {k: v for k, v in user.config.items() if k != "bootstrap.servers"}
    return StreamsConfig(
        application_id=app_id,
        bootstrap_servers=user.config["bootstrap.servers"],
        state_dir=state,
        commit_interval_ms=200,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        max_poll_interval_ms=20000,
        client_config=client,
        **more,
    )


def read_values(
    conf: dict[str, str], topic: str, expected: int, timeout_s: float = 90.0
) -> list[tuple[str, str]]:
    consumer = create_consumer(
        {**conf, "group.id": f"reader-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
         "isolation.level": "read_committed", "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe([topic])
    out: list[tuple[str, str]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.key().decode(), msg.value().decode()))
        # anything beyond the expected count would be a duplicate: look a little longer
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            msg = consumer.poll(0.3)
            if msg is not None and not msg.error():
                out.append((msg.key().decode(), msg.value().decode()))
    finally:
        consumer.close()
    return out


def test_eos_app_with_two_workers_and_a_standby_runs_on_exactly_its_acls(
    secured_broker: SecuredKafkaBroker, new_user, super_admin, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    user: Principal = new_user("orders")
    app_id = user.name
    source, sink = f"in-{app_id}", f"out-{app_id}"
    make_topics(super_admin, (source, 2), (sink, 2))
    topology = build_topology(source, sink)
    config = app_config(
        user, app_id, tmp_path / "state", processing_guarantee="exactly_once_v2",
        num_stream_threads=2, num_standby_replicas=1,
    )  # fmt: skip
    secured_broker.grant(list(acl_sets(topology, config)["application"].acls))
    producer = create_producer(secured_broker.client_config())
    for word in WORDS:
        producer.produce(source, key=word.encode(), value=word.encode())
    assert producer.flush(30) == 0
    started = time.monotonic()
    with KafkaStreams(topology, config) as streams:
        streams.start()
        records = read_values(secured_broker.client_config(), sink, len(WORDS))
    print(f"ran in {time.monotonic() - started:.1f} s")
    assert len(records) == len(WORDS), Counter(records)
    final: dict[str, str] = {}
    for key, value in records:
        final[key] = value
    expected = Counter(WORDS)
    assert final == {w: f"{n}:{n * len(w)}" for w, n in expected.items()}
    every_update = [(w, f"{i}:{i * len(w)}") for w, n in expected.items() for i in range(1, n + 1)]
    assert sorted(records) == sorted(every_update)
