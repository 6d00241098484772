"""Structured results of the platform operations, for Dagster (``to_dict``) and people (``summary``).

Every operation returns one of these instead of printing: a Dagster op logs
``result.to_dict()`` as metadata, the CLI prints ``result.summary()`` (or the JSON).
They say what was done -- or, under ``dry_run``, what would be -- per topic and
partition, and carry the warnings an operator must read (approximations, things left for
them to do). A refused operation raises :class:`OperationRefusedError`, whose ``result``
still describes what was found.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from platform_streams.errors import StreamsError

__all__ = [
    "InternalTopicStatus",
    "LocalStateAction",
    "OperationRefusedError",
    "OpsResult",
    "PartitionOffsetChange",
    "RefusedTopic",
    "ResetResult",
    "TopicIssue",
    "TopicsResult",
]


def _plain(value: Any) -> Any:
    """JSON-ready copy: dataclasses -> dicts, tuples -> lists, tuple keys -> "topic-partition"."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {(f"{k[0]}-{k[1]}" if isinstance(k, tuple) else str(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass
class InternalTopicStatus:
    """One internal topic of the application and what happened to it.

    ``status``: ``missing``/``exists`` (plan, validate), ``created``/``would_create``
    (create), ``deleted``/``would_delete`` (delete, reset). ``kind`` ``coordination``: a
    topic the runtime creates at start-up (``<application_id>-control``/``-metadata``);
    ``source``/``sink``/``global-source``/``dead-letter``: a user topic (``topics create-io``).
    """

    topic: str
    kind: Literal[
        "repartition", "changelog", "coordination", "orphan", "source", "sink", "global-source", "dead-letter"
    ]
    status: str
    partitions: int | None = None
    config: dict[str, str] = field(default_factory=dict)
    actual_partitions: int | None = None


@dataclass
class TopicIssue:
    """A difference between an internal topic and what the topology needs (validate)."""

    topic: str
    problem: Literal["missing", "partitions", "config"]
    expected: str
    actual: str | None = None

    def describe(self) -> str:
        if self.problem == "missing":
            return f"{self.topic}: missing (needs {self.expected})"
        return f"{self.topic}: {self.problem} is {self.actual}, expected {self.expected}"


@dataclass
class RefusedTopic:
    """A topic an operation would not touch, and why (it does not belong to the application)."""

    topic: str
    reason: str


@dataclass
class PartitionOffsetChange:
    """A committed offset the reset sets: from ``current`` to ``target`` (None: unchanged).

    ``requested`` is what the scenario asked for before clamping into ``[earliest, end]``;
    ``method`` how the offset was found (``earliest``, ``log_end``, ``to_offset``,
    ``shift_by``, ``from_file``, ``list_offsets``, ``scan``, ``empty``).
    """

    topic: str
    partition: int
    current: int | None
    target: int | None
    earliest: int
    end: int
    requested: int | None
    clamped: Literal["earliest", "latest"] | None
    method: str
    note: str | None = None


@dataclass
class LocalStateAction:
    """The local state directory (``<state_dir>/<application_id>``) and what happened to it."""

    path: str
    existed: bool
    action: Literal["deleted", "would_delete", "absent", "kept"]


@dataclass
class OpsResult:
    """Fields every operation result has."""

    operation: str
    application_id: str
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """False when the operation found problems (validate) or was blocked."""
        return True

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable data (Dagster metadata, ``--json``)."""
        data: dict[str, Any] = _plain(self)
        data["ok"] = self.ok
        return data

    def summary(self) -> str:
        raise NotImplementedError

    def _header(self, what: str) -> list[str]:
        prefix = "DRY RUN - nothing was changed. " if self.dry_run else ""
        return [f"{prefix}{what} for application {self.application_id!r}"]

    def _footer(self) -> list[str]:
        return [f"WARNING: {w}" for w in self.warnings]


@dataclass
class TopicsResult(OpsResult):
    """Result of ``topics plan|create|validate|delete``."""

    topics: list[InternalTopicStatus] = field(default_factory=list)
    issues: list[TopicIssue] = field(default_factory=list)
    refused: list[RefusedTopic] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    """Existing topics named like this application's internal topics but not in its topology."""
    deleted_groups: list[str] = field(default_factory=list)
    """``delete``: the application's streams group, deleted with its topics (dry run: to be)."""

    @property
    def ok(self) -> bool:
        return not self.issues and not self.refused

    def summary(self) -> str:
        what = "input/output topics" if self.operation == "create-io" else "internal topics"
        lines = self._header(f"{what} ({self.operation})")
        for t in self.topics:
            size = "" if t.partitions is None else f" partitions={t.partitions}"
            config = "" if not t.config else " " + " ".join(f"{k}={v}" for k, v in sorted(t.config.items()))
            if t.kind == "coordination" and t.status in ("exists", "missing"):
                config += " (the application creates it at start-up)"
            lines.append(f"  {t.status:<12} {t.kind:<12} {t.topic}{size}{config}")
        if not self.topics:
            lines.append("  (no internal topics)")
        lines += [f"  ISSUE   {i.describe()}" for i in self.issues]
        lines += [f"  REFUSED {r.topic}: {r.reason}" for r in self.refused]
        if self.orphans:
            lines.append(f"  orphans (named like ours, not in the topology): {', '.join(self.orphans)}")
        for group in self.deleted_groups:
            lines.append(f"  {'would delete' if self.dry_run else 'deleted':<12} streams group {group}")
        if self.operation == "validate":
            lines.append("  OK: every internal topic matches the topology" if self.ok else "  NOT OK")
        return "\n".join(lines + self._footer())


