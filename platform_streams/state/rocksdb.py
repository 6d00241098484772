"""The RocksDB storage backend (rocksdict); with rocksdb_columns.py and rocksdb_options.py, the
only modules that import rocksdict.

One RocksDB instance per store per task, at ``<task dir>/rocksdb/<store name>``, with the
options of ``rocksdb_options`` (defaults, memory budget, the user's config setter); window and
session segments are column families of that instance, so expiring a segment needs no
per-key work (the family is emptied by one range delete and recycled for a later segment:
``rocksdb_columns``) and a flush covers every segment.

Write path (measured on this machine, 200k puts over 50k keys of 100-byte values):
``Rdict.put`` per record costs ~1.4 us; a dict overlay costs ~0.3 us on the hot path and
the rest (~1 us per *distinct* key) is paid once per flush when the overlay becomes one
``WriteBatch``. Repeated writes to a key between flushes are deduplicated for free. So each
column keeps a ``pending`` dict (``None`` = delete) that ``get`` consults first; scans first
write the pending batch (scans are rare on the hot path, and iterating RocksDB alone keeps
them simple and snapshot-consistent). The overlay is bounded (``MAX_PENDING`` entries).
A restore skips the overlay: each restored batch is one ``WriteBatch`` written at once
(``RocksDBBytesMap.write_all``, as Kafka Streams' ``RocksDBStore.restoreBatch``).

Durability: like Kafka Streams, the write-ahead log is disabled (the changelog is the log);
:meth:`RocksDBBackend.flush` writes the batch and flushes memtables to SST files, and only
then may the state manager write a checkpoint. A flush with nothing written is free.

An instance that will not open (corruption, unreadable files) is deleted and recreated
empty, with a warning, and reported through ``started_empty`` so that it is restored from
the beginning of its changelog. A lock held by another process is *not* corruption: it is
raised, never wiped. Corruption RocksDB finds only later -- a data block whose checksum
does not match, met by a read, a scan or a compaction -- raises
:class:`~platform_streams.state.backend.StoreCorruptedError` instead (the files are in use
by a running task, which the worker closes before the store's directory is deleted and
restored); the instance writes nothing more after that.

Snapshots (:mod:`platform_streams.state.snapshots`) move whole stores as SST files:
:func:`write_sst_file` writes sorted ``(key, value)`` pairs with RocksDB's ``SstFileWriter``
(on a Spark executor, no database needed) and :meth:`RocksDBBackend.ingest_sst` links such a
file into the default column in milliseconds, however many keys it holds -- the reason a
snapshot restore beats replaying a changelog that updated each key many times.
"""

from __future__ import annotations

import gc
import logging
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rocksdict import (
    IngestExternalFileOptions,
    Options,
    Rdict,
    SstFileWriter,
    WriteBatch,
    WriteOptions,
)

from platform_streams.errors import InvalidStateStoreError
from platform_streams.state.backend import BytesMap, StorageBackend, StoreCorruptedError
from platform_streams.state.private_files import make_private_dirs
from platform_streams.state.rocksdb_columns import RecycledColumns, RocksDBBytesMap
from platform_streams.state.rocksdb_options import (
    DEFAULT_SETTINGS,
    RocksDBSettings,
    settings_from,
    store_options,
)

__all__ = ["RocksDBBackend", "RocksDBBytesMap", "write_sst_file"]

log = logging.getLogger(__name__)

_NUM_KEYS = "rocksdb.estimate-num-keys"
_DEFAULT_CF = "default"

#: Properties of the whole instance or of the shared block cache, not of one column family.
_INSTANCE_PROPERTIES = frozenset(
    {
        "rocksdb.block-cache-capacity",
        "rocksdb.block-cache-usage",
        "rocksdb.block-cache-pinned-usage",
        "rocksdb.background-errors",
    }
)


def _write_options() -> WriteOptions:
    opts = WriteOptions()
    # A property at runtime; the stub wrongly declares a method.
    setattr(opts, "disable_wal", True)  # noqa: B010
    return opts


