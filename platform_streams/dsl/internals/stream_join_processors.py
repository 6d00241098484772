"""Processors of the windowed KStream-KStream join (Kafka Streams' ``KStreamJoinWindow`` and
``KStreamKStreamJoin`` with the KIP-633 "spurious result fix").

Each side's records are written to that side's window store (duplicates retained) and
looked up in the other side's store within the join window: a left record at t joins
right records in ``[t - before, t + after]`` (a right record at t joins left records in
``[t - after, t + before]``). Every match is emitted at once, stamped with the larger of
the two timestamps.

Left/outer joins do not emit ``joiner(value, None)`` when a record finds no match (it
may still find one): the record waits in the *outer-join store*, shared by both sides,
and is emitted once its window has closed in stream time (``t + after + grace``
for a left record, ``t + before + grace`` for a right one), unless a match arrived
meanwhile (the match deletes it). A record already behind stream time past its window
(out of order) is emitted at once. Both sides share one stream time per task
(Kafka Streams' ``TimeTracker``): the largest timestamp seen by either side.

The outer-join store is a bytes key-value store, ordered like Kafka Streams':
``timestamp (8) + side (1: left, 0: right) + key bytes -> list of values``, so emission
is a scan from its head that stops once both sides' windows are still open.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.skipped_records import skip_record
from platform_streams.processor.node import NodeProcessor
from platform_streams.processor.record import Headers
from platform_streams.processor.task_id import TaskId
from platform_streams.state.keys import MAX_TIME
from platform_streams.state.timestamped_builders import resolve_serde

if TYPE_CHECKING:
    from platform_streams.processor.context import NodeContext
    from platform_streams.serde.base import Serde
    from platform_streams.state.api import KeyValueStore
    from platform_streams.state.timestamped_window_store import DslWindowStore

__all__ = [
    "JoinSideParams",
    "JoinWindowProcessor",
    "SelfJoinParams",
    "StreamJoinProcessor",
    "StreamSelfJoinProcessor",
    "TimeTrackers",
]

log = logging.getLogger(__name__)

_TS = struct.Struct(">q")
_LEN = struct.Struct(">i")
ValueJoinerWithKey = Callable[[Any, Any, Any], Any]


class JoinWindowProcessor(NodeProcessor):
    """Kafka Streams' ``KStreamJoinWindow``: remember each record in this side's window store."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def init(self, context: NodeContext) -> None:
        super().init(context)
        self.store: DslWindowStore = context.get_state_store(self.store_name)

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        # forwarded first, stored after (as Kafka's): a self-join below must not find the
        # record itself in the store it shares with this node
        self.forward(key, value, timestamp, headers)
        if key is not None and value is not None:
            self.store.put(key, value, timestamp)


@dataclass
class TimeTracker:
    """Stream time shared by both join sides of one task, and the earliest pending outer record."""

    stream_time: int = -1
    #: lower bound of the earliest timestamp in the outer-join store; 0 = unknown (scan once)
    min_time: int = 0
    initialised: bool = False
    #: the wall clock before which the outer-join store is not scanned again (the emit throttle)
    next_time_to_emit: int = 0


@dataclass
class TimeTrackers:
    """One :class:`TimeTracker` per task, shared by the two join processors of that task."""

    trackers: dict[TaskId, TimeTracker] = field(default_factory=dict)

    def get(self, task_id: TaskId) -> TimeTracker:
        tracker = self.trackers.get(task_id)
        if tracker is None:
            tracker = self.trackers[task_id] = TimeTracker()
        return tracker

    def remove(self, task_id: TaskId) -> None:
        self.trackers.pop(task_id, None)


@dataclass(frozen=True)
class JoinSideParams:
    """One side's join processor, as built: which stores, which window bounds, which joiner."""

    other_store: str
    #: the other side's records this side's record at t joins: ``[t - before, t + after]``
    before_ms: int
    after_ms: int
    grace_ms: int
    #: the JoinWindows' own bounds (left records wait ``after``, right ones ``before``)
    windows_before_ms: int
    windows_after_ms: int
    is_left: bool
    outer: bool
    #: ``(key, this value, other value) -> result``
    joiner: ValueJoinerWithKey
    outer_store: str | None
    trackers: TimeTrackers
    key_serde: Serde | None
    left_value_serde: Serde | None
    right_value_serde: Serde | None


