"""The deploy gate's classification (ops/topology_diff.py) over manifests of real DSL topologies.

Each case builds the deployed and the candidate topology with the DSL, as an application
would, so the generated names (``KSTREAM-AGGREGATE-STATE-STORE-0000000003``) are the ones
the DSL really produces when an operator is added upstream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Grouped, Materialized
from platform_streams.ops.topology_diff import Change, diff_manifests, diff_unrecorded
from platform_streams.serde import Json, Long, String
from platform_streams.topology.manifest import topology_manifest

APP = "gate-app"


def _counts(*, filtered: bool = False, store: str | None = None, value_serde: Any = None) -> Topology:
    """orders -> (filter?) -> group by value's customer -> count (store generated or named)."""
    builder = StreamsBuilder()
    stream = builder.stream("orders")
    if filtered:
        stream = stream.filter(lambda k, v: v is not None)
    grouped = stream.group_by(lambda k, v: v, Grouped(key_serde=String(), value_serde=String()))
    materialized = Materialized(store_name=store, key_serde=String(), value_serde=value_serde or Long())
    grouped.count(materialized=materialized).to_stream().to("counts")
    return builder.build()


def _diff(old: Callable[[], Topology], new: Callable[[], Topology]) -> Any:
    return diff_manifests(topology_manifest(old()), topology_manifest(new()), APP)


def test_the_same_topology_is_compatible_and_nothing_deployed_is_too() -> None:
    same = _diff(_counts, _counts)
    assert same.change is Change.COMPATIBLE and not same.findings and not same.changed
    first = diff_manifests(None, topology_manifest(_counts()), APP)
    assert first.change is Change.COMPATIBLE and "nothing deployed" in first.summary()


def test_an_operator_added_upstream_renames_the_generated_store_and_repartition_incompatible() -> None:
    diff = _diff(_counts, lambda: _counts(filtered=True))
    assert diff.change is Change.INCOMPATIBLE
    kinds = {f.kind: f for f in diff.findings}
    store = kinds["store_orphaned"]
    assert store.subject.startswith("KSTREAM-AGGREGATE-STATE-STORE-")
    assert store.topic == f"{APP}-{store.subject}-changelog"
    assert "Materialized.as_" in store.fix and "reset" in store.fix and "generated" in store.fix
    assert "starts empty" in store.problem  # paired with the store that replaces it
    repartition = kinds["repartition_orphaned"]
    assert repartition.topic == f"{APP}-{repartition.subject}" and "Grouped.as_" in repartition.fix
    assert store.subject in diff.summary()


def test_named_operators_keep_their_state_across_an_added_operator() -> None:
    diff = _diff(lambda: _counts(store="per-customer"), lambda: _counts(filtered=True, store="per-customer"))
    # the repartition topic is named after the store (per-customer-repartition), as in Kafka Streams
    assert diff.changed and diff.change is Change.COMPATIBLE and not diff.findings, diff.lines()


def test_a_changed_value_serde_is_a_changed_changelog_format() -> None:
    diff = _diff(
        lambda: _counts(store="per-customer"), lambda: _counts(store="per-customer", value_serde=Json())
    )
    [finding] = [f for f in diff.findings if f.subject == "per-customer"]
    assert finding.change is Change.INCOMPATIBLE and finding.kind == "changelog_format"
    assert "value serde" in finding.problem and finding.topic == f"{APP}-per-customer-changelog"


def test_a_new_store_over_consumed_input_needs_a_reset_a_new_input_does_not() -> None:
    def plain() -> Topology:
        builder = StreamsBuilder()
        builder.stream("orders").to("copy")
        return builder.build()

    def with_table(topic: str) -> Callable[[], Topology]:
        def build() -> Topology:
            builder = StreamsBuilder()
            orders = builder.stream("orders")
            orders.to("copy")
            counted = orders if topic == "orders" else builder.stream(topic)
            counted.group_by_key().count(materialized=Materialized.as_("latest"))
            return builder.build()

        return build

    over_old = _diff(plain, with_table("orders"))
    assert over_old.change is Change.NEEDS_RESET and over_old.subjects(Change.NEEDS_RESET) == ["latest"]
    over_new = _diff(plain, with_table("customers"))
    assert over_new.change is Change.COMPATIBLE and over_new.changed


def test_without_a_recorded_topology_the_changelogs_on_the_broker_must_still_be_written() -> None:
    deployed_store = next(iter(topology_manifest(_counts())["stores"]))
    existing = [f"{APP}-{deployed_store}-changelog"]
    same = diff_unrecorded(existing, topology_manifest(_counts()), APP)
    assert same.change is Change.COMPATIBLE and not same.findings
    moved = diff_unrecorded(existing, topology_manifest(_counts(filtered=True)), APP)
    [finding] = moved.findings
    assert moved.change is Change.INCOMPATIBLE and finding.subject == deployed_store
    assert finding.topic == existing[0] and "no topology was recorded" in finding.problem
