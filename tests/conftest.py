"""Suite-wide fixtures: the broker every ``@pytest.mark.broker`` test talks to.

``bootstrap_servers`` is a real cluster when ``PLATFORM_STREAMS_BOOTSTRAP`` (or its long
form ``PLATFORM_STREAMS_BOOTSTRAP_SERVERS``) is set, and
otherwise one embedded Tansu broker started on a free port for the whole session (it
starts in ~0.2 s; tests isolate themselves with fresh topic and group names rather than
fresh brokers). The broker is started lazily, so unit-only runs never start it.

Two brokers. A test (or module, through ``pytestmark``) marked ``@pytest.mark.apache_kafka``
runs twice: ``[tansu]`` on the embedded broker and ``[kafka]`` on Apache Kafka itself (one
KRaft node from Maven Central's jars, ``platform_streams.kafka.ApacheKafkaBroker``,
started once per session when the first such test needs it). Those are the tests whose
behaviour depends on where Tansu differs from Kafka. Tests that exist only to prove a
Kafka feature request ``kafka_bootstrap_servers`` directly. Where Java or Maven is
missing the ``[kafka]`` runs are skipped with the reason, except under ``CI=true``,
where they fail: CI must prove the Kafka side. ``PLATFORM_STREAMS_BROKERS=tansu`` (or
``kafka``) runs one side only; with ``PLATFORM_STREAMS_BOOTSTRAP`` set, the external
cluster replaces both and marked tests run once.

Two group protocols. A test that also takes the ``group_protocol`` fixture and is marked
``@pytest.mark.streams_protocol`` runs a third time, ``[kafka-streams]``: on Apache Kafka with
``group_protocol="streams"`` (KIP-1071: the broker assigns the tasks), which only Kafka has.
Everywhere else ``group_protocol`` is ``"classic"``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# Make ``tests.support`` importable however pytest is started (``pytest`` does not put
# the repository root on sys.path, ``python -m pytest`` does).
_REPO_ROOT = str(Path(__file__).resolve().parent.parent)
if _REPO_ROOT not in sys.path:
    sys.path.insert(0, _REPO_ROOT)

from platform_streams.config.sources import BOOTSTRAP_ENV, apply_bootstrap_alias  # noqa: E402
from platform_streams.dev.brokers import ApacheKafkaBroker, EmbeddedBroker  # noqa: E402
from platform_streams.errors import BrokerError  # noqa: E402
from platform_streams.kafka import KafkaAdmin  # noqa: E402

#: prints the wall time of each suite at the end of a run (CI's budget, per side)
pytest_plugins = ["tests.support.suite_times"]

# PLATFORM_STREAMS_BOOTSTRAP (the guide's name) or PLATFORM_STREAMS_BOOTSTRAP_SERVERS: one broker
apply_bootstrap_alias(os.environ)
BROKERS_ENV = "PLATFORM_STREAMS_BROKERS"
BROKER_KINDS = ("tansu", "kafka")
#: ``make test`` runs the suite as three pytest processes side by side (tools/test_sides.sh):
#: ``servers`` = the suites that start a heavy server of their own (a secured Kafka node, a
#: Schema Registry, a Spark session) and the embedded-broker demo, so each server starts once;
#: (and the tests marked ``servers_side``: long ones that need no Tansu-side fixture, moved
#: off the Tansu side, the long pole);
#: ``kafka`` = every other test that talks to Apache Kafka or is marked ``kafka_side``;
#: ``tansu`` = all the rest; unset = all
SIDE_ENV = "PLATFORM_STREAMS_TEST_SIDE"
SIDES = ("tansu", "kafka", "servers")
#: what the ``servers`` side runs: these suites (paths under ``tests/``), whatever broker
#: they use -- the Spark session is shared by tests/security and tests/spark, the registry
#: by tests/schema_registry, tests/spark and the Dagster schema check. The Dagster suite
#: runs Spark jobs in process too, and it is the largest suite the Tansu side could give
#: up: that side is the long pole of ``make test``; the chart and wheel suites (~3 min, no
#: Tansu-specific fixture) go there for the same reason
SERVER_SUITES = ("security/", "schema_registry/", "spark/", "dagster/", "helm/", "packaging/")


def _selected_kinds() -> list[str]:
    """The broker kinds marked tests run on (``PLATFORM_STREAMS_BROKERS``, default both)."""
    raw = os.environ.get(BROKERS_ENV, "").strip()
    kinds = [k.strip() for k in raw.split(",") if k.strip()] or list(BROKER_KINDS)
    unknown = sorted(set(kinds) - set(BROKER_KINDS))
    if unknown:
        raise pytest.UsageError(f"{BROKERS_ENV}: unknown broker kind(s) {unknown}; known: {BROKER_KINDS}")
    return kinds


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "apache_kafka: also run on Apache Kafka (a [kafka] copy beside [tansu]); needs Java 17 + Maven",
    )
    config.addinivalue_line(
        "markers",
        "kafka_side: run in make test's Kafka-side process (a CPU/time split only: any broker)",
    )
    config.addinivalue_line(
        "markers",
        "servers_side: run in make test's servers-side process (a CPU/time split only)",
    )
    config.addinivalue_line(
        "markers",
        "streams_protocol: with apache_kafka and the group_protocol fixture, also run on Apache "
        "Kafka with group_protocol='streams' (a [kafka-streams] copy)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run ``apache_kafka``-marked broker tests once per broker kind."""
    if os.environ.get(BOOTSTRAP_ENV, "").strip() or "bootstrap_servers" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("apache_kafka") is None:
        return
    kinds = _selected_kinds()
    streams_copy = metafunc.definition.get_closest_marker("streams_protocol") is not None
    if streams_copy and "group_protocol" in metafunc.fixturenames:
        cases = [(kind, "classic") for kind in kinds] + [("kafka", "streams")] * ("kafka" in kinds)
        metafunc.parametrize(
            ("broker_kind", "group_protocol"),
            cases,
            indirect=True,
            scope="session",
            ids=[kind if protocol == "classic" else f"{kind}-{protocol}" for kind, protocol in cases],
        )
        return
    metafunc.parametrize("broker_kind", kinds, indirect=True, scope="session")


