"""Applications of the shadow replay tests, as picklable factories (Spark executors rebuild them).

:class:`BigOrderCounts` counts, per customer, the orders of at least ``min_amount``: a
candidate with another ``min_amount`` differs from the deployed app in one operator (the
filter), and only for the customers that had an order the two thresholds treat differently.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from platform_streams.dsl import Consumed, Grouped, Materialized, Produced, StreamsBuilder
from platform_streams.serde import Long, String
from platform_streams.topology import Topology

S, L = String(), Long()


@dataclass(frozen=True)
class BigOrderCounts:
    """``customer -> amount`` records; counts per customer of the orders >= ``min_amount``."""

    source: str
    sink: str
    min_amount: int = 10

    def __call__(self) -> Topology:
        builder = StreamsBuilder()
        threshold = self.min_amount
        (
            builder.stream(self.source, Consumed(key_serde=S, value_serde=S))
            .filter(lambda _customer, amount: int(amount) >= threshold)
            .group_by_key(Grouped(key_serde=S, value_serde=S))
            .count(materialized=Materialized.as_("big-orders"))
            .to_stream()
            .to(self.sink, Produced(key_serde=S, value_serde=L))
        )
        return builder.build()


def deployed_from_env() -> Topology:
    """``BigOrderCounts`` for the CLI (``MODULE:FACTORY`` takes no arguments): topics from the env."""
    return BigOrderCounts(os.environ["PS_SHADOW_SOURCE"], os.environ["PS_SHADOW_SINK"])()


def candidate_from_env() -> Topology:
    """The deployed app with the threshold in ``PS_SHADOW_MIN_AMOUNT``."""
    source, sink = os.environ["PS_SHADOW_SOURCE"], os.environ["PS_SHADOW_SINK"]
    return BigOrderCounts(source, sink, int(os.environ["PS_SHADOW_MIN_AMOUNT"]))()
