"""Offset scenarios of the application reset: what to reset input offsets to, and clamping.

This module is pure: it knows each partition's log start, log end and committed offset
(looked up by :mod:`platform_streams.ops.reset`) and computes the new committed offsets,
the way ``kafka-streams-application-reset`` does:

* ``to_earliest`` (the default), ``to_latest``, ``to_offset N``, ``shift_by N`` (from the
  committed offset; without one, from where the application would start: the source's
  ``offset_reset``, else earliest), ``to_datetime`` / ``by_duration`` (the first record at
  or after a time; the log end when there is none), ``from_file`` (a
  ``topic,partition,offset`` CSV plan; partitions it does not list keep their offset);
* every requested offset is clamped into ``[earliest, end]``, and the change records
  that it was, so nothing lands outside the log (some brokers would stall there silently).

The parsers accept the reset tool's formats: ``--to-datetime 2024-05-01T12:00:00.000``
(an ISO 8601 date-time; without a zone it is local time, as in Java) and ``--by-duration
PnDTnHnMnS`` (Java's ``Duration`` syntax: days at most, optional sign and fraction).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from platform_streams.errors import StreamsConfigError
from platform_streams.ops.results import PartitionOffsetChange

__all__ = [
    "OffsetScenario",
    "PartitionBounds",
    "compute_offset_changes",
    "parse_datetime_ms",
    "parse_duration",
    "parse_reset_plan",
]

TP = tuple[str, int]
ScenarioKind = Literal[
    "to_earliest", "to_latest", "to_offset", "shift_by", "to_datetime", "by_duration", "from_file"
]

_DURATION = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<days>[-+]?\d+)D)?"
    r"(?:T(?:(?P<hours>[-+]?\d+)H)?(?:(?P<minutes>[-+]?\d+)M)?"
    r"(?:(?P<seconds>[-+]?\d+)(?:[.,](?P<fraction>\d{1,9}))?S)?)?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class OffsetScenario:
    """Where input offsets go; build one with the class methods (``OffsetScenario.to_offset(5)``)."""

    kind: ScenarioKind = "to_earliest"
    value: int | None = None
    """``to_offset``: the offset; ``shift_by``: the shift; ``to_datetime``: epoch ms;
    ``by_duration``: the duration in ms (the target is *now* minus it)."""
    plan: Mapping[TP, int] = field(default_factory=dict)
    """``from_file``: ``{(topic, partition): offset}``."""
    source: str | None = None
    """What the user wrote (the date-time, duration or file), for messages."""

    @classmethod
    def to_earliest(cls) -> OffsetScenario:
        return cls("to_earliest")

    @classmethod
    def to_latest(cls) -> OffsetScenario:
        return cls("to_latest")

    @classmethod
    def to_offset(cls, offset: int) -> OffsetScenario:
        if offset < 0:
            raise StreamsConfigError(f"--to-offset must be >= 0, got {offset}")
        return cls("to_offset", offset)

    @classmethod
    def shift_by(cls, shift: int) -> OffsetScenario:
        return cls("shift_by", shift)

    @classmethod
    def to_datetime(cls, when: str | datetime) -> OffsetScenario:
        text = when if isinstance(when, str) else when.isoformat()
        return cls("to_datetime", parse_datetime_ms(when), source=text)

    @classmethod
    def by_duration(cls, duration: str | timedelta) -> OffsetScenario:
        delta = parse_duration(duration) if isinstance(duration, str) else duration
        if delta < timedelta(0):
            raise StreamsConfigError(f"--by-duration must not be negative, got {duration!r}")
        return cls("by_duration", int(delta / timedelta(milliseconds=1)), source=str(duration))

    @classmethod
    def from_file(cls, path: str | Path) -> OffsetScenario:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise StreamsConfigError(f"cannot read reset plan {str(path)!r}: {exc}") from exc
        return cls("from_file", plan=parse_reset_plan(text), source=str(path))

    @classmethod
    def from_plan(cls, plan: Mapping[TP, int]) -> OffsetScenario:
        bad = {tp: o for tp, o in plan.items() if o < 0}
        if bad:
            raise StreamsConfigError(f"reset plan offsets must be >= 0, got {bad}")
        return cls("from_file", plan=dict(plan), source="<plan>")

    @property
    def time_based(self) -> bool:
        return self.kind in ("to_datetime", "by_duration")

    def target_timestamp_ms(self, now_ms: int | None = None) -> int | None:
        """The time to look up (``by_duration`` is relative to ``now_ms``), None if not time-based."""
        if self.kind == "to_datetime":
            return self.value
        if self.kind == "by_duration":
            now = int(time.time() * 1000) if now_ms is None else now_ms
            return now - int(self.value or 0)
        return None

    def describe(self) -> str:
        """One phrase: ``to-offset 42``, ``by-duration PT1H``, ``from-file plan.csv``."""
        name = self.kind.replace("_", "-")
        if self.kind in ("to_offset", "shift_by"):
            return f"{name} {self.value}"
        if self.kind in ("to_datetime", "by_duration", "from_file"):
            return f"{name} {self.source}"
        return name


@dataclass(frozen=True)
class PartitionBounds:
    """What is known about one input partition before the reset."""

    earliest: int
    end: int
    committed: int | None = None
    start_policy: Literal["earliest", "latest"] = "earliest"
    """Where the application starts without a committed offset (the source's offset_reset)."""


@dataclass(frozen=True)
class TimeTarget:
    """A resolved time lookup (see :class:`platform_streams.kafka.positions.TimeLookup`)."""

    offset: int
    method: str


def compute_offset_changes(
    scenario: OffsetScenario,
    bounds: Mapping[TP, PartitionBounds],
    time_targets: Mapping[TP, TimeTarget] | None = None,
) -> list[PartitionOffsetChange]:
    """New committed offsets for every partition of ``bounds``, sorted by topic and partition.

    Time-based scenarios need ``time_targets`` for every partition (resolved against the
    broker beforehand). ``target`` None means "left unchanged" (``from_file`` only).
    """
    changes = []
    for tp in sorted(bounds):
        b = bounds[tp]
        requested, method, note = _requested(scenario, tp, b, time_targets)
        target, clamped = (None, None) if requested is None else _clamp(requested, b)
        if clamped is not None:
            limit = "log start" if clamped == "earliest" else "log end"
            note = _join(
                note, f"{requested} is outside the log [{b.earliest}, {b.end}]: clamped to the {limit}"
            )
        changes.append(
            PartitionOffsetChange(
                topic=tp[0],
                partition=tp[1],
                current=b.committed,
                target=target,
                earliest=b.earliest,
                end=b.end,
                requested=requested,
                clamped=clamped,
                method=method,
                note=note,
            )
        )
    return changes


def _requested(
    scenario: OffsetScenario, tp: TP, b: PartitionBounds, time_targets: Mapping[TP, TimeTarget] | None
) -> tuple[int | None, str, str | None]:
    """The unclamped offset the scenario asks for, the method, and a note."""
    kind = scenario.kind
    if kind == "to_earliest":
        return b.earliest, "earliest", None
    if kind == "to_latest":
        return b.end, "log_end", None
    if kind == "to_offset":
        return int(scenario.value or 0), "to_offset", None
    if kind == "shift_by":
        if b.committed is not None:
            return b.committed + int(scenario.value or 0), "shift_by", None
        base = b.earliest if b.start_policy == "earliest" else b.end
        why = f"no committed offset: shifted from the {b.start_policy} offset {base} (where the app starts)"
        return base + int(scenario.value or 0), "shift_by", why
    if kind == "from_file":
        if tp in scenario.plan:
            return scenario.plan[tp], "from_file", None
        return None, "from_file", "not in the reset plan: left unchanged"
    found = (time_targets or {}).get(tp)
    if found is None:
        raise ValueError(f"{kind} needs a resolved time target for {tp[0]}-{tp[1]}")
    at_end = "no record at or after the time: reset to the log end"
    return found.offset, found.method, None if found.offset < b.end else at_end


def _clamp(offset: int, b: PartitionBounds) -> tuple[int, Literal["earliest", "latest"] | None]:
    """Java's checkOffsetRange: below the log start -> start, at or past the end -> end."""
    if offset < b.earliest:
        return b.earliest, "earliest"
    if offset > b.end:
        return b.end, "latest"
    return offset, None


def _join(first: str | None, second: str) -> str:
    return second if first is None else f"{first}; {second}"


def parse_duration(text: str) -> timedelta:
    """Parse Java's ``Duration`` syntax: ``PT15M``, ``P1DT2H``, ``-PT1.5S`` (days at most)."""
    match = _DURATION.fullmatch(text.strip())
    time_parts = [match.group(g) for g in ("hours", "minutes", "seconds")] if match else []
    if match is None or (match.group("days") is None and not any(time_parts)):
        raise StreamsConfigError(
            f"invalid duration {text!r}: expected ISO 8601 like PnDTnHnMn.nS (e.g. PT1H30M)"
        )
    if "T" in text.upper() and not any(time_parts):
        raise StreamsConfigError(
            f"invalid duration {text!r}: 'T' must be followed by hours, minutes or seconds"
        )
    seconds_text = match.group("seconds") or "0"
    micros = int((match.group("fraction") or "").ljust(6, "0")[:6])
    delta = timedelta(
        days=int(match.group("days") or 0),
        hours=int(match.group("hours") or 0),
        minutes=int(match.group("minutes") or 0),
        seconds=int(seconds_text),
        # The fraction carries the sign of the seconds ("PT-0.5S" is minus half a second).
        microseconds=-micros if seconds_text.startswith("-") else micros,
    )
    return -delta if match.group("sign") == "-" else delta


def parse_datetime_ms(when: str | datetime) -> int:
    """Epoch ms of an ISO 8601 date-time (``2024-05-01T12:00:00.000``, ``...Z``, ``...+02:00``).

    Without a zone the time is local, as in Kafka's tools.
    """
    if isinstance(when, str):
        text = when.strip()
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError as exc:
            raise StreamsConfigError(
                f"invalid date-time {when!r}: expected ISO 8601 like 2024-05-01T12:00:00.000[Z|+02:00]"
            ) from exc
    else:
        parsed = when
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()  # local time zone, like Java's default
    return int(parsed.timestamp() * 1000)


def parse_reset_plan(text: str) -> dict[TP, int]:
    """Parse ``topic,partition,offset`` lines; blank lines and ``#`` comments are skipped."""
    plan: dict[TP, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[0]:
            raise StreamsConfigError(
                f"reset plan line {number}: expected 'topic,partition,offset', got {raw!r}"
            )
        try:
            partition, offset = int(parts[1]), int(parts[2])
        except ValueError:
            raise StreamsConfigError(
                f"reset plan line {number}: partition and offset must be integers: {raw!r}"
            ) from None
        if partition < 0 or offset < 0:
            raise StreamsConfigError(f"reset plan line {number}: partition and offset must be >= 0: {raw!r}")
        key = (parts[0], partition)
        if key in plan:
            raise StreamsConfigError(f"reset plan line {number}: {parts[0]}-{partition} is listed twice")
        plan[key] = offset
    if not plan:
        raise StreamsConfigError("the reset plan is empty")
    return plan
