"""An emit-final time-window aggregation's closed windows, straight on the record cache.

When stream time closes windows, ``TimeWindowAggregateProcessor`` emits each one's final
value, read from its store, and then tells the record cache which windows it emitted
(they are never updated again: evicted first, ``NamedCache.mark_final``). A tumbling
window closes for every key at once, so this runs in bursts (window_sum: 10,000 windows
every 60,000 records), one store read per window through the layers (the direct path's
``fetch_timestamped``: its checks, the key encoded again from the key the processor
decoded from the same bytes, a ``ValueAndTimestamp`` built by the value serde).
:func:`closed_window_reader` reads a burst with the checks made once, each window by the
key bytes the processor tracked it with (the bytes the store was written with), a
fixed-width aggregate decoded by the C unpacker. The same entries are read (and marked
recent, as ``NamedCache.get`` does), a window the cache does not hold from the store below,
one window at a time just before it is forwarded: what is emitted is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from platform_streams.state.keys import window_suffix
from platform_streams.state.wrappers.direct_cache_path import fixed_codec, window_caching

__all__ = ["ClosedWindowFetch", "ClosedWindowReader", "closed_window_marker", "closed_window_reader"]

#: ``fetch(start, key bytes)`` -> the window's ``(value, timestamp)``, or None (no such window)
ClosedWindowFetch = Callable[[int, bytes], "tuple[Any, int] | None"]
#: ``open(final)`` -> a :data:`ClosedWindowFetch` for one burst of closed windows, or None where
#: a layer the reads skip has work to do (metrics, no cache): read through the store then.
#: ``final`` (a list, or None): each window read from the cache appends its binary key there
#: (what ``closed_window_marker``'s mark takes), built once for the read and the mark
ClosedWindowReader = Callable[["list[bytes] | None"], "ClosedWindowFetch | None"]


def closed_window_marker(metered: Any) -> Callable[[list[bytes]], None] | None:
    """``mark([binary window key, ...])`` of a metered -> caching window stack whose
    flush forwards nothing (an emit-final aggregation's store): :meth:`CachingWindowStore.mark_final`.
    None for any other stack (no cache, or a flush listener whose forwarding order an early
    write could change)."""
    caching = window_caching(metered)
    if caching is None or caching._listener is not None:
        return None
    return caching.mark_final


def closed_window_reader(metered: Any) -> ClosedWindowReader | None:
    """The reader of a metered -> caching window stack of timestamped values, or None for
    any other stack. ``open()`` checks once a burst what the direct path checks per read (a
    metrics hook, hit/miss counting, no cache: None, read through the store) and binds the
    cache's lookups; the burst then fetches window by window, in the order the processor
    emits them, so a window is read just before it is forwarded, as one read at a time does."""
    caching = window_caching(metered)
    if caching is None:
        return None
    below = caching.wrapped
    deserialize_value = metered._deserialize_value
    _, unpack, fixed_size = fixed_codec(metered)

    def open_reads(final: list[bytes] | None) -> ClosedWindowFetch | None:
        cache = caching._cache
        if cache is None or metered._hook is not None or caching.reads is not None:
            return None
        entries = cache._entries
        get, move_to_end = entries.get, entries.move_to_end
        keep = final.append if final is not None else None

        def fetch(start: int, raw_key: bytes) -> tuple[Any, int] | None:
            binary = raw_key + window_suffix(start, 0)
            entry = get(binary)
            if entry is not None:
                move_to_end(binary)  # NamedCache.get's LRU touch
                raw = entry[0]
                if keep is not None:
                    keep(binary)
            else:
                raw = below.fetch_at(raw_key, start)
            if raw is None:
                return None
            if unpack is not None and len(raw) == fixed_size:
                timestamp, value = unpack(raw)
                return value, timestamp
            vat: tuple[Any, int] = deserialize_value(raw)  # a ValueAndTimestamp
            return vat

        return fetch

    return open_reads
