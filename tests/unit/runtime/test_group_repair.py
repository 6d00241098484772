"""The wedged-group repair (runtime/membership/rebalance_wait.py): when it may act, and what it may never do.

Bugs found by the soak run (docs/soak/README.md), each with its test here:

* a repair that could read no committed offsets deleted the group anyway ("restored its
  committed offsets of 0 partitions"); the re-created group started over from
  ``auto.offset.reset`` and the at-least-once application counted every record again;
* on a loaded machine ordinary rebalances took 53-109 s and a repair by timing alone fired
  as a false alarm, on two workers at once: a wedge is now judged from the group itself
  (the same generation, state and committed offsets for longer than the rebalance timeout);
* the write-back of the offsets lost to a member that had already joined the re-created
  group, which then re-read its input from ``auto.offset.reset``: the offsets are now saved
  in a backup group before the delete, a worker starts a partition without a committed
  offset from the saved one, and nothing is written back (a member of the re-created group
  may have committed newer offsets within seconds of the delete; seen in the soak).

The admin client is replaced where a broker state cannot be set up on demand (a group
that answers no offsets, offsets that move between two reads); what is tested is the
decision, not Kafka. tests/integration/test_group_wedge.py has the behaviour on the broker.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.runtime.membership import rebalance_wait
from platform_streams.runtime.membership.rebalance_wait import AssignmentWait, GroupObservation, backup_group
from tests.support.manual_clock import ManualClock

PARTITIONS = [("in", 0), ("in", 1)]
CONFIG = StreamsConfig(
    application_id="wedged",
    bootstrap_servers="127.0.0.1:1",
    session_timeout_ms=10_000,
    heartbeat_interval_ms=1_000,
    max_poll_interval_ms=60_000,
)


class FakeAdmin:
    """Committed offsets per group, as given; records what was asked of it, in order."""

    def __init__(self, committed: dict[tuple[str, int], int | None], *, moves: bool = False) -> None:
        self.groups: dict[str, dict[tuple[str, int], int | None]] = {"wedged": dict(committed)}
        self.calls: list[str] = []
        self.moves = moves

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def committed_offsets(self, group: str, partitions: Any, timeout: float = 10.0) -> dict[Any, Any]:
        stored = self.groups.get(group, {})
        if self.moves and group == "wedged":  # a member holds partitions and commits
            for tp, o in stored.items():
                stored[tp] = None if o is None else o + 1
        return {tp: stored.get(tp) for tp in partitions}

    def delete_group(self, group: str) -> str | None:
        self.calls.append(f"delete {group}")
        self.groups.pop(group, None)
        return None

    def alter_committed_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        self.calls.append(f"write {group} {sorted(offsets.items())}")
        self.groups.setdefault(group, {}).update(offsets)


def _seen(
    offsets: dict[tuple[str, int], int], generation: int = 3, state: str = "UNKNOWN"
) -> GroupObservation:
    return GroupObservation(generation, state, 0, tuple(sorted(offsets.items())))


def _repair(monkeypatch: pytest.MonkeyPatch, admin: FakeAdmin, seen: GroupObservation) -> list[str]:
    monkeypatch.setattr(rebalance_wait, "KafkaAdmin", lambda conf: admin)
    monkeypatch.setattr(rebalance_wait.time, "sleep", lambda s: None)
    left: list[str] = []
    rebalance_wait.repair_group(
        CONFIG,
        PARTITIONS,
        seen,
        leave=lambda: left.append("left"),
        on_deleted=lambda: admin.calls.append("told the clients: group re-created"),
    )
    return left


@pytest.fixture
def clock(rebalance_clock: ManualClock) -> ManualClock:
    return rebalance_clock


def _waiting(clock: ManualClock) -> AssignmentWait:
    wait = AssignmentWait("w", CONFIG)
    wait.on_state(True)
    return wait


def test_no_readable_offsets_no_delete(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    admin = FakeAdmin({})
    caplog.set_level(logging.ERROR, logger=rebalance_wait.__name__)
    left = _repair(monkeypatch, admin, _seen({}))
    assert admin.calls == []
    assert left == ["left"]  # the worker still rejoins with a fresh member
    assert "none of its committed offsets of 2 partitions could be read: not deleting it" in caplog.text


def test_offsets_are_saved_in_the_backup_group_before_the_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = FakeAdmin({("in", 0): 5, ("in", 1): None})
    left = _repair(monkeypatch, admin, _seen({("in", 0): 5}))
    assert admin.calls == [
        f"write {backup_group('wedged')} [(('in', 0), 5)]",
        "delete wedged",
        "told the clients: group re-created",  # the old group's assignments void (docs/soak/README.md)
    ]  # nothing written into the re-created group: its members may have committed already
    assert left == ["left"]


def test_the_backup_never_moves_an_offset_back(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = FakeAdmin({("in", 0): 5, ("in", 1): 7})
    admin.groups[backup_group("wedged")] = {("in", 0): 9}  # saved by an earlier repair, then reset by hand
    _repair(monkeypatch, admin, _seen({("in", 0): 5, ("in", 1): 7}))
    assert admin.groups[backup_group("wedged")] == {("in", 0): 9, ("in", 1): 7}


def test_offsets_that_moved_since_the_observation_mean_no_leave_and_no_delete(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    admin = FakeAdmin({("in", 0): 5}, moves=True)
    caplog.set_level(logging.WARNING, logger=rebalance_wait.__name__)
    left = _repair(monkeypatch, admin, _seen({("in", 0): 5}))
    assert admin.calls == [] and left == []
    assert "changed since it was looked at" in caplog.text


def test_offsets_that_move_while_leaving_mean_no_delete(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    admin = FakeAdmin({("in", 0): 5})
    monkeypatch.setattr(rebalance_wait, "KafkaAdmin", lambda conf: admin)
    monkeypatch.setattr(rebalance_wait.time, "sleep", lambda s: None)
    caplog.set_level(logging.WARNING, logger=rebalance_wait.__name__)

    def leave() -> None:
        admin.moves = True  # a member took the partitions as this one left

    rebalance_wait.repair_group(CONFIG, PARTITIONS, _seen({("in", 0): 5}), leave=leave)
    assert admin.calls == []
    assert "committed offsets moved" in caplog.text


def test_a_repair_by_another_member_read_since_the_observation_means_no_second_repair(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two workers judged the group wedged within one check: the one that reads the other's
    re-creation record must neither leave (its consumer may lead the re-created group, and
    a leader leaving mid-rebalance wedges it again, and only a second repair ends it) nor delete."""
    admin = FakeAdmin({("in", 0): 5})
    monkeypatch.setattr(rebalance_wait, "KafkaAdmin", lambda conf: admin)
    left: list[str] = []
    rebalance_wait.repair_group(
        CONFIG, PARTITIONS, _seen({("in", 0): 5}), leave=lambda: left.append("left"), superseded=lambda: True
    )
    assert admin.calls == [] and left == []


