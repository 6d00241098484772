"""``Stores``: the factory a topology author uses, as in Kafka Streams.

``Stores.persistent_key_value_store("counts")`` etc. return *bytes store suppliers* (what
to store, where); ``Stores.key_value_store_builder(supplier, key_serde, value_serde)``
etc. wrap a supplier into a :class:`~platform_streams.state.builders.StoreBuilder` that
adds serdes, caching and logging. Each ``get()`` of a supplier makes a new store with a
new backend: one per task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from platform_streams.state.backend import StorageBackend
from platform_streams.state.builders import KeyValueStoreBuilder, SessionStoreBuilder, WindowStoreBuilder
from platform_streams.state.key_value_store import KeyValueBytesStore
from platform_streams.state.memory import MemoryBackend
from platform_streams.state.session_store import SessionBytesStore
from platform_streams.state.window_store import WindowBytesStore

if TYPE_CHECKING:
    from platform_streams.serde.base import Serde
    from platform_streams.state.versioned import VersionedBytesStoreSupplier, VersionedKeyValueStoreBuilder

__all__ = [
    "BytesStoreSupplier",
    "KeyValueBytesStoreSupplier",
    "SessionBytesStoreSupplier",
    "Stores",
    "WindowBytesStoreSupplier",
    "storage_backend",
]


def storage_backend(name: str, persistent: bool) -> StorageBackend:
    """A new backend for one task's store: RocksDB when ``persistent``, else memory."""
    if persistent:
        # Imported here so that in-memory-only users never load the RocksDB extension.
        from platform_streams.state.rocksdb import RocksDBBackend

        return RocksDBBackend(name)
    return MemoryBackend()


def _check_name(name: str) -> None:
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"invalid store name {name!r}: it names a directory and a topic")


class BytesStoreSupplier:
    """What the bytes store suppliers share: the metrics scope and a new backend per store.

    Mixed into the frozen supplier dataclasses, which declare ``name`` and ``persistent``;
    ``scope_suffix`` tells the store kinds apart in the metrics scope (Kafka's
    ``rocksdb-window`` etc.).
    """

    __slots__ = ()
    name: str
    persistent: bool
    scope_suffix: ClassVar[str] = ""

    @property
    def metrics_scope(self) -> str:
        return ("rocksdb" if self.persistent else "in-memory") + self.scope_suffix

    def new_backend(self) -> StorageBackend:
        """A new backend for one task's store (each ``get()`` makes one)."""
        return storage_backend(self.name, self.persistent)


@dataclass(frozen=True, slots=True)
class KeyValueBytesStoreSupplier(BytesStoreSupplier):
    """Makes the key-value bytes store of one task."""

    name: str
    persistent: bool

    def get(self) -> KeyValueBytesStore:
        return KeyValueBytesStore(self.name, self.new_backend())


@dataclass(frozen=True, slots=True)
class WindowBytesStoreSupplier(BytesStoreSupplier):
    """Makes the window bytes store of one task."""

    name: str
    retention_ms: int
    window_size_ms: int
    retain_duplicates: bool
    persistent: bool
    segment_interval_ms: int | None = None
    scope_suffix: ClassVar[str] = "-window"

    def get(self) -> WindowBytesStore:
        return WindowBytesStore(
            self.name,
            self.new_backend(),
            self.retention_ms,
            self.window_size_ms,
            self.retain_duplicates,
            self.segment_interval_ms,
        )


@dataclass(frozen=True, slots=True)
class SessionBytesStoreSupplier(BytesStoreSupplier):
    """Makes the session bytes store of one task."""

    name: str
    retention_ms: int
    persistent: bool
    segment_interval_ms: int | None = None
    #: Kafka's time-ordered session store of emit-final aggregations (records expire one by
    #: one at ``stream time - retention`` instead of with their segment)
    time_ordered: bool = False
    scope_suffix: ClassVar[str] = "-session"

    def get(self) -> SessionBytesStore:
        return SessionBytesStore(
            self.name,
            self.new_backend(),
            self.retention_ms,
            self.segment_interval_ms,
            time_ordered=self.time_ordered,
        )


def _window_supplier(
    name: str, retention_ms: int, window_size_ms: int, retain_duplicates: bool, persistent: bool
) -> WindowBytesStoreSupplier:
    _check_name(name)
    if window_size_ms <= 0:
        raise ValueError(f"store {name}: window size must be > 0 ms, got {window_size_ms}")
    if retention_ms < window_size_ms:
        raise ValueError(
            f"store {name}: retention ({retention_ms} ms) must be >= window size ({window_size_ms} ms)"
        )
    return WindowBytesStoreSupplier(name, retention_ms, window_size_ms, retain_duplicates, persistent)


