"""``rocksdb_config_setter`` and ``rocksdb_memory_budget`` reach every RocksDB store kind.

Kafka Streams' ``RocksDBStore.openDB`` calls the ``rocksdb.config.setter`` class's
``setConfig(storeName, options, configs)`` after its own defaults and before the open; the
segmented stores (window, session, versioned) open their segments the same way. Here the
setter is called for the instance and every column family (segments are column families).
The options are read back from the ``OPTIONS-*`` file RocksDB writes beside the data
(rocksdict has no getters), so each test sees what RocksDB itself applied.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from platform_streams.config import StreamsConfig
from platform_streams.state import SessionWindow, Stores, Windowed
from platform_streams.state.backend import store_directory
from tests.unit.state.conftest import FakeContext

SEEN: list[str] = []


def tuning(store_name: str, options: Any, table: Any) -> None:
    """The documented recipe: block size, compaction style, compression, bloom filter."""
    from rocksdict import DBCompactionStyle, DBCompressionType

    SEEN.append(store_name)
    table.set_block_size(64 * 1024)
    table.set_bloom_filter(12, False)
    options.set_compaction_style(DBCompactionStyle.universal())
    options.set_compression_type(DBCompressionType.zstd())


def _config(tmp_path: Path, **settings: Any) -> StreamsConfig:
    return StreamsConfig(
        application_id="app", bootstrap_servers="localhost:9092", state_dir=tmp_path, **settings
    )


def _options_by_family(directory: Path) -> dict[str, dict[str, str]]:
    """The newest OPTIONS file of a RocksDB directory: family -> {option: value}, column
    family options and table options merged."""
    newest = max(directory.glob("OPTIONS-*"), key=lambda p: int(p.name.split("-")[1]))
    out: dict[str, dict[str, str]] = {}
    section: dict[str, str] | None = None
    for line in newest.read_text().splitlines():
        header = re.match(r'\[(CFOptions|TableOptions/BlockBasedTable) "(.*)"\]', line)
        if header:
            section = out.setdefault(header.group(2), {})
        elif line.startswith("["):
            section = None
        elif section is not None and "=" in line:
            key, _, value = line.strip().partition("=")
            section[key] = value
    return out


def _write_each_kind(context: FakeContext, open_store: Callable[..., Any]) -> list[str]:
    """Open a key-value, a window, a session and a versioned RocksDB store, write to each
    (so the segmented ones make segment families) and flush; their names."""
    kv = open_store(Stores.persistent_key_value_store("kv").get())
    kv.put(b"k", b"v")
    window = open_store(Stores.persistent_window_store("win", 3_600_000, 60_000).get())
    window.put(b"k", b"v", 60_000)
    session = open_store(Stores.persistent_session_store("sess", 3_600_000).get())
    session.put(Windowed(b"k", SessionWindow(0, 10)), b"v")
    versioned = open_store(Stores.persistent_versioned_key_value_store("ver", 3_600_000).get())
    versioned.put(b"k", b"v1", 1_000)
    versioned.put(b"k", b"v2", 2_000)
    for store in (kv, window, session, versioned):
        store.flush()
    return ["kv", "win", "sess", "ver"]


def test_the_setter_changes_every_family_of_every_store_kind(
    tmp_path: Path, context: FakeContext, open_store: Callable[..., Any]
) -> None:
    SEEN.clear()
    context._config = _config(tmp_path, rocksdb_config_setter=f"{__name__}.tuning")
    names = _write_each_kind(context, open_store)
    assert set(SEEN) == set(names)
    for name in names:
        families = _options_by_family(store_directory(context.state_dir, name))
        if name != "kv":
            assert len(families) > 1, f"{name}: no segment family was made"
        for family, opts in families.items():
            where = f"{name}/{family}"
            assert opts["block_size"] == "65536", where
            assert opts["compaction_style"] == "kCompactionStyleUniversal", where
            assert opts["compression"] == "kZSTD", where
            assert opts["filter_policy"].startswith("bloomfilter"), where


def test_without_a_setter_the_defaults_stay(
    tmp_path: Path, context: FakeContext, open_store: Callable[..., Any]
) -> None:
    context._config = _config(tmp_path)
    for name in _write_each_kind(context, open_store):
        for family, opts in _options_by_family(store_directory(context.state_dir, name)).items():
            where = f"{name}/{family}"
            assert (opts["block_size"], opts["compression"]) == ("16384", "kLZ4Compression"), where
            assert opts["cache_index_and_filter_blocks"] == "false"


def test_a_memory_budget_shares_one_cache_that_memtables_are_charged_to(
    tmp_path: Path, context: FakeContext, open_store: Callable[..., Any]
) -> None:
    budget = 48 * 1024 * 1024
    context._config = _config(tmp_path, rocksdb_memory_budget="48MiB")
    assert context._config.rocksdb_memory_budget == budget
    a = open_store(Stores.persistent_key_value_store("a").get())
    b = open_store(Stores.persistent_key_value_store("b").get())
    window = open_store(Stores.persistent_window_store("w", 3_600_000, 60_000).get())
    window.put(b"k", b"v", 0)
    window.flush()
    for store in (a, b, window):
        props = store.backend.property_values(["rocksdb.block-cache-capacity"])
        assert props["rocksdb.block-cache-capacity"] == budget
        for opts in _options_by_family(store_directory(context.state_dir, store.name)).values():
            assert opts["cache_index_and_filter_blocks"] == "true"
    pinned = "rocksdb.block-cache-pinned-usage"
    before = b.backend.property_values([pinned])[pinned]
    for i in range(20_000):  # ~2.4 MB into a's memtable, nothing into b
        a.put(b"key-%08d" % i, b"x" * 100)
    a.backend.write_pending()
    # the write buffer manager charges a's memtable to the cache b reads from too
    assert b.backend.property_values([pinned])[pinned] >= before + 2_000_000


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("rocksdb_memory_budget", "lots", "rocksdb_memory_budget"),
        ("rocksdb_memory_budget", "0MiB", "rocksdb_memory_budget"),
        ("rocksdb_config_setter", "no_such_module.setter", "rocksdb_config_setter"),
        ("rocksdb_config_setter", 42, "rocksdb_config_setter"),
    ],
)
def test_bad_settings_name_the_field(tmp_path: Path, setting: str, value: Any, message: str) -> None:
    with pytest.raises(ValidationError) as err:
        _config(tmp_path, **{setting: value})
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("256MiB", 256 << 20),
        ("256Mi", 256 << 20),
        ("1GiB", 1 << 30),
        ("1G", 10**9),
        ("4096", 4096),
        (1024, 1024),
    ],
)
def test_budget_sizes(tmp_path: Path, text: Any, expected: int) -> None:
    assert _config(tmp_path, rocksdb_memory_budget=text).rocksdb_memory_budget == expected


def test_java_properties_key_reaches_the_setter(tmp_path: Path) -> None:
    config = StreamsConfig.from_properties(
        {
            "application.id": "app",
            "bootstrap.servers": "localhost:9092",
            "rocksdb.config.setter": f"{__name__}.tuning",
        }
    )
    assert config.rocksdb_config_setter is tuning
