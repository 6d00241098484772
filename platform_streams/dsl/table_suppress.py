"""``KTable.suppress``: adds the ``KTABLE-SUPPRESS-`` node and its buffer store.

The run-time side (buffer, processor) is :mod:`platform_streams.dsl.internals.suppress_processor`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.suppress_processor import SuppressOp, find_close_rule
from platform_streams.dsl.internals.table_processors import TableOp
from platform_streams.dsl.options import name_of
from platform_streams.errors import TopologyError
from platform_streams.state.timestamped_builders import bytes_store_builder

if TYPE_CHECKING:
    from platform_streams.dsl.ktable import KTable
    from platform_streams.dsl.suppress import Suppressed

__all__ = ["suppress_table"]


def suppress_table(table: KTable, suppressed: Suppressed) -> KTable:
    """``KTable.suppress``: a ``KTABLE-SUPPRESS-<n>`` node with its buffer store."""
    from platform_streams.dsl.ktable import KTable

    builder = table.builder
    # Kafka's KTableImpl.suppress draws no index for a named suppression
    name = name_of(suppressed.name) or builder.names.name("KTABLE-SUPPRESS-")
    if suppressed.name:
        store = f"{suppressed.name}-store"
    else:
        store = builder.names.name("KTABLE-SUPPRESS-STATE-STORE-")
        # Kafka's KTableImpl.suppress records only the buffer's changelog as unnamed
        logged = suppressed.buffer_config.logging_enabled
        builder.implicit_names.add_store(store, logged=logged, with_store=False)
    parent: TableOp = table._op
    rule = find_close_rule(parent)
    if suppressed.kind == "until_window_closes" and rule is None:
        raise TopologyError(
            f"suppress {name}: window close time is only defined for windowed computations "
            "(suppress(until_window_closes) must follow a windowed aggregation)"
        )
    # the buffer sees old values (its prior-value view), as Kafka's KTableSuppressProcessorSupplier asks
    parent.enable_send_old_values(True)
    op = SuppressOp(parent, suppressed, store, rule, table.key_serde, table.value_serde)
    topology = builder.plan
    topology.add_processor(name, op.make_processor, table.node_name)
    topology.add_state_store(_buffer_store_builder(store, suppressed), name)
    return KTable(
        builder,
        name,
        op,
        key_serde=table.key_serde,
        value_serde=table.value_serde,
        source_topics=table.source_topics,
    )


def _buffer_store_builder(name: str, suppressed: Suppressed) -> Any:
    """A persistent bytes store with a changelog (Kafka Streams keeps it in memory and always
    restores it from the changelog; a local RocksDB store is reopened as is after a clean stop)."""
    config = suppressed.buffer_config
    return bytes_store_builder(name, "rocksdb", config.logging_enabled, config.log_config)
