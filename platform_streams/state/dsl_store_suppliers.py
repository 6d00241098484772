"""``DslStoreSuppliers`` (KIP-954): one object that picks the stores of a DSL operator.

Kafka Streams lets ``Materialized.as_(suppliers)`` / ``Materialized.with_dsl_store_suppliers``
and ``StreamJoined.with_dsl_store_suppliers`` name a :class:`DslStoreSuppliers` instead of one
store supplier per store: the built-in ones choose RocksDB
(:class:`BuiltInDslStoreSuppliers.RocksDBDslStoreSuppliers`) or memory
(:class:`BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers`) for every store the operator
creates. A custom subclass returns its own key-value store suppliers (used for a table's or an
aggregation's key-value store); the operator's window, session and bookkeeping stores follow
its :attr:`~DslStoreSuppliers.store_type` (persistent or not), as there are no pluggable window
or session store implementations here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from platform_streams.state.stores import (
    KeyValueBytesStoreSupplier,
    SessionBytesStoreSupplier,
    Stores,
    WindowBytesStoreSupplier,
)

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig
    from platform_streams.topology.topology import Topology

__all__ = [
    "BuiltInDslStoreSuppliers",
    "DslKeyValueParams",
    "DslSessionParams",
    "DslStoreSuppliers",
    "DslWindowParams",
    "apply_dsl_store_config",
    "dsl_store_suppliers_from",
]


@dataclass(frozen=True, slots=True)
class DslKeyValueParams:
    """Kafka's ``DslKeyValueParams``."""

    name: str
    is_timestamped: bool = True


@dataclass(frozen=True, slots=True)
class _DslRetainedParams:
    """The store name and retention that the window and session params share."""

    name: str
    retention_ms: int


@dataclass(frozen=True, slots=True)
class DslWindowParams(_DslRetainedParams):
    """Kafka's ``DslWindowParams`` (the parts this engine uses)."""

    window_size_ms: int
    retain_duplicates: bool = False


@dataclass(frozen=True, slots=True)
class DslSessionParams(_DslRetainedParams):
    """Kafka's ``DslSessionParams`` (the parts this engine uses)."""


class DslStoreSuppliers(ABC):
    """Makes the store suppliers of a DSL operator (Kafka's ``DslStoreSuppliers``)."""

    @abstractmethod
    def key_value_store(self, params: DslKeyValueParams) -> KeyValueBytesStoreSupplier: ...

    @abstractmethod
    def window_store(self, params: DslWindowParams) -> WindowBytesStoreSupplier: ...

    @abstractmethod
    def session_store(self, params: DslSessionParams) -> SessionBytesStoreSupplier: ...

    @property
    def store_type(self) -> Literal["rocksdb", "in_memory"]:
        """Where the operator's other stores live: as this object's key-value stores do."""
        persistent = self.key_value_store(DslKeyValueParams("dsl-store-suppliers-probe")).persistent
        return "rocksdb" if persistent else "in_memory"

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))


class _BuiltInDslStoreSuppliers(DslStoreSuppliers):
    """Every store on RocksDB (``persistent``) or in memory."""

    persistent = True

    def key_value_store(self, params: DslKeyValueParams) -> KeyValueBytesStoreSupplier:
        if self.persistent:
            return Stores.persistent_key_value_store(params.name)
        return Stores.in_memory_key_value_store(params.name)

    def window_store(self, params: DslWindowParams) -> WindowBytesStoreSupplier:
        make = Stores.persistent_window_store if self.persistent else Stores.in_memory_window_store
        return make(params.name, params.retention_ms, params.window_size_ms, params.retain_duplicates)

    def session_store(self, params: DslSessionParams) -> SessionBytesStoreSupplier:
        make = Stores.persistent_session_store if self.persistent else Stores.in_memory_session_store
        return make(params.name, params.retention_ms)

    @property
    def store_type(self) -> Literal["rocksdb", "in_memory"]:
        return "rocksdb" if self.persistent else "in_memory"


