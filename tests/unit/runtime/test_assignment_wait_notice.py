"""A worker that waits for the group says so after a few seconds, once, with what it waits
for and how long that lasts at most; then at most every 30 s, and once when it ends.

A start on the embedded broker with the default session timeout waits ~23 s for its first
join (Tansu holds a join for about half the session timeout): the worker said nothing until
its first warning at three session timeouts (135 s with the defaults), so a newcomer saw a
silent REBALANCING. Pure unit logic over ``AssignmentWait`` with a hand-moved clock.
"""

from __future__ import annotations

import logging

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.runtime.membership import rebalance_wait
from platform_streams.runtime.membership.rebalance_wait import AssignmentWait, GroupObservation
from tests.support.manual_clock import ManualClock

DEFAULTS = StreamsConfig(application_id="slow-start", bootstrap_servers="127.0.0.1:1")


class _Consumer:
    """What ``group_membership`` asks of a consumer: a member id and the group metadata."""

    def memberid(self) -> str:
        return "rdkafka-member-1"

    def consumer_group_metadata(self) -> bytes:
        return b""


@pytest.fixture
def clock(rebalance_clock: ManualClock) -> ManualClock:
    return rebalance_clock


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_wait_of_a_few_seconds_is_one_warn_line_saying_what_and_how_long_at_most(
    clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=rebalance_wait.__name__)
    wait = AssignmentWait("w-1", DEFAULTS)
    wait.on_state(True)
    consumer = _Consumer()
    for _ in range(40):  # polls of the first 4 s: nothing yet
        clock.now += 0.1
        wait.warn_if_long(consumer, "STARTING")
    assert _warnings(caplog) == []
    for _ in range(200):  # the next 20 s of polls: one line
        clock.now += 0.1
        wait.warn_if_long(consumer, "STARTING")
    [line] = _warnings(caplog)
    session_s, rebalance_s = DEFAULTS.session_timeout_ms / 1000, DEFAULTS.max_poll_interval_ms / 1000
    assert "w-1" in line and "group 'slow-start'" in line and "member rdkafka-member-1" in line
    assert f"at most {rebalance_s + session_s:.0f}s" in line, line
    assert f"~{session_s / 2:.0f}s" in line and "session.timeout.ms" in line, line
    assert "docs/brokers.md" in line and f"repaired within ~{wait.repaired_within_s:.0f}s" in line
    clock.now += 30.0
    wait.warn_if_long(consumer, "STARTING")
    assert len(_warnings(caplog)) == 2  # repeated at most every 30 s
    wait.on_state(False)
    assert "assigned partitions after" in _warnings(caplog)[-1]


def test_a_short_wait_says_nothing(clock: ManualClock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=rebalance_wait.__name__)
    wait = AssignmentWait("w-1", DEFAULTS)
    wait.on_state(True)
    clock.now += 3.0
    wait.warn_if_long(_Consumer(), "STARTING")
    wait.on_state(False)
    assert _warnings(caplog) == []


def test_a_repair_by_another_member_restarts_the_wedge_clock(clock: ManualClock) -> None:
    """The second repair of a restart after a crash: one worker deleted the wedged group and
    rejoined; the other, judging the old observation, left the re-created group while its
    members joined it (a leave mid-rebalance), wedging it again. A re-creation it has read
    restarts its clock like any change of the group."""
    config = StreamsConfig(
        application_id="wedged",
        bootstrap_servers="127.0.0.1:1",
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        max_poll_interval_ms=10_000,
    )
    wait = AssignmentWait("w-1", config)
    wait.on_state(True)
    seen = GroupObservation(1, "UNKNOWN", 0, ((("in", 0), 5),))
    assert not wait.wedged(seen, recreations=3)  # the control topic's history: no reset
    clock.now += wait.wedged_after_s - 1
    assert not wait.wedged(seen, recreations=4)  # another member repaired the group just now
    clock.now += 2
    assert not wait.wedged(seen, recreations=4)  # unchanged since the repair, not since the start
    clock.now += wait.wedged_after_s
    assert wait.wedged(seen, recreations=4)


def test_without_repairs_an_unchanged_group_is_wedged_after_the_rebalance_timeout(clock: ManualClock) -> None:
    wait = AssignmentWait("w-1", DEFAULTS)
    wait.on_state(True)
    seen = GroupObservation(1, "UNKNOWN", 0, ())
    assert not wait.wedged(seen, recreations=2)
    clock.now += wait.wedged_after_s + 1
    assert wait.wedged(seen, recreations=2)
