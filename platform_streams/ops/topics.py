"""Internal topic lifecycle: plan, create, validate and delete an application's internal topics.

The topics are computed from the topology exactly as the runtime computes them at start-up
(:func:`platform_streams.runtime.internal_topics.internal_topic_specs`), so what ``plan``
shows is what ``KafkaStreams.start()`` would create. Besides those, the runtime keeps two
*coordination* topics per application (:func:`coordination_topics`): ``<application_id>-control``
(member heartbeats, SHUTDOWN_APPLICATION requests, the exactly-once fencing check) and
``<application_id>-metadata`` (the interactive-query instance directory, only with an
``application_server``), and ``<application_id>-members`` (the group's member slots of the
state-aware task assignor). The runtime creates them itself at start-up, so ``create`` and
``validate`` leave them out (missing before the first run is normal); ``plan`` lists them
with whether they exist, and ``delete`` (and the reset) delete them with the rest: their
records describe members and requests of runs that are over. ``delete`` of all of them also
deletes the application's streams group (``group_protocol="streams"``) when it has no members,
as ``kafka-streams-groups.sh --delete --delete-all-internal-topics`` does; a consumer group
is kept (its offsets are the application's position, which Kafka's tools keep too).

These run against production clusters, so deletion is defensive: a topic is deleted only
if it *belongs* to the application (:func:`ownership_problem`; the reset uses the same),
which takes all of

* it is not a user topic of the topology (source, sink, global source, or a source topic
  reused as a changelog -- those can look internal but hold user data), whatever its name;
* no application whose id extends ours claims it (``<application_id>-v2``, whose topics are
  named like ours too; :mod:`platform_streams.ops.ownership` says how one is recognized);
* it is one of the coordination topics, exactly; or the topology declares it -- or, with
  ``include_orphans``, it is merely named like an internal topic
  (:func:`~platform_streams.ops.ownership.parses_as_internal`: left behind by an older
  version of the topology, or any with no code at hand).

Everything that cannot be deleted is refused as a whole: nothing is deleted when any
requested topic is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaAdmin, TopicSpec
from platform_streams.kafka.authorized import missing_operations, not_allowed
from platform_streams.ops.app_group import delete_streams_group_with_topics, streams_group_to_delete
from platform_streams.ops.ownership import (
    INTERNAL_SUFFIXES,
    OtherApplications,
    coordination_names,
    find_other_applications,
    internal_name_rule,
    parses_as_internal,
)
from platform_streams.ops.results import (
    InternalTopicStatus,
    OperationRefusedError,
    RefusedTopic,
    TopicIssue,
    TopicsResult,
)
from platform_streams.runtime.internal_topics import internal_topic_specs
from platform_streams.runtime.membership.control_channel import control_topic_name
from platform_streams.runtime.restore.restore_ranges import forget_published_ranges
from platform_streams.topology.compiler import TopologyPlan, compile_topology
from platform_streams.topology.topology import Topology

__all__ = [
    "INTERNAL_SUFFIXES",
    "AppLike",
    "Confirm",
    "admin_for",
    "as_plan",
    "claimed_warnings",
    "coordination_clashes",
    "coordination_topics",
    "create_internal_topics",
    "delete_internal_topics",
    "forget_ranges_of_deleted_changelogs",
    "internal_topic_kinds",
    "orphan_topics",
    "other_applications",
    "owned_topic_kinds",
    "ownership_problem",
    "plan_internal_topics",
    "refusal",
    "unowned",
    "validate_internal_topics",
]

log = logging.getLogger(__name__)

#: A Topology, its compiled plan, or anything with ``build() -> Topology`` (a StreamsBuilder).
AppLike = Topology | TopologyPlan | Any
TopicKind = Literal["repartition", "changelog", "coordination"]
#: Asked before anything is deleted with the topics concerned; False refuses.
Confirm = Callable[[Sequence[str]], bool]

# Configs compared as sets ("compact,delete" == "delete,compact").
_LIST_CONFIGS = frozenset({"cleanup.policy"})


def as_plan(app: AppLike) -> TopologyPlan:
    """Compile ``app`` unless it is a plan already."""
    if isinstance(app, TopologyPlan):
        return app
    if not isinstance(app, Topology) and hasattr(app, "build"):
        app = app.build()
    if not isinstance(app, Topology):
        raise TypeError(f"expected a Topology, TopologyPlan or StreamsBuilder, got {type(app).__name__}")
    return compile_topology(app)


def admin_for(config: StreamsConfig, admin: KafkaAdmin | None) -> tuple[KafkaAdmin, bool]:
    """The caller's admin, or a new one from ``config`` (True: the caller must close it)."""
    return (admin, False) if admin is not None else (KafkaAdmin(config.admin_configs()), True)