class BuiltInDslStoreSuppliers:
    """Kafka's ``BuiltInDslStoreSuppliers``: :attr:`ROCKS_DB` and :attr:`IN_MEMORY`."""

    class RocksDBDslStoreSuppliers(_BuiltInDslStoreSuppliers):
        persistent = True

    class InMemoryDslStoreSuppliers(_BuiltInDslStoreSuppliers):
        persistent = False

    ROCKS_DB: DslStoreSuppliers = RocksDBDslStoreSuppliers()
    IN_MEMORY: DslStoreSuppliers = InMemoryDslStoreSuppliers()


def dsl_store_suppliers_from(value: object) -> DslStoreSuppliers | None:
    """The suppliers a config value names (``dsl.store.suppliers.class``): an instance, a
    :class:`DslStoreSuppliers` subclass, or a built-in class's name -- simple or Java's full
    name (``org.apache.kafka.streams.state.BuiltInDslStoreSuppliers$InMemoryDslStoreSuppliers``)."""
    if value is None or isinstance(value, DslStoreSuppliers):
        return value
    if isinstance(value, type) and issubclass(value, DslStoreSuppliers):
        return value()
    if isinstance(value, str):
        simple = value.strip().rsplit(".", 1)[-1].rsplit("$", 1)[-1].lower()
        for suppliers in (BuiltInDslStoreSuppliers.ROCKS_DB, BuiltInDslStoreSuppliers.IN_MEMORY):
            if simple == type(suppliers).__name__.lower():
                return suppliers
    raise ValueError(
        "expected a DslStoreSuppliers instance or class, or 'RocksDBDslStoreSuppliers' / "
        f"'InMemoryDslStoreSuppliers', got {value!r}"
    )


def apply_dsl_store_config(topology: Topology, config: StreamsConfig) -> None:
    """Give the DSL stores no one chose (not the operator, not ``StreamsBuilder(config)``) the
    run-time config's ``dsl_store_suppliers`` -- Kafka's ``InternalTopologyBuilder.rewriteTopology``
    configuring its store factories with the ``StreamsConfig`` the application runs with."""
    from platform_streams.state.builders import KeyValueStoreBuilder
    from platform_streams.state.timestamped_builders import (
        TimestampedKeyValueStoreBuilder,
        key_value_supplier,
    )
    from platform_streams.state.timestamped_window_store import DslSessionStoreBuilder, DslWindowStoreBuilder

    suppliers = config.resolved_dsl_store_suppliers()
    # built-in suppliers: the plain store type (as a spec nobody configured has); custom: theirs
    builtin = (
        BuiltInDslStoreSuppliers.RocksDBDslStoreSuppliers,
        BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers,
    )
    custom = type(suppliers) not in builtin
    builders = [*topology.stores.values(), *(g.store_builder for g in topology.global_stores.values())]
    for spec in builders:
        if isinstance(spec, TimestampedKeyValueStoreBuilder) and spec.dsl_default:
            spec.store_supplier = suppliers.key_value_store(DslKeyValueParams(spec.name)) if custom else None
            spec.store_type = suppliers.store_type
        elif isinstance(spec, DslWindowStoreBuilder) and spec.dsl_default:
            params = DslWindowParams(
                spec.name, spec.retention_ms, spec.window_size_ms, spec.retain_duplicates
            )
            spec.store_supplier = suppliers.window_store(params) if custom else None
            spec.store_type = suppliers.store_type
        elif isinstance(spec, KeyValueStoreBuilder) and spec.dsl_default:
            outer = DslKeyValueParams(spec.name, is_timestamped=False)
            spec.supplier = (
                suppliers.key_value_store(outer)
                if custom
                else key_value_supplier(spec.name, suppliers.store_type)
            )
        elif isinstance(spec, DslSessionStoreBuilder) and spec.dsl_default:
            session = DslSessionParams(spec.name, spec.retention_ms)
            spec.store_supplier = suppliers.session_store(session) if custom else None
            spec.store_type = suppliers.store_type