def write_sst_file(path: Path, items: Iterable[tuple[bytes, bytes]]) -> int:
    """Write ``items`` (keys strictly ascending as unsigned bytes) to a new SST file at ``path``.

    Returns the number of entries written. With no entries no file is written (RocksDB
    cannot create an empty SST) and 0 is returned. Keys out of order raise ``ValueError``:
    a snapshot must never silently drop or reorder data.
    """
    writer: SstFileWriter | None = None
    count = 0
    for key, value in items:
        if writer is None:
            path.parent.mkdir(parents=True, exist_ok=True)
            writer = SstFileWriter(store_options("sst"))
            writer.open(str(path))
        try:
            writer[key] = value
        except Exception as exc:
            raise ValueError(f"SST {path}: cannot add key #{count} {key[:40]!r}: {exc}") from exc
        count += 1
    if writer is not None:
        writer.finish()
    return count


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "lock" in text.lower() and "IO error" in text


def _is_corruption(exc: Exception) -> bool:
    """RocksDB's ``Status::Corruption`` (rocksdict raises a bare ``Exception`` with its text,
    ``Corruption: block checksum mismatch: ...``; a compaction's background error repeats it
    on every later write)."""
    return "Corruption" in str(exc)


class RocksDBBackend(StorageBackend):
    """A RocksDB instance with a default column and named column families (segments)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._path: Path | None = None
        self._db: Rdict | None = None
        self._default: RocksDBBytesMap | None = None
        self._columns: dict[str, RocksDBBytesMap] = {}
        #: the free families and labels of a backend that recycles columns (while open)
        self._recycled: RecycledColumns | None = None
        self._write_opts = _write_options()
        self._settings: RocksDBSettings = DEFAULT_SETTINGS
        self._started_empty = True
        self._dirty = False
        #: set once RocksDB reported corruption: nothing is written to the files any more
        self._corrupt = False
        self.pending_count = 0

    @property
    def persistent(self) -> bool:
        return True

    def use_config(self, config: Any) -> None:
        """The config setter and memory budget (``rocksdb_options``) of the next :meth:`open`."""
        self._settings = settings_from(config)

    def _options(self) -> Options:
        return store_options(self.name, self._settings)

    @property
    def started_empty(self) -> bool:
        return self._started_empty

    @property
    def is_open(self) -> bool:
        return self._db is not None

    @property
    def path(self) -> Path | None:
        return self._path

    def open(self, directory: Path | None) -> None:
        if directory is None:
            raise ValueError(f"store {self.name}: a persistent store needs a directory")
        self._path = directory
        had_data = (directory / "CURRENT").exists()
        try:
            self._open_db(directory)
        except Exception as exc:
            if _is_lock_error(exc):
                raise InvalidStateStoreError(
                    f"RocksDB at {directory} is locked by another process or store instance: {exc}",
                    store=self.name,
                ) from exc
            log.warning(
                "store %s: local RocksDB at %s is unreadable (%s); wiping it to rebuild from the changelog",
                self.name,
                directory,
                exc,
            )
            self._release(collect=True)
            shutil.rmtree(directory, ignore_errors=True)
            self._open_db(directory)
            had_data = False
        self._started_empty = not had_data

    def raise_if_corrupt(self, exc: Exception) -> None:
        """Raise :class:`StoreCorruptedError` from ``exc`` if it reports corruption (else return:
        the caller re-raises ``exc``)."""
        if not _is_corruption(exc):
            return
        self._corrupt = True
        raise StoreCorruptedError(self.name, self._path, str(exc).strip()) from exc

    def _write(self, batch: WriteBatch) -> None:
        db = self._require_db()
        try:
            db.write(batch, self._write_opts)
        except Exception as exc:
            self.raise_if_corrupt(exc)
            raise

    def _open_db(self, directory: Path) -> None:
        self._corrupt = False
        make_private_dirs(directory)
        opts = self._options()
        names = Rdict.list_cf(str(directory), opts) if (directory / "CURRENT").exists() else []
        families = {name: self._options() for name in names if name != _DEFAULT_CF}
        db = Rdict(str(directory), opts, column_families=families or None)
        self._db = db
        self._default = RocksDBBytesMap(self, db, None)
        opened = [
            RocksDBBytesMap(self, db.get_column_family(name), db.get_column_family_handle(name), name)
            for name in families
        ]
        if self.recycle_columns:
            self._recycled = RecycledColumns(self._write_now)
            self._columns = self._recycled.sort(opened)
        else:
            self._recycled = None
            self._columns = {col.name: col for col in opened}

    @property
    def default(self) -> BytesMap:
        if self._default is None:
            raise InvalidStateStoreError("store is not open", store=self.name)
        return self._default

    def column_names(self) -> list[str]:
        return list(self._columns)

    def column(self, name: str) -> BytesMap:
        col = self._columns.get(name)
        if col is None:
            db = self._require_db()
            recycled = self._recycled
            col = recycled.take(name) if recycled is not None else None
            if col is None:
                physical = self._unused_family_name(name)
                view = db.create_column_family(physical, self._options())
                col = RocksDBBytesMap(self, view, db.get_column_family_handle(physical), physical)
                if physical != name:
                    assert recycled is not None  # names differ only where families are relabelled
                    recycled.label(col, name)
            self._columns[name] = col
        return col

    def _unused_family_name(self, name: str) -> str:
        """``name`` unless a recycled family of that name holds another segment (or is
        free): then ``name~1``, ``name~2``... (labelled with ``name``)."""
        taken = {col.name for col in self._columns.values()}
        if self._recycled is not None:
            taken.update(col.name for col in self._recycled.free)
        physical, n = name, 0
        while physical in taken:
            n += 1
            physical = f"{name}~{n}"
        return physical

    def drop_column(self, name: str) -> None:
        """Drop the column's family, or with :attr:`recycle_columns` empty it and keep it free
        (``rocksdb_columns``: why)."""
        col = self._columns.pop(name, None)
        if col is None:
            return
        if self.on_uncommitted_write is not None:
            self.on_uncommitted_write()
        self.pending_count -= len(col.pending)
        col.pending.clear()
        if self._recycled is not None:
            self._recycled.release(col)
            return
        physical = col.name
        del col
        self._require_db().drop_column_family(physical)

    def write_pending(self, *, flushing: bool = False) -> None:
        """Push the overlay of every column to RocksDB as one ``WriteBatch``.

        Outside :meth:`flush` (overlay full, a scan) the writes may reach disk before
        the commit that covers them: :attr:`on_uncommitted_write` is told first.
        """
        if not self.pending_count or self._db is None:
            return
        if not flushing and self.on_uncommitted_write is not None:
            self.on_uncommitted_write()
        batch = WriteBatch(raw_mode=True)
        maps = [self._default, *self._columns.values()] if self._default is not None else []
        for col in maps:
            if not col.pending:
                continue
            handle = col.handle
            put = batch.put
            delete = batch.delete
            for key, value in col.pending.items():
                if value is None:
                    delete(key, handle)
                else:
                    put(key, value, handle)
            col.pending.clear()
        self.pending_count = 0
        self._write(batch)
        self._dirty = True

    def _write_now(self, batch: WriteBatch) -> None:
        """Write ``batch`` at once (a recycled family's emptying or label): like a column drop,
        not part of the overlay; the next :meth:`flush` makes it durable."""
        self._write(batch)
        self._dirty = True

    def write_batch(self, batch: WriteBatch) -> None:
        """Write ``batch`` now, after the overlay (which holds older writes); outside
        :meth:`flush`, so :attr:`on_uncommitted_write` is told first."""
        self._require_db()
        self.write_pending()
        if self.on_uncommitted_write is not None:
            self.on_uncommitted_write()
        self._write(batch)
        self._dirty = True

    def flush(self) -> None:
        """Write the overlay and flush the memtables of every column family to SST files.

        ``Rdict.flush`` flushes one column family only (the default one on the instance);
        with the WAL off, segments' writes left in their memtables were lost on a kill -9
        while the checkpoint written after this flush said they were on disk: the soak run
        (docs/soak/README.md) saw windowed aggregates lose every record before the crash
        (tests/unit/state/test_rocksdb_crash.py).
        """
        if self._db is None:
            return
        self.write_pending(flushing=True)
        if self._dirty:
            try:
                self._db.flush(True)
                for col in self._columns.values():
                    col.view.flush(True)
                for col in self._recycled.free if self._recycled is not None else ():
                    col.view.flush(True)  # an emptied family: its range delete and label
            except Exception as exc:
                self.raise_if_corrupt(exc)
                raise
            self._dirty = False

    def ingest_sst(self, path: Path, *, move: bool = True) -> None:
        """Add the entries of an SST file made by :func:`write_sst_file` to the default column.

        Its keys overwrite the store's (they get a newer sequence number); keys the store
        has and the file lacks stay, so callers that want the file's content *only* wipe
        first. ``move`` links/moves the file instead of copying it (it must then sit on the
        same filesystem and is consumed).
        """
        db = self._require_db()
        self.write_pending()
        opts = IngestExternalFileOptions()
        opts.set_move_files(move)
        db.ingest_external_file([str(path)], opts)
        self._started_empty = False

    def property_values(self, names: Iterable[str]) -> dict[str, int]:
        """Integer RocksDB properties (``rocksdb.estimate-num-keys`` ...) for metrics.

        The key estimate counts the writes still in the overlays too, as
        :meth:`RocksDBBytesMap.approximate_num_entries` does: until the next commit flushes
        them (or the overlay's bound spills them) a store's latest writes are there only.

        Per-column properties are summed over the default column and every segment; the
        instance-wide ones (block cache, background errors) are read once. Properties
        RocksDB does not know are left out. Call on the thread that owns the store.
        """
        if self._db is None or self._default is None:
            return {}
        views = [self._default.view, *(col.view for col in self._columns.values())]
        out: dict[str, int] = {}
        for name in names:
            total: int | None = None
            for view in views[:1] if name in _INSTANCE_PROPERTIES else views:
                value = view.property_int_value(name)
                if value is not None:
                    total = (total or 0) + int(value)
            if total is not None:
                out[name] = total
        if _NUM_KEYS in out:  # writes still in the overlays are entries too (as in a memtable)
            out[_NUM_KEYS] += len(self._default.pending) + sum(len(c.pending) for c in self._columns.values())
        return out

    def close(self) -> None:
        if self._db is None:
            return
        if self._corrupt:  # its directory is about to be deleted: no write, no error
            self._release(collect=True, quiet=True)
            return
        try:
            self.write_pending()
        finally:
            self._release()

    def _release(self, *, collect: bool = False, quiet: bool = False) -> None:
        """Drop every handle on the instance so that RocksDB releases its lock.

        ``collect`` runs the garbage collector too, for when the same directory is reopened
        at once (wipe, corruption): a handle kept alive by a reference cycle would hold the
        lock. A plain close skips it; a full collection can take tens of milliseconds.
        ``quiet``: an error closing is not worth a warning (the files are known corrupt:
        RocksDB repeats that at the close).
        """
        db = self._db
        self._db = None
        self._default = None
        self._columns = {}
        self._recycled = None
        self.pending_count = 0
        self._dirty = False
        if db is not None:
            try:
                db.close()
            except Exception as exc:  # closing must not mask the caller's error
                (log.debug if quiet else log.warning)("store %s: error closing RocksDB: %s", self.name, exc)
        del db
        if collect:
            gc.collect()

    def wipe(self) -> None:
        path = self._path
        if path is None:
            return
        self._release(collect=True)
        shutil.rmtree(path, ignore_errors=True)
        self._open_db(path)
        self._started_empty = True

    def _require_db(self) -> Rdict:
        if self._db is None:
            raise InvalidStateStoreError("store is not open", store=self.name)
        return self._db
