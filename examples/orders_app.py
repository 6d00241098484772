r"""An example application: route big orders and re-key orders by customer.

Two branches over one input topic of JSON orders keyed by order id::

    orders --filter(amount >= 100)--> map_values(enrich) --> big-orders
           \--select_key(customer)--> repartition --> orders-by-customer

The second branch writes through an internal ``<application.id>-orders-by-customer-repartition``
topic, so every order of one customer lands on one partition: that is what a per-customer
aggregation needs, and when aggregations land the count is one line on ``by_customer``
(see :func:`build_topology`).

Run it with the CLI (the factory takes no arguments; topic names can be overridden by the
``ORDERS_TOPIC``, ``BIG_ORDERS_TOPIC`` and ``ORDERS_BY_CUSTOMER_TOPIC`` environment variables)::

    platform-streams run examples.orders_app:topology --config examples/orders.yaml

It is also an app *plugin* (:data:`PLUGIN`, the entry point ``orders`` in the group
``platform_streams.apps``): configured by :class:`OrdersAppConfig`, which by default adds
the per-customer count (a queryable store ``orders-per-customer`` and an ``order-counts``
topic). That is how the platform operates it (``platform-streams apps ...``, Dagster)::

    platform-streams apps validate orders my-orders.yaml
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from platform_streams import StreamsBuilder, Topology
from platform_streams.apps import AppPlugin
from platform_streams.dsl import Consumed, Grouped, Materialized, Produced, Repartitioned
from platform_streams.serde import Json, Long, String

ORDERS_TOPIC = "orders"
BIG_ORDERS_TOPIC = "big-orders"
ORDERS_BY_CUSTOMER_TOPIC = "orders-by-customer"
ORDER_COUNTS_TOPIC = "order-counts"
COUNTS_STORE = "orders-per-customer"
#: An order of at least this amount is "big".
BIG_ORDER_AMOUNT = 100.0
#: Amount from which a big order is flagged for manual review.
REVIEW_AMOUNT = 500.0

Order = dict[str, Any]


def is_big(order_id: str | None, order: Order | None, threshold: float = BIG_ORDER_AMOUNT) -> bool:
    """The filter of the big-orders branch (malformed orders are not big)."""
    return order is not None and float(order.get("amount", 0.0)) >= threshold


def enrich(order: Order) -> Order:
    """Add derived fields downstream consumers would otherwise each recompute."""
    amount = float(order["amount"])
    return {
        **order,
        "amount_cents": round(amount * 100),
        "tier": "review" if amount >= REVIEW_AMOUNT else "big",
    }


def customer_of(order_id: str | None, order: Order) -> str:
    """The new key of the by-customer branch."""
    return str(order["customer"])


def build_topology(
    orders_topic: str = ORDERS_TOPIC,
    big_orders_topic: str = BIG_ORDERS_TOPIC,
    by_customer_topic: str = ORDERS_BY_CUSTOMER_TOPIC,
    *,
    counts_topic: str | None = None,
    counts_store: str = COUNTS_STORE,
    big_order_amount: float = BIG_ORDER_AMOUNT,
) -> Topology:
    """The example topology; serdes are explicit so it runs with any default serdes.

    With ``counts_topic``, orders are also counted per customer in the queryable store
    ``counts_store`` and every new count is written to ``counts_topic``.
    """
    keys, orders_json = String(), Json()
    builder = StreamsBuilder()
    orders = builder.stream(orders_topic, Consumed(key_serde=keys, value_serde=orders_json))

    orders.filter(lambda key, order: is_big(key, order, big_order_amount)).map_values(enrich).to(
        big_orders_topic, Produced(key_serde=keys, value_serde=orders_json)
    )

    by_customer = orders.select_key(customer_of).repartition(
        Repartitioned(name="orders-by-customer", key_serde=keys, value_serde=orders_json)
    )
    by_customer.to(by_customer_topic, Produced(key_serde=keys, value_serde=orders_json))
    if counts_topic is not None:
        (
            by_customer.group_by_key(Grouped(key_serde=keys, value_serde=orders_json))
            .count(materialized=Materialized.as_(counts_store))
            .to_stream()
            .to(counts_topic, Produced(key_serde=keys, value_serde=Long()))
        )
    return builder.build()


def topology() -> Topology:
    """The CLI's factory (``examples.orders_app:topology``); topic names from the environment."""
    return build_topology(
        os.environ.get("ORDERS_TOPIC", ORDERS_TOPIC),
        os.environ.get("BIG_ORDERS_TOPIC", BIG_ORDERS_TOPIC),
        os.environ.get("ORDERS_BY_CUSTOMER_TOPIC", ORDERS_BY_CUSTOMER_TOPIC),
    )


class OrdersAppConfig(BaseModel):
    """The example app's own settings (what ``platform-streams apps validate orders`` checks)."""

    model_config = ConfigDict(extra="forbid")

    orders_topic: str = Field(ORDERS_TOPIC, min_length=1, description="Input: JSON orders keyed by order id.")
    big_orders_topic: str = Field(BIG_ORDERS_TOPIC, min_length=1, description="Output: enriched big orders.")
    by_customer_topic: str = Field(
        ORDERS_BY_CUSTOMER_TOPIC, min_length=1, description="Output: orders re-keyed by customer."
    )
    counts_topic: str | None = Field(
        ORDER_COUNTS_TOPIC, description="Output: orders per customer (None: no aggregation, no store)."
    )
    counts_store: str = Field(COUNTS_STORE, min_length=1, description="Queryable store of the counts.")
    big_order_amount: float = Field(BIG_ORDER_AMOUNT, gt=0, description="An order from this amount is big.")


def from_config(config: OrdersAppConfig) -> Topology:
    """The plugin's factory."""
    return build_topology(
        config.orders_topic,
        config.big_orders_topic,
        config.by_customer_topic,
        counts_topic=config.counts_topic,
        counts_store=config.counts_store,
        big_order_amount=config.big_order_amount,
    )


#: The entry point ``orders`` of the group ``platform_streams.apps`` (pyproject.toml).
PLUGIN = AppPlugin(
    factory=from_config,
    config_model=OrdersAppConfig,
    description="Route big orders, re-key orders by customer and count them per customer",
    default_settings={"application_id": "orders-app"},
)