def internal_topic_kinds(plan: TopologyPlan, application_id: str) -> dict[str, TopicKind]:
    """``{physical name: kind}`` of every internal topic the topology declares."""
    return {plan.physical_topic(name, application_id): t.kind for name, t in plan.internal_topics.items()}


def coordination_topics(plan: TopologyPlan, application_id: str) -> list[str]:
    """The runtime's coordination topics of the application (module docstring), sorted.

    A topic of the topology's own (input or output) is never one, even when named so.
    """
    users = _user_topics(plan)
    return sorted(t for t in coordination_names(application_id) if t not in users)


def coordination_clashes(plan: TopologyPlan, application_id: str) -> list[str]:
    """Warnings for user topics named like the runtime's coordination topics (never ours)."""
    users = _user_topics(plan)
    return [
        f"{t} is an input or output topic of the topology but also the name of the runtime's "
        "coordination topic: the application and the runtime would share it (rename one)"
        for t in coordination_names(application_id)
        if t in users
    ]


def owned_topic_kinds(plan: TopologyPlan, application_id: str) -> dict[str, TopicKind]:
    """``{physical name: kind}`` of every topic the application owns: declared plus coordination."""
    kinds = internal_topic_kinds(plan, application_id)
    kinds.update(dict.fromkeys(coordination_topics(plan, application_id), "coordination"))
    return kinds


def _user_topics(plan: TopologyPlan) -> set[str]:
    reused = set(plan.topology.source_changelogs.values())
    return (
        set(plan.external_source_topics() + plan.external_sink_topics() + plan.global_source_topics())
        | reused
    )


def other_applications(
    admin: KafkaAdmin, application_id: str, existing: Iterable[str], timeout_s: float = 10.0
) -> OtherApplications:
    """The applications whose ids extend ``application_id`` (:mod:`platform_streams.ops.ownership`)."""
    return find_other_applications(admin, application_id, existing, timeout_s)


def ownership_problem(
    topic: str, plan: TopologyPlan, application_id: str, *, include_orphans: bool, others: OtherApplications
) -> str | None:
    """Why ``topic`` must not be deleted as an internal topic of the application, or None.

    ``others``: the applications whose ids extend ours (:func:`other_applications`); a
    topic one of them claims is theirs even when our topology declares it (the two share it).
    """
    if topic in _user_topics(plan):
        return "it is an input or output topic of the application"
    claim = others.claim(topic)
    if claim is not None:
        return claim
    if topic in coordination_topics(plan, application_id) or topic in internal_topic_kinds(
        plan, application_id
    ):
        return None
    if not parses_as_internal(topic, application_id):
        rule = internal_name_rule(application_id)
        return f"it is not named like an internal topic of {application_id!r}: {rule}"
    if include_orphans:
        return None
    return "the topology does not declare it (pass include_orphans / --include-orphans for leftovers)"


