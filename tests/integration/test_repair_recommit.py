"""After a group repair, the members commit the saved offsets again without new input.

A repair of a wedged Tansu group (``runtime/membership/rebalance_wait.py``, ``repair_group``) saves the
committed offsets in a backup group and deletes the group; the members of the re-created
group start from the saved offsets. Until this fix they committed only once new input was
processed, so an idle application's group held no committed offsets at all: lag and reset
tools saw none, and `test_task_assignment.py::test_a_rolling_restart_with_static_membership_
restores_no_store_in_full` failed whenever the group wedged after its input was done (seen
twice on a loaded machine, 2026-11-24). The repair is played by hand here: save, delete,
restart, on both brokers (Kafka never wedges, but the members' side is the same).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin
from platform_streams.runtime.membership.rebalance_wait import backup_group
from tests.integration.support_apps import app_config, log_ends, running_app, upper_case_app, wait_until
from tests.support.kafka import new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_members_commit_the_saved_offsets_of_a_repaired_group_without_new_input(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, guarantee: str
) -> None:
    source, sink = new_topic(admin, 2, "in"), new_topic(admin, 2, "out")
    placed = produce(bootstrap_servers, source, [(f"k{i}", f"v{i}") for i in range(200)])
    ends = log_ends(placed, source, 2)
    config = app_config(bootstrap_servers, tmp_path, processing_guarantee=guarantee)
    group = config.application_id
    with running_app(upper_case_app(source, sink), config):
        wait_until(lambda: admin.committed_offsets(group, list(ends)) == ends, 60, "input committed")
    # the repair: offsets saved in the backup group, the group deleted
    admin.alter_committed_offsets(backup_group(group), ends)
    assert admin.committed_offsets(backup_group(group), list(ends)) == ends
    admin.delete_group(group)
    assert all(o is None for o in admin.committed_offsets(group, list(ends)).values())
    with running_app(upper_case_app(source, sink), config):
        wait_until(
            lambda: admin.committed_offsets(group, list(ends)) == ends,
            60,
            "the saved offsets committed again with no new input",
        )
