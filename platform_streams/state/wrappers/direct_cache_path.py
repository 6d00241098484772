"""A DSL store's point reads and writes straight to its record cache.

Every record of a DSL aggregation reads its key's aggregate and writes the new one
(``TimestampedKeyValueStore.get_timestamped`` / ``put_timestamped``; for windows
``DslWindowStore.fetch_timestamped`` / ``put_timestamped``). Through the layers
that is five Python calls each way (timestamped -> metered -> caching -> record cache, plus
the serde), for what is, with metrics at INFO, a key encode, a cache lookup and a value
decode. :func:`direct_cache_path` builds the two calls as closures that do exactly that
work and nothing else: the same bytes, the same cache entries and timestamps, the same
misses read from (and cached from) the store below, so flushes, the changelog and
evictions are unchanged. Measured on ``bench/stateful_cpu.py --workloads count``: about 8 %
of a count's CPU per record (bench/RESULTS.md).

Each call first checks that the layers it skips have nothing to do: no metrics hook on
the metered layer (latency recording), no hit/miss counting on the caching layer (metrics
at DEBUG), the store open. (A metered layer over a caching layer never forwards writes
itself, ``_forward``: its flush listener goes to the cache.) Otherwise, and for deletes
(their timestamps and listener handling live in the store), it takes the layered path.

The decoded aggregate is kept in the cache entry beside its bytes (``NamedCache.put``'s
``decoded``), so the next record of the key skips the decode: only for immutable types the
store's serde gives back unchanged (:func:`exact_value_types`; a count's int, a sum's
float), as a plain tuple inside the entry. An earlier memo in a dict of its own made
every-key-new workloads 30 % dearer (one more dict entry per record for the garbage
collector to walk); inside the entry it costs nothing there (bench/RESULTS.md). Window
stores keep no decoded form: the cache charges it (``DECODED_OVERHEAD_BYTES``), so fewer
windows fit, and the dirty evictions that costs outweigh the decodes saved (their values
decode with one ``struct`` call).
"""

from __future__ import annotations

from collections.abc import Callable
from types import MethodType
from typing import Any, NamedTuple, cast

from platform_streams.processor.context import TaskContext
from platform_streams.serde import Bytes, Double, Integer, Json, Long, Short, String
from platform_streams.state.key_value_store import KeyValueBytesStore
from platform_streams.state.keys import window_suffix
from platform_streams.state.timestamped import PACK_ERRORS, ValueAndTimestamp, ValueAndTimestampSerde
from platform_streams.state.wrappers.caching_key_value import CachingKeyValueStore
from platform_streams.state.wrappers.caching_windowed import CachingWindowStore
from platform_streams.state.wrappers.change_logging import ChangeLoggingKeyValueStore
from platform_streams.state.wrappers.metered_key_value import MeteredKeyValueStore
from platform_streams.state.wrappers.metered_windowed import MeteredWindowStore

__all__ = [
    "AggregateStep",
    "DirectCachePath",
    "DirectWindowCachePath",
    "WindowAggregateStep",
    "bind_direct_path",
    "direct_aggregate",
    "direct_cache_path",
    "direct_window_aggregate",
    "direct_window_cache_path",
    "fixed_codec",
    "kv_layers_below",
    "window_caching",
    "window_step_parts",
]

_new_tuple = tuple.__new__

#: ``(get_timestamped, put_timestamped)``
DirectCachePath = tuple[
    Callable[[Any], ValueAndTimestamp | None],
    Callable[[Any, Any, int], None],
]
#: ``(fetch_timestamped, put_timestamped)`` of a window store
DirectWindowCachePath = tuple[
    Callable[[Any, int], ValueAndTimestamp | None],
    Callable[[Any, Any, int, int], None],
]