def unowned(
    topics: Iterable[str],
    plan: TopologyPlan,
    application_id: str,
    *,
    include_orphans: bool,
    others: OtherApplications,
) -> list[RefusedTopic]:
    """Those of ``topics`` that must not be deleted as the application's, each with why."""
    problems = {
        t: ownership_problem(t, plan, application_id, include_orphans=include_orphans, others=others)
        for t in dict.fromkeys(topics)
    }
    return [RefusedTopic(t, problem) for t, problem in problems.items() if problem is not None]


def refusal(application_id: str, refused: Iterable[RefusedTopic]) -> str:
    """The one-line refusal naming every refused topic and why."""
    reasons = "; ".join(f"{r.topic}: {r.reason}" for r in refused)
    return f"refusing to delete topics {application_id!r} does not own (nothing deleted): {reasons}"


def _named_like_ours(existing: Iterable[str], plan: TopologyPlan, application_id: str) -> list[str]:
    """Existing topics named like internal topics of the application that it does not own."""
    owned = owned_topic_kinds(plan, application_id)
    users = _user_topics(plan)
    return sorted(
        t for t in existing if parses_as_internal(t, application_id) and t not in owned and t not in users
    )


def orphan_topics(
    existing: Iterable[str], plan: TopologyPlan, application_id: str, others: OtherApplications
) -> list[str]:
    """Existing topics named like the application's internal topics that the topology lacks
    and no application whose id extends ours claims."""
    return [t for t in _named_like_ours(existing, plan, application_id) if others.claimant(t) is None]


def claimed_warnings(
    existing: Iterable[str], plan: TopologyPlan, application_id: str, others: OtherApplications
) -> list[str]:
    """One warning per other application whose topics are named like ours: left alone."""
    claimed: dict[str, list[str]] = {}
    for topic in _named_like_ours(existing, plan, application_id):
        other = others.claimant(topic)
        if other is not None:
            claimed.setdefault(other, []).append(topic)
    return [
        f"left alone, named like internal topics of {application_id!r} but application {other!r} "
        f"claims them ({others.evidence[other]}): " + ", ".join(topics)
        for other, topics in claimed.items()
    ]


def _specs(plan: TopologyPlan, config: StreamsConfig, admin: KafkaAdmin) -> list[tuple[TopicSpec, TopicKind]]:
    kinds = internal_topic_kinds(plan, config.application_id)
    return [(s, kinds[s.name]) for s in internal_topic_specs(plan, config, admin)]


def _status(spec: TopicSpec, kind: TopicKind, status: str, actual: int | None = None) -> InternalTopicStatus:
    return InternalTopicStatus(spec.name, kind, status, spec.num_partitions, dict(spec.config), actual)


def plan_internal_topics(
    app: AppLike, config: StreamsConfig, *, admin: KafkaAdmin | None = None
) -> TopicsResult:
    """Every internal topic with partitions and configs, and whether it exists (read-only)."""
    plan = as_plan(app)
    client, owned = admin_for(config, admin)
    try:
        specs = _specs(plan, config, client)
        existing = client.list_topics()
        others = other_applications(client, config.application_id, existing)
    finally:
        if owned:
            client.close()
    result = TopicsResult("plan", config.application_id)
    for spec, kind in specs:
        actual = existing.get(spec.name)
        result.topics.append(_status(spec, kind, "exists" if actual is not None else "missing", actual))
    for topic in coordination_topics(plan, config.application_id):
        actual = existing.get(topic)
        status = "exists" if actual is not None else "missing"
        result.topics.append(InternalTopicStatus(topic, "coordination", status, actual_partitions=actual))
    result.orphans = orphan_topics(existing, plan, config.application_id, others)
    result.warnings += coordination_clashes(plan, config.application_id)
    result.warnings += claimed_warnings(existing, plan, config.application_id, others)
    return result


