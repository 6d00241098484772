"""The leave guard (runtime/leave_guard.py): when a stopping worker keeps serving its group.

The broker behaviour behind it -- a leader that leaves mid-rebalance wedges the group on
the embedded broker -- is tested on the broker by
tests/integration/test_restart_after_crash.py; here only the decision: how long it holds,
that it never holds where the coordinator elects a new leader (Apache Kafka), and that
the probe is not even asked when nothing can be rebalancing.
"""

from __future__ import annotations

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.runtime import leave_guard
from platform_streams.runtime.leave_guard import LeaveGuard
from tests.support.manual_clock import ManualClock

CONFIG = StreamsConfig(
    application_id="leaving",
    bootstrap_servers="127.0.0.1:1",
    session_timeout_ms=6_000,
    heartbeat_interval_ms=500,
    max_poll_interval_ms=10_000,
)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    clock = ManualClock()
    monkeypatch.setattr(leave_guard.time, "monotonic", clock)
    return clock


def _guard(monkeypatch: pytest.MonkeyPatch, elects: bool) -> tuple[LeaveGuard, list[int]]:
    asked: list[int] = []

    def probe(config: StreamsConfig) -> bool:
        asked.append(1)
        return elects

    monkeypatch.setattr(leave_guard, "elects_new_group_leader", probe)
    return LeaveGuard("w0", CONFIG), asked


def test_a_coordinator_that_elects_a_new_leader_never_holds(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    guard, asked = _guard(monkeypatch, elects=True)
    assert not guard.hold(awaiting_assignment=True, alone=False)
    assert not guard.hold(awaiting_assignment=True, alone=False)
    assert asked == [1]


def test_a_rebalance_under_way_is_finished_then_one_heartbeat_interval_more(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    guard, _ = _guard(monkeypatch, elects=False)
    assert guard.hold(awaiting_assignment=True, alone=False)
    clock.now += 3.0  # the embedded broker holds the join ~session.timeout.ms / 2
    assert guard.hold(awaiting_assignment=True, alone=False)
    clock.now += 0.5
    assert guard.hold(awaiting_assignment=False, alone=False)  # assigned: one heartbeat more
    clock.now += guard.quiet_s
    assert not guard.hold(awaiting_assignment=False, alone=False)
    assert not guard.hold(awaiting_assignment=True, alone=False)  # done: it leaves


def test_a_running_member_waits_one_heartbeat_for_a_rebalance_another_member_started(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    guard, _ = _guard(monkeypatch, elects=False)
    assert guard.hold(awaiting_assignment=False, alone=False)
    clock.now += guard.quiet_s / 2
    assert guard.hold(awaiting_assignment=True, alone=False)  # the heartbeat said: rebalance
    clock.now += guard.quiet_s  # still joining: the window moves on
    assert guard.hold(awaiting_assignment=True, alone=False)
    clock.now += 1.0
    assert guard.hold(awaiting_assignment=False, alone=False)
    clock.now += guard.quiet_s
    assert not guard.hold(awaiting_assignment=False, alone=False)


def test_the_only_member_of_its_generation_leaves_at_once_without_asking_the_broker(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    guard, asked = _guard(monkeypatch, elects=False)
    assert not guard.hold(awaiting_assignment=False, alone=True)
    assert asked == []


def test_the_only_member_still_finishes_a_join_under_way(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    guard, _ = _guard(monkeypatch, elects=False)
    assert guard.hold(awaiting_assignment=True, alone=True)


def test_a_rebalance_that_does_not_end_is_left_after_the_bound(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    guard, _ = _guard(monkeypatch, elects=False)
    assert guard.bound_s == pytest.approx(1.5 * 6.0 + 0.5 + 0.25)
    assert guard.hold(awaiting_assignment=True, alone=False)
    clock.now += guard.bound_s - 0.1
    assert guard.hold(awaiting_assignment=True, alone=False)
    clock.now += 0.1
    assert not guard.hold(awaiting_assignment=True, alone=False)
    assert "may then need the repair" in caplog.text
