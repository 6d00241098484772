"""RocksDB options of every store: the defaults, the memory budget and the user's config setter.

Part of the RocksDB backend (with ``rocksdb.py`` and ``rocksdb_columns.py``, the only modules
that import rocksdict). Every RocksDB instance and every column family of a store (window
and session segments, the versioned store's segments) gets its options from
:func:`store_options`, so the settings below apply to every store kind alike.

**Without a budget** each store gets 8 MiB memtables (up to 3 per column family) and every
store of the process shares one 64 MiB LRU block cache: memory grows with the number of
stores and segments (32 stores can hold 32 x 3 x 8 MiB of memtables) and nothing bounds it.

**With** ``rocksdb_memory_budget`` (Kafka Streams' ``BoundedMemoryRocksDBConfig`` recipe,
built in): one LRU block cache of the budget's size for every store of the process that
uses the same budget, a ``WriteBufferManager`` of a quarter of it whose memtable memory is
*charged to that cache* (so memtables and cached blocks share one limit), and index and
filter blocks kept in the cache (``cache_index_and_filter_blocks``, high priority) instead
of on the heap beside it. Stores opening and closing share the budget as they come: the LRU
cache and the write buffer manager count whatever is open, there is no per-store quota.

Where rocksdict (0.3.x) cannot express a knob of that recipe:

* ``strict_capacity_limit`` of the cache cannot be set (it stays false, as in Kafka's
  recipe): blocks pinned by open iterators and the memtables' charge may push usage past
  the budget instead of failing reads; the "memory near its limit" alert watches exactly
  that (pinned usage against capacity).
* the cache's ``high_pri_pool_ratio`` (Kafka's ``INDEX_FILTER_BLOCK_RATIO``) cannot be set:
  RocksDB's default applies (0.5 of the cache may hold high-priority index and filter
  blocks before they compete with data blocks).
* Options cannot be read back once set (no getters), nor can the table format of an
  ``Options``: the config setter therefore receives the store's ``BlockBasedOptions``
  (already holding the shared cache) beside the ``Options`` and changes that; it is
  installed after the setter returns.

Memory outside any budget, which the benchmark (bench/memory.py) measures as a fixed
overhead: the Python heap (records, the record cache of ``statestore_cache_max_bytes``),
librdkafka's buffers, RocksDB's per-instance structures (table readers of files whose
index is not cached yet, iterators, background threads) and the allocator's slack.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rocksdict import BlockBasedOptions, Cache, DBCompressionType, Options, WriteBufferManager

__all__ = [
    "ConfigSetter",
    "RocksDBSettings",
    "settings_from",
    "store_options",
]

#: ``setter(store_name, options, table)``: may change ``options`` (rocksdict ``Options``) and
#: ``table`` (its ``BlockBasedOptions``) of one store before it opens
ConfigSetter = Callable[[str, Options, BlockBasedOptions], None]

_WRITE_BUFFER_BYTES = 8 * 1024 * 1024
_MAX_WRITE_BUFFERS = 3
_BLOCK_SIZE = 16 * 1024
_SHARED_BLOCK_CACHE_BYTES = 64 * 1024 * 1024
#: the share of a memory budget the memtables may take (charged to the shared cache)
MEMTABLE_SHARE = 0.25

_lock = threading.Lock()
_default_cache: Cache | None = None
#: budget in bytes -> (its cache, its write buffer manager): one per distinct budget
_budgets: dict[int, tuple[Cache, WriteBufferManager]] = {}


@dataclass(frozen=True, slots=True)
class RocksDBSettings:
    """What an application configures of its RocksDB stores."""

    config_setter: ConfigSetter | None = None
    memory_budget: int | None = None


DEFAULT_SETTINGS = RocksDBSettings()


def settings_from(config: Any) -> RocksDBSettings:
    """The RocksDB settings of an application's config (validated there: the setter is a
    callable by now); a test context's config may lack them."""
    setter = getattr(config, "rocksdb_config_setter", None)
    budget = getattr(config, "rocksdb_memory_budget", None)
    if setter is None and budget is None:
        return DEFAULT_SETTINGS
    return RocksDBSettings(setter, int(budget) if budget is not None else None)


def _shared_default_cache() -> Cache:
    """One LRU block cache per process for stores without a budget (RocksDB's recommended setup)."""
    global _default_cache
    with _lock:
        if _default_cache is None:
            _default_cache = Cache(_SHARED_BLOCK_CACHE_BYTES)
        return _default_cache


def _budget_memory(budget: int) -> tuple[Cache, WriteBufferManager]:
    with _lock:
        shared = _budgets.get(budget)
        if shared is None:
            cache = Cache(budget)
            # allow_stall False: writers are not stopped at the limit, flushes are forced
            # instead (a stalled stream thread would miss its poll deadline)
            manager = WriteBufferManager.new_write_buffer_manager_with_cache(
                max(1, int(budget * MEMTABLE_SHARE)), False, cache
            )
            shared = _budgets[budget] = (cache, manager)
        return shared


def store_options(name: str, settings: RocksDBSettings = DEFAULT_SETTINGS) -> Options:
    """Options for the instance and each column family of the store ``name``.

    Raw mode (no pickling), LZ4, bloom filters for point lookups, modest memtables (a worker
    hosts many stores), atomic flush so that segments flushed together stay consistent with
    each other while the WAL is off; then the memory budget, then the config setter (which
    may override any of it, as Kafka's setter runs after Kafka's defaults).
    """
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    opts.set_atomic_flush(True)
    opts.set_write_buffer_size(_WRITE_BUFFER_BYTES)
    opts.set_max_write_buffer_number(_MAX_WRITE_BUFFERS)
    opts.set_max_background_jobs(2)
    opts.set_keep_log_file_num(2)
    opts.set_compression_type(DBCompressionType.lz4())
    table = BlockBasedOptions()
    table.set_block_size(_BLOCK_SIZE)
    table.set_bloom_filter(10, False)
    if settings.memory_budget is None:
        table.set_block_cache(_shared_default_cache())
    else:
        cache, manager = _budget_memory(settings.memory_budget)
        table.set_block_cache(cache)
        table.set_cache_index_and_filter_blocks(True)
        table.set_pin_l0_filter_and_index_blocks_in_cache(True)
        table.set_pin_top_level_index_and_filter(True)
        opts.set_write_buffer_manager(manager)
    if settings.config_setter is not None:
        settings.config_setter(name, opts, table)
    # rocksdict copies the table format into the options here: later changes to ``table``
    # would be lost, hence after the setter
    opts.set_block_based_table_factory(table)
    return opts