def bind_direct_path(
    store: Any, cls: type, names: tuple[str, str], build: Callable[..., tuple[Any, Any] | None]
) -> None:
    """Set ``store``'s two point methods ``names`` to the direct calls ``build`` makes from the
    layered ones (``cls``'s methods, bound to ``store``), or back to the layered ones when
    ``build`` answers None: instance attributes, rebound at every ``init``."""
    layered = tuple(MethodType(getattr(cls, name), store) for name in names)
    direct = build(*layered)
    vars(store).update(zip(names, direct if direct is not None else layered, strict=True))


def _serdes(
    metered: Any,
) -> tuple[Callable[[Any], bytes], bool, Callable[[Any], bytes], Callable[[bytes], Any]]:
    """The metered layer's key and value serde calls, and whether its keys are raw bytes."""
    return metered._serialize_key, metered._bytes_keys, metered._serialize_value, metered._deserialize_value


#: built-in serdes -> the value types they decode back to an equal value of the same type
_EXACT_TYPES: dict[type, frozenset[type]] = {
    Long: frozenset({int}),
    Integer: frozenset({int}),
    Short: frozenset({int}),
    Double: frozenset({float}),
    String: frozenset({str}),
    Bytes: frozenset({bytes}),
    Json: frozenset({int, str, bool}),
}


def exact_value_types(metered: Any) -> frozenset[type]:
    """The aggregate types whose decoded form the cache may keep beside the bytes.

    Only immutable types (an aggregator may change a dict it was given, and the cached
    value must stay what the bytes say) whose round trip through the store's inner serde
    gives back an equal value of the same type: a ``Double`` store given an int decodes
    it as a float, a ``Json`` float NaN comes back as None, so neither is kept.
    """
    inner = getattr(metered.value_serde, "inner", None)
    return _EXACT_TYPES.get(type(inner), frozenset())


def kv_layers_below(
    caching: CachingKeyValueStore,
) -> tuple[ChangeLoggingKeyValueStore | None, KeyValueBytesStore | None]:
    """The change-logging layer (None: logging off) and the bytes store below ``caching``, for
    the DSL's usual stack; ``(None, None)`` for any other stack."""
    below = caching.wrapped
    changelog = cast(ChangeLoggingKeyValueStore, below) if type(below) is ChangeLoggingKeyValueStore else None
    inner = changelog.wrapped if changelog is not None else below
    if type(inner) is not KeyValueBytesStore:
        return None, None
    return changelog, cast(KeyValueBytesStore, inner)


class _KvStack(NamedTuple):
    """What the direct calls of a metered -> caching key-value stack bind once."""

    caching: CachingKeyValueStore
    serialize_key: Callable[[Any], bytes]
    bytes_keys: bool
    serialize_value: Callable[[Any], bytes]
    deserialize_value: Callable[[bytes], Any]
    exact: frozenset[type]
    #: the bytes store below (a miss reads its map, past the layers that delegate), or None
    bytes_store: KeyValueBytesStore | None


def _kv_stack(metered: Any) -> _KvStack | None:
    """The parts of ``metered``'s stack, or None unless it is metered -> caching key-value."""
    if type(metered) is not MeteredKeyValueStore or type(metered.wrapped) is not CachingKeyValueStore:
        return None
    caching: CachingKeyValueStore = metered.wrapped
    return _KvStack(caching, *_serdes(metered), exact_value_types(metered), kv_layers_below(caching)[1])


