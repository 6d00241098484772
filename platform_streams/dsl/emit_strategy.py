"""When a windowed aggregation emits (Kafka Streams' ``EmitStrategy``, KIP-825).

* ``on_window_update()`` (the default): every update of a window's aggregate goes
  downstream (deduplicated per commit when the store's cache is enabled).
* ``on_window_close()``: nothing is emitted while a window is open; its final aggregate
  is emitted exactly once, when the window closes (``window end + grace <= stream
  time``). No suppress buffer is needed: the aggregation's own store holds the values.

Wall-clock closing (our extension, not in Kafka Streams):
``on_window_close(wall_clock_after_ms=N)`` also closes windows when the stream goes
quiet. See :class:`platform_streams.dsl.internals.window_close.WallClockClose` for the exact rule
and how it differs from pure stream-time semantics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from platform_streams.dsl.windows import Duration, to_millis

__all__ = ["EmitStrategy"]


@dataclass(frozen=True, slots=True)
class EmitStrategy:
    """``EmitStrategy.on_window_update()`` or ``EmitStrategy.on_window_close(...)``."""

    kind: Literal["on_window_update", "on_window_close"]
    #: Close windows by wall-clock time after this much input silence (None: stream time only).
    wall_clock_after_ms: int | None = None

    @classmethod
    def on_window_update(cls) -> EmitStrategy:
        return cls("on_window_update")

    @classmethod
    def on_window_close(cls, wall_clock_after_ms: Duration | None = None) -> EmitStrategy:
        """Emit each window's final result once; optionally close windows on wall-clock idleness."""
        after = None
        if wall_clock_after_ms is not None:
            after = to_millis(wall_clock_after_ms, "wall_clock_after_ms")
            if after == 0:
                raise ValueError("wall_clock_after_ms must be larger than zero")
        return cls("on_window_close", after)

    @property
    def emit_final(self) -> bool:
        return self.kind == "on_window_close"
