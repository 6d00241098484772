"""The DSL's key-value store builder and the helpers its stores share.

The DSL decides *what* a KTable's store is (name, serdes, backend, caching, logging) at
build time, but the config defaults (``default_key_serde`` ...) are only known when a
task starts. :class:`TimestampedKeyValueStoreBuilder` is an ordinary ``StoreBuilder`` that
keeps ``None`` for serdes nobody gave; the metered layer of the store it builds resolves
them per task (Kafka Streams' ``MeteredKeyValueStore.initStoreSerde``), without mutating
anything shared between tasks or clients. :func:`resolve_serde` is the same rule for the
DSL processors that serialize on their own (change serdes, suppression buffers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from platform_streams.errors import InvalidStateStoreError
from platform_streams.serde import Bytes
from platform_streams.state.builders import StoreBuilder
from platform_streams.state.stores import KeyValueBytesStoreSupplier, Stores
from platform_streams.state.wrappers.base import WrappedStore

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig
    from platform_streams.serde.base import Serde
    from platform_streams.state.api import StateStore
    from platform_streams.state.builders import KeyValueStoreBuilder
    from platform_streams.state.store_context import StateStoreContext
    from platform_streams.state.timestamped_kv_store import TimestampedKeyValueStore
    from platform_streams.state.versioned import VersionedBytesStoreSupplier
    from platform_streams.state.versioned_table_store import VersionedTableStore

__all__ = [
    "DslStoreBuilder",
    "StoreType",
    "TimestampedKeyValueStoreBuilder",
    "bytes_store_builder",
    "caching_enabled",
    "key_value_supplier",
    "resolve_serde",
]

StoreType = Literal["rocksdb", "in_memory"]

S = TypeVar("S", bound="StateStore")
#: the kind of bytes-store supplier a user may give instead of a store type
SupplierT = TypeVar("SupplierT", bound="_Supplier")


def resolve_serde(serde: Serde | None, config: StreamsConfig, role: Literal["key", "value"]) -> Serde:
    """The serde to use at run time: the one given (explicit or inherited), else the config default."""
    if serde is not None:
        return serde
    return config.default_key_serde if role == "key" else config.default_value_serde


def caching_enabled(requested: bool, config: StreamsConfig) -> bool:
    """Whether a DSL store gets its caching layer: as requested, unless the config gives caches
    no memory at all (``statestore_cache_max_bytes=0``), which strips every caching layer, as
    Kafka Streams' ``InternalTopologyBuilder.rewriteTopology`` does -- so updates then leave
    exactly as an uncached store emits them (e.g. a tombstone per filtered-out key)."""
    return requested and config.statestore_cache_max_bytes > 0


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


class _Supplier(Protocol):
    @property
    def persistent(self) -> bool: ...


class DslStoreBuilder(StoreBuilder[S], Generic[S, SupplierT]):
    """What the DSL's store builders share: a store type or a user's supplier, caching and
    logging as the operator's ``Materialized`` asked, and whether anyone chose the store."""

    def __init__(
        self,
        name: str,
        key_serde: Serde | None,
        value_serde: Serde | None,
        *,
        store_type: StoreType = "rocksdb",
        store_supplier: SupplierT | None = None,
        caching_enabled: bool = True,
        logging_enabled: bool = True,
        log_config: dict[str, str] | None = None,
        dsl_default: bool = False,
    ) -> None:
        super().__init__(name, key_serde, value_serde)
        self.store_type = store_type
        self.store_supplier: SupplierT | None = store_supplier
        self.with_caching_enabled() if caching_enabled else self.with_caching_disabled()
        self.with_logging_enabled(log_config) if logging_enabled else self.with_logging_disabled()
        #: the operator chose no store (KIP-954): the run-time config's ``dsl_store_suppliers``
        #: may still pick it (:func:`~platform_streams.state.dsl_store_suppliers.apply_dsl_store_config`)
        self.dsl_default = dsl_default

    @property
    def persistent(self) -> bool:
        if self.store_supplier is not None:
            return bool(self.store_supplier.persistent)
        return self.store_type == "rocksdb"