def direct_cache_path(
    metered: Any,
    layered_get: Callable[[Any], ValueAndTimestamp | None],
    layered_put: Callable[[Any, Any, int], None],
) -> DirectCachePath | None:
    """The direct calls for a metered -> caching stack, or None for any other stack.

    ``layered_get``/``layered_put`` are the store's own methods: the fallback.
    """
    stack = _kv_stack(metered)
    if stack is None:
        return None
    caching, serialize_key, bytes_keys, serialize_value, deserialize_value, exact, bytes_store = stack
    context = caching._context
    below = caching.wrapped

    def get_timestamped(key: Any) -> ValueAndTimestamp | None:
        cache = caching._cache
        if cache is None or metered._hook is not None or caching.reads is not None:
            return layered_get(key)
        raw_key = key if type(key) is bytes and bytes_keys else serialize_key(key)
        entries = cache._entries  # NamedCache.get, inlined: this runs once per record
        entry = entries.get(raw_key)
        if entry is not None:
            entries.move_to_end(raw_key)
            decoded = entry[2]
            if decoded is not None:
                kept: ValueAndTimestamp = _new_tuple(ValueAndTimestamp, decoded)
                return kept
            raw = entry[0]
        else:
            raw = bytes_store._map.get(raw_key) if bytes_store is not None else below.get(raw_key)
            if raw is not None:
                cache.put_clean(raw_key, raw)
        if raw is None:
            return None
        vat: ValueAndTimestamp = deserialize_value(raw)
        return vat

    def put_timestamped(key: Any, value: Any, timestamp: int) -> None:
        cache = caching._cache
        if value is None or cache is None or metered._hook is not None or metered._forward is not None:
            layered_put(key, value, timestamp)
            return
        raw_key = key if type(key) is bytes and bytes_keys else serialize_key(key)
        pair = (value, timestamp)
        raw_value = serialize_value(pair)
        written_at = context.current_stream_time_ms()
        if written_at < 0:
            written_at = context.current_system_time_ms()
        cache.put(raw_key, raw_value, written_at, pair if type(value) in exact else None)

    return get_timestamped, put_timestamped


#: ``step(key, value, timestamp) -> done``: one record of a stream aggregation; False when
#: the store's layers have work to do (the caller then takes its general path)
AggregateStep = Callable[[Any, Any, int], bool]


def direct_aggregate(
    metered: Any,
    first: Callable[[Any, Any], Any],
    aggregator: Callable[[Any, Any, Any], Any],
    layered_put: Callable[[Any, Any, int], None],
) -> AggregateStep | None:
    """One record of a grouped-stream aggregation (``KStreamAggregate``/``KStreamReduce``) in
    one call: read the key's aggregate, compute the new one (``first(key, value)`` for a key
    with none, else ``aggregator(key, value, aggregate)``), write it with the larger of the two
    timestamps. The reads and the write are :func:`direct_cache_path`'s, the same cache
    entries and bytes; what it saves is per record: two closure calls, their checks, and the
    ``ValueAndTimestamp`` handed between them (about a fifth of an in-process count).

    None for any stack :func:`direct_cache_path` does not serve. ``layered_put`` writes a
    None aggregate (a delete) through the layers.
    """
    stack = _kv_stack(metered)
    if stack is None:
        return None
    caching, serialize_key, bytes_keys, serialize_value, deserialize_value, exact, bytes_store = stack
    context = caching._context
    below = caching.wrapped
    #: a count's or a sum's ``(timestamp, number)`` packed without the serde's Python call
    pack = fixed_codec(metered)[0]
    #: the stream time as the task context's attribute (its ``current_stream_time_ms``)
    task_context = context if type(context) is TaskContext else None

    def step(key: Any, value: Any, timestamp: int) -> bool:
        cache = caching._cache
        if cache is None or metered._hook is not None or caching.reads is not None:
            return False
        raw_key = key if type(key) is bytes and bytes_keys else serialize_key(key)
        entries = cache._entries
        entry = entries.get(raw_key)
        if entry is not None:
            entries.move_to_end(raw_key)
            old = entry[2]
            if old is None and entry[0] is not None:
                old = deserialize_value(entry[0])
        else:
            raw = bytes_store._map.get(raw_key) if bytes_store is not None else below.get(raw_key)
            old = None
            if raw is not None:
                cache.put_clean(raw_key, raw)
                old = deserialize_value(raw)
        if old is None:
            new = first(key, value)
        else:
            aggregate, old_timestamp = old
            if old_timestamp > timestamp:
                timestamp = old_timestamp
            new = aggregator(key, value, aggregate)
        if new is None:
            layered_put(key, None, timestamp)
            return True
        pair = (new, timestamp)
        if pack is None:
            raw_value = serialize_value(pair)
        else:
            try:
                raw_value = pack(timestamp, new)
            except PACK_ERRORS:
                raw_value = serialize_value(pair)  # the inner serde's bytes, or its error
        written_at = context.current_stream_time_ms() if task_context is None else task_context.stream_time
        if written_at < 0:
            written_at = context.current_system_time_ms()
        decoded = pair if type(new) in exact else None
        if entry is not None and (entry[2] is None) == (decoded is None):
            # the entry read above, moved to the end: its put without a second lookup (a
            # count's or a sum's every record of a key but its first)
            cache.replace(raw_key, entry[0], raw_value, written_at, decoded)
        else:
            cache.put(raw_key, raw_value, written_at, decoded)
        return True

    return step


