"""KafkaStreams.query's task rules on real tasks: active vs standby vs restoring, bounds, partitions.

Standby tasks live in the client's ``membership.standbys`` (a StandbyUpdater thread); the
query layer reads its ``tasks`` under ``reading()``. This test provides that shape with a
real task built by the TopologyTestDriver, so the rules are checked without a broker.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from platform_streams import State
from platform_streams.dsl import Consumed, Materialized, StreamsBuilder
from platform_streams.processor.task_id import TaskId
from platform_streams.query import (
    FailureReason,
    HostInfo,
    KeyQuery,
    Position,
    PositionBound,
    StateQueryRequest,
)
from platform_streams.query.lags import Role
from platform_streams.query.service import InteractiveQueries
from platform_streams.runtime.store_guard import StoreGuard
from platform_streams.runtime.workers.worker import WorkerState
from platform_streams.serde import String
from platform_streams.testing import TopologyTestDriver
from tests.support.runtime_views import FakeWorker

S = String()


@pytest.fixture
def driver() -> Iterator[TopologyTestDriver]:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=S, value_serde=S)).group_by_key().count(
        materialized=Materialized.as_("counts")
    )
    with TopologyTestDriver(builder.build()) as test_driver:
        topic = test_driver.create_input_topic("in", S, S)
        for _ in range(3):
            topic.pipe_input("alice", "v")
        yield test_driver


class FakeStandbys:
    """The shape of the runtime's StandbyUpdater that the query layer uses."""

    def __init__(self, tasks: dict[TaskId, Any]) -> None:
        self.tasks = tasks
        self.lock = threading.RLock()

    def reading(self) -> Any:
        return self.lock

    def standby_ids(self) -> set[TaskId]:
        return set(self.tasks)


def _service(
    driver: TopologyTestDriver, *, active: bool, state: WorkerState, kept: bool = False
) -> tuple[InteractiveQueries, Any]:
    task = driver._tasks[0]
    worker = FakeWorker(
        name="w-1",
        state=state,
        tasks={TaskId(0, 0): task} if active else {},
        store_guard=StoreGuard(),
        kept_through_rebalance=kept,
    )
    standbys = FakeStandbys({} if active else {TaskId(0, 0): task})
    streams = SimpleNamespace(
        config=driver.config,
        state=lambda: State.RUNNING,
        plan=driver.plan,
        partition_counts={"in": 1},
        workers=[worker],
        standbys=standbys,
        coordinator=None,
    )
    service = InteractiveQueries(streams)  # type: ignore[arg-type]
    service.host = HostInfo("me", 7070)
    return service, task


REQUEST = StateQueryRequest.in_store("counts").with_query(KeyQuery.with_key("alice"))


def test_active_running_task_answers_with_its_position(driver: TopologyTestDriver) -> None:
    service, task = _service(driver, active=True, state=WorkerState.RUNNING)
    answer = service.query(REQUEST.require_active()).partition_results[0]
    assert answer.get_result() == 3
    assert answer.position == Position({"in": {0: 2}}) == Position.from_partition_offsets(task.consumed)
    assert (
        service.query(REQUEST.with_position_bound(PositionBound.at(answer.position)))
        .partition_results[0]
        .is_success()
    )
    meta = service.query_metadata_for_key("counts", "alice")
    assert meta.active_host == HostInfo("me", 7070) and meta.partition == 0


def test_standby_answers_unless_active_is_required_and_claims_no_position(driver: TopologyTestDriver) -> None:
    service, _ = _service(driver, active=False, state=WorkerState.RUNNING)
    assert service.query(REQUEST).partition_results[0].get_result() == 3
    required = service.query(REQUEST.require_active()).partition_results[0]
    assert required.failure_reason is FailureReason.NOT_ACTIVE and "standby" in required.failure_message
    bounded = service.query(REQUEST.with_position_bound(PositionBound.at(Position({"in": {0: 0}}))))
    assert bounded.partition_results[0].failure_reason is FailureReason.NOT_UP_TO_BOUND
    meta = service.query_metadata_for_key("counts", "alice")
    assert not meta.is_available() and meta.standby_hosts == frozenset({HostInfo("me", 7070)})


def test_a_restoring_task_is_not_active(driver: TopologyTestDriver) -> None:
    service, _ = _service(driver, active=True, state=WorkerState.PARTITIONS_ASSIGNED)
    assert (
        service.query(REQUEST.require_active()).partition_results[0].failure_reason
        is FailureReason.NOT_ACTIVE
    )
    stale = service.query(REQUEST).partition_results[0]
    assert stale.get_result() == 3 and stale.position.is_empty()


def test_a_task_kept_through_a_cooperative_rebalance_answers_as_the_running_active(
    driver: TopologyTestDriver,
) -> None:
    """KIP-535: queries keep being answered during rebalances. Under cooperative rebalancing
    a kept task processes on while its worker waits for the new generation (state
    PARTITIONS_REVOKED, then PARTITIONS_ASSIGNED), so it answers as the running active."""
    for state in (WorkerState.PARTITIONS_REVOKED, WorkerState.PARTITIONS_ASSIGNED):
        service, task = _service(driver, active=True, state=state, kept=True)
        answer = service.query(REQUEST.require_active()).partition_results[0]
        assert answer.get_result() == 3 and answer.position == Position.from_partition_offsets(task.consumed)
        assert service.local_snapshot().active_tasks == frozenset({"0_0"})
        assert [copy.role for copy in service.local_replicas("counts", 0)] == [Role.ACTIVE]


def test_partitions_that_are_absent_or_do_not_exist(driver: TopologyTestDriver) -> None:
    service, _ = _service(driver, active=True, state=WorkerState.RUNNING)
    service._streams.partition_counts = {"in": 3}
    results = service.query(REQUEST.with_partitions({0, 1, 5})).partition_results
    assert results[0].is_success()
    assert results[1].failure_reason is FailureReason.NOT_PRESENT
    assert results[5].failure_reason is FailureReason.DOES_NOT_EXIST
