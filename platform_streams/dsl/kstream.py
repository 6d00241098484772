"""``KStream``: a record stream and its stateless operators.

Every operator adds one node to the builder's topology and returns a new
``KStream`` over that node. Operators that may change the key (``map``,
``flat_map``, ``select_key``) mark the result as needing a repartition before
any grouping or join, exactly as Kafka Streams does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.async_stream import AsyncStreamOps
from platform_streams.dsl.naming import takes_key
from platform_streams.dsl.options import Branched, Grouped, Named, Produced, Repartitioned, name_of
from platform_streams.dsl.plan import OptimizableRepartitionNode, ProcessorGraphNode
from platform_streams.errors import TopologyError
from platform_streams.processor.fixed_key import FixedKeySupplier
from platform_streams.serde import Serde
from platform_streams.topology.nodes import OpKind, StatelessOp

if TYPE_CHECKING:
    from platform_streams.dsl.builder import StreamsBuilder
    from platform_streams.dsl.grouped_stream import KGroupedStream
    from platform_streams.dsl.ktable import KTable
    from platform_streams.dsl.options import Materialized
    from platform_streams.dsl.printed import Printed

Predicate = Callable[[Any, Any], bool]


class KStream(AsyncStreamOps):
    """An unbounded stream of key-value records (Kafka Streams' ``KStream``)."""

    def __init__(
        self,
        builder: StreamsBuilder,
        node_name: str,
        *,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        repartition_required: bool = False,
        source_topics: frozenset[str] = frozenset(),
        key_changer: str | None = None,
    ) -> None:
        self._builder = builder
        self.node_name = node_name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.repartition_required = repartition_required
        #: the topics this stream's records come from (for co-partitioning checks)
        self.source_topics = source_topics
        #: the key-changing node this stream descends from through key- and value-preserving
        #: operators only (filter, peek): repartitions below it may be merged (optimizer)
        self.key_changer = key_changer
        #: the repartitioned stream of this stream's last join (Kafka's cached ``repartitionNode``)
        self._join_repartition: tuple[str, KStream] | None = None

    # -- stateless operators ----------------------------------------------------------------

    def filter(self, predicate: Predicate, named: Named | str | None = None) -> KStream:
        """Keep records for which ``predicate(key, value)`` is true."""
        return self._op("KSTREAM-FILTER-", "filter", predicate, named)

    def filter_not(self, predicate: Predicate, named: Named | str | None = None) -> KStream:
        """Drop records for which ``predicate(key, value)`` is true."""
        return self._op("KSTREAM-FILTER-", "filter_not", predicate, named)

    def map(self, mapper: Callable[[Any, Any], tuple[Any, Any]], named: Named | str | None = None) -> KStream:
        """Replace each record by ``mapper(key, value) -> (new_key, new_value)``."""
        return self._op("KSTREAM-MAP-", "map", mapper, named, key_changed=True, serdes_kept=False)

    def map_values(self, mapper: Callable[..., Any], named: Named | str | None = None) -> KStream:
        """New value from ``mapper(value)`` or ``mapper(key, value)``; the key is unchanged."""
        kind: OpKind = "map_values_with_key" if takes_key(mapper) else "map_values"
        return self._op("KSTREAM-MAPVALUES-", kind, mapper, named, value_serde_kept=False)

    def flat_map(
        self, mapper: Callable[[Any, Any], Iterable[tuple[Any, Any]]], named: Named | str | None = None
    ) -> KStream:
        """Zero or more ``(key, value)`` records per input record."""
        return self._op("KSTREAM-FLATMAP-", "flat_map", mapper, named, key_changed=True, serdes_kept=False)

    def flat_map_values(
        self, mapper: Callable[..., Iterable[Any]], named: Named | str | None = None
    ) -> KStream:
        """Zero or more values per input record, keeping its key."""
        kind: OpKind = "flat_map_values_with_key" if takes_key(mapper) else "flat_map_values"
        return self._op("KSTREAM-FLATMAPVALUES-", kind, mapper, named, value_serde_kept=False)

    def select_key(self, mapper: Callable[[Any, Any], Any], named: Named | str | None = None) -> KStream:
        """New key from ``mapper(key, value)``; the value is unchanged."""
        return self._op(
            "KSTREAM-KEY-SELECT-", "select_key", mapper, named, key_changed=True, key_serde_kept=False
        )

    def peek(self, action: Callable[[Any, Any], None], named: Named | str | None = None) -> KStream:
        """Call ``action(key, value)`` for each record and pass it on unchanged."""
        return self._op("KSTREAM-PEEK-", "peek", action, named)

    def foreach(self, action: Callable[[Any, Any], None], named: Named | str | None = None) -> None:
        """Call ``action(key, value)`` for each record (terminal)."""
        self._op("KSTREAM-FOREACH-", "foreach", action, named)

    def merge(self, other: KStream, named: Named | str | None = None) -> KStream:
        """Records of both streams, in the order they are processed."""
        if other._builder is not self._builder:
            raise TopologyError("cannot merge streams from different StreamsBuilders")
        name = self._builder.names.name("KSTREAM-MERGE-", name_of(named))
        self._builder.plan.add_stateless(name, StatelessOp("passthrough"), self.node_name, other.node_name)
        same = self.key_serde == other.key_serde and self.value_serde == other.value_serde
        return KStream(
            self._builder,
            name,
            key_serde=self.key_serde if same else None,
            value_serde=self.value_serde if same else None,
            repartition_required=self.repartition_required or other.repartition_required,
            source_topics=self.source_topics | other.source_topics,
        )

    def split(self, named: Named | str | None = None) -> BranchedKStream:
        """Route each record to the first branch whose predicate matches (KIP-418)."""
        name = self._builder.names.name("KSTREAM-BRANCH-", name_of(named))
        self._builder.plan.add_stateless(name, StatelessOp("branch"), self.node_name)
        return BranchedKStream(self, name, prefix=name_of(named) or name)

    # -- sinks, repartitioning, processors ------------------------------------------------

    def print(self, printed: Printed) -> None:
        """Write each record as ``[label]: key, value`` to stdout or a file (terminal; for debugging)."""
        if printed is None:
            raise TypeError("printed can't be null")
        name = self._builder.names.name("KSTREAM-PRINTER-", printed.name)
        # Kafka's KStreamImpl.print: the default label is this stream's node name
        self._builder.plan.add_processor(name, printed.build(self.node_name), self.node_name)

    def to(self, topic: str | Callable[[Any, Any, Any], str], produced: Produced | None = None) -> None:
        """Write to ``topic`` (or to the topic ``topic(key, value, record_metadata)`` returns)."""
        produced = produced or Produced()
        name = self._builder.names.name("KSTREAM-SINK-", produced.name)
        self._builder.plan.add_sink(
            name,
            topic,
            self.node_name,
            key_serde=produced.key_serde or self.key_serde,
            value_serde=produced.value_serde or self.value_serde,
            partitioner=produced.partitioner,
        )

    def repartition(self, repartitioned: Repartitioned | None = None) -> KStream:
        """Write through an internal ``<name>-repartition`` topic, partitioned by the current key."""
        rep = repartitioned or Repartitioned()
        base = rep.name or self._builder.names.name("KSTREAM-REPARTITION-")
        return self._through_repartition_topic(
            base,
            user_named=rep.name is not None,
            key_serde=rep.key_serde or self.key_serde,
            value_serde=rep.value_serde or self.value_serde,
            num_partitions=rep.num_partitions,
            partitioner=rep.partitioner,
            optimizable=False,
        )

    def process(
        self, supplier: Callable[[], Any], *store_names: str, named: Named | str | None = None
    ) -> KStream:
        """Run a Processor API processor (``supplier()`` per task) with access to ``store_names``."""
        # Kafka's KStreamImpl.process takes a given name as is (no index drawn)
        name = name_of(named) or self._builder.names.name("KSTREAM-PROCESSOR-")
        self._add_processor(name, supplier, supplier, store_names)
        return KStream(self._builder, name, repartition_required=True, source_topics=self.source_topics)

    def process_values(
        self, supplier: Callable[[], Any], *store_names: str, named: Named | str | None = None
    ) -> KStream:
        """Run a :class:`~platform_streams.processor.FixedKeyProcessor` (KIP-820): it may change
        values, never keys, so the result keeps the key serde and needs no repartition."""
        name = name_of(named) or self._builder.names.name("KSTREAM-PROCESSVALUES-")
        self._add_processor(name, FixedKeySupplier(supplier, name), supplier, store_names)
        return KStream(
            self._builder,
            name,
            key_serde=self.key_serde,
            repartition_required=self.repartition_required,
            source_topics=self.source_topics,
        )

    def _add_processor(
        self, name: str, make: Callable[[], Any], supplier: Any, store_names: tuple[str, ...]
    ) -> None:
        """Add processor ``name`` and connect its stores: ``store_names`` and the store builders
        of the supplier's ``stores()`` (Kafka's ``ConnectedStoreProvider``), added here."""
        if not callable(supplier):
            raise TopologyError(f"processor {name!r}: supplier must be callable, got {supplier!r}")
        topology = self._builder.plan
        topology.add_processor(name, make, self.node_name)
        provided = getattr(supplier, "stores", None)
        for store_builder in (provided() if callable(provided) else None) or ():
            topology.add_state_store(store_builder, name)
        for store in store_names:
            topology.connect_processor_and_state_stores(name, store)

    def group_by_key(self, grouped: Grouped | None = None) -> KGroupedStream:
        """Group by the current key (repartitioning first if the key may have changed)."""
        from platform_streams.dsl.grouped_stream import KGroupedStream

        grouped = grouped or Grouped()
        return KGroupedStream(
            self._builder,
            self,
            key_serde=grouped.key_serde or self.key_serde,
            value_serde=grouped.value_serde or self.value_serde,
            repartition_name=grouped.name,
            repartition_required=self.repartition_required,
        )

    def group_by(self, selector: Callable[[Any, Any], Any], grouped: Grouped | None = None) -> KGroupedStream:
        """Group by ``selector(key, value)``: a ``select_key`` then a grouping with repartition."""
        grouped = grouped or Grouped()
        # the grouping's name also names the key selector (Kafka's KStreamImpl.groupBy)
        rekeyed = self._op(
            "KSTREAM-KEY-SELECT-",
            "select_key",
            selector,
            grouped.name,
            key_changed=True,
            key_serde_kept=False,
        )
        return rekeyed.group_by_key(grouped)

    def to_table(self, named: Named | str | None = None, materialized: Materialized | None = None) -> KTable:
        """Interpret the stream as a changelog: the latest value per key (None deletes)."""
        from platform_streams.dsl.ktable import stream_to_table

        return stream_to_table(self, name_of(named), materialized)

    # -- joins ----------------------------------------------------------------------------
    # ONE entry point per join kind, shared by two implementations (coordinated, do not split):
    #  * the third argument is a JoinWindows -> a windowed KStream-KStream join
    #    (platform_streams.dsl.stream_stream_join.stream_stream_join; windowing owner);
    #  * anything else (KTable + Joined, GlobalKTable + key selector) -> a table join
    #    (platform_streams.dsl.joins.stream_join; tables owner).
    # Both receive ``(self, other, joiner, *args, kind=..., **kwargs)`` with kind one of
    # "inner" | "left" | "outer".

    def join(self, other: Any, joiner: Callable[..., Any], *args: Any, **kwargs: Any) -> KStream:
        """Inner join with a KStream (``JoinWindows`` [, ``StreamJoined``]), a KTable or a GlobalKTable."""
        return self._join("inner", other, joiner, args, kwargs)

    def left_join(self, other: Any, joiner: Callable[..., Any], *args: Any, **kwargs: Any) -> KStream:
        """Left join; with a KStream, unmatched records are emitted once their window closes."""
        return self._join("left", other, joiner, args, kwargs)

    def outer_join(self, other: Any, joiner: Callable[..., Any], *args: Any, **kwargs: Any) -> KStream:
        """Outer join with a KStream (``JoinWindows``): unmatched records of both sides when windows close."""
        return self._join("outer", other, joiner, args, kwargs)

    def _join(
        self, kind: str, other: Any, joiner: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> KStream:
        from platform_streams.dsl.windows import JoinWindows

        windows = args[0] if args else kwargs.get("windows")
        if isinstance(windows, JoinWindows):
            from platform_streams.dsl.stream_stream_join import stream_stream_join

            return stream_stream_join(self, other, joiner, *args, kind=kind, **kwargs)
        from platform_streams.dsl.joins import stream_join  # type: ignore[import-not-found,unused-ignore]

        result: KStream = stream_join(self, other, joiner, *args, kind=kind, **kwargs)
        return result

    def repartition_for_join(
        self, base: str, key_serde: Serde | None, value_serde: Serde | None, *, user_named: bool
    ) -> KStream:
        """This stream through a repartition topic for a join (Kafka's ``repartitionForJoin``).

        The nodes' indices are drawn every time (Java does, for topology compatibility), but
        an unnamed join (``base`` is this stream's node name) reuses the repartition topic of
        this stream's previous join: a re-keyed stream joined twice reads one topic.
        ``user_named``: the join was named (its repartition topic then counts as named).
        """
        cached = self._join_repartition
        if cached is not None and base == self.node_name and cached[0] == base:
            # Kafka's createRepartitionedSource runs (and records the name) every time
            if not user_named:
                self._builder.implicit_names.add_repartition(next(iter(cached[1].source_topics)))
            self._builder.names.repartition_names()
            return cached[1]
        stream = self._through_repartition_topic(
            base,
            user_named=user_named,
            key_serde=key_serde,
            value_serde=value_serde,
            num_partitions=None,
            partitioner=None,
        )
        self._join_repartition = (base, stream)
        return stream

    # -- internals ------------------------------------------------------------------------

    @property
    def builder(self) -> StreamsBuilder:
        return self._builder

    def _op(
        self,
        prefix: str,
        kind: OpKind,
        fn: Callable[..., Any],
        named: Named | str | None,
        *,
        key_changed: bool = False,
        serdes_kept: bool = True,
        key_serde_kept: bool = True,
        value_serde_kept: bool = True,
    ) -> KStream:
        if not callable(fn):
            raise TopologyError(f"{kind} needs a callable, got {fn!r}")
        name = self._builder.names.name(prefix, name_of(named))
        self._builder.plan.add_stateless(name, StatelessOp(kind, (fn,)), self.node_name)
        return KStream(
            self._builder,
            name,
            key_serde=self.key_serde if serdes_kept and key_serde_kept else None,
            value_serde=self.value_serde if serdes_kept and value_serde_kept else None,
            repartition_required=self.repartition_required or key_changed,
            source_topics=self.source_topics,
            key_changer=name if key_changed else (self.key_changer if kind in _KEY_AND_VALUE_KEPT else None),
        )

    def _through_repartition_topic(
        self,
        base: str,
        *,
        key_serde: Serde | None,
        value_serde: Serde | None,
        num_partitions: int | None,
        partitioner: Callable[[str, Any, Any, int], int | None] | None,
        user_named: bool,
        node_names: tuple[str, str, str] | None = None,
        optimizable: bool = True,
    ) -> KStream:
        """Insert filter(non-null key) -> sink -> internal topic -> source; return the new stream.

        Naming follows Kafka Streams' ``createRepartitionedSource``: three indices are always
        burned (sink, filter, source, in that order); a generated ``base`` (``KSTREAM-...-<10
        digits>``) uses the generated node names, a user-given one ``<topic>-filter/-sink/-source``.
        ``node_names`` = (filter, sink, source) overrides both. ``optimizable`` repartitions (those of
        groupings, joins, ``to_table``; not ``repartition()``) may be merged by the optimizer.
        ``user_named``: the operator was named (else the topic is recorded as unnamed, KIP-1111).
        """
        builder = self._builder
        topic = base if base.endswith("-repartition") else f"{base}-repartition"
        if not user_named:
            builder.implicit_names.add_repartition(topic)
        gen_sink, gen_filter, gen_source = builder.names.repartition_names()
        if node_names is not None:
            filter_name, sink_name, source_name = node_names
        elif _GENERATED_NAME.fullmatch(base):
            filter_name, sink_name, source_name = gen_filter, gen_sink, gen_source
        else:
            filter_name, sink_name, source_name = f"{topic}-filter", f"{topic}-sink", f"{topic}-source"
        builder.plan.add(
            OptimizableRepartitionNode(
                source_name,
                [self.node_name],
                topic=topic,
                filter=filter_name,
                sink=sink_name,
                key_changer=self.key_changer if optimizable else None,
                key_serde=key_serde,
                value_serde=value_serde,
                num_partitions=num_partitions,
                partitioner=partitioner,
            )
        )
        return KStream(
            builder,
            source_name,
            key_serde=key_serde,
            value_serde=value_serde,
            source_topics=frozenset({topic}),
        )


#: operators that keep both key and value: a repartition below them may still be merged
_KEY_AND_VALUE_KEPT = frozenset({"filter", "filter_not", "peek"})

#: Kafka Streams' test for a generated (not user-given) repartition name.
_GENERATED_NAME = re.compile(r"KSTREAM.*-[0-9]{10}")


class BranchedKStream:
    """The result of ``KStream.split()``: add branches, then take the map of streams."""

    def __init__(self, stream: KStream, node_name: str, prefix: str) -> None:
        self._stream = stream
        self._node_name = node_name
        self._prefix = prefix
        self._predicates: list[Predicate] = []
        self._result: dict[str, KStream | None] = {}

    def branch(self, predicate: Predicate, branched: Branched | None = None) -> BranchedKStream:
        """Records matching ``predicate`` (and no earlier branch) go to this branch."""
        self._predicates.append(predicate)
        self._add_child(branched, str(len(self._predicates)))
        self._set_op(has_default=False)
        return self

    def default_branch(self, branched: Branched | None = None) -> dict[str, KStream | None]:
        """Records matching no predicate go to the default branch; returns all branches."""
        self._add_child(branched, "0")
        self._set_op(has_default=True)
        return dict(self._result)

    def no_default_branch(self) -> dict[str, KStream | None]:
        """Records matching no predicate are dropped; returns all branches."""
        return dict(self._result)

    def _set_op(self, *, has_default: bool) -> None:
        node = self._stream.builder.plan.node(self._node_name)
        assert isinstance(node, ProcessorGraphNode)
        node.op = StatelessOp("branch", tuple(self._predicates), has_default)

    def _add_child(self, branched: Branched | None, index: str) -> None:
        branched = branched or Branched()
        child_name = self._prefix + (branched.name or index)
        topology = self._stream.builder.plan
        topology.add_stateless(child_name, StatelessOp("passthrough"), self._node_name)
        branch_stream = KStream(
            self._stream.builder,
            child_name,
            key_serde=self._stream.key_serde,
            value_serde=self._stream.value_serde,
            repartition_required=self._stream.repartition_required,
            source_topics=self._stream.source_topics,
        )
        # Kafka's BranchedKStreamImpl.createBranch: a function's None result and a consumer's
        # branch are left out of the result map
        if branched.chain is not None:
            chained = branched.chain(branch_stream)
            if chained is not None:
                self._result[child_name] = chained
        elif branched.consumer is not None:
            branched.consumer(branch_stream)
        else:
            self._result[child_name] = branch_stream
