"""The Processor API: what a user-written processor implements and what it may call.

Mirrors Kafka Streams' ``org.apache.kafka.streams.processor.api``: a processor is
initialised with a :class:`ProcessorContext`, receives :class:`Record` objects in
``process`` and forwards to its children through the context. Punctuation
(``schedule``) calls back on stream time or wall-clock time.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from platform_streams.processor.record import Record, RecordMetadata
from platform_streams.processor.task_id import TaskId

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig


class PunctuationType(enum.Enum):
    """What drives a punctuator: the task's stream time, or the wall clock."""

    STREAM_TIME = "stream_time"
    WALL_CLOCK_TIME = "wall_clock_time"


#: A punctuation callback receives the timestamp (ms) it fires for.
Punctuator = Callable[[int], None]


class Cancellable(Protocol):
    """Handle returned by :meth:`ProcessorContext.schedule`."""

    def cancel(self) -> None: ...


class TaskIdentity(ABC):
    """The application, task and configuration a context serves: what the processor
    context and the store context (state/store_context.py) both tell."""

    @property
    @abstractmethod
    def application_id(self) -> str: ...

    @property
    @abstractmethod
    def task_id(self) -> TaskId: ...

    @property
    @abstractmethod
    def config(self) -> StreamsConfig: ...


class ProcessorContext(TaskIdentity):
    """What a processor may ask of the task that runs it."""

    @abstractmethod
    def forward(self, record: Record, child_name: str | None = None) -> None:
        """Send ``record`` to all children, or to the one named ``child_name``."""

    @abstractmethod
    def schedule(
        self, interval_ms: int, punctuation_type: PunctuationType, callback: Punctuator
    ) -> Cancellable:
        """Call ``callback`` every ``interval_ms`` of stream or wall-clock time."""

    @abstractmethod
    def get_state_store(self, name: str) -> Any:
        """The store ``name``, which must be connected to this processor in the topology."""

    @abstractmethod
    def record_metadata(self) -> RecordMetadata | None:
        """Topic/partition/offset of the input record being processed; None inside punctuation."""

    @abstractmethod
    def current_stream_time_ms(self) -> int:
        """Largest timestamp the task has seen (-1 before the first record)."""

    @abstractmethod
    def current_system_time_ms(self) -> int:
        """Wall-clock time; mockable in the TopologyTestDriver."""

    @abstractmethod
    def commit(self) -> None:
        """Ask the runtime to commit at its next opportunity."""


class Processor(ABC):
    """A user-written processor (Kafka Streams' ``Processor<KIn, VIn, KOut, VOut>``)."""

    context: ProcessorContext

    def init(self, context: ProcessorContext) -> None:
        """Keep the context; override to look up stores or schedule punctuators."""
        self.context = context

    @abstractmethod
    def process(self, record: Record) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional hook, as in Kafka Streams
        """Release resources; stores are closed by the runtime, not here."""


#: Something that makes a new processor per task (Kafka Streams' ProcessorSupplier).
ProcessorSupplier = Callable[[], Processor]
