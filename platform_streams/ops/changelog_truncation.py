"""Changelogs bounded by snapshots: delete changelog records that a published snapshot covers.

``platform-streams snapshot truncate`` (opt-in: ``state_snapshot_truncate_changelogs``)
moves the log start of each persistent key-value store's changelog partition (see
:func:`logged_stores`) up to its newest usable snapshot with DeleteRecords, so changelog
storage and the worst-case restore stop growing with history. It runs as its own step,
after ``snapshot create`` published its manifests, not inside the Spark job: it needs the
application's control topic (what standbys hold) and an admin client allowed to delete
records, neither of which the Spark executors should have, and a failed or refused
truncation must not fail the snapshot that was published.

The rule, per changelog partition ``p`` (the safety argument is in docs/spark.md,
"Changelogs bounded by snapshots")::

    T(p) = min( offset(S) + 1,                 S: the newest published snapshot of p whose
                                                  SST file is re-read and matches its sha256
                position(c, p) for every live client c that holds p's task as a standby )

where ``position`` is the next offset the standby needs, from the client's latest report on
the control topic (a lower bound: a standby only moves forward). A live client holding the
task as a standby that reported no position for ``p`` blocks ``p`` (its standby may be
reading from anywhere); so does a partition without a usable snapshot. Records below
``T(p)`` are deleted only if ``T(p)`` is beyond the current log start.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.errors import BrokerError, StreamsError
from platform_streams.kafka import OFFSET_BEGINNING, KafkaAdmin, read_partition_range
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.membership.control_channel import control_topic_name
from platform_streams.runtime.task_assignment.protocol import REPORT_PREFIX, tp_key
from platform_streams.state.dsl_store_suppliers import apply_dsl_store_config
from platform_streams.state.key_value_store import KeyValueBytesStore
from platform_streams.state.restore import deletes_by_retention
from platform_streams.state.segments import SegmentedBytesStore
from platform_streams.state.snapshots import SnapshotCatalog, SnapshotManifest, file_checksum
from platform_streams.state.timestamped_builders import DslStoreBuilder, TimestampedKeyValueStoreBuilder
from platform_streams.topology.compiler import compile_topology
from platform_streams.topology.topology import Topology

__all__ = [
    "ChangelogCut",
    "StandbyHolders",
    "logged_stores",
    "read_standby_holders",
    "refuse_unopted",
    "snapshot_restorable",
    "truncate_changelogs",
]

log = logging.getLogger(__name__)

_MEMBER = "member/"


@dataclass(frozen=True)
class ChangelogCut:
    """What the truncation did (or would do) to one changelog partition."""

    store: str
    topic: str
    partition: int
    log_start: int
    #: the new log start; None when nothing is deleted (``reason`` says why)
    truncate_before: int | None
    snapshot_id: str | None
    snapshot_offset: int | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StandbyHolders:
    """Per task: the live clients holding it as a standby, and the positions they reported."""

    #: task -> process ids of live clients whose heartbeat lists it as a standby
    holders: dict[TaskId, list[str]]
    #: process id -> task -> "topic/partition" -> next offset needed (its latest report)
    positions: dict[str, dict[TaskId, dict[str, int]]]
    #: live clients whose heartbeat does not say they run with the truncation setting
    unopted: list[str] = field(default_factory=list)

    def bound(self, task: TaskId, topic: str, partition: int) -> tuple[int | None, str | None]:
        """(the lowest position a standby of ``task`` needs, None if none) or (None, why blocked)."""
        lowest: int | None = None
        for process in self.holders.get(task, []):
            position = self.positions.get(process, {}).get(task, {}).get(tp_key(topic, partition))
            if position is None:
                return None, f"client {process} holds task {task} as a standby and reported no position"
            lowest = position if lowest is None else min(lowest, position)
        return lowest, None


def snapshot_restorable(topology: Topology, config: StreamsConfig) -> dict[str, str]:
    """Store -> ``"key_value"`` or ``"segmented"`` (window/session), for the stores a worker
    running with ``config`` restores from a snapshot: RocksDB stores, built as the run-time
    config builds them (its ``dsl_store_suppliers``/``default_dsl_store`` pick the DSL's
    default stores). An in-memory store is always rebuilt from its changelog, whatever
    snapshots exist (the restorer skips stores that are not persistent); a RocksDB store
    with column families is refused by the restorer at run time."""
    apply_dsl_store_config(topology, config)
    out: dict[str, str] = {}
    for name, builder in topology.stores.items():
        kind = _snapshot_kind(builder)
        if kind is not None:
            out[name] = kind
    return out


def _snapshot_kind(builder: Any) -> str | None:
    if isinstance(builder, TimestampedKeyValueStoreBuilder) and builder.versioned:
        return None
    if isinstance(builder, DslStoreBuilder) and builder.store_supplier is None:
        # a DSL store of a built-in type: its bytes store is made when a task opens it
        if builder.store_type != "rocksdb":
            return None
        return "key_value" if isinstance(builder, TimestampedKeyValueStoreBuilder) else "segmented"
    supplier = (
        builder.store_supplier if isinstance(builder, DslStoreBuilder) else getattr(builder, "supplier", None)
    )
    if supplier is None:
        return None
    bottom = supplier.get()  # a new bytes store, not opened: nothing is created on disk
    if not bottom.persistent or not hasattr(bottom.backend, "ingest_sst"):
        return None
    if isinstance(bottom, SegmentedBytesStore):
        return "segmented"
    return "key_value" if isinstance(bottom, KeyValueBytesStore) else None


def logged_stores(
    topology: Topology, config: StreamsConfig, only: Iterable[str] | None = None
) -> dict[str, tuple[str, int]]:
    """Store -> (its physical changelog topic, its sub-topology id), for the changelogs that may
    be truncated: those of persistent key-value stores logged to a changelog of their own.

    Never the changelog of a table restored from its source topic, of an in-memory store
    (rebuilt from the changelog alone), or of a window/session store: its compact,delete
    changelog is already bounded by the store's retention, and a restore of it starts at
    whatever its log start is (records below it are expired), so only a cut the store's
    retention would make anyway is safe there -- left to the retention itself.
    """
    plan = compile_topology(topology)
    restorable = snapshot_restorable(topology, config)
    wanted = set(only) if only else None
    unknown = sorted((wanted or set()) - set(topology.stores))
    if unknown:
        raise StreamsError(f"--store: {unknown} are not stores of the topology ({sorted(topology.stores)})")
    out: dict[str, tuple[str, int]] = {}
    refused = []
    for store in sorted(topology.stores):
        changelog = plan.changelog_topic(store)
        if changelog is None or changelog != f"{store}-changelog" or (wanted and store not in wanted):
            continue
        if restorable.get(store) != "key_value" or deletes_by_retention(topology.stores[store]):
            refused.append(store)  # a retention that deletes records: restored from the log start
            continue
        out[store] = (
            plan.physical_topic(changelog, config.application_id),
            plan.subtopology_of_store(store).id,
        )
    if wanted and refused:
        raise StreamsError(
            f"--store: the changelogs of {refused} are never truncated: only persistent (RocksDB) "
            "key-value stores restore from snapshots (in-memory stores are rebuilt from the changelog "
            "alone; window/session changelogs are bounded by their retention)"
        )
    return out


def read_standby_holders(config: StreamsConfig, expiry_ms: int, timeout_s: float = 30.0) -> StandbyHolders:
    """The control topic read to its end: live clients' standby tasks and their latest reports."""
    topic = control_topic_name(config.application_id)
    with KafkaAdmin(config.admin_configs()) as admin:
        if topic not in admin.list_topics():
            return StandbyHolders({}, {})
    conf = {**config.restore_consumer_configs(), "isolation.level": "read_uncommitted"}
    members: dict[str, tuple[int, dict[str, Any] | None]] = {}
    reports: dict[str, tuple[int, dict[str, Any]]] = {}
    for msg in read_partition_range(conf, topic, 0, OFFSET_BEGINNING, timeout_s=timeout_s):
        key = (msg.key() or b"").decode("utf-8", "replace")
        value = msg.value()
        try:
            data = json.loads(value) if value is not None else None
        except ValueError:
            continue  # not a record of this runtime's
        if data is not None and not isinstance(data, dict):
            continue
        if key.startswith(_MEMBER):
            members[key[len(_MEMBER) :]] = (msg.timestamp()[1], data)
        elif key.startswith(REPORT_PREFIX) and data and "process" in data:
            process = str(data["process"])
            written = int(data.get("time", msg.timestamp()[1]))
            if process not in reports or reports[process][0] <= written:
                reports[process] = (written, data)
    now = int(time.time() * 1000)
    holders: dict[TaskId, list[str]] = {}
    unopted = []
    for process, (written, data) in sorted(members.items()):
        if data is None or now - written > expiry_ms:
            continue  # closed (tombstone) or gone
        if data.get("truncate_changelogs") is not True:
            unopted.append(process)
        for task in data.get("standby", []):
            holders.setdefault(TaskId.parse(task), []).append(process)
    positions = {
        process: {
            TaskId.parse(t): {str(k): int(v) for k, v in p.items()}
            for t, p in data.get("positions", {}).items()
        }
        for process, (_, data) in reports.items()
    }
    return StandbyHolders(holders, positions, unopted)


