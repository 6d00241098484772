"""Aggregation processors: ``count``/``reduce``/``aggregate`` of grouped streams and tables.

Each keeps the running aggregate per key in a timestamped store and forwards the update
as a :class:`~platform_streams.dsl.internals.change.Change` through the store (so caching decides
how often downstream hears about it, see :class:`TableProcessor`). Semantics are Kafka
Streams':

* grouped **stream** (``KStreamAggregate``/``KStreamReduce``): records with a null key or
  a null value are dropped (and counted as dropped); the first value of a key starts
  from ``initializer()`` (aggregate) or is the aggregate itself (reduce);
* grouped **table** (``KTableAggregate``/``KTableReduce``): each change first subtracts
  its old value (when both it and an aggregate exist), then adds its new value; an
  aggregate that becomes None is deleted;
* the result's timestamp is the largest of the record's and the previous aggregate's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from platform_streams.dsl.internals.change import ChangeSerde
from platform_streams.dsl.internals.skipped_records import skip_record
from platform_streams.dsl.internals.table_processors import StoreTableOp, TableProcessor
from platform_streams.errors import StreamsError
from platform_streams.processor.context import NodeContext
from platform_streams.processor.node import NodeProcessor, expression_of, with_expression
from platform_streams.processor.record import Headers
from platform_streams.serde import Serde
from platform_streams.state.timestamped_builders import resolve_serde

__all__ = [
    "stream_aggregate",
    "stream_count",
    "stream_reduce",
    "table_aggregate",
    "table_count",
    "table_reduce",
]

log = logging.getLogger(__name__)

Initializer = Callable[[], Any]
Aggregator = Callable[[Any, Any, Any], Any]
Reducer = Callable[[Any, Any], Any]


def count_initializer() -> int:
    return 0


def count_adder(key: Any, value: Any, aggregate: int) -> int:
    return aggregate + 1


# fused aggregation code counts in line instead of calling (processor/node.py: with_expression)
with_expression(count_initializer, "0")
with_expression(count_adder, "{aggregate} + 1")


def count_subtractor(key: Any, value: Any, aggregate: int) -> int:
    return aggregate - 1


class _AggregateProcessor(TableProcessor):
    """Binds the op's store; subclasses compute the new aggregate."""

    def __init__(self, op: StoreTableOp) -> None:
        self.op = op

    def init(self, context: NodeContext) -> None:
        self.bind_store(context, self.op.store_name, self.op.send_old_values)
        self._get = self.store.get_timestamped  # type: ignore[union-attr]
        #: the store's own put when it caches (then :meth:`TableProcessor.put` only adds a call)
        self._cached_put = self.store.put_timestamped if self._caching else None  # type: ignore[union-attr]


class StreamAggregateProcessor(_AggregateProcessor):
    def __init__(self, op: StoreTableOp, initializer: Initializer | None, aggregator: Aggregator) -> None:
        super().__init__(op)
        self.initializer = initializer
        self.aggregator = aggregator

    def init(self, context: NodeContext) -> None:
        super().init(context)
        #: read-compute-write in one call on the store's record cache (None: no cache)
        first = self._fused_first()
        self._step = self.store.aggregate_step(first, self.aggregator) if self._caching else None  # type: ignore[union-attr]
        #: the fused source calls the step itself (``process`` below adds only the None checks),
        #: or runs its work in line for a key cached decoded
        self.fused_step = self._step
        self.fused_fragment = (
            self.store.aggregate_fragment(first, self.aggregator) if self._step else None  # type: ignore[union-attr]
        )

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        if key is None or value is None:
            skip_record(self.context, "null key or value")  # KStreamAggregate, KStreamReduce
            return
        step = self._step
        if step is not None and step(key, value, timestamp):
            return
        old = self._get(key)
        if old is None:
            new = self._first(key, value)
        else:
            aggregate, old_timestamp = old
            if old_timestamp > timestamp:
                timestamp = old_timestamp
            new = self.aggregator(key, value, aggregate)
        cached_put = self._cached_put
        if cached_put is not None:
            cached_put(key, new, timestamp)
        else:
            self.put(key, new, timestamp, headers)

    def _first(self, key: Any, value: Any) -> Any:
        """The aggregate of a key's first value."""
        assert self.initializer is not None
        return self.aggregator(key, value, self.initializer())

    def _fused_first(self) -> Callable[[Any, Any], Any]:
        """:meth:`_first` for the step and the fused fragment: with an expression where the
        initializer and the aggregator both have one (a count's first aggregate is ``1``)."""
        initializer, aggregator = self.initializer, self.aggregator
        initial, add = expression_of(initializer), expression_of(aggregator)
        if initializer is None or initial is None or add is None:
            return self._first

        def first(key: Any, value: Any) -> Any:
            return aggregator(key, value, initializer())

        return with_expression(first, add.format(key="{key}", value="{value}", aggregate=f"({initial})"))


