"""Windowed cogroups: ``CogroupedKStream.windowed_by(TimeWindows | SlidingWindows | SessionWindows)``.

Kafka Streams' ``TimeWindowedCogroupedKStream`` / ``SessionWindowedCogroupedKStream``: every
grouped stream of the cogroup gets its own windowed aggregate processor
(``COGROUPKSTREAM-AGGREGATE-<n>``, ``<named>-cogroup-agg-<i>``) with its own aggregator, all
writing one window (or session) store, then a ``COGROUPKSTREAM-MERGE-<n>`` node is the
result table's node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.emit_strategy import EmitStrategy
from platform_streams.dsl.options import require_functions
from platform_streams.dsl.windowed_stream import SessionWindowedKStream, TimeWindowedKStream
from platform_streams.dsl.windows import SessionWindows, SlidingWindows, TimeWindows, UnlimitedWindows

if TYPE_CHECKING:
    from platform_streams.dsl.grouped_stream import KGroupedStream
    from platform_streams.dsl.ktable import KTable
    from platform_streams.dsl.options import Materialized, Named

__all__ = ["SessionWindowedCogroupedKStream", "TimeWindowedCogroupedKStream", "cogroup_windowed_by"]

Aggregator = Callable[[Any, Any, Any], Any]
Inputs = list[tuple["KGroupedStream", Aggregator]]
_PREFIX = "COGROUPKSTREAM-AGGREGATE-"


def cogroup_windowed_by(
    inputs: Inputs, windows: Any
) -> TimeWindowedCogroupedKStream | SessionWindowedCogroupedKStream:
    if isinstance(windows, TimeWindows | SlidingWindows | UnlimitedWindows):
        return TimeWindowedCogroupedKStream(inputs, windows)
    if isinstance(windows, SessionWindows):
        return SessionWindowedCogroupedKStream(inputs, windows)
    raise TypeError(
        f"windowed_by: parameter 'windows' takes TimeWindows, UnlimitedWindows, SlidingWindows or "
        f"SessionWindows, got {windows!r}"
    )


class TimeWindowedCogroupedKStream(TimeWindowedKStream):
    """A cogroup windowed by ``TimeWindows`` or ``SlidingWindows``."""

    def __init__(
        self,
        inputs: Inputs,
        windows: TimeWindows | SlidingWindows | UnlimitedWindows,
        emit: EmitStrategy | None = None,
    ) -> None:
        super().__init__(inputs[0][0], windows, emit)
        self._inputs = inputs

    def emit_strategy(self, strategy: EmitStrategy) -> TimeWindowedCogroupedKStream:
        return TimeWindowedCogroupedKStream(self._inputs, self.windows, strategy)

    def aggregate(  # type: ignore[override]
        self,
        initializer: Callable[[], Any],
        named: Named | str | Materialized | None = None,
        materialized: Materialized | Named | str | None = None,
    ) -> KTable:
        """The aggregate per key and window, from ``initializer()`` and each input's aggregator."""
        require_functions("aggregate", initializer=initializer)
        return self._build_from(
            self._inputs, _PREFIX, named, materialized, None, self._maker(), initializer, None, cogroup=True
        )


class SessionWindowedCogroupedKStream(SessionWindowedKStream):
    """A cogroup windowed by ``SessionWindows``."""

    def __init__(self, inputs: Inputs, windows: SessionWindows, emit: EmitStrategy | None = None) -> None:
        super().__init__(inputs[0][0], windows, emit)
        self._inputs = inputs

    def emit_strategy(self, strategy: EmitStrategy) -> SessionWindowedCogroupedKStream:
        return SessionWindowedCogroupedKStream(self._inputs, self.windows, strategy)

    def aggregate(  # type: ignore[override]
        self,
        initializer: Callable[[], Any],
        merger: Aggregator,
        named: Named | str | Materialized | None = None,
        materialized: Materialized | Named | str | None = None,
    ) -> KTable:
        """The aggregate per key and session; ``merger(key, agg1, agg2)`` joins merged sessions."""
        require_functions("aggregate", initializer=initializer, merger=merger)
        return self._build_from(
            self._inputs, _PREFIX, named, materialized, None, self._maker(), initializer, merger, cogroup=True
        )
