"""Foreign-key table-table joins (KIP-213): ``KTable.join/left_join(other, foreign_key_extractor, joiner)``.

Each row of this (primary) table names a row of ``other`` (the foreign table) by
``foreign_key_extractor(value)`` (or ``(key, value)``, KIP-1104); the result is keyed like this
table and holds ``joiner(value, foreign_value)`` while both exist (inner) or while this row exists
(left: ``joiner(value, None)`` without a foreign row). Updates and deletes on either side update
the result; a row whose foreign key changes is retracted from the old foreign row's
subscribers.

The topology is Kafka Streams' (``KTableImpl.doJoinOnForeignKey``), node for node and name for
name, so ``describe()`` matches and the internal topics are compatible:

* ``KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-<n>-topic`` (``<name>-subscription-registration-topic``)
  carries subscriptions keyed by foreign key, co-partitioned with the foreign table;
* ``KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-<n>`` (``<name>-subscription-store``) holds them;
* ``KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-<n>-topic`` (``<name>-subscription-response-topic``)
  carries answers back to the primary partition, where stale ones are dropped by hash;
* ``KTABLE-FK-JOIN-OUTPUT-<n>`` (``<name>-result``) is the result table, materialized when
  ``Materialized`` names a store.

The run-time processors are in :mod:`platform_streams.dsl.internals.foreign_key_processors`;
this module only wires them (one function, so a logical-plan node can wrap it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.foreign_key_processors import (
    ForeignTableJoinProcessor,
    ResponseJoinProcessor,
    SubscriptionJoinProcessor,
    SubscriptionReceiveProcessor,
    SubscriptionSendProcessor,
    response_partitioner,
)
from platform_streams.dsl.internals.foreign_key_wire import (
    CombinedKeySchema,
    SubscriptionResponseWrapperSerde,
    SubscriptionWrapperSerde,
)
from platform_streams.dsl.internals.table_join_processors import joiner_with_key
from platform_streams.dsl.materialize import is_queryable, key_value_spec, store_name
from platform_streams.dsl.naming import takes_key
from platform_streams.dsl.options import Materialized, TableJoined
from platform_streams.errors import TopologyError
from platform_streams.serde.primitive import Bytes
from platform_streams.topology.nodes import InternalTopic, repartition_topic_config

if TYPE_CHECKING:
    from platform_streams.dsl.ktable import KTable

__all__ = ["foreign_key_join", "foreign_key_join_options"]

_FK_JOIN = "KTABLE-FK-JOIN-"
_REGISTRATION = _FK_JOIN + "SUBSCRIPTION-REGISTRATION-"
_RESPONSE = _FK_JOIN + "SUBSCRIPTION-RESPONSE-"
_PROCESSOR = _FK_JOIN + "SUBSCRIPTION-PROCESSOR-"
_STORE = _FK_JOIN + "SUBSCRIPTION-STATE-STORE-"
_RESOLVER = _FK_JOIN + "SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-"
_OUTPUT = _FK_JOIN + "OUTPUT-"

Partitioner = Callable[[str, Any, Any, int], int | None]


def foreign_key_join_options(where: str, options: tuple[Any, ...]) -> tuple[TableJoined, Materialized | None]:
    """Kafka's FK-join overloads: an optional ``TableJoined`` and ``Materialized``, by type."""
    table_joined: TableJoined | None = None
    materialized: Materialized | None = None
    for option in options:
        if option is None:
            continue
        if isinstance(option, TableJoined) and table_joined is None:
            table_joined = option
        elif isinstance(option, Materialized) and materialized is None:
            materialized = option
        else:
            raise TypeError(
                f"{where}: a foreign-key join takes a TableJoined and/or a Materialized after the joiner, "
                f"got {type(option).__name__}: {option!r}"
            )
    return table_joined or TableJoined(), materialized


def _single_value(partitioner: Partitioner | None) -> Partitioner | None:
    """Kafka calls the user's FK-join partitioners with a null value (only the key places)."""
    if partitioner is None:
        return None
    return lambda topic, key, value, n: partitioner(topic, key, None, n)


