"""The secured Apache Kafka node (SASL_SSL + mTLS + StandardAuthorizer), once per session.

Why once: the JVM node takes ~20 s to start on two shared cores; every test isolates
itself with its own principal, application id and topics instead of its own broker.
Skipped without Java/Maven locally; under ``CI=true`` that is an error (as the plain
Apache Kafka node in tests/conftest.py).
"""

from __future__ import annotations

import os
import secrets
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from platform_streams.dev.brokers.secured import SecuredKafkaBroker
from platform_streams.errors import BrokerError
from platform_streams.kafka import KafkaAdmin, TopicSpec


@pytest.fixture(scope="session")
def secured_broker() -> Iterator[SecuredKafkaBroker]:
    started = time.monotonic()
    broker = SecuredKafkaBroker(kill_with_parent=True)
    try:
        broker.start()
    except BrokerError as exc:
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
            pytest.fail(f"CI must run the secured Kafka tests, but the broker did not start: {exc}")
        pytest.skip(f"secured Apache Kafka unavailable here (needs Java 17, Maven, openssl): {exc}")
    print(f"\nsecured Apache Kafka ready in {time.monotonic() - started:.1f} s")
    try:
        yield broker
    finally:
        broker.stop()


@dataclass(frozen=True)
class Principal:
    """A SCRAM user of the secured node and its client settings."""

    name: str
    password: str
    config: dict[str, str]

    @property
    def principal(self) -> str:
        return f"User:{self.name}"


@pytest.fixture
def new_user(secured_broker: SecuredKafkaBroker):  # type: ignore[no-untyped-def]
    """A factory: a fresh SCRAM-SHA-512 user, no ACLs."""

    def make(prefix: str = "app") -> Principal:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        password = secrets.token_urlsafe(18)
        secured_broker.add_scram_user(name, password)
        return Principal(name, password, secured_broker.sasl_config(name, password))

    return make


@pytest.fixture
def super_admin(secured_broker: SecuredKafkaBroker) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(secured_broker.client_config()) as admin:
        yield admin


def make_topics(admin: KafkaAdmin, *specs: tuple[str, int]) -> None:
    admin.create_topics([TopicSpec(name, partitions) for name, partitions in specs])