def test_nothing_is_written_over_what_a_member_of_the_recreated_group_committed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    admin = FakeAdmin({("in", 0): 5, ("in", 1): 6})
    real_delete = admin.delete_group

    def delete_then_a_member_commits(group: str) -> str | None:
        refused = real_delete(group)
        admin.groups[group] = {("in", 0): 8}  # a member of the re-created group committed already
        return refused

    admin.delete_group = delete_then_a_member_commits  # type: ignore[method-assign]
    _repair(monkeypatch, admin, _seen({("in", 0): 5, ("in", 1): 6}))
    assert admin.groups["wedged"] == {("in", 0): 8}  # in-1 is started from the backup (below)


def test_a_slow_rebalance_is_not_a_wedge(clock: ManualClock) -> None:
    """Ordinary rebalances of 53-109 s (the soak's loaded machine): the generation or the
    offsets change, or the wait is shorter than the rebalance timeout + a session timeout."""
    wait = _waiting(clock)
    assert wait.wedged_after_s == 70.0
    seen = _seen({("in", 0): 5})
    for _ in range(10):  # 109 s with the generation moving every ~11 s
        clock.now += 11
        seen = _seen({("in", 0): 5}, generation=seen.generation + 1)  # type: ignore[operator]
        assert not wait.wedged(seen)
    for _ in range(6):  # then 66 s with nothing changing: still within the bound
        clock.now += 11
        assert not wait.wedged(seen)


def test_a_settled_group_or_one_with_members_is_never_wedged(clock: ManualClock) -> None:
    wait = _waiting(clock)
    for seen in (
        _seen({("in", 0): 5}, state="STABLE"),
        GroupObservation(3, "PREPARING_REBALANCE", 2, ()),  # a broker that lists members: Kafka
    ):
        for _ in range(30):
            clock.now += 10
            assert not wait.wedged(seen)


def test_an_unchanged_group_past_the_rebalance_timeout_is_wedged_once(clock: ManualClock) -> None:
    wait = _waiting(clock)
    seen = _seen({("in", 0): 5})
    assert not wait.wedged(seen)
    clock.now += 69
    assert not wait.wedged(seen)
    clock.now += 2
    assert wait.wedged(seen)
    clock.now += 10
    assert not wait.wedged(seen)  # a second repair needs another unchanged stretch


def test_checks_start_after_the_first_warning_period(clock: ManualClock) -> None:
    wait = _waiting(clock)
    assert not wait.check_due()
    clock.now += wait.warning_s
    assert wait.check_due() and not wait.check_due()
    clock.now += wait.check_s
    assert wait.check_due()
    wait.on_state(False)
    clock.now += 1000
    assert not wait.check_due()


def test_a_partition_without_a_committed_offset_starts_from_the_saved_one(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    admin = FakeAdmin({})
    admin.groups[backup_group("wedged")] = {("in", 1): 40}
    monkeypatch.setattr(rebalance_wait, "KafkaAdmin", lambda conf: admin)
    caplog.set_level(logging.WARNING, logger=rebalance_wait.__name__)
    filled = rebalance_wait.fill_from_backup(CONFIG, {("in", 0): None, ("in", 1): None, ("in", 2): 7}, "w")
    assert filled == {("in", 0): None, ("in", 1): 40, ("in", 2): 7}
    assert "not from auto.offset.reset" in caplog.text


def test_nothing_is_read_when_every_partition_has_a_committed_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_admin(conf: Any) -> Any:
        raise AssertionError("no admin call needed")

    monkeypatch.setattr(rebalance_wait, "KafkaAdmin", no_admin)
    assert rebalance_wait.fill_from_backup(CONFIG, {("in", 0): 3}, "w") == {("in", 0): 3}


def test_a_recreated_group_that_wedges_before_any_commit_is_deleted_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The 60-minute soak run: a group re-created by a repair wedged again before its members
    committed; it had no offsets, so the repair refused to delete it and it stayed wedged.
    Its progress is in the backup group, which members start from: deleting loses nothing."""
    admin = FakeAdmin({})
    admin.groups[backup_group("wedged")] = {("in", 0): 9}
    left = _repair(monkeypatch, admin, _seen({}))
    assert admin.calls == ["delete wedged", "told the clients: group re-created"] and left == ["left"]