class _OuterJoinStore:
    """Typed access to the shared outer-join store (see module docs)."""

    def __init__(self, store: KeyValueStore[bytes, bytes], key: Serde, left: Serde, right: Serde) -> None:
        self.store = store
        self.key_serde = key
        self.value_serdes = {True: left, False: right}

    @staticmethod
    def binary(timestamp: int, is_left: bool, raw_key: bytes) -> bytes:
        return _TS.pack(timestamp) + (b"\x01" if is_left else b"\x00") + raw_key

    def first_time(self) -> int:
        for binary, _ in self.store.all():
            first: int = _TS.unpack_from(binary, 0)[0]
            return first
        return MAX_TIME

    def add(self, timestamp: int, is_left: bool, raw_key: bytes, value: Any) -> None:
        binary = self.binary(timestamp, is_left, raw_key)
        raw_value = self.value_serdes[is_left].serialize(value) or b""
        existing = self.store.get(binary) or b""
        self.store.put(binary, existing + _LEN.pack(len(raw_value)) + raw_value)

    def delete(self, timestamp: int, is_left: bool, raw_key: bytes) -> None:
        self.store.put(self.binary(timestamp, is_left, raw_key), None)

    def values(self, is_left: bool, raw: bytes) -> list[Any]:
        deserialize = self.value_serdes[is_left].deserialize
        out = []
        pos = 0
        while pos < len(raw):
            size: int = _LEN.unpack_from(raw, pos)[0]
            pos += _LEN.size
            out.append(deserialize(raw[pos : pos + size]))
            pos += size
        return out


class StreamJoinProcessor(NodeProcessor):
    """One side of the join: look up the other side's window store, emit matches, park unmatched."""

    #: scan the outer-join store at most once per this many ms of wall clock (Kafka's internal
    #: ``__emit.interval.ms.kstreams.outer.join.spurious.results.fix__``); 0: at every record
    emit_interval_ms = 0

    def __init__(self, params: JoinSideParams) -> None:
        self.p = params
        self.dropped_records = 0

    def init(self, context: NodeContext) -> None:
        super().init(context)
        p = self.p
        self.other: DslWindowStore = context.get_state_store(p.other_store)
        self.tracker = p.trackers.get(context.task_id)
        self.outer_store: _OuterJoinStore | None = None
        if p.outer_store is not None:
            config = context.config
            self.outer_store = _OuterJoinStore(
                context.get_state_store(p.outer_store),
                resolve_serde(p.key_serde, config, "key"),
                resolve_serde(p.left_value_serde, config, "value"),
                resolve_serde(p.right_value_serde, config, "value"),
            )
            if not self.tracker.initialised:
                self.tracker.min_time = self.outer_store.first_time()
                self.tracker.initialised = True
            self.emit_interval_ms = config.emit_interval_ms_kstreams_outer_join_spurious_results_fix

    def close(self) -> None:
        self.p.trackers.remove(self.context.task_id)

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        p = self.p
        tracker = self.tracker
        if timestamp > tracker.stream_time:
            tracker.stream_time = timestamp
        if p.outer and key is None and value is not None:
            self.forward(key, p.joiner(key, value, None), timestamp, headers)  # KIP-962
            return
        if key is None or value is None:
            self.dropped_records += 1
            skip_record(self.context, "null key or value")
            return
        outer_store = self.outer_store
        if outer_store is not None and timestamp == tracker.stream_time:
            self._emit_non_joined(headers)
        time_from = max(0, timestamp - p.before_ms)
        time_to = max(0, timestamp + p.after_ms)
        matches = list(self.other.fetch_between(key, time_from, time_to))
        if matches:
            raw_key = (outer_store.key_serde.serialize(key) or b"") if outer_store is not None else b""
            for other_ts, other_value in matches:
                if outer_store is not None:
                    outer_store.delete(other_ts, not p.is_left, raw_key)
                self.forward(key, p.joiner(key, value, other_value), max(timestamp, other_ts), headers)
            return
        if not p.outer:
            return
        if outer_store is None or time_to < tracker.stream_time:
            self.forward(key, p.joiner(key, value, None), timestamp, headers)
            return
        if timestamp < tracker.min_time:
            tracker.min_time = timestamp
        outer_store.add(timestamp, p.is_left, outer_store.key_serde.serialize(key) or b"", value)

    def _emit_non_joined(self, headers: Headers) -> None:
        """Emit (and forget) every parked record whose join window has closed."""
        p = self.p
        tracker = self.tracker
        interval = self.emit_interval_ms
        # an empty store (min_time MAX_TIME) still goes on to the throttle in Kafka, where this
        # sum is a long that wraps negative: its scan uses up the interval
        if tracker.min_time + p.after_ms + p.grace_ms >= tracker.stream_time and not (
            interval and tracker.min_time == MAX_TIME and p.after_ms + p.grace_ms > 0
        ):
            return
        if interval:
            # Kafka's throttle: the next scan is due an interval after *now* (not after when
            # this one was due), so a clock jump does not open it for every record
            now = self.context.current_system_time_ms()
            if now < tracker.next_time_to_emit:
                return
            tracker.next_time_to_emit = now + interval
        assert self.outer_store is not None
        outer = self.outer_store
        tracker.min_time = MAX_TIME
        left_open = right_open = False
        for binary, raw in outer.store.all():
            if left_open and right_open:
                break
            timestamp: int = _TS.unpack_from(binary, 0)[0]
            is_left = binary[_TS.size] == 1
            tracker.min_time = timestamp
            lookback = p.windows_after_ms if is_left else p.windows_before_ms
            if timestamp + lookback + p.grace_ms >= tracker.stream_time:
                if is_left:
                    left_open = True
                else:
                    right_open = True
                continue
            key = outer.key_serde.deserialize(binary[_TS.size + 1 :])
            for value in outer.values(is_left, raw):
                # joiner(key, this, other) of *this* processor: put the parked value on its side
                this_value, other_value = (value, None) if is_left == p.is_left else (None, value)
                self.forward(key, p.joiner(key, this_value, other_value), timestamp, headers)
            outer.store.put(binary, None)


