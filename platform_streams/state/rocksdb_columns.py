"""RocksDB column families of one store: the write overlay of each, and recycled segments.

Part of the RocksDB backend (with ``rocksdb.py`` and ``rocksdb_options.py``, the only modules
that import rocksdict).

:class:`RocksDBBytesMap` is one column family with its ``pending`` write overlay (why the
overlay: ``rocksdb.py``'s module docs).

**Recycled columns.** A window or session store keeps each time segment in a column family
and expires a segment by dropping it; a tumbling-window application makes and drops one
family per task and segment interval (window_sum: one a minute of event time per task).
Creating or dropping a family costs RocksDB ~3 ms of CPU each (it rewrites its OPTIONS file
and MANIFEST and builds the family's table cache; bench/RESULTS.md), about 5 % of
window_sum's stream thread. A backend whose store sets
:attr:`~platform_streams.state.backend.StorageBackend.recycle_columns` (the segmented stores,
whose keys are never empty) therefore *recycles* them: an expired column is emptied in one
``WriteBatch`` (a range delete over its keys) and kept free; the next new segment takes a
free column instead of creating one.

Which segment a physical family holds is written **in the family itself**, under the empty
key (:data:`LABEL_KEY`; a segment's keys are never empty): the segment's name, or an empty
value for a free family; a family without the key holds the segment it is named after (every
family made before recycling existed, and every family made new). The label is written in
the same family as its data, so a family flushes label and data together: after a crash
(the WAL is off, as in Kafka Streams) a family is either what it was at its last flush or
what it is now, never old data under a new name. Scans of a labelled family start after the
label.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import starmap
from operator import itemgetter
from typing import TYPE_CHECKING, Any, cast

from rocksdict import Rdict, WriteBatch

from platform_streams.state.backend import BytesMap

if TYPE_CHECKING:
    from platform_streams.state.rocksdb import RocksDBBackend

__all__ = ["LABEL_KEY", "RecycledColumns", "RocksDBBytesMap"]

#: Pending writes per instance before they are pushed to RocksDB between flushes.
MAX_PENDING = 20_000
#: the key of a recycled family's label (the segment it holds; empty value: free)
LABEL_KEY = b""
#: the smallest key after :data:`LABEL_KEY`: where scans of a labelled family start
_AFTER_LABEL = b"\x00"
_MISSING = object()
#: the value of a ``(key, value)`` entry, as a C callable for map()
_value_of = itemgetter(1)


class RocksDBBytesMap(BytesMap):
    """One column family, with its pending-write overlay."""

    __slots__ = ("_backend", "handle", "labelled", "name", "pending", "view")

    def __init__(self, backend: RocksDBBackend, view: Rdict, handle: Any, name: str = "default") -> None:
        self._backend = backend
        self.view = view
        self.handle = handle
        #: the RocksDB family's own name (a recycled family holds a segment of another name)
        self.name = name
        #: True if the family holds a :data:`LABEL_KEY` that scans must skip
        self.labelled = False
        self.pending: dict[bytes, bytes | None] = {}

    def get(self, key: bytes) -> bytes | None:
        value = self.pending.get(key, _MISSING)
        if value is not _MISSING:
            return cast("bytes | None", value)
        try:
            return cast("bytes | None", self.view.get(key))
        except Exception as exc:
            self._backend.raise_if_corrupt(exc)
            raise

    def raise_if_corrupt(self, exc: Exception) -> None:
        """``RocksDBBackend.raise_if_corrupt``: for a read of :attr:`view` made elsewhere (the
        fused aggregation reads it in line)."""
        self._backend.raise_if_corrupt(exc)

    def put(self, key: bytes, value: bytes | None) -> None:
        pending = self.pending
        pending[key] = value
        backend = self._backend
        backend.pending_count += 1
        if backend.pending_count >= MAX_PENDING:
            backend.write_pending()

    def write_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Apply ``entries`` as one ``WriteBatch`` written now (Kafka Streams'
        ``RocksDBStore.restoreBatch``): no overlay dict, no per-entry method call.

        The overlay is written first (it holds older writes). Like any write outside
        :meth:`RocksDBBackend.flush`, the backend's ``on_uncommitted_write`` is told first
        (the state manager ignores it while restoring: restored records are committed ones).
        """
        batch = WriteBatch(raw_mode=True)
        handle = self.handle
        entries = entries if isinstance(entries, list) else list(entries)
        if None in map(_value_of, entries):
            put = batch.put
            delete = batch.delete
            for key, value in entries:
                if value is None:
                    delete(key, handle)
                else:
                    put(key, value, handle)
        else:
            # no tombstone (a restore's usual batch): every put by C calls, no Python
            # statement per entry
            batch.set_default_column_family(handle)
            deque(starmap(batch.put, entries), maxlen=0)
        self._backend.write_batch(batch)

    def items(
        self, lower: bytes | None = None, upper: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        self._backend.write_pending()
        if self.labelled and (lower is None or lower < _AFTER_LABEL):
            lower = _AFTER_LABEL
        # Bounds are checked here, not with ReadOptions: rocksdict encodes ReadOptions
        # bounds in its non-raw format. The RocksDB iterator is created now (not on first
        # next()) so the scan reads the state as of this call.
        if reverse:
            if upper is None:
                it = self.view.items(backwards=True)
            else:
                it = self.view.items(backwards=True, from_key=upper)
            return _backward(it, lower, upper, self._check_end)
        it = self.view.items() if lower is None else self.view.items(from_key=lower)
        return _forward(it, lower, upper, self._check_end)

    def _check_end(self, after: bytes | None, start: bytes | None, reverse: bool) -> None:
        """A scan's RocksDB iterator ran out: raise if that was an error, not the end.

        rocksdict's ``items()`` ends quietly where RocksDB's iterator stops on an error (a
        corrupt block: the rest of the column silently missing from the scan). A raw
        iterator takes the same last step -- from the last key seen (``after``), or from
        where the scan began (``start``) -- and its ``status()`` raises what stopped it.
        """
        raw = self.view.iter()
        try:
            if after is not None:
                if reverse:
                    raw.seek_for_prev(after)
                    if raw.valid():
                        raw.prev()
                else:
                    raw.seek(after)
                    if raw.valid():
                        raw.next()
            elif reverse:
                raw.seek_to_last() if start is None else raw.seek_for_prev(start)
            else:
                raw.seek_to_first() if start is None else raw.seek(start)
            if not raw.valid():
                raw.status()
        except Exception as exc:
            self._backend.raise_if_corrupt(exc)
            raise

    def approximate_num_entries(self) -> int:
        estimate = self.view.property_int_value("rocksdb.estimate-num-keys") or 0
        return int(estimate) + len(self.pending)


#: ``RocksDBBytesMap._check_end``: (last key seen, where the scan began, reverse)
_CheckEnd = Callable[[bytes | None, bytes | None, bool], None]


def _forward(
    it: Any, lower: bytes | None, upper: bytes | None, check_end: _CheckEnd
) -> Iterator[tuple[bytes, bytes]]:
    key = None
    for key, value in it:
        if upper is not None and key >= upper:
            return
        yield key, value
    check_end(key, lower, False)


def _backward(
    it: Any, lower: bytes | None, upper: bytes | None, check_end: _CheckEnd
) -> Iterator[tuple[bytes, bytes]]:
    key = None
    for key, value in it:
        if upper is not None and key >= upper:
            continue
        if lower is not None and key < lower:
            return
        yield key, value
    check_end(key, upper, True)


class RecycledColumns:
    """The free (emptied) families of one instance and the labels that name the others."""

    def __init__(self, write: Callable[[WriteBatch], None]) -> None:
        #: writes a batch at once (the backend's write options; marks the instance dirty)
        self._write = write
        self.free: list[RocksDBBytesMap] = []

    def sort(self, families: Iterable[RocksDBBytesMap]) -> dict[str, RocksDBBytesMap]:
        """The families of an instance just opened by the segment each holds (its label, or
        its own name without one); free ones go to :attr:`free`."""
        columns: dict[str, RocksDBBytesMap] = {}
        for col in families:
            label = col.view.get(LABEL_KEY)
            if label is None:
                columns[col.name] = col
                continue
            col.labelled = True
            if label:
                columns[label.decode()] = col
            else:
                self.free.append(col)
        return columns

    def take(self, name: str) -> RocksDBBytesMap | None:
        """A free family relabelled to hold ``name``, or None if none is free."""
        if not self.free:
            return None
        col = self.free.pop()
        self.label(col, name)
        return col

    def release(self, col: RocksDBBytesMap) -> None:
        """Empty ``col`` (its overlay already dropped) and keep it free, in one write: a range
        delete up to its last key, that key, and the free label."""
        batch = WriteBatch(raw_mode=True)
        last = next(iter(col.view.keys(backwards=True)), None)
        if last is not None:
            batch.delete_range(LABEL_KEY, last, col.handle)
            batch.delete(last, col.handle)
        batch.put(LABEL_KEY, b"", col.handle)
        self._write(batch)
        col.labelled = True
        self.free.append(col)

    def label(self, col: RocksDBBytesMap, name: str) -> None:
        """Write that ``col`` holds the segment ``name``."""
        batch = WriteBatch(raw_mode=True)
        batch.put(LABEL_KEY, name.encode(), col.handle)
        self._write(batch)
        col.labelled = True
