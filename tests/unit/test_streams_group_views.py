"""Pure logic of the operations' view of streams groups: Kafka's state names, which states
have members, and the ASSIGNMENTS column of ``kafka-streams-groups.sh --describe``
(``StreamsGroupCommand.getTasksForPrinting``, Kafka 4.4 tools)."""

from __future__ import annotations

import pytest

from platform_streams.kafka import GroupDescription
from platform_streams.kafka.streams_group_admin import streams_state_name
from platform_streams.ops.group_commands import GroupDescriptionResult


@pytest.mark.parametrize(
    ("raw", "name", "active"),
    [
        ("Empty", "EMPTY", False),
        ("NotReady", "NOT_READY", True),
        ("Assigning", "ASSIGNING", True),
        ("Reconciling", "RECONCILING", True),
        ("Stable", "STABLE", True),
        ("Dead", "DEAD", False),
    ],
)
def test_streams_group_states_are_spelled_like_kafkas_and_member_bearing_ones_are_active(
    raw: str, name: str, active: bool
) -> None:
    assert streams_state_name(raw) == name
    assert GroupDescription("g", name, group_type="streams").active is active


def test_the_assignments_column_lists_tasks_per_kind_and_a_differing_target() -> None:
    member = {
        "member_id": "m1",
        "member_epoch": 7,
        "process_id": "p1",
        "client_id": "c1",
        "host": "/10.0.0.1",
        "tasks": {"active": {"0": [0, 1], "1": [2]}, "standby": {"0": [3]}},
        "target_tasks": {"active": {"0": [0]}},
    }
    result = GroupDescriptionResult("app", "streams", "RECONCILING", 8, 8, 0, [member])
    text = result.summary()
    assert "ACTIVE: 0:[0,1]; 1:[2]; STANDBY: 0:[3]; TARGET-ACTIVE: 0:[0];" in text, text
    assert "RECONCILING" in text and "Group 'app' has no committed offsets." in text
    settled = {**member, "target_tasks": member["tasks"]}
    same = GroupDescriptionResult("app", "streams", "STABLE", members=[settled])
    assert "TARGET-ACTIVE" not in same.summary()
