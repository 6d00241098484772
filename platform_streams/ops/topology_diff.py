"""The deploy gate's judgement: does a candidate topology still fit the deployed state?

Pure: it compares two manifests (:func:`platform_streams.topology.manifest.topology_manifest`),
the one the running application recorded and the candidate's, and classifies the change:

* **compatible** -- every store keeps its changelog, kind and serdes, and every repartition
  topic its name, serdes and partition count (new operators, new sinks, changed logic);
* **needs_reset** -- the change is safe to run, but a named store will not hold what the
  deployed one saw: a new store over input the application already consumed, or a store
  whose changelog is only now turned on. Rebuild it with the reset job if it must;
* **incompatible** -- state would be orphaned or misread: a store's changelog is no longer
  read (a renamed or removed store, typically a generated name shifted by an operator
  added upstream), a changelog's kind or serde changed, a repartition topic with records
  in flight is dropped or changes format, or the partitioning under a kept store changes
  (co-partitioning with its state broken).

Every finding names the store or topic (with the physical topic name) and the fix: name
the operator (``Materialized.as_``/``Grouped.as_``/``Named``) so the old name is kept, or
run the reset job to rebuild the state from the input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["Change", "Finding", "TopologyDiff", "diff_manifests", "diff_unrecorded"]

_GENERATED = re.compile(r"-\d{10}$")
_RESET_FIX = "run the reset job (platform-streams reset, or the chart's reset.enabled=true) to rebuild it"


class Change(StrEnum):
    """The classes of a change, least to most severe."""

    COMPATIBLE = "compatible"
    NEEDS_RESET = "needs_reset"
    INCOMPATIBLE = "incompatible"

    @property
    def rank(self) -> int:
        return list(Change).index(self)


@dataclass(frozen=True)
class Finding:
    """One store or topic the change affects."""

    change: Change
    kind: str
    subject: str
    topic: str | None
    problem: str
    fix: str

    def line(self) -> str:
        where = f" ({self.topic})" if self.topic and self.topic != self.subject else ""
        return f"{self.change.value}: {self.subject}{where}: {self.problem}; fix: {self.fix}"

    def to_json(self) -> dict[str, Any]:
        return {
            "change": self.change.value,
            "kind": self.kind,
            "subject": self.subject,
            "topic": self.topic,
            "problem": self.problem,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class TopologyDiff:
    """The verdict and what it rests on."""

    deployed_fingerprint: str | None
    candidate_fingerprint: str
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    changed: bool = False

    @property
    def change(self) -> Change:
        return max((f.change for f in self.findings), key=lambda c: c.rank, default=Change.COMPATIBLE)

    def subjects(self, change: Change) -> list[str]:
        return [f.subject for f in self.findings if f.change is change]

    def summary(self) -> str:
        if self.deployed_fingerprint is None:
            return f"compatible: nothing deployed to compare with (candidate {self.candidate_fingerprint})"
        if not self.changed:
            return f"compatible: the topology is unchanged ({self.candidate_fingerprint})"
        head = f"{self.change.value}: topology {self.deployed_fingerprint} -> {self.candidate_fingerprint}"
        named = self.subjects(Change.INCOMPATIBLE) or self.subjects(Change.NEEDS_RESET)
        return f"{head}; affected: {', '.join(named)}" if named else head

    def lines(self) -> list[str]:
        return [self.summary(), *(f"  {f.line()}" for f in self.findings)]

    def to_json(self) -> dict[str, Any]:
        return {
            "change": self.change.value,
            "deployed_fingerprint": self.deployed_fingerprint,
            "candidate_fingerprint": self.candidate_fingerprint,
            "changed": self.changed,
            "summary": self.summary(),
            "findings": [f.to_json() for f in self.findings],
        }


def _physical(application_id: str, topic: str | None, sources: set[str]) -> str | None:
    if topic is None or topic in sources or not topic.endswith(("-changelog", "-repartition")):
        return topic
    return f"{application_id}-{topic}"


def _same_shape(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in ("kind", "key_serde", "value_serde"))


def _name_fix(old: str, new: str | None, how: str, keep: str = "the state") -> str:
    if new is None:
        return f"if it is meant to go, allow the change; else keep an operator with {how}('{old}')"
    generated = (
        " (its name was generated: an operator added upstream renumbered it)"
        if _GENERATED.search(old)
        else ""
    )
    named = f"name the operator that now makes '{new}' with {how}('{old}') to keep {keep}"
    return f"{named}{generated}, or {_RESET_FIX}"


class _Differ:
    def __init__(
        self, deployed: Mapping[str, Any], candidate: Mapping[str, Any], application_id: str
    ) -> None:
        self.old, self.new, self.app = deployed, candidate, application_id
        self.sources = set(deployed.get("source_topics", [])) | set(candidate.get("source_topics", []))
        self.findings: list[Finding] = []
        #: deployed repartition topic -> the candidate's one of the same shape replacing it
        self.renamed: dict[str, str] = {}

    def add(self, change: Change, kind: str, subject: str, topic: str | None, problem: str, fix: str) -> None:
        self.findings.append(
            Finding(change, kind, subject, _physical(self.app, topic, self.sources), problem, fix)
        )

    def stores(self) -> None:
        old: Mapping[str, Any] = self.old.get("stores", {})
        new: Mapping[str, Any] = self.new.get("stores", {})
        added = [n for n in new if n not in old]
        for name, was in old.items():
            now = new.get(name)
            if now is None:
                twin = next((n for n in added if _same_shape(new[n], was)), None)
                if twin is not None:
                    added.remove(twin)
                self._orphaned_store(name, was, twin)
            else:
                self._kept_store(name, was, now)
        consumed = set(self.old.get("source_topics", [])) | set(self.old.get("repartition_topics", {}))
        for name in added:
            inputs = set(new[name].get("inputs", []))
            if inputs and inputs <= consumed and not new[name]["kind"].startswith("global"):
                self.add(
                    Change.NEEDS_RESET,
                    "new_store",
                    name,
                    new[name].get("changelog"),
                    f"a new store over input the application already consumed ({', '.join(sorted(inputs))}): "
                    "it starts empty and holds only what arrives after the deploy",
                    f"if it must hold the history, {_RESET_FIX}",
                )

    def _orphaned_store(self, name: str, was: Mapping[str, Any], twin: str | None) -> None:
        changelog = was.get("changelog")
        if changelog is None and not str(was.get("kind", "")).startswith("global"):
            problem = "the store is gone from the candidate (its local-only state is dropped)"
        elif changelog is None:
            problem = "the global store is gone from the candidate"
        else:
            problem = "the candidate no longer reads this store's changelog: its state would be orphaned"
        if twin is not None:
            problem += f" and '{twin}' starts empty in its place"
        change = Change.INCOMPATIBLE if changelog is not None or twin is not None else Change.COMPATIBLE
        self.add(
            change, "store_orphaned", name, changelog, problem, _name_fix(name, twin, "Materialized.as_")
        )

    def _kept_store(self, name: str, was: Mapping[str, Any], now: Mapping[str, Any]) -> None:
        for key, what in (("kind", "store kind"), ("key_serde", "key serde"), ("value_serde", "value serde")):
            if was.get(key) != now.get(key):
                self.add(
                    Change.INCOMPATIBLE,
                    "changelog_format",
                    name,
                    was.get("changelog") or now.get("changelog"),
                    f"the changelog's format changed: {what} {was.get(key)} -> {now.get(key)} "
                    "(restoring the old records with the new one misreads them)",
                    f"keep the {what}, or give the new store another name and {_RESET_FIX}",
                )
        old_log, new_log = was.get("changelog"), now.get("changelog")
        if old_log is not None and new_log is not None and old_log != new_log:
            self.add(
                Change.INCOMPATIBLE,
                "store_orphaned",
                name,
                old_log,
                f"the changelog moves to {_physical(self.app, new_log, self.sources)}: the state is orphaned",
                f"keep the changelog topic, or {_RESET_FIX}",
            )
        elif old_log is None and new_log is not None:
            self.add(
                Change.NEEDS_RESET,
                "changelog_enabled",
                name,
                new_log,
                "the changelog is turned on now and starts empty: a restore elsewhere loses the state before",
                f"if the state must survive a move, {_RESET_FIX}",
            )

    def repartitions(self) -> None:
        old: Mapping[str, Any] = self.old.get("repartition_topics", {})
        new: Mapping[str, Any] = self.new.get("repartition_topics", {})
        added = [n for n in new if n not in old]
        kept_stores = [s for s in self.new.get("stores", {}) if s in self.old.get("stores", {})]
        for topic, was in old.items():
            now = new.get(topic)
            if now is None:
                twin = next((n for n in added if _same_shape(new[n], was)), None)
                if twin is not None:
                    added.remove(twin)
                    self.renamed[topic] = twin
                base = topic.removesuffix("-repartition")
                self.add(
                    Change.INCOMPATIBLE,
                    "repartition_orphaned",
                    topic,
                    topic,
                    "the candidate no longer reads this repartition topic: records written to it and not yet "
                    "processed would be lost" + (f" ('{twin}' replaces it)" if twin else ""),
                    _name_fix(
                        base,
                        twin and twin.removesuffix("-repartition"),
                        "Grouped.as_/Repartitioned.as_",
                        "its records",
                    ),
                )
                continue
            for key, what in (("key_serde", "key serde"), ("value_serde", "value serde")):
                if was.get(key) != now.get(key):
                    self.add(
                        Change.INCOMPATIBLE,
                        "repartition_format",
                        topic,
                        topic,
                        f"{what} {was.get(key)} -> {now.get(key)}: records in flight have the old format",
                        f"keep the {what}, or {_RESET_FIX}",
                    )
            if was.get("num_partitions") != now.get("num_partitions"):
                fed = [s for s in kept_stores if topic in self.new["stores"][s].get("inputs", [])]
                if fed:
                    self.add(
                        Change.INCOMPATIBLE,
                        "copartitioning",
                        topic,
                        topic,
                        f"partitions {was.get('num_partitions') or 'auto'} -> "
                        f"{now.get('num_partitions') or 'auto'}: keys move to other tasks than their state "
                        f"in {', '.join(fed)} (co-partitioning broken)",
                        f"keep the partition count, or {_RESET_FIX}",
                    )

    def copartitioning(self) -> None:
        """A kept store's state is partitioned like the input it was built from: a store now fed
        from another topic (not the same repartition under a new name) finds keys in other tasks."""
        old: Mapping[str, Any] = self.old.get("stores", {})
        for name, now in self.new.get("stores", {}).items():
            was = old.get(name)
            if was is None or str(now.get("kind", "")).startswith("global"):
                continue
            before, after = set(was.get("inputs", [])), set(now.get("inputs", []))
            gone = {t for t in before - after if self.renamed.get(t) not in after}
            if gone and after - before - set(self.renamed.values()):
                self.add(
                    Change.INCOMPATIBLE,
                    "copartitioning",
                    name,
                    now.get("changelog"),
                    f"its input changes from {', '.join(sorted(gone))} to "
                    f"{', '.join(sorted(after - before))}: the state was partitioned by the old input's "
                    "keys (co-partitioning with the state broken)",
                    f"keep the store's input, or {_RESET_FIX}",
                )


def diff_manifests(
    deployed: Mapping[str, Any] | None, candidate: Mapping[str, Any], application_id: str
) -> TopologyDiff:
    """Classify replacing ``deployed`` (None: nothing deployed) by ``candidate``."""
    new_fp = str(candidate["fingerprint"])
    if deployed is None:
        return TopologyDiff(None, new_fp)
    old_fp = str(deployed.get("fingerprint"))
    if old_fp == new_fp:
        return TopologyDiff(old_fp, new_fp)
    differ = _Differ(deployed, candidate, application_id)
    differ.repartitions()
    differ.stores()
    differ.copartitioning()
    findings = sorted(differ.findings, key=lambda f: (-f.change.rank, f.subject, f.kind))
    return TopologyDiff(old_fp, new_fp, tuple(findings), changed=True)


def diff_unrecorded(
    changelogs: Iterable[str], candidate: Mapping[str, Any], application_id: str
) -> TopologyDiff:
    """No manifest was recorded (the clients predate it), yet the application's changelog
    topics ``changelogs`` (physical names) hold state on the broker: any the candidate does
    not write would be orphaned."""
    sources = set(candidate.get("source_topics", []))
    written = {
        _physical(application_id, spec.get("changelog"), sources)
        for spec in candidate.get("stores", {}).values()
    }
    prefix = f"{application_id}-"
    findings = [
        Finding(
            Change.INCOMPATIBLE,
            "store_orphaned",
            topic.removeprefix(prefix).removesuffix("-changelog"),
            topic,
            "this changelog holds state on the broker, no topology was recorded, and the candidate "
            "has no store writing it: its state would be orphaned",
            "name the candidate's store after it with Materialized.as_, or " + _RESET_FIX,
        )
        for topic in sorted(set(changelogs) - written)
    ]
    return TopologyDiff("unrecorded", str(candidate["fingerprint"]), tuple(findings), changed=True)
