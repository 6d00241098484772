"""Sliding-window aggregation (Kafka Streams' ``KStreamSlidingWindowAggregate``, KIP-450).

Sliding windows exist only where records are: for each record at t, its *left window*
``[t - d, t]`` (ending at the record) and, when later records lie within d of it, its
*right window* ``[t + 1, t + 1 + d]`` (starting just after it). Both ends are inclusive
and results are keyed ``TimeWindow(start, start + d)``. Each record reads the key's
windows starting in ``[t - 2d, t + 1]`` once, newest first as Kafka does when its store
iterates backward (``processReverse``: the order the updates leave in), then:

* updates every existing window containing t (starting in ``[t - d, t]``);
* creates its left window from the aggregate of the latest window ending before t
  (which holds exactly the records in ``[t - d, t)`` if the previous record is that
  close), and its right window from the earliest window holding records after t;
* creates the right window of the previous record when t falls in it.

Records earlier than d (whose left window would start before 0) all share the window
``[0, d]`` instead, as in Kafka Streams. The stored timestamp of a window is the largest
record timestamp in it: that is how the algorithm knows where the previous record is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.change import Change
from platform_streams.dsl.internals.window_processors import AggregateParams, WindowAggregateProcessor
from platform_streams.processor.record import Headers
from platform_streams.state.timestamped import ValueAndTimestamp
from platform_streams.state.windowed import TimeWindow, Windowed

if TYPE_CHECKING:
    from platform_streams.dsl.internals.table_processors import TableOp
    from platform_streams.dsl.windows import SlidingWindows
    from platform_streams.state.timestamped_window_store import DslWindowStore

__all__ = ["SlidingWindowAggregateProcessor"]


class _Found:
    """What a walk over a record's windows found (Kafka's locals of ``processInOrder`` and
    ``processReverse``, handed to ``createWindows``)."""

    __slots__ = ("left_agg", "left_exists", "previous_ts", "right_agg", "right_exists", "starts")

    def __init__(self) -> None:
        self.starts: set[int] = set()
        #: the aggregate of the latest window ending before the record
        self.left_agg: ValueAndTimestamp | None = None
        #: the aggregate of a window holding the record and records after it
        self.right_agg: ValueAndTimestamp | None = None
        self.left_exists = False
        self.right_exists = False
        #: the timestamp of the latest record before this one
        self.previous_ts: int | None = None


class SlidingWindowAggregateProcessor(WindowAggregateProcessor):
    """One record updates/creates at most its left window, right window and the previous right window."""

    store: DslWindowStore
    skip_reason = "null key or value"

    def __init__(self, params: AggregateParams, op: TableOp, windows: SlidingWindows) -> None:
        super().__init__(params, op)
        self.windows = windows
        self.diff = windows.time_difference_ms
        self._reverse_possible: bool | None = None

    def _backward_fetch_supported(self, key: Any) -> bool:
        """Kafka probes its store once with ``backwardFetch(key, 0, 0)``: a store that cannot
        iterate backward (UnsupportedOperationException there) gets the forward algorithm."""
        try:
            for _ in self.store.fetch_between_timestamped(key, 0, 0, backward=True):
                break
        except NotImplementedError:
            return False
        return True

    def close_time(self, stream_time: int) -> int:
        # a window is closed when end < stream time - grace, i.e. due = end + 1 <= stream time - grace
        return stream_time - self.windows.grace_ms

    def due_of(self, start_ms: int, end_ms: int) -> int:
        return start_ms + self.diff + 1

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        if self.skip_null(key, value):
            return
        close = self.advance(timestamp)  # Kafka's closeTime
        diff = self.diff
        if timestamp + 1 + diff <= close:
            self.drop_late(key, timestamp, timestamp - diff, timestamp, close)
            return
        self._headers = headers
        try:
            if timestamp < diff:
                self._process_early(key, value, timestamp, close)
                return  # Kafka's processEarly returns without maybeForwardFinalResult
            if self._reverse_possible is None:
                self._reverse_possible = self._backward_fetch_supported(key)
            if self._reverse_possible:
                self._process_reverse(key, value, timestamp, close)
            else:
                self._process_in_order(key, value, timestamp, close)
        finally:
            self._headers = None
        self.emit_closed(headers)

    # -- the algorithm (Kafka Streams' processInOrder / processEarly / createWindows) ----------

    def _windows_around(self, key: Any, ts: int, *, backward: bool) -> list[tuple[int, ValueAndTimestamp]]:
        """The key's windows starting in ``[ts - 2d, ts + 1]`` (``+ 1``: the record's right window)."""
        return list(
            self.store.fetch_between_timestamped(key, max(0, ts - 2 * self.diff), ts + 1, backward=backward)
        )

    def _process_in_order(self, key: Any, value: Any, ts: int, close: int) -> None:
        diff = self.diff
        found = _Found()
        for start, vat in self._windows_around(key, ts, backward=False):
            found.starts.add(start)
            end = start + diff
            if end < ts:
                found.left_agg = vat
                found.previous_ts = vat.timestamp
            elif end == ts:
                found.left_exists = True
                if vat.timestamp < ts:
                    found.previous_ts = vat.timestamp
                self._update(key, value, ts, start, vat, close, new=False)
            elif start <= ts:
                found.right_agg = vat
                self._update(key, value, ts, start, vat, close, new=False)
            elif start == ts + 1:
                found.right_exists = True
            else:  # pragma: no cover - the fetch bounds exclude it
                raise AssertionError(f"unexpected sliding window starting at {start} for a record at {ts}")
        self._create_windows(key, value, ts, close, found)

    def _process_reverse(self, key: Any, value: Any, ts: int, close: int) -> None:
        """Kafka's ``processReverse``: the key's windows newest first, so the windows after the
        record are updated before its left window, and the walk stops at the first window ending
        before the record (the previous record's aggregate) -- or, when the record's left window
        already holds a record at or after it, right there, creating nothing."""
        diff = self.diff
        found = _Found()
        for start, vat in self._windows_around(key, ts, backward=True):
            found.starts.add(start)
            end = start + diff
            if start == ts + 1:
                found.right_exists = True
            elif end > ts:
                if found.right_agg is None:
                    found.right_agg = vat
                self._update(key, value, ts, start, vat, close, new=False)
            elif end == ts:
                found.left_exists = True
                self._update(key, value, ts, start, vat, close, new=False)
                if vat.timestamp >= ts:
                    return
                found.previous_ts = vat.timestamp
            else:
                found.left_agg = vat
                found.previous_ts = vat.timestamp
                break
        self._create_windows(key, value, ts, close, found)

    def _create_windows(self, key: Any, value: Any, ts: int, close: int, found: _Found) -> None:
        """Kafka's ``createWindows``: the previous record's right window, the record's left
        window, then its right window, each only when missing and not empty."""
        diff = self.diff
        previous_ts, left_agg, right_agg = found.previous_ts, found.left_agg, found.right_agg
        if previous_ts is not None:
            prev_right = previous_ts + 1
            if prev_right not in found.starts and prev_right + diff >= ts:
                self._update(
                    key, value, ts, prev_right, ValueAndTimestamp(self.params.initializer(), ts), close
                )
        if not found.left_exists:
            if previous_ts is not None and ts - diff <= previous_ts and left_agg is not None:
                seed = ValueAndTimestamp(left_agg.value, ts)
            else:
                seed = ValueAndTimestamp(self.params.initializer(), ts)
            self._update(key, value, ts, ts - diff, seed, close)
        if not found.right_exists and right_agg is not None and right_agg.timestamp > ts:
            self._create_right_window(key, ts, right_agg)

    def _process_early(self, key: Any, value: Any, ts: int, close: int) -> None:
        combined: tuple[int, ValueAndTimestamp] | None = None
        right_agg: ValueAndTimestamp | None = None
        right_exists = False
        starts: set[int] = set()
        previous_ts: int | None = None
        for start, vat in list(self.store.fetch_between_timestamped(key, 0, ts + 1)):
            starts.add(start)
            if start == 0:
                combined = (start, vat)
                if vat.timestamp < ts:
                    previous_ts = vat.timestamp
            elif start <= ts:
                right_agg = vat
                self._update(key, value, ts, start, vat, close, new=False)
            elif start == ts + 1:
                right_exists = True
            else:  # pragma: no cover - the fetch bounds exclude it
                raise AssertionError(f"unexpected sliding window starting at {start} for a record at {ts}")
        if right_agg is None and combined is not None and combined[1].timestamp > ts:
            right_agg = combined[1]
        if not right_exists and right_agg is not None and right_agg.timestamp > ts:
            self._create_right_window(key, ts, right_agg)
        if previous_ts is not None and previous_ts + 1 not in starts:
            self._update(
                key, value, ts, previous_ts + 1, ValueAndTimestamp(self.params.initializer(), ts), close
            )
        if combined is None:
            self._update(key, value, ts, 0, ValueAndTimestamp(self.params.initializer(), ts), close)
        else:
            self._update(key, value, ts, 0, combined[1], close, new=False)

    def _create_right_window(self, key: Any, ts: int, right_agg: ValueAndTimestamp) -> None:
        """The record's right window holds exactly the records of ``right_agg`` (all later than ts)."""
        start = ts + 1
        self.store.put_timestamped(key, right_agg.value, right_agg.timestamp, start)
        self.track(start + self.diff + 1, start, key)

    def _update(
        self,
        key: Any,
        value: Any,
        ts: int,
        start: int,
        vat: ValueAndTimestamp,
        close: int,
        *,
        new: bool = True,
    ) -> None:
        """Aggregate the record into window ``[start, start + d]`` holding ``vat``.

        Kafka Streams' ``updateWindowAndForward``: a closed window is dropped as late.
        """
        end = start + self.diff
        if end < close:
            self.drop_late(key, ts, start, end, close)
            return
        old = vat.value
        new_agg = self.params.aggregator(key, value, old)
        new_ts = ts if old is None else max(ts, vat.timestamp)
        self.store.put_timestamped(key, new_agg, new_ts, start)
        if new:
            self.track(end + 1, start, key)

    def emit_final(self, key: Any, due_ms: int, start_ms: int, headers: Headers) -> None:
        vat = self.store.fetch_timestamped(key, start_ms)
        if vat is not None:
            window = TimeWindow(start_ms, start_ms + self.diff)
            self.forward(Windowed(key, window), Change(vat.value, None), vat.timestamp, headers)
