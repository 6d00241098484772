"""``Materialized`` -> the builder of a DSL key-value store (API side: names and options).

The builders themselves are ordinary ``state/`` builders
(:mod:`platform_streams.state.timestamped_builders`): serdes nobody gave stay ``None``
until a task initialises the store and resolves them from the config's defaults.

Store names follow Kafka Streams: ``Materialized.as_("name")`` (or the supplier's name),
else ``<PREFIX>STATE-STORE-<index>`` where the prefix is the operator's
(``KSTREAM-AGGREGATE-``, ``KTABLE-MERGE-``, ``<topic>-`` for source tables, ...). The
index is drawn *before* the operator's own name, as in Kafka Streams, so generated names
match a Java topology built with the same calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from platform_streams.dsl.options import Materialized
from platform_streams.errors import TopologyError
from platform_streams.state.dsl_store_suppliers import DslKeyValueParams, DslStoreSuppliers
from platform_streams.state.stores import KeyValueBytesStoreSupplier
from platform_streams.state.timestamped_builders import TimestampedKeyValueStoreBuilder
from platform_streams.state.versioned import VersionedBytesStoreSupplier

if TYPE_CHECKING:
    from platform_streams.dsl.builder import StreamsBuilder
    from platform_streams.serde.base import Serde

__all__ = [
    "burn_count_store_name",
    "dsl_materialized",
    "generated_store_name",
    "is_queryable",
    "key_value_spec",
    "own_store_choice",
    "store_name",
]


def store_name(builder: StreamsBuilder, materialized: Materialized | None, prefix: str) -> str:
    """The user's store name, else a generated ``<prefix>STATE-STORE-<index>`` (consumes an index)."""
    if materialized is not None:
        if materialized.store_name is not None:
            return materialized.store_name
        supplier = materialized.store_supplier
        if supplier is not None:
            return str(supplier.name)
    return generated_store_name(builder, materialized, prefix)


def generated_store_name(builder: StreamsBuilder, materialized: Materialized | None, prefix: str) -> str:
    """A generated ``<prefix>STATE-STORE-<index>``, recorded as unnamed with its changelog
    (Kafka's ``MaterializedInternal``: also when the operator then does not materialize it)."""
    store = builder.names.name(f"{prefix}STATE-STORE-")
    logged = materialized is None or materialized.logging_enabled
    builder.implicit_names.add_store(store, logged=logged)
    return store


def burn_count_store_name(builder: StreamsBuilder, materialized: Materialized | None) -> None:
    """``count(materialized)`` with an unnamed ``Materialized`` draws one store index more
    before the aggregation's own names, as Kafka's ``KGroupedStreamImpl``,
    ``TimeWindowedKStreamImpl`` and ``SessionWindowedKStreamImpl`` do "for compatibility", so
    the generated names after it equal the Java topology's (``count()`` draws none)."""
    if materialized is not None and not is_queryable(materialized):
        builder.names.name("KSTREAM-AGGREGATE-STATE-STORE-")


def is_queryable(materialized: Materialized | None) -> bool:
    """True if the user named the store (Kafka Streams then always materializes it)."""
    return materialized is not None and (
        materialized.store_name is not None or materialized.store_supplier is not None
    )


def own_store_choice(store_type: str, supplier: object, suppliers: object) -> bool:
    """Whether an operator chose its stores itself (a supplier, DslStoreSuppliers, or a
    non-default ``store_type``): then the application's ``dsl_store_suppliers`` does not apply."""
    return supplier is not None or suppliers is not None or store_type != "rocksdb"


def app_dsl_store_suppliers(builder: StreamsBuilder) -> DslStoreSuppliers | None:
    """The suppliers the builder's config names (Kafka's ``StreamsBuilder(TopologyConfig)``)."""
    return None if builder.config is None else builder.config.resolved_dsl_store_suppliers()


def dsl_materialized(builder: StreamsBuilder, materialized: Materialized | None) -> Materialized:
    """``materialized`` with the application's ``dsl_store_suppliers`` where it chose no store
    itself (Kafka's precedence: the operator's ``Materialized`` over the config)."""
    mat = materialized or Materialized()
    suppliers = app_dsl_store_suppliers(builder)
    if suppliers is None or own_store_choice(mat.store_type, mat.store_supplier, mat.dsl_store_suppliers):
        return mat
    return mat.with_dsl_store_suppliers(suppliers)


def key_value_spec(
    builder: StreamsBuilder,
    name: str,
    materialized: Materialized | None,
    *,
    key_serde: Serde | None,
    value_serde: Serde | None,
) -> TimestampedKeyValueStoreBuilder:
    """The spec of store ``name``: ``materialized``'s settings over the inherited serdes."""
    mat = dsl_materialized(builder, materialized)
    supplier: Any = mat.store_supplier
    if supplier is None and mat.dsl_store_suppliers is not None:
        supplier = mat.dsl_store_suppliers.key_value_store(DslKeyValueParams(name))
    if supplier is not None:
        if not isinstance(supplier, KeyValueBytesStoreSupplier | VersionedBytesStoreSupplier):
            raise TopologyError(
                f"store {name!r} needs a key-value store supplier (Stores.*_key_value_store): {supplier!r}"
            )
        if supplier.name != name:
            raise TopologyError(f"store supplier name {supplier.name!r} differs from store name {name!r}")
    if mat.ttl_ms is not None and isinstance(supplier, VersionedBytesStoreSupplier):
        raise TopologyError(f"store {name!r}: with_ttl applies to key-value stores, not to a versioned store")
    spec = TimestampedKeyValueStoreBuilder(
        name=name,
        key_serde=mat.key_serde or key_serde,
        value_serde=mat.value_serde or value_serde,
        store_type=mat.store_type,
        store_supplier=supplier,
        # Kafka Streams never caches a versioned store
        caching_enabled=mat.caching_enabled and not isinstance(supplier, VersionedBytesStoreSupplier),
        logging_enabled=mat.logging_enabled,
        log_config=dict(mat.log_config or {}),
        dsl_default=not own_store_choice(mat.store_type, mat.store_supplier, mat.dsl_store_suppliers),
    )
    spec.ttl_ms, spec.ttl_sweep_interval_ms = mat.ttl_ms, mat.ttl_sweep_interval_ms
    return spec
