"""A stream aggregation's step on a cached key, as source text for the fused source.

:func:`~platform_streams.state.wrappers.direct_cache_path.direct_aggregate` made a record
of a grouped-stream aggregation one call. For a key whose aggregate the record cache holds
decoded (every record of a count's or a sum's key but its first), what is left of that call
is the call itself: its frame, the closure's dozen cells, the checks, and the cache's
``replace``. :func:`aggregate_fragment` writes the same work as statements
(:class:`~platform_streams.processor.node.FusedFragment`) that the fused source runs in
line: read the entry, move it to the end, call the user's aggregator on the decoded
aggregate, pack the new one, write the entry in place and mark it dirty, account its size,
evict if the budget overflows -- the same entry, bytes, timestamps, dirty order and sizes as
the step and ``NamedCache.replace``. A key neither cached nor stored (every record of an
every-key-new count) runs in line too: the store's map read as ``RocksDBBytesMap.get`` reads
it, ``first(key, value)``, and ``NamedCache.put``'s new entry. Everything else (a key stored
but not cached -- put in the cache clean first, where it fits, so the step reads the store
no second time --, a key not cached decoded, a stack with metrics to record, a key that is
not ``bytes``) calls the step, and an aggregate the cache cannot keep decoded (None: a
delete; a type not exact) is written by the store's own ``put_timestamped``, as the step's
tail would. Measured in process: a count -15 % CPU per record, count_unique -10 %
(bench/RESULTS.md).

Only for the stack the step serves with raw ``bytes`` keys (the ``Bytes`` key serde) and a
task context whose stream time the fragment reads.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from typing import Any

from platform_streams.processor.context import TaskContext
from platform_streams.processor.node import FusedFragment, call_text
from platform_streams.state.cache import ENTRY_OVERHEAD_BYTES
from platform_streams.state.timestamped import PACK_ERRORS
from platform_streams.state.wrappers.caching_key_value import CachingKeyValueStore
from platform_streams.state.wrappers.direct_cache_path import exact_value_types, fixed_codec, kv_layers_below
from platform_streams.state.wrappers.metered_key_value import MeteredKeyValueStore

__all__ = ["CACHE_PROLOGUE", "PACKED", "SERIALIZED", "aggregate_fragment", "cache_write"]

#: ``{pack}`` the fixed-width codec (the serde's bytes when it raises), or the serde alone
PACKED = """\
try:
    r{n} = {pack}(t{n}, a{n})
except {pack_errors}:
    r{n} = {serialize}((a{n}, t{n}))
"""
SERIALIZED = """\
r{n} = {serialize}((a{n}, t{n}))
"""

#: what a batch of records cannot change: the store's named cache (set at its ``init``), the
#: layers' metrics switches (installed on the worker thread at its state changes, between
#: batches: ``ThreadRecorder.sync_tasks``), the cache's entries (one
#: OrderedDict for the cache's life, emptied in place) and its budget; not its dirty keys
#: (a flush replaces that dict). Fields ``{caching}`` and ``{metered}``; ``g`` is None when
#: the fragment must not touch the cache
CACHE_PROLOGUE = """\
c{n} = {caching}._cache
g{n} = m{n} = None
if c{n} is not None and {metered}._hook is None and {caching}.reads is None:
    x{n} = c{n}._entries
    g{n} = x{n}.get
    m{n} = x{n}.move_to_end
    p{n} = c{n}._parent
"""


def cache_write(key: str, decoded: str, indent: int) -> str:
    """``NamedCache.replace`` of the entry ``e{n}`` read (and moved) under ``key``, in line:
    the new bytes ``r{n}`` written at the task's stream time with ``decoded``, the dirty mark,
    the size accounting and the eviction check; at ``indent`` levels."""
    text = f"""\
w{{n}} = {{task}}.stream_time
if w{{n}} < 0:
    w{{n}} = {{task}}.current_system_time_ms()
x{{n}}[{key}] = (r{{n}}, w{{n}}, {decoded})
c{{n}}._dirty[{key}] = None
w{{n}} = len(r{{n}}) - len(e{{n}}[0])
if w{{n}}:
    c{{n}}.size_bytes += w{{n}}
    p{{n}}.size_bytes += w{{n}}
if p{{n}}.size_bytes > p{{n}}.max_bytes:
    p{{n}}.evict_from(c{{n}})
"""
    return textwrap.indent(text, "    " * indent)


#: the step (``direct_aggregate``) in line for an entry cached decoded (then
#: ``NamedCache.replace``) and for a key neither cached nor stored (``{new}``: the key's first
#: record, then ``NamedCache.put`` of a new entry); anything else calls the step. A key the
#: store holds but the cache does not is put in the cache clean first, as the step's own
#: read would do, so the step does not read the store a second time.
_TEMPLATE = """\
e{n} = None
if g{n} is not None and {type}({k}) is {bytes} and {v} is not None:
    e{n} = g{n}({k})
    if e{n} is None:
        e{n} = l{n}({k}, {missing})
        if e{n} is {missing}:
            try:
                e{n} = rv{n}({k})
            except Exception as q{n}:
                rc{n}(q{n})
                raise
        if e{n} is None:
            e{n} = {new}
        else:
            if p{n}.size_bytes + len({k}) + len(e{n}) + {overhead} <= p{n}.max_bytes:
                c{n}.put_clean({k}, e{n})  # where it cannot evict itself (the step reads again)
            e{n} = None
