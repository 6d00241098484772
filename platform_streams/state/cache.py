"""The record cache: a write-back, deduplicating LRU cache in front of the stores.

Kafka Streams' ``ThreadCache``/``NamedCache``: one :class:`RecordCache` per worker holds a
byte budget (``statestore_cache_max_bytes``) shared by one :class:`NamedCache` per cached
store. A put marks the entry dirty; dirty entries leave the cache -- all of a named cache's
dirty entries at once, in the order they first became dirty -- on commit (``flush``) or
when the least-recently-used entry of that cache is evicted while dirty. Leaving the cache
means the store's flush callback writes them to the layer below (changelog + bytes store)
and forwards them downstream. Hot keys thus cost one changelog record and one downstream
update per commit interval, whatever their update rate. One addition to Kafka's rules:
entries a store marks final (the closed windows of an emit-final aggregation that is its
store's only writer: nothing updates them again) are evicted first when the budget
overflows, each written alone (:meth:`NamedCache.mark_final`). A second: a cache whose
least recently used entry is dirty first takes room from another cache's clean LRU entry,
if there is one, before it flushes (:meth:`RecordCache.evict_from`; key-value caches give).

Sizing: each entry is charged ``len(key) + len(value) + ENTRY_OVERHEAD_BYTES``; the overhead
is the measured CPython footprint of an entry (OrderedDict node, tuple, timestamp int,
bytes headers, dirty-set slot), so the budget bounds real memory, not just payload.
With a budget of 0 every put is flushed at once (caching effectively off).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from platform_streams.state.store_context import StateStoreContext

__all__ = [
    "DECODED_OVERHEAD_BYTES",
    "DEFAULT_CACHE_MAX_BYTES",
    "ENTRY_OVERHEAD_BYTES",
    "CacheEntry",
    "CacheFlushCallback",
    "NamedCache",
    "RecordCache",
    "merge_sorted",
    "record_cache_for",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Kafka Streams' ``statestore.cache.max.bytes`` default (10 MiB).
DEFAULT_CACHE_MAX_BYTES = 10 * 1024 * 1024
#: Measured CPython bytes per cache entry beyond key and value payload.
ENTRY_OVERHEAD_BYTES = 240

#: Measured CPython bytes of an entry's decoded form (a 2-tuple and two new ints), see put.
DECODED_OVERHEAD_BYTES = 120

#: A cached entry: ``(value bytes or None, timestamp, decoded value or None)``. The timestamp
#: is that of the record that wrote it (Kafka's ``LRUCacheEntry`` keeps the record context):
#: the flush stamps the change of a store whose values carry no timestamp with it, and reports
#: a delete at it. A timestamped value's change carries the value's own timestamp, so the
#: DSL's fast paths, which write only those, put the stream time there without effect.
CacheEntry = tuple[bytes | None, int, Any]
#: Receives the dirty entries leaving a named cache: ``[(key, value or None, timestamp)]``.
CacheFlushCallback = Callable[[list[tuple[bytes, bytes | None, int]]], None]


class NamedCache:
    """One store's entries in the shared budget; LRU order plus dirty keys in first-dirty order."""

    __slots__ = (
        "_dirty",
        "_entries",
        "_final",
        "_flushing",
        "_on_remove",
        "_parent",
        "flush_callback",
        "may_donate",
        "name",
        "size_bytes",
    )

    def __init__(self, name: str, parent: RecordCache, flush_callback: CacheFlushCallback) -> None:
        self.name = name
        self._parent = parent
        self.flush_callback = flush_callback
        #: key -> ``(value bytes or None, timestamp, decoded or None)``; see :meth:`put`
        self._entries: OrderedDict[bytes, CacheEntry] = OrderedDict()
        self._dirty: dict[bytes, None] = {}
        #: keys marked final (:meth:`mark_final`), evicted first when the budget overflows
        self._final: list[bytes] = []
        self._on_remove: Callable[[bytes], None] | None = None
        self.size_bytes = 0
        #: whether a clean entry always equals what its store answers, so another cache may
        #: drop it (:meth:`RecordCache.evict_from`): a key-value store's, set by its caching
        #: layer. Not a window store's: its cache still answers a window the store expired.
        self.may_donate = False
        #: true while :meth:`_write_out` runs the flush callback
        self._flushing = False

    def set_remove_hook(self, hook: Callable[[bytes], None] | None) -> None:
        """Called with each key that leaves the cache (evicted, or a flushed tombstone).

        Caching window/session stores keep a per-record-key index of their cache keys with it.
        """
        self._on_remove = hook

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: bytes) -> bool:
        return key in self._entries

    @property
    def dirty_count(self) -> int:
        return len(self._dirty)

    def get(self, key: bytes) -> CacheEntry | None:
        """The cached :data:`CacheEntry` (value None: deleted, not flushed yet); marks it recent."""
        entries = self._entries
        entry = entries.get(key)
        if entry is not None:
            entries.move_to_end(key)
        return entry

    def peek(self, key: bytes) -> CacheEntry | None:
        """Like :meth:`get` without touching the LRU order (for scans)."""
        return self._entries.get(key)

    def put(self, key: bytes, value: bytes | None, timestamp: int, decoded: Any = None) -> None:
        """Write-back put: the entry is dirty until the next flush.

        ``decoded``, if given, is what the store's deserializer makes of ``value`` (a plain
        tuple of immutable objects, so the entry stays untracked by the garbage collector):
        readers that know it take it instead of decoding the bytes again. It is kept only
        for a key already cached (read or written before): a key seen once, as every key of
        an every-key-new workload, would pay for it and never read it. It is charged
        :data:`DECODED_OVERHEAD_BYTES` more; only the bytes are flushed.

        The hottest method of the cache: size accounting and the eviction check are inlined.
        """
        entries = self._entries
        old = entries.get(key)
        delta = len(value) if value is not None else 0
        if old is None:
            delta += len(key) + ENTRY_OVERHEAD_BYTES
            decoded = None
        else:
            old_value = old[0]
            if old_value is not None:
                delta -= len(old_value)
            if old[2] is not None:
                delta -= DECODED_OVERHEAD_BYTES
            if decoded is not None:
                delta += DECODED_OVERHEAD_BYTES
            entries.move_to_end(key)
        entries[key] = (value, timestamp, decoded)
        self._dirty[key] = None  # a key already dirty keeps its place (first-dirty order)
        parent = self._parent
        if delta:  # an update of the same size (a count's) leaves the sizes as they were
            self.size_bytes += delta
            parent.size_bytes += delta
        if parent.size_bytes > parent.max_bytes:
            parent.evict_from(self)

    def replace(
        self, key: bytes, old_value: bytes | None, value: bytes, timestamp: int, decoded: Any
    ) -> None:
        """:meth:`put` of a key whose entry the caller has just read and moved to the end
        (``old_value`` its bytes) and that keeps its kind of entry: ``decoded`` given if and
        only if the old entry had one (the charge for it stays as it was). What aggregation
        steps call for every record of a cached key: no second lookup, no second move.
        Precondition: nothing evicted or removed the entry since it was read (between the
        two the steps call only serdes and the user's aggregator); the sizes would be wrong."""
        self._entries[key] = (value, timestamp, decoded)
        self._dirty[key] = None
        delta = len(value) - (len(old_value) if old_value is not None else 0)
        parent = self._parent
        if delta:
            self.size_bytes += delta
            parent.size_bytes += delta
        if parent.size_bytes > parent.max_bytes:
            parent.evict_from(self)

    def put_clean(self, key: bytes, value: bytes) -> None:
        """Cache a value read from the store below (never overwrites a cached entry)."""
        entries = self._entries
        if key in entries:
            return
        entries[key] = (value, -1, None)
        delta = len(key) + len(value) + ENTRY_OVERHEAD_BYTES
        self.size_bytes += delta
        parent = self._parent
        parent.size_bytes += delta
        if parent.size_bytes > parent.max_bytes:
            parent.evict_from(self)

    def items(self) -> list[tuple[bytes, bytes | None]]:
        """A snapshot of every cached ``(key, value)`` (None = pending delete), unordered."""
        return [(key, entry[0]) for key, entry in self._entries.items()]

    def flush(self) -> None:
        """Hand every dirty entry to the flush callback, then keep them as clean (drop tombstones)."""
        if not self._dirty:
            return
        entries = self._entries
        dirty: list[tuple[bytes, bytes | None, int]] = []
        for key in self._dirty:
            entry = entries[key]
            dirty.append((key, entry[0], entry[1]))
        self._dirty = {}
        try:
            self._write_out(dirty)
        finally:
            for key, value, _ in dirty:
                if value is None and key in entries and entries[key][0] is None:
                    self._remove(key)

    def mark_final(self, keys: list[bytes]) -> None:
        """Note cache keys their store will not change again (an emit-final aggregation's
        closed windows): when the budget overflows they leave first (:meth:`evict_final`).

        Nothing changes while the budget holds: a final entry stays cached and readable, as
        in Kafka Streams, whose ``fetch(key, time)`` answers a cached window even after the
        store expired it (KStreamWindowAggregateTest.testJoin). Only for a store whose sole
        writer marks (a windowed cogroup's other processors may still update a window one of
        them closed). The list is not charged to the budget: about 60 B a mark (the key and
        its slot), at most ``2 * entries + 64`` marks before it is compacted.
        """
        final = self._final
        final.extend(keys)
        if len(final) > 2 * len(self._entries) + 64:
            entries = self._entries
            self._final = [key for key in final if key in entries]

    def evict_final(self) -> int:
        """Evict every entry marked final, writing the dirty ones below first (one flush
        call, in the order marked); the other dirty entries stay cached. Returns how many left.

        An overflowing cache thus drops the entries no record will update before any live
        one, and their eviction does not take every dirty entry along as an LRU eviction of a
        dirty entry does (open windows would reach the changelog once more at the next
        flush; bench/RESULTS.md). Only for stores whose flush
        forwards nothing downstream, where an early write of one key cannot overtake
        another key's forwarded update.
        """
        keys, self._final = self._final, []
        entries = self._entries
        dirty = self._dirty
        out: list[tuple[bytes, bytes | None, int]] = []
        for key in keys:
            if key in dirty:
                del dirty[key]
                entry = entries[key]
                out.append((key, entry[0], entry[1]))
        if out:
            self._write_out(out)  # a failing write leaves them cached (clean), as a failed flush does
        if self._on_remove is not None:  # a key index to keep: one removal at a time
            evicted = 0
            for key in keys:
                if key in entries:
                    self._remove(key)
                    evicted += 1
            return evicted
        # ``_remove`` of each, the sizes summed once (every window of an emit-final burst)
        pop: Callable[[bytes, None], CacheEntry | None] = entries.pop
        freed = evicted = 0
        for key in keys:
            removed = pop(key, None)
            if removed is not None:
                value = removed[0]
                freed += len(key) + ENTRY_OVERHEAD_BYTES + (len(value) if value is not None else 0)
                if removed[2] is not None:
                    freed += DECODED_OVERHEAD_BYTES
                evicted += 1
        self.size_bytes -= freed
        self._parent.size_bytes -= freed
        return evicted

    def _write_out(self, entries: list[tuple[bytes, bytes | None, int]]) -> None:
        """Hand entries already out of the dirty set to the flush callback; while it runs they
        look clean but are not written yet, so no other cache may take them (:meth:`can_donate`)."""
        self._flushing = True
        try:
            self.flush_callback(entries)
        finally:
            self._flushing = False

    def can_donate(self) -> bool:
        """True if another cache may drop this one's least recently used entry: a cache whose
        clean entries equal its store's (:attr:`may_donate`), not flushing, whose LRU entry
        exists and is clean."""
        entries = self._entries
        return (
            self.may_donate
            and not self._flushing
            and bool(entries)
            and next(iter(entries)) not in self._dirty
        )

    def evict(self) -> None:
        """Evict the least recently used entry, flushing all dirty entries first if it is dirty."""
        entries = self._entries
        if not entries:
            return
        key = next(iter(entries))
        if key in self._dirty:
            self.flush()
        if key in entries:
            self._remove(key)

    def _remove(self, key: bytes) -> None:
        value, _, decoded = self._entries.pop(key)
        self._dirty.pop(key, None)
        delta = len(key) + (len(value) if value is not None else 0) + ENTRY_OVERHEAD_BYTES
        if decoded is not None:
            delta += DECODED_OVERHEAD_BYTES
        self.size_bytes -= delta
        self._parent.size_bytes -= delta
        if self._on_remove is not None:
            self._on_remove(key)

    def clear(self) -> None:
        """Drop everything without flushing (the store is being wiped or closed dirty)."""
        self._parent.size_bytes -= self.size_bytes
        self.size_bytes = 0
        self._entries.clear()
        self._dirty = {}
        self._final = []


