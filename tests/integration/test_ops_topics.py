"""Internal topic lifecycle on the real broker: plan, create, validate, delete (API and CLI).

The application (tests/integration/ops_apps.py) has one repartition topic and two logged
stores, so three internal topics, plus the three coordination topics the runtime creates
(``<id>-control``, ``<id>-metadata``, ``<id>-members``): listed by plan, never created by ``create``,
deleted with the rest. The delete tests are the safety net: a topic that is
not the application's -- its input, its output, or a topic merely *named* like one of its
internal topics -- must never be deleted, and a refused request deletes nothing at all.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from platform_streams.cli import main
from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaAdmin, TopicSpec
from platform_streams.ops import (
    OperationRefusedError,
    TopicsResult,
    create_internal_topics,
    delete_internal_topics,
    plan_internal_topics,
    validate_internal_topics,
)
from platform_streams.ops.ownership import OtherApplications
from platform_streams.ops.topics import as_plan, ownership_problem
from platform_streams.query.directory import metadata_topic
from platform_streams.runtime.membership.control_channel import control_topic_name
from platform_streams.runtime.task_assignment.protocol import members_topic_name
from platform_streams.topology.topology import Topology
from tests.integration.ops_apps import build_topology
from tests.support.kafka import new_topic

pytestmark = pytest.mark.broker

PARTITIONS = 3


@dataclass
class App:
    topology: Topology
    config: StreamsConfig
    input: str
    output: str

    @property
    def id(self) -> str:
        return self.config.application_id

    def internal(self, name: str) -> str:
        return f"{self.id}-{name}"

    @property
    def internal_topics(self) -> set[str]:
        return {self.internal(n) for n in ("rekey-repartition", "words-changelog", "letters-changelog")}

    @property
    def coordination_topics(self) -> set[str]:
        return {control_topic_name(self.id), metadata_topic(self.id), members_topic_name(self.id)}

    def create_coordination_topics(self, admin: KafkaAdmin) -> None:
        """What a start of the application does (the runtime creates them, ``create`` does not)."""
        admin.create_topics(
            [TopicSpec(t, 1, config={"cleanup.policy": "compact"}) for t in self.coordination_topics]
        )


@pytest.fixture
def app(admin: KafkaAdmin, bootstrap_servers: str, tmp_path: Path) -> Iterator[App]:
    source, sink = new_topic(admin, PARTITIONS, "ops-in"), new_topic(admin, PARTITIONS, "ops-out")
    config = StreamsConfig(
        application_id=f"ops-topics-{uuid.uuid4().hex[:10]}",
        bootstrap_servers=bootstrap_servers,
        state_dir=tmp_path,
    )
    yield App(build_topology(source, sink), config, source, sink)
    admin.delete_topics(
        [t for t in admin.list_topics() if t.startswith(config.application_id)] + [source, sink]
    )


def test_plan_lists_every_internal_topic_with_size_and_configs(app: App) -> None:
    result = plan_internal_topics(app.topology, app.config)
    topics = {t.topic: t for t in result.topics}
    assert set(topics) == app.internal_topics | app.coordination_topics
    declared = [topics[t] for t in app.internal_topics]
    assert all(t.status == "missing" and t.partitions == PARTITIONS for t in declared)
    for name in app.coordination_topics:
        assert (topics[name].kind, topics[name].status) == ("coordination", "missing")
    repartition = topics[app.internal("rekey-repartition")]
    assert repartition.kind == "repartition" and repartition.config["cleanup.policy"] == "delete"
    for store in ("words", "letters"):
        changelog = topics[app.internal(f"{store}-changelog")]
        assert changelog.kind == "changelog" and changelog.config["cleanup.policy"] == "compact"
    assert app.internal("words-changelog") in result.summary()
    assert control_topic_name(app.id) in result.summary()


def test_plan_shows_existing_coordination_topics_and_create_leaves_them_to_the_runtime(
    app: App, admin: KafkaAdmin
) -> None:
    created = create_internal_topics(app.topology, app.config)
    assert {t.topic for t in created.topics} == app.internal_topics
    assert not app.coordination_topics & set(admin.list_topics())
    assert validate_internal_topics(app.topology, app.config).ok  # missing before a start is normal

    app.create_coordination_topics(admin)
    planned = {t.topic: t for t in plan_internal_topics(app.topology, app.config).topics}
    for name in app.coordination_topics:
        assert (planned[name].kind, planned[name].status, planned[name].actual_partitions) == (
            "coordination",
            "exists",
            1,
        )
    assert plan_internal_topics(app.topology, app.config).orphans == []


def test_create_is_idempotent_and_validate_passes(app: App, admin: KafkaAdmin) -> None:
    dry = create_internal_topics(app.topology, app.config, dry_run=True)
    assert {t.status for t in dry.topics} == {"would_create"}
    assert not app.internal_topics & set(admin.list_topics())

    first = create_internal_topics(app.topology, app.config)
    assert {t.topic: t.status for t in first.topics} == dict.fromkeys(app.internal_topics, "created")
    assert admin.partition_counts(app.internal_topics) == dict.fromkeys(app.internal_topics, PARTITIONS)
    second = create_internal_topics(app.topology, app.config)
    assert {t.status for t in second.topics} == {"exists"} and second.ok

    validated = validate_internal_topics(app.topology, app.config)
    assert validated.ok and validated.issues == [], validated.summary()


def test_validate_reports_missing_wrong_partitions_and_wrong_cleanup_policy(
    app: App, admin: KafkaAdmin
) -> None:
    admin.create_topics(
        [
            TopicSpec(app.internal("words-changelog"), PARTITIONS + 1, config={"cleanup.policy": "compact"}),
            TopicSpec(app.internal("letters-changelog"), PARTITIONS, config={"cleanup.policy": "delete"}),
        ]
    )
    result = validate_internal_topics(app.topology, app.config)
    found = {(i.topic, i.problem): i for i in result.issues}
    assert set(found) == {
        (app.internal("rekey-repartition"), "missing"),
        (app.internal("words-changelog"), "partitions"),
        (app.internal("letters-changelog"), "config"),
    }
    assert found[(app.internal("words-changelog"), "partitions")].actual == str(PARTITIONS + 1)
    policy = found[(app.internal("letters-changelog"), "config")]
    assert (policy.expected, policy.actual) == ("cleanup.policy=compact", "cleanup.policy=delete")
    assert not result.ok and "NOT OK" in result.summary()

    created = create_internal_topics(app.topology, app.config)  # creates the missing one, alters nothing
    assert {t.topic: t.status for t in created.topics}[app.internal("rekey-repartition")] == "created"
    assert {i.problem for i in created.issues} == {"partitions", "config"}
    assert (
        admin.partition_counts([app.internal("words-changelog")])[app.internal("words-changelog")]
        == PARTITIONS + 1
    )


def test_ownership_rules(app: App) -> None:
    plan = as_plan(app.topology)
    orphan = app.internal("foo-changelog")

    def problem(topic: str, include_orphans: bool) -> str:
        found = ownership_problem(
            topic, plan, app.id, include_orphans=include_orphans, others=OtherApplications(app.id)
        )
        return found or ""

    assert problem(app.internal("words-changelog"), False) == ""
    assert "input or output" in problem(app.input, True)
    assert "input or output" in problem(app.output, True)
    assert "does not declare" in problem(orphan, False)
    assert problem(orphan, True) == ""
    for coordination in app.coordination_topics:
        assert problem(coordination, False) == ""
    assert "not named" in problem(f"{app.id}-foo", True)
    assert "not named" in problem("other-words-changelog", True)


def test_delete_refuses_foreign_topics_and_deletes_nothing(app: App, admin: KafkaAdmin) -> None:
    create_internal_topics(app.topology, app.config)
    app.create_coordination_topics(admin)
    orphan = app.internal("foo-changelog")
    admin.create_topics([TopicSpec(orphan, 1)])
    owned = app.internal_topics | app.coordination_topics
    everything = owned | {orphan, app.input, app.output}

    for foreign in (app.input, app.output, orphan):
        with pytest.raises(OperationRefusedError) as refused:
            delete_internal_topics(
                app.topology, app.config, topics=[app.internal("words-changelog"), foreign]
            )
        found = refused.value.result
        assert isinstance(found, TopicsResult) and [r.topic for r in found.refused] == [foreign]
        assert everything <= set(admin.list_topics()), f"something was deleted while refusing {foreign}"

    with pytest.raises(OperationRefusedError, match="not confirmed"):
        delete_internal_topics(app.topology, app.config, confirm=lambda topics: False)
    assert everything <= set(admin.list_topics())

    asked: list[list[str]] = []

    def confirm(topics: Sequence[str]) -> bool:
        asked.append(list(topics))
        return True

    result = delete_internal_topics(app.topology, app.config, confirm=confirm)
    assert asked == [sorted(owned)]
    assert {t.topic: t.status for t in result.topics} == dict.fromkeys(owned, "deleted")
    assert {t.topic for t in result.topics if t.kind == "coordination"} == app.coordination_topics
    assert result.orphans == [orphan] and any(orphan in w for w in result.warnings)
    remaining = set(admin.list_topics())
    assert not owned & remaining and {orphan, app.input, app.output} <= remaining

    leftovers = delete_internal_topics(app.topology, app.config, include_orphans=True)
    assert [(t.topic, t.kind, t.status) for t in leftovers.topics] == [(orphan, "orphan", "deleted")]
    assert {app.input, app.output} <= set(admin.list_topics()) and orphan not in admin.list_topics()


def test_delete_dry_run_and_missing_topics(app: App, admin: KafkaAdmin) -> None:
    create_internal_topics(app.topology, app.config)
    dry = delete_internal_topics(app.topology, app.config, dry_run=True)
    assert {t.status for t in dry.topics} == {"would_delete"}
    assert app.internal_topics <= set(admin.list_topics())
    admin.delete_topics([app.internal("words-changelog")])
    named = delete_internal_topics(app.topology, app.config, topics=[app.internal("words-changelog")])
    assert [t.status for t in named.topics] == ["missing"]


@pytest.fixture
def cli_env(app: App, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Environment for ``tests.integration.ops_apps:topology``; returns the common CLI args."""
    monkeypatch.setenv("OPS_TEST_INPUT", app.input)
    monkeypatch.setenv("OPS_TEST_OUTPUT", app.output)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # no terminal: confirmations must refuse
    return [
        "tests.integration.ops_apps:topology",
        "--set",
        f"application.id={app.id}",
        "--set",
        f"bootstrap.servers={app.config.bootstrap_servers}",
    ]


def test_cli_topics_commands(
    app: App, admin: KafkaAdmin, cli_env: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["topics", "plan", *cli_env, "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert {t["topic"] for t in planned["topics"]} == app.internal_topics | app.coordination_topics
    assert planned["ok"] is True

    assert main(["topics", "validate", *cli_env]) == 1
    assert "missing" in capsys.readouterr().out
    assert main(["topics", "create", *cli_env]) == 0
    assert main(["topics", "validate", *cli_env]) == 0
    capsys.readouterr()

    assert main(["topics", "delete", *cli_env, "--topic", app.input, "--yes"]) == 1
    captured = capsys.readouterr()
    assert "REFUSED" in captured.out and "not" in captured.err
    assert main(["topics", "delete", *cli_env]) == 1  # no terminal, no --yes
    assert "--yes" in capsys.readouterr().err
    assert app.internal_topics | {app.input} <= set(admin.list_topics())

    assert main(["topics", "delete", *cli_env, "--yes"]) == 0
    assert not app.internal_topics & set(admin.list_topics())
    assert {app.input, app.output} <= set(admin.list_topics())
