"""``KStream.join/left_join/outer_join(other_stream, joiner, JoinWindows[, StreamJoined])``.

Builds Kafka Streams' stream-stream join subgraph (``KStreamImplJoin``), with its names::

    left  -> KSTREAM-WINDOWED-a -> KSTREAM-JOINTHIS-c  (or OUTERTHIS for outer joins) --+
    right -> KSTREAM-WINDOWED-b -> KSTREAM-JOINOTHER-d (or OUTEROTHER for left/outer) --+-> KSTREAM-MERGE-e

Stores: ``<JOINTHIS name>-store`` and ``<JOINOTHER name>-store`` (window stores of
``before + after`` retaining duplicates, retention ``before + after + grace``), and for
left/outer joins ``KSTREAM-OUTERSHARED-<c>-store`` (the outer-join store). With
``StreamJoined(store_name=s)``: ``s-this-join-store``, ``s-other-join-store`` (``-outer-...``
for outer sides) and ``s-left-shared-join-store`` / ``s-outer-shared-join-store``; with
``StreamJoined(name=n)`` the processors are ``n-this-windowed``, ``n-this-join``, ...,
``n-merge``.

The subgraph is one :class:`~platform_streams.dsl.plan.StreamStreamJoinNode` of the plan: with
``single.store.self.join`` on, a join of a stream with itself is lowered as Kafka's self-join
(``parent -> this-windowed -> merge``, one window store; ``KStreamKStreamSelfJoin``).

A side whose key may have changed is repartitioned first (``<n>-left-repartition`` /
``<n>-right-repartition``, else ``<node name>-repartition``), and both sides' topics form
a co-partition group. The joiner is ``joiner(left_value, right_value)`` or, with three
parameters, ``joiner(key, left_value, right_value)`` (``ValueJoinerWithKey``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.stream_join_processors import (
    JoinSideParams,
    JoinWindowProcessor,
    SelfJoinParams,
    StreamJoinProcessor,
    StreamSelfJoinProcessor,
    TimeTrackers,
)
from platform_streams.dsl.materialize import app_dsl_store_suppliers, own_store_choice
from platform_streams.dsl.options import StreamJoined
from platform_streams.dsl.plan import StreamStreamJoinNode
from platform_streams.dsl.windows import JoinWindows
from platform_streams.errors import TopologyError
from platform_streams.state.builders import KeyValueStoreBuilder
from platform_streams.state.dsl_store_suppliers import DslWindowParams
from platform_streams.state.timestamped_builders import bytes_store_builder
from platform_streams.state.timestamped_window_store import DslWindowStoreBuilder

if TYPE_CHECKING:
    from platform_streams.dsl.kstream import KStream

__all__ = ["stream_stream_join"]

_JOINTHIS, _OUTERTHIS = "KSTREAM-JOINTHIS-", "KSTREAM-OUTERTHIS-"
_JOINOTHER, _OUTEROTHER = "KSTREAM-JOINOTHER-", "KSTREAM-OUTEROTHER-"


def stream_stream_join(
    left: KStream,
    right: Any,
    joiner: Callable[..., Any],
    windows: JoinWindows,
    stream_joined: StreamJoined | None = None,
    *,
    kind: str,
) -> KStream:
    """Add the join subgraph; returns the joined stream (key serde kept, value serde unknown)."""
    from platform_streams.dsl.kstream import KStream

    if not isinstance(right, KStream):
        raise TopologyError(f"a windowed join needs a KStream on the other side, got {type(right).__name__}")
    if right.builder is not left.builder:
        raise TopologyError("cannot join streams from different StreamsBuilders")
    if kind not in ("inner", "left", "outer"):
        raise TopologyError(f"unknown join kind {kind!r}")
    if stream_joined is not None and not isinstance(stream_joined, StreamJoined):
        raise TypeError(
            f"{kind} join: parameter 'stream_joined' takes a StreamJoined, got {type(stream_joined).__name__}"
        )
    builder = left.builder
    sj = stream_joined or StreamJoined()
    _check_store_suppliers(sj, windows)
    suppliers = app_dsl_store_suppliers(builder)
    if suppliers is not None and not own_store_choice(sj.store_type, None, sj.dsl_store_suppliers):
        # Kafka's precedence: StreamJoined's suppliers over the application's config
        sj = sj.with_dsl_store_suppliers(suppliers)
    key_serde = sj.key_serde or left.key_serde
    left_value_serde = sj.value_serde or left.value_serde
    right_value_serde = sj.other_value_serde or right.value_serde
    if left.repartition_required:
        base = f"{sj.name}-left" if sj.name else left.node_name
        left = left.repartition_for_join(base, key_serde, left_value_serde, user_named=sj.name is not None)
    if right.repartition_required:
        base = f"{sj.name}-right" if sj.name else right.node_name
        right = right.repartition_for_join(base, key_serde, right_value_serde, user_named=sj.name is not None)
    topology = builder.plan
    topics = left.source_topics | right.source_topics
    if len(topics) > 1:
        topology.add_copartition_group(topics)

    left_outer = kind in ("left", "outer")
    right_outer = kind == "outer"
    names = builder.names
    this_windowed = names.suffixed(sj.name, "-this-windowed", "KSTREAM-WINDOWED-")
    other_windowed = names.suffixed(sj.name, "-other-windowed", "KSTREAM-WINDOWED-")
    this_generated = names.name(_OUTERTHIS if right_outer else _JOINTHIS)
    other_generated = names.name(_OUTEROTHER if left_outer else _JOINOTHER)
    this_suffix = "-outer-this-join" if right_outer else "-this-join"
    other_suffix = "-outer-other-join" if left_outer else "-other-join"
    join_this = f"{sj.name}{this_suffix}" if sj.name else this_generated
    join_other = f"{sj.name}{other_suffix}" if sj.name else other_generated
    merge = names.suffixed(sj.name, "-merge", "KSTREAM-MERGE-")

    store_base = sj.store_name
    this_store = f"{store_base}{this_suffix}-store" if store_base else f"{this_generated}-store"
    other_store = f"{store_base}{other_suffix}-store" if store_base else f"{other_generated}-store"
    if sj.this_store_supplier is not None:
        this_store = sj.this_store_supplier.name
    if sj.other_store_supplier is not None:
        other_store = sj.other_store_supplier.name
    outer_store = None
    if left_outer:
        shared_suffix = "-outer-shared-join" if right_outer else "-left-shared-join"
        index = this_generated[len(_OUTERTHIS if right_outer else _JOINTHIS) :]
        outer_store = (
            f"{store_base}{shared_suffix}-store" if store_base else f"KSTREAM-OUTERSHARED-{index}-store"
        )
    if not store_base:
        # Kafka's KStreamImplJoin records the join's stores as unnamed without a StreamJoined
        # store name (a store supplier's own name included)
        for store in (this_store, other_store, outer_store):
            if store is not None:
                builder.implicit_names.add_store(store, logged=sj.logging_enabled)

    fn = _with_key(joiner)
    trackers = TimeTrackers()
    common = {
        "grace_ms": windows.grace_ms,
        "windows_before_ms": windows.before_ms,
        "windows_after_ms": windows.after_ms,
        "outer_store": outer_store,
        "trackers": trackers,
        "key_serde": key_serde,
        "left_value_serde": left_value_serde,
        "right_value_serde": right_value_serde,
    }
    this_params = JoinSideParams(
        other_store=other_store,
        before_ms=windows.before_ms,
        after_ms=windows.after_ms,
        is_left=True,
        outer=left_outer,
        joiner=fn,
        **common,  # type: ignore[arg-type]
    )
    other_params = JoinSideParams(
        other_store=this_store,
        before_ms=windows.after_ms,
        after_ms=windows.before_ms,
        is_left=False,
        outer=right_outer,
        joiner=lambda key, right_value, left_value: fn(key, left_value, right_value),
        **common,  # type: ignore[arg-type]
    )

    self_params = SelfJoinParams(
        store=this_store,
        before_ms=windows.before_ms,
        after_ms=windows.after_ms,
        retention_ms=windows.size() + windows.grace_ms,
        joiner=fn,
    )
    topology.add(
        StreamStreamJoinNode(
            merge,
            [left.node_name, right.node_name],
            this_windowed=this_windowed,
            other_windowed=other_windowed,
            join_this=join_this,
            join_other=join_other,
            this_windowed_supplier=lambda: JoinWindowProcessor(this_store),
            other_windowed_supplier=lambda: JoinWindowProcessor(other_store),
            join_this_supplier=lambda: StreamJoinProcessor(this_params),
            join_other_supplier=lambda: StreamJoinProcessor(other_params),
            self_join_supplier=lambda: StreamSelfJoinProcessor(self_params),
            this_store=_join_store(
                this_store, windows, sj, key_serde, left_value_serde, sj.this_store_supplier
            ),
            other_store=_join_store(
                other_store, windows, sj, key_serde, right_value_serde, sj.other_store_supplier
            ),
            outer_store=None if outer_store is None else _outer_store(outer_store, sj),
        )
    )
    return KStream(
        builder, merge, key_serde=key_serde, source_topics=left.source_topics | right.source_topics
    )


def _outer_store(name: str, sj: StreamJoined) -> KeyValueStoreBuilder:
    """The outer-join store: as persistent as this side's explicit supplier (Kafka's
    ``OuterStreamJoinStoreFactory``), else of the join's store type -- which the run-time
    ``dsl_store_suppliers`` may still change when no one chose it."""
    this_supplier = sj.this_store_supplier
    store_type = sj.store_type
    if this_supplier is not None:
        store_type = "rocksdb" if this_supplier.persistent else "in_memory"
    builder = bytes_store_builder(name, store_type, sj.logging_enabled, sj.log_config)
    builder.dsl_default = not own_store_choice(sj.store_type, this_supplier, sj.dsl_store_suppliers)
    return builder


def _check_store_suppliers(sj: StreamJoined, windows: JoinWindows) -> None:
    """Kafka's ``KStreamImplJoin.assertUniqueStoreNames`` and ``assertWindowSettings``: explicit
    join store suppliers need distinct names, duplicates retained, the join's window size and
    a retention of window size plus grace (else the join would lose or misplace records)."""
    this, other = sj.this_store_supplier, sj.other_store_supplier
    if this is not None and other is not None and this.name == other.name:
        raise TopologyError(
            "Both StoreSuppliers have the same name.  StoreSuppliers must provide unique names"
        )
    for supplier in (this, other):
        if supplier is None:
            continue
        if not supplier.retain_duplicates:
            raise TopologyError(
                "The StoreSupplier must set retainDuplicates=true, found retainDuplicates=false"
            )
        size = windows.size()
        if supplier.retention_ms != size + windows.grace_ms or supplier.window_size_ms != size:
            raise TopologyError(
                f"Window settings mismatch. WindowBytesStoreSupplier settings {supplier} must match "
                f"JoinWindows settings {windows} for the window size and retention period"
            )


def _join_store(
    name: str,
    windows: JoinWindows,
    sj: StreamJoined,
    key_serde: Any,
    value_serde: Any,
    supplier: Any = None,
) -> DslWindowStoreBuilder:
    """A join side's window store: every record kept (duplicates), no cache, as in Kafka Streams.

    Without an explicit supplier, ``sj.dsl_store_suppliers`` (KIP-954) supplies the store."""
    size = max(windows.size(), 1)  # a zero-width window still needs a positive store window
    if supplier is None and sj.dsl_store_suppliers is not None:
        supplier = sj.dsl_store_suppliers.window_store(
            DslWindowParams(name, size + windows.grace_ms, size, retain_duplicates=True)
        )
    return DslWindowStoreBuilder(
        name=name,
        key_serde=key_serde,
        value_serde=value_serde,
        retention_ms=size + windows.grace_ms,
        store_type=sj.store_type,
        caching_enabled=False,
        logging_enabled=sj.logging_enabled,
        log_config=sj.log_config,
        window_size_ms=size,
        retain_duplicates=True,
        timestamped=False,
        store_supplier=supplier,
        dsl_default=not own_store_choice(sj.store_type, supplier, sj.dsl_store_suppliers),
    )


def _with_key(joiner: Callable[..., Any]) -> Callable[[Any, Any, Any], Any]:
    """``ValueJoiner`` (2 parameters) or ``ValueJoinerWithKey`` (3) as a 3-parameter function."""
    try:
        params = inspect.signature(joiner).parameters.values()
        required = [
            p
            for p in params
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
        with_key = len(required) >= 3
    except (TypeError, ValueError):
        with_key = False
    if with_key:
        return joiner
    return lambda key, left_value, right_value: joiner(left_value, right_value)
