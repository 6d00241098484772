"""Aggregates read back through the record cache are what the store's bytes say.

The record cache may keep an aggregate's decoded form beside its bytes so the next record
of the key skips the decode (``state/wrappers/direct_cache_path.py``). Kafka
Streams decodes the bytes on every read (``MeteredKeyValueStore.get`` ->
``outerValue(bytes)``), so what an aggregator receives is always
``deserialize(serialize(aggregate))``, a fresh object. These tests pin that down where a
kept object would differ: a type the serde changes (an int in a ``Double`` store comes
back a float), and a mutable aggregate changed in place by an aggregator that then fails
(Kafka's ``KStreamAggregateProcessor`` never stored it, so the next record must not see the
change).
"""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams.dsl import Consumed, Materialized, Produced, StreamsBuilder, TimeWindows
from platform_streams.serde import Double, Json, String
from platform_streams.testing import TopologyTestDriver

S, D = String(), Double()
CONFIG = {"default_key_serde": "string", "default_value_serde": "string"}


@pytest.mark.parametrize("caching", [True, False])
def test_an_int_aggregate_in_a_double_store_comes_back_a_float(caching: bool) -> None:
    """Kafka's DoubleSerde gives a Double whatever the aggregator returned; here every
    aggregate is an int, so each next record must see a float. With caching the output
    leaves the cache decoded from its bytes (floats); without it the processor forwards the
    aggregate it computed, as ``KStreamAggregateProcessor`` forwards ``newAgg``."""
    seen: list[Any] = []

    def add(key: str, value: str, agg: Any) -> Any:
        seen.append(agg)
        return int(agg) + 1

    materialized = Materialized.as_("sums").with_value_serde(D)
    if not caching:
        materialized = materialized.with_caching_disabled()
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed(key_serde=S, value_serde=S))
        .group_by_key()
        .aggregate(lambda: 0, add, materialized=materialized)
        .to_stream()
        .map_values(repr)
        .to("out", Produced(value_serde=S))
    )
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        for _ in range(3):
            source.pipe_input("k", "x")
        expected = ["1.0", "2.0", "3.0"] if caching else ["1", "2", "3"]
        assert driver.create_output_topic("out", S, S).read_values_to_list() == expected
    assert seen == [0, 1.0, 2.0] and [type(agg) for agg in seen] == [int, float, float]


def test_an_int_window_aggregate_in_a_double_store_comes_back_a_float() -> None:
    """The same through a windowed aggregation's store (``TimestampedWindowStore``)."""
    seen: list[Any] = []

    def add(key: str, value: str, agg: Any) -> Any:
        seen.append(agg)
        return agg + 1

    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed(key_serde=S, value_serde=S))
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(1000))
        .aggregate(lambda: 0, add, materialized=Materialized.as_("w").with_value_serde(D))
        .to_stream()
        .map(lambda windowed, total: (windowed.key, repr(total)))
        .to("out", Produced(value_serde=S))
    )
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        for ts in (10, 20, 30):
            source.pipe_input("k", "x", ts)
        assert driver.create_output_topic("out", S, S).read_values_to_list() == ["1.0", "2.0", "3.0"]
    assert [type(agg) for agg in seen] == [int, float, float]


def test_a_dict_changed_in_place_by_a_failing_aggregator_is_not_what_the_next_record_sees() -> None:
    """An aggregator that changes its dict and then raises: the processing handler skips the
    record (``log_and_continue``), nothing is stored, and the next record of the key starts
    from the stored aggregate, not from the changed object."""

    def add(key: str, value: str, agg: dict[str, Any]) -> dict[str, Any]:
        agg["n"] += 1
        agg["values"].append(value)
        if value == "bad":
            raise ValueError("bad value")
        return agg

    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed(key_serde=S, value_serde=S))
        .group_by_key()
        .aggregate(
            lambda: {"n": 0, "values": []}, add, materialized=Materialized.as_("agg").with_value_serde(Json())
        )
        .to_stream()
        .to("out", Produced(value_serde=Json()))
    )
    config = {**CONFIG, "processing_exception_handler": "log_and_continue"}
    with TopologyTestDriver(builder.build(), config) as driver:
        source = driver.create_input_topic("in", S, S)
        for value in ("a", "b", "bad", "c"):
            source.pipe_input("k", value)
        out = driver.create_output_topic("out", S, Json()).read_values_to_list()
    assert out == [
        {"n": 1, "values": ["a"]},
        {"n": 2, "values": ["a", "b"]},
        {"n": 3, "values": ["a", "b", "c"]},
    ]
