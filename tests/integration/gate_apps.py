"""Applications for the deploy gate's tests: one deployed topology and two candidates.

``counts`` counts orders per customer in a store whose name the DSL generates.
``counts_filtered`` adds a filter *upstream* of it, which renumbers the generated names: the
store, its changelog and the repartition topic all change name, so the deployed state
would be orphaned. ``counts_as_text`` only changes what happens *downstream* of the store:
a compatible change. Topics come from ``GATE_INPUT`` / ``GATE_OUTPUT`` (fresh per test).
"""

from __future__ import annotations

import os
from typing import Any

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Consumed, Grouped, Materialized, Produced
from platform_streams.serde import Long, String


def _build(*, filtered: bool = False, as_text: bool = False) -> Topology:
    builder = StreamsBuilder()
    orders: Any = builder.stream(os.environ["GATE_INPUT"], Consumed.with_(String(), String()))
    if filtered:
        orders = orders.filter(lambda key, value: value is not None)
    grouped = orders.group_by(lambda key, value: value, Grouped(key_serde=String(), value_serde=String()))
    counts = grouped.count(materialized=Materialized(key_serde=String(), value_serde=Long())).to_stream()
    if as_text:
        counts.map_values(str).to(os.environ["GATE_OUTPUT"], Produced.with_(String(), String()))
    else:
        counts.to(os.environ["GATE_OUTPUT"], Produced.with_(String(), Long()))
    return builder.build()


def counts() -> Topology:
    return _build()


def counts_filtered() -> Topology:
    return _build(filtered=True)


def counts_as_text() -> Topology:
    return _build(as_text=True)
