"""``Stores`` and the store builders: defaults, stacks, changelog topic configs.

The package's public names are pinned with every other package's in tests/unit/test_public_api.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from platform_streams.serde import Long, String
from platform_streams.state import Stores, changelog_topic_name
from platform_streams.state.timestamped import ValueAndTimestamp, ValueAndTimestampSerde
from platform_streams.state.wrappers.caching_key_value import CachingKeyValueStore
from platform_streams.state.wrappers.change_logging import ChangeLoggingKeyValueStore
from platform_streams.state.wrappers.metered_key_value import MeteredKeyValueStore
from tests.unit.state.conftest import FakeContext


def test_defaults_match_kafka_streams() -> None:
    builder = Stores.key_value_store_builder(Stores.persistent_key_value_store("counts"), String(), Long())
    assert builder.name == "counts"
    assert not builder.caching_enabled
    assert builder.logging_enabled
    assert builder.log_config == {}


def test_key_value_stack_layers() -> None:
    builder = Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"), String(), Long())
    store = builder.with_caching_enabled().build()
    assert isinstance(store, MeteredKeyValueStore)
    assert isinstance(store.wrapped, CachingKeyValueStore)
    assert isinstance(store.wrapped.wrapped, ChangeLoggingKeyValueStore)
    bare = builder.with_caching_disabled().with_logging_disabled().build()
    assert type(bare.wrapped).__name__ == "KeyValueBytesStore"
    assert not bare.persistent
    assert builder.build() is not builder.build()  # a new instance per task


def test_changelog_topic_configs() -> None:
    kv = Stores.key_value_store_builder(Stores.persistent_key_value_store("kv"), String(), Long())
    assert kv.changelog_topic_config() == {"cleanup.policy": "compact"}
    kv.with_logging_enabled({"min.insync.replicas": "2", "segment.ms": 100})  # type: ignore[dict-item]
    assert kv.changelog_topic_config() == {
        "cleanup.policy": "compact",
        "min.insync.replicas": "2",
        "segment.ms": "100",
    }
    log_config = kv.log_config
    log_config["x"] = "y"
    assert "x" not in kv.log_config  # a copy

    window = Stores.window_store_builder(
        Stores.persistent_window_store("w", 3_600_000, 60_000), String(), Long()
    )
    assert window.changelog_topic_config() == {
        "cleanup.policy": "compact,delete",
        "retention.ms": str(3_600_000 + 86_400_000),
    }
    session = Stores.session_store_builder(Stores.in_memory_session_store("s", 1000), String(), Long())
    session.with_logging_enabled({"retention.ms": "5"})
    assert session.changelog_topic_config() == {"cleanup.policy": "compact,delete", "retention.ms": "5"}
    assert window.with_logging_disabled().log_config == {}
    assert not window.logging_enabled


def test_suppliers() -> None:
    supplier = Stores.persistent_window_store("w", 10_000, 1000, retain_duplicates=True)
    assert (supplier.name, supplier.retention_ms, supplier.window_size_ms, supplier.retain_duplicates) == (
        "w",
        10_000,
        1000,
        True,
    )
    assert supplier.persistent and supplier.metrics_scope == "rocksdb-window"
    assert not Stores.in_memory_session_store("s", 5).persistent
    with pytest.raises(ValueError):
        Stores.persistent_session_store("s", 0)
    with pytest.raises(ValueError):
        Stores.persistent_key_value_store("")


def test_missing_serdes_are_resolved_from_the_config_when_the_store_is_initialised(
    context: FakeContext, open_store: Callable[..., Any]
) -> None:
    """Kafka's MeteredKeyValueStore.initStoreSerde: a builder may leave serdes unset (the DSL's
    stores do when nothing gave one); the metered layer takes the task config's defaults in
    ``init``, and a timestamped builder wraps the value serde in ``ValueAndTimestampSerde``."""
    context.config.default_key_serde = String()
    context.config.default_value_serde = Long()
    plain = Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"), None, None)
    store = open_store(plain.with_logging_disabled().build())
    assert isinstance(store.key_serde, String) and isinstance(store.value_serde, Long)
    store.put("a", 7)
    assert store.get("a") == 7
    assert store.wrapped.get(b"a") == Long().serialize(7)
    timestamped = Stores.timestamped_key_value_store_builder(
        Stores.in_memory_key_value_store("ts"), None, String()
    )
    ts_store = open_store(timestamped.with_logging_disabled().build())
    assert isinstance(ts_store.value_serde, ValueAndTimestampSerde)
    ts_store.put("k", ValueAndTimestamp("v", 5))
    assert ts_store.get("k") == ValueAndTimestamp("v", 5)


def test_changelog_topic_name() -> None:
    assert changelog_topic_name("app", "counts") == "app-counts-changelog"
