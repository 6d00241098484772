"""A cache about to flush takes room from another cache's clean entry first.

Kafka Streams' ``ThreadCache.maybeEvict`` evicts only from the named cache that grew, and a
cache only shrinks by its own evictions. On a worker that read one partition first (its
first polls held nothing else), that task's cache took the whole budget and kept it, and the
other tasks' caches, one entry large, flushed at every record: an every-key-new count
flushed 750,000 times a million records on three tasks of four. Our ``evict_from`` drops
another key-value cache's least recently used entry instead when it is clean (equal to its
store: nothing is written or forwarded); with none clean, Kafka's rule applies. Window
caches never give (a clean window may be one the store expired and only the cache still
answers), nor does a cache while it flushes (its entries look clean, unwritten).
"""

from __future__ import annotations

from platform_streams.state.cache import ENTRY_OVERHEAD_BYTES, NamedCache, RecordCache

#: one entry of the keys and values below (2-byte key, 3-byte value)
ENTRY = ENTRY_OVERHEAD_BYTES + 2 + 3

Flushed = list[list[bytes]]


def _named(cache: RecordCache, name: str, may_donate: bool = True) -> tuple[NamedCache, Flushed]:
    """A named cache as a key-value store's caching layer makes it (``may_donate``)."""
    flushed: Flushed = []
    named = cache.named(name, lambda batch: flushed.append([key for key, _, _ in batch]))
    named.may_donate = may_donate
    return named, flushed


def test_a_growing_cache_takes_clean_entries_of_a_full_one_instead_of_flushing() -> None:
    cache = RecordCache(max_bytes=4 * ENTRY)
    hog, hog_flushed = _named(cache, "0_0-counts")
    late, late_flushed = _named(cache, "0_1-counts")
    for key in (b"a1", b"a2", b"a3", b"a4"):
        hog.put(key, b"vvv", 1)
    hog.flush()  # a commit: all clean, still cached
    for key in (b"b1", b"b2", b"b3"):
        late.put(key, b"vvv", 1)
    # no flush of the late cache: the hog's eldest clean entries made room, in LRU order
    assert late_flushed == [] and late.dirty_count == 3
    assert [key for key in (b"a1", b"a2", b"a3", b"a4") if key in hog] == [b"a4"]
    assert cache.size_bytes == 4 * ENTRY and cache.evictions == 3
    assert hog_flushed == [[b"a1", b"a2", b"a3", b"a4"]]  # only the commit's


def test_with_no_clean_entry_elsewhere_kafkas_rule_applies() -> None:
    cache = RecordCache(max_bytes=3 * ENTRY)
    hog, hog_flushed = _named(cache, "0_0-counts")
    late, late_flushed = _named(cache, "0_1-counts")
    hog.put(b"a1", b"vvv", 1)
    hog.put(b"a2", b"vvv", 1)  # dirty: not given away
    late.put(b"b1", b"vvv", 1)
    late.put(b"b2", b"vvv", 1)  # over: late's eldest is dirty, hog's too -> late flushes all
    assert late_flushed == [[b"b1", b"b2"]] and hog_flushed == []
    assert b"b1" not in late and b"b2" in late and len(hog) == 2
    late.flush()
    late_flushed.clear()
    hog.put(b"a3", b"vvv", 1)  # hog's eldest is dirty; late's eldest (b2) is clean: taken
    assert hog_flushed == [] and b"b2" not in late and len(hog) == 3


def test_a_clean_eldest_is_evicted_from_the_growing_cache_itself() -> None:
    cache = RecordCache(max_bytes=2 * ENTRY)
    one, _ = _named(cache, "0_0-counts")
    other, _ = _named(cache, "0_1-counts")
    other.put(b"b1", b"vvv", 1)
    other.flush()
    one.put(b"a1", b"vvv", 1)
    one.flush()
    one.put(b"a2", b"vvv", 1)  # one's eldest is clean: one evicts itself, as in Kafka
    assert b"a1" not in one and b"b1" in other