def create_internal_topics(
    app: AppLike, config: StreamsConfig, *, dry_run: bool = False, admin: KafkaAdmin | None = None
) -> TopicsResult:
    """Create the missing internal topics (idempotent); existing ones are left alone.

    An existing topic that differs from the plan is reported as an issue (run validate;
    a wrong partition count needs a reset), never altered.
    """
    plan = as_plan(app)
    client, owned = admin_for(config, admin)
    try:
        specs = _specs(plan, config, client)
        existing = client.list_topics()
        missing = [s for s, _ in specs if s.name not in existing]
        # a topic the principal may create but not DESCRIBE would never become visible:
        # refuse now rather than wait for it (DELETE or READ on the prefix give DESCRIBE)
        hidden = missing_operations(client, {s.name: ("DESCRIBE",) for s in missing}, {})
        if hidden:
            raise OperationRefusedError(
                not_allowed(hidden, "topics"), TopicsResult("create", config.application_id, dry_run=dry_run)
            )
        created = {} if dry_run or not missing else client.create_topics(missing)
        issues = _compare(specs, existing, client)
    finally:
        if owned:
            client.close()
    result = TopicsResult("create", config.application_id, dry_run=dry_run)
    for spec, kind in specs:
        if spec.name in existing:
            result.topics.append(_status(spec, kind, "exists", existing[spec.name]))
        else:
            status = "would_create" if dry_run else created.get(spec.name, "created")
            result.topics.append(_status(spec, kind, status, None if dry_run else spec.num_partitions))
    result.issues = [i for i in issues if i.problem != "missing"]
    if result.issues:
        result.warnings.append("existing internal topics differ from the topology: see the issues (validate)")
    return result


def validate_internal_topics(
    app: AppLike, config: StreamsConfig, *, admin: KafkaAdmin | None = None
) -> TopicsResult:
    """Report missing internal topics, wrong partition counts and configs that differ.

    Only the configs the topology sets are compared (``cleanup.policy`` as a set). A config
    the broker does not describe counts as different: Kafka describes every config, some
    brokers only the ones set explicitly, so absent means "created without it".
    """
    plan = as_plan(app)
    client, owned = admin_for(config, admin)
    try:
        specs = _specs(plan, config, client)
        existing = client.list_topics()
        issues = _compare(specs, existing, client)
        others = other_applications(client, config.application_id, existing)
    finally:
        if owned:
            client.close()
    result = TopicsResult("validate", config.application_id, issues=issues)
    for spec, kind in specs:
        actual = existing.get(spec.name)
        result.topics.append(_status(spec, kind, "exists" if actual is not None else "missing", actual))
    result.orphans = orphan_topics(existing, plan, config.application_id, others)
    return result


def _compare(
    specs: list[tuple[TopicSpec, TopicKind]], existing: dict[str, int], admin: KafkaAdmin
) -> list[TopicIssue]:
    issues: list[TopicIssue] = []
    present = [s for s, _ in specs if s.name in existing]
    described = admin.describe_topic_configs([s.name for s in present]) if present else {}
    for spec, _kind in specs:
        if spec.name not in existing:
            issues.append(TopicIssue(spec.name, "missing", f"{spec.num_partitions} partitions"))
            continue
        if existing[spec.name] != spec.num_partitions:
            issues.append(
                TopicIssue(spec.name, "partitions", str(spec.num_partitions), str(existing[spec.name]))
            )
        actual = described.get(spec.name, {})
        for key, want in sorted(spec.config.items()):
            have = actual.get(key)
            if not _config_equal(key, want, have):
                issues.append(TopicIssue(spec.name, "config", f"{key}={want}", f"{key}={have}"))
    return issues


def _config_equal(key: str, want: str, have: str | None) -> bool:
    if have is None:
        return False
    if key in _LIST_CONFIGS:
        return {p.strip() for p in want.split(",")} == {p.strip() for p in have.split(",")}
    return want.strip() == have.strip()