def _session_supplier(
    name: str, retention_ms: int, persistent: bool, time_ordered: bool = False
) -> SessionBytesStoreSupplier:
    _check_name(name)
    if retention_ms <= 0:
        raise ValueError(f"store {name}: retention must be > 0 ms, got {retention_ms}")
    return SessionBytesStoreSupplier(name, retention_ms, persistent, time_ordered=time_ordered)


class Stores:
    """Factory of store suppliers and builders (Kafka Streams' ``Stores``)."""

    @staticmethod
    def persistent_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        _check_name(name)
        return KeyValueBytesStoreSupplier(name, persistent=True)

    @staticmethod
    def in_memory_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        _check_name(name)
        return KeyValueBytesStoreSupplier(name, persistent=False)

    @staticmethod
    def persistent_window_store(
        name: str, retention_ms: int, window_size_ms: int, retain_duplicates: bool = False
    ) -> WindowBytesStoreSupplier:
        return _window_supplier(name, retention_ms, window_size_ms, retain_duplicates, persistent=True)

    @staticmethod
    def in_memory_window_store(
        name: str, retention_ms: int, window_size_ms: int, retain_duplicates: bool = False
    ) -> WindowBytesStoreSupplier:
        return _window_supplier(name, retention_ms, window_size_ms, retain_duplicates, persistent=False)

    @staticmethod
    def persistent_session_store(
        name: str, retention_ms: int, *, time_ordered: bool = False
    ) -> SessionBytesStoreSupplier:
        """``time_ordered``: the emit-final aggregation's store (see :class:`SessionBytesStoreSupplier`)."""
        return _session_supplier(name, retention_ms, persistent=True, time_ordered=time_ordered)

    @staticmethod
    def in_memory_session_store(
        name: str, retention_ms: int, *, time_ordered: bool = False
    ) -> SessionBytesStoreSupplier:
        return _session_supplier(name, retention_ms, persistent=False, time_ordered=time_ordered)

    @staticmethod
    def persistent_versioned_key_value_store(
        name: str, history_retention_ms: int, segment_interval_ms: int | None = None
    ) -> VersionedBytesStoreSupplier:
        """A versioned store (KIP-889) keeping old versions for ``history_retention_ms``, which
        is also its grace period; the segment interval defaults as in Kafka Streams."""
        from platform_streams.state.versioned import versioned_supplier

        _check_name(name)
        return versioned_supplier(name, history_retention_ms, segment_interval_ms, persistent=True)

    @staticmethod
    def versioned_key_value_store_builder(
        supplier: VersionedBytesStoreSupplier, key_serde: Serde, value_serde: Serde
    ) -> VersionedKeyValueStoreBuilder:
        from platform_streams.state.versioned import VersionedKeyValueStoreBuilder

        return VersionedKeyValueStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def key_value_store_builder(
        supplier: KeyValueBytesStoreSupplier, key_serde: Serde | None = None, value_serde: Serde | None = None
    ) -> KeyValueStoreBuilder:
        """A key-value store builder; a ``None`` serde is the config's default (resolved per task)."""
        return KeyValueStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def timestamped_key_value_store_builder(
        supplier: KeyValueBytesStoreSupplier, key_serde: Serde | None = None, value_serde: Serde | None = None
    ) -> KeyValueStoreBuilder:
        """A key-value store of ``ValueAndTimestamp`` values (the DSL's tables and aggregations)."""
        return KeyValueStoreBuilder(supplier, key_serde, value_serde, timestamped=True)

    @staticmethod
    def window_store_builder(
        supplier: WindowBytesStoreSupplier, key_serde: Serde | None = None, value_serde: Serde | None = None
    ) -> WindowStoreBuilder:
        """A window store builder; a ``None`` serde is the config's default (resolved per task)."""
        return WindowStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def timestamped_window_store_builder(
        supplier: WindowBytesStoreSupplier, key_serde: Serde | None = None, value_serde: Serde | None = None
    ) -> WindowStoreBuilder:
        """A window store of ``ValueAndTimestamp`` values (the DSL's windowed aggregations)."""
        return WindowStoreBuilder(supplier, key_serde, value_serde, timestamped=True)

    @staticmethod
    def session_store_builder(
        supplier: SessionBytesStoreSupplier, key_serde: Serde | None = None, value_serde: Serde | None = None
    ) -> SessionStoreBuilder:
        """A session store builder; a ``None`` serde is the config's default (resolved per task)."""
        return SessionStoreBuilder(supplier, key_serde, value_serde)
