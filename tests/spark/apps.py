"""Applications of the Spark suite, as picklable factories (Spark executors rebuild them).

Each factory is a frozen dataclass holding its topic names, so a test can use fresh
topics and still hand Spark a factory that executors import from this module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from platform_streams.dsl import Consumed, Grouped, Materialized, Produced, StreamsBuilder
from platform_streams.serde import Long, String
from platform_streams.topology import Topology

S, L = String(), Long()


@dataclass(frozen=True)
class CountByKey:
    """One sub-topology: count records per key in store ``store``."""

    source: str
    sink: str
    store: str = "counts"

    def __call__(self) -> Topology:
        builder = StreamsBuilder()
        (
            builder.stream(self.source, Consumed(key_serde=S, value_serde=S))
            .group_by_key(Grouped(key_serde=S, value_serde=S))
            .count(materialized=Materialized.as_(self.store))
            .to_stream()
            .to(self.sink, Produced(key_serde=S, value_serde=L))
        )
        return builder.build()


@dataclass(frozen=True)
class CountByCustomer:
    """Two sub-topologies: re-key ``order -> "customer:amount"`` by customer (a repartition
    topic), then count per customer."""

    source: str
    sink: str
    store: str = "per-customer"

    def __call__(self) -> Topology:
        builder = StreamsBuilder()
        (
            builder.stream(self.source, Consumed(key_serde=S, value_serde=S))
            .group_by(customer_of, Grouped(key_serde=S, value_serde=S))
            .count(materialized=Materialized.as_(self.store))
            .to_stream()
            .to(self.sink, Produced(key_serde=S, value_serde=L))
        )
        return builder.build()


@dataclass(frozen=True)
class WindowedAndSessionCounts:
    """One sub-topology: per key, a count per 10 s window (20 s grace: 30 s retention) in
    ``windows`` and a count per session (1 s gap, 10 s grace: 11 s retention) in ``sessions``."""

    source: str

    def __call__(self) -> Topology:
        from platform_streams.dsl import SessionWindows, TimeWindows

        builder = StreamsBuilder()
        grouped = builder.stream(self.source, Consumed(key_serde=S, value_serde=S)).group_by_key(
            Grouped(key_serde=S, value_serde=S)
        )
        grouped.windowed_by(TimeWindows.of_size_and_grace(10_000, 20_000)).count(
            materialized=Materialized.as_("windows")
        )
        grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(1_000, 10_000)).count(
            materialized=Materialized.as_("sessions")
        )
        return builder.build()


def customer_of(_key: str, value: str) -> str:
    return value.split(":", 1)[0]


def count_by_key_from_env() -> Topology:
    """``CountByKey`` for the CLI (``MODULE:FACTORY`` takes no arguments): topics from the env."""
    return CountByKey(os.environ["PS_SPARK_TEST_SOURCE"], os.environ["PS_SPARK_TEST_SINK"])()
