"""The Dagster health sensor on the secured cluster: credentials from ``dg.EnvVar``, a
principal holding only the documented ``dagster`` ACL set, one tick that observes every
topic and evaluates every check without a refusal."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dev.brokers.secured import SecuredKafkaBroker
from platform_streams.kafka import KafkaAdmin, TopicPartition, create_consumer, create_producer
from platform_streams.ops.acls import acl_sets
from platform_streams.ops.topics import create_internal_topics
from tests.security.conftest import Principal, make_topics

dg = pytest.importorskip("dagster")

pytestmark = [pytest.mark.kafka_side]


def test_health_sensor_ticks_with_the_dagster_set_and_credentials_from_env_vars(
    secured_broker: SecuredKafkaBroker,
    new_user,  # type: ignore[no-untyped-def]
    super_admin: KafkaAdmin,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dagster_defs import build_stream_app_defs
    from dagster_defs.resources import KafkaResource, SparkResource, StreamsDeploymentResource

    user: Principal = new_user("dagster")
    spec, app, _topics = orders_app(secured_broker, super_admin, user, partitions=2, orders=20, committed=4)
    config: StreamsConfig = app.validated_settings()
    secured_broker.grant(list(acl_sets(app.topology, config)["dagster"].acls))

    variable = f"PS_TEST_SASL_PASSWORD_{uuid.uuid4().hex[:6].upper()}"
    monkeypatch.setenv(variable, user.password)
    resources: dict[str, Any] = {
        "kafka": KafkaResource(
            bootstrap_servers=user.config["bootstrap.servers"],
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_username=user.name,
            sasl_password=dg.EnvVar(variable),
            client_config={"ssl.ca.location": secured_broker.ca_location},
        ),
        "streams_deployment": StreamsDeploymentResource(root_dir=str(tmp_path / "deploy")),
        "spark": SparkResource(master="local[1]"),  # the jobs need it defined; the sensor does not
    }
    defs = dg.Definitions.merge(build_stream_app_defs(spec), dg.Definitions(resources=resources))
    sensor = defs.resolve_sensor_def("orders_test_health")
    with dg.instance_for_test() as instance:
        result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(result, dg.SensorResult), result
    checks = {e.check_name: e for e in result.asset_events or [] if isinstance(e, dg.AssetCheckEvaluation)}
    for name, check in checks.items():
        print(f"- {name}: passed={check.passed} {check.description} {dict(check.metadata)}")
    assert checks["consumer_lag"].metadata["total_lag"].value == 20 - 8
    seen = {
        e.asset_key.path[-1]: e.metadata["records"].value
        for e in result.asset_events or []
        if isinstance(e, dg.AssetObservation) and "records" in e.metadata
    }
    print(seen)
    assert 20 in seen.values()
    text = str(result).lower()
    assert "authoriz" not in text and user.password not in str(result)


def orders_app(
    broker: SecuredKafkaBroker, admin: KafkaAdmin, user: Principal, *,
    partitions: int, orders: int, committed: int,
) -> tuple[Any, Any, dict[str, str]]:  # fmt: skip
    """The demo's orders app of ``user`` (application id = user name): its topics and internal
    topics made by the super user, ``orders`` records spread over the input's partitions, the
    group's offsets committed at ``committed`` on each. (spec, resolved app, topics)."""
    from dagster_defs.spec import resolve_app
    from tests.dagster.support import orders_spec

    topics = {f"{k}_topic": f"{k}-{user.name}" for k in ("orders", "big_orders", "by_customer", "counts")}
    topics["dlq"] = f"dlq-{user.name}"
    make_topics(admin, *((t, partitions) for t in topics.values()))
    spec = orders_spec(topics, user.name)
    app = resolve_app(spec)
    admin_conf = broker.client_config()
    as_admin = {
        "bootstrap_servers": admin_conf["bootstrap.servers"],
        "client_config": {k: v for k, v in admin_conf.items() if k != "bootstrap.servers"},
    }
    create_internal_topics(app.topology, app.validated_settings(as_admin))
    producer = create_producer(admin_conf)
    for i in range(orders):
        producer.produce(topics["orders_topic"], key=b"o%d" % i, value=b"c1:10", partition=i % partitions)
    assert producer.flush(30) == 0
    group = create_consumer({**admin_conf, "group.id": user.name, "log_level": 0})
    offsets = [TopicPartition(topics["orders_topic"], p, committed) for p in range(partitions)]
    group.commit(offsets=offsets, asynchronous=False)
    group.close()
    return spec, app, topics
