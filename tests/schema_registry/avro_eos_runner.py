"""``eos_runner.py`` (its events, signals and settings) with a stateful Avro application:
orders (Avro, reader schema v2) grouped by an Avro customer key into Avro per-customer
stats (aggregate, caching off), joined with the customers table (Avro), written as Avro.

Every order makes one output record whose ``orders`` is the customer's new count, so the
crash suite's checks hold: read_committed, each customer's ``orders`` must be ``1..n``.
The registry URL and the customers topic come from the environment (``REGISTRY_URL``,
``CUSTOMERS_TOPIC``): the runner's command line is eos_runner's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Grouped, Materialized, Produced
from platform_streams.serde import Avro, String
from tests.integration import eos_runner
from tests.schema_registry.test_registry_app import CUSTOMER, CUSTOMER_KEY, ORDER_V2, _record

STATS = _record("OrderStats", ("orders", "long"), ("amount", "long"), ("app_orders", "long"))
TIER_STATS = _record(
    "TierStats", ("tier", "string"), ("orders", "long"), ("amount", "long"), ("app_orders", "long")
)


def _add(_key: Any, order: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    return {
        "orders": stats["orders"] + 1,
        "amount": stats["amount"] + order["amount"],
        "app_orders": stats["app_orders"] + (order["channel"] == "app"),
    }


def build_app(registry_url: str, orders: str, customers: str, out: str) -> StreamsBuilder:
    key = Avro(registry_url, json.dumps(CUSTOMER_KEY), is_key=True)
    # the reader schema has the field v2 adds: v1 records decode with its default ("web")
    order = Avro(registry_url, json.dumps(ORDER_V2))
    builder = StreamsBuilder()
    # no cache on the table: a cached customer reaches the join at the next commit, joined
    # again with the stats of that moment -- one more output record than orders (as in Java)
    table = builder.table(
        customers,
        Consumed(key_serde=key, value_serde=Avro(registry_url, json.dumps(CUSTOMER))),
        Materialized(store_name="customers").with_caching_disabled(),
    )
    stats = (
        builder.stream(orders, Consumed(key_serde=String(), value_serde=order))
        .group_by(
            lambda _k, v: {"customer": v["customer"]},
            Grouped(key_serde=key, value_serde=order, name="by-customer"),
        )
        .aggregate(
            lambda: {"orders": 0, "amount": 0, "app_orders": 0},
            _add,
            Materialized(
                store_name="order-stats", key_serde=key, value_serde=Avro(registry_url, json.dumps(STATS))
            ).with_caching_disabled(),
        )
    )
    stats.join(table, lambda s, c: {"tier": c["tier"], **s}).to_stream().to(
        out, Produced(key_serde=key, value_serde=Avro(registry_url, json.dumps(TIER_STATS)))
    )
    return builder


def build(args: argparse.Namespace) -> StreamsBuilder:
    return build_app(os.environ["REGISTRY_URL"], args.input, os.environ["CUSTOMERS_TOPIC"], args.output)


if __name__ == "__main__":
    eos_runner.build = build
    sys.exit(eos_runner.main())