def delete_internal_topics(
    app: AppLike,
    config: StreamsConfig,
    *,
    topics: Sequence[str] | None = None,
    include_orphans: bool = False,
    dry_run: bool = False,
    confirm: Confirm | None = None,
    admin: KafkaAdmin | None = None,
) -> TopicsResult:
    """Delete the application's internal topics (all existing ones, or ``topics``).

    "Internal" includes the coordination topics; run it only while the application is
    stopped (the runtime recreates every one of them at start-up).

    Raises :class:`OperationRefusedError` (and deletes nothing) when a requested topic does
    not belong to the application (module docstring) or ``confirm`` says no. Requested
    topics that belong to it but do not exist are reported as ``missing``.
    """
    plan = as_plan(app)
    app_id = config.application_id
    kinds = owned_topic_kinds(plan, app_id)
    client, owned = admin_for(config, admin)
    try:
        existing = client.list_topics()
        others = other_applications(client, app_id, existing)
        result = TopicsResult("delete", app_id, dry_run=dry_run)
        result.orphans = orphan_topics(existing, plan, app_id, others)
        result.warnings += coordination_clashes(plan, app_id)
        result.warnings += claimed_warnings(existing, plan, app_id, others)
        if topics is None:
            wanted = sorted(t for t in kinds if t in existing) + (result.orphans if include_orphans else [])
        else:
            wanted = list(dict.fromkeys(topics))
        result.refused = unowned(wanted, plan, app_id, include_orphans=include_orphans, others=others)
        if result.refused:
            raise OperationRefusedError(refusal(app_id, result.refused), result)
        # a topic the principal may not DESCRIBE is missing from ``existing``: ask by name
        named = wanted if topics is not None else sorted(set(wanted) | set(kinds))
        denied = missing_operations(client, dict.fromkeys(named, ("DELETE",)), {})
        if denied:
            raise OperationRefusedError(not_allowed(denied, "topics"), result)
        present = [t for t in wanted if t in existing]
        group = streams_group_to_delete(client, app_id, result.warnings) if topics is None else None
        doomed = present + ([f"streams group {group}"] if group else [])
        if not dry_run and doomed and confirm is not None and not confirm(doomed):
            raise OperationRefusedError("deletion was not confirmed", result)
        outcome = client.delete_topics(present) if present and not dry_run else {}
        if group is not None and delete_streams_group_with_topics(client, group, result.warnings, dry_run):
            result.deleted_groups.append(group)
    finally:
        if owned:
            client.close()
    for topic in wanted:
        status = (
            "missing"
            if topic not in existing
            else ("would_delete" if dry_run else outcome.get(topic, "deleted"))
        )
        result.topics.append(
            InternalTopicStatus(
                topic, kinds.get(topic, "orphan"), status, actual_partitions=existing.get(topic)
            )
        )
    if not include_orphans and result.orphans:
        result.warnings.append(f"left alone (not in the topology): {', '.join(result.orphans)}")
    log.info("delete internal topics of %s: %s", app_id, {t.topic: t.status for t in result.topics})
    deleted = [t.topic for t in result.topics if t.status == "deleted"]
    forget_ranges_of_deleted_changelogs(config, deleted, kinds, existing)
    return result


def forget_ranges_of_deleted_changelogs(
    config: StreamsConfig, deleted: Iterable[str], kinds: Mapping[str, str], existing: Iterable[str]
) -> None:
    """Changelogs deleted while the control topic stays: forget the changelog ranges published
    there (:func:`~platform_streams.runtime.restore.restore_ranges.forget_published_ranges`), which
    name offsets of the deleted topics. ``kinds``: the owned topics' kinds (a user topic
    named like the control topic is not ours to write to); ``existing``: the topics there
    were before the deletion (an application that never ran has no control topic)."""
    deleted = set(deleted)
    control = control_topic_name(config.application_id)
    if control in deleted or kinds.get(control) != "coordination" or control not in set(existing):
        return
    if not any(kinds.get(t) == "changelog" for t in deleted):
        return
    forgotten = forget_published_ranges(config)
    log.info("%s: forgot %d tasks' changelog ranges (changelogs deleted)", config.application_id, forgotten)