def fixed_codec(
    metered: Any,
) -> tuple[Callable[[int, Any], bytes] | None, Callable[[bytes], tuple[int, Any]] | None, int]:
    """``(pack, unpack, size)`` of the store's ``ValueAndTimestampSerde`` over one fixed-width
    number (:meth:`~ValueAndTimestampSerde.fixed_packer`, ``fixed_unpacker``); Nones (and 0)
    for any other value serde."""
    value_serde = metered.value_serde
    if type(value_serde) is not ValueAndTimestampSerde:
        return None, None, 0
    unpacker = value_serde.fixed_unpacker()
    if unpacker is None:
        return None, None, 0
    return value_serde.fixed_packer(), unpacker[0], unpacker[1]


def window_caching(metered: Any) -> CachingWindowStore | None:
    """The caching layer of a metered -> caching window stack, or None for any other stack
    (the window twin of :func:`_kv_stack`)."""
    if type(metered) is not MeteredWindowStore or type(metered.wrapped) is not CachingWindowStore:
        return None
    caching: CachingWindowStore = metered.wrapped
    return caching


def direct_window_cache_path(
    metered: Any,
    layered_fetch: Callable[[Any, int], ValueAndTimestamp | None],
    layered_put: Callable[[Any, Any, int, int], None],
) -> DirectWindowCachePath | None:
    """:func:`direct_cache_path` for a timestamped window store (metered -> caching window)."""
    caching = window_caching(metered)
    if caching is None:
        return None
    serialize_key, bytes_keys, serialize_value, deserialize_value = _serdes(metered)
    below = caching.wrapped

    def fetch_timestamped(key: Any, window_start_ms: int) -> ValueAndTimestamp | None:
        cache = caching._cache
        if cache is None or metered._hook is not None or caching.reads is not None:
            return layered_fetch(key, window_start_ms)
        raw_key = key if type(key) is bytes and bytes_keys else serialize_key(key)
        entry = cache.get(raw_key + window_suffix(window_start_ms, 0))
        raw = entry[0] if entry is not None else below.fetch_at(raw_key, window_start_ms)
        if raw is None:
            return None
        vat: ValueAndTimestamp = deserialize_value(raw)
        return vat

    def put_timestamped(key: Any, value: Any, timestamp: int, window_start_ms: int) -> None:
        layered = caching._cache is None or metered._hook is not None or metered._forward is not None
        if value is None or layered:
            layered_put(key, value, timestamp, window_start_ms)
            return
        raw_key = key if type(key) is bytes and bytes_keys else serialize_key(key)
        raw_value = serialize_value((value, timestamp))
        caching._cache_put(raw_key, raw_key + window_suffix(window_start_ms, 0), raw_value, window_start_ms)

    return fetch_timestamped, put_timestamped


#: ``step(key, value, timestamp, window_start) -> created``: one window of one record of a
#: windowed aggregation; True when the window is new, None when the store's layers have
#: work to do (nothing was done: the caller takes its general path)
WindowAggregateStep = Callable[[Any, Any, int, int], bool | None]