def _on_apache_kafka(item: pytest.Item) -> bool:
    """Whether a test talks to Apache Kafka: the ``[kafka]`` copy of a marked test, a test
    that asks for the Kafka node itself, or one parametrized ``broker="kafka"`` (the demo)."""
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    if params.get("broker_kind") == "kafka" or params.get("broker") == "kafka":
        return True
    return "kafka_bootstrap_servers" in getattr(item, "fixturenames", ())


def side_of(item: pytest.Item) -> str:
    """Which of ``make test``'s processes runs ``item`` (see ``SIDES``)."""
    relative = item.nodeid.removeprefix("tests/")
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("group_protocol") == "streams":
        # the Kafka side is the longer of the two broker sides; the servers side has room
        return "servers"
    if relative.startswith("dagster/test_demo.py"):  # one demo a side: each takes minutes
        return "kafka" if _on_apache_kafka(item) else "servers"
    if relative.startswith(SERVER_SUITES) or item.get_closest_marker("servers_side") is not None:
        return "servers"
    if _on_apache_kafka(item) or item.get_closest_marker("kafka_side") is not None:
        return "kafka"
    return "tansu"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep one side of the suite when ``PLATFORM_STREAMS_TEST_SIDE`` asks for it.

    Why: most broker and server tests wait (group joins, session timeouts, JVMs that
    idle), so ``make test`` runs the suite as three processes side by side instead of one
    after another: on two cores that takes tens of minutes off CI. Each process starts its
    own brokers and servers; tests isolate themselves by topic and group names anyway.
    """
    side = os.environ.get(SIDE_ENV, "").strip()
    if not side:
        return
    if side not in SIDES:
        raise pytest.UsageError(f"{SIDE_ENV}: unknown side {side!r}; known: {SIDES}")
    keep, drop = [], []
    for item in items:
        (keep if side_of(item) == side else drop).append(item)
    if side == "servers":
        # its demo last: the Kafka side starts with its own demo, and Dagster and Spark
        # start-ups in several processes at once on two cores pushed the demo's waits past
        # their limits
        keep.sort(key=lambda item: item.nodeid.startswith("tests/dagster/test_demo.py"))
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def broker_kind(request: pytest.FixtureRequest) -> str:
    """Which broker ``bootstrap_servers`` is: ``"tansu"`` unless the test is parametrized,
    ``"external"`` with ``PLATFORM_STREAMS_BOOTSTRAP`` (tests then ask the broker what it
    supports: ``KafkaAdmin.supports``)."""
    if os.environ.get(BOOTSTRAP_ENV, "").strip():
        return "external"
    return str(getattr(request, "param", "tansu"))


@pytest.fixture(scope="session")
def group_protocol(request: pytest.FixtureRequest) -> str:
    """``StreamsConfig.group_protocol`` of the apps a ``streams_protocol`` test runs:
    ``"streams"`` in its ``[kafka-streams]`` copy, else ``"classic"``."""
    return str(getattr(request, "param", "classic"))


@pytest.fixture(scope="session")
def tansu_bootstrap_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The session's embedded Tansu broker."""
    log_path = tmp_path_factory.mktemp("broker") / "tansu.log"
    # kill_with_parent: a test run killed with -9 must not leave a broker behind.
    with EmbeddedBroker(log_path=log_path, kill_with_parent=True) as broker:
        yield broker.bootstrap_servers


@pytest.fixture(scope="session")
def kafka_bootstrap_servers() -> Iterator[str]:
    """The session's Apache Kafka node (started on first use, ~10-30 s; stopped at the end).

    Skipped without Java/Maven locally; under ``CI=true`` that is an error instead.
    """
    if "kafka" not in _selected_kinds():
        pytest.skip(f"{BROKERS_ENV} excludes kafka")
    broker = ApacheKafkaBroker(kill_with_parent=True)
    try:
        broker.start()
    except BrokerError as exc:
        if _in_ci():
            pytest.fail(f"CI must run the Apache Kafka tests, but the broker did not start: {exc}")
        pytest.skip(f"Apache Kafka unavailable here (needs Java 17 + Maven): {exc}")
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def bootstrap_servers(broker_kind: str, request: pytest.FixtureRequest) -> str:
    """``bootstrap.servers`` of the test broker (external, embedded Tansu, or Apache Kafka)."""
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if external:
        return external
    fixture = "kafka_bootstrap_servers" if broker_kind == "kafka" else "tansu_bootstrap_servers"
    return str(request.getfixturevalue(fixture))


@pytest.fixture(scope="session")
def admin(bootstrap_servers: str) -> Iterator[KafkaAdmin]:
    """A session-wide :class:`KafkaAdmin` on the test broker."""
    with KafkaAdmin({"bootstrap.servers": bootstrap_servers}) as kafka_admin:
        yield kafka_admin


@pytest.fixture(scope="session")
def registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The session's Schema Registry (Apicurio, platform_streams/dev/servers/schema_registry.py), started once
    for every suite that needs one (the registry serdes, Spark, Dagster): mark those tests
    ``kafka_side``, where it runs."""
    from platform_streams.dev.servers.schema_registry import running_registry

    started = time.monotonic()
    with running_registry(tmp_path_factory.mktemp("schema-registry") / "registry.log") as url:
        yield url
    print(f"\nschema registry session: {time.monotonic() - started:.1f}s")
