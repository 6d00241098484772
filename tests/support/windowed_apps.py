"""A Bytes-keyed tumbling-window aggregation, the shape the window fragment runs in line
(platform_streams/dsl/internals/window_fragment.py), for the tests that compare it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, EmitStrategy, Grouped, Materialized, Produced, TimeWindows
from platform_streams.serde import Bytes, Long, Serde, String


def bytes_windowed_long(
    builder: StreamsBuilder,
    aggregator: Callable[[bytes, Any, int], int | None],
    *,
    size_ms: int,
    grace_ms: int,
    final: bool,
    out_serde: Serde,
    out_value: Callable[[int], Any],
) -> None:
    """``in`` (Bytes keys, String values) -> tumbling windows -> a Long aggregate from 0 ->
    ``out`` keyed ``key@start``, emitted when windows close (``final``) or at every update."""
    windowed = (
        builder.stream("in", Consumed(key_serde=Bytes(), value_serde=String()))
        .group_by_key(Grouped(key_serde=Bytes(), value_serde=String()))
        .windowed_by(TimeWindows.of_size_and_grace(size_ms, grace_ms))
    )
    if final:
        windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    (
        windowed.aggregate(
            lambda: 0, aggregator, materialized=Materialized.as_("windows").with_value_serde(Long())
        )
        .to_stream()
        .map(lambda w, n: (w.key + b"@%d" % w.window.start_ms, out_value(n)))
        .to("out", Produced(key_serde=Bytes(), value_serde=out_serde))
    )
