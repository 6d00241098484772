"""``platform-streams reset`` with only the documented ``reset`` ACL set, on the secured node."""

from __future__ import annotations

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dev.brokers.secured import SecuredKafkaBroker
from platform_streams.kafka import KafkaAdmin, TopicPartition, create_consumer, create_producer
from platform_streams.ops.acls import acl_sets
from tests.integration.ops_apps import build_topology
from tests.security.conftest import Principal, make_topics
from tests.security.test_secured_tools import APP, cli_env, run_cli

pytestmark = [pytest.mark.kafka_side]


def test_reset_works_with_the_reset_set_only(
    secured_broker: SecuredKafkaBroker, new_user, super_admin: KafkaAdmin  # type: ignore[no-untyped-def]
) -> None:
    user: Principal = new_user("reset")
    source, sink = f"in-{user.name}", f"out-{user.name}"
    make_topics(super_admin, (source, 2), (sink, 1), (f"{user.name}-rekey-repartition", 2))
    producer = create_producer(secured_broker.client_config())
    for i in range(10):
        producer.produce(source, key=b"k", value=b"v", partition=i % 2)
    assert producer.flush(30) == 0
    # a stopped application's group: offsets committed at the log end (as the super user)
    group = create_consumer({**secured_broker.client_config(), "group.id": user.name, "log_level": 0})
    group.commit(offsets=[TopicPartition(source, 0, 5), TopicPartition(source, 1, 5)], asynchronous=False)
    group.close()
    config = StreamsConfig(application_id=user.name, bootstrap_servers="unused:9092")
    secured_broker.grant(list(acl_sets(build_topology(source, sink), config)["reset"].acls))
    env = cli_env(user.config, user.name, source, sink)
    done = run_cli({**env, "PLATFORM_STREAMS_STATE_DIR": "/tmp/ps-reset-state"}, "reset", APP, "--yes")
    assert done.returncode == 0, done.stderr
    offsets = super_admin.committed_offsets(user.name, [(source, 0), (source, 1)])
    assert set(offsets.values()) == {0}, offsets
    assert f"{user.name}-rekey-repartition" not in super_admin.list_topics()
