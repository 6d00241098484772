"""One task's running graph: processors instantiated and wired as direct calls.

Built once per task from the compiled sub-topology. Stateless chains are fused
(see :mod:`platform_streams.processor.fusion`), or with ``fusion=False`` run as plain
closures (:mod:`platform_streams.processor.plain_nodes`); stateful and user processors are
called through their ``process`` method; sinks serialize and hand records to the
task's :class:`RecordCollector`, marking what fails there as a sink failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from platform_streams.processor.context import FusePair, NodeContext, TaskContext
from platform_streams.processor.fused_source import Batch, compile_batch, compile_source
from platform_streams.processor.fusion import (
    FastSerializer,
    PairForward,
    PassBytes,
    compile_entry,
    compile_pair_entry,
    mark_sink_failure,
)
from platform_streams.processor.node import (
    Forward,
    FusedFragment,
    NodeFailure,
    NodeProcessor,
    as_node_processor,
)
from platform_streams.processor.partitioner import PlacementCheck
from platform_streams.processor.plain_nodes import guard_entry, plain_entry, plain_source
from platform_streams.processor.record import Headers
from platform_streams.processor.source_hooks import BatchHooks, SourceHooks
from platform_streams.serde import Bytes, Serde
from platform_streams.topology.compiler import SubTopologyPlan, TopologyPlan
from platform_streams.topology.nodes import ProcessorNode, SinkNode, SourceNode


def _serializer(serde: Serde) -> Any:
    """A call, except that the bytes serde's identity for ``bytes`` is inlined by fused code
    (:class:`PassBytes`); other types still go through it (a str key is a bug). A serde with
    a C-level serializer gives it to fused code (:class:`FastSerializer`)."""
    if type(serde) is Bytes:
        return PassBytes(serde.serialize)
    fast = serde.fast_serializer()
    return FastSerializer(fast, serde.serialize) if fast is not None else serde.serialize


def _deserializer(serde: Serde) -> Callable[[Any], Any] | None:
    """None when deserialization is the identity (bytes in, bytes out), so fused code skips it."""
    return None if type(serde) is Bytes else serde.deserialize


class TaskGraph:
    """The processors of one task and the entry function of each source topic."""

    def __init__(
        self,
        plan: TopologyPlan,
        sub: SubTopologyPlan,
        task: TaskContext,
        *,
        on_deserialization_error: Callable[[Any, BaseException], None],
        on_invalid_timestamp: Callable[[Any, int], None],
        on_record_lateness: Callable[[int], None] | None = None,
        placement_checks: Mapping[str, PlacementCheck] | None = None,
        batch_hooks: BatchHooks | None = None,
        on_node_failure: NodeFailure | None = None,
    ) -> None:
        self.plan = plan
        self.sub = sub
        self.task = task
        self.nodes = {n.name: n for n in sub.nodes}
        self._app = task.config.application_id
        self._default_key = task.config.default_key_serde
        self._default_value = task.config.default_value_serde
        self._fusion = task.config.fusion
        self._entries: dict[str, Forward] = {}
        self.processors: dict[str, NodeProcessor] = {}
        for node in sub.nodes:
            if isinstance(node, ProcessorNode) and node.supplier is not None:
                self.processors[node.name] = as_node_processor(node.supplier(), node.name)
        self._source_callbacks = (on_deserialization_error, on_invalid_timestamp, on_record_lateness)
        self._placement_checks = placement_checks or {}
        self._batch_hooks = batch_hooks
        #: a node's own error (Kafka Streams' ProcessorNode.process); None: not handled by nodes
        self._node_failure = on_node_failure
        #: physical topic -> function taking one raw record
        self.sources: dict[str, Callable[[Any], None]] = {}
        #: physical topic -> ``(queue, n)`` running the source's record code over ``n`` records
        #: of its queue (fused code and ``batch_hooks`` only: :func:`compile_batch`), for a
        #: sub-topology of one source topic: only a task reading one partition runs a batch
        self.batches: dict[str, Batch] = {}
        self._compile_sources()

    def _compile_sources(self) -> None:
        batch_hooks = self._batch_hooks if len(self.sub.sources_by_topic) == 1 else None
        for topic, source in self.sub.sources_by_topic.items():
            physical = self.plan.physical_topic(topic, self._app)
            hooks = self._hooks(source, physical, self._placement_checks.get(physical))
            if not self._fusion:
                self.sources[physical] = plain_source(source, self.entry, hooks)
                continue
            parts = (source, self.nodes, self._call_target, self._sink_parts, hooks)
            fused = (self._step_of, self._fragment_of, self._node_failure)
            self.sources[physical] = compile_source(*parts, *fused)
            if batch_hooks is not None:
                self.batches[physical] = compile_batch(*parts, batch_hooks, *fused)

    def init(self) -> None:
        """Initialise processors (stores must be initialised first: processors look them up).

        Fused sources are compiled again once a processor offers a ``fused_step`` or a
        ``fused_fragment``: they exist only now, bound to the stores this ``init`` opened."""
        for name, processor in self.processors.items():
            node = self.nodes[name]
            assert isinstance(node, ProcessorNode)
            children = {child: self.entry(child) for child in node.children}
            processor.init(NodeContext(self.task, name, children, node.stores, self._pair_compiler(node)))
        if self._fusion and any(
            p.fused_step is not None or p.fused_fragment is not None for p in self.processors.values()
        ):
            self._compile_sources()

    def _pair_compiler(self, node: ProcessorNode) -> FusePair | None:
        """What compiles ``node``'s children as one ``(key, new, old, timestamp)`` function
        (:meth:`NodeContext.pair_forward_fn`), or None without fusion."""
        if not self._fusion:
            return None

        def fuse(value_type: type[tuple[Any, Any]], first: Callable[[Any], Any]) -> PairForward:
            return compile_pair_entry(
                node, self.nodes, self._call_target, self._sink_parts, value_type, first, self._node_failure
            )

        return fuse

    def _step_of(self, name: str) -> Callable[[Any, Any, int], bool] | None:
        processor = self.processors.get(name)
        return processor.fused_step if processor is not None else None

    def _fragment_of(self, name: str) -> FusedFragment | None:
        processor = self.processors.get(name)
        return processor.fused_fragment if processor is not None else None

    def close(self) -> None:
        for processor in self.processors.values():
            processor.close()

    def entry(self, name: str) -> Forward:
        """The ``(key, value, timestamp, headers)`` function that runs node ``name``, handling
        the node's own errors (``on_node_failure``) as Kafka Streams' ProcessorNode does."""
        fn = self._entries.get(name)
        if fn is None:
            fn = self._entries[name] = self._make_entry(name)
        return fn

    def _call_target(self, name: str) -> Forward:
        """What fused code calls to run node ``name``: a processor's bare ``process`` (fused
        code guards the call in line, :meth:`Emitter.guard`), else :meth:`entry`."""
        processor = self.processors.get(name)
        node = self.nodes[name]
        if processor is not None and isinstance(node, ProcessorNode) and node.op is None:
            return processor.process
        return self.entry(name)

    def _make_entry(self, name: str) -> Forward:
        node = self.nodes[name]
        if isinstance(node, SinkNode):
            return self._sink_entry(node)
        if not isinstance(node, ProcessorNode):
            raise TypeError(f"node {name!r} ({type(node).__name__}) cannot receive records")
        failure = self._node_failure
        if node.op is not None and self._fusion:  # guards itself (Emitter.guard)
            return compile_entry(node, self.nodes, self._call_target, self._sink_parts, failure)
        entry = plain_entry(node, self.entry) if node.op is not None else self.processors[name].process
        return entry if failure is None else guard_entry(entry, name, failure)

    def _hooks(self, source: SourceNode, topic: str, placement_check: PlacementCheck | None) -> SourceHooks:
        on_deserialization_error, on_invalid_timestamp, on_record_lateness = self._source_callbacks
        value_serde = (source.value_serde or self._default_value).for_topic(topic)
        return SourceHooks(
            self.task,
            _deserializer((source.key_serde or self._default_key).for_topic(topic)),
            _deserializer(value_serde),
            on_deserialization_error,
            on_invalid_timestamp,
            on_record_lateness,
            placement_check,
            value_serde.fast_deserializer(),
        )

    def _sink_parts(self, sink: SinkNode) -> tuple[Any, ...] | None:
        """(send, topic, key serializer, value serializer, direct producer) for sinks simple
        enough to inline; the direct producer (or None) is the collector's
        ``direct_producer(topic)``, whose ``_produce`` the sink may call itself."""
        if sink.topic is None or sink.partitioner is not None:
            return None
        collector = self.task.collector
        topic = self.plan.physical_topic(sink.topic, self._app)
        direct = getattr(collector, "direct_producer", None)
        return (
            collector.send,
            topic,
            _serializer((sink.key_serde or self._default_key).for_topic(topic)),
            _serializer((sink.value_serde or self._default_value).for_topic(topic)),
            direct(topic) if direct is not None else None,
        )

    def _sink_entry(self, sink: SinkNode) -> Forward:
        send = self.task.collector.send
        partitioner = sink.partitioner
        extractor = sink.topic_extractor
        fixed_topic = self.plan.physical_topic(sink.topic, self._app) if sink.topic is not None else None
        key_serde = sink.key_serde or self._default_key
        value_serde = sink.value_serde or self._default_value
        if fixed_topic is not None:
            key_serde, value_serde = key_serde.for_topic(fixed_topic), value_serde.for_topic(fixed_topic)
        key_ser, value_ser = key_serde.serialize, value_serde.serialize
        # the extractor names the topic per record: a serde whose bytes depend on the topic (a
        # registry subject) is bound to each topic it names, as Java serdes get the topic on
        # every serialize call
        key_for, value_for = _bound_per_topic(key_serde), _bound_per_topic(value_serde)
        task = self.task
        collector = self.task.collector
        name = sink.name

        def sink_entry(key: Any, value: Any, timestamp: int, headers: Headers) -> None:
            try:
                if fixed_topic is not None:
                    topic = fixed_topic
                    key_bytes, value_bytes = key_ser(key), value_ser(value)
                else:
                    assert extractor is not None
                    topic = extractor(key, value, task.record_metadata())
                    key_bytes, value_bytes = key_for(topic)(key), value_for(topic)(value)
                partition = None
                if partitioner is not None:
                    partition = partitioner(topic, key, value, collector.partition_count(topic))
                send(topic, key_bytes, value_bytes, timestamp, headers, partition)
            except Exception as exc:
                mark_sink_failure(exc, name)  # the production handler's, not the processing one's
                raise

        return sink_entry


def _bound_per_topic(serde: Serde) -> Callable[[str], Callable[[Any], bytes | None]]:
    """``serde.for_topic(topic).serialize`` for each topic, bound once per topic."""
    bound: dict[str, Callable[[Any], bytes | None]] = {}

    def serializer_for(topic: str) -> Callable[[Any], bytes | None]:
        ser = bound.get(topic)
        if ser is None:
            ser = bound[topic] = serde.for_topic(topic).serialize
        return ser

    return serializer_for
