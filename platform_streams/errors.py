"""The exception tree of platform_streams.

Every error the library raises on purpose derives from :class:`StreamsError`, so an
application can catch "anything Streams did" in one ``except`` clause, and narrower
branches exist where callers actually react differently (retry, rebalance, wipe state,
fix config). Where a stdlib base makes ``except ValueError``/``except TimeoutError`` code
keep working, the class inherits from it too.

::

    StreamsError
    ├── StreamsConfigError (+ ValueError)
    ├── TopologyError
    │   ├── MissingSourceTopicError
    │   ├── MissingSinkTopicError
    │   └── CoPartitioningError
    ├── SerializationError
    │   └── DeserializationError
    ├── ProcessorError
    ├── StreamsStateError
    │   └── IllegalStateError
    ├── InvalidStateStoreError
    │   └── InvalidStateStorePartitionError
    ├── TaskMigratedError
    │   └── ProducerFencedError
    ├── TaskCorruptedError
    ├── BrokerError
    │   ├── BrokerUnreachableError
    │   └── UnsupportedBrokerFeatureError
    └── StreamsTimeoutError (+ TimeoutError)

Record coordinates (topic/partition/offset) and task identifiers are optional keyword
attributes: they are filled in by whichever layer knows them, and they are what an
operator needs to find the poison record or the broken task.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = [
    "BrokerError",
    "BrokerUnreachableError",
    "CoPartitioningError",
    "DeserializationError",
    "IllegalStateError",
    "InvalidStateStoreError",
    "InvalidStateStorePartitionError",
    "MissingSinkTopicError",
    "MissingSourceTopicError",
    "ProcessorError",
    "ProducerFencedError",
    "SerializationError",
    "StreamsConfigError",
    "StreamsError",
    "StreamsStateError",
    "StreamsTimeoutError",
    "TaskCorruptedError",
    "TaskMigratedError",
    "TopologyError",
    "UnsupportedBrokerFeatureError",
]


def _where(topic: str | None, partition: int | None, offset: int | None) -> str:
    """Render record coordinates as ``topic-partition@offset`` for error messages."""
    if topic is None and partition is None and offset is None:
        return ""
    text = topic if topic is not None else "?"
    if partition is not None:
        text += f"-{partition}"
    if offset is not None:
        text += f"@{offset}"
    return text


def _rebuild(cls: type[StreamsError], args: tuple[object, ...], state: dict[str, object]) -> StreamsError:
    """Recreate an exception without re-running ``__init__`` (whose signature differs from args)."""
    exc = cls.__new__(cls)
    Exception.__init__(exc, *args)
    exc.__dict__.update(state)
    return exc


class StreamsError(Exception):
    """Root of every error raised deliberately by platform_streams."""

    def __reduce__(self) -> tuple[object, ...]:
        # Subclasses take structured keyword arguments but store a formatted message in
        # ``args``; the default reduce would call ``cls(*args)`` and scramble them. Errors
        # must survive pickling because they cross process boundaries (workers, Dagster).
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


class StreamsConfigError(StreamsError, ValueError):
    """Raised for invalid configuration found outside pydantic validation (e.g. unreadable file)."""


# --------------------------------------------------------------------------- topology


class TopologyError(StreamsError):
    """Raised when a topology is invalid: duplicate node name, unknown parent/store, or a cycle."""


class MissingSourceTopicError(TopologyError):
    """Raised when source topics of the topology do not exist on the broker."""

    def __init__(self, topics: Iterable[str], message: str | None = None) -> None:
        self.topics: list[str] = sorted(topics)
        # a broker lists only the topics the principal may DESCRIBE (READ implies it)
        super().__init__(
            message
            or f"source topic(s) do not exist: {', '.join(self.topics)} "
            "(or the principal is not allowed to READ them)"
        )


class MissingSinkTopicError(TopologyError):
    """Raised at start when output topics of the topology do not exist on the broker.

    Topic auto-creation is off on every client, so records for such a topic could never be
    written: the application would look healthy while it retried and fell out of its group.
    """

    def __init__(self, topics: Iterable[str], message: str | None = None) -> None:
        self.topics: list[str] = sorted(topics)
        super().__init__(
            message
            or f"sink topic(s) do not exist: {', '.join(self.topics)}; create them first "
            "(or allow the principal to WRITE them)"
        )


class CoPartitioningError(TopologyError):
    """Raised when topics that must be co-partitioned have different partition counts."""

    def __init__(self, partition_counts: Mapping[str, int], message: str | None = None) -> None:
        self.partition_counts: dict[str, int] = dict(partition_counts)
        detail = ", ".join(f"{t}={n}" for t, n in sorted(self.partition_counts.items()))
        super().__init__(
            message or f"co-partitioned topics must have the same number of partitions: {detail}"
        )


# --------------------------------------------------------------------------- records


class SerializationError(StreamsError):
    """Raised when a serde fails to serialize a key or value."""

    def __init__(
        self,
        message: str = "serialization failed",
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        where = _where(topic, partition, offset)
        super().__init__(f"{message} ({where})" if where else message)


class DeserializationError(SerializationError):
    """Raised when a serde fails to deserialize a consumed key or value."""

    def __init__(
        self,
        message: str = "deserialization failed",
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        super().__init__(message, topic=topic, partition=partition, offset=offset)


class ProcessorError(StreamsError):
    """Raised when user processor code raised; ``__cause__`` is the original exception."""

    def __init__(
        self,
        message: str = "processor failed",
        *,
        node: str | None = None,
        task_id: str | None = None,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.node = node
        self.task_id = task_id
        self.topic = topic
        self.partition = partition
        self.offset = offset
        parts = []
        if node is not None:
            parts.append(f"node={node}")
        if task_id is not None:
            parts.append(f"task={task_id}")
        where = _where(topic, partition, offset)
        if where:
            parts.append(f"record={where}")
        super().__init__(f"{message} ({', '.join(parts)})" if parts else message)


# --------------------------------------------------------------------------- lifecycle & state


class StreamsStateError(StreamsError):
    """Raised when an API is called while the application is in the wrong lifecycle state."""


class IllegalStateError(StreamsStateError):
    """Raised for an illegal state transition or call order (Java's IllegalStateException)."""


class InvalidStateStoreError(StreamsError):
    """Raised when a state store is not available: unknown, closed, migrating, or restoring."""

    def __init__(self, message: str = "state store not available", *, store: str | None = None) -> None:
        self.store = store
        super().__init__(f"{message} (store={store})" if store is not None else message)


class InvalidStateStorePartitionError(InvalidStateStoreError):
    """Raised when a store is queried for a partition that this instance does not host."""

    def __init__(
        self,
        message: str = "state store partition not available",
        *,
        store: str | None = None,
        partition: int | None = None,
    ) -> None:
        self.partition = partition
        super().__init__(
            f"{message} (partition={partition})" if partition is not None else message, store=store
        )


# --------------------------------------------------------------------------- tasks


class TaskMigratedError(StreamsError):
    """Raised when a task was lost to a rebalance; recoverable by rejoining the group."""

    def __init__(self, message: str = "task migrated", *, task_id: str | None = None) -> None:
        self.task_id = task_id
        super().__init__(f"{message} (task={task_id})" if task_id is not None else message)


class ProducerFencedError(TaskMigratedError):
    """Raised when a newer producer with the same transactional.id fenced ours (a zombie)."""


class TaskCorruptedError(StreamsError):
    """Raised when task state is inconsistent and must be wiped and restored from changelogs."""

    def __init__(self, task_ids: Iterable[str], message: str = "task state corrupted") -> None:
        self.task_ids: list[str] = list(task_ids)
        super().__init__(f"{message}: {', '.join(self.task_ids)}" if self.task_ids else message)


# --------------------------------------------------------------------------- broker


class BrokerError(StreamsError):
    """Raised for a broker-side failure; ``code`` is the Kafka error name when known."""

    def __init__(self, message: str, *, code: str | None = None, retriable: bool = False) -> None:
        self.code = code
        self.retriable = retriable
        super().__init__(f"{message} [{code}]" if code is not None else message)


class BrokerUnreachableError(BrokerError):
    """Raised when no bootstrap address accepts a connection: nothing was sent to a broker.

    ``bootstrap_servers`` is the address list that was tried, ``reason`` what each address
    answered (``127.0.0.1:9092 connection refused``), ``waited_s`` how long it was retried.
    """

    def __init__(self, bootstrap_servers: str, reason: str, waited_s: float) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.reason = reason
        self.waited_s = waited_s
        super().__init__(
            f"cannot reach the Kafka broker at bootstrap.servers={bootstrap_servers}: {reason} "
            f"(TCP connect retried for {waited_s:.1f}s)",
            retriable=True,
        )


class UnsupportedBrokerFeatureError(BrokerError):
    """Raised when the broker lacks a feature we need (e.g. DeleteRecords)."""

    def __init__(self, feature: str, message: str | None = None, *, code: str | None = None) -> None:
        self.feature = feature
        super().__init__(message or f"broker does not support {feature}", code=code, retriable=False)


class StreamsTimeoutError(StreamsError, TimeoutError):
    """Raised when a blocking operation (close, commit, metadata, restore) exceeds its deadline."""