def direct_window_aggregate(
    metered: Any,
    initializer: Callable[[], Any],
    aggregator: Callable[[Any, Any, Any], Any],
    layered_put: Callable[[Any, Any, int, int], None],
) -> WindowAggregateStep | None:
    """:func:`direct_aggregate` for one window of a time-windowed aggregation
    (``KStreamWindowAggregate``: fetch the window, aggregate, put it with the larger timestamp):
    the reads and the write are :func:`direct_window_cache_path`'s, with the window's binary
    key built once instead of once per call. None for any other stack."""
    caching = window_caching(metered)
    if caching is None:
        return None
    serialize_key, bytes_keys, serialize_value, deserialize_value = _serdes(metered)
    below = caching.wrapped
    context = caching._context
    pack, unpack, fixed_size = fixed_codec(metered)
    task_context = context if type(context) is TaskContext else None

    def step(key: Any, value: Any, timestamp: int, window_start_ms: int) -> bool | None:
        cache = caching._cache
        if cache is None or metered._hook is not None or caching.reads is not None:
            return None
        raw_key = key if type(key) is bytes and bytes_keys else serialize_key(key)
        binary = raw_key + window_suffix(window_start_ms, 0)
        entries = cache._entries  # NamedCache.get, inlined
        entry = entries.get(binary)
        if entry is not None:
            entries.move_to_end(binary)
            raw = entry[0]
        else:
            raw = below.fetch_at(raw_key, window_start_ms)
        if raw is None:
            aggregate, new_timestamp, created = initializer(), timestamp, True
        else:
            if unpack is not None and len(raw) == fixed_size:
                new_timestamp, aggregate = unpack(raw)
            else:
                aggregate, new_timestamp = deserialize_value(raw)
            if timestamp > new_timestamp:
                new_timestamp = timestamp
            created = False
        new = aggregator(key, value, aggregate)
        if new is None:
            layered_put(key, None, new_timestamp, window_start_ms)
            return created
        if pack is None:
            raw_value = serialize_value((new, new_timestamp))
        else:
            try:
                raw_value = pack(new_timestamp, new)
            except PACK_ERRORS:
                raw_value = serialize_value((new, new_timestamp))  # the inner serde's bytes, or its error
        if caching._index is not None:  # a key index to keep (range reads): the layer's own put
            caching._cache_put(raw_key, binary, raw_value, window_start_ms)
            return created
        if window_start_ms > caching._observed:  # CachingWindowStore._cache_put, inlined
            caching._observed = window_start_ms
        written_at = context.current_stream_time_ms() if task_context is None else task_context.stream_time
        if written_at < 0:
            written_at = context.current_system_time_ms()
        if entry is not None and entry[2] is None:
            cache.replace(binary, raw, raw_value, written_at, None)  # read and moved above
        else:
            cache.put(binary, raw_value, written_at)
        return created

    return step


def window_step_parts(metered: Any) -> dict[str, Any] | None:
    """What in-line code needs to do :func:`direct_window_aggregate`'s step on a cached window
    of a fixed-width number (a fused fragment's bound objects: the caching layer, the metered
    layer, the codec, the serde, the task context, the key suffix), or None where the stack,
    the key serde (not ``Bytes``), the value serde (not one fixed-width number) or the
    context (not a task's) leaves nothing to write in line."""
    caching = window_caching(metered)
    if caching is None or not metered._bytes_keys or type(caching._context) is not TaskContext:
        return None
    pack, unpack, fixed_size = fixed_codec(metered)
    if pack is None:
        return None
    return {
        "caching": caching,
        "metered": metered,
        "pack": pack,
        "unpack": unpack,
        "fixed_size": fixed_size,
        "pack_errors": PACK_ERRORS,
        "serialize": metered._serialize_value,
        "task": caching._context,
        "suffix": window_suffix,
        "bytes": bytes,
        "type": type,
    }