def test_a_closed_cache_is_no_donor() -> None:
    cache = RecordCache(max_bytes=2 * ENTRY)
    donor, _ = _named(cache, "0_0-counts")
    late, late_flushed = _named(cache, "0_1-counts")
    donor.put(b"a1", b"vvv", 1)
    donor.put(b"a2", b"vvv", 1)
    donor.flush()
    late.put(b"b1", b"vvv", 1)  # takes a1
    cache.close_named("0_0-counts")
    late.put(b"b2", b"vvv", 1)
    late.put(b"b3", b"vvv", 1)  # over again: no donor left, late flushes itself
    assert late_flushed == [[b"b1", b"b2", b"b3"]] and cache.size_bytes == 2 * ENTRY


def test_a_window_cache_gives_nothing() -> None:
    """A clean cached window may be one its store expired (CachingWindowStore.fetch_at answers
    it, as Kafka's cache does: KStreamWindowAggregateTest.testJoin): only its own growth
    evicts it, as in Kafka."""
    cache = RecordCache(max_bytes=3 * ENTRY)
    windows, _ = _named(cache, "0_0-windows", may_donate=False)
    late, late_flushed = _named(cache, "0_1-counts")
    windows.put(b"w1", b"vvv", 1)
    windows.put(b"w2", b"vvv", 1)
    windows.flush()
    late.put(b"b1", b"vvv", 1)
    late.put(b"b2", b"vvv", 1)  # over: late flushes itself, the clean windows stay
    assert late_flushed == [[b"b1", b"b2"]] and len(windows) == 2


def test_a_cache_gives_nothing_while_it_flushes() -> None:
    """Its entries are out of the dirty set before they are written below: a put that its
    flush makes into another cache must not drop them (they would be read from the store,
    still old, for the rest of the flush)."""
    cache = RecordCache(max_bytes=3 * ENTRY)
    downstream, down_flushed = _named(cache, "0_0-down")
    seen: list[list[bytes]] = []

    def forward(batch: list[tuple[bytes, bytes | None, int]]) -> None:
        for key, _, _ in batch:
            downstream.put(b"d" + key[1:], b"vvv", 1)  # over the budget on the second entry
            seen.append([k for k in (b"a1", b"a2") if k in upstream])

    upstream = cache.named("0_1-up", forward)
    upstream.may_donate = True
    upstream.put(b"a1", b"vvv", 1)
    upstream.put(b"a2", b"vvv", 1)
    upstream.flush()
    assert seen == [[b"a1", b"a2"], [b"a1", b"a2"]]  # nothing taken mid-flush
    assert down_flushed == [[b"d1", b"d2"]]  # the downstream cache flushed itself instead


def test_after_its_own_flush_a_cache_evicts_its_own_clean_entries() -> None:
    """In one eviction loop the growing cache flushes (no clean entry elsewhere yet), then
    its eldest is clean and it evicts that, even though the other cache has clean entries
    by then (here its flush's forwarding flushed the other): a flush replaces the dirty set."""
    cache = RecordCache(max_bytes=4 * ENTRY)
    other, _ = _named(cache, "0_0-counts")
    flushed: Flushed = []

    def forward(batch: list[tuple[bytes, bytes | None, int]]) -> None:
        flushed.append([key for key, _, _ in batch])
        other.flush()

    growing = cache.named("0_1-counts", forward)
    growing.may_donate = True
    growing.put(b"b1", b"vvv", 1)
    growing.put(b"b2", b"vvv", 1)
    other.put(b"a1", b"vvv", 1)  # dirty: no donor yet
    other.put(b"a2", b"vvv", 1)
    growing.put(b"b3", b"vvv" + b"x" * ENTRY, 1)  # needs two entries' room
    assert flushed == [[b"b1", b"b2", b"b3"]]
    assert b"b1" not in growing and b"b2" not in growing
    assert b"a1" in other and b"a2" in other  # clean now, but the grower had its own