def refuse_unopted(standbys: StandbyHolders) -> None:
    """Refuse (``StreamsError``) while a live client does not run with the setting: its
    standbys do not start from snapshots, so they would meet the truncated log start."""
    if standbys.unopted:
        raise StreamsError(
            f"live clients {standbys.unopted} do not run with state.snapshot.truncate.changelogs=true "
            "(or are older versions that do not say): changelogs are truncated only when every client "
            "of the application runs with it (nothing was deleted)"
        )


def truncate_changelogs(
    config: StreamsConfig,
    catalog: SnapshotCatalog,
    stores: Mapping[str, tuple[str, int]],
    partitions: Iterable[int] | None = None,
    *,
    dry_run: bool = False,
    timeout_s: float = 30.0,
) -> list[ChangelogCut]:
    """Truncate each store's changelog below its newest usable snapshot (see the module doc).

    ``stores`` maps a store name to (its physical changelog topic, its sub-topology id).
    Refused (``StreamsError``, nothing deleted) unless the setting is on and the broker
    supports DeleteRecords.
    """
    if not config.state_snapshot_truncate_changelogs:
        raise StreamsError(
            "state_snapshot_truncate_changelogs is off: changelogs are truncated below snapshots only "
            "when every client runs with it (their standbys then start from snapshots too)"
        )
    with KafkaAdmin(config.admin_configs()) as admin:
        if not admin.supports("delete_records"):
            raise StreamsError(
                f"the broker at {config.bootstrap_servers} does not support DeleteRecords: changelogs "
                "cannot be truncated below their snapshots (nothing was deleted)"
            )
        expiry_ms = max(config.session_timeout_ms, 6 * config.heartbeat_interval_ms)
        standbys = read_standby_holders(config, expiry_ms, timeout_s)
        refuse_unopted(standbys)
        wanted = set(partitions) if partitions is not None else None
        plan: list[tuple[str, str, int, int, SnapshotManifest | None, str | None]] = []
        for store, (topic, subtopology) in sorted(stores.items()):
            by_partition: dict[int, list[SnapshotManifest]] = {}
            for manifest in catalog.manifests(config.application_id, store):
                if manifest.changelog_topic == topic:
                    by_partition.setdefault(manifest.partition, []).append(manifest)
            for partition, manifests in sorted(by_partition.items()):
                if wanted is not None and partition not in wanted:
                    continue
                snapshot, problem = _usable(catalog, manifests)
                plan.append((store, topic, partition, subtopology, snapshot, problem))
        starts = admin.list_offsets([(t, p) for _, t, p, _, _, _ in plan], "earliest", timeout_s)
        cuts: list[ChangelogCut] = []
        for store, topic, partition, subtopology, snapshot, problem in plan:
            start = starts[(topic, partition)][0]
            cuts.append(_cut(store, topic, partition, start, snapshot, problem, standbys, subtopology))
        todo = {(c.topic, c.partition): c.truncate_before for c in cuts if c.truncate_before is not None}
        if todo and not dry_run:
            altered = _allow_delete_records(admin, sorted({topic for topic, _ in todo}), timeout_s)
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    admin.delete_records(todo, timeout_s)
                    break
                except BrokerError as exc:
                    # a new cleanup.policy reaches the partition leaders a moment after it is set
                    if not altered or exc.code != "POLICY_VIOLATION" or time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        for cut in cuts:
            done = "kept" if cut.truncate_before is None else "would start" if dry_run else "starts"
            log.info("changelog %s-%d: %s at %s (%s)", cut.topic, cut.partition, done,
                     cut.truncate_before or cut.log_start, cut.reason)  # fmt: skip
    return cuts


