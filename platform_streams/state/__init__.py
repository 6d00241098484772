"""State stores: interfaces, the ``Stores`` factory, backends, restore and checkpoints.

A store is a stack (Kafka Streams' layering): the *metered* store (serdes, metrics) over an
optional *caching* layer (write-back record cache) over an optional *change-logging* layer
(every write goes to the changelog topic) over a *bytes store* on a storage backend
(RocksDB through rocksdict, or memory). ``Stores`` makes suppliers and builders; the
runtime gives each task a :class:`ProcessorStateManager` and restores with a
:class:`ChangelogReader`.
"""

from platform_streams.state.api import (
    CachedStateStore,
    FlushListener,
    KeyValueStore,
    SessionStore,
    StateStore,
    WindowStore,
)
from platform_streams.state.builders import (
    KeyValueStoreBuilder,
    SessionStoreBuilder,
    StoreBuilder,
    WindowStoreBuilder,
)
from platform_streams.state.cache import RecordCache
from platform_streams.state.checkpoint import CheckpointFormatError, OffsetCheckpoint
from platform_streams.state.dsl_store_suppliers import BuiltInDslStoreSuppliers, DslStoreSuppliers
from platform_streams.state.manager import FROM_BEGINNING, ChangelogPartition, ProcessorStateManager
from platform_streams.state.restore import ChangelogReader, RecordFilter, StateRestoreListener
from platform_streams.state.store_context import RestoreCallback, StateStoreContext
from platform_streams.state.stores import (
    KeyValueBytesStoreSupplier,
    SessionBytesStoreSupplier,
    Stores,
    WindowBytesStoreSupplier,
)
from platform_streams.state.versioned import (
    VersionedBytesStoreSupplier,
    VersionedKeyValueStoreBuilder,
    VersionedRecord,
)
from platform_streams.state.windowed import SessionWindow, TimeWindow, Window, Windowed
from platform_streams.state.wrappers.base import changelog_topic_name

__all__ = [
    "FROM_BEGINNING",
    "BuiltInDslStoreSuppliers",
    "CachedStateStore",
    "ChangelogPartition",
    "ChangelogReader",
    "CheckpointFormatError",
    "DslStoreSuppliers",
    "FlushListener",
    "KeyValueBytesStoreSupplier",
    "KeyValueStore",
    "KeyValueStoreBuilder",
    "OffsetCheckpoint",
    "ProcessorStateManager",
    "RecordCache",
    "RecordFilter",
    "RestoreCallback",
    "SessionBytesStoreSupplier",
    "SessionStore",
    "SessionStoreBuilder",
    "SessionWindow",
    "StateRestoreListener",
    "StateStore",
    "StateStoreContext",
    "StoreBuilder",
    "Stores",
    "TimeWindow",
    "VersionedBytesStoreSupplier",
    "VersionedKeyValueStoreBuilder",
    "VersionedRecord",
    "Window",
    "WindowBytesStoreSupplier",
    "WindowStore",
    "WindowStoreBuilder",
    "Windowed",
    "changelog_topic_name",
]
