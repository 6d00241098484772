"""Each ACL of the ``spark`` and ``dagster`` sets, removed alone: the job or sensor fails clearly.

Table-driven over ``acl_sets(...)["spark"]`` and ``["dagster"]``. For every ACL a fresh
principal gets all the others, then

* spark: snapshot compaction, then a Kafka-to-Kafka backfill (the confluent reader, the
  faster to start, on the one Spark session of test_secured_spark.py). The first job that
  fails must raise an error whose message is one line naming the denied resource and the
  refusal (not a timeout, not a Java stack trace), and publish nothing: no snapshot
  manifest, no output record.
* dagster: one tick of the health sensor. It must report the refusal in one line naming
  the denied resource (a failed check or observation saying so), not a timeout or a
  generic error.

Every ACL must be needed: a case in which everything succeeds fails the test.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dev.brokers.secured import SecuredKafkaBroker
from platform_streams.kafka import KafkaAdmin, TopicPartition, create_consumer, create_producer
from platform_streams.kafka.acl_admin import Acl
from platform_streams.ops.acls import acl_sets
from tests.security.conftest import Principal, make_topics
from tests.security.test_secured_dagster import orders_app
from tests.security.test_secured_spark import (
    spark,  # noqa: F401 -- the one Spark session
    spark_config,
)
from tests.support.kafka import consume_all

pytestmark = [pytest.mark.kafka_side]

LIMIT_S = 60.0
CLEAR = ("authorization", "not allowed", "denied", "may not")
WAITED = ("timed out", "within", "timeout")
KEYS = [f"user-{i % 3}" for i in range(6)]


def _clear(message: str, removed: Acl) -> str | None:
    """Why ``message`` is not a clear refusal of ``removed`` (None: it is)."""
    lines = [line for line in message.splitlines() if line.strip()]
    if len(lines) != 1:
        return f"{len(lines)} lines"
    line = lines[0].lower()
    if not any(w in line for w in CLEAR) or any(w in line for w in WAITED):
        return "not a clear refusal"
    name = removed.name.rstrip("-").lower()
    if name not in line:
        return f"does not name {removed.name}"
    return None


def _spark_case(spark_session: Any, broker: SecuredKafkaBroker, admin: KafkaAdmin, user: Principal,
                index: int, tmp: Path) -> tuple[Acl, str, str, float, list[str]]:  # fmt: skip
    """(ACL removed, job that failed or "", its error, seconds, what it published)."""
    from platform_streams.ops.spark.backfill import KafkaInput, KafkaOutput, backfill
    from platform_streams.ops.spark.compaction import compact_changelog
    from tests.spark.apps import CountByKey

    source, sink, store = f"in-{user.name}", f"out-{user.name}", "counts"
    changelog = f"{user.name}-{store}-changelog"
    make_topics(admin, (source, 1), (sink, 1), (changelog, 1))
    producer = create_producer(broker.client_config())
    for i, key in enumerate(KEYS):
        producer.produce(source, key=key.encode(), value=b"click")
        producer.produce(changelog, key=key.encode(), value=b"%d" % i)
    assert producer.flush(30) == 0
    group = create_consumer({**broker.client_config(), "group.id": user.name, "log_level": 0})
    group.commit(offsets=[TopicPartition(source, 0, len(KEYS))], asynchronous=False)
    group.close()
    config = spark_config(user)
    app = CountByKey(source, sink, store)
    acls = list(acl_sets(app(), config)["spark"].acls)
    removed = acls.pop(index)
    broker.grant(acls)
    snapshots = tmp / "snapshots"
    job, error, started = "", "", time.monotonic()
    try:
        job = "compaction"
        compact_changelog(
            spark_session, config.restore_consumer_configs(), user.name, store, snapshots,
            source_topics=[source], reader="confluent", parquet=False, read_timeout_s=LIMIT_S,
        )  # fmt: skip
        job, started = "backfill", time.monotonic()  # the time to fail is the failing job's
        backfill(spark_session, app, config, [KafkaInput(reader="confluent")], KafkaOutput())
        job = ""
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.monotonic() - started
    published: list[str] = []
    if job == "compaction" and snapshots.exists():  # a failed backfill keeps the compaction's
        published = [str(p.relative_to(snapshots)) for p in snapshots.rglob("*") if p.is_file()]
    conf = broker.client_config()
    written = consume_all(conf["bootstrap.servers"], sink, 1, timeout_s=3, conf=conf)
    published += [f"{sink}: {r.key!r}" for r in written]
    return removed, job, error, seconds, published


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_removing_any_one_spark_acl_fails_the_job_clearly(
    spark: Any,  # noqa: F811
    secured_broker: SecuredKafkaBroker,
    new_user,  # type: ignore[no-untyped-def]
    super_admin: KafkaAdmin,
    tmp_path: Path,
) -> None:
    config = StreamsConfig(application_id="x", bootstrap_servers="unused:9092")
    from tests.spark.apps import CountByKey

    count = len(acl_sets(CountByKey("i", "o", "counts")(), config)["spark"].acls)
    started = time.monotonic()
    problems = []
    for index in range(count):
        user = new_user(f"sp{index}")
        removed, job, error, seconds, published = _spark_case(
            spark, secured_broker, super_admin, user, index, tmp_path / f"c{index}"
        )
        print(f"- without {removed.describe()}: {job or 'nothing'} failed in {seconds:.1f}s: {error[:600]!r}")
        if not job:
            problems.append(f"without {removed.describe()} both jobs succeeded: the ACL is not needed")
            continue
        why = _clear(error.split(": ", 1)[1] if ": " in error else error, removed)
        if why:
            problems.append(f"without {removed.describe()}: {job} failed unclearly ({why}): {error[:400]!r}")
        if seconds > LIMIT_S:
            problems.append(f"without {removed.describe()}: {job} took {seconds:.0f} s to fail")
        if published:
            problems.append(f"without {removed.describe()}: {job} failed but published {published[:5]}")
    print(f"\nspark: {count} cases in {time.monotonic() - started:.1f} s")
    assert not problems, "\n".join(problems)


def _dagster_case(broker: SecuredKafkaBroker, admin: KafkaAdmin, user: Principal, index: int,
                  tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Acl, list[str], float]:  # fmt: skip
    """(ACL removed, what the tick reported as failed, seconds)."""
    import dagster as dg

    from dagster_defs import build_stream_app_defs
    from dagster_defs.resources import KafkaResource, SparkResource, StreamsDeploymentResource

    spec, app, _topics = orders_app(broker, admin, user, partitions=1, orders=4, committed=2)
    acls = list(acl_sets(app.topology, app.validated_settings())["dagster"].acls)
    removed = acls.pop(index)
    broker.grant(acls)
    variable = f"PS_TEST_SASL_PASSWORD_{uuid.uuid4().hex[:6].upper()}"
    monkeypatch.setenv(variable, user.password)
    resources: dict[str, Any] = {
        "kafka": KafkaResource(
            bootstrap_servers=user.config["bootstrap.servers"], security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512", sasl_username=user.name, sasl_password=dg.EnvVar(variable),
            client_config={"ssl.ca.location": broker.ca_location},
        ),
        "streams_deployment": StreamsDeploymentResource(root_dir=str(tmp / "deploy")),
        "spark": SparkResource(master="local[1]"),
    }  # fmt: skip
    defs = dg.Definitions.merge(build_stream_app_defs(spec), dg.Definitions(resources=resources))
    sensor = defs.resolve_sensor_def("orders_test_health")
    started = time.monotonic()
    failed: list[str] = []
    try:
        with dg.instance_for_test() as instance:
            result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
    except Exception as exc:
        failed.append(f"tick raised {type(exc).__name__}: {exc}")
    else:
        for event in result.asset_events or []:
            # workers_running fails in every case: nothing is deployed, the tick is what is tested
            failing = isinstance(event, dg.AssetCheckEvaluation) and not event.passed
            if failing and event.check_name != "workers_running":
                failed.append(f"check {event.check_name}: {event.description}")
            elif isinstance(event, dg.AssetObservation) and "error" in event.metadata:
                failed.append(f"observation {event.asset_key.path[-1]}: {event.metadata['error'].value}")
    return removed, failed, time.monotonic() - started


def test_removing_any_one_dagster_acl_fails_the_sensor_clearly(
    secured_broker: SecuredKafkaBroker,
    new_user,  # type: ignore[no-untyped-def]
    super_admin: KafkaAdmin,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("dagster")
    from dagster_defs.spec import resolve_app
    from tests.dagster.support import orders_spec

    topics = {f"{k}_topic": f"{k}-x" for k in ("orders", "big_orders", "by_customer", "counts")}
    topics["dlq"] = "dlq-x"
    probe = resolve_app(orders_spec(topics, "x"))
    count = len(acl_sets(probe.topology, probe.validated_settings())["dagster"].acls)
    started = time.monotonic()
    problems = []
    for index in range(count):
        user = new_user(f"dg{index}")
        removed, failed, seconds = _dagster_case(
            secured_broker, super_admin, user, index, tmp_path / f"d{index}", monkeypatch
        )
        print(f"- without {removed.describe()}: {seconds:.1f}s: {failed}")
        if not failed:
            problems.append(f"without {removed.describe()} the tick reported nothing: the ACL is not needed")
            continue
        if not any(_clear(f.split(": ", 1)[1], removed) is None for f in failed):
            problems.append(f"without {removed.describe()}: no clear refusal among {failed}")
        if seconds > LIMIT_S:
            problems.append(f"without {removed.describe()}: the tick took {seconds:.0f} s")
    print(f"\ndagster: {count} cases in {time.monotonic() - started:.1f} s")
    assert not problems, "\n".join(problems)