@dataclass
class ResetResult(OpsResult):
    """Result of an application reset (see :func:`platform_streams.ops.reset_application`)."""

    group_state: str = "UNKNOWN"
    group_members: list[str] = field(default_factory=list)
    group_type: str = "consumer"
    """``"streams"`` when the application runs on a streams group (``group_protocol="streams"``)."""
    deleted_groups: list[str] = field(default_factory=list)
    """The application's streams group, deleted (or, dry run, to be deleted) by the reset."""
    scenario: str = "to-earliest"
    input_topics: list[str] = field(default_factory=list)
    offsets: list[PartitionOffsetChange] = field(default_factory=list)
    internal_topics: list[InternalTopicStatus] = field(default_factory=list)
    local_state: LocalStateAction | None = None
    worker_local_states: list[LocalStateAction] = field(default_factory=list)
    """``<state_dir>-w<i>/<application_id>`` of the worker processes of ``run --workers N`` here."""
    blocked: str | None = None
    """Dry run only: why a real run would refuse right now (e.g. the group is active)."""
    completed: bool = False
    deleted_subjects: list[str] = field(default_factory=list)
    """Schema Registry subjects of the deleted internal topics (``ResetOptions.schema_registry``)."""
    snapshot_stores: list[str] = field(default_factory=list)
    """Stores whose snapshots (``state_snapshot_location``) go with their deleted changelogs."""

    @property
    def ok(self) -> bool:
        return self.blocked is None

    def summary(self) -> str:
        lines = self._header(f"reset ({self.scenario})")
        lines.append(f"  {self.group_type} group {self.application_id!r}: {self.group_state}")
        if self.blocked:
            lines.append(f"  BLOCKED: {self.blocked}")
        lines.append(f"  input topics: {', '.join(self.input_topics) or '(none)'}")
        for c in self.offsets:
            current = "-" if c.current is None else str(c.current)
            target = "unchanged" if c.target is None else str(c.target)
            extra = f" [{c.method}]" + (f" ({c.note})" if c.note else "")
            lines.append(
                f"    {c.topic}-{c.partition}: {current} -> {target}  log [{c.earliest}, {c.end}]{extra}"
            )
        verb = "would delete" if self.dry_run else "deleted"
        topics = [t.topic for t in self.internal_topics if t.status in ("deleted", "would_delete")]
        lines.append(f"  internal topics {verb}: {', '.join(topics) or '(none exist)'}")
        if self.deleted_groups:
            groups = ", ".join(self.deleted_groups)
            lines.append(f"  streams group {verb}: {groups} (the offsets above are kept)")
        if self.snapshot_stores:
            lines.append(f"  state snapshots {verb} of stores: {', '.join(self.snapshot_stores)}")
        states = [self.local_state] if self.local_state is not None else []
        for state in [*states, *self.worker_local_states]:
            lines.append(f"  local state {state.path}: {state.action.replace('_', ' ')}")
        return "\n".join(lines + self._footer())


class OperationRefusedError(StreamsError):
    """An operation refused to act (foreign topics, an active application, no confirmation).

    ``result`` describes what was found; nothing was changed.
    """

    def __init__(self, message: str, result: OpsResult) -> None:
        self.result = result
        super().__init__(message)