if e{n} is not None and e{n}[2] is not None:
    m{n}({k})
    a{n}, t{n} = e{n}[2]
    if t{n} <= {ts}:  # the step's rule: the record's timestamp unless the stored one is later
        t{n} = {ts}
    a{n} = {aggregate_call}
    if {type}(a{n}) not in {exact}:
        {finish}({k}, a{n}, t{n})
    else:
{encode}{replace}elif e{n} is {new}:
    a{n} = {first_call}
    if {type}(a{n}) not in {exact}:
        {finish}({k}, a{n}, {ts})
    else:
        t{n} = {ts}
{encode}{insert}elif {k} is None or {v} is None or not {step}({k}, {v}, {ts}):
    {process}({k}, {v}, {ts}, h)
"""

#: a miss's store read, bound once a batch (inside ``CACHE_PROLOGUE``'s check): a closed map
#: (a failed reopen) keeps its own ``get``, which raises inside the record's ``try``; ``rc``
#: turns a RocksDB read's corruption into ``StoreCorruptedError``, as ``RocksDBBytesMap.get``
#: does (a bare ``Exception`` would reach the processing exception handler instead)
_MAP_LOOKUP = """\
    mp{n} = {below}._map
    if type(mp{n}) is {rocksdb_map}:
        l{n} = mp{n}.pending.get
        rv{n} = mp{n}.view.get
        rc{n} = mp{n}.raise_if_corrupt
    else:
        l{n} = {not_pending}
        rv{n} = mp{n}.get
        rc{n} = {not_corrupt}
"""

#: ``NamedCache.put`` of a key not cached, in line: no decoded form (a key seen once), the
#: entry's bytes, key and overhead charged, the eviction check
_INSERT = """\
w{n} = {task}.stream_time
if w{n} < 0:
    w{n} = {task}.current_system_time_ms()
x{n}[{k}] = (r{n}, w{n}, None)
c{n}._dirty[{k}] = None
w{n} = len({k}) + len(r{n}) + {overhead}
c{n}.size_bytes += w{n}
p{n}.size_bytes += w{n}
if p{n}.size_bytes > p{n}.max_bytes:
    p{n}.evict_from(c{n})
"""


def aggregate_fragment(
    metered: Any,
    first: Callable[[Any, Any], Any],
    aggregator: Callable[[Any, Any, Any], Any],
    finish: Callable[[Any, Any, int], None],
) -> FusedFragment | None:
    """The fragment of ``metered``'s stack, or None where it does not apply (see the module
    docstring). ``first(key, value)`` is a key's first aggregate, ``aggregator`` the next
    ones (the step's); ``finish(key, aggregate, timestamp)`` writes an aggregate the cache
    does not keep decoded (the store's ``put_timestamped``)."""
    if type(metered) is not MeteredKeyValueStore or type(metered.wrapped) is not CachingKeyValueStore:
        return None
    caching: CachingKeyValueStore = metered.wrapped
    context = caching._context
    exact = exact_value_types(metered)
    if not metered._bytes_keys or type(context) is not TaskContext or not exact:
        return None
    pack = fixed_codec(metered)[0]
    bytes_store = kv_layers_below(caching)[1]
    bound = {
        "caching": caching,
        "metered": metered,
        "bytes": bytes,
        "type": type,
        "first": first,
        #: what ``e{n}`` holds for a key neither cached nor stored (no cache entry is this tuple)
        "new": (None, None, None),
        "aggregator": aggregator,
        "exact": exact,
        "finish": finish,
        "serialize": metered._serialize_value,
        "task": context,
        # a miss reads the bytes store's map past the layers that delegate, as the step does
        "below": caching.wrapped if bytes_store is None else bytes_store,
    }
    if pack is not None:
        bound |= {"pack": pack, "pack_errors": PACK_ERRORS}
    encode = textwrap.indent(PACKED if pack is not None else SERIALIZED, "    " * 2)
    insert = textwrap.indent(_INSERT, "    " * 2)
    replace = cache_write("{k}", "(a{n}, t{n})", 2)
    template = _TEMPLATE.replace("{encode}", encode).replace("{replace}", replace).replace("{insert}", insert)
    # the aggregator's and first's calls, or their expressions (processor/node.py: call_text)
    aggregate = call_text(aggregator, "{aggregator}", key="{k}", value="{v}", aggregate="a{n}")
    template = template.replace("{aggregate_call}", aggregate)
    template = template.replace("{first_call}", call_text(first, "{first}", key="{k}", value="{v}"))
    template = template.replace("{overhead}", str(ENTRY_OVERHEAD_BYTES))
    # the store read of a miss: RocksDBBytesMap.get in line (its pending overlay, where a
    # delete pending is None, then its column family: both live as long as the map, read
    # once a batch), any other map's own get; the RocksDB module is looked up, not imported,
    # so that a process with in-memory stores only never loads it (state/stores.py)
    rocksdb = sys.modules.get("platform_streams.state.rocksdb")
    bound |= {
        "missing": object(),
        "not_pending": lambda key, default: default,
        "not_corrupt": lambda exc: None,
        "rocksdb_map": getattr(rocksdb, "RocksDBBytesMap", None),
    }
    lookup = (
        _MAP_LOOKUP
        if bytes_store is not None
        else "    l{n} = {not_pending}\n    rv{n} = {below}.get\n    rc{n} = {not_corrupt}\n"
    )
    return FusedFragment(template, bound, CACHE_PROLOGUE + lookup)
