"""The DSL's logical plan (``dsl/plan.py``): operators record plan nodes, ``build()`` optimizes
the plan and lowers it into the builder's one ``Topology``, and a generic ``LoweringNode`` lets an operator
written against the ``Topology`` API join the plan with one line (Kafka's
``InternalStreamsBuilder.buildAndOptimizeTopology`` over its ``GraphNode`` s)."""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dsl import StreamsBuilder
from platform_streams.dsl.plan import LoweringNode, OptimizableRepartitionNode, ProcessorGraphNode
from platform_streams.errors import TopologyError
from platform_streams.processor import Processor, Record
from platform_streams.serde import String
from platform_streams.testing import TopologyTestDriver
from platform_streams.topology.topology import Topology

OPTIMIZE = StreamsConfig(application_id="app", bootstrap_servers="x:9092", topology_optimization="all")
S = String()
CONFIG = {"default_key_serde": "string", "default_value_serde": "string"}


class Collect(Processor):
    seen: list[tuple[Any, Any]] = []

    def process(self, record: Record) -> None:
        Collect.seen.append((record.key, record.value))


def test_operators_record_plan_nodes_and_build_returns_the_builders_one_topology() -> None:
    """StreamsBuilder.build() returns the builder's ``topology`` field every time
    (streams/src/main/java/org/apache/kafka/streams/StreamsBuilder.java)."""
    builder = StreamsBuilder()
    builder.stream("in").filter(lambda k, v: v is not None).to("out")
    kinds = [type(node).__name__ for node in builder.plan.nodes]
    assert kinds == ["StreamSourceNode", "ProcessorGraphNode", "StreamSinkNode"]
    first, second = builder.build(), builder.build()
    assert first is second
    assert list(first.nodes) == [
        "KSTREAM-SOURCE-0000000000",
        "KSTREAM-FILTER-0000000001",
        "KSTREAM-SINK-0000000002",
    ]
    # operators recorded after a build are lowered into the same object by the next one
    builder.stream("in2").to("out2")
    third = builder.build()
    assert third is first
    assert list(third.nodes)[3:] == ["KSTREAM-SOURCE-0000000003", "KSTREAM-SINK-0000000004"]


def test_a_processor_added_to_the_built_topology_runs_after_another_build() -> None:
    """Kafka's KTableFilterTest / KTableMapValuesTest pattern: ``builder.build().addProcessor(
    "proc", supplier, tableName)`` and then ``new TopologyTestDriver(builder.build(), props)``."""
    builder = StreamsBuilder()
    builder.stream("in").filter(lambda k, v: v != "drop", "kept")
    builder.build().add_processor("proc", Collect, "kept")
    Collect.seen = []
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("in", S, S)
        topic.pipe_input("a", "x")
        topic.pipe_input("b", "drop")
        topic.pipe_input("c", "y")
    assert Collect.seen == [("a", "x"), ("c", "y")]


def test_errors_come_when_the_operator_is_called() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in")
    stream.filter(lambda k, v: True, "f")
    with pytest.raises(TopologyError, match="already added"):
        stream.filter(lambda k, v: True, "f")
    # nothing of the refused call was recorded
    assert [n.name for n in builder.plan.nodes] == ["KSTREAM-SOURCE-0000000000", "f"]


def test_the_merge_pass_rewrites_the_plan_not_a_topology() -> None:
    builder = StreamsBuilder()
    rekeyed = builder.stream("in").select_key(lambda k, v: v)
    rekeyed.group_by_key().count()
    rekeyed.group_by_key().count()
    before = [n for n in builder.plan.nodes if isinstance(n, OptimizableRepartitionNode)]
    assert len(before) == 2
    unoptimized = builder.build()
    assert len([t for t in unoptimized.internal_topics.values() if t.kind == "repartition"]) == 2
    optimized = builder.build(OPTIMIZE)
    after = [n for n in builder.plan.nodes if isinstance(n, OptimizableRepartitionNode)]
    assert len(after) == 1 and after[0].parents == ["KSTREAM-KEY-SELECT-0000000001"]
    assert [t.name for t in optimized.internal_topics.values() if t.kind == "repartition"] == [after[0].topic]
    # the builder stays usable on the rewritten plan (its check topology was re-made)
    builder.stream("other").to("out")
    assert "KSTREAM-SINK-" in list(builder.build(OPTIMIZE).nodes)[-1]


def _old_style_operator(parent: str) -> Any:
    """An operator written against the Topology API (as foreign-key joins are being written)."""

    def lowering(topology: Topology) -> None:
        topology.add_processor("GENERIC-COLLECT", Collect, parent)

    return lowering


def test_a_lowering_node_wraps_an_old_style_operator_in_one_line() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in")
    node = builder.plan.add_lowering(_old_style_operator(stream.node_name))
    assert isinstance(node, LoweringNode)
    assert node.created == ("GENERIC-COLLECT",) and node.parents == [stream.node_name]
    with pytest.raises(TopologyError, match="already added"):  # checked at the call
        builder.plan.add_lowering(_old_style_operator(stream.node_name))
    Collect.seen = []
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 0)
    assert Collect.seen == [("k", "v")]


def test_a_lowering_node_is_re_parented_by_the_optimizer() -> None:
    """A generic node reading a repartition that the merge pass replaces follows the merged
    topic: its old parent name is mapped to the merged source's while it is lowered."""
    builder = StreamsBuilder()
    rekeyed = builder.stream("in").select_key(lambda k, v: v)
    rekeyed.group_by_key().count()
    through = rekeyed.repartition_for_join(rekeyed.node_name, None, None, user_named=False)
    builder.plan.add_lowering(_old_style_operator(through.node_name))
    topology = builder.build(OPTIMIZE)
    merged = next(n for n in builder.plan.nodes if isinstance(n, OptimizableRepartitionNode))
    assert topology.node("GENERIC-COLLECT").parents == [merged.source]
    Collect.seen = []
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 0)
    assert Collect.seen == [("v", "v")]  # re-keyed, through the one repartition topic


def test_a_branch_op_set_after_its_children_is_lowered() -> None:
    builder = StreamsBuilder()
    branches = builder.stream("in").split().branch(lambda k, v: v == "a").default_branch()
    split_node = builder.plan.node("KSTREAM-BRANCH-0000000001")
    assert isinstance(split_node, ProcessorGraphNode) and split_node.op is not None
    assert split_node.op.kind == "branch" and len(branches) == 2
