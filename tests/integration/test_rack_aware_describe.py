"""Rack-aware active placement against a real broker: what the leader learns of the replicas.

The placement itself is pure logic (tests/unit/runtime/test_rack_aware_*.py). Here the
leader's input comes from the broker: DescribeTopics gives each partition's replicas and
their brokers' ``broker.rack``. No broker this suite runs has a rack (the shared Apache
Kafka node and Tansu are single nodes without ``broker.rack``), so what can be shown is
that the racks are read as the broker states them and that a broker without a rack turns
the optimization off, leaving the placement as with strategy "none". A placement into a
rack needs brokers in racks; none is available here.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from platform_streams import StreamsBuilder
from platform_streams.config import StreamsConfig
from platform_streams.kafka.admin import KafkaAdmin, TopicSpec
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.task_assignment.client_state import AssignmentConfigs
from platform_streams.runtime.task_assignment.coordinator import AssignmentCoordinator
from platform_streams.runtime.task_assignment.protocol import Report, compute_assignment
from platform_streams.topology.compiler import compile_topology

pytestmark = [pytest.mark.broker, pytest.mark.kafka_side]


def test_the_leader_reads_replica_racks_from_the_broker(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    topic = f"rack-in-{uuid.uuid4().hex[:8]}"
    admin.create_topics([TopicSpec(topic, 2)])
    racks = admin.partition_racks([topic, f"absent-{uuid.uuid4().hex[:8]}"])
    assert set(racks) == {(topic, 0), (topic, 1)}
    assert all(
        replicas and all(r is None or isinstance(r, str) for r in replicas) for replicas in racks.values()
    )

    builder = StreamsBuilder()
    builder.stream(topic).to(f"{topic}-out")
    config = StreamsConfig(
        application_id=f"rack-{uuid.uuid4().hex[:8]}",
        bootstrap_servers=bootstrap_servers,
        state_dir=tmp_path,
        client_rack="rack-a",
        rack_aware_assignment_strategy="min_traffic",
    )
    coordinator = AssignmentCoordinator(
        compile_topology(builder.build()),
        config,
        "p1",
        tmp_path / "p1",
        publish=lambda key, value: None,
        standby_positions=dict,
        on_assignment=lambda: None,
    )
    coordinator.start({topic: 2})
    inputs = coordinator._rack_inputs()
    assert inputs.input_partitions == {TaskId(0, 0): [f"{topic}/0"], TaskId(0, 1): [f"{topic}/1"]}
    assert inputs.partition_racks == {f"{topic}/{p}": racks[(topic, p)] for p in (0, 1)}

    reports = [
        Report(generation=1, member="m1", process="p1", slots=(0,), time_ms=0, rack="rack-a"),
        Report(generation=1, member="m2", process="p2", slots=(1,), time_ms=0, rack="rack-b"),
    ]
    tasks = coordinator.all_tasks
    plain = compute_assignment(1, reports, tasks, {}, {}, AssignmentConfigs())
    placed = compute_assignment(1, reports, tasks, {}, {}, coordinator.configs, racks=inputs)
    if any(r is None for replicas in racks.values() for r in replicas):
        assert placed.members == plain.members  # a broker without broker.rack: off, as in Kafka
    else:
        assert sorted(len(ts) for ts in placed.members.values()) == [1, 1]  # counts are kept
