"""What a state store may ask of the task that owns it (Kafka Streams' StateStoreContext).

The contract between the state package and the runtime. The runtime (a
StreamTask, or the TopologyTestDriver's task) implements it; stores only use
these methods, so the state package never depends on the runtime.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from platform_streams.processor.api import TaskIdentity
from platform_streams.processor.record import Headers, RecordMetadata

#: Applies a batch of changelog records (key bytes, value bytes or None for a tombstone)
#: to a store's bytes layer during restoration.
RestoreCallback = Callable[[list[tuple[bytes, bytes | None]]], None]


class TimestampedRestoreCallback:
    """A restore callback that also needs each changelog record's timestamp.

    A versioned store's changelog records carry the version's timestamp as the record
    timestamp (KIP-889), so its restore cannot work from ``(key, value)`` alone. The state
    manager hands such a callback ``apply(batch, timestamps)``; a plain call (a path that
    has no timestamps) is refused instead of restoring wrong versions.
    """

    __slots__ = ("apply",)

    def __init__(self, apply: Callable[[list[tuple[bytes, bytes | None]], list[int]], None]) -> None:
        self.apply = apply

    def __call__(self, batch: list[tuple[bytes, bytes | None]]) -> None:
        raise TypeError("this store restores only with the changelog records' timestamps")


class QuietSend(NamedTuple):
    """Changelog records of one cache flush sent without a delivery report (at-least-once;
    ``runtime/producing/quiet_changelogs.py`` says why and how they are proved written):
    ``produce`` is librdkafka's, called with positional arguments only: ``(topic, value,
    key, partition, None, None, timestamp, headers or None)`` (the two Nones: no callback;
    keyword arguments cost ~0.45 us more a call, bench/RESULTS.md),
    and ``sent(n, complete)`` is called once the flush has sent ``n`` records that way --
    ``complete`` False when it stopped before its last record, which goes through the
    reported :attr:`ChangeSender.send`."""

    produce: Callable[..., None]
    sent: Callable[[int, bool], None]


class ChangeSender(NamedTuple):
    """How the changes of one cache flush reach a store's changelog:
    ``send(topic, key, value, timestamp, headers, partition)`` with this topic, these headers
    and this partition.

    Why not a ``log(key, value, timestamp)`` callable: a flush logs thousands of changes, and
    the runtime's ``send`` is its record collector's own, so the flush calls it directly, one
    Python call per change fewer.
    """

    send: Callable[[str, bytes, bytes | None, int, Headers, int], None]
    topic: str
    headers: Headers
    partition: int
    #: all records of the flush but the last may go this way instead (None: all through ``send``)
    quiet: QuietSend | None = None


class StateStoreContext(TaskIdentity):
    """The task-side services a store needs: identity (:class:`TaskIdentity`), directories,
    changelog, restore."""

    @property
    @abstractmethod
    def state_dir(self) -> Path:
        """This task's directory: ``<state_dir>/<application_id>/<task_id>/`` (created on demand)."""

    @property
    @abstractmethod
    def changelog_partition(self) -> int:
        """The changelog partition this task writes (its input partition)."""

    @abstractmethod
    def register(
        self,
        store: Any,
        restore_callback: RestoreCallback,
        changelog_topic: str | None,
    ) -> None:
        """Register a store with the task's state manager.

        ``changelog_topic`` None means logging is disabled for the store: it is
        not restored and (if persistent) is trusted as-is only under the rules
        of the state manager.
        """

    @abstractmethod
    def log_change(self, store_name: str, key: bytes, value: bytes | None, timestamp: int) -> None:
        """Send one change of ``store_name`` to its changelog partition.

        The runtime adds the headers it needs (e.g. the input offset the change
        was made for) and tracks the written offset for checkpoints.
        """

    def change_sender(self, store_name: str) -> ChangeSender:
        """How to log the changes of ``store_name`` made in one cache flush.

        Why: a flush logs thousands of changes made while the same input record (or none)
        is current; the runtime resolves the topic, partition and headers once for all of
        them. Valid only until the current record changes (use it within one flush). This
        default goes through :meth:`log_change` (the topic it is given is the store's name).
        """
        log_change = self.log_change

        def send(_store: str, key: bytes, value: bytes | None, timestamp: int, _h: Headers, _p: int) -> None:
            log_change(store_name, key, value, timestamp)

        return ChangeSender(send, store_name, None, self.changelog_partition)

    @abstractmethod
    def record_metadata(self) -> RecordMetadata | None:
        """The input record being processed (None inside punctuation or restore)."""

    @abstractmethod
    def current_stream_time_ms(self) -> int: ...

    @abstractmethod
    def current_system_time_ms(self) -> int: ...
