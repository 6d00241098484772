"""The storage seam under the bytes stores: ordered byte maps grouped in named columns.

Key-value, window and session stores are written once, against :class:`StorageBackend`;
the two backends (``memory.MemoryBackend`` and ``rocksdb.RocksDBBackend``) only know how to
keep sorted bytes. A key-value store uses the default column; window and session stores
keep one column per time segment, so expiring a segment is dropping a column (a RocksDB
column family, or a dict), never a scan.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from platform_streams.errors import InvalidStateStoreError, TaskCorruptedError

if TYPE_CHECKING:
    from platform_streams.state.store_context import StateStoreContext

__all__ = [
    "BackedStore",
    "BytesMap",
    "ClosedBytesMap",
    "StorageBackend",
    "StoreCorruptedError",
    "store_directory",
]


def store_directory(task_dir: Path, store_name: str) -> Path:
    """Where a persistent store of a task keeps its files: ``<task dir>/rocksdb/<store name>``."""
    return task_dir / "rocksdb" / store_name


class StoreCorruptedError(TaskCorruptedError):
    """A persistent store's local files turned out corrupt while in use: a read met a data
    block whose checksum does not match, or a compaction did (RocksDB's ``Corruption``
    status). A corrupt footer or MANIFEST is found at open instead, and wiped there.

    Raised by the backend (which stops writing to the files); the worker then closes the
    owning task dirty, deletes the store's directory (``path``) and restores the store
    from its changelog: Kafka Streams' ``TaskCorruptedException`` handling. ``task_ids``
    is empty: a backend does not know its task (the worker finds it by ``path``).
    """

    def __init__(self, store: str, path: Path | None, reason: str) -> None:
        self.store = store
        self.path = path
        self.reason = reason
        super().__init__([], f"store {store}: local data at {path} is corrupt ({reason})")


class BytesMap(ABC):
    """An ordered ``bytes -> bytes`` map: one column of a backend."""

    __slots__ = ()

    @abstractmethod
    def get(self, key: bytes) -> bytes | None: ...

    @abstractmethod
    def put(self, key: bytes, value: bytes | None) -> None:
        """Insert or replace; None deletes."""

    @abstractmethod
    def items(
        self, lower: bytes | None = None, upper: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Entries with ``lower <= key < upper`` (None: unbounded), safe to use while writing."""

    @abstractmethod
    def approximate_num_entries(self) -> int: ...

    def write_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Apply ``entries`` in order (None deletes) as one write, now: the restore path.

        Kafka Streams restores a batch straight into one RocksDB ``WriteBatch``
        (``RocksDBStore.restoreBatch``); a persistent backend overrides this to skip its
        write overlay. By default, one :meth:`put` per entry.
        """
        put = self.put
        for key, value in entries:
            put(key, value)


class ClosedBytesMap(BytesMap):
    """Stands in for the map of a store that is not open: every access raises.

    Lets the stores call their map without an "is it open?" test on every operation.
    """

    __slots__ = ("_store",)

    def __init__(self, store_name: str) -> None:
        self._store = store_name

    def _closed(self) -> InvalidStateStoreError:
        return InvalidStateStoreError("store is not open", store=self._store)

    def get(self, key: bytes) -> bytes | None:
        raise self._closed()

    def put(self, key: bytes, value: bytes | None) -> None:
        raise self._closed()

    def items(
        self, lower: bytes | None = None, upper: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        raise self._closed()

    def approximate_num_entries(self) -> int:
        raise self._closed()


class StorageBackend(ABC):
    """Where one store keeps its bytes; opened by the store's ``init`` for one task."""

    #: Called before writes that are not part of a :meth:`flush` may reach disk (a
    #: persistent backend spilling its write overlay, dropping a column): the state manager
    #: sets it to remove the checkpoint, which must never describe disk data that runs
    #: ahead of the last commit (exactly-once state after a crash depends on it).
    on_uncommitted_write: Callable[[], None] | None = None
    #: Set by a store whose column keys are never empty (the segmented window and session
    #: stores) before :meth:`open`: a dropped column may then be emptied and kept for the
    #: next new one instead of dropped (RocksDB: ``rocksdb_columns``, creating and dropping
    #: a column family costs milliseconds); in memory it changes nothing.
    recycle_columns: bool = False

    @property
    @abstractmethod
    def persistent(self) -> bool: ...

    @property
    @abstractmethod
    def started_empty(self) -> bool:
        """True if :meth:`open` found no usable local data (new, or wiped because unreadable).

        The state manager then ignores any checkpointed offset and restores from the start.
        """

    @property
    @abstractmethod
    def is_open(self) -> bool: ...

    def use_config(self, config: Any) -> None:
        """Take what applies to this backend of the application's config (RocksDB: the config
        setter and the memory budget) before :meth:`open`; by default nothing."""
        return None

    @abstractmethod
    def open(self, directory: Path | None) -> None:
        """Open (persistent backends: at ``directory``, created if missing)."""

    @property
    @abstractmethod
    def default(self) -> BytesMap:
        """The default column (key-value data, store metadata)."""

    @abstractmethod
    def column_names(self) -> list[str]:
        """Names of the non-default columns that exist."""

    @abstractmethod
    def column(self, name: str) -> BytesMap:
        """The named column, created if missing."""

    @abstractmethod
    def drop_column(self, name: str) -> None:
        """Delete a column and everything in it (cheap: no per-key work)."""

    @abstractmethod
    def flush(self) -> None:
        """Make every write so far durable (no-op in memory)."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def wipe(self) -> None:
        """Delete all data (on disk too) and reopen empty."""


class BackedStore:
    """Identity and opening of a bytes store that keeps its data in one :class:`StorageBackend`.

    Shared by the key-value and the segmented (window, session) bytes stores.
    """

    def __init__(self, name: str, backend: StorageBackend) -> None:
        self._name = name
        self._backend = backend

    @property
    def name(self) -> str:
        return self._name

    @property
    def persistent(self) -> bool:
        return self._backend.persistent

    @property
    def is_open(self) -> bool:
        return self._backend.is_open

    @property
    def backend(self) -> StorageBackend:
        return self._backend

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r}, {type(self._backend).__name__})"

    def _open_backend(self, context: StateStoreContext) -> None:
        """Open the backend for the task (persistent: in the store's directory of the task)."""
        directory = store_directory(context.state_dir, self._name) if self._backend.persistent else None
        try:
            config = context.config
        except Exception:  # a test context may not implement config (as record_cache_for)
            config = None
        self._backend.use_config(config)
        self._backend.open(directory)
