"""A worker's shared record cache: another cache may take a key-value cache's clean entries,
never a window cache's (state/cache.py ``RecordCache.evict_from``).

The windowed table join of Kafka's KStreamWindowAggregateTest.testJoin: table2's store
expires window A@0 when B@1000 arrives, and only table2's cache still answers it (Kafka's
``CachingWindowStore.fetch(key, time)``, our ``CachingWindowStore.fetch_at``). With one
budget shared by both aggregations' caches (as a worker shares it; the test driver gives
each store its own unless told), table1's cache growing must not drop that window: the join
of A@5 still finds it. A review found that the first version of the donor rule dropped it
(and with it the join's output) at budgets of 540-780 bytes.
"""

from __future__ import annotations

from typing import Any

import pytest

import platform_streams.testing.driver as driver_module
from platform_streams.dsl import Consumed, Grouped, Materialized, StreamsBuilder, TimeWindows
from platform_streams.processor.context import TaskContext
from platform_streams.serde import String
from platform_streams.state.cache import RecordCache
from platform_streams.testing import TopologyTestDriver

S = String()


@pytest.mark.parametrize("budget", [540, 660, 780, 10 * 1024 * 1024])
def test_a_window_cache_keeps_an_expired_window_a_join_still_reads(
    budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = RecordCache(budget)
    start_task = driver_module.start_task

    def start_sharing(*args: Any, **kwargs: Any) -> Any:
        return start_task(*args, **{**kwargs, "record_cache": shared})

    monkeypatch.setattr(driver_module, "start_task", start_sharing)
    monkeypatch.setattr(TaskContext, "record_cache", shared, raising=False)
    builder = StreamsBuilder()
    tables = [
        builder.stream(topic, Consumed(key_serde=S, value_serde=S))
        .group_by_key(Grouped(key_serde=S, value_serde=S))
        .windowed_by(TimeWindows.of_size_and_grace(10, 100))
        .aggregate(
            lambda: "0",
            lambda k, v, agg: f"{agg}+{v}",
            Materialized.as_(f"{topic}-store").with_value_serde(S).with_retention(110),
        )
        for topic in ("topic1", "topic2")
    ]
    tables[0].join(tables[1], lambda a, b: f"{a}%{b}").to_stream().map(
        lambda k, v: (f"{k.key}@{k.window.start()}", v)
    ).to("out")
    config = {
        "default_key_serde": "string",
        "default_value_serde": "string",
        "statestore_cache_max_bytes": budget,
    }
    with TopologyTestDriver(builder.build(), config) as driver:
        topic1 = driver.create_input_topic("topic1", S, S)
        topic2 = driver.create_input_topic("topic2", S, S)
        out = driver.create_output_topic("out", S, S)
        topic2.pipe_input("A", "a", 0)
        topic2.pipe_input("B", "b", 1000)  # table2's store expires A@0; its cache keeps it, clean
        topic1.pipe_input("A", "x", 5)
        assert len(shared._caches) == 2  # both stores share the one budget
        assert out.read_key_values_to_list() == [("A@0", "0+x%0+a")]
