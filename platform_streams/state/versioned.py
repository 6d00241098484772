"""Versioned key-value stores (KIP-889): supplier, change-logging and metered layers, builder.

``Stores.persistent_versioned_key_value_store(name, history_retention_ms)`` gives a
:class:`VersionedBytesStoreSupplier`; ``Stores.versioned_key_value_store_builder`` wraps it
into the stack ``metered (serdes) -> change-logging -> versioned bytes store``. A versioned
store never caches (Kafka Streams refuses caching on one): every put is a version.

The changelog record of a put is ``key -> value`` (None for a delete) with the *version's*
timestamp as record timestamp, as Kafka Streams' ``ChangeLoggingVersionedKeyValueBytesStore``
writes it; restore reads those timestamps back (:class:`TimestampedRestoreCallback`). The
changelog topic is compacted with ``min.compaction.lag.ms = history retention + 1 day``
(Kafka's ``VersionedChangelogTopicConfig``), so compaction never removes a version the
store may still answer for.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, Self

from platform_streams.state.builders import SupplierStoreBuilder
from platform_streams.state.stores import BytesStoreSupplier
from platform_streams.state.versioned_store import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    VersionedBytesStore,
    VersionedRecord,
    default_segment_interval,
)
from platform_streams.state.wrappers.base import WrappedStore, changelog_topic_name
from platform_streams.state.wrappers.change_logging import ChangelogRegisteringContext
from platform_streams.state.wrappers.metered import MeteredStore

if TYPE_CHECKING:
    from platform_streams.serde.base import Serde
    from platform_streams.state.api import StateStore
    from platform_streams.state.store_context import StateStoreContext

__all__ = [
    "PUT_RETURN_CODE_NOT_PUT",
    "PUT_RETURN_CODE_VALID_TO_UNDEFINED",
    "VERSIONED_CHANGELOG_ADDITIONAL_COMPACTION_LAG_MS",
    "ChangeLoggingVersionedBytesStore",
    "MeteredVersionedKeyValueStore",
    "VersionedBytesStoreSupplier",
    "VersionedKeyValueStoreBuilder",
    "VersionedRecord",
]

#: Kafka's ``VERSIONED_STORE_CHANGE_LOG_ADDITIONAL_COMPACTION_LAG_MS`` (1 day).
VERSIONED_CHANGELOG_ADDITIONAL_COMPACTION_LAG_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class VersionedBytesStoreSupplier(BytesStoreSupplier):
    """Makes the versioned bytes store of one task (Kafka's ``VersionedBytesStoreSupplier``)."""

    name: str
    history_retention_ms: int
    segment_interval_ms: int
    persistent: bool = True

    def get(self) -> VersionedBytesStore:
        return VersionedBytesStore(
            self.name, self.new_backend(), self.history_retention_ms, self.segment_interval_ms
        )


def versioned_supplier(
    name: str, history_retention_ms: int, segment_interval_ms: int | None, persistent: bool
) -> VersionedBytesStoreSupplier:
    """A checked supplier (Kafka's ``Stores.persistentVersionedKeyValueStore`` checks)."""
    if history_retention_ms < 0:
        raise ValueError(f"store {name}: historyRetention cannot be negative, got {history_retention_ms}")
    if segment_interval_ms is None:
        segment_interval_ms = default_segment_interval(history_retention_ms)
    elif segment_interval_ms < 1:
        raise ValueError(
            f"store {name}: segmentInterval cannot be zero or negative, got {segment_interval_ms}"
        )
    return VersionedBytesStoreSupplier(name, history_retention_ms, segment_interval_ms, persistent)


class ChangeLoggingVersionedBytesStore(WrappedStore):
    """Logs every put and delete with the version's timestamp as the record timestamp."""

    wrapped: VersionedBytesStore

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._context = context
        topic = changelog_topic_name(context.application_id, self.name)
        self.wrapped.init(ChangelogRegisteringContext(context, topic), root)

    @property
    def inner(self) -> VersionedBytesStore:
        return self.wrapped

    def put(self, key: bytes, value: bytes | None, timestamp: int) -> int:
        valid_to = self.wrapped.put(key, value, timestamp)
        self._context.log_change(self.name, key, value, timestamp)
        return valid_to

    def delete(self, key: bytes, timestamp: int) -> tuple[bytes, int, int | None] | None:
        old = self.wrapped.delete(key, timestamp)
        self._context.log_change(self.name, key, None, timestamp)
        return old


class MeteredVersionedKeyValueStore(MeteredStore):
    """The store a processor gets: objects in, :class:`VersionedRecord` out."""

    def __init__(self, wrapped: Any, key_serde: Serde | None, value_serde: Serde | None) -> None:
        super().__init__(wrapped, key_serde, value_serde)

    @property
    def bytes_store(self) -> VersionedBytesStore:
        """The versioned bytes store at the bottom (reads need no other layer)."""
        store = self.wrapped
        return store.inner if isinstance(store, ChangeLoggingVersionedBytesStore) else store

    @property
    def history_retention_ms(self) -> int:
        return self.bytes_store.history_retention_ms

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        """Store ``value`` (None: a tombstone) valid from ``timestamp``; returns its validTo,
        ``PUT_RETURN_CODE_VALID_TO_UNDEFINED`` if it is the latest, ``PUT_RETURN_CODE_NOT_PUT``
        if it is older than the history retention."""
        start = perf_counter_ns()
        raw_value = None if value is None else self._serialize_value(value)
        valid_to: int = self.wrapped.put(self._raw_key(key), raw_value, timestamp)
        self._record("put", start)
        return valid_to

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        """Delete as of ``timestamp``; returns the version valid just before (None: none)."""
        start = perf_counter_ns()
        old = self.wrapped.delete(self._raw_key(key), timestamp)
        self._record("delete", start)
        return self._record_of(old)

    def get(
        self, key: Any, as_of_timestamp: int | None = None, *, with_valid_to: bool = False
    ) -> VersionedRecord | None:
        """The latest version, or the one valid at ``as_of_timestamp``: its value and timestamp.

        As in Kafka, the store's own ``get`` leaves ``valid_to`` unset (its
        MeteredVersionedKeyValueStore reads through a ValueAndTimestamp); an interactive
        ``VersionedKeyQuery`` asks ``with_valid_to`` (Kafka's ``runVersionedKeyQuery`` keeps it)."""
        start = perf_counter_ns()
        raw_key = self._raw_key(key)
        store = self.bytes_store
        found: tuple[bytes, int, int | None] | None
        if as_of_timestamp is None:
            latest = store.get_latest(raw_key)
            found = None if latest is None else (latest[0], latest[1], None)
        else:
            found = store.get_as_of(raw_key, as_of_timestamp)
            if found is not None and not with_valid_to:
                found = (found[0], found[1], None)
        self._record("get", start)
        return self._record_of(found)

    def versions(
        self, key: Any, time_from: int, time_to: int, *, ascending: bool = False
    ) -> list[VersionedRecord]:
        """Every version valid at some time in ``[time_from, time_to]`` (KIP-968)."""
        found = [
            self._record_of(v) for v in self.bytes_store.versions(self._raw_key(key), time_from, time_to)
        ]
        records = [r for r in found if r is not None]
        return records[::-1] if ascending else records

    def all_latest(self) -> Iterator[tuple[Any, VersionedRecord]]:
        """Every key with its latest version."""
        deserialize_key = self.key_serde.deserialize
        for key, value, ts in self.bytes_store.all_latest():
            yield deserialize_key(key), VersionedRecord(self._deserialize_value(value), ts)

    def approximate_num_entries(self) -> int:
        return self.bytes_store.approximate_num_entries()

    def _record_of(self, found: tuple[bytes, int, int | None] | None) -> VersionedRecord | None:
        if found is None:
            return None
        return VersionedRecord(self._deserialize_value(found[0]), found[1], found[2])


class VersionedKeyValueStoreBuilder(SupplierStoreBuilder[MeteredVersionedKeyValueStore]):
    """Kafka's ``VersionedKeyValueStoreBuilder``: logging on by default, caching never."""

    supplier: VersionedBytesStoreSupplier
    logging_layer = ChangeLoggingVersionedBytesStore

    def __init__(
        self, supplier: VersionedBytesStoreSupplier, key_serde: Serde | None, value_serde: Serde | None
    ) -> None:
        super().__init__(supplier, key_serde, value_serde)

    def with_caching_enabled(self) -> Self:
        raise ValueError(f"store {self.name}: caching is not supported for versioned stores")

    def changelog_topic_config(self) -> dict[str, str]:
        return versioned_changelog_config(self.supplier.history_retention_ms, self._log_config)

    def _metered(self, store: Any) -> MeteredVersionedKeyValueStore:
        return MeteredVersionedKeyValueStore(store, self.key_serde, self.value_serde)


def versioned_changelog_config(history_retention_ms: int, overrides: dict[str, str]) -> dict[str, str]:
    """Kafka's ``VersionedChangelogTopicConfig``: compacted, lagging the history retention."""
    config = {"cleanup.policy": "compact", **overrides}
    config.setdefault(
        "min.compaction.lag.ms", str(history_retention_ms + VERSIONED_CHANGELOG_ADDITIONAL_COMPACTION_LAG_MS)
    )
    return config
