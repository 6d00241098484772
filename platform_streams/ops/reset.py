"""Application reset: reprocess the input from a chosen position with empty state.

The equivalent of ``kafka-streams-application-reset`` plus ``KafkaStreams.cleanup()``:

1. **Refuse while the application runs.** The consumer group (``application.id``) must
   have no active member. Kafka describes members; some brokers describe none but report the
   state right (``STABLE`` while members are in, ``EMPTY`` after), so both are checked
   (:attr:`GroupDescription.active`), again right before anything is written, because
   some brokers accept offset writes and group deletion even for an active group.
   A streams group (``group_protocol="streams"``, which librdkafka cannot describe) is
   described with StreamsGroupDescribe and checked as ``kafka-streams-groups.sh
   --reset-offsets`` checks it: only an inactive group (:mod:`platform_streams.ops.app_group`).
   ``force`` stands in for Kafka's ``--force``, which removes left-over members (of
   stopped instances, until their session times out) with RemoveMembersFromConsumerGroup.
   librdkafka/confluent-kafka do not offer that call, so here ``force`` makes the broker
   expire them: a temporary member joins and leaves the group (on some brokers a dead member is
   never expired otherwise), then the group is polled until inactive, for up to twice
   the session timeout plus a margin. It still refuses if the group stays active -- then
   an instance is really running (and it saw two rebalances).
2. **Delete the application's streams group**, if it runs on one (its members, epochs and the
   topology it would refuse a changed application with), before the offsets are written.
   **Reset input offsets** to a scenario (:class:`OffsetScenario`), clamped to each
   partition's log. The log end comes from fetches (:func:`log_end_offsets`; some brokers'
   ListOffsets(latest) is wrong) and a time from :func:`offsets_for_time`, which checks
   the broker's answer against the records and scans when it is wrong, saying
   which method it used per partition. The offsets a group repair saved (group
   ``<application_id>-offsets-backup``) are deleted, unless an application has that id.
3. **Delete the internal topics** that belong to the application
   (:mod:`platform_streams.ops.reset_topics`): never one that an application whose id
   extends ours claims (``<application_id>-v2``'s topics are named like ours too); their
   committed offsets go with them. That includes the runtime's coordination topics
   ``<application_id>-control`` and
   ``<application_id>-metadata``: their member heartbeats, SHUTDOWN_APPLICATION requests
   and interactive-query directory entries describe the runs before the reset. The next
   start recreates them (as it does the other internal topics).
4. **Wipe the local state directory** ``<state_dir>/<application_id>`` of *this* machine,
   and ``<state_dir>-w<i>/<application_id>`` of every worker process ``run --workers N``
   started here (see :mod:`platform_streams.process_supervisor`). Instances elsewhere
   (other pods) must wipe theirs (``KafkaStreams.cleanup()``) or start on a fresh volume;
   the result warns about it.

Output topics are never touched. ``dry_run`` computes and reports every action and
changes nothing (not even under ``force``: no member joins). Every step is idempotent, so
after a failure part-way (a broker error raises, without a result) the reset is re-run.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from platform_streams.config import StreamsConfig
from platform_streams.errors import StreamsConfigError
from platform_streams.kafka import KafkaAdmin, log_end_offsets, offsets_for_time
from platform_streams.kafka.authorized import missing_operations, not_allowed
from platform_streams.ops.app_group import check_group, delete_streams_group, recheck_group
from platform_streams.ops.offsets import OffsetScenario, PartitionBounds, TimeTarget, compute_offset_changes
from platform_streams.ops.reset_topics import backup_group_is_ours, reset_internal_topics
from platform_streams.ops.results import (
    LocalStateAction,
    OperationRefusedError,
    ResetResult,
)
from platform_streams.ops.topics import (
    AppLike,
    Confirm,
    admin_for,
    as_plan,
    forget_ranges_of_deleted_changelogs,
    other_applications,
    owned_topic_kinds,
)
from platform_streams.process_supervisor import existing_worker_state_dirs
from platform_streams.runtime.membership.rebalance_wait import backup_group
from platform_streams.state.private_files import app_state_dir
from platform_streams.state.snapshots import open_snapshot_store
from platform_streams.topology import Topology
from platform_streams.topology.compiler import TopologyPlan

if TYPE_CHECKING:  # the registry client is an extra (schema-registry), loaded only when used
    from platform_streams.kafka.schema_registry import RegistrySettings

__all__ = ["ResetOptions", "reset_application"]

log = logging.getLogger(__name__)

TP = tuple[str, int]


@dataclass(frozen=True)
class ResetOptions:
    """How to reset (the reset tool's options)."""

    scenario: OffsetScenario = field(default_factory=OffsetScenario.to_earliest)
    input_topics: Sequence[str] | None = None
    """Topics whose offsets are reset; default: every source topic of the topology."""
    intermediate_topics: Sequence[str] = ()
    """Kafka's ``--intermediate-topics``: topics the application both writes and reads
    (``through()``); their committed offsets skip to the log end whatever the scenario."""
    internal_topics: Sequence[str] | None = None
    """Kafka's ``--internal-topics``: delete only these internal topics (each must be named
    like one, :func:`~platform_streams.ops.ownership.parses_as_internal`, and not be another
    application's); default: every internal topic the application owns."""
    dry_run: bool = False
    force: bool = False
    force_timeout_s: float | None = None
    """How long ``force`` waits for members to expire; default twice the session timeout + 5 s."""
    include_orphans: bool = False
    """Also delete topics named like internal topics of the application but not in its topology
    (never one that an application whose id extends ours claims: :mod:`platform_streams.ops.ownership`)."""
    wipe_local_state: bool = True
    max_scan_records: int = 1_000_000
    """Per partition, when a time must be found by scanning (broker time index not exact)."""
    timeout_s: float = 30.0
    schema_registry: RegistrySettings | None = None
    """The Schema Registry of the application's registry serdes: the subjects of the internal
    topics the reset deletes are deleted too (soft, then hard), and no others."""
    hard_delete_subjects: bool = True
    """False: those subjects are only soft-deleted (the registry can still bring them back)."""


def application_without_code() -> TopologyPlan:
    """The plan of an application whose code is not at hand (``reset --application-id``):
    no declared topics, so the input topics must be named and every existing topic named
    like the application's internal topics is an orphan (Kafka's tool deletes those too)."""
    return TopologyPlan(topology=Topology(), subtopologies=[], global_stores=[], internal_topics={})


def reset_application(
    app: AppLike,
    config: StreamsConfig,
    options: ResetOptions | None = None,
    *,
    confirm: Confirm | None = None,
    admin: KafkaAdmin | None = None,
    now_ms: int | None = None,
) -> ResetResult:
    """Reset the application (module docstring); returns what was (or would be) done.

    Raises :class:`OperationRefusedError` when the group is active (not under
    ``dry_run``), when an input topic is an output or internal topic, or when
    ``confirm`` (called with a list of the actions) says no.
    """
    opts = options or ResetOptions()
    plan = as_plan(app)
    app_id = config.application_id
    result = ResetResult("reset", app_id, dry_run=opts.dry_run, scenario=opts.scenario.describe())
    client, owned = admin_for(config, admin)
    try:
        existing = client.list_topics(timeout=opts.timeout_s)
        _check_authorized(client, plan, app_id, opts, result)
        check_group(
            client,
            config,
            result,
            [t for t in plan.external_source_topics() if t in existing],
            force=opts.force,
            force_timeout_s=opts.force_timeout_s,
            dry_run=opts.dry_run,
            timeout_s=opts.timeout_s,
        )
        inputs = _input_topics(plan, opts, existing, result)
        partitions = [(t, p) for t in inputs for p in range(existing[t])]
        bounds = _bounds(client, config, plan, partitions, opts.timeout_s)
        targets = _time_targets(client, config, opts, bounds, now_ms, result)
        result.offsets = compute_offset_changes(opts.scenario, bounds, targets)
        intermediate = _intermediate_partitions(plan, opts, existing, result)
        result.offsets += compute_offset_changes(
            OffsetScenario.to_latest(), _bounds(client, config, plan, intermediate, opts.timeout_s), None
        )
        result.internal_topics = reset_internal_topics(
            plan,
            existing,
            result,
            other_applications(client, app_id, existing, opts.timeout_s),
            chosen=opts.internal_topics,
            include_orphans=opts.include_orphans,
            user_topics=[*(opts.input_topics or ()), *opts.intermediate_topics],
            dry_run=opts.dry_run,
        )
        delete_backup = backup_group_is_ours(client, existing, result, opts.timeout_s)
        result.snapshot_stores = _snapshot_stores(plan, config, result, existing)
        result.local_state = _local_state(Path(config.state_dir), config.application_id, opts)
        result.worker_local_states = [
            _local_state(d, config.application_id, opts)
            for d in existing_worker_state_dirs(Path(config.state_dir))
            if (d / config.application_id).exists()
        ]
        if opts.dry_run:
            return result
        if confirm is not None and not confirm(_actions(result)):
            raise OperationRefusedError("the reset was not confirmed", result)
        _execute(client, config, opts, result, owned_topic_kinds(plan, app_id), existing, delete_backup)
    finally:
        if owned:
            client.close()
    return result


def _check_authorized(
    admin: KafkaAdmin, plan: TopologyPlan, app_id: str, opts: ResetOptions, result: ResetResult
) -> None:
    """Refuse before changing anything when the principal lacks an operation the reset uses
    (:mod:`platform_streams.kafka.authorized`): a hidden input or internal topic would
    otherwise be skipped as missing, and a refusal met half-way leaves offsets moved."""
    inputs = plan.external_source_topics() if opts.input_topics is None else list(opts.input_topics)
    internal = opts.internal_topics if opts.internal_topics is not None else owned_topic_kinds(plan, app_id)
    topics: dict[str, tuple[str, ...]] = {t: ("DELETE",) for t in internal}
    topics.update({t: ("READ",) for t in [*inputs, *opts.intermediate_topics]})
    groups = {app_id: ("READ",), backup_group(app_id): ("DELETE",)}
    missing = missing_operations(admin, topics, groups, timeout_s=opts.timeout_s)
    if missing:
        raise OperationRefusedError(not_allowed(missing, "reset"), result)


def _input_topics(
    plan: TopologyPlan, opts: ResetOptions, existing: dict[str, int], result: ResetResult
) -> list[str]:
    """The topics to reset: never an output or internal topic; missing ones are skipped."""
    sources = plan.external_source_topics()
    requested = sources if opts.input_topics is None else list(dict.fromkeys(opts.input_topics))
    internal = owned_topic_kinds(plan, result.application_id)
    forbidden = [
        t for t in requested if t in internal or (t in plan.external_sink_topics() and t not in sources)
    ]
    if forbidden:
        raise OperationRefusedError(
            f"not input topics of the application (output or internal topics are never reset): {forbidden}",
            result,
        )
    foreign = [t for t in requested if t not in sources]
    if foreign:
        result.warnings.append(f"not source topics of the topology, reset anyway as requested: {foreign}")
    missing = [t for t in requested if t not in existing]
    if missing:
        result.warnings.append(f"input topics do not exist, skipped: {missing}")
    result.input_topics = [t for t in requested if t in existing]
    return result.input_topics


def _intermediate_partitions(
    plan: TopologyPlan, opts: ResetOptions, existing: dict[str, int], result: ResetResult
) -> list[TP]:
    """Kafka's intermediate topics: never an internal topic; missing ones are skipped."""
    requested = list(dict.fromkeys(opts.intermediate_topics))
    internal = [t for t in requested if t in owned_topic_kinds(plan, result.application_id)]
    if internal:
        raise OperationRefusedError(f"internal topics are not intermediate topics: {internal}", result)
    missing = [t for t in requested if t not in existing]
    if missing:
        result.warnings.append(f"intermediate topics do not exist, skipped: {missing}")
    return [(t, p) for t in requested if t in existing for p in range(existing[t])]


def _bounds(
    admin: KafkaAdmin, config: StreamsConfig, plan: TopologyPlan, partitions: list[TP], timeout_s: float
) -> dict[TP, PartitionBounds]:
    if not partitions:
        return {}
    earliest = admin.list_offsets(partitions, "earliest", timeout=timeout_s)
    ends = log_end_offsets(config.restore_consumer_configs(), partitions, timeout_s=timeout_s, admin=admin)
    committed = admin.committed_offsets(config.application_id, partitions, timeout=timeout_s)
    policies = {t: s.offset_reset for sub in plan.subtopologies for t, s in sub.sources_by_topic.items()}
    return {
        tp: PartitionBounds(
            earliest=max(0, earliest[tp][0]),
            end=ends[tp],
            committed=committed.get(tp),
            start_policy="latest" if policies.get(tp[0]) == "latest" else "earliest",
        )
        for tp in partitions
    }


def _time_targets(
    admin: KafkaAdmin,
    config: StreamsConfig,
    opts: ResetOptions,
    bounds: dict[TP, PartitionBounds],
    now_ms: int | None,
    result: ResetResult,
) -> dict[TP, TimeTarget] | None:
    timestamp = opts.scenario.target_timestamp_ms(now_ms)
    if timestamp is None:
        return None
    lookups, warnings = offsets_for_time(
        admin,
        config.restore_consumer_configs(),
        timestamp,
        {tp: (b.earliest, b.end) for tp, b in bounds.items()},
        max_scan_records=opts.max_scan_records,
        timeout_s=opts.timeout_s,
    )
    result.warnings.extend(warnings)
    return {tp: TimeTarget(found.offset, found.method) for tp, found in lookups.items()}


def _local_state(state_dir: Path, application_id: str, opts: ResetOptions) -> LocalStateAction:
    path = app_state_dir(state_dir, application_id)
    existed = path.exists() or path.is_symlink()
    action: Literal["deleted", "would_delete", "absent", "kept"]
    if not opts.wipe_local_state:
        action = "kept"
    elif not existed:
        action = "absent"
    else:
        action = "would_delete" if opts.dry_run else "deleted"
    return LocalStateAction(str(path), existed, action)


def _snapshot_stores(
    plan: TopologyPlan, config: StreamsConfig, result: ResetResult, existing: Iterable[str]
) -> list[str]:
    """Stores whose changelog the reset deletes (or that is gone already), when snapshots are
    configured: a snapshot describes that log, so a restore of the new one must not ingest
    it, nor may ``snapshot truncate`` cut the new log below its offset."""
    if not config.state_snapshot_location:
        return []
    doomed = {t.topic for t in result.internal_topics if t.status in ("deleted", "would_delete")}
    present = set(existing)
    out = []
    for store in sorted(plan.topology.stores):
        changelog = plan.changelog_topic(store)
        topic = None if changelog is None else plan.physical_topic(changelog, config.application_id)
        if topic is not None and (topic in doomed or topic not in present):
            out.append(store)
    return out


def _actions(result: ResetResult) -> list[str]:
    """The reset's actions as lines, for a confirmation prompt."""
    lines = [
        f"set committed offset of {c.topic}-{c.partition} from {c.current} to {c.target}"
        for c in result.offsets
        if c.target is not None
    ]
    lines += [f"delete streams group {g}" for g in result.deleted_groups]
    lines += [f"delete topic {t.topic}" for t in result.internal_topics if t.status == "deleted"]
    lines += [f"delete local state directory {s.path}" for s in _wiped(result)]
    lines += [f"delete the state snapshots of store {s}" for s in result.snapshot_stores]
    return lines


def _wiped(result: ResetResult) -> list[LocalStateAction]:
    """The local state directories the reset deletes (the app's and its worker processes')."""
    states = [result.local_state] if result.local_state is not None else []
    return [s for s in [*states, *result.worker_local_states] if s.action == "deleted"]


def _execute(
    admin: KafkaAdmin,
    config: StreamsConfig,
    opts: ResetOptions,
    result: ResetResult,
    kinds: Mapping[str, str],
    existing: Iterable[str],
    delete_backup: bool,
) -> None:
    """Do it; the group is checked again first (some brokers accept writes next to live members).
    A streams group is deleted before the offsets are written, which then outlive it
    (:mod:`platform_streams.ops.app_group`)."""
    app_id = config.application_id
    group = recheck_group(admin, result, opts.timeout_s)
    delete_streams_group(admin, group, result, opts.timeout_s)
    offsets = {(c.topic, c.partition): c.target for c in result.offsets if c.target is not None}
    admin.alter_committed_offsets(app_id, offsets, timeout=opts.timeout_s)
    log.info("reset %s: committed offsets set: %s", app_id, offsets)
    # offsets a group repair saved (runtime/membership/rebalance_wait.py) would otherwise outlive the reset
    if delete_backup and admin.delete_group(backup_group(app_id), timeout=opts.timeout_s) is None:
        log.info("reset %s: deleted the offsets a group repair had saved", app_id)
    doomed = [t.topic for t in result.internal_topics if t.status == "deleted"]
    if doomed:
        admin.delete_topics(doomed, timeout=max(opts.timeout_s, 30.0))
        log.info("reset %s: deleted internal topics %s", app_id, doomed)
        forget_ranges_of_deleted_changelogs(config, doomed, kinds, existing)
        if opts.schema_registry is not None:
            from platform_streams.kafka.schema_registry import delete_subjects_of_topics

            result.deleted_subjects = delete_subjects_of_topics(
                opts.schema_registry, doomed, permanent=opts.hard_delete_subjects
            )
            log.info("reset %s: deleted schema subjects %s", app_id, result.deleted_subjects)
        # the control topic's committed offset is the fencing check's (nobody reads from it)
        grouped = {
            t.topic for t in result.internal_topics if t.status == "deleted" and t.kind != "coordination"
        }
        stale = [tp for tp in admin.committed_offsets(app_id, timeout=opts.timeout_s) if tp[0] in grouped]
        if stale:
            result.warnings.append(
                f"the broker kept committed offsets of deleted internal topics {sorted(stale)}; a recreated "
                "topic would start there: delete the consumer group's offsets for them"
            )
    if result.snapshot_stores:
        snapshots = open_snapshot_store(str(config.state_snapshot_location))
        for store in result.snapshot_stores:
            snapshots.delete_prefix(f"{app_id}/{store}/")
        log.info("reset %s: deleted the state snapshots of stores %s", app_id, result.snapshot_stores)
    wiped = _wiped(result)
    for state in wiped:
        _wipe(Path(state.path))
    if wiped:
        result.warnings.append(
            f"local state was wiped on this machine only ({', '.join(s.path for s in wiped)}); every other "
            "machine that ran the application must call KafkaStreams.cleanup() or start on a fresh volume"
        )
    result.completed = True


def _wipe(path: Path) -> None:
    """Delete ``<state_dir>/<application_id>``, refusing anything that is not plainly that."""
    if path.is_symlink():
        raise StreamsConfigError(f"refusing to wipe {path}: it is a symbolic link")
    if path.resolve().parent != path.parent.resolve():
        raise StreamsConfigError(f"refusing to wipe {path}: it is not directly inside {path.parent}")
    shutil.rmtree(path)
    log.info("wiped local state directory %s", path)
