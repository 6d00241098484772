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

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.table_join_processors import (
    Joiner,
    JoinMergeOp,
    JoinSide,
    StreamTableJoinProcessor,
    TableJoinProcessor,
    joiner_with_key,
)
from platform_streams.dsl.internals.versioned_join import VersionedStreamTableJoinProcessor, buffer_store_name
from platform_streams.dsl.kstream import KStream
from platform_streams.dsl.materialize import is_queryable, key_value_spec, store_name
from platform_streams.dsl.options import Joined, Materialized, name_of
from platform_streams.errors import TopologyError
from platform_streams.state.timestamped_builders import TimestampedKeyValueStoreBuilder, bytes_store_builder

if TYPE_CHECKING:
    from platform_streams.dsl.internals.table_processors import ValueGetterSupplier
    from platform_streams.dsl.ktable import GlobalKTable, KTable

__all__ = ["joiner_with_key", "stream_join", "table_table_join"]


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
    view = table.value_getter_supplier()
    if joined.grace_ms is not None and not view.is_versioned():
        # Kafka's KStreamImpl.join: a grace period needs a versioned table (shouldFailIfTableIsNotVersioned)
        raise TopologyError("KTable must be versioned to use a grace period in a stream table join.")
    if stream.repartition_required:
        stream = stream.repartition_for_join(
            joined.name or stream.node_name,
            joined.key_serde or stream.key_serde,
            joined.value_serde or stream.value_serde,
            user_named=joined.name is not None,
        )
    builder = stream.builder
    topology = builder.plan
    topology.add_copartition_group(stream.source_topics | table.source_topics)
    name = builder.names.name("KSTREAM-LEFTJOIN-" if left else "KSTREAM-JOIN-", joined.name)
    fn = joiner_with_key(joiner)
    if joined.grace_ms is None:
        topology.add_processor(name, lambda: StreamTableJoinProcessor(view, fn, left), stream.node_name)
    else:
        _add_grace_join(stream, name, view, fn, joined, left)
    topology.connect_processor_and_state_stores(name, *view.store_names())
    return KStream(builder, name, key_serde=stream.key_serde, source_topics=stream.source_topics)


def _add_grace_join(
    stream: KStream, name: str, view: ValueGetterSupplier, fn: Joiner, joined: Joined, left: bool
) -> None:
    """The join processor with its ``<name>-Buffer`` store (KIP-923): stream records wait out
    the grace period, then join the versioned table as of their timestamps."""
    grace_ms = joined.grace_ms
    assert grace_ms is not None
    if grace_ms < 0:
        raise TopologyError(f"join {name}: the grace period must not be negative, got {grace_ms} ms")
    retention = view.history_retention_ms()
    if retention is not None and retention < grace_ms:
        raise TopologyError("History retention must be at least grace period.")
    buffer = buffer_store_name(name)
    if joined.name is None:
        # Kafka's KStreamImpl.doStreamTableJoin records the buffer and its changelog as unnamed
        stream.builder.implicit_names.add_store(buffer, logged=True)
    key_serde = joined.key_serde or stream.key_serde
    value_serde = joined.value_serde or stream.value_serde
    topology = stream.builder.plan
    topology.add_processor(
        name,
        lambda: VersionedStreamTableJoinProcessor(
            view,
            fn,
            left,
            buffer_store=buffer,
            grace_ms=grace_ms,
            key_serde=key_serde,
            value_serde=value_serde,
        ),
        stream.node_name,
    )
    topology.add_state_store(bytes_store_builder(buffer, "rocksdb", logging_enabled=True), name)


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
    builder.plan.add_processor(
        name, lambda: StreamTableJoinProcessor(view, fn, left, key_selector), stream.node_name
    )
    return KStream(
        builder,
        name,
        key_serde=stream.key_serde,
        repartition_required=stream.repartition_required,
        source_topics=stream.source_topics,
    )


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
    topology = builder.plan
    spec: TimestampedKeyValueStoreBuilder | None = None
    if materialized is not None:
        store = store_name(builder, materialized, "KTABLE-MERGE-")
        spec = key_value_spec(builder, store, materialized, key_serde=table.key_serde, value_serde=None)
    merge_name = names.name("KTABLE-MERGE-", named)
    topology.add_copartition_group(table.source_topics | other.source_topics)
    if kind in ("left", "outer"):
        table.enable_send_old_values(True)
    if kind == "outer":
        other.enable_send_old_values(True)
    this_name = names.suffixed(named, "-join-this", "KTABLE-JOINTHIS-")
    other_name = names.suffixed(named, "-join-other", "KTABLE-JOINOTHER-")
    this_view, other_view = table.value_getter_supplier(), other.value_getter_supplier()
    fn = joiner_with_key(joiner)
    this_kind, other_kind = _SIDE_KINDS[kind]
    this_side = JoinSide(this_kind, fn, other_view)
    other_side = JoinSide(other_kind, lambda k, mine, theirs: fn(k, theirs, mine), this_view)
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
        queryable=is_queryable(materialized),
    )