class StreamReduceProcessor(StreamAggregateProcessor):
    """``KStreamReduce``: the first value is the aggregate; the reducer takes ``(agg, value)``."""

    def __init__(self, op: StoreTableOp, reducer: Reducer) -> None:
        super().__init__(op, None, lambda k, v, a: reducer(a, v))

    def _first(self, key: Any, value: Any) -> Any:
        return value


class TableAggregateProcessor(_AggregateProcessor):
    """Subtract the old value, add the new one (``adder``/``subtractor`` take ``(key, value, agg)``)."""

    def __init__(
        self,
        op: StoreTableOp,
        initializer: Initializer | None,
        adder: Aggregator,
        subtractor: Aggregator,
        value_serde: Serde | None,
    ) -> None:
        super().__init__(op)
        self.initializer = initializer
        self.adder = adder
        self.subtractor = subtractor
        self.value_serde = value_serde

    def init(self, context: NodeContext) -> None:
        """Changes arrive serialized from the repartition topic; decode with the resolved serde."""
        super().init(context)
        self._decode = ChangeSerde(resolve_serde(self.value_serde, context.config, "value")).deserialize

    def process(self, key: Any, raw: bytes, timestamp: int, headers: Headers) -> None:
        if key is None:
            raise StreamsError(f"record key for KTable aggregate with store {self.op.store_name} is null")
        change = self._decode(raw)
        if change is None:
            return
        old = self._get(key)
        aggregate = old.value if old is not None else None
        if old is not None and old.timestamp > timestamp:
            timestamp = old.timestamp
        if change.old is not None and aggregate is not None:
            aggregate = self._subtract(key, change.old, aggregate)
        if change.new is not None:
            aggregate = self._add(key, change.new, aggregate)
        self.put(key, aggregate, timestamp, headers)

    def _subtract(self, key: Any, value: Any, aggregate: Any) -> Any:
        return self.subtractor(key, value, aggregate)

    def _add(self, key: Any, value: Any, aggregate: Any) -> Any:
        if aggregate is None:
            assert self.initializer is not None
            aggregate = self.initializer()
        return self.adder(key, value, aggregate)


class TableReduceProcessor(TableAggregateProcessor):
    """``KTableReduce``: the first value is the aggregate; reducers take ``(agg, value)``."""

    def __init__(
        self, op: StoreTableOp, adder: Reducer, subtractor: Reducer, value_serde: Serde | None
    ) -> None:
        super().__init__(op, None, lambda k, v, a: adder(a, v), lambda k, v, a: subtractor(a, v), value_serde)

    def _add(self, key: Any, value: Any, aggregate: Any) -> Any:
        if aggregate is None:
            return value
        return self.adder(key, value, aggregate)


def stream_aggregate(
    initializer: Initializer, aggregator: Aggregator
) -> Callable[[StoreTableOp], NodeProcessor]:
    return lambda op: StreamAggregateProcessor(op, initializer, aggregator)


def stream_count() -> Callable[[StoreTableOp], NodeProcessor]:
    return stream_aggregate(count_initializer, count_adder)


def stream_reduce(reducer: Reducer) -> Callable[[StoreTableOp], NodeProcessor]:
    return lambda op: StreamReduceProcessor(op, reducer)


def table_aggregate(
    initializer: Initializer, adder: Aggregator, subtractor: Aggregator, value_serde: Serde | None
) -> Callable[[StoreTableOp], NodeProcessor]:
    """``value_serde``: the serde of the grouped values (the ``Change`` records' inner serde)."""
    return lambda op: TableAggregateProcessor(op, initializer, adder, subtractor, value_serde)


def table_count(value_serde: Serde | None) -> Callable[[StoreTableOp], NodeProcessor]:
    return table_aggregate(count_initializer, count_adder, count_subtractor, value_serde)


def table_reduce(
    adder: Reducer, subtractor: Reducer, value_serde: Serde | None
) -> Callable[[StoreTableOp], NodeProcessor]:
    return lambda op: TableReduceProcessor(op, adder, subtractor, value_serde)
