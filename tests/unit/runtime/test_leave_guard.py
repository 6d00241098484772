"""The leave guard (runtime/membership/leave_guard.py): when a stopping worker keeps serving its group.

The broker behaviour behind it -- a leader that leaves mid-rebalance wedges the group on
the embedded broker -- is tested on the broker by
tests/integration/test_restart_after_crash.py; here only the decision: how long it holds,
that it never holds where the coordinator elects a new leader (Apache Kafka), that a
stopping worker never waits for the broker's answer (it is asked once, in the background,
after the worker joined; unknown at the stop means no wait), and that the probe is not even
consulted when nothing can be rebalancing.
"""

from __future__ import annotations

import threading
from types import TracebackType

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.errors import BrokerError
from platform_streams.kafka import GroupDescription
from platform_streams.runtime import broker_features
from platform_streams.runtime.membership import leave_guard
from platform_streams.runtime.membership.leave_guard import LeaveGuard
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


class _Admin:
    """Stands in for the broker's DescribeGroups answer (the broker side is the restart test's)."""

    def __init__(self, asked: list[str], answer: GroupDescription | Exception) -> None:
        self.asked, self.answer = asked, answer

    def __enter__(self) -> _Admin:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        return None

    def describe_group(self, group_id: str, timeout: float = 10.0) -> GroupDescription:
        self.asked.append(threading.current_thread().name)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _broker(
    monkeypatch: pytest.MonkeyPatch, answer: GroupDescription | Exception, known: bool | None = None
) -> list[str]:
    """The process's cached answer (``known``), and a broker that answers ``answer``."""
    asked: list[str] = []
    monkeypatch.setattr(broker_features, "_elects_leader", {} if known is None else {"127.0.0.1:1": known})
    monkeypatch.setattr(broker_features, "KafkaAdmin", lambda conf: _Admin(asked, answer))
    return asked


#: what the embedded broker answers for a group this member is in: no members listed
NO_MEMBERS = GroupDescription("leaving", "STABLE")


def _guard(monkeypatch: pytest.MonkeyPatch, elects: bool) -> tuple[LeaveGuard, list[str]]:
    asked = _broker(monkeypatch, NO_MEMBERS, known=elects)
    return LeaveGuard("w0", CONFIG), asked


def test_a_coordinator_that_elects_a_new_leader_never_holds(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    guard, asked = _guard(monkeypatch, elects=True)
    assert not guard.hold(awaiting_assignment=True, alone=False)
    assert not guard.hold(awaiting_assignment=True, alone=False)
    assert asked == []


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


def test_a_stopping_worker_never_waits_for_the_probe_and_an_unknown_answer_does_not_hold(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    # an unreachable cluster made every close wait up to the probe's 10 s timeout
    asked = _broker(monkeypatch, NO_MEMBERS)
    guard = LeaveGuard("w0", CONFIG)
    assert not guard.hold(awaiting_assignment=True, alone=False)
    assert asked == []


def test_the_probe_runs_once_in_the_background_after_joining(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    asked = _broker(monkeypatch, NO_MEMBERS)
    probe = LeaveGuard("w0", CONFIG).joined()
    assert probe is not None
    probe.join(5)
    assert asked == [probe.name] and probe.name != threading.current_thread().name
    assert LeaveGuard("w1", CONFIG).joined() is None  # answered: never asked again
    assert LeaveGuard("w1", CONFIG).hold(awaiting_assignment=True, alone=False)
    assert asked == [probe.name]


def test_a_failed_probe_is_no_answer_and_is_asked_again_at_the_next_join(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    asked = _broker(monkeypatch, BrokerError("describe group 'leaving': timed out"))
    probe = LeaveGuard("w0", CONFIG).joined()
    assert probe is not None
    probe.join(5)
    assert not LeaveGuard("w0", CONFIG).hold(awaiting_assignment=True, alone=False)
    again = LeaveGuard("w0", CONFIG).joined()
    assert again is not None
    again.join(5)
    assert len(asked) == 2
