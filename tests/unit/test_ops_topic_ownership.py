"""Ownership of internal and coordination topics, without a broker.

``<application_id>-control`` and ``<application_id>-metadata`` are created by the runtime,
not declared by the topology, yet they are the application's: the topics operations and
the reset must treat them as owned -- except when the topology itself reads or writes a
topic of that name, which then holds user data and is never deleted. A topic named like an
internal topic of ``shop`` is not ``shop``'s when an application whose id extends it
(``shop-v2``) claims it. The broker-side behaviour (plan, delete, reset after a real run,
another application running beside) is in tests/integration/test_ops_*.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import pytest

from platform_streams import StreamsBuilder
from platform_streams.config import StreamsConfig
from platform_streams.dsl import Materialized, TableJoined
from platform_streams.kafka import GroupDescription, KafkaAdmin
from platform_streams.ops import OperationRefusedError, delete_internal_topics
from platform_streams.ops.ownership import OtherApplications, find_other_applications, parses_as_internal
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
from platform_streams.runtime.membership.control_channel import control_topic_name
from platform_streams.runtime.task_assignment.protocol import members_topic_name
from platform_streams.serde import Long, String
from platform_streams.state import Stores
from platform_streams.topology.compiler import TopologyPlan
from tests.integration.ops_apps import build_topology

APP = "shop"
CONTROL, METADATA, MEMBERS = control_topic_name(APP), metadata_topic(APP), members_topic_name(APP)
NO_OTHERS = OtherApplications(APP)
DECLARED = {f"{APP}-rekey-repartition", f"{APP}-words-changelog", f"{APP}-letters-changelog"}


class FakeAdmin:
    """The admin calls ``delete_internal_topics`` makes, over an in-memory topic list and no groups."""

    def __init__(self, topics: Sequence[str], groups: Sequence[str] = (), active: Sequence[str] = ()) -> None:
        self.topics = dict.fromkeys(topics, 1)
        self.groups, self.active = list(groups), set(active)
        self.deleted: list[str] = []
        #: a PLAINTEXT connection, as KafkaAdmin.conf says (the authorized-operations
        #: check before a delete runs only on secured connections)
        self.conf = {"bootstrap.servers": "fake:9092"}

    def list_topics(self) -> dict[str, int]:
        return dict(self.topics)

    def list_group_ids(self, timeout: float = 10.0) -> list[str]:
        return self.groups

    def describe_group(self, group_id: str, timeout: float = 10.0) -> GroupDescription:
        return GroupDescription(group_id, "STABLE" if group_id in self.active else "EMPTY")

    def delete_topics(self, topics: Sequence[str]) -> dict[str, str]:
        self.deleted += topics
        for t in topics:
            del self.topics[t]
        return dict.fromkeys(topics, "deleted")


def plan_of(source: str = "in", sink: str = "out") -> TopologyPlan:
    return as_plan(build_topology(source, sink))


def problem(topic: str, plan: TopologyPlan, *, include_orphans: bool = True) -> str | None:
    return ownership_problem(topic, plan, APP, include_orphans=include_orphans, others=NO_OTHERS)


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
        assert problem(topic, plan, include_orphans=False) is None
    assert coordination_clashes(plan, APP) == []
    # exact names only: neither lookalikes nor another application's are ours
    for foreign in (f"{APP}-controls", f"{APP}-control-x", control_topic_name("shop2"), f"x{METADATA}"):
        assert "not named" in (problem(foreign, plan) or "")
    old = f"{APP}-old-changelog"
    assert orphan_topics([CONTROL, METADATA, old], plan, APP, NO_OTHERS) == [old]


def test_a_user_topic_named_like_a_coordination_topic_is_never_owned() -> None:
    plan = plan_of(CONTROL, METADATA)
    assert coordination_topics(plan, APP) == [MEMBERS]
    assert not {CONTROL, METADATA} & set(owned_topic_kinds(plan, APP))
    for topic in (CONTROL, METADATA):
        assert "input or output" in (problem(topic, plan) or "")
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


def test_names_parse_like_kafkas_internal_topics() -> None:
    """Kafka's StreamsResetterTest.shouldDetermineInternalTopicBasedOnTopicName1
    (tools/src/test/java/org/apache/kafka/tools/StreamsResetterTest.java) plus the two
    plain suffixes and the coordination topics; a name is needed before the suffix."""
    for topic in (
        "appId-named-subscription-response-topic",
        "appId-named-subscription-registration-topic",
        "appId-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-12323232-topic",
        "appId-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-12323232-topic",
        "appId-counts-changelog",
        "appId-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition",
        "appId-control",
        "appId-metadata",
        "appId-members",
    ):
        assert parses_as_internal(topic, "appId"), topic
    for topic in ("appId-orders", "appId-changelog", "appId--repartition", "appIdx-a-changelog"):
        assert not parses_as_internal(topic, "appId"), topic


def test_every_internal_topic_the_dsl_declares_parses() -> None:
    builder = StreamsBuilder()
    left, right = builder.table("l"), builder.table("r")
    left.join(right, lambda v: v, lambda a, b: a).to_stream().to("o1")
    left.left_join(right, lambda v: v, lambda a, b: a, TableJoined.as_("fk")).to_stream().to("o2")
    counts = builder.stream("s").group_by(lambda k, v: v).count(materialized=Materialized.as_("counts"))
    counts.to_stream().to("o3")
    plan = as_plan(builder.build())
    topics = set(internal_topic_kinds(plan, APP))
    assert len(topics) >= 7  # two joins' two topics each, a repartition and changelogs
    assert [t for t in topics if not parses_as_internal(t, APP)] == []


def test_a_longer_application_id_claims_the_names_it_parses() -> None:
    others = OtherApplications(APP, {f"{APP}-v2": "its consumer group exists", f"{APP}-v2-b": "x"})
    assert others.claimant(f"{APP}-v2-b-counts-changelog") == f"{APP}-v2-b"  # the longest
    assert others.claimant(f"{APP}-v2-counts-changelog") == f"{APP}-v2"
    assert others.claimant(f"{APP}-counts-changelog") is None
    assert others.claimant(f"{APP}-v2-changelog") is None  # "changelog" alone is no internal name of shop-v2
    claim = others.claim(f"{APP}-v2-counts-changelog") or ""
    assert f"'{APP}-v2'" in claim and "its consumer group exists" in claim


def test_other_applications_are_known_by_group_activity_or_coordination_topic() -> None:
    topics = [f"{APP}-{other}-x-changelog" for other in "abcd"] + [control_topic_name(f"{APP}-c")]
    # shop-d: no group, no coordination topic -- nothing says it exists
    admin = FakeAdmin(topics, groups=[f"{APP}-a", "unrelated"], active=[f"{APP}-b"])
    found = find_other_applications(cast(KafkaAdmin, admin), APP, topics)
    assert set(found.evidence) == {f"{APP}-a", f"{APP}-b", f"{APP}-c"}
    assert "exists" in found.evidence[f"{APP}-a"] and "active" in found.evidence[f"{APP}-b"]
    assert control_topic_name(f"{APP}-c") in found.evidence[f"{APP}-c"]
    assert orphan_topics(topics, plan_of(), APP, found) == [f"{APP}-d-x-changelog"]


def test_a_declared_topic_another_application_claims_is_not_deleted() -> None:
    """``shop`` declares store ``v2-words``, ``shop-v2`` has store ``words``: both write
    ``shop-v2-words-changelog``. Deleting it would break ``shop-v2``: refused as a whole."""
    topology = build_topology("in", "out")
    topology.add_state_store(
        Stores.key_value_store_builder(Stores.persistent_key_value_store("v2-words"), String(), Long()),
        "count",
    )
    shared = f"{APP}-v2-words-changelog"
    admin = FakeAdmin([*DECLARED, shared], groups=[f"{APP}-v2"])
    with pytest.raises(OperationRefusedError, match=f"{shared}: it belongs to application '{APP}-v2'"):
        delete_internal_topics(topology, config(), admin=cast(KafkaAdmin, admin))
    assert admin.deleted == []
