"""What the operations do with the application's group: the reset's checks (refuse while it
is active), and deleting a streams group (KIP-1071) with the application's topics.

A consumer group is checked as ``kafka-streams-application-reset`` checks it (members, or a
member-bearing state). A streams group is checked as Kafka's ``kafka-streams-groups.sh
--reset-offsets`` (``StreamsGroupCommand.resetOffsets``) does: offsets are reset only while
it is inactive (``EMPTY``, or no group at all), else the reset is refused naming the state.
``force`` cannot use the consumer-group trick there (a throw-away classic member cannot join
a streams group), so it waits for the broker to expire the left-over members on its own
(the broker's streams session timeout, ``group.streams.session.timeout.ms``).

A reset also deletes the application's streams group (``StreamsGroupCommand.deleteGroups``:
only an ``EMPTY`` one), before the offsets are written: the group keeps the topology its
first member gave and refuses members with another one, so a reset that starts the
application afresh must drop it; the offsets written afterwards survive, and the next
run's streams group takes them over (Kafka replaces an empty group holding only offsets
by the new streams group, offsets kept). ``topics delete`` deletes it with the topics.
"""

from __future__ import annotations

import time

from platform_streams.config import StreamsConfig
from platform_streams.kafka import GroupDescription, KafkaAdmin, rejoin_group_once
from platform_streams.ops.results import OperationRefusedError, ResetResult

__all__ = [
    "check_group",
    "delete_streams_group",
    "delete_streams_group_with_topics",
    "recheck_group",
    "streams_group_to_delete",
]

_FORCE_MARGIN_S = 5.0
_GROUP_POLL_S = 0.5


def check_group(
    admin: KafkaAdmin,
    config: StreamsConfig,
    result: ResetResult,
    sources: list[str],
    *,
    force: bool,
    force_timeout_s: float | None,
    dry_run: bool,
    timeout_s: float,
) -> GroupDescription:
    """Describe the group; refuse (or, under force, expire left-over members) while it is active."""
    group = admin.describe_group(config.application_id, timeout=timeout_s)
    if group.active and force and not dry_run:
        group = _expire_left_over_members(admin, config, result, sources, force_timeout_s, timeout_s, group)
    _record_group(result, group)
    if group.active:
        reason = _active_reason(group, force)
        if not dry_run:
            raise OperationRefusedError(reason, result)
        result.blocked = reason
        result.warnings.append(f"a real run would refuse now: {reason}")
    if group.group_type == "streams":
        result.deleted_groups = [group.group_id]
    return group


def recheck_group(admin: KafkaAdmin, result: ResetResult, timeout_s: float) -> GroupDescription:
    """Right before writing: some brokers accept writes next to live members."""
    group = admin.describe_group(result.application_id, timeout=timeout_s)
    _record_group(result, group)
    if group.active:
        reason = _active_reason(group, force=False)
        raise OperationRefusedError(f"{reason} (it became active meanwhile)", result)
    return group


def delete_streams_group(
    admin: KafkaAdmin, group: GroupDescription, result: ResetResult, timeout_s: float
) -> None:
    """Delete the application's own streams group (module docstring); the broker refuses one
    with members (GROUP_NOT_EMPTY), which refuses the reset before any offset moved."""
    if group.group_type != "streams":
        result.deleted_groups = []
        return
    refused = admin.delete_group(group.group_id, timeout=timeout_s)
    if refused is not None and refused != "GROUP_ID_NOT_FOUND":
        raise OperationRefusedError(
            f"the broker refused to delete streams group {group.group_id!r} ({refused}): stop every "
            "instance of the application first",
            result,
        )
    result.deleted_groups = [group.group_id]


