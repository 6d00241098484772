"""Run-time side of the foreign-key table-table join (KIP-213), as Kafka Streams runs it.

The primary table (``this``) and the foreign table (``other``) are partitioned by different
keys, so the join is a conversation over two internal topics:

1. :class:`SubscriptionSendProcessor` (primary side): each primary update becomes subscription
   instructions keyed by the foreign key, carrying the primary key, the murmur3 hash of the
   new primary value and the primary partition (``-subscription-registration-topic``).
2. :class:`SubscriptionReceiveProcessor` (foreign side): records the subscription in the
   subscription store (key ``{fk}{pk}``), forwards it as a change;
   :class:`SubscriptionJoinProcessor` looks the foreign value up and answers.
3. :class:`ForeignTableJoinProcessor` (foreign side): a foreign update answers every subscriber
   found by a prefix scan of the subscription store.
4. Answers go to ``-subscription-response-topic``, partitioned back to the primary partition;
   :class:`ResponseJoinProcessor` (primary side) joins them with the *current* primary value,
   and drops any answer whose hash is not the current value's: an answer computed for a value
   the primary row no longer has is stale (a later subscription's answer follows).

Kafka's classes: ``SubscriptionSendProcessorSupplier``, ``SubscriptionReceiveProcessorSupplier``,
``SubscriptionJoinProcessorSupplier``, ``ForeignTableJoinProcessorSupplier``,
``ResponseJoinProcessorSupplier``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.change import Change
from platform_streams.dsl.internals.foreign_key_wire import (
    CURRENT_VERSION,
    RESPONSE_VERSION,
    CombinedKeySchema,
    Instruction,
    SubscriptionResponseWrapper,
    SubscriptionWrapper,
    SubscriptionWrapperSerde,
    WrappingSerde,
    murmur3_hash128,
)
from platform_streams.dsl.internals.skipped_records import skip_record
from platform_streams.dsl.internals.table_processors import ValueGetterSupplier
from platform_streams.errors import StreamsError
from platform_streams.processor.node import NodeProcessor
from platform_streams.processor.record import Headers
from platform_streams.serde.primitive import Bytes
from platform_streams.state.timestamped import ValueAndTimestamp
from platform_streams.state.timestamped_builders import resolve_serde

if TYPE_CHECKING:
    from platform_streams.processor.context import NodeContext
    from platform_streams.serde.base import Serde
    from platform_streams.state.timestamped_kv_store import TimestampedKeyValueStore, ValueGetter

__all__ = [
    "ForeignTableJoinProcessor",
    "ResponseJoinProcessor",
    "SubscriptionJoinProcessor",
    "SubscriptionReceiveProcessor",
    "SubscriptionSendProcessor",
    "response_partitioner",
]

log = logging.getLogger(__name__)
_RAW = Bytes()


def _resolve(context: NodeContext, *serdes: WrappingSerde) -> None:
    config = context.config
    for serde in serdes:
        serde.set_if_unset(config.default_key_serde, config.default_value_serde)


class SubscriptionSendProcessor(NodeProcessor):
    """Kafka's ``SubscriptionSendProcessorSupplier``: primary changes -> subscription instructions.

    The instructions are Kafka Streams 4.x's (``leftJoinInstructions``/``defaultJoinInstructions``):
    an inner join whose foreign key did not change re-subscribes with "only if a foreign value is
    there", so an update with no foreign row emits nothing (the result is already absent).
    """

    def __init__(
        self,
        extractor: Callable[[Any, Any], Any],
        foreign_key_serde: Serde | None,
        value_serde: Serde | None,
        wrapper_serde: SubscriptionWrapperSerde,
        left_join: bool,
    ) -> None:
        self.extractor = extractor
        self.foreign_key_serde = foreign_key_serde
        self.value_serde = value_serde
        self.wrapper_serde = wrapper_serde
        self.left_join = left_join

    def init(self, context: NodeContext) -> None:
        super().init(context)
        _resolve(context, self.wrapper_serde)
        self._fk_serde = resolve_serde(self.foreign_key_serde, context.config, "key")
        self._value_serde = resolve_serde(self.value_serde, context.config, "value")

    def process(self, key: Any, change: Change, timestamp: int, headers: Headers) -> None:
        self._hash: tuple[int, int] | None = None
        if self.left_join:
            self._left_join(key, change, timestamp, headers)
        else:
            self._inner_join(key, change, timestamp, headers)

    def _left_join(self, key: Any, change: Change, timestamp: int, headers: Headers) -> None:
        if change.old is None and change.new is None:
            return
        extract = self.extractor
        old_fk = None if change.old is None else extract(key, change.old)
        new_fk = None if change.new is None else extract(key, change.new)
        if old_fk is not None and self._changed(new_fk, old_fk):
            self._send(key, change, old_fk, Instruction.DELETE_KEY_NO_PROPAGATE, timestamp, headers)
        # a null new foreign key (or a deleted row) still goes out: the left row alone is the result
        self._send(key, change, new_fk, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, timestamp, headers)

    def _inner_join(self, key: Any, change: Change, timestamp: int, headers: Headers) -> None:
        extract = self.extractor
        old_fk = None if change.old is None else extract(key, change.old)
        if change.new is None:
            if old_fk is not None:
                self._send(key, change, old_fk, Instruction.DELETE_KEY_AND_PROPAGATE, timestamp, headers)
            return
        new_fk = extract(key, change.new)
        if new_fk is None:
            skip_record(self.context, "null foreign key")
            if old_fk is not None:
                self._send(key, change, old_fk, Instruction.DELETE_KEY_AND_PROPAGATE, timestamp, headers)
        elif old_fk is not None and self._changed(new_fk, old_fk):
            # moved to another foreign row: unsubscribe from the old one, and retract the old
            # result if the new foreign row does not exist
            self._send(key, change, old_fk, Instruction.DELETE_KEY_NO_PROPAGATE, timestamp, headers)
            self._send(
                key, change, new_fk, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, timestamp, headers
            )
        else:
            self._send(
                key, change, new_fk, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, timestamp, headers
            )

    def _changed(self, new_fk: Any, old_fk: Any) -> bool:
        """Foreign keys compare serialized, as in Kafka (equal bytes: the same subscription)."""
        serialize = self._fk_serde.serialize
        return serialize(new_fk) != serialize(old_fk)

    def _send(
        self, key: Any, change: Change, fk: Any, instruction: Instruction, timestamp: int, headers: Headers
    ) -> None:
        if self._hash is None and change.new is not None:
            self._hash = murmur3_hash128(self._value_serde.serialize(change.new) or b"")
        wrapper = SubscriptionWrapper(self._hash, instruction, key, self.context.task_id.partition)
        self.forward(fk, wrapper, timestamp, headers)


class SubscriptionReceiveProcessor(NodeProcessor):
    """Kafka's ``SubscriptionReceiveProcessorSupplier``: keep the subscription store current and
    forward ``(CombinedKey(fk, pk), Change(new, old))``."""

    def __init__(
        self, store: str, schema: CombinedKeySchema, wrapper_serde: SubscriptionWrapperSerde
    ) -> None:
        self.store_name = store
        self.schema = schema
        self.wrapper_serde = wrapper_serde

    def init(self, context: NodeContext) -> None:
        super().init(context)
        _resolve(context, self.wrapper_serde)
        self.schema.init(context.config.default_key_serde)
        self._store: TimestampedKeyValueStore = context.get_state_store(self.store_name)

    def process(self, key: Any, value: SubscriptionWrapper, timestamp: int, headers: Headers) -> None:
        if key is None and value.instruction != Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
            skip_record(self.context, "null foreign key")
            return
        if value.version > CURRENT_VERSION:
            raise StreamsError("SubscriptionWrapper is of an incompatible version.")
        new = ValueAndTimestamp(value, timestamp)
        if key is None:
            change = Change(new, None)
        else:
            store_key = self.schema.to_bytes(key, value.primary_key)
            old = self._store.get_timestamped(store_key)
            if value.instruction in (
                Instruction.DELETE_KEY_AND_PROPAGATE,
                Instruction.DELETE_KEY_NO_PROPAGATE,
            ):
                self._store.delete(store_key)
            else:
                self._store.put_timestamped(store_key, value, timestamp)
            change = Change(new, old)
        self.forward((key, value.primary_key), change, timestamp, headers)


class SubscriptionJoinProcessor(NodeProcessor):
    """Kafka's ``SubscriptionJoinProcessorSupplier``: answer a subscription with the foreign value."""

    def __init__(self, foreign: ValueGetterSupplier) -> None:
        self.foreign = foreign

    def init(self, context: NodeContext) -> None:
        super().init(context)
        self._get: ValueGetter = self.foreign.getter(context)

    def process(self, key: tuple[Any, Any], change: Change, timestamp: int, headers: Headers) -> None:
        foreign_key, primary_key = key
        vat: ValueAndTimestamp = change.new
        value: SubscriptionWrapper = vat.value
        if value.version > CURRENT_VERSION:
            raise StreamsError("SubscriptionWrapper is of an incompatible version.")
        found = None if foreign_key is None else self._get(foreign_key)
        result_ts = vat.timestamp if found is None else max(vat.timestamp, found.timestamp)
        instruction = value.instruction
        if instruction == Instruction.DELETE_KEY_AND_PROPAGATE:
            foreign_value = None
        elif instruction == Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
            foreign_value = None if found is None else found.value
        elif instruction == Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE and found is not None:
            foreign_value = found.value
        else:
            return  # DELETE_KEY_NO_PROPAGATE, or nothing to join yet
        response = SubscriptionResponseWrapper(value.hash, foreign_value, value.primary_partition)
        self.forward(primary_key, response, result_ts, headers)