@dataclass(frozen=True)
class SelfJoinParams:
    """The self-join of one stream (Kafka's ``KStreamKStreamSelfJoin``), as built."""

    store: str
    before_ms: int
    after_ms: int
    #: window size + grace: records older than stream time minus this are not joined with themselves
    retention_ms: int
    #: ``(key, value, other value) -> result``
    joiner: ValueJoinerWithKey


class StreamSelfJoinProcessor(NodeProcessor):
    """Kafka's ``KStreamKStreamSelfJoin``: an inner join of a stream with itself over the one
    window store its ``KSTREAM-WINDOWED`` parent writes (after forwarding, so the current
    record is not in it yet). Emits exactly what the two-store inner join emits, in the same
    order: the record with earlier ones as the left side, then earlier ones with the record as
    the right side, the record with itself placed where timestamp order puts it."""

    def __init__(self, params: SelfJoinParams) -> None:
        self.p = params
        self.stream_time = -1

    def init(self, context: NodeContext) -> None:
        super().init(context)
        self.store: DslWindowStore = context.get_state_store(self.p.store)

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        if key is None or value is None:
            skip_record(self.context, "null key or value")
            return
        p = self.p
        joiner = p.joiner
        self_value = joiner(key, value, value)
        if timestamp > self.stream_time:
            self.stream_time = timestamp
        emit_self = timestamp > self.stream_time - p.retention_ms + 1
        for other_ts, other in self.store.fetch_between(
            key, max(0, timestamp - p.before_ms), max(0, timestamp + p.after_ms)
        ):
            self.forward(key, joiner(key, value, other), max(timestamp, other_ts), headers)
        emitted_self = False
        for other_ts, other in self.store.fetch_between(
            key, max(0, timestamp - p.after_ms), max(0, timestamp + p.before_ms)
        ):
            max_ts = max(timestamp, other_ts)
            if timestamp < max_ts and not emitted_self and emit_self:
                emitted_self = True
                self.forward(key, self_value, timestamp, headers)
            self.forward(key, joiner(key, other, value), max_ts, headers)
        if not emitted_self and emit_self:
            self.forward(key, self_value, timestamp, headers)
