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
from typing import Literal

from platform_streams.state.stores import (
    KeyValueBytesStoreSupplier,
    SessionBytesStoreSupplier,
    Stores,
    WindowBytesStoreSupplier,
)

__all__ = [
    "BuiltInDslStoreSuppliers",
    "DslKeyValueParams",
    "DslSessionParams",
    "DslStoreSuppliers",
    "DslWindowParams",
]


@dataclass(frozen=True, slots=True)
class DslKeyValueParams:
    """Kafka's ``DslKeyValueParams``."""

    name: str
    is_timestamped: bool = True


@dataclass(frozen=True, slots=True)
class DslWindowParams:
    """Kafka's ``DslWindowParams`` (the parts this engine uses)."""

    name: str
    retention_ms: int
    window_size_ms: int
    retain_duplicates: bool = False


@dataclass(frozen=True, slots=True)
class DslSessionParams:
    """Kafka's ``DslSessionParams`` (the parts this engine uses)."""

    name: str
    retention_ms: int


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
