"""A DSL key-value store's cache flush in one loop, for the common stack.

When the record cache flushes a DSL store (on commit, or when its least recently used entry
is evicted dirty), each dirty entry goes down the layers and back up to the table
processor: caching -> change-logging (bytes store put, then the changelog send with its
timestamp and headers) -> the metered layer's deserializing listener -> the timestamped
store's listener -> the processor's ``emit``. That is about ten Python calls per entry,
and a flush is thousands of entries: for an exactly-once count (100 ms commits) the flush
is a third of the worker's time, and an every-key-new count flushes every record.

:func:`direct_flush` builds the flush callback that does the same work per entry in one
loop: the same bytes-store put, the same changelog record (topic, partition and headers
resolved once per flush through ``StateStoreContext.change_sender``, whose ``send`` the
loop calls itself: none of them can change within a flush; each record stamped with its
value's timestamp, as the layer stamps a timestamped store's), the same
listener call with the same decoded key, value, old value and timestamp, in the same
order. A value whose decoded form the cache kept beside these very bytes
(``direct_cache_path``) is not decoded again, nor is a key of a ``Bytes`` key serde.
Entries whose value is None (deletes: their reported timestamp lives in the timestamped
store) take the layered path, one at a time, so the order of the flush is kept.

It applies only to the exact stack it knows (``MeteredKeyValueStore`` ->
``CachingKeyValueStore`` -> [``ChangeLoggingKeyValueStore`` ->] ``KeyValueBytesStore``);
any other stack keeps the layered flush.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from platform_streams.state.api import FlushListener
from platform_streams.state.store_context import ChangeSender
from platform_streams.state.wrappers.caching_key_value import CachingKeyValueStore
from platform_streams.state.wrappers.direct_cache_path import fixed_codec, kv_layers_below
from platform_streams.state.wrappers.metered_key_value import MeteredKeyValueStore
from platform_streams.state.wrappers.quiet_flush import QuietCount, flush_reporting_last

__all__ = ["FlushEntries", "direct_flush"]

#: a named cache's flush callback: ``[(key bytes, value bytes or None, timestamp)]``
FlushEntries = Callable[[list[tuple[bytes, bytes | None, int]]], None]


def direct_flush(metered: Any, listener: FlushListener, send_old_values: bool) -> FlushEntries | None:
    """The one-loop flush of ``metered``'s stack reporting to ``listener``, or None.

    ``listener(key, value, old value, timestamp)`` is the timestamped store's listener
    (plain values, not ``ValueAndTimestamp``); the layered flush stays the fallback.
    """
    if type(metered) is not MeteredKeyValueStore or type(metered.wrapped) is not CachingKeyValueStore:
        return None
    caching: CachingKeyValueStore = metered.wrapped
    changelog, inner = kv_layers_below(caching)
    if inner is None:
        return None
    layered = caching.layered_flush
    #: a ``Bytes`` key serde decodes a key to itself: no call per entry
    deserialize_key = None if metered._bytes_keys else metered._deserialize_flushed_key
    #: a fixed-width number's value decoded by one C call (a key seen once, as every key of
    #: an every-key-new count, has no decoded form in the cache: NamedCache.put)
    _, unpack, fixed_size = fixed_codec(metered)

    def flush(entries: list[tuple[bytes, bytes | None, int]]) -> None:
        cached_entries = caching._require()._entries
        put, get = inner._map.put, inner._map.get
        sender = None if changelog is None else changelog.flush_sender()
        # without delivery reports but the last (runtime/producing/quiet_changelogs.py, quiet_flush.py)
        flush_reporting_last(
            entries,
            sender,
            lambda part, produce, count: _flush(part, cached_entries, put, get, sender, produce, count),
        )

    def _flush(
        entries: list[tuple[bytes, bytes | None, int]],
        cached_entries: dict[bytes, Any],
        put: Callable[[bytes, bytes], None],
        get: Callable[[bytes], bytes | None],
        sender: ChangeSender | None,
        produce: Callable[..., None] | None,
        count: QuietCount | None,
    ) -> None:
        """Flush ``entries``; with ``produce`` (a flush's all but last) their changelog
        records go to librdkafka without a report, counted in ``count``."""
        if sender is not None:
            send, topic, headers, partition, _ = sender
            produce_headers = headers or None  # the positional produce's, once a flush
        deserialize_value = metered._deserialize_value
        quiet, last, last_timestamp = 0, None, 0
        try:
            for entry in entries:
                key, value, _ = entry
                if value is None:
                    layered([entry])
                    continue
                old = None
                if send_old_values:
                    old_raw = get(key)
                    if old_raw is not None:
                        old = deserialize_value(old_raw)[0]
                put(key, value)
                cached = cached_entries.get(key)  # the decoded form kept for these bytes, if any
                if cached is not None and cached[0] is value and cached[2] is not None:
                    new_value, timestamp = cached[2]
                elif unpack is not None and len(value) == fixed_size:
                    timestamp, new_value = unpack(value)  # what deserialize_value does, in C
                else:
                    new_value, timestamp = deserialize_value(value)
                # the change is stamped with the value's own timestamp, as the layer stamps a
                # timestamped store's (change_time_of), without reading it again
                if produce is not None:  # quiet_flush.quiet_logger's work, without its call a record
                    try:  # positional only: store_context.QuietSend says why
                        produce(topic, value, key, partition, None, None, timestamp, produce_headers)
                        quiet += 1
                        last = entry
                        last_timestamp = timestamp
                    except Exception:  # full queue, refused: the reported send's own handling
                        send(topic, key, value, timestamp, headers, partition)
                elif sender is not None:
                    send(topic, key, value, timestamp, headers, partition)
                listener(key if deserialize_key is None else deserialize_key(key), new_value, old, timestamp)
        finally:
            if count is not None and last is not None:
                count.records += quiet
                count.key, count.value, count.timestamp = last[0], last[1] or b"", last_timestamp

    return flush
