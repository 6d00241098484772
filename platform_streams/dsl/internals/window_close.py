"""Closing windows: the pending-window index of emit-final aggregations, and wall-clock closing.

:class:`PendingWindows` -- which windows still owe their final result. Kafka Streams'
``EmitStrategy.on_window_close()`` range-scans its time-ordered window store whenever the
close time advances and remembers the last close time it emitted up to in the commit's
processor metadata. Our window stores are ordered key-first (fast per-key reads for the
aggregation itself), and commit metadata is not reliable on every broker, so instead each
emit-final aggregation keeps a small changelogged key-value store of the windows it has
created and not yet emitted, ordered by the time they close:
``due (8 bytes) + window start (8 bytes) + key bytes -> b""``. Emitting is reading the
head of that index up to the close time (cost proportional to what is emitted) and
deleting the entries; after a restart the index is restored from its changelog, so no
window is emitted twice or forgotten. A window is *closed* when ``due <= close time``.

:class:`WallClockClose` -- our extension over Kafka Streams (and Quix Streams, whose
windows close only when a newer record arrives): stream time normally advances only with
input, so a final result waits for the next record, possibly forever on a quiet key
space. With wall-clock closing, a WALL_CLOCK_TIME punctuator advances the processor's
stream time while the input is idle::

    idle = now_wall - wall time of the last record processed
    if idle >= idle_ms:  stream time = max(stream time, stream time at last record + idle)

and then closes (emits) whatever that stream time closes. How this differs from pure
stream-time semantics, precisely:

1. It assumes event time moves like wall time during silence. If producers stamp
   records behind wall time (a lagging source, a replay of old data that pauses), the
   advanced stream time runs ahead of the data: windows close earlier than pure
   stream time would close them, and records arriving after the pause for those
   windows are **dropped as late** (counted like any late record) -- the price of
   emitting each window exactly once. Choose ``idle_ms`` (plus the window's grace)
   larger than the longest expected pause of a lagging source.
2. It only acts after ``idle_ms`` without *any* input record to the processor; a
   steady stream (even of old timestamps) keeps pure stream-time semantics.
3. Results depend on when punctuation runs, so they are not reproducible by replaying
   the input (pure stream time is). The TopologyTestDriver makes them deterministic:
   ``advance_wall_clock_time`` runs the punctuator.
4. The advanced stream time is per processor and per task (each task closes its own
   windows), is not shared with other operators' stream time (a downstream suppress
   keeps its own), and is not persisted: after a restart nothing is closed by wall
   clock until a record has been processed again.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from platform_streams.state.keys import MAX_TIME

if TYPE_CHECKING:
    from platform_streams.state.api import KeyValueStore

__all__ = ["PendingWindows", "WallClockClose", "punctuation_interval_ms"]

_DUE_START = struct.Struct(">qq")


class PendingWindows:
    """Windows created but not yet emitted as final, ordered by close time (see module docs)."""

    def __init__(self, store: KeyValueStore[bytes, bytes]) -> None:
        self._store = store
        #: A lower bound of the earliest due time held: nothing closes before it, so callers
        #: skip :meth:`pop_closed` (a scan) while the close time is below it.
        self.min_due = MAX_TIME
        for binary, _ in store.all():
            self.min_due = _DUE_START.unpack_from(binary, 0)[0]
            break

    def add(self, due_ms: int, start_ms: int, key: bytes) -> None:
        self._store.put(_DUE_START.pack(due_ms, start_ms) + key, b"")
        if due_ms < self.min_due:
            self.min_due = due_ms

    def remove(self, due_ms: int, start_ms: int, key: bytes) -> None:
        """Forget a window that will never close as such (a session merged into another)."""
        self._store.put(_DUE_START.pack(due_ms, start_ms) + key, None)

    def pop_closed(self, close_time_ms: int) -> list[tuple[int, int, bytes]]:
        """Remove and return ``(due, start, key)`` of every window with ``due <= close_time``."""
        if close_time_ms < self.min_due:
            return []
        store = self._store
        closed: list[tuple[int, int, bytes]] = []
        next_due = MAX_TIME
        for binary, _ in store.all():
            due, start = _DUE_START.unpack_from(binary, 0)
            if due > close_time_ms:
                next_due = due
                break
            closed.append((due, start, binary[_DUE_START.size :]))
            store.put(binary, None)
        self.min_due = next_due
        return closed


def punctuation_interval_ms(idle_ms: int) -> int:
    """How often the wall-clock punctuator checks: at most every second, at least every ``idle_ms``."""
    return max(1, min(idle_ms, 1000))


class WallClockClose:
    """Tracks input idleness and computes the stream time wall-clock closing allows (module docs)."""

    def __init__(self, idle_ms: int) -> None:
        if idle_ms <= 0:
            raise ValueError(f"wall-clock close idle time must be > 0 ms, got {idle_ms}")
        self.idle_ms = idle_ms
        self._last_input_wall: int | None = None
        self._stream_time_at_input = -1

    def on_record(self, now_wall_ms: int, stream_time_ms: int) -> None:
        """Call for every input record, after the processor updated its stream time."""
        self._last_input_wall = now_wall_ms
        self._stream_time_at_input = stream_time_ms

    def advanced_stream_time(self, now_wall_ms: int) -> int | None:
        """The stream time to close windows at now, or None while the input is not idle."""
        last = self._last_input_wall
        if last is None or self._stream_time_at_input < 0:
            return None
        idle = now_wall_ms - last
        if idle < self.idle_ms:
            return None
        return self._stream_time_at_input + idle
