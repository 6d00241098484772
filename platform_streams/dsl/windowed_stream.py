"""``TimeWindowedKStream`` and ``SessionWindowedKStream``: windowed ``count``/``reduce``/``aggregate``.

``grouped.windowed_by(TimeWindows | SlidingWindows)`` gives a :class:`TimeWindowedKStream`,
``grouped.windowed_by(SessionWindows)`` a :class:`SessionWindowedKStream` (Kafka Streams'
``TimeWindowedKStream`` / ``SessionWindowedKStream``). Each aggregation returns a
``KTable`` keyed by ``Windowed(key, window)``; its key serde is a
:class:`~platform_streams.dsl.windowed_serdes.TimeWindowedSerde` /
:class:`~platform_streams.dsl.windowed_serdes.SessionWindowedSerde` over the grouping's
key serde (None when that is unknown until run time, as in Kafka Streams).

Stores (named as in Kafka Streams: ``Materialized.as_(name)`` or
``KSTREAM-AGGREGATE-STATE-STORE-<n>`` / ``KSTREAM-REDUCE-STATE-STORE-<n>``) are window or
session stores whose retention is ``Materialized.retention_ms`` or, by default, what the
windows need: ``size + grace`` (time windows), ``2 * time difference + grace`` (sliding,
as Kafka Streams), ``gap + grace`` (sessions). A smaller explicit retention is rejected,
as Kafka Streams does. ``emit_strategy(EmitStrategy.on_window_close())`` adds a small
changelogged store ``<store>-close-time``: the close time emitted up to, which Kafka Streams
keeps in its commit metadata (see :mod:`~platform_streams.dsl.internals.window_close`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from platform_streams.dsl.emit_strategy import EmitStrategy
from platform_streams.dsl.internals.aggregate_processors import count_adder, count_initializer
from platform_streams.dsl.internals.sliding_window_processor import SlidingWindowAggregateProcessor
from platform_streams.dsl.internals.table_processors import StoreTableOp
from platform_streams.dsl.internals.window_processors import (
    AggregateParams,
    SessionWindowAggregateProcessor,
    TimeWindowAggregateProcessor,
)
from platform_streams.dsl.internals.windowed_table import WindowCloseRule, WindowedTableOp
from platform_streams.dsl.materialize import (
    burn_count_store_name,
    dsl_materialized,
    is_queryable,
    own_store_choice,
    store_name,
)
from platform_streams.dsl.options import Materialized, Named, by_type, name_of, require_functions
from platform_streams.dsl.windows import SessionWindows, SlidingWindows, TimeWindows, UnlimitedWindows
from platform_streams.errors import TopologyError
from platform_streams.processor.node import NodeProcessor
from platform_streams.serde import Long, Serde
from platform_streams.state.timestamped_builders import bytes_store_builder
from platform_streams.state.timestamped_window_store import DslSessionStoreBuilder, DslWindowStoreBuilder
from platform_streams.topology.nodes import StatelessOp

if TYPE_CHECKING:
    from platform_streams.dsl.grouped_stream import KGroupedStream
    from platform_streams.dsl.ktable import KTable

__all__ = [
    "SessionWindowedKStream",
    "TimeWindowedKStream",
    "windowed_by",
]

Reducer = Callable[[Any, Any], Any]
SpecT = TypeVar("SpecT", DslWindowStoreBuilder, DslSessionStoreBuilder)


def windowed_by(grouped: KGroupedStream, windows: Any) -> TimeWindowedKStream | SessionWindowedKStream:
    """``KGroupedStream.windowed_by``: the windowed view matching the window spec."""
    if isinstance(windows, TimeWindows | SlidingWindows | UnlimitedWindows):
        return TimeWindowedKStream(grouped, windows)
    if isinstance(windows, SessionWindows):
        return SessionWindowedKStream(grouped, windows)
    raise TypeError(
        f"windowed_by: parameter 'windows' takes TimeWindows, UnlimitedWindows, SlidingWindows or "
        f"SessionWindows, got {windows!r}"
    )


class _WindowedKStream:
    """What both windowed streams share: naming, repartitioning, the table node."""

    _kind_prefix = "KSTREAM-AGGREGATE-"

    def __init__(self, grouped: KGroupedStream, emit: EmitStrategy) -> None:
        self._grouped = grouped
        self._emit = emit

    def _names(
        self, prefix: str, named: Named | str | None, materialized: Materialized | None
    ) -> tuple[str, str]:
        """(store name, processor name), drawn in Kafka Streams' order."""
        builder = self._grouped.builder
        store = store_name(builder, materialized, prefix)
        return store, builder.names.name(prefix, name_of(named))

    def _build(
        self,
        prefix: str,
        named: Named | str | None,
        materialized: Materialized | None,
        default_value_serde: Serde | None,
        make: Callable[[AggregateParams, StoreTableOp], NodeProcessor],
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        merger: Callable[[Any, Any, Any], Any] | None = None,
    ) -> KTable:
        return self._build_from(
            [(self._grouped, aggregator)],
            prefix,
            named,
            materialized,
            default_value_serde,
            make,
            initializer,
            merger,
        )

    def _build_from(
        self,
        inputs: list[tuple[KGroupedStream, Callable[[Any, Any, Any], Any]]],
        prefix: str,
        named: Any,
        materialized: Any,
        default_value_serde: Serde | None,
        make: Callable[[AggregateParams, StoreTableOp], NodeProcessor],
        initializer: Callable[[], Any],
        merger: Callable[[Any, Any, Any], Any] | None,
        *,
        cogroup: bool = False,
    ) -> KTable:
        """The aggregation's store and nodes: one processor per input (several for a cogroup, all
        writing the one store, then a ``COGROUPKSTREAM-MERGE-`` node), in Kafka Streams' naming order."""
        from platform_streams.dsl.ktable import KTable

        named, materialized = by_type(prefix.lower() + "aggregation", named, materialized)
        given = name_of(named)
        first = inputs[0][0]
        builder = first.builder
        mat = dsl_materialized(builder, materialized)
        names = builder.names
        store = store_name(builder, materialized, prefix)
        name = None if cogroup else names.name(prefix, given)
        key_serde = mat.key_serde or first.key_serde
        value_serde = mat.value_serde or default_value_serde
        named_store = is_queryable(materialized)
        sources = [grouped.source_for_aggregation(store, named_store) for grouped, _ in inputs]
        spec = self._store_spec(store, mat, key_serde, value_serde)
        pending = f"{store}-close-time" if self._emit.emit_final else None
        rule = self._close_rule(key_serde)
        all_params = [
            AggregateParams(
                store, pending, initializer, agg, self._emit, merger, sole_writer=len(inputs) == 1
            )
            for _, agg in inputs
        ]
        op = WindowedTableOp(store, lambda table_op: make(all_params[0], table_op), rule)
        topology = builder.plan
        processors = []
        for index, (params, source) in enumerate(zip(all_params, sources, strict=True)):
            if name is None:
                node = names.suffixed(given, f"-cogroup-agg-{index}", "COGROUPKSTREAM-AGGREGATE-")
            else:
                node = name
            topology.add_processor(node, _processor_supplier(make, params, op), source.node_name)
            processors.append(node)
        topology.add_state_store(spec, *processors)
        if pending is not None:
            # the emit-final close time (see window_close): logged like the main store
            index_store = bytes_store_builder(pending, mat.store_type, mat.logging_enabled, mat.log_config)
            topology.add_state_store(index_store, *processors)
        table_node = processors[0]
        topics = frozenset(t for source in sources for t in source.source_topics)
        if cogroup:
            table_node = names.suffixed(given, "-cogroup-merge", "COGROUPKSTREAM-MERGE-")
            topology.add_stateless(table_node, StatelessOp("passthrough"), *processors)
            if len(sources) > 1:
                topology.add_copartition_group(topics)
        return KTable(
            builder,
            table_node,
            op,
            key_serde=None if key_serde is None else rule.windowed_serde(key_serde),
            value_serde=value_serde,
            source_topics=topics,
            queryable=is_queryable(materialized),
        )

    def _spec(
        self,
        spec_type: type[SpecT],
        store: str,
        mat: Materialized,
        key_serde: Serde | None,
        value_serde: Serde | None,
        minimum: int,
        what: str,
        **extra: Any,
    ) -> SpecT:
        """The spec of window/session store ``store`` from ``mat``.

        A store supplier (of ``spec_type.supplier_type``) brings its own retention; else the
        retention is ``mat.retention_ms``, no smaller than ``minimum`` (``what`` names it).
        """
        supplier = mat.store_supplier
        if mat.ttl_ms is not None:
            raise TopologyError(
                f"store {store!r}: with_ttl applies to key-value stores; a {spec_type.kind} store "
                "expires by its retention (with_retention)"
            )
        if supplier is not None and not isinstance(supplier, spec_type.supplier_type):
            raise TopologyError(
                f"store {store!r}: a {spec_type.kind} store supplier is needed, got {supplier!r}"
            )
        retention = (
            supplier.retention_ms if supplier is not None else self._retention(mat, store, minimum, what)
        )
        return spec_type(
            name=store,
            key_serde=key_serde,
            value_serde=value_serde,
            retention_ms=retention,
            store_type=mat.store_type,
            caching_enabled=mat.caching_enabled,
            logging_enabled=mat.logging_enabled,
            log_config=dict(mat.log_config or {}),
            store_supplier=supplier,
            dsl_default=not own_store_choice(mat.store_type, supplier, mat.dsl_store_suppliers),
            **extra,
        )

    def _retention(self, mat: Materialized, store: str, minimum: int, what: str) -> int:
        retention = mat.retention_ms if mat.retention_ms is not None else minimum
        if retention < minimum:
            raise TopologyError(
                f"the retention period of the window store {store} ({retention} ms) must be no smaller "
                f"than {what} ({minimum} ms)"
            )
        if self._emit.emit_final:
            # Kafka's emit-final stores are time-ordered: they keep a window whose start is
            # ``store time - retention`` (AbstractDualSchemaRocksDBSegmentedBytesStore.getActualFrom),
            # 1 ms longer than a plain window store (``store time - retention + 1``), so a window
            # closing at the record that writes the next one is still emitted
            retention += 1
        return retention

    def _store_spec(
        self, store: str, mat: Materialized, key_serde: Serde | None, value_serde: Serde | None
    ) -> Any:
        raise NotImplementedError

    def _close_rule(self, key_serde: Serde | None) -> Any:
        raise NotImplementedError


