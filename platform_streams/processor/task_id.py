"""Task identity: one task per (sub-topology, partition), named ``<subtopology>_<partition>``;
and what every context tells of the task it serves (:class:`TaskIdentity`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig

__all__ = ["DelegatedTaskIdentity", "TaskId", "TaskIdentity"]


@dataclass(frozen=True, order=True, slots=True)
class TaskId:
    """Identifies a task the way Kafka Streams does (``0_3`` = sub-topology 0, partition 3)."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TaskId:
        """Parse ``"0_3"``; raises ValueError naming the text when it is not a task id."""
        try:
            sub, part = text.split("_", 1)
            return cls(int(sub), int(part))
        except ValueError:
            raise ValueError(f"not a task id (expected '<subtopology>_<partition>'): {text!r}") from None


class TaskIdentity(ABC):
    """The application, task and configuration a context serves: the part the processor
    context (processor/api.py) and the store context (state/store_context.py) share."""

    @property
    @abstractmethod
    def application_id(self) -> str: ...

    @property
    @abstractmethod
    def task_id(self) -> TaskId: ...

    @property
    @abstractmethod
    def config(self) -> StreamsConfig: ...


class DelegatedTaskIdentity(TaskIdentity):
    """The identity of the context this one wraps (``_identity``, set by the subclass):
    a node's context answers for its task, a fixed-key or changelog-registering context
    for the context it wraps."""

    _identity: TaskIdentity

    @property
    def application_id(self) -> str:
        return self._identity.application_id

    @property
    def task_id(self) -> TaskId:
        return self._identity.task_id

    @property
    def config(self) -> StreamsConfig:
        return self._identity.config
