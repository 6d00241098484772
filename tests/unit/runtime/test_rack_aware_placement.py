"""Rack-aware active placement wired into the assignor, the protocol and the settings.

The assignor cases follow Kafka Streams 4.3.1's ``HighAvailabilityTaskAssignorTest``
(``parameter()``: none / min_traffic / balance_subtopology), where the rack-aware step runs
after the balanced placement of the stateful and of the stateless active tasks.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from platform_streams import StreamsBuilder
from platform_streams.config import StreamsConfig
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.task_assignment.client_state import AssignmentConfigs, ClientState
from platform_streams.runtime.task_assignment.coordinator import AssignmentCoordinator
from platform_streams.runtime.task_assignment.high_availability import assign
from platform_streams.runtime.task_assignment.protocol import Report, compute_assignment
from platform_streams.runtime.task_assignment.rack_aware import RackAwareTaskAssignor, RackInputs
from platform_streams.topology.compiler import compile_topology

T = TaskId
TASKS = [T(0, p) for p in range(4)]
#: partitions 0 and 1 live in rack "a" only, 2 and 3 in rack "b" only
RACKS: dict[str, list[str | None]] = {f"in/{p}": ["a" if p < 2 else "b"] for p in range(4)}
INPUTS = {t: [f"in/{t.partition}"] for t in TASKS}


def _configs(strategy: str, **kw: object) -> AssignmentConfigs:
    return AssignmentConfigs(rack_aware_assignment_strategy=strategy, **kw)  # type: ignore[arg-type]


def _rack_aware(strategy: str, process_racks: dict[str, str]) -> RackAwareTaskAssignor:
    return RackAwareTaskAssignor(
        strategy,  # type: ignore[arg-type]
        input_partitions=INPUTS,
        changelog_partitions={},
        partition_racks=RACKS,
        process_racks={p: {"m": r} for p, r in process_racks.items()},
        all_tasks=TASKS,
    )


@pytest.mark.parametrize("strategy", ["none", "min_traffic", "balance_subtopology"])
def test_stateless_tasks_land_in_the_rack_of_their_partitions(strategy: str) -> None:
    """shouldDistributeStatelessTasksToBalanceTotalTaskLoad's setting with racks: the
    least-loaded-first placement alternates p1 ("b") and p2 ("a"); rack-aware swaps them
    so that each reads from its own rack (cost 1 per cross-rack partition, 0 per move)."""
    clients = {"p1": ClientState(), "p2": ClientState()}
    assign(clients, TASKS, [], _configs(strategy), _rack_aware(strategy, {"p1": "b", "p2": "a"}))
    if strategy == "none":
        assert clients["p1"].active == {T(0, 0), T(0, 2)}
        assert clients["p2"].active == {T(0, 1), T(0, 3)}
    else:
        assert clients["p1"].active == {T(0, 2), T(0, 3)}
        assert clients["p2"].active == {T(0, 0), T(0, 1)}


@pytest.mark.parametrize("strategy", ["min_traffic", "balance_subtopology"])
def test_stateful_tasks_move_to_their_rack_only_where_caught_up(strategy: str) -> None:
    """The stateful optimization runs before the movements (as in Kafka): a task the
    optimizer moves to a client without its state goes back to its caught-up owner and the
    new client gets a warm-up; where every client is caught up the move stands."""
    caught_up = {t: 0 for t in TASKS}
    clients = {
        "p1": ClientState(lags=dict(caught_up), prev_active={T(0, 0), T(0, 1)}),
        "p2": ClientState(lags=dict(caught_up), prev_active={T(0, 2), T(0, 3)}),
    }
    assign(clients, TASKS, TASKS, _configs(strategy), _rack_aware(strategy, {"p1": "b", "p2": "a"}))
    assert clients["p1"].active == {T(0, 2), T(0, 3)}
    assert clients["p2"].active == {T(0, 0), T(0, 1)}

    behind = {t: 1_000_000 for t in TASKS}
    clients = {
        "p1": ClientState(lags={**behind, T(0, 0): -2, T(0, 1): -2}, prev_active={T(0, 0), T(0, 1)}),
        "p2": ClientState(lags={**behind, T(0, 2): -2, T(0, 3): -2}, prev_active={T(0, 2), T(0, 3)}),
    }
    probing = assign(clients, TASKS, TASKS, _configs(strategy), _rack_aware(strategy, {"p1": "b", "p2": "a"}))
    assert clients["p1"].active == {T(0, 0), T(0, 1)}
    assert clients["p2"].active == {T(0, 2), T(0, 3)}
    assert probing and clients["p1"].warmup | clients["p2"].warmup


def _report(member: str, process: str, slots: tuple[int, ...], rack: str | None) -> Report:
    return Report(generation=3, member=member, process=process, slots=slots, time_ms=0, rack=rack)


def test_compute_assignment_places_actives_by_rack() -> None:
    """The leader: each member's client.rack travels in its report, the replicas' racks
    come from the cluster; strategy none gives the placement it always gave."""
    reports = [_report("m1", "p1", tuple(range(32)), "b"), _report("m2", "p2", tuple(range(32, 64)), "a")]
    racks = RackInputs(input_partitions=INPUTS, partition_racks=RACKS)
    plain = compute_assignment(3, reports, TASKS, {}, {}, AssignmentConfigs())
    unchanged = compute_assignment(3, reports, TASKS, {}, {}, AssignmentConfigs(), racks=racks)
    assert unchanged.members == plain.members == {"m1": [T(0, 0), T(0, 2)], "m2": [T(0, 1), T(0, 3)]}
    placed = compute_assignment(3, reports, TASKS, {}, {}, _configs("min_traffic"), racks=racks)
    assert placed.members == {"m1": [T(0, 2), T(0, 3)], "m2": [T(0, 0), T(0, 1)]}
    # a member without client.rack (an older client, or unset) turns it off, as in Kafka
    reports[1] = _report("m2", "p2", tuple(range(32, 64)), None)
    assert (
        compute_assignment(3, reports, TASKS, {}, {}, _configs("min_traffic"), racks=racks).members
        == plain.members
    )


def test_report_carries_the_rack() -> None:
    report = _report("m1", "p1", (0,), "eu-1a")
    assert Report.from_json(report.to_json()).rack == "eu-1a"
    legacy = report.to_json()
    del legacy["rack"]
    assert Report.from_json(legacy).rack is None


def test_settings_are_validated_and_reach_the_assignor_configs() -> None:
    base = {"application.id": "app", "bootstrap.servers": "localhost:9092"}
    config = StreamsConfig.from_properties(
        {
            **base,
            "rack.aware.assignment.strategy": "balance_subtopology",
            "rack.aware.assignment.traffic_cost": "20",
            "rack.aware.assignment.non_overlap_cost": "2",
            "client.rack": "eu-1a",
        }
    )
    assert config.rack_aware_assignment_strategy == "balance_subtopology"
    assert (config.rack_aware_assignment_traffic_cost, config.rack_aware_assignment_non_overlap_cost) == (
        20,
        2,
    )
    default = StreamsConfig.from_properties(base)
    assert default.rack_aware_assignment_strategy == "none"
    assert default.rack_aware_assignment_traffic_cost is None
    with pytest.raises(ValidationError, match="rack_aware_assignment_strategy"):
        StreamsConfig.from_properties({**base, "rack.aware.assignment.strategy": "nearest"})
    with pytest.raises(ValidationError, match="rack_aware_assignment_non_overlap_cost"):
        StreamsConfig.from_properties({**base, "rack.aware.assignment.non_overlap_cost": "-1"})


class _Member:
    """librdkafka's consumer as far as ``join`` reads it: the group metadata."""

    def consumer_group_metadata(self) -> bytes:
        return b"CGMDv2:" + struct.pack("=i", 7) + b"app\x00m-1\x00"


