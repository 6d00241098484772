"""Processor wrappers (Kafka Streams' KIP-1112, ``processor.wrapper.class``).

A :class:`ProcessorWrapper` set as ``StreamsConfig.processor_wrapper`` is handed the supplier
of every processor a topology gets -- ``Topology.add_processor`` and every DSL operator,
stateless ones included -- and returns the supplier the topology keeps: one place to trace,
time or guard each processor of an application. As in Kafka, the wrapper sees the processor's
name and its supplier, and the stores the wrapped supplier's ``stores()`` returns are
connected to the processor (a wrapper may add stores of its own).

The DSL's own processors work on fields (``NodeProcessor``) and stateless operators are
normally compiled into one function per record; with a wrapper, each DSL supplier hands out
a Processor-API :class:`Processor` (:class:`NodeAsProcessor`), so a wrapper written against
the public API works on every node. A wrapper that returns the processor it was given costs
nothing at run time for stateful nodes (the runtime runs the node itself again); stateless
operators are no longer fused into the source's code while a wrapper is configured.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from platform_streams.dotted_paths import import_dotted
from platform_streams.processor.api import Processor, ProcessorContext
from platform_streams.processor.node import NodeProcessor
from platform_streams.processor.record import Headers, Record
from platform_streams.topology.nodes import ProcessorNode, StatelessOp

__all__ = [
    "NodeAsProcessor",
    "ProcessorWrapper",
    "StatelessOpProcessor",
    "dsl_supplier",
    "make_processor_wrapper",
    "resolve_processor_wrapper",
]


class ProcessorWrapper(ABC):
    """Wraps the supplier of every processor of a topology (Kafka's ``ProcessorWrapper``).

    A supplier is a callable returning a new processor per task; it may have ``stores()``
    returning the store builders to connect to the processor. The returned supplier is
    what the topology keeps (Kafka's ``WrappedProcessorSupplier``)."""

    def configure(self, configs: Mapping[str, Any]) -> None:  # noqa: B027 - optional, as in Kafka
        """Called once with the application's settings when the wrapper is made from a class."""

    @abstractmethod
    def wrap_processor_supplier(self, processor_name: str, supplier: Callable[[], Any]) -> Callable[[], Any]:
        """The supplier to use for processor ``processor_name`` (its supplier makes
        :class:`~platform_streams.processor.Processor` s)."""

    @abstractmethod
    def wrap_fixed_key_processor_supplier(
        self, processor_name: str, supplier: Callable[[], Any]
    ) -> Callable[[], Any]:
        """The supplier to use for fixed-key processor ``processor_name`` (``process_values``:
        its supplier makes :class:`~platform_streams.processor.FixedKeyProcessor` s)."""


def resolve_processor_wrapper(value: Any) -> Any:
    """A wrapper setting as given: an instance, a class, or a dotted path naming a class
    (imported here, so a wrong name fails when the config is made, as Kafka's does)."""
    if value is None or isinstance(value, ProcessorWrapper):
        return value
    if isinstance(value, str):
        value = import_dotted(value, "a ProcessorWrapper class")
    if isinstance(value, type) and issubclass(value, ProcessorWrapper):
        return value
    raise ValueError(
        f"must be a ProcessorWrapper (instance, class or dotted path), got {type(value).__name__}"
    )


def make_processor_wrapper(setting: Any, configs: Mapping[str, Any]) -> ProcessorWrapper | None:
    """The wrapper one topology uses: a class is instantiated and configured with the
    application's settings (Kafka's ``getConfiguredInstance``); an instance is used as is."""
    if setting is None or isinstance(setting, ProcessorWrapper):
        return setting
    wrapper = setting()
    wrapper.configure(configs)
    return wrapper


class _DslSupplier:
    """A DSL node's supplier as a wrapper sees it: it makes Processor-API processors and its
    ``stores()`` are the stores the DSL gave the node (Kafka's DSL suppliers' ``stores()``)."""

    def __init__(self, supplier: Callable[[], Any], stores: Callable[[], list[Any]]) -> None:
        self._supplier = supplier
        self._stores = stores

    def __call__(self) -> Any:
        made = self._supplier()
        return NodeAsProcessor(made) if isinstance(made, NodeProcessor) else made

    def stores(self) -> list[Any]:
        return self._stores()


def dsl_supplier(supplier: Callable[[], Any], stores: Callable[[], list[Any]]) -> Callable[[], Any]:
    """``supplier`` of a DSL node, handed to a wrapper (see :class:`_DslSupplier`)."""
    return _DslSupplier(supplier, stores)


class NodeAsProcessor(Processor):
    """A DSL node processor seen through the Processor API, for wrappers. The runtime
    unwraps it (:func:`~platform_streams.processor.node.as_node_processor`) when a wrapper
    handed it back unchanged."""

    def __init__(self, node: NodeProcessor) -> None:
        self.node = node

    def init(self, context: ProcessorContext) -> None:
        self.node.init(context)  # type: ignore[arg-type]  # the task's NodeContext

    def process(self, record: Record) -> None:
        self.node.process(record.key, record.value, record.timestamp, record.headers)

    def close(self) -> None:
        self.node.close()


class StatelessOpProcessor(NodeProcessor):
    """A stateless DSL operator (filter, map, branch, ...) as a node of its own, for a
    topology with a wrapper (its supplier has to hand out a processor)."""

    def __init__(self, name: str, op: StatelessOp) -> None:
        self.name = name
        self.op = op

    def init(self, context: Any) -> None:
        from platform_streams.processor.plain_nodes import plain_entry

        super().init(context)
        children = dict(context.children)
        node = ProcessorNode(self.name, [], op=self.op, children=list(children))
        self._run = plain_entry(node, children.__getitem__)

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        self._run(key, value, timestamp, headers)
