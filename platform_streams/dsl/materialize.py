"""``Materialized`` -> a store builder for the DSL's key-value stores.

The DSL decides *what* a KTable's store is (name, serdes, backend, caching, logging) at
build time, but the config defaults (``default_key_serde`` ...) are only known when a
task starts. :class:`KeyValueStoreSpec` therefore keeps ``None`` for serdes nobody gave
and resolves them in :meth:`TimestampedKeyValueStore.init
<platform_streams.dsl.timestamped_kv_store.TimestampedKeyValueStore.init>` ("late serde
resolution"), per task, without mutating anything shared between tasks or clients.

Store names follow Kafka Streams: ``Materialized.as_("name")`` (or the supplier's name),
else ``<PREFIX>STATE-STORE-<index>`` where the prefix is the operator's
(``KSTREAM-AGGREGATE-``, ``KTABLE-MERGE-``, ``<topic>-`` for source tables, ...). The
index is drawn *before* the operator's own name, as in Kafka Streams, so generated names
match a Java topology built with the same calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from platform_streams.dsl.options import Materialized
from platform_streams.errors import TopologyError
from platform_streams.serde import Bytes
from platform_streams.state.stores import KeyValueBytesStoreSupplier, Stores

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig
    from platform_streams.dsl.builder import StreamsBuilder
    from platform_streams.dsl.timestamped_kv_store import TimestampedKeyValueStore
    from platform_streams.serde.base import Serde
    from platform_streams.state.builders import KeyValueStoreBuilder

__all__ = [
    "KeyValueStoreSpec",
    "bytes_store_builder",
    "key_value_spec",
    "key_value_supplier",
    "resolve_serde",
    "store_name",
]

StoreType = Literal["rocksdb", "in_memory"]


def resolve_serde(serde: Serde | None, config: StreamsConfig, role: Literal["key", "value"]) -> Serde:
    """The serde to use at run time: the one given (explicit or inherited), else the config default."""
    if serde is not None:
        return serde
    return config.default_key_serde if role == "key" else config.default_value_serde


def store_name(builder: StreamsBuilder, materialized: Materialized | None, prefix: str) -> str:
    """The user's store name, else a generated ``<prefix>STATE-STORE-<index>`` (consumes an index)."""
    if materialized is not None:
        if materialized.store_name is not None:
            return materialized.store_name
        supplier = materialized.store_supplier
        if supplier is not None:
            return str(supplier.name)
    return builder.names.name(f"{prefix}STATE-STORE-")


def is_queryable(materialized: Materialized | None) -> bool:
    """True if the user named the store (Kafka Streams then always materializes it)."""
    return materialized is not None and (
        materialized.store_name is not None or materialized.store_supplier is not None
    )


def key_value_supplier(name: str, store_type: StoreType) -> KeyValueBytesStoreSupplier:
    """A new key-value bytes store supplier of ``store_type``."""
    if store_type == "in_memory":
        return Stores.in_memory_key_value_store(name)
    return Stores.persistent_key_value_store(name)


def bytes_store_builder(
    name: str, store_type: StoreType, logging_enabled: bool, log_config: dict[str, str] | None = None
) -> KeyValueStoreBuilder:
    """An internal bytes-to-bytes key-value store, never cached; logged (with ``log_config``) or not.

    The DSL's bookkeeping stores: join outer stores, emit-final indexes, suppress buffers.
    """
    builder = Stores.key_value_store_builder(key_value_supplier(name, store_type), Bytes(), Bytes())
    if logging_enabled:
        return builder.with_logging_enabled(log_config)
    return builder.with_logging_disabled()


@dataclass
class KeyValueStoreSpec:
    """A DSL key-value store as the topology sees it (a ``StoreBuilder``)."""

    name: str
    key_serde: Serde | None
    value_serde: Serde | None
    store_type: Literal["rocksdb", "in_memory"] = "rocksdb"
    store_supplier: KeyValueBytesStoreSupplier | None = None
    caching_enabled: bool = True
    logging_enabled: bool = True
    log_config: dict[str, str] = field(default_factory=dict)
    #: set by ``StreamsBuilder.build(config)`` under ``topology_optimization="all"``: the
    #: source topic replaces the changelog (nothing is logged, restore reads the topic)
    source_changelog_topic: str | None = None

    @property
    def persistent(self) -> bool:
        if self.store_supplier is not None:
            return bool(self.store_supplier.persistent)
        return self.store_type == "rocksdb"

    def bytes_supplier(self) -> KeyValueBytesStoreSupplier:
        if self.store_supplier is not None:
            return self.store_supplier
        return key_value_supplier(self.name, self.store_type)

    def changelog_topic_config(self) -> dict[str, str]:
        return {"cleanup.policy": "compact", **self.log_config}

    def with_logging_disabled(self) -> KeyValueStoreSpec:
        """A copy without changelog (global stores: their topic is the log)."""
        return replace(self, logging_enabled=False, log_config={})

    def build(self) -> TimestampedKeyValueStore:
        """A new, uninitialised store for one task (serdes are resolved in its ``init``)."""
        from platform_streams.dsl.timestamped_kv_store import TimestampedKeyValueStore

        return TimestampedKeyValueStore(self)


def key_value_spec(
    name: str,
    materialized: Materialized | None,
    *,
    key_serde: Serde | None,
    value_serde: Serde | None,
) -> KeyValueStoreSpec:
    """The spec of store ``name``: ``materialized``'s settings over the inherited serdes."""
    mat = materialized or Materialized()
    supplier: Any = mat.store_supplier
    if supplier is not None:
        if not isinstance(supplier, KeyValueBytesStoreSupplier):
            raise TopologyError(
                f"store {name!r} needs a key-value store supplier (Stores.*_key_value_store): {supplier!r}"
            )
        if supplier.name != name:
            raise TopologyError(f"store supplier name {supplier.name!r} differs from store name {name!r}")
    return KeyValueStoreSpec(
        name=name,
        key_serde=mat.key_serde or key_serde,
        value_serde=mat.value_serde or value_serde,
        store_type=mat.store_type,
        store_supplier=supplier,
        caching_enabled=mat.caching_enabled,
        logging_enabled=mat.logging_enabled,
        log_config=dict(mat.log_config or {}),
    )