class RecordCache:
    """The per-worker byte budget shared by named caches (Kafka Streams' ``ThreadCache``)."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_MAX_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"cache size must be >= 0 bytes, got {max_bytes}")
        self.max_bytes = max_bytes
        self.size_bytes = 0
        self._caches: dict[str, NamedCache] = {}
        #: Entries evicted so far (a metric later).
        self.evictions = 0
        #: the cache that last gave a clean entry to another (:meth:`_evict_clean_elsewhere`)
        self._donor: NamedCache | None = None

    def named(self, name: str, flush_callback: CacheFlushCallback) -> NamedCache:
        """The named cache of one store of one task (``<task id>-<store name>``), created once."""
        cache = self._caches.get(name)
        if cache is None:
            cache = self._caches[name] = NamedCache(name, self, flush_callback)
        else:
            cache.flush_callback = flush_callback
        return cache

    def close_named(self, name: str) -> None:
        """Forget a named cache (its store was closed); unflushed entries are dropped."""
        cache = self._caches.pop(name, None)
        if cache is not None:
            cache.clear()
            if self._donor is cache:
                self._donor = None

    def evict_from(self, cache: NamedCache) -> None:
        """Evict from the cache that grew until the budget holds (Kafka Streams' ``maybeEvict``):
        first its entries marked final (:meth:`NamedCache.mark_final`), then by LRU order.

        Only the growing cache is flushed: flushing it may put into other caches downstream,
        and those evict from themselves. One addition to Kafka's rule: when the growing
        cache's LRU entry is dirty (its eviction would flush the cache), the LRU entry of
        another key-value cache is dropped instead if it is clean and that cache is not
        flushing (:meth:`NamedCache.can_donate`: the entry equals its store, so nothing is
        written or forwarded, only a later read goes to the store). Why: the budget is
        shared, and a cache only shrinks by its own evictions, so a task that filled the
        budget first (a worker reads partitions in turns: its first polls may all be one
        partition's) kept it, and every other task's cache, one entry large, flushed at
        every record (an every-key-new count: a flush per record on three tasks of four).
        """
        if cache._final:
            self.evictions += cache.evict_final()
        entries = cache._entries  # not len(cache): an every-key-new workload evicts per record
        while self.size_bytes > self.max_bytes and entries:
            key = next(iter(entries))
            # ``_dirty`` read each time: a flush replaces it
            if key not in cache._dirty:
                cache._remove(key)  # NamedCache.evict of a clean entry, one call less a record
            elif self._evict_clean_elsewhere(cache):
                continue  # counted there
            else:
                cache.evict()
            self.evictions += 1

    def _evict_clean_elsewhere(self, cache: NamedCache) -> bool:
        """Drop the LRU entry of a cache other than ``cache`` if it is clean: the last donor's
        if it has one, else the largest such cache's. False if no cache has one."""
        donor = self._donor
        if donor is None or donor is cache or not donor.can_donate():
            donor = None
            for other in self._caches.values():
                if (
                    other is not cache
                    and other.can_donate()
                    and (donor is None or other.size_bytes > donor.size_bytes)
                ):
                    donor = other
            self._donor = donor
            if donor is None:
                return False
        donor._remove(next(iter(donor._entries)))
        self.evictions += 1
        return True

    def flush_all(self) -> None:
        for cache in list(self._caches.values()):
            cache.flush()


def record_cache_for(context: StateStoreContext) -> RecordCache:
    """The worker's shared cache if the runtime offers one, else a cache private to the store.

    The runtime shares one budget across all stores of a worker by giving its context a
    ``record_cache`` attribute (a :class:`RecordCache`); without it each cached store gets
    its own cache of ``config.statestore_cache_max_bytes`` (default 10 MiB).
    """
    shared = getattr(context, "record_cache", None)
    if isinstance(shared, RecordCache):
        return shared
    try:
        size = getattr(context.config, "statestore_cache_max_bytes", DEFAULT_CACHE_MAX_BYTES)
    except Exception:  # a test context may not implement config
        size = DEFAULT_CACHE_MAX_BYTES
    return RecordCache(int(size) if size is not None else DEFAULT_CACHE_MAX_BYTES)


def merge_sorted(
    store_items: Iterator[tuple[Any, T]],
    cached: list[tuple[Any, T | None]],
    reverse: bool,
) -> Iterator[tuple[Any, T]]:
    """Merge a sorted store scan with sorted cache entries; the cache wins on equal keys.

    Both sides yield ``(sort key, item)``; ``cached`` must be sorted in the scan's direction
    and a None item hides the store's entry (a delete not yet flushed). The sort key is
    whatever orders both sides identically (bytes key, window start, ``(segment, binary)``).
    """
    i = 0
    n = len(cached)
    for key, item in store_items:
        while i < n:
            ckey, citem = cached[i]
            if (ckey > key) if reverse else (ckey < key):
                i += 1
                if citem is not None:
                    yield ckey, citem
                continue
            break
        if i < n and cached[i][0] == key:
            citem = cached[i][1]
            i += 1
            if citem is not None:
                yield key, citem
            continue
        yield key, item
    while i < n:
        ckey, citem = cached[i]
        i += 1
        if citem is not None:
            yield ckey, citem