def _allow_delete_records(admin: KafkaAdmin, topics: list[str], timeout_s: float) -> bool:
    """Kafka refuses DeleteRecords on a compact-only topic (POLICY_VIOLATION): add ``delete`` to
    the changelog's cleanup.policy with unlimited retention (-1 time and size), so the delete
    policy removes nothing by itself and only permits DeleteRecords; compaction goes on."""
    described = admin.describe_topic_configs(topics, timeout_s)
    altered = False
    for topic in topics:
        policy = described.get(topic, {}).get("cleanup.policy", "delete")
        if "delete" in {p.strip() for p in policy.split(",")}:
            continue
        altered = True
        log.info("changelog %s: cleanup.policy %s -> compact,delete with unlimited retention", topic, policy)
        admin.set_topic_configs(
            topic,
            {"cleanup.policy": "compact,delete", "retention.ms": "-1", "retention.bytes": "-1"},
            timeout_s,
        )
    return altered


def _cut(
    store: str,
    topic: str,
    partition: int,
    start: int,
    snapshot: SnapshotManifest | None,
    problem: str | None,
    standbys: StandbyHolders,
    subtopology: int,
) -> ChangelogCut:
    def keep(reason: str) -> ChangelogCut:
        sid, offset = (snapshot.snapshot_id, snapshot.offset) if snapshot is not None else (None, None)
        return ChangelogCut(store, topic, partition, start, None, sid, offset, reason)

    if snapshot is None:
        return keep(problem or "no published snapshot")
    target = snapshot.offset + 1
    reason = f"snapshot {snapshot.snapshot_id} covers offsets below {target}"
    lowest, blocked = standbys.bound(TaskId(subtopology, partition), topic, partition)
    if blocked is not None:
        return keep(blocked)
    if lowest is not None and lowest < target:
        target, reason = lowest, f"a standby still needs offset {lowest} (snapshot at {snapshot.offset})"
    if target <= start:
        return keep(f"the log already starts at {start}; {reason}")
    return ChangelogCut(store, topic, partition, start, target, snapshot.snapshot_id, snapshot.offset, reason)


def _usable(
    catalog: SnapshotCatalog, manifests: list[SnapshotManifest]
) -> tuple[SnapshotManifest | None, str | None]:
    """The newest snapshot whose SST file reads back with its manifest's size and sha256."""
    problems = []
    download = Path(tempfile.mkdtemp(prefix="ps-truncate-"))
    try:
        for manifest in sorted(manifests, key=lambda m: (m.offset, m.created_at_ms), reverse=True):
            if manifest.sst_file is None or manifest.record_count == 0:
                return manifest, None
            try:
                sst = catalog.fetch_sst(manifest, download / "data.sst")
            except OSError as exc:
                problems.append(f"{manifest.snapshot_id}: {exc}")
                continue
            size, checksum = sst.stat().st_size, file_checksum(sst)
            sst.unlink()
            if checksum == manifest.checksum and (not manifest.size_bytes or size == manifest.size_bytes):
                return manifest, None
            problems.append(f"{manifest.snapshot_id}: its SST file does not match its manifest")
    finally:
        shutil.rmtree(download, ignore_errors=True)
    return None, "no usable snapshot (" + "; ".join(problems) + ")"

