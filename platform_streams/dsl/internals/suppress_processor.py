"""The suppress operator: ``KTable.suppress(Suppressed)`` (Kafka Streams' ``KTableSuppressProcessor``).

Per record (a table update ``Change`` at timestamp t):

1. the operator's stream time becomes ``max(stream time, t)``;
2. the update is buffered under its *buffer time* -- the window's end (``end + 1`` for
   sliding windows) for final results, ``t`` for a time limit -- replacing an earlier
   buffered update of the same key in place;
3. every entry with ``buffer time <= stream time - wait`` is emitted, oldest first
   (``wait`` = the window's grace [+ gap] for final results, the time limit otherwise),
   stamped with the timestamp and headers of the update it holds;
4. if the buffer is over ``max_records``/``max_bytes``: emit the oldest entries early,
   or fail the task (``shut_down_when_full``).

Final results drop tombstones (a merged-away session has no final result); a time
limit forwards them. Sliding windows close one millisecond later than in Kafka Streams
(``end + 1``): their end is inclusive, and Kafka Streams' ``end`` lets a record at exactly
``end + grace`` still update a window already emitted as final. Sessions keep Kafka
Streams' rule (``end + gap + grace <= stream time``); as there, a later record bridging a
"final" session with a newer one still merges them (a second result for the merged session).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.change import Change
from platform_streams.dsl.internals.suppress_buffer import (
    BufferedRecord,
    SuppressBuffer,
    encode_entry,
    kafka_entry_size,
)
from platform_streams.dsl.internals.table_processors import TableOp, ValueGetterSupplier
from platform_streams.dsl.internals.window_close import WallClockClose, punctuation_interval_ms
from platform_streams.dsl.internals.windowed_table import WindowCloseRule, WindowedTableOp
from platform_streams.errors import StreamsError
from platform_streams.processor.api import PunctuationType
from platform_streams.processor.node import NodeProcessor
from platform_streams.processor.record import Headers
from platform_streams.state.timestamped import ValueAndTimestamp
from platform_streams.state.timestamped_builders import resolve_serde

if TYPE_CHECKING:
    from platform_streams.dsl.suppress import Suppressed
    from platform_streams.processor.context import NodeContext
    from platform_streams.serde.base import Serde
    from platform_streams.state.timestamped_kv_store import ValueGetter

__all__ = ["SuppressOp", "SuppressProcessor", "find_close_rule"]

log = logging.getLogger(__name__)


def find_close_rule(op: Any) -> WindowCloseRule | None:
    """The close rule of the windowed aggregation upstream of ``op`` (the largest wait if several)."""
    if isinstance(op, WindowedTableOp):
        return op.close_rule
    parents = [p for p in (getattr(op, "parent", None), *getattr(op, "parents", ())) if p is not None]
    rules = [rule for p in parents if (rule := find_close_rule(p)) is not None]
    if not rules or len(rules) < len(parents):
        return None
    return max(rules, key=lambda rule: rule.wait_ms)


class SuppressOp(TableOp):
    """The suppress node as the topology is built."""

    def __init__(
        self,
        parent: TableOp,
        suppressed: Suppressed,
        buffer_store: str,
        rule: WindowCloseRule | None,
        key_serde: Serde | None,
        value_serde: Serde | None,
    ) -> None:
        self.parent = parent
        self.suppressed = suppressed
        self.buffer_store = buffer_store
        self.rule = rule
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.store_name = None

    @property
    def final_results(self) -> bool:
        return self.suppressed.kind == "until_window_closes"

    def enable_send_old_values(self, force_materialization: bool) -> bool:
        if self.parent.enable_send_old_values(force_materialization):
            self.send_old_values = True
        return self.send_old_values

    def view(self) -> ValueGetterSupplier:
        return SuppressedValueGetterSupplier(self, self.parent.view())

    def make_processor(self) -> NodeProcessor:
        return SuppressProcessor(self)

    def resolve_key_serde(self, context: NodeContext) -> Serde:
        if self.key_serde is not None:
            return self.key_serde
        if self.rule is not None:
            return self.rule.key_serde(context.config)
        return resolve_serde(None, context.config, "key")


def task_buffer(context: NodeContext, store_name: str) -> SuppressBuffer:
    """The task's one :class:`SuppressBuffer` over ``store_name`` (its index is shared by the
    processor and the value getters of joins reading the suppressed table)."""
    store = context.get_state_store(store_name)
    buffer: SuppressBuffer | None = getattr(store, "suppress_buffer", None)
    if buffer is None:
        buffer = SuppressBuffer(store)
        store.suppress_buffer = buffer
    return buffer


class SuppressedValueGetterSupplier(ValueGetterSupplier):
    """A suppressed table read by key (Kafka's ``KTableSuppressProcessorSupplier.view``): a key
    with a buffered update reads the value from before that update (what was last emitted);
    any other key reads through to the parent table."""

    def __init__(self, op: SuppressOp, parent: ValueGetterSupplier) -> None:
        self.op = op
        self.parent = parent

    def store_names(self) -> list[str]:
        return [self.op.buffer_store, *self.parent.store_names()]

    def getter(self, context: NodeContext) -> ValueGetter:
        parent_get = self.parent.getter(context)
        buffer = task_buffer(context, self.op.buffer_store)
        serialize_key = self.op.resolve_key_serde(context).serialize
        deserialize = resolve_serde(self.op.value_serde, context.config, "value").deserialize

        def get(key: Any) -> ValueAndTimestamp | None:
            record = buffer.buffered(serialize_key(key) or b"")
            if record is None:
                return parent_get(key)
            if record.prior is None:
                return None
            return ValueAndTimestamp(deserialize(record.prior), record.timestamp)

        return get


class SuppressProcessor(NodeProcessor):
    """Buffers updates and emits them as the stream time (or the wall clock) allows."""

    def __init__(self, op: SuppressOp) -> None:
        self.op = op
        suppressed = op.suppressed
        self.buffer_config = suppressed.buffer_config
        if op.final_results:
            assert op.rule is not None
            self.rule: WindowCloseRule | None = op.rule
            self.wait_ms = op.rule.wait_ms
        else:
            self.rule = None
            self.wait_ms = suppressed.time_to_wait_ms
        self.observed_stream_time = -1
        self.wall_clock = (
            WallClockClose(suppressed.wall_clock_idle_ms) if suppressed.wall_clock_idle_ms else None
        )

    def init(self, context: NodeContext) -> None:
        super().init(context)
        op = self.op
        self.key_serde = op.resolve_key_serde(context)
        self.value_serde = resolve_serde(op.value_serde, context.config, "value")
        self.buffer = task_buffer(context, op.buffer_store)
        self.send_old = op.send_old_values
        if self.wall_clock is not None:
            interval = punctuation_interval_ms(self.wall_clock.idle_ms)
            context.schedule(interval, PunctuationType.WALL_CLOCK_TIME, self._on_wall_clock)

    def process(self, key: Any, change: Change, timestamp: int, headers: Headers) -> None:
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
        rule = self.rule
        buffer_time = rule.buffer_time(key) if rule is not None else timestamp
        raw_key = self.key_serde.serialize(key)
        if raw_key is None:
            raise StreamsError(f"suppress {self.context.node_name}: a record key serialized to None")
        serialize = self.value_serde.serialize
        raw_new = serialize(change.new) if change.new is not None else None
        raw_old = serialize(change.old) if change.old is not None else None
        buffered, prior = self.buffer.prior_value(raw_key)
        if not buffered:
            prior, raw_old = raw_old, None  # the prior *is* the old value: counted once, as Kafka
        topic = self.context.task.record_topic()
        size = kafka_entry_size(raw_key, prior, raw_old, raw_new, topic, headers)
        self.buffer.put(buffer_time, raw_key, encode_entry(raw_new, prior, timestamp, headers, size), size)
        if self.wall_clock is not None:
            self.wall_clock.on_record(self.context.current_system_time_ms(), self.observed_stream_time)
        self._enforce_constraints()

    def _on_wall_clock(self, now_ms: int) -> None:
        assert self.wall_clock is not None
        advanced = self.wall_clock.advanced_stream_time(now_ms)
        if advanced is not None and advanced > self.observed_stream_time:
            self.observed_stream_time = advanced
            self._enforce_constraints()

    def _enforce_constraints(self) -> None:
        expiry = self.observed_stream_time - self.wait_ms
        buffer = self.buffer
        buffer.evict_while(lambda time: time <= expiry, self._emit)
        if self._over_capacity():
            if self.buffer_config.strict:
                config = self.buffer_config
                raise StreamsError(
                    f"{self.context.node_name} buffer exceeded its max capacity. Currently "
                    f"[{buffer.num_records}/{config.record_limit}] records and "
                    f"[{buffer.size_bytes}/{config.byte_limit}] bytes."
                )
            buffer.evict_while(lambda time: self._over_capacity(), self._emit)

    def _over_capacity(self) -> bool:
        config = self.buffer_config
        buffer = self.buffer
        return (config.record_limit is not None and buffer.num_records > config.record_limit) or (
            config.byte_limit is not None and buffer.size_bytes > config.byte_limit
        )

    def _emit(self, record: BufferedRecord) -> None:
        if record.new is None and self.op.final_results:
            return  # a final result is never a tombstone (safe to drop)
        deserialize = self.value_serde.deserialize
        new = deserialize(record.new) if record.new is not None else None
        old = deserialize(record.prior) if self.send_old and record.prior is not None else None
        key = self.key_serde.deserialize(record.key)
        self.forward(key, Change(new, old), record.timestamp, record.headers)
