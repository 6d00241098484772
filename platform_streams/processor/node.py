"""Field-based processors: the DSL's internal fast path between nodes.

A Kafka Streams ``Record`` per hop costs an allocation per record per node. The
DSL's own processors (aggregations, joins, ...) implement :class:`NodeProcessor`
instead and receive ``(key, value, timestamp, headers)`` as arguments; a
user-written :class:`~platform_streams.processor.api.Processor` is adapted by
:class:`RecordProcessorAdapter` so both kinds wire into the same graph.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from platform_streams.processor.api import Processor
from platform_streams.processor.record import Headers, Record

if TYPE_CHECKING:
    from platform_streams.processor.context import NodeContext

#: The call signature of every edge in a running graph: (key, value, timestamp, headers).
Forward = Callable[[Any, Any, int, Headers], None]

#: ``(exception, node name) -> let it pass``: what a node's guard calls when its own work
#: raised (Kafka Streams' ``ProcessorNode.process``). It returns False once the processing
#: exception handler said CONTINUE: the node drops the record and its parent goes on with
#: its next child. It returns True for what no node handles (an error a node below already
#: decided on, a sink's failure, an internal error, an error outside a record's processing):
#: the guard re-raises it unchanged. On FAIL it raises the error that names the node.
NodeFailure = Callable[[Exception, str], bool]

#: the attribute under which a function names its result as one expression (see
#: :func:`with_expression`)
_EXPRESSION = "_fused_expression"

F = TypeVar("F", bound=Callable[..., Any])


def with_expression(function: F, expression: str) -> F:
    """Mark ``function`` as equal to ``expression``, a ``str.format`` text over its parameter
    names (``count_adder``: ``"{aggregate} + 1"``), for fused code to write in line.

    Only for the library's own functions, pure and exact: a fragment then spares a
    Python call a record (a count's aggregator, ~2 % of its CPU a record).
    """
    setattr(function, _EXPRESSION, expression)
    return function


def expression_of(function: Any) -> str | None:
    """The expression :func:`with_expression` gave ``function`` (None: none, or no function)."""
    expression: str | None = getattr(function, _EXPRESSION, None)
    return expression


def call_text(function: Any, name: str, **arguments: str) -> str:
    """Fused code's text for calling ``function`` (bound as ``name``) with ``arguments``
    (parameter name -> the text of its value, in the call's order): the expression of
    :func:`with_expression` where it has one, else the call."""
    expression = expression_of(function)
    if expression is None:
        return f"{name}({', '.join(arguments.values())})"
    return f"({expression.format(**arguments)})"


@dataclass(frozen=True)
class FusedFragment:
    """A processor's per-record work as source text, for fused code to run in line.

    ``template`` is Python statements at indent 0 (``str.format`` fields ``{k}``, ``{v}``,
    ``{ts}``: the record's variables, ``{n}``: a suffix that keeps the fragment's own
    variables unique, ``{step}``/``{process}``: the processor's ``fused_step`` (``None``
    without one) and its entry, and one field per object of ``bound``). It must do exactly
    what the processor does with the record (``process(k, v, ts, h)``, or with a step
    ``if k is None or v is None or not step(k, v, ts): process(k, v, ts, h)``).
    Why: the calls it spares (the step, the cache's ``replace``, the closure's set-up)
    are a sixth of a count's CPU per record (bench/RESULTS.md).
    """

    template: str
    bound: Mapping[str, Any]
    #: statements (same fields) whose results stay valid while the task processes a batch of
    #: records: a batch runs them once, before its first record; one record's code, before it
    prologue: str = ""


class NodeProcessor(ABC):
    """A processor that works on fields; ``self.forward`` sends to all children."""

    context: NodeContext
    forward: Forward
    #: set by ``init`` where a record with a non-None key and value can be processed by one
    #: call, ``fused_step(key, value, timestamp) -> done``: the task's fused code then calls it
    #: instead of ``process`` and calls ``process`` only when it returns False
    #: (:mod:`~platform_streams.processor.fusion`). It must do all that ``process`` would.
    fused_step: Callable[[Any, Any, int], bool] | None = None
    #: set by ``init`` where the processor's work on a record can be written in line
    #: (:class:`FusedFragment`); fused code then runs it instead of calling the step
    fused_fragment: FusedFragment | None = None

    def init(self, context: NodeContext) -> None:
        """Bind the context and the children fan-out; override to fetch stores."""
        self.context = context
        self.forward = context.forward_fn()

    @abstractmethod
    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (stores are closed by the runtime)."""


class RecordProcessorAdapter(NodeProcessor):
    """Runs a Record-based user :class:`Processor` inside the field-based graph."""

    def __init__(self, processor: Processor) -> None:
        self.processor = processor

    def init(self, context: NodeContext) -> None:
        super().init(context)
        self.processor.init(context)

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        self.processor.process(Record(key, value, timestamp, headers))

    def close(self) -> None:
        self.processor.close()


def as_node_processor(made: object, node_name: str) -> NodeProcessor:
    """Accept what a supplier returned: a NodeProcessor, or a Processor to adapt."""
    if isinstance(made, NodeProcessor):
        return made
    from platform_streams.processor.wrapper import NodeAsProcessor

    if isinstance(made, NodeAsProcessor):
        # a DSL node a processor wrapper handed back unchanged: run the node itself
        return made.node
    if isinstance(made, Processor):
        return RecordProcessorAdapter(made)
    raise TypeError(
        f"processor supplier of {node_name!r} returned {type(made).__name__}; "
        "it must return a platform_streams.processor.Processor"
    )
