"""What the reset deletes besides offsets: the application's internal topics and the group a
group repair saved offsets in -- never another application's.

The topics follow the one ownership rule of :func:`platform_streams.ops.topics.ownership_problem`
(see :mod:`platform_streams.ops.ownership` for applications whose id extends ours):

* by default, every topic the application owns (declared or coordination); one that
  another application claims is shared with it, and deleting it would break that one, so
  the reset is refused. With ``include_orphans`` (or without the code, where everything is
  an orphan) also the topics merely named like internal topics of the application, except
  those another application claims (left alone, with a warning naming it) and the reset's
  own input and intermediate topics (Kafka's KAFKA-7930: a user topic named like an
  internal one);
* with ``internal_topics`` (Kafka's ``--internal-topics``), only those, each owned or
  named like an internal topic and no input or intermediate topic; anything else refuses
  the reset as a whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from platform_streams.kafka import KafkaAdmin
from platform_streams.ops.ownership import OtherApplications, application_evidence
from platform_streams.ops.results import InternalTopicStatus, OperationRefusedError, RefusedTopic, ResetResult
from platform_streams.ops.topics import (
    claimed_warnings,
    coordination_clashes,
    orphan_topics,
    owned_topic_kinds,
    refusal,
    unowned,
)
from platform_streams.runtime.membership.rebalance_wait import backup_group
from platform_streams.topology.compiler import TopologyPlan

__all__ = ["backup_group_is_ours", "reset_internal_topics"]


def reset_internal_topics(
    plan: TopologyPlan,
    existing: dict[str, int],
    result: ResetResult,
    others: OtherApplications,
    *,
    chosen: Sequence[str] | None,
    include_orphans: bool,
    user_topics: Iterable[str],
    dry_run: bool,
) -> list[InternalTopicStatus]:
    """The internal topics the reset deletes (module docstring); ``user_topics``: its input
    and intermediate topics. Raises :class:`OperationRefusedError` naming what is not ours."""
    app_id = result.application_id
    verb = "would_delete" if dry_run else "deleted"
    kinds = owned_topic_kinds(plan, app_id)
    result.warnings += coordination_clashes(plan, app_id)
    out = [
        InternalTopicStatus(t, kind, verb if t in existing else "missing", actual_partitions=existing.get(t))
        for t, kind in sorted(kinds.items())
    ]
    users = set(user_topics)
    if chosen is not None:
        reason = "it is an input or intermediate topic of the reset"
        inputs = [RefusedTopic(t, reason) for t in chosen if t in users]
        _refuse([*inputs, *unowned(chosen, plan, app_id, include_orphans=True, others=others)], result)
        known = {s.topic: s for s in out}
        return [known.get(t) or _orphan(t, existing, verb) for t in dict.fromkeys(chosen)]
    present = [t for t in kinds if t in existing]
    _refuse(unowned(present, plan, app_id, include_orphans=False, others=others), result)
    result.warnings += claimed_warnings(existing, plan, app_id, others)
    orphans = [t for t in orphan_topics(existing, plan, app_id, others) if t not in users]
    if include_orphans:
        out += [_orphan(t, existing, verb) for t in orphans]
    elif orphans:
        result.warnings.append(f"left alone (named like internal topics, not in the topology): {orphans}")
    return out


def _orphan(topic: str, existing: dict[str, int], verb: str) -> InternalTopicStatus:
    """A topic named like an internal topic of the application, not in its topology (if any)."""
    status = verb if topic in existing else "missing"
    return InternalTopicStatus(topic, "orphan", status, actual_partitions=existing.get(topic))


def _refuse(refused: list[RefusedTopic], result: ResetResult) -> None:
    if refused:
        raise OperationRefusedError(refusal(result.application_id, refused), result)


def backup_group_is_ours(
    admin: KafkaAdmin, existing: Iterable[str], result: ResetResult, timeout_s: float
) -> bool:
    """Whether ``<application_id>-offsets-backup`` is the group a group repair saved offsets
    in (never joined by anyone) rather than the group of an application with that id, which
    the reset must not delete (it then warns)."""
    app_id = result.application_id
    backup = backup_group(app_id)
    why = application_evidence(admin, backup, existing, timeout_s)
    if why is None:
        return True
    result.warnings.append(
        f"consumer group {backup!r} left alone: it belongs to application {backup!r} ({why}), "
        f"so it is not where a group repair of {app_id!r} saved offsets"
    )
    return False
