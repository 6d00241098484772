"""The fixed-key Processor API (Kafka Streams' KIP-820): processors that cannot change the key.

``KStream.process_values`` runs a :class:`FixedKeyProcessor`. Because its records are
:class:`FixedKeyRecord` s (no ``with_key``) and its context forwards only those, the key of
every output record is the key of an input record: the stream stays partitioned as it was
and, unlike after ``process``, no repartition is needed before a grouping or join.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.processor.api import Cancellable, PunctuationType, Punctuator
from platform_streams.processor.node import NodeProcessor
from platform_streams.processor.record import Headers, Record, RecordFields, RecordMetadata

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig
    from platform_streams.processor.context import NodeContext
    from platform_streams.processor.task_id import TaskId

__all__ = [
    "FixedKeyProcessor",
    "FixedKeyProcessorAdapter",
    "FixedKeyProcessorContext",
    "FixedKeyProcessorSupplier",
    "FixedKeyRecord",
    "FixedKeySupplier",
]


class FixedKeyRecord(RecordFields):
    """A record whose key is fixed: value, timestamp and headers may change (``with_*``), the
    key never (there is no ``with_key``, and the context forwards only these)."""

    __slots__ = ()


class FixedKeyProcessorContext:
    """A processor context whose ``forward`` takes only :class:`FixedKeyRecord` s.

    Everything but forwarding is the node's ordinary context (stores, punctuation, metadata).
    """

    def __init__(self, context: NodeContext) -> None:
        self._context = context

    @property
    def application_id(self) -> str:
        return self._context.application_id

    @property
    def task_id(self) -> TaskId:
        return self._context.task_id

    @property
    def config(self) -> StreamsConfig:
        return self._context.config

    def forward(self, record: FixedKeyRecord, child_name: str | None = None) -> None:
        """Send ``record`` (with its input key) to all children, or to the one named ``child_name``."""
        if not isinstance(record, FixedKeyRecord):
            raise TypeError(
                f"a fixed-key processor forwards FixedKeyRecord only (the key cannot change), "
                f"got {type(record).__name__}"
            )
        if child_name is None:
            self._context.forward_fn()(record.key, record.value, record.timestamp, record.headers)
        else:
            self._context.forward(
                Record(record.key, record.value, record.timestamp, record.headers), child_name
            )

    def schedule(
        self, interval_ms: int, punctuation_type: PunctuationType, callback: Punctuator
    ) -> Cancellable:
        return self._context.schedule(interval_ms, punctuation_type, callback)

    def get_state_store(self, name: str) -> Any:
        return self._context.get_state_store(name)

    def record_metadata(self) -> RecordMetadata | None:
        return self._context.record_metadata()

    def current_stream_time_ms(self) -> int:
        return self._context.current_stream_time_ms()

    def current_system_time_ms(self) -> int:
        return self._context.current_system_time_ms()

    def commit(self) -> None:
        self._context.commit()


class FixedKeyProcessor(ABC):
    """A user-written processor that may change values but not keys (``FixedKeyProcessor``)."""

    context: FixedKeyProcessorContext

    def init(self, context: FixedKeyProcessorContext) -> None:
        """Keep the context; override to look up stores or schedule punctuators."""
        self.context = context

    @abstractmethod
    def process(self, record: FixedKeyRecord) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional hook, as in Kafka Streams
        """Release resources; stores are closed by the runtime, not here."""


#: Makes a new fixed-key processor per task (Kafka Streams' FixedKeyProcessorSupplier).
FixedKeyProcessorSupplier = Callable[[], FixedKeyProcessor]


class FixedKeySupplier:
    """The supplier of a ``process_values`` node: ``supplier()``'s fixed-key processor run in
    the field-based graph. A processor wrapper wraps ``supplier`` (Kafka's
    ``wrapFixedKeyProcessorSupplier``); ``stores()`` are the user supplier's."""

    def __init__(self, supplier: Callable[[], Any], node_name: str) -> None:
        self.supplier = supplier
        self.node_name = node_name

    def __call__(self) -> FixedKeyProcessorAdapter:
        return FixedKeyProcessorAdapter(self.supplier(), self.node_name)

    def stores(self) -> Any:
        provided = getattr(self.supplier, "stores", None)
        return provided() if callable(provided) else None


class FixedKeyProcessorAdapter(NodeProcessor):
    """Runs a :class:`FixedKeyProcessor` inside the field-based graph."""

    def __init__(self, processor: object, node_name: str) -> None:
        if not isinstance(processor, FixedKeyProcessor):
            raise TypeError(
                f"processor supplier of {node_name!r} returned {type(processor).__name__}; "
                "process_values needs a platform_streams.processor.FixedKeyProcessor"
            )
        self.processor = processor

    def init(self, context: NodeContext) -> None:
        super().init(context)
        self.processor.init(FixedKeyProcessorContext(context))

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        self.processor.process(FixedKeyRecord(key, value, timestamp, headers))

    def close(self) -> None:
        self.processor.close()
