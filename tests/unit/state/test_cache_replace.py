"""``NamedCache.replace``: the put of an entry the caller has just read.

The aggregation steps of ``state/wrappers/direct_cache_path.py`` read a cached key's entry
(which moves it to the end of the LRU order), compute the new aggregate and write it back
with ``replace`` instead of ``put``: no second lookup, no second move. It must leave the
cache exactly as ``put`` would -- entries and their LRU order, the dirty keys in
first-dirty order, both byte counts, and what an overflow flushes. Kafka Streams'
``NamedCache.put`` (streams/src/main/java/org/apache/kafka/streams/state/internals/NamedCache.java)
is the model of the put both follow.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from platform_streams.state.cache import DECODED_OVERHEAD_BYTES, ENTRY_OVERHEAD_BYTES, RecordCache


def _logger(log: list[Any], what: str, cache: int) -> Callable[[Any], None]:
    def record(item: Any) -> None:
        log.append((what, cache, list(item) if isinstance(item, list) else item))

    return record


def _run(use_replace: bool, seed: int) -> tuple[Any, ...]:
    """One random sequence over three named caches sharing a small budget: reads with writes
    (``replace`` where a step would call it, else ``put``), pending deletes, clean entries
    read from a store (``put_clean``), final marks and flushes; two caches may donate clean
    entries, and every flush and removal is logged."""
    rng = random.Random(seed)
    log: list[Any] = []
    cache = RecordCache(max_bytes=10 * (ENTRY_OVERHEAD_BYTES + 10) + 2 * DECODED_OVERHEAD_BYTES)
    caches = []
    for i in range(3):
        named = cache.named(f"0_{i}-agg", _logger(log, "flush", i))
        named.may_donate = i != 2  # key-value caches give clean entries; a window cache does not
        named.set_remove_hook(_logger(log, "removed", i))
        caches.append(named)
    for step in range(800):
        named = rng.choice(caches)
        key = b"k%d" % rng.randrange(15)
        draw = rng.random()
        if draw < 0.04:
            named.flush()
        elif draw < 0.10:
            named.put(key, None, step)  # a delete, pending until the flush
        elif draw < 0.18:
            named.put_clean(key, b"c" * rng.randrange(1, 9))  # a miss read from the store
        elif draw < 0.22:
            named.mark_final([key])
        else:
            value = b"v" * rng.randrange(1, 9)
            decoded = (len(value), step) if rng.random() < 0.5 else None
            entry = named.get(key)  # a step's read: moves the entry to the end
            if use_replace and entry is not None and (entry[2] is None) == (decoded is None):
                named.replace(key, entry[0], value, step, decoded)
            else:
                named.put(key, value, step, decoded)
    return (
        [list(named._entries.items()) for named in caches],
        [list(named._dirty) for named in caches],
        [named.size_bytes for named in caches],
        cache.size_bytes,
        cache.evictions,
        log,
    )


def test_replace_leaves_the_cache_as_put_does() -> None:
    for seed in range(100):
        assert _run(True, seed) == _run(False, seed), seed


def test_replace_of_a_grown_value_overflows_and_flushes_as_put() -> None:
    cache = RecordCache(max_bytes=2 * (ENTRY_OVERHEAD_BYTES + 2 + 1))
    flushed: list[list[bytes]] = []
    named = cache.named("0_0-agg", lambda batch: flushed.append([key for key, _, _ in batch]))
    named.put(b"k1", b"1", 1)
    named.put(b"k2", b"1", 2)
    assert flushed == []
    entry = named.get(b"k1")
    assert entry is not None
    named.replace(b"k1", entry[0], b"22", 3, None)  # one byte more: over the budget
    # the least recently used entry (k2) is dirty: its eviction flushes every dirty key, in
    # first-dirty order, then k2 leaves
    assert flushed == [[b"k1", b"k2"]]
    assert list(named._entries) == [b"k1"]
    assert cache.size_bytes == named.size_bytes == ENTRY_OVERHEAD_BYTES + 2 + 2
