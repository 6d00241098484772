"""Closing windows: the pending-window index of emit-final aggregations, and wall-clock closing.

:class:`PendingWindows` -- which windows still owe their final result. Kafka Streams'
``EmitStrategy.on_window_close()`` range-scans its time-ordered window store whenever the
close time advances and remembers the last close time it emitted up to in the commit's
processor metadata (``lastEmitWindowCloseTime``). Our window stores are ordered key-first
(fast per-key reads for the aggregation itself), and commit metadata is not reliable on
every broker, so instead:

* the windows created and not yet emitted are kept **in memory**, ordered by the time
  they close (``(due, window start, key bytes)``: a bucket per due time, the due times in
  a heap); emitting is popping the buckets up to the close time (cost proportional to
  what is emitted);
* the last close time emitted up to is written, when it advances, to a small changelogged
  key-value store ``<store>-close-time`` under one key (``b"t"`` -> 8 bytes): the record
  cache keeps one changelog record of it per commit, where the index this replaced wrote
  a put and a tombstone per window (two thirds of a window aggregation's changelog);
* after a restart (the stores restored from their changelogs) the pending windows are
  rebuilt from the window store itself: every stored window whose due time is later than
  the persisted close time. Windows at or before it were emitted: a window is only
  created while its due time is later than the creating processor's close time, and every
  emission persists the close time it emitted up to, in the same commit as its output.
* the one exception: processors of a cogroup share the store but each has its own stream
  time, so one may create a window at or before the close time another already emitted
  up to. Such a window is also written to the store as ``due (8) + start (8) + key -> b""``
  (as the old index did) until it is emitted, so a restart neither forgets nor repeats it.

A window is *closed* when ``due <= close time``.

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

import heapq
import struct
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from platform_streams.state.keys import MAX_TIME

if TYPE_CHECKING:
    from platform_streams.state.api import KeyValueStore

__all__ = ["CLOSE_TIME_KEY", "NO_CLOSE_TIME", "PendingWindows", "WallClockClose", "punctuation_interval_ms"]

_DUE_START = struct.Struct(">qq")
_TIME = struct.Struct(">q")
#: the key of the emitted close time in the close-time store (every window entry is >= 16 bytes)
CLOSE_TIME_KEY = b"t"
#: the close time before anything was emitted
NO_CLOSE_TIME = -(2**63)

#: ``(due, window start, key bytes)``
PendingWindow = tuple[int, int, bytes]


class PendingWindows:
    """Windows created but not yet emitted as final, ordered by close time (see module docs).

    One instance per task and close-time store: the processors of a cogroup share it, as
    they share the window store (:meth:`for_store`).

    Held as one bucket per due time (a dict used as an insertion-ordered set of
    ``(start, key bytes)``) and a heap of the due times, not a heap of windows: a tumbling
    window closes for every key at once, so a bucket is a burst (window_sum: 2,500 windows a
    task and minute), added with one dict store each and emitted sorted by one C ``sorted``
    instead of a heap push and pop of a 3-tuple per window (log n tuple comparisons each;
    ~6 % of window_sum's stream thread, bench/RESULTS.md). Emitted in the same
    order as before: due time, then window start, then key bytes.
    """

    def __init__(self, store: KeyValueStore[bytes, bytes]) -> None:
        self._store = store
        #: due time -> the windows due then, ``{(start, key bytes): None}``
        self._due: dict[int, dict[tuple[int, bytes], None]] = {}
        #: the due times of ``_due`` as a heap (a bucket emptied by :meth:`remove` stays until popped)
        self._times: list[int] = []
        #: pending windows also written to the store (created at or before ``emitted``)
        self._logged: set[PendingWindow] = set()
        #: the close time emitted up to (persisted)
        self.emitted = NO_CLOSE_TIME
        #: A lower bound of the earliest due time held: nothing closes before it, so callers
        #: skip :meth:`pop_closed` while the close time is below it.
        self.min_due = MAX_TIME
        for binary, value in store.all():
            if binary == CLOSE_TIME_KEY:
                self.emitted = _TIME.unpack(value)[0]
            else:
                due, start = _DUE_START.unpack_from(binary, 0)
                window = (due, start, binary[_DUE_START.size :])
                self._logged.add(window)
                self._push(due, start, window[2])

    @classmethod
    def for_store(
        cls,
        store: KeyValueStore[bytes, bytes],
        stored_windows: Callable[[], Iterable[tuple[int, int, bytes]]],
    ) -> PendingWindows:
        """The task's instance for ``store``; made on first use, with every window of
        ``stored_windows()`` (the window store's, as ``(due, start, key bytes)``) that is due
        after the persisted close time."""
        pending = _SHARED.get(store)
        if pending is None:
            pending = cls(store)
            emitted = pending.emitted
            for due, start, key in stored_windows():
                if due > emitted:
                    pending._push(due, start, key)
            _SHARED[store] = pending
        return pending

    def _push(self, due: int, start: int, key: bytes) -> None:
        bucket = self._due.get(due)
        if bucket is None:
            bucket = self._due[due] = {}
            heapq.heappush(self._times, due)
            if due < self.min_due:
                self.min_due = due
        bucket[(start, key)] = None

    def add(self, due_ms: int, start_ms: int, key: bytes) -> None:
        bucket = self._due.get(due_ms)
        if bucket is not None:
            if (start_ms, key) in bucket:
                return
            if due_ms > self.emitted:  # the common case: a window of a burst already open
                bucket[(start_ms, key)] = None
                return
        if due_ms <= self.emitted:  # created behind what was emitted (module docs): log it
            self._store.put(_DUE_START.pack(due_ms, start_ms) + key, b"")
            self._logged.add((due_ms, start_ms, key))
        self._push(due_ms, start_ms, key)

    def remove(self, due_ms: int, start_ms: int, key: bytes) -> None:
        """Forget a window that will never close as such (a session merged into another)."""
        bucket = self._due.get(due_ms)
        if bucket is not None:
            bucket.pop((start_ms, key), None)
        window = (due_ms, start_ms, key)
        if window in self._logged:
            self._logged.discard(window)
            self._store.put(_DUE_START.pack(due_ms, start_ms) + key, None)

    def pop_closed(self, close_time_ms: int) -> list[PendingWindow]:
        """Remove and return ``(due, start, key)`` of every window with ``due <= close_time``,
        in that order."""
        if close_time_ms < self.min_due:
            return []
        times = self._times
        buckets = self._due
        closed: list[PendingWindow] = []
        while times and times[0] <= close_time_ms:
            due = heapq.heappop(times)
            bucket = buckets.pop(due, None)
            if bucket:
                closed.extend([(due, start, key) for start, key in sorted(bucket)])
        logged = self._logged
        if logged:
            for window in closed:
                if window in logged:
                    logged.discard(window)
                    self._store.put(_DUE_START.pack(window[0], window[1]) + window[2], None)
        self.min_due = times[0] if times else MAX_TIME
        if close_time_ms > self.emitted:
            self.emitted = close_time_ms
            self._store.put(CLOSE_TIME_KEY, _TIME.pack(close_time_ms))
        return closed


#: close-time store -> its task's PendingWindows (the store lives as long as its task)
_SHARED: WeakKeyDictionary[KeyValueStore[bytes, bytes], PendingWindows] = WeakKeyDictionary()


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
