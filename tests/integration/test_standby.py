"""Standby replicas: the survivor of a crash takes the failed tasks over with a tail restore.

Two instances with ``num_standby_replicas=1`` each run two of four counting tasks and keep
standbys of the other two (placement from the control topic). Once the standbys have
caught up, one instance is killed with SIGKILL while input keeps flowing; the other must
serve the failed tasks after restoring only what was written after its standby's last
update -- a small tail, not the ~5,000 records each changelog partition holds -- and the
counts must stay exact. Dynamic membership: Tansu never expels a static member.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin, log_end_offsets
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.membership.placement import MemberInfo, standby_placement
from tests.integration.eos_support import (
    Feeder,
    Runner,
    RunnerApp,
    final_counts,
    new_app_id,
    read_updates,
    runners,
)
from tests.integration.support_apps import wait_until

PARTITIONS = 4


def _caught_up(runner: Runner, changelog: str, bootstrap: str) -> bool:
    """True when the runner keeps two standbys whose stores reflect their changelogs to the end."""
    standby = runner.last("STANDBY") or {}
    if len(standby) != 2:
        return False
    ends = log_end_offsets(
        {"bootstrap.servers": bootstrap}, [(changelog, int(t.split("_")[1])) for t in standby]
    )
    for task, positions in standby.items():
        position = positions.get(f"{changelog}:{task.split('_')[1]}", -1)
        if position < ends[(changelog, int(task.split("_")[1]))] - 1:
            return False
    return True


@pytest.mark.broker
@pytest.mark.slow
def test_the_standby_holder_takes_over_with_a_small_tail_restore(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    app = RunnerApp.create(bootstrap_servers, admin, new_app_id("standby"), PARTITIONS)
    changelog = f"{app.app_id}-counts-changelog"
    common = app.runner_args(guarantee="at_least_once", commit_interval_ms=200, standbys=1)
    first_batch = Feeder(bootstrap_servers, app.source, 20_000, 50, chunk=5_000, pause_s=0.0).start()
    with runners() as started:
        doomed = started.start(tmp_path / "doomed.log", running=False, state_dir=tmp_path / "d", **common)
        survivor = started.start(tmp_path / "survivor.log", running=False, state_dir=tmp_path / "s", **common)
        wait_until(
            lambda: len(doomed.last("ACTIVE") or ()) == 2 and len(survivor.last("ACTIVE") or ()) == 2,
            60,
            "the instances share the tasks",
        )
        expected = first_batch.join()
        wait_until(app.all_committed, 60, "input done")
        wait_until(lambda: _caught_up(survivor, changelog, bootstrap_servers), 30, "the standbys caught up")
        failed_tasks = set(doomed.last("ACTIVE"))
        assert set(survivor.last("STANDBY")) == failed_tasks, "standbys are kept for the other's tasks"
        ends = log_end_offsets(
            {"bootstrap.servers": bootstrap_servers},
            [(changelog, int(t.split("_")[1])) for t in failed_tasks],
        )
        second_batch = Feeder(bootstrap_servers, app.source, 2_000, 50, chunk=100, pause_s=0.2).start()
        doomed.kill()
        restored = wait_until(
            lambda: (r := survivor.last("RESTORED") or {}) and set(r) >= failed_tasks and r,
            60,
            "the survivor took over",
        )
        expected += second_batch.join()
        wait_until(app.all_committed, 60, "all done")
        assert survivor.terminate() == 0
    replayed = sum(restored[t] for t in failed_tasks)
    changelog_size = sum(ends.values())
    assert changelog_size >= 5_000  # the failed tasks held this much state
    assert replayed < changelog_size // 10, f"replayed {replayed} of {changelog_size} changelog records"
    updates = read_updates(app, committed_only=False)
    assert final_counts(updates) == dict(expected)


def test_placement_puts_standbys_on_the_next_clients_of_the_ring() -> None:
    tasks = [TaskId(0, p) for p in range(4)]
    members = {
        "a": MemberInfo("a", frozenset(tasks[:2])),
        "b": MemberInfo("b", frozenset(tasks[2:])),
        "c": MemberInfo("c"),
    }
    placement = standby_placement(members, tasks, replicas=1)
    assert placement == {tasks[0]: ["b"], tasks[1]: ["b"], tasks[2]: ["c"], tasks[3]: ["c"]}
    two = standby_placement(members, tasks, replicas=2)
    assert all(
        owner not in two[t] and len(two[t]) == 2
        for owner, ts in (("a", tasks[:2]), ("b", tasks[2:]))
        for t in ts
    )
    assert standby_placement({"a": members["a"]}, tasks, replicas=1) == {}, (
        "one client: nowhere to put a standby"
    )
