"""Streams groups (``group_protocol="streams"``) on the secured node: SASL_SSL and mTLS.

The streams-group connection (heartbeats, describes, at-least-once commits) is the project's
own (``platform_streams/kafka/streams_group/``), not librdkafka's, so it must authenticate
from the same client settings the application's librdkafka clients use. The node:
SCRAM-SHA-512 over TLS and mutual TLS, ``StandardAuthorizer`` (tests/security/conftest.py).
The ACLs: the application set ``platform-streams acls APP`` prints, which covers what
Kafka 4.4's ``KafkaApis.handleStreamsGroupHeartbeat`` checks (READ on the group, DESCRIBE on
the topology's topics, CREATE on the internal topics it would create).
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from platform_streams import KafkaStreams, State
from platform_streams.config import StreamsConfig
from platform_streams.dev.brokers.secured import SecuredKafkaBroker
from platform_streams.errors import BrokerError, StreamsError
from platform_streams.kafka import create_producer
from platform_streams.kafka.acl_admin import Acl
from platform_streams.kafka.streams_group import StreamsGroupClient, broker_supports_streams_groups
from platform_streams.ops.acls import acl_sets
from tests.integration.ops_apps import build_topology
from tests.integration.support_apps import wait_until
from tests.security.conftest import Principal, make_topics
from tests.security.test_secured_app import app_config, read_values

pytestmark = [pytest.mark.kafka_side]

WORDS = ["a", "bb", "a", "ccc", "bb", "a"] * 5


def _security(user: Principal) -> dict[str, str]:
    return {k: v for k, v in user.config.items() if k != "bootstrap.servers"}


def _run_and_count(broker: SecuredKafkaBroker, user: Principal, state: Path, **more: object) -> str:
    """Run the count app as ``user`` until its output is complete; what went wrong, or ""."""
    source, sink = f"in-{user.name}", f"out-{user.name}"
    topology = build_topology(source, sink)
    config = app_config(user, user.name, state, group_protocol="streams", **more)
    broker.grant(list(acl_sets(topology, config)["application"].acls))
    with KafkaStreams(topology, config) as streams:
        streams.start()
        records = read_values(broker.client_config(), sink, len(WORDS))
        # the member is the broker's: its streams group (described over the same secured
        # connection) lists it while the app runs
        client = StreamsGroupClient(config.bootstrap_servers, user.name, security=_security(user))
        try:
            members = len(client.describe().members)
        finally:
            client.close()
        failure = streams.failure()
    expected = Counter(WORDS)
    every_update = [(w, f"{i}:{i * len(w)}") for w, n in expected.items() for i in range(1, n + 1)]
    if failure is not None:
        return f"{user.name}: failed: {failure}"
    if members != 1:
        return f"{user.name}: the streams group has {members} members, expected 1"
    if sorted(records) != sorted(every_update):
        return f"{user.name}: counts not exact: {sorted(Counter(records).items())}"
    return ""


def test_a_streams_group_app_counts_exactly_over_sasl_ssl_and_mtls(
    secured_broker: SecuredKafkaBroker, new_user, super_admin, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    """At-least-once over SASL_SSL (SCRAM-SHA-512: heartbeats and the OffsetCommit v9 on the
    project's connection) and exactly-once over mTLS (a client certificate), side by side."""
    sasl: Principal = new_user("sgsasl")
    cert_name = f"sgtls-{sasl.name.rsplit('-', 1)[1]}"
    mtls = Principal(cert_name, "", secured_broker.mtls_config(secured_broker.issue_certificate(cert_name)))
    producer = create_producer(secured_broker.client_config())
    for user in (sasl, mtls):
        make_topics(super_admin, (f"in-{user.name}", 2), (f"out-{user.name}", 2))
        for word in WORDS:
            producer.produce(f"in-{user.name}", key=word.encode(), value=word.encode())
    assert producer.flush(30) == 0
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [
            pool.submit(_run_and_count, secured_broker, sasl, tmp_path / "sasl"),
            pool.submit(
                _run_and_count, secured_broker, mtls, tmp_path / "mtls",
                processing_guarantee="exactly_once_v2",
            ),
        ]  # fmt: skip
        problems = [p for p in (r.result() for r in runs) if p]
    print(f"\ntwo streams-group apps (SASL_SSL, mTLS) in {time.monotonic() - started:.1f} s")
    assert not problems, "\n".join(problems)


def test_a_wrong_sasl_password_is_one_line_naming_the_mechanism_not_the_password(
    secured_broker: SecuredKafkaBroker, new_user  # type: ignore[no-untyped-def]
) -> None:
    user: Principal = new_user("sgbadpw")
    wrong = "Not-The-Password-" + user.password[:8]
    security = {**_security(user), "sasl.password": wrong}
    bootstrap = user.config["bootstrap.servers"]
    messages = []
    with pytest.raises(BrokerError) as probe:
        broker_supports_streams_groups(bootstrap, security=security)
    messages.append(str(probe.value))
    client = StreamsGroupClient(bootstrap, user.name, security=security)
    with pytest.raises(BrokerError) as describe:
        client.describe()
    client.close()
    messages.append(str(describe.value))
    for message in messages:
        assert "\n" not in message, message
        assert "SCRAM-SHA-512" in message and "authentication failed" in message.lower(), message
        assert wrong not in message and user.password not in message, message


def _outcome_without_group_read(
    broker: SecuredKafkaBroker, admin, user: Principal, state: Path, *, describe: bool  # type: ignore[no-untyped-def]
) -> str:
    """What happens to the count app as ``user`` with the application set minus READ on its
    group (plus DESCRIBE on it when ``describe``), and whether it committed output."""
    source, sink = f"in-{user.name}", f"out-{user.name}"
    make_topics(admin, (source, 1), (sink, 1))
    producer = create_producer(broker.client_config())
    for word in ("a", "bb", "a"):
        producer.produce(source, key=word.encode(), value=word.encode())
    assert producer.flush(30) == 0
    topology = build_topology(source, sink)
    config: StreamsConfig = app_config(user, user.name, state, group_protocol="streams")
    group_read = Acl(user.principal, "GROUP", user.name, "LITERAL", "READ")
    acls = list(acl_sets(topology, config)["application"].acls)
    acls.remove(group_read)
    if describe:
        acls.append(Acl(user.principal, "GROUP", user.name, "LITERAL", "DESCRIBE"))
    broker.grant(acls)
    streams = KafkaStreams(topology, config)
    try:
        streams.start()
        # the heartbeat's refusal stops the app; no retry loop may hide it
        stopped = wait_until(
            lambda: streams.state() in (State.ERROR, State.NOT_RUNNING), 60.0, "the app stops"
        )
        outcome = f"{streams.state().value}: {streams.failure()}" if stopped else ""
    except StreamsError as exc:  # refused before any worker runs
        outcome = f"start() raised {type(exc).__name__}: {exc}"
    finally:
        streams.close(timeout_s=20)
    committed = len(read_values(broker.client_config(), sink, 1, timeout_s=3.0))
    return f"{outcome} | committed {committed}"


def test_without_read_on_its_group_a_streams_member_stops_naming_the_acl(
    secured_broker: SecuredKafkaBroker, new_user, super_admin, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    """StreamsGroupHeartbeat needs READ on the group (``KafkaApis.handleStreamsGroupHeartbeat``:
    GROUP_AUTHORIZATION_FAILED otherwise): the app stops with the ACL to add, commits nothing --
    refused at start when it may not even DESCRIBE the group (FindCoordinator), by its first
    heartbeat when it may."""
    users = [new_user("sgnoread"), new_user("sgdescribe")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [
            pool.submit(_outcome_without_group_read, secured_broker, super_admin, user, tmp_path / user.name,
                        describe=describe)
            for user, describe in zip(users, (False, True), strict=True)
        ]  # fmt: skip
        outcomes = [r.result() for r in runs]
    print("\n" + "\n".join(outcomes))
    for user, outcome in zip(users, outcomes, strict=True):
        assert outcome.startswith(("start() raised", "ERROR: ")), outcome
        assert "GROUP_AUTHORIZATION_FAILED" in outcome and f"READ on group '{user.name}'" in outcome, outcome
        assert outcome.endswith("| committed 0"), outcome