class TimestampedKeyValueStoreBuilder(
    DslStoreBuilder[
        "TimestampedKeyValueStore | VersionedTableStore",
        "KeyValueBytesStoreSupplier | VersionedBytesStoreSupplier",
    ]
):
    """The builder of a DSL table's store (Kafka's ``TimestampedKeyValueStoreBuilder``).

    An ordinary :class:`~platform_streams.state.builders.StoreBuilder`: its store is the
    usual ``metered -> [caching] -> [change-logging] -> bytes`` stack of
    ``Stores.timestamped_key_value_store_builder``, under the plain-value view processors
    and queries use. Serdes nobody gave stay ``None``; the metered layer takes the config's
    defaults when a task initialises the store. Caching is on unless turned off, and stripped
    when the config gives caches no memory (:func:`caching_enabled`). A versioned supplier
    (KIP-914) makes it build a :class:`~platform_streams.state.versioned_table_store.VersionedTableStore`.
    """

    #: a versioned supplier makes this a versioned table's store (KIP-914)
    store_supplier: KeyValueBytesStoreSupplier | VersionedBytesStoreSupplier | None
    #: set by the ``reuse.ktable.source.topics`` optimization: the source topic replaces
    #: the changelog (nothing is logged, restore reads the topic)
    source_changelog_topic: str | None = None
    #: state TTL (``Materialized.with_ttl``): entries older than this in stream time expire
    #: (:mod:`~platform_streams.state.ttl`); None keeps them
    ttl_ms: int | None = None
    #: stream time between two sweeps of expired entries
    ttl_sweep_interval_ms: int | None = None

    @property
    def versioned(self) -> bool:
        return self.store_supplier is not None and hasattr(self.store_supplier, "history_retention_ms")

    def bytes_supplier(self) -> KeyValueBytesStoreSupplier:
        supplier = self.store_supplier
        if isinstance(supplier, KeyValueBytesStoreSupplier):
            return supplier
        return key_value_supplier(self.name, self.store_type)

    def versioned_supplier(self) -> VersionedBytesStoreSupplier:
        supplier = self.store_supplier
        if supplier is None or not self.versioned:
            raise TypeError(f"store {self.name} is not versioned")
        return supplier  # type: ignore[return-value]

    def changelog_topic_config(self) -> dict[str, str]:
        if self.versioned:
            from platform_streams.state.versioned import versioned_changelog_config

            return versioned_changelog_config(
                self.versioned_supplier().history_retention_ms, self._log_config
            )
        return {"cleanup.policy": "compact", **self._log_config}

    def build(self) -> TimestampedKeyValueStore | VersionedTableStore:
        """A new, uninitialised store for one task (serdes are resolved in its ``init``)."""
        if self.versioned:
            from platform_streams.state.versioned_table_store import VersionedTableStore

            return VersionedTableStore(self)
        from platform_streams.state.timestamped_kv_store import TimestampedKeyValueStore

        return TimestampedKeyValueStore(self)


class SpecStore(WrappedStore):
    """A DSL store built from its spec when a task initialises it (serdes resolved late).

    The key-value and the windowed/session DSL stores share this: the spec is the identity
    (name, persistence), and :meth:`_build` applies the spec's caching and logging to a
    store builder, builds the wrapped stack and initialises it.
    """

    spec: Any

    def __init__(self, spec: Any) -> None:
        super().__init__(None, identity=spec)
        self.spec = spec
        self._context: StateStoreContext | None = None

    def _require(self) -> Any:
        if self.wrapped is None:
            raise InvalidStateStoreError("store is not initialised", store=self.spec.name)
        return self.wrapped

    def _build(
        self,
        builder: Any,
        context: StateStoreContext,
        root: StateStore,
        *,
        logged: bool,
        init_context: StateStoreContext | None = None,
    ) -> None:
        """Caching per the spec and config, change-logging when ``logged``, then build the
        stack and initialise it (with ``init_context`` when the changelog is reused)."""
        if caching_enabled(self.spec.caching_enabled, context.config):
            builder.with_caching_enabled()
        if logged:
            builder.with_logging_enabled(self.spec.log_config)
        else:
            builder.with_logging_disabled()
        self._context = context
        self.wrapped = builder.build()
        self.wrapped.init(init_context or context, root)
