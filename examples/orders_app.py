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
"""

from __future__ import annotations

import os
from typing import Any

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Consumed, Produced, Repartitioned
from platform_streams.serde import Json, String

ORDERS_TOPIC = "orders"
BIG_ORDERS_TOPIC = "big-orders"
ORDERS_BY_CUSTOMER_TOPIC = "orders-by-customer"
#: An order of at least this amount is "big".
BIG_ORDER_AMOUNT = 100.0
#: Amount from which a big order is flagged for manual review.
REVIEW_AMOUNT = 500.0

Order = dict[str, Any]


def is_big(order_id: str | None, order: Order | None) -> bool:
    """The filter of the big-orders branch (malformed orders are not big)."""
    return order is not None and float(order.get("amount", 0.0)) >= BIG_ORDER_AMOUNT


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
) -> Topology:
    """The example topology; serdes are explicit so it runs with any default serdes."""
    keys, orders_json = String(), Json()
    builder = StreamsBuilder()
    orders = builder.stream(orders_topic, Consumed(key_serde=keys, value_serde=orders_json))

    orders.filter(is_big).map_values(enrich).to(
        big_orders_topic, Produced(key_serde=keys, value_serde=orders_json)
    )

    by_customer = orders.select_key(customer_of).repartition(
        Repartitioned(name="orders-by-customer", key_serde=keys, value_serde=orders_json)
    )
    by_customer.to(by_customer_topic, Produced(key_serde=keys, value_serde=orders_json))
    # When aggregations land, the per-customer count is one line here (with Materialized, Long):
    # by_customer.group_by_key().count(materialized=Materialized.as_("orders-per-customer"))
    #     .to_stream().to("order-counts", Produced(key_serde=keys, value_serde=Long()))
    return builder.build()


def topology() -> Topology:
    """The CLI's factory (``examples.orders_app:topology``); topic names from the environment."""
    return build_topology(
        os.environ.get("ORDERS_TOPIC", ORDERS_TOPIC),
        os.environ.get("BIG_ORDERS_TOPIC", BIG_ORDERS_TOPIC),
        os.environ.get("ORDERS_BY_CUSTOMER_TOPIC", ORDERS_BY_CUSTOMER_TOPIC),
    )
