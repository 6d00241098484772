"""Which emit-final window stores cache, as Kafka Streams' store materializers decide.

Kafka's ``SessionStoreMaterializer.build`` and ``SlidingWindowStoreMaterializer.build``
("do not enable cache if the emit final strategy is used") build an emit-final store
without caching, so every update reaches the store and its changelog; its
``WindowStoreMaterializer`` (time windows) keeps caching as materialized. Emit-on-update
stores cache in all three.
"""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams.dsl import (
    Consumed,
    EmitStrategy,
    Materialized,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
)
from platform_streams.serde import String
from platform_streams.testing import TopologyTestDriver

S = String()
CONFIG = {"default_key_serde": "string", "default_value_serde": "string"}


def _store_caches(windows: Any, emit_final: bool) -> bool:
    builder = StreamsBuilder()
    windowed = builder.stream("in", Consumed(key_serde=S, value_serde=S)).group_by_key().windowed_by(windows)
    if emit_final:
        windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    windowed.count(materialized=Materialized.as_("counts")).to_stream().to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        caching: bool = driver.get_state_store("counts").caching_enabled
    return caching


@pytest.mark.parametrize(
    ("windows", "emit_final", "caches"),
    [
        (TimeWindows.of_size_with_no_grace(1000), False, True),
        (TimeWindows.of_size_with_no_grace(1000), True, True),  # WindowStoreMaterializer
        (SlidingWindows.of_time_difference_with_no_grace(1000), False, True),
        (SlidingWindows.of_time_difference_with_no_grace(1000), True, False),
        (SessionWindows.of_inactivity_gap_with_no_grace(1000), False, True),
        (SessionWindows.of_inactivity_gap_with_no_grace(1000), True, False),
    ],
    ids=["time", "time-final", "sliding", "sliding-final", "session", "session-final"],
)
def test_emit_final_stores_cache_as_kafka_materializes_them(
    windows: Any, emit_final: bool, caches: bool
) -> None:
    assert _store_caches(windows, emit_final) is caches
