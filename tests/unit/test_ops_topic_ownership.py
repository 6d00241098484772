"""Ownership of the runtime's coordination topics, without a broker.

``<application_id>-control`` and ``<application_id>-metadata`` are created by the runtime,
not declared by the topology, yet they are the application's: the topics operations and
the reset must treat them as owned -- except when the topology itself reads or writes a
topic of that name, which then holds user data and is never deleted. The broker-side
behaviour (plan, delete, reset after a real run) is in tests/integration/test_ops_*.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaAdmin
from platform_streams.ops import OperationRefusedError, delete_internal_topics
from platform_streams.ops.topics import (
    as_plan,
    coordination_clashes,
    coordination_topics,
    internal_topic_kinds,
    orphan_topics,
    owned_topic_kinds,
    ownership_problem,
)
from platform_streams.query.directory import metadata_topic
from platform_streams.runtime.control_channel import control_topic_name
from platform_streams.runtime.task_assignment.protocol import members_topic_name
from platform_streams.topology.compiler import TopologyPlan
from tests.integration.ops_apps import build_topology

APP = "shop"
CONTROL, METADATA, MEMBERS = control_topic_name(APP), metadata_topic(APP), members_topic_name(APP)
DECLARED = {f"{APP}-rekey-repartition", f"{APP}-words-changelog", f"{APP}-letters-changelog"}


class FakeAdmin:
    """The two admin calls ``delete_internal_topics`` makes, over an in-memory topic list."""

    def __init__(self, topics: Sequence[str]) -> None:
        self.topics = dict.fromkeys(topics, 1)
        self.deleted: list[str] = []

    def list_topics(self) -> dict[str, int]:
        return dict(self.topics)

    def delete_topics(self, topics: Sequence[str]) -> dict[str, str]:
        self.deleted += topics
        for t in topics:
            del self.topics[t]
        return dict.fromkeys(topics, "deleted")


def plan_of(source: str = "in", sink: str = "out") -> TopologyPlan:
    return as_plan(build_topology(source, sink))


def config() -> StreamsConfig:
    return StreamsConfig(application_id=APP, bootstrap_servers="localhost:1")


def test_coordination_topics_are_owned_but_not_declared() -> None:
    plan = plan_of()
    assert coordination_topics(plan, APP) == sorted([CONTROL, METADATA, MEMBERS])
    assert set(internal_topic_kinds(plan, APP)) == DECLARED
    owned = owned_topic_kinds(plan, APP)
    assert set(owned) == DECLARED | {CONTROL, METADATA, MEMBERS}
    assert owned[CONTROL] == owned[METADATA] == owned[MEMBERS] == "coordination"
    for topic in (CONTROL, METADATA, MEMBERS):
        assert ownership_problem(topic, plan, APP, include_orphans=False) is None
    assert coordination_clashes(plan, APP) == []
    # exact names only: neither lookalikes nor another application's are ours
    for foreign in (f"{APP}-controls", f"{APP}-control-x", control_topic_name("shop2"), f"x{METADATA}"):
        assert "not named" in (ownership_problem(foreign, plan, APP, include_orphans=True) or "")
    assert orphan_topics([CONTROL, METADATA, f"{APP}-old-changelog"], plan, APP) == [f"{APP}-old-changelog"]


def test_a_user_topic_named_like_a_coordination_topic_is_never_owned() -> None:
    plan = plan_of(CONTROL, METADATA)
    assert coordination_topics(plan, APP) == [MEMBERS]
    assert not {CONTROL, METADATA} & set(owned_topic_kinds(plan, APP))
    for topic in (CONTROL, METADATA):
        assert "input or output" in (ownership_problem(topic, plan, APP, include_orphans=True) or "")
    clashes = coordination_clashes(plan, APP)
    assert len(clashes) == 2 and CONTROL in clashes[0] and METADATA in clashes[1]

    admin = FakeAdmin([CONTROL, METADATA, *DECLARED])
    result = delete_internal_topics(plan, config(), admin=cast(KafkaAdmin, admin))
    assert set(admin.deleted) == DECLARED and {CONTROL, METADATA} <= set(admin.topics)
    assert len(result.warnings) == 2
    with pytest.raises(OperationRefusedError):
        delete_internal_topics(plan, config(), topics=[METADATA], admin=cast(KafkaAdmin, admin))
    assert METADATA in admin.topics


def test_delete_takes_the_existing_coordination_topics_with_the_internal_ones() -> None:
    admin = FakeAdmin([CONTROL, "in", "out", *DECLARED])
    result = delete_internal_topics(plan_of(), config(), admin=cast(KafkaAdmin, admin))
    assert sorted(admin.deleted) == sorted(DECLARED | {CONTROL})
    assert set(admin.topics) == {"in", "out"}
    kinds = {t.topic: (t.kind, t.status) for t in result.topics}
    assert kinds[CONTROL] == ("coordination", "deleted") and METADATA not in kinds  # it never existed

    named = delete_internal_topics(plan_of(), config(), topics=[METADATA], admin=cast(KafkaAdmin, admin))
    assert [(t.topic, t.kind, t.status) for t in named.topics] == [(METADATA, "coordination", "missing")]