def test_a_member_reports_its_client_rack(tmp_path: Path) -> None:
    """What the leader's process_racks come from: the report of each member's join."""
    builder = StreamsBuilder()
    builder.stream("in").to("out")
    published: list[tuple[str, dict[str, Any] | None]] = []
    coordinator = AssignmentCoordinator(
        compile_topology(builder.build()),
        StreamsConfig(
            application_id="app",
            bootstrap_servers="unused:9092",
            state_dir=tmp_path,
            client_rack="eu-1a",
            rack_aware_assignment_strategy="min_traffic",
            rack_aware_assignment_traffic_cost=5,
        ),
        "p1",
        tmp_path / "p1",
        publish=lambda key, value: published.append((key, value)),
        standby_positions=dict,
        on_assignment=lambda: None,
    )
    coordinator.join(_Member(), [0], [])
    assert [Report.from_json(v).rack for _k, v in published if v is not None] == ["eu-1a"]
    assert coordinator.configs.rack_aware_assignment_strategy == "min_traffic"
    assert coordinator.configs.rack_aware_assignment_traffic_cost == 5
    assert coordinator.configs.rack_aware_assignment_non_overlap_cost is None


def test_standbys_are_swapped_toward_their_changelogs_racks() -> None:
    """HighAvailabilityTaskAssignor.assignStandbyReplicaTasks with rack awareness: after
    the tag-aware standbys, swaps between clients of different racks lower the changelog
    traffic, each client keeps its count, and every task's holders stay in distinct racks.
    Each changelog lives in the rack its plain placement did not pick for the standby."""
    racks = {"p1": "a", "p2": "b", "p3": "c"}
    tasks = [T(0, p) for p in range(6)]

    def run(
        strategy: str, partition_racks: dict[str, list[str | None]]
    ) -> tuple[dict[str, ClientState], RackAwareTaskAssignor]:
        clients = {p: ClientState(tags={"rack": r}) for p, r in racks.items()}
        rack_aware = RackAwareTaskAssignor(
            strategy,  # type: ignore[arg-type]
            input_partitions={t: [f"in/{t.partition}"] for t in tasks},
            changelog_partitions={t: [f"log/{t.partition}"] for t in tasks},
            partition_racks=partition_racks,
            process_racks={p: {"m": r} for p, r in racks.items()},
            all_tasks=tasks,
            num_standby_replicas=1,
        )
        configs = _configs(strategy, num_standby_replicas=1, rack_aware_assignment_tags=("rack",))
        assign(clients, tasks, tasks, configs, rack_aware)
        return clients, rack_aware

    inputs: dict[str, list[str | None]] = {f"in/{p}": ["a", "b", "c"] for p in range(6)}
    plain, _ = run("none", inputs)
    logs: dict[str, list[str | None]] = {}
    for task in tasks:
        used = {racks[p] for p, s in plain.items() if s.has_assigned_task(task)}
        logs[f"log/{task.partition}"] = sorted({"a", "b", "c"} - used)
    placed, rack_aware = run("min_traffic", {**inputs, **logs})
    assert rack_aware.can_enable()
    assert {p: s.active for p, s in placed.items()} == {p: s.active for p, s in plain.items()}
    assert {p: len(s.standby) for p, s in placed.items()} == {p: len(s.standby) for p, s in plain.items()}
    assert rack_aware.standby_tasks_cost(placed, 10, 1) < rack_aware.standby_tasks_cost(plain, 10, 1)
    for task in tasks:
        holders = [p for p, s in placed.items() if s.has_assigned_task(task)]
        assert len(holders) == 2 and len({racks[p] for p in holders}) == 2
