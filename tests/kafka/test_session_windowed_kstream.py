"""Kafka's ``SessionWindowedKStreamImplTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/
internals/SessionWindowedKStreamImplTest.java): the ``shouldMaterialize{Count,Reduced,Aggregated}``
cases, each for both emit strategies (Java's ``@EnumSource(EmitStrategy.StrategyType.class)``).

With ``ON_WINDOW_CLOSE`` Kafka materializes the aggregation in its time-ordered session store
(``BuiltInDslStoreSuppliers`` -> ``RocksDbTimeOrderedSessionBytesStoreSupplier``) with caching
off (``SessionStoreMaterializer.build``); that store reads only sessions that end after
``stream time - retention`` (``AbstractDualSchemaRocksDBSegmentedBytesStore.getActualFrom``), so the
closed session ``1@10/15`` is no longer fetched. With ``ON_WINDOW_UPDATE`` it is still in the
(cached) store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from platform_streams.dsl import (
    Consumed,
    EmitStrategy,
    Grouped,
    Materialized,
    SessionWindows,
    StreamsBuilder,
    Windowed,
)
from platform_streams.serde import String
from platform_streams.state.windowed import SessionWindow
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import streams_config

S = String()
PROPS = streams_config("string", "string")


def _session_stream(builder: StreamsBuilder, emit_final: bool) -> Any:
    """Java's ``setup(inputType)``: a 500 ms gap with no grace, and the emit strategy."""
    strategy = EmitStrategy.on_window_close() if emit_final else EmitStrategy.on_window_update()
    return (
        builder.stream("input", Consumed(key_serde=S, value_serde=S))
        .group_by_key(Grouped(key_serde=S, value_serde=S))
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(500))
        .emit_strategy(strategy)
    )


def _process_data(driver: TopologyTestDriver) -> None:
    topic = driver.create_input_topic("input", S, S)
    topic.pipe_input("1", "1", 10)
    topic.pipe_input("1", "2", 15)
    topic.pipe_input("1", "3", 600)
    topic.pipe_input("2", "1", 600)
    topic.pipe_input("2", "2", 599)


def _materialized(
    store: str, emit_final: bool, aggregate: Callable[[Any], None]
) -> list[tuple[Windowed[str], Any]]:
    builder = StreamsBuilder()
    aggregate(_session_stream(builder, emit_final))
    with TopologyTestDriver(builder.build(), PROPS) as driver:
        _process_data(driver)
        return list(driver.get_session_store(store).fetch_range("1", "2"))


def _expected(emit_final: bool, ten_fifteen: Any, six_hundred: Any, two: Any) -> list[tuple[Any, Any]]:
    final = [
        (Windowed("1", SessionWindow(600, 600)), six_hundred),
        (Windowed("2", SessionWindow(599, 600)), two),
    ]
    return final if emit_final else [(Windowed("1", SessionWindow(10, 15)), ten_fifteen), *final]


@pytest.mark.parametrize("emit_final", [False, True], ids=["ON_WINDOW_UPDATE", "ON_WINDOW_CLOSE"])
def test_should_materialize_count(emit_final: bool) -> None:
    """SessionWindowedKStreamImplTest.shouldMaterializeCount"""
    data = _materialized("count-store", emit_final, lambda s: s.count(Materialized.as_("count-store")))
    assert data == _expected(emit_final, 2, 1, 2)


@pytest.mark.parametrize("emit_final", [False, True], ids=["ON_WINDOW_UPDATE", "ON_WINDOW_CLOSE"])
def test_should_materialize_reduced(emit_final: bool) -> None:
    """SessionWindowedKStreamImplTest.shouldMaterializeReduced (MockReducer.STRING_ADDER)"""
    data = _materialized(
        "reduced", emit_final, lambda s: s.reduce(lambda a, b: f"{a}+{b}", Materialized.as_("reduced"))
    )
    assert data == _expected(emit_final, "1+2", "3", "1+2")


@pytest.mark.parametrize("emit_final", [False, True], ids=["ON_WINDOW_UPDATE", "ON_WINDOW_CLOSE"])
def test_should_materialize_aggregated(emit_final: bool) -> None:
    """SessionWindowedKStreamImplTest.shouldMaterializeAggregated (MockInitializer.STRING_INIT,
    MockAggregator.TOSTRING_ADDER, the test's ``aggOne + "+" + aggTwo`` merger)"""
    data = _materialized(
        "aggregated",
        emit_final,
        lambda s: s.aggregate(
            lambda: "0",
            lambda key, value, agg: f"{agg}+{value}",
            lambda key, one, two: f"{one}+{two}",
            Materialized.as_("aggregated").with_value_serde(S),
        ),
    )
    assert data == _expected(emit_final, "0+0+1+2", "0+3", "0+0+1+2")