def _expire_left_over_members(
    admin: KafkaAdmin,
    config: StreamsConfig,
    result: ResetResult,
    sources: list[str],
    force_timeout_s: float | None,
    timeout_s: float,
    group: GroupDescription,
) -> GroupDescription:
    """``force``: get members of stopped instances out of the group without RemoveMembers.

    Consumer group: a throw-away member joins and leaves (:func:`rejoin_group_once`): the
    rebalance it starts completes only once dead members have expired (Kafka would expire
    them anyway; some brokers only do when someone joins). Streams group: the broker expires
    them by itself. Then the group is polled until it is inactive.
    """
    wait_s = force_timeout_s
    if wait_s is None:
        wait_s = 2 * config.session_timeout_ms / 1000 + _FORCE_MARGIN_S
    deadline = time.monotonic() + wait_s
    if group.group_type == "streams":
        result.warnings.append(
            f"--force: waited up to {wait_s:.0f}s for the broker to expire the streams group's left-over "
            "members (after its group.streams.session.timeout.ms)"
        )
    else:
        result.warnings.append(
            "--force: librdkafka cannot remove group members (no RemoveMembersFromConsumerGroup), so a "
            "temporary member joined and left the group to make the broker expire left-over members "
            f"(waiting up to {wait_s:.0f}s); running instances would have seen two rebalances"
        )
        conf = {**config.consumer_configs(), "client.id": f"{config.effective_client_id}-reset-force"}
        if sources:  # a member must subscribe to something to join
            rejoin_group_once(conf, sources, wait_s)
    return _wait_inactive(admin, config.application_id, max(0.0, deadline - time.monotonic()), timeout_s)


def _record_group(result: ResetResult, group: GroupDescription) -> None:
    result.group_type = group.group_type
    result.group_state = group.state
    result.group_members = [f"{m.client_id}@{m.host} ({m.member_id})" for m in group.members]


def _active_reason(group: GroupDescription, force: bool) -> str:
    members = ", ".join(f"{m.client_id}@{m.host}" for m in group.members) or "the broker lists none"
    if group.group_type == "streams":
        text = (
            f"streams group {group.group_id!r} is {group.state} with members ({members}): offsets can only "
            "be reset while it is inactive, stop every instance of the application first"
        )
        if force:
            return text + "; they did not expire while --force waited, so an instance is still running"
        return text + (
            "; if the instances are stopped, the broker drops their members after its streams session "
            "timeout (--force waits for that)"
        )
    text = (
        f"consumer group {group.group_id!r} is {group.state} with active members ({members}): "
        "stop every instance of the application first"
    )
    if force:
        return text + "; they did not expire while --force waited, so an instance is still running"
    return text + (
        "; if the instances are stopped and only left-over members remain, --force makes the broker "
        "expire them (removing members is not possible with librdkafka)"
    )


def _wait_inactive(admin: KafkaAdmin, group_id: str, wait_s: float, timeout_s: float) -> GroupDescription:
    deadline = time.monotonic() + wait_s
    group = admin.describe_group(group_id, timeout=timeout_s)
    while group.active and time.monotonic() < deadline:
        time.sleep(_GROUP_POLL_S)
        group = admin.describe_group(group_id, timeout=timeout_s)
    return group


def streams_group_to_delete(admin: KafkaAdmin, app_id: str, warnings: list[str]) -> str | None:
    """The application's streams group when ``topics delete`` takes it along (no members);
    None when it runs on a consumer group (kept) or has none, or has members (a warning)."""
    group = admin.describe_group(app_id)
    if group.group_type != "streams":
        return None
    if group.active:
        warnings.append(
            f"streams group {app_id!r} is {group.state} with members: not deleted (the broker refuses a "
            "group with members); stop every instance of the application and delete the topics again"
        )
        return None
    return app_id


def delete_streams_group_with_topics(
    admin: KafkaAdmin, group: str, warnings: list[str], dry_run: bool
) -> bool:
    """Delete (dry run: nothing) the streams group ``group``; False with a warning if refused."""
    refused = None if dry_run else admin.delete_group(group)
    if refused is None or refused == "GROUP_ID_NOT_FOUND":
        return True
    warnings.append(f"the broker refused to delete streams group {group!r}: {refused}")
    return False