def foreign_key_join(
    table: KTable,
    other: KTable,
    foreign_key_extractor: Callable[..., Any],
    joiner: Callable[..., Any],
    table_joined: TableJoined,
    materialized: Materialized | None,
    *,
    left: bool,
) -> KTable:
    """Add the FK-join nodes, stores and topics below ``table`` and ``other`` (Java's order)."""
    from platform_streams.dsl.ktable import KTable, _add_source_table_op

    if other.builder is not table.builder:
        raise TopologyError("cannot join tables from different StreamsBuilders")
    if not callable(foreign_key_extractor):
        raise TopologyError(f"foreignKeyExtractor must be callable, got {foreign_key_extractor!r}")
    extract: Callable[[Any, Any], Any] = (
        foreign_key_extractor if takes_key(foreign_key_extractor) else (lambda k, v: foreign_key_extractor(v))
    )
    fn = joiner_with_key(joiner)
    builder = table.builder
    names, topology = builder.names, builder.plan
    name = table_joined.name

    # old values: the foreign side skips unchanged values, the primary side retracts old foreign keys
    other.enable_send_old_values(True)
    table.enable_send_old_values(True)

    subscription_topic = names.suffixed(name, "-subscription-registration", _REGISTRATION) + "-topic"
    topology.add_internal_topic(
        InternalTopic(subscription_topic, "repartition", None, repartition_topic_config())
    )
    foreign_key_serde, primary_key_serde = other.key_serde, table.key_serde
    wrapper_serde = SubscriptionWrapperSerde(primary_key_serde)
    response_serde = SubscriptionResponseWrapperSerde(other.value_serde)
    schema = CombinedKeySchema(foreign_key_serde, primary_key_serde)
    value_serde = table.value_serde

    send = names.suffixed(name, "-subscription-registration-processor", _REGISTRATION)
    topology.add_processor(
        send,
        lambda: SubscriptionSendProcessor(extract, foreign_key_serde, value_serde, wrapper_serde, left),
        table.node_name,
    )
    registration_sink = names.suffixed(name, "-subscription-registration-sink", "KTABLE-SINK-")
    topology.add_sink(
        registration_sink,
        subscription_topic,
        send,
        key_serde=foreign_key_serde,
        value_serde=wrapper_serde,
        partitioner=_single_value(table_joined.other_partitioner),
    )
    registration_source = names.suffixed(name, "-subscription-registration-source", "KTABLE-SOURCE-")
    topology.add_source(
        registration_source, subscription_topic, key_serde=foreign_key_serde, value_serde=wrapper_serde
    )
    topology.add_copartition_group(other.source_topics | {subscription_topic})

    subscription_store = names.suffixed(name, "-subscription-store", _STORE)
    receive = names.suffixed(name, "-subscription-receive", _PROCESSOR)
    topology.add_processor(
        receive,
        lambda: SubscriptionReceiveProcessor(subscription_store, schema, wrapper_serde),
        registration_source,
    )
    # Kafka's SubscriptionStoreFactory: timestamped, raw combined keys, logged, never cached
    subscription_spec = key_value_spec(
        builder,
        subscription_store,
        Materialized(caching_enabled=False),
        key_serde=Bytes(),
        value_serde=wrapper_serde,
    )
    topology.add_state_store(subscription_spec, receive)

    foreign_view = other.value_getter_supplier()
    join_foreign = names.suffixed(name, "-subscription-join-foreign", _PROCESSOR)
    topology.add_processor(join_foreign, lambda: SubscriptionJoinProcessor(foreign_view), receive)
    topology.connect_processor_and_state_stores(join_foreign, *foreign_view.store_names())

    foreign_join = names.suffixed(name, "-foreign-join-subscription", _PROCESSOR)
    topology.add_processor(
        foreign_join, lambda: ForeignTableJoinProcessor(subscription_store, schema), other.node_name
    )
    # the store is the supplier's own here too (Kafka's ForeignTableJoinProcessorSupplier
    # provides it through stores(), so a processor wrapper sees it on both processors)
    topology.add_state_store(subscription_spec, foreign_join)

    response_topic = names.suffixed(name, "-subscription-response", _RESPONSE) + "-topic"
    topology.add_internal_topic(
        InternalTopic(response_topic, "repartition", None, repartition_topic_config())
    )
    response_sink = names.suffixed(name, "-subscription-response-sink", "KTABLE-SINK-")
    topology.add_sink(
        response_sink,
        response_topic,
        join_foreign,
        foreign_join,
        key_serde=primary_key_serde,
        value_serde=response_serde,
        partitioner=_single_value(table_joined.partitioner) or response_partitioner,
    )
    response_source = names.suffixed(name, "-subscription-response-source", "KTABLE-SOURCE-")
    topology.add_source(
        response_source, response_topic, key_serde=primary_key_serde, value_serde=response_serde
    )
    result_topics = table.source_topics | {response_topic}
    topology.add_copartition_group(result_topics)

    primary_view = table.value_getter_supplier()
    resolver = names.suffixed(name, "-subscription-response-resolver", _RESOLVER)
    topology.add_processor(
        resolver,
        lambda: ResponseJoinProcessor(primary_view, value_serde, response_serde, fn, left),
        response_source,
    )
    topology.connect_processor_and_state_stores(resolver, *primary_view.store_names())

    result = names.suffixed(name, "-result", _OUTPUT)
    store = store_name(builder, materialized, _OUTPUT)
    mat = materialized or Materialized()
    key_serde = mat.key_serde or primary_key_serde
    op = _add_source_table_op(builder, result, resolver, store, materialized, key_serde, mat.value_serde)
    return KTable(
        builder,
        result,
        op,
        key_serde=key_serde,
        value_serde=mat.value_serde,
        source_topics=result_topics,
        queryable=is_queryable(materialized),
    )