class TimeWindowedKStream(_WindowedKStream):
    """A grouped stream windowed by ``TimeWindows`` (tumbling/hopping) or ``SlidingWindows``."""

    def __init__(
        self,
        grouped: KGroupedStream,
        windows: TimeWindows | SlidingWindows | UnlimitedWindows,
        emit: EmitStrategy | None = None,
    ) -> None:
        super().__init__(grouped, emit or EmitStrategy.on_window_update())
        self.windows = windows

    def emit_strategy(self, strategy: EmitStrategy) -> TimeWindowedKStream:
        """When results leave: on every update (default) or once per window when it closes (KIP-825)."""
        return TimeWindowedKStream(self._grouped, self.windows, strategy)

    def count(self, named: Named | str | None = None, materialized: Materialized | None = None) -> KTable:
        """Records per key and window (null keys/values are skipped); values are ``Long``."""
        named, materialized = by_type("count", named, materialized)
        burn_count_store_name(self._grouped.builder, materialized)
        counted = _with_default_value(materialized, Long())
        return self.aggregate(count_initializer, count_adder, named, counted)

    def reduce(
        self, reducer: Reducer, named: Named | str | None = None, materialized: Materialized | None = None
    ) -> KTable:
        """Combine values per key and window with ``reducer(aggregate, value)``."""
        require_functions("reduce", reducer=reducer)
        return self._aggregate(
            "KSTREAM-REDUCE-",
            named,
            materialized,
            self._grouped.value_serde,
            _no_aggregate,
            _reducing(reducer),
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Fold values per key and window: ``aggregator(key, value, aggregate)`` from ``initializer()``."""
        require_functions("aggregate", initializer=initializer, aggregator=aggregator)
        return self._aggregate("KSTREAM-AGGREGATE-", named, materialized, None, initializer, aggregator)

    def _aggregate(
        self,
        prefix: str,
        named: Named | str | None,
        materialized: Materialized | None,
        default_value_serde: Serde | None,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
    ) -> KTable:
        if self._emit.emit_final and isinstance(self.windows, UnlimitedWindows):
            # Kafka's KStreamWindowAggregate constructor: an unlimited window never closes
            raise ValueError(
                "ON_WINDOW_CLOSE strategy is only supported for TimeWindows and SlidingWindows "
                "for TimeWindowedKStream"
            )
        return self._build(
            prefix, named, materialized, default_value_serde, self._maker(), initializer, aggregator
        )

    def _maker(self) -> Callable[[AggregateParams, StoreTableOp], NodeProcessor]:
        """The processor of one aggregation input over these windows."""
        windows = self.windows
        if isinstance(windows, SlidingWindows):
            sliding = windows
            return lambda params, op: SlidingWindowAggregateProcessor(params, op, sliding)
        time_windows = windows
        return lambda params, op: TimeWindowAggregateProcessor(params, op, time_windows)

    def _store_spec(
        self, store: str, mat: Materialized, key_serde: Serde | None, value_serde: Serde | None
    ) -> DslWindowStoreBuilder:
        windows = self.windows
        if isinstance(windows, SlidingWindows):
            size = windows.time_difference_ms
            minimum, what = 2 * size + windows.grace_ms, "2 * time difference plus the grace period"
            if self._emit.emit_final:
                # as Kafka's SlidingWindowedKStreamImpl.materialize: "do not enable cache if the
                # emit final strategy is used" (its windows are read back by the close scan)
                mat = mat.with_caching_disabled()
        else:
            size = windows.size_ms
            minimum, what = size + windows.grace_ms, "its window size plus the grace period"
        return self._spec(
            DslWindowStoreBuilder, store, mat, key_serde, value_serde, minimum, what, window_size_ms=size
        )

    def _close_rule(self, key_serde: Serde | None) -> WindowCloseRule:
        windows = self.windows
        if isinstance(windows, SlidingWindows):
            return WindowCloseRule("sliding", windows.grace_ms, 1, key_serde, windows.time_difference_ms)
        return WindowCloseRule("time", windows.grace_ms, 0, key_serde, windows.size_ms)


class SessionWindowedKStream(_WindowedKStream):
    """A grouped stream windowed by ``SessionWindows``: aggregates merge when sessions merge."""

    def __init__(
        self, grouped: KGroupedStream, windows: SessionWindows, emit: EmitStrategy | None = None
    ) -> None:
        super().__init__(grouped, emit or EmitStrategy.on_window_update())
        self.windows = windows

    def emit_strategy(self, strategy: EmitStrategy) -> SessionWindowedKStream:
        return SessionWindowedKStream(self._grouped, self.windows, strategy)

    def count(self, named: Named | str | None = None, materialized: Materialized | None = None) -> KTable:
        """Records per session (values are ``Long``); merging sessions add their counts."""
        named, materialized = by_type("count", named, materialized)
        burn_count_store_name(self._grouped.builder, materialized)
        counted = _with_default_value(materialized, Long())
        return self.aggregate(count_initializer, count_adder, _sum_merger, named, counted)

    def reduce(
        self, reducer: Reducer, named: Named | str | None = None, materialized: Materialized | None = None
    ) -> KTable:
        """Combine values per session with ``reducer(aggregate, value)`` (also used to merge sessions)."""
        require_functions("reduce", reducer=reducer)
        reduce = _reducing(reducer)

        def merge(key: Any, agg1: Any, agg2: Any) -> Any:
            return reduce(key, agg2, agg1)

        return self._aggregate(
            "KSTREAM-REDUCE-", named, materialized, self._grouped.value_serde, _no_aggregate, reduce, merge
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        merger: Callable[[Any, Any, Any], Any],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Fold values per session; ``merger(key, agg1, agg2)`` combines sessions a record bridges."""
        require_functions("aggregate", initializer=initializer, aggregator=aggregator, merger=merger)
        return self._aggregate(
            "KSTREAM-AGGREGATE-", named, materialized, None, initializer, aggregator, merger
        )

    def _aggregate(
        self,
        prefix: str,
        named: Named | str | None,
        materialized: Materialized | None,
        default_value_serde: Serde | None,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        merger: Callable[[Any, Any, Any], Any],
    ) -> KTable:
        return self._build(
            prefix, named, materialized, default_value_serde, self._maker(), initializer, aggregator, merger
        )

    def _maker(self) -> Callable[[AggregateParams, StoreTableOp], NodeProcessor]:
        windows = self.windows
        return lambda params, op: SessionWindowAggregateProcessor(params, op, windows)

    def _store_spec(
        self, store: str, mat: Materialized, key_serde: Serde | None, value_serde: Serde | None
    ) -> DslSessionStoreBuilder:
        windows = self.windows
        minimum = windows.inactivity_gap_ms + windows.grace_ms
        what = "its inactivity gap plus the grace period"
        if self._emit.emit_final:
            # as Kafka's SessionStoreMaterializer.build: "do not enable cache if the emit final
            # strategy is used" (every session update reaches the store and its changelog)
            mat = mat.with_caching_disabled()
        return self._spec(
            DslSessionStoreBuilder,
            store,
            mat,
            key_serde,
            value_serde,
            minimum,
            what,
            emit_final=self._emit.emit_final,
        )

    def _close_rule(self, key_serde: Serde | None) -> WindowCloseRule:
        windows = self.windows
        # Kafka Streams' rule (end + gap + grace <= stream time): sessions may merge later
        # anyway (a record bridging two sessions), so no offset makes them truly final
        return WindowCloseRule("session", windows.grace_ms + windows.inactivity_gap_ms, 0, key_serde, None)


# ---------------------------------------------------------------------------- aggregators


def _processor_supplier(
    make: Callable[[AggregateParams, StoreTableOp], NodeProcessor], params: AggregateParams, op: StoreTableOp
) -> Callable[[], NodeProcessor]:
    return lambda: make(params, op)


def _no_aggregate() -> Any:
    """reduce's initializer (Kafka Streams': null): the first value becomes the aggregate."""
    return None


def _reducing(reducer: Reducer) -> Callable[[Any, Any, Any], Any]:
    """reduce as an aggregation: the first value is the aggregate, then ``reducer(agg, value)``."""

    def aggregate(key: Any, value: Any, agg: Any) -> Any:
        return value if agg is None else reducer(agg, value)

    return aggregate


def _sum_merger(key: Any, agg1: int, agg2: int) -> int:
    return agg1 + agg2


def _with_default_value(materialized: Materialized | None, serde: Serde) -> Materialized:
    mat = materialized or Materialized()
    return mat if mat.value_serde is not None else mat.with_value_serde(serde)
