"""Non-windowed joins: KStream-KTable, KStream-GlobalKTable and KTable-KTable.

Semantics are the tables of Kafka Streams' "Streams DSL" joining section:

* **KStream-KTable** (inner/left): the stream side drives. Each stream record looks up
  the table's *current* value for its key; table updates never emit. A stream record
  with a None value is dropped; a None key is dropped by the inner join and joined with
  ``None`` by the left join (KIP-962). The result has the stream record's timestamp.
  Both inputs must be co-partitioned; a key-changed stream is repartitioned first.
* **KStream-GlobalKTable** (inner/left): like the above, but ``key_selector(key, value)``
  picks the table key; nothing is repartitioned or co-partitioned. A None selected key
  never matches (left join: ``joiner(value, None)``).
* **KTable-KTable** (inner/left/outer): both sides drive; each update of either table
  recomputes the joined row from the other side's current value, and a row that stops
  existing produces a delete (a None value downstream). The result's timestamp is the
  larger of both sides'. The result is materialized only when ``materialized`` is given.

Joiners take ``(left_value, right_value)`` or ``(key, left_value, right_value)``
(Kafka's ``ValueJoinerWithKey``), told apart by their signature.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.change import Change
from platform_streams.dsl.kstream import KStream
from platform_streams.dsl.materialize import KeyValueStoreSpec, key_value_spec, store_name
from platform_streams.dsl.options import Joined, Materialized, name_of
from platform_streams.dsl.table_processors import (
    StoreValueGetterSupplier,
    TableOp,
    TableProcessor,
    ValueGetterSupplier,
)
from platform_streams.dsl.timestamped import ValueAndTimestamp
from platform_streams.errors import TopologyError
from platform_streams.processor.context import NodeContext
from platform_streams.processor.node import NodeProcessor
from platform_streams.processor.record import Headers

if TYPE_CHECKING:
    from platform_streams.dsl.ktable import GlobalKTable, KTable
    from platform_streams.dsl.timestamped_kv_store import ValueGetter

__all__ = ["joiner_with_key", "stream_join", "table_table_join"]

log = logging.getLogger(__name__)

Joiner = Callable[[Any, Any, Any], Any]


def joiner_with_key(joiner: Callable[..., Any]) -> Joiner:
    """``joiner`` as ``(key, left, right) -> result`` whether or not it takes the key."""
    if not callable(joiner):
        raise TopologyError(f"a joiner must be callable, got {joiner!r}")
    try:
        params = inspect.signature(joiner).parameters.values()
    except (TypeError, ValueError):
        params = None  # builtins: assume (left, right)
    if params is not None:
        positional = [
            p
            for p in params
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
        if len(positional) >= 3:
            return joiner
    return lambda key, left, right: joiner(left, right)


# ---------------------------------------------------------------------------- stream-table


class StreamTableJoinProcessor(NodeProcessor):
    """Kafka Streams' ``KStreamKTableJoinProcessor`` (also the GlobalKTable join)."""

    def __init__(
        self,
        view: ValueGetterSupplier,
        joiner: Joiner,
        left: bool,
        key_selector: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        self.view = view
        self.joiner = joiner
        self.left = left
        self.key_selector = key_selector

    def init(self, context: NodeContext) -> None:
        super().init(context)
        self._get: ValueGetter = self.view.getter(context)

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        if value is None:
            self._drop(key)
            return
        lookup = key if self.key_selector is None else self.key_selector(key, value)
        if lookup is None:
            if self.left:
                self.forward(key, self.joiner(key, value, None), timestamp, headers)
            else:
                self._drop(key)
            return
        found = self._get(lookup)
        if found is not None:
            self.forward(key, self.joiner(key, value, found.value), timestamp, headers)
        elif self.left:
            self.forward(key, self.joiner(key, value, None), timestamp, headers)

    def _drop(self, key: Any) -> None:
        self.context.task.dropped_records += 1
        log.debug("stream-table join: dropping record with key %r (null key, value or table key)", key)


def stream_join(
    stream: KStream, other: Any, joiner: Callable[..., Any], *args: Any, kind: str, **kwargs: Any
) -> KStream:
    """``KStream.join/left_join`` with a KTable (``joiner[, joined]``) or a GlobalKTable
    (``key_selector, value_joiner[, named]``, Kafka's argument order)."""
    from platform_streams.dsl.ktable import GlobalKTable, KTable

    if kind not in ("inner", "left"):
        raise TopologyError(f"a KStream-{type(other).__name__} join is inner or left, not {kind}")
    if isinstance(other, KTable):
        joined = args[0] if args else kwargs.pop("joined", None)
        _no_more(kwargs)
        return _stream_table_join(stream, other, joiner, joined, left=kind == "left")
    if isinstance(other, GlobalKTable):
        value_joiner = args[0] if args else kwargs.pop("value_joiner", None)
        if value_joiner is None:
            raise TopologyError("a GlobalKTable join takes (global_table, key_selector, value_joiner)")
        named = args[1] if len(args) > 1 else kwargs.pop("named", None)
        _no_more(kwargs)
        return _stream_global_join(stream, other, joiner, value_joiner, name_of(named), left=kind == "left")
    raise TopologyError(f"cannot join a KStream with {type(other).__name__} without JoinWindows")


def _no_more(kwargs: dict[str, Any]) -> None:
    if kwargs:
        raise TopologyError(f"unexpected join arguments: {sorted(kwargs)}")


def _stream_table_join(
    stream: KStream, table: KTable, joiner: Callable[..., Any], joined: Joined | None, *, left: bool
) -> KStream:
    if table.builder is not stream.builder:
        raise TopologyError("cannot join a stream and a table from different StreamsBuilders")
    joined = joined or Joined()
    if stream.repartition_required:
        stream = stream._through_repartition_topic(
            joined.name or stream.node_name,
            key_serde=joined.key_serde or stream.key_serde,
            value_serde=joined.value_serde or stream.value_serde,
            num_partitions=None,
            partitioner=None,
        )
    builder = stream.builder
    topology = builder.topology
    topology.add_copartition_group(stream.source_topics | table.source_topics)
    name = builder.names.name("KSTREAM-LEFTJOIN-" if left else "KSTREAM-JOIN-", joined.name)
    view = table.value_getter_supplier()
    fn = joiner_with_key(joiner)
    topology.add_processor(name, lambda: StreamTableJoinProcessor(view, fn, left), stream.node_name)
    topology.connect_processor_and_state_stores(name, *view.store_names())
    return KStream(builder, name, key_serde=stream.key_serde, source_topics=stream.source_topics)


def _stream_global_join(
    stream: KStream,
    table: GlobalKTable,
    key_selector: Callable[[Any, Any], Any],
    joiner: Callable[..., Any],
    named: str | None,
    *,
    left: bool,
) -> KStream:
    if not callable(key_selector):
        raise TopologyError(f"a GlobalKTable join needs a key selector, got {key_selector!r}")
    builder = stream.builder
    name = builder.names.name("KSTREAM-LEFTJOIN-" if left else "KSTREAM-JOIN-", named)
    view = table.value_getter_supplier()
    fn = joiner_with_key(joiner)
    builder.topology.add_processor(
        name, lambda: StreamTableJoinProcessor(view, fn, left, key_selector), stream.node_name
    )
    return KStream(
        builder,
        name,
        key_serde=stream.key_serde,
        repartition_required=stream.repartition_required,
        source_topics=stream.source_topics,
    )


# ---------------------------------------------------------------------------- table-table


class _JoinSide:
    """One side's join processor spec: how it combines its change with the other side."""

    def __init__(self, kind: str, joiner: Joiner, other: ValueGetterSupplier) -> None:
        #: "inner" | "left" (this is the left of a left join) | "right" | "outer"
        self.kind = kind
        self.joiner = joiner
        self.other = other
        self.send_old_values = False


class TableJoinProcessor(NodeProcessor):
    """Kafka Streams' ``KTableKTable{Inner,Left,Right,Outer}Join`` processors."""

    def __init__(self, side: _JoinSide) -> None:
        self.side = side

    def init(self, context: NodeContext) -> None:
        super().init(context)
        self._get: ValueGetter = self.side.other.getter(context)

    def process(self, key: Any, change: Change, timestamp: int, headers: Headers) -> None:
        if key is None:
            self.context.task.dropped_records += 1  # as KTableKTableJoin's droppedRecordsSensor
            return
        side = self.side
        joiner, send_old = side.joiner, side.send_old_values
        found = self._get(key)
        other = found.value if found is not None else None
        new = old = None
        if side.kind in ("inner", "right"):
            if other is None:
                return
            if side.kind == "right":  # this is the right of a left join: the left row decides
                new = joiner(key, change.new, other)
                old = joiner(key, change.old, other) if send_old else None
            else:
                new = joiner(key, change.new, other) if change.new is not None else None
                old = joiner(key, change.old, other) if send_old and change.old is not None else None
        else:
            if other is None and change.new is None and change.old is None:
                return
            outer = side.kind == "outer" and other is not None
            if change.new is not None or outer:
                new = joiner(key, change.new, other)
            if send_old and (change.old is not None or outer):
                old = joiner(key, change.old, other)
        if found is not None and found.timestamp > timestamp:
            timestamp = found.timestamp
        self.forward(key, Change(new, old), timestamp, headers)


class JoinMergeOp(TableOp):
    """The KTable of a table-table join (Kafka's ``KTableKTableJoinMerger``)."""

    def __init__(
        self,
        parents: tuple[TableOp, TableOp],
        sides: tuple[_JoinSide, _JoinSide],
        views: tuple[ValueGetterSupplier, ValueGetterSupplier],
        kind: str,
        store: str | None,
    ) -> None:
        self.parents = parents
        self.sides = sides
        self.views = views
        self.kind = kind
        self.store_name = store

    def enable_send_old_values(self, force_materialization: bool) -> bool:
        for parent, side in zip(self.parents, self.sides, strict=True):
            parent.enable_send_old_values(True)
            side.send_old_values = True
        self.send_old_values = True
        return True

    def view(self) -> ValueGetterSupplier:
        if self.store_name is not None:
            return StoreValueGetterSupplier(self.store_name)
        return _JoinValueGetterSupplier(self.views, self.sides[0].joiner, self.kind)

    def make_processor(self) -> NodeProcessor:
        return JoinMergeProcessor(self)


class JoinMergeProcessor(TableProcessor):
    def __init__(self, op: JoinMergeOp) -> None:
        self.op = op

    def init(self, context: NodeContext) -> None:
        self.bind_store(context, self.op.store_name, self.op.send_old_values)

    def process(self, key: Any, change: Change, timestamp: int, headers: Headers) -> None:
        if self.store is None:
            self.forward(key, change, timestamp, headers)
        else:
            self.put(key, change.new, timestamp, headers)


class _JoinValueGetterSupplier(ValueGetterSupplier):
    """The joined row computed from both sides' getters (an unmaterialized join's view)."""

    def __init__(
        self, views: tuple[ValueGetterSupplier, ValueGetterSupplier], joiner: Joiner, kind: str
    ) -> None:
        self.views = views
        self.joiner = joiner
        self.kind = kind

    def store_names(self) -> list[str]:
        return list(dict.fromkeys(self.views[0].store_names() + self.views[1].store_names()))

    def getter(self, context: NodeContext) -> ValueGetter:
        get_left, get_right = (v.getter(context) for v in self.views)
        joiner, kind = self.joiner, self.kind

        def get(key: Any) -> ValueAndTimestamp | None:
            left, right = get_left(key), get_right(key)
            if left is None and (kind != "outer" or right is None):
                return None
            if right is None and kind == "inner":
                return None
            value = joiner(key, left.value if left else None, right.value if right else None)
            timestamp = max(left.timestamp if left else -1, right.timestamp if right else -1)
            return ValueAndTimestamp(value, timestamp) if value is not None else None

        return get


_SIDE_KINDS = {"inner": ("inner", "inner"), "left": ("left", "right"), "outer": ("outer", "outer")}


def table_table_join(
    table: KTable,
    other: KTable,
    joiner: Callable[..., Any],
    named: str | None,
    materialized: Materialized | None,
    kind: str,
) -> KTable:
    """Add ``<join-this>``, ``<join-other>`` and the merge node (``KTABLE-MERGE-``) for a table join."""
    from platform_streams.dsl.ktable import KTable

    if other.builder is not table.builder:
        raise TopologyError("cannot join tables from different StreamsBuilders")
    builder = table.builder
    names = builder.names
    topology = builder.topology
    spec: KeyValueStoreSpec | None = None
    if materialized is not None:
        store = store_name(builder, materialized, "KTABLE-MERGE-")
        spec = key_value_spec(store, materialized, key_serde=table.key_serde, value_serde=None)
    merge_name = names.name("KTABLE-MERGE-", named)
    topology.add_copartition_group(table.source_topics | other.source_topics)
    if kind in ("left", "outer"):
        table.enable_send_old_values(True)
    if kind == "outer":
        other.enable_send_old_values(True)
    this_name = f"{named}-join-this" if named else names.name("KTABLE-JOINTHIS-")
    other_name = f"{named}-join-other" if named else names.name("KTABLE-JOINOTHER-")
    this_view, other_view = table.value_getter_supplier(), other.value_getter_supplier()
    fn = joiner_with_key(joiner)
    this_kind, other_kind = _SIDE_KINDS[kind]
    this_side = _JoinSide(this_kind, fn, other_view)
    other_side = _JoinSide(other_kind, lambda k, mine, theirs: fn(k, theirs, mine), this_view)
    topology.add_processor(this_name, lambda: TableJoinProcessor(this_side), table.node_name)
    topology.add_processor(other_name, lambda: TableJoinProcessor(other_side), other.node_name)
    op = JoinMergeOp(
        (table._op, other._op),
        (this_side, other_side),
        (this_view, other_view),
        kind,
        spec.name if spec else None,
    )
    topology.add_processor(merge_name, op.make_processor, this_name, other_name)
    topology.connect_processor_and_state_stores(this_name, *other_view.store_names())
    topology.connect_processor_and_state_stores(other_name, *this_view.store_names())
    if spec is not None:
        topology.add_state_store(spec, merge_name)
    return KTable(
        builder,
        merge_name,
        op,
        key_serde=spec.key_serde if spec else table.key_serde,
        value_serde=spec.value_serde if spec else None,
        source_topics=table.source_topics | other.source_topics,
    )