class ForeignTableJoinProcessor(NodeProcessor):
    """Kafka's ``ForeignTableJoinProcessorSupplier``: a foreign update answers every subscriber."""

    def __init__(self, store: str, schema: CombinedKeySchema) -> None:
        self.store_name = store
        self.schema = schema

    def init(self, context: NodeContext) -> None:
        super().init(context)
        self.schema.init(context.config.default_key_serde)
        self._store: TimestampedKeyValueStore = context.get_state_store(self.store_name)

    def process(self, key: Any, change: Change, timestamp: int, headers: Headers) -> None:
        if key is None:
            skip_record(self.context, "null key")
            return
        # the store's keys are raw bytes ({len(fk)}{fk}{pk}): a prefix scan finds exactly this
        # foreign key's subscribers (Kafka: a range to Bytes.increment(prefix), prefix-checked)
        subscribers = list(self._store.prefix_scan(self.schema.prefix_bytes(key), _RAW))
        for raw, wrapper in subscribers:
            _, primary_key = self.schema.from_bytes(raw)
            response = SubscriptionResponseWrapper(wrapper.hash, change.new, wrapper.primary_partition)
            self.forward(primary_key, response, timestamp, headers)


class ResponseJoinProcessor(NodeProcessor):
    """Kafka's ``ResponseJoinProcessorSupplier``: join an answer with the current primary value,
    dropping stale answers (hash of the current value differs)."""

    def __init__(
        self,
        primary: ValueGetterSupplier,
        value_serde: Serde | None,
        wrapper_serde: WrappingSerde,
        joiner: Callable[[Any, Any, Any], Any],
        left_join: bool,
    ) -> None:
        self.primary = primary
        self.value_serde = value_serde
        self.wrapper_serde = wrapper_serde
        self.joiner = joiner
        self.left_join = left_join

    def init(self, context: NodeContext) -> None:
        super().init(context)
        _resolve(context, self.wrapper_serde)
        self._get: ValueGetter = self.primary.getter(context)
        self._value_serde = resolve_serde(self.value_serde, context.config, "value")

    def process(self, key: Any, value: SubscriptionResponseWrapper, timestamp: int, headers: Headers) -> None:
        if value.version != RESPONSE_VERSION:
            raise StreamsError("SubscriptionResponseWrapper is of an incompatible version.")
        current = self._get(key)
        current_hash = (
            None if current is None else murmur3_hash128(self._value_serde.serialize(current.value) or b"")
        )
        if value.original_value_hash != current_hash:
            self.context.task.dropped_records += 1
            log.debug("Dropping FK-join response due to hash mismatch (key %r)", key)
            return
        if value.foreign_value is None and (not self.left_join or current is None):
            result = None
        else:
            result = self.joiner(key, None if current is None else current.value, value.foreign_value)
        self.forward(key, result, timestamp, headers)


def response_partitioner(topic: str, key: Any, value: Any, num_partitions: int) -> int | None:
    """Kafka's default response partitioner: back to the subscribing primary partition."""
    partition = value.primary_partition if value is not None else None
    return partition if isinstance(partition, int) else None
