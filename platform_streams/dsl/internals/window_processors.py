"""Windowed aggregation processors: time (tumbling/hopping), sliding and session windows.

Kafka Streams' ``KStreamWindowAggregate``, ``KStreamSlidingWindowAggregate`` and
``KStreamSessionWindowAggregate``, with the same rules:

* each processor tracks its own stream time (the largest timestamp it has seen); a
  window is *closed* once ``end + grace <= stream time`` (sliding: ``end + 1``, the
  end being inclusive; sessions: ``end + gap + grace < stream time``); a record that
  could only update closed windows is **dropped as late**: counted in the task's
  ``dropped_records`` and this processor's ``late_records_dropped``, logged at debug;
* records with a null key are skipped (counted as dropped); null values are skipped by
  sliding windows only: Kafka Streams' time and session window aggregates pass them to the
  aggregator (found by the differential tests, tests/oracle/);
* results are ``Windowed(key, window) -> Change(new, old)`` (a KTable); a time/sliding
  window result is stamped with the largest timestamp aggregated into the window, a
  session result with the session end;
* ``EmitStrategy.on_window_update()``: updates leave through the store's flush listener
  (per write without caching, once per window per commit with caching);
  ``EmitStrategy.on_window_close()``: each window's final value is emitted once when it
  closes (see :mod:`platform_streams.dsl.internals.window_close`), optionally by wall clock.

Closed windows are emitted *after* the current record is applied, as Kafka Streams'
``maybeForwardFinalResult``: the record cannot change a closed window, but its write can
move the window store's retention past windows that close at this record (a jump in
time); those are expired in the store and, as in Kafka, never emitted
(KStreamSlidingWindowAggregateTest.testAggregateRandomInput). Sliding windows emit only
after a record processed in order (not after an early or a late-dropped one), as Kafka's
``KStreamSlidingWindowAggregate``. Kafka keeps the caching layer of an emit-final
*time*-window store (not of sliding or session ones), and a cached write reaches the store
(and moves its retention) only at the commit: so a time-window aggregation with caching
emits before its write, which gives the same output. (Kafka's emit-final stores are
time-ordered and keep a window 1 ms longer than a plain window store: the DSL gives the
emit-final store 1 ms more retention, see ``windowed_stream._retention``.)
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.change import Change
from platform_streams.dsl.internals.skipped_records import skip_record
from platform_streams.dsl.internals.window_close import (
    PendingWindows,
    WallClockClose,
    punctuation_interval_ms,
)
from platform_streams.dsl.internals.window_fragment import window_fragment
from platform_streams.processor.api import PunctuationType
from platform_streams.processor.node import NodeProcessor
from platform_streams.processor.record import Headers
from platform_streams.serde.primitive import Bytes
from platform_streams.state.keys import MAX_TIME, window_suffix
from platform_streams.state.windowed import SessionWindow, TimeWindow, Windowed, time_window, windowed

if TYPE_CHECKING:
    from platform_streams.dsl.emit_strategy import EmitStrategy
    from platform_streams.dsl.internals.table_processors import TableOp
    from platform_streams.dsl.windows import SessionWindows, TimeWindows, UnlimitedWindows
    from platform_streams.processor.context import NodeContext
    from platform_streams.serde.base import Serde
    from platform_streams.state.timestamped_window_store import DslSessionStore, DslWindowStore

__all__ = [
    "AggregateParams",
    "SessionWindowAggregateProcessor",
    "TimeWindowAggregateProcessor",
    "WindowAggregateProcessor",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AggregateParams:
    """Build-time description of one windowed aggregation node."""

    store_name: str
    #: the emit-final index store (None with EmitStrategy.on_window_update())
    pending_store_name: str | None
    initializer: Callable[[], Any]
    aggregator: Callable[[Any, Any, Any], Any]
    emit: EmitStrategy
    #: sessions only: merges two session aggregates ``(key, agg1, agg2) -> agg``
    merger: Callable[[Any, Any, Any], Any] | None = None
    #: the only processor writing the store (False for a cogroup's processors: a window one
    #: of them closed may still be updated by another whose stream time lags)
    sole_writer: bool = True


class WindowAggregateProcessor(NodeProcessor):
    """What the three windowed aggregations share: stream time, late drops, emission."""

    store: Any
    pending: PendingWindows | None = None
    wall_clock: WallClockClose | None = None
    #: emit-final: check for closed windows at most once per this many ms of wall clock (Kafka's
    #: internal ``__emit.interval.ms.kstreams.windowed.aggregation__``); 0: at every record
    emit_interval_ms = 0
    #: the wall clock before which the throttle holds (Kafka's ``TimeTracker.nextTimeToEmit``)
    _next_emit_ms = 0

    def __init__(self, params: AggregateParams, op: TableOp) -> None:
        self.params = params
        self.op = op
        self.observed_stream_time = -1
        #: records dropped because all their windows were closed (a metric later)
        self.late_records_dropped = 0
        self._headers: Headers = None
        #: emit-final over a record cache, sole writer of its store: tells the cache which
        #: windows were emitted (a closed window is never updated again: evicted first, see
        #: ``NamedCache.mark_final``), given the windows' binary keys
        self._mark_final: Callable[[list[bytes]], None] | None = None

    def init(self, context: NodeContext) -> None:
        super().init(context)
        params = self.params
        self.store = context.get_state_store(params.store_name)
        if params.emit.emit_final:
            assert params.pending_store_name is not None
            self.key_serde: Serde = self.store.key_serde
            self.pending = PendingWindows.for_store(
                context.get_state_store(params.pending_store_name), self._stored_windows
            )
            self.emit_interval_ms = context.config.emit_interval_ms_kstreams_windowed_aggregation
            idle = params.emit.wall_clock_after_ms
            if idle is not None:
                self.wall_clock = WallClockClose(idle)
                context.schedule(
                    punctuation_interval_ms(idle), PunctuationType.WALL_CLOCK_TIME, self._on_wall_clock
                )
        else:
            self.store.set_flush_listener(self._on_update, self.op.send_old_values)

    # -- emission ------------------------------------------------------------------------

    def _on_update(self, key: Windowed[Any], new: Any, old: Any, timestamp: int) -> None:
        self.forward(key, Change(new, old), self._update_timestamp(key, timestamp), self._headers)

    def _update_timestamp(self, key: Windowed[Any], timestamp: int) -> int:
        """The timestamp of an update record (the store's stored timestamp by default)."""
        return timestamp

    @abstractmethod
    def close_time(self, stream_time: int) -> int:
        """Windows whose due time (see ``window_close``) is ``<=`` this are closed."""

    @abstractmethod
    def due_of(self, start_ms: int, end_ms: int) -> int:
        """The due time (``track``'s) of the stored window ``[start, end]``."""

    def _stored_windows(self) -> Iterator[tuple[int, int, bytes]]:
        """``(due, start, key bytes)`` of every window in the store (restart: see ``window_close``)."""
        due_of = self.due_of
        raw_key = self.raw_key
        for windowed_key, _ in self._all_windows():
            window = windowed_key.window
            yield due_of(window.start_ms, window.end_ms), window.start_ms, raw_key(windowed_key.key)

    def _all_windows(self) -> Iterator[tuple[Windowed[Any], Any]]:
        windows: Iterator[tuple[Windowed[Any], Any]] = self.store.all()
        return windows

    @abstractmethod
    def emit_final(self, key: Any, due_ms: int, start_ms: int, headers: Headers) -> None:
        """Forward the final result of one closed window, read from the store."""

    def advance(self, timestamp: int) -> int:
        """Move stream time to ``timestamp``. Returns the close time; the windows it closes
        are emitted by :meth:`emit_closed` once the record is applied."""
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
        if self.wall_clock is not None:
            self.wall_clock.on_record(self.context.current_system_time_ms(), self.observed_stream_time)
        return self.close_time(self.observed_stream_time)

    def emit_closed(self, headers: Headers) -> None:
        """Emit-final: forward the windows stream time has closed (Kafka's ``maybeForwardFinalResult``,
        called after the record was applied)."""
        pending = self.pending
        if pending is not None and (not self.emit_interval_ms or self.emit_due_by_wall_clock()):
            close_time = self.close_time(self.observed_stream_time)
            if close_time >= pending.min_due:  # else nothing can be closed: skip the call
                self._emit_closed(close_time, headers)

    def emit_due_by_wall_clock(self) -> bool:
        """Kafka's emit-final throttle (``shouldEmitFinal``), asked once per record that could
        emit: False until ``emit_interval_ms`` of wall clock passed since the last check that
        passed. The next check is due an interval after *now*, so a clock jump does not open
        the throttle for every record until it caught up."""
        now = self.context.current_system_time_ms()
        if now < self._next_emit_ms:
            return False
        self._next_emit_ms = now + self.emit_interval_ms
        return True

    def _emit_closed(self, close_time: int, headers: Headers) -> None:
        assert self.pending is not None
        self._emit_popped(self.pending.pop_closed(close_time), headers)

    def _emit_popped(self, closed: list[tuple[int, int, bytes]], headers: Headers) -> None:
        """Emit the windows just popped as closed, then mark them final in the cache."""
        self._emit_windows(closed, headers)
        mark_final = self._mark_final
        if mark_final is not None and closed:
            mark_final([raw_key + window_suffix(start, 0) for _, start, raw_key in closed])

    def _emit_windows(self, closed: list[tuple[int, int, bytes]], headers: Headers) -> None:
        """Emit the final results of the windows ``(due, start, key bytes)`` just closed."""
        deserialize = self.key_serde.deserialize
        for due, start, raw_key in closed:
            self.emit_final(deserialize(raw_key), due, start, headers)

    def _on_wall_clock(self, now_ms: int) -> None:
        assert self.wall_clock is not None
        advanced = self.wall_clock.advanced_stream_time(now_ms)
        if advanced is None or advanced <= self.observed_stream_time:
            return
        self.observed_stream_time = advanced
        self._emit_closed(self.close_time(advanced), None)

    def track(self, due_ms: int, start_ms: int, key: Any) -> None:
        """Emit-final: remember a newly created window until it closes."""
        if self.pending is not None:
            self.pending.add(due_ms, start_ms, self.raw_key(key))

    def raw_key(self, key: Any) -> bytes:
        raw = self.key_serde.serialize(key)
        if raw is None:
            raise ValueError(f"{self.context.node_name}: a record key serialized to None")
        return raw

    # -- drops -----------------------------------------------------------------------------

    #: why a skipped record is skipped, in Kafka's log text: the time and session aggregates
    #: skip only null keys, the sliding one null keys or values
    skip_reason = "null key"

    def skip_null(self, key: Any, value: Any) -> bool:
        """True (and counted) if the record has a null key or value: aggregations skip those."""
        if key is not None and value is not None:
            return False
        skip_record(self.context, self.skip_reason)
        return True

    def drop_late(self, key: Any, timestamp: int, start: int, end: int, close_time: int) -> None:
        self.late_records_dropped += 1
        self.context.task.dropped_records += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "skipping record for expired window: node=%s key=%r timestamp=%d window=[%d,%d] "
                "expiration=%d streamTime=%d metadata=%s",
                self.context.node_name,
                key,
                timestamp,
                start,
                end,
                close_time,
                self.observed_stream_time,
                self.context.record_metadata(),
            )


class TimeWindowAggregateProcessor(WindowAggregateProcessor):
    """Tumbling and hopping windows (Kafka Streams' ``KStreamWindowAggregate``)."""

    store: DslWindowStore

    def __init__(self, params: AggregateParams, op: TableOp, windows: TimeWindows | UnlimitedWindows) -> None:
        super().__init__(params, op)
        self.windows = windows
        #: emit-final over a cached store: emit before the write (see the module docs)
        self.emit_before_write = False

    def init(self, context: NodeContext) -> None:
        super().init(context)
        self.emit_before_write = self.pending is not None and self.store.caching_enabled
        if self.pending is not None and self.params.sole_writer:
            self._mark_final = self.store.closed_window_marker()
        #: fetch-aggregate-put of one window in one call on the store's record cache (or None)
        self._step = self.store.aggregate_step(self.params.initializer, self.params.aggregator)
        #: the whole of ``process`` for a tumbling window, in line in the fused source
        self.fused_fragment = window_fragment(self)
        #: emit-final: the final values of the windows a record closes, in one read (or None)
        self._read_closed = None if self.pending is None else self.store.closed_window_reader()

    def close_time(self, stream_time: int) -> int:
        return stream_time - self.windows.grace_ms

    def due_of(self, start_ms: int, end_ms: int) -> int:
        return start_ms + self.windows.size_ms

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        # only a null key is skipped: Kafka Streams' KStreamWindowAggregate aggregates null
        # values (tests/oracle/test_regressions.py)
        if key is None and self.skip_null(key, value):
            return
        windows = self.windows
        if self.wall_clock is None:  # advance and close_time, inlined (two calls per record)
            if timestamp > self.observed_stream_time:
                self.observed_stream_time = timestamp
            close_time = self.observed_stream_time - windows.grace_ms
        else:
            close_time = self.advance(timestamp)
        # emit_closed, inlined (a call per record): stream time does not move while this
        # record is applied, so the close time stays this one
        pending = self.pending
        due = pending is not None and close_time >= pending.min_due
        if self.emit_interval_ms and pending is not None and not self.emit_due_by_wall_clock():
            due = False
        if due and self.emit_before_write:
            self._emit_closed(close_time, headers)
        size = windows.size_ms
        self._headers = headers
        try:
            # tumbling windows (the common case): the one start, without a call
            starts = (
                (timestamp - timestamp % size,)
                if size == windows.advance_ms and timestamp >= 0
                else windows.window_starts(timestamp)
            )
            step = self._step
            for start in starts:
                end = start + size
                if end <= close_time:
                    self.drop_late(key, timestamp, start, end, close_time)
                    continue
                if step is not None:
                    created = step(key, value, timestamp, start)
                    if created is not None:
                        if created:
                            self.track(end, start, key)
                        continue
                self.layered_window(key, value, timestamp, start)
        finally:
            self._headers = None
        if due and not self.emit_before_write:
            self._emit_closed(close_time, headers)

    def layered_window(self, key: Any, value: Any, timestamp: int, start: int) -> None:
        """One window's fetch-aggregate-put through the store's layers (where the one-call
        step does not serve: no record cache, metrics on)."""
        store, params = self.store, self.params
        old = store.fetch_timestamped(key, start)
        if old is None:
            agg, new_ts = params.initializer(), timestamp
            self.track(start + self.windows.size_ms, start, key)
        else:
            agg, new_ts = old
            if timestamp > new_ts:
                new_ts = timestamp
        store.put_timestamped(key, params.aggregator(key, value, agg), new_ts, start)

    def emit_final(self, key: Any, due_ms: int, start_ms: int, headers: Headers) -> None:
        vat = self.store.fetch_timestamped(key, start_ms)
        if vat is not None:
            window = TimeWindow(start_ms, start_ms + self.windows.size_ms)
            self.forward(Windowed(key, window), Change(vat.value, None), vat.timestamp, headers)

    def _emit_popped(self, closed: list[tuple[int, int, bytes]], headers: Headers) -> None:
        """:meth:`emit_final` for each window, read with the checks made once a burst
        (``closed_window_reader``: a tumbling window closes for every key at once); the
        binary keys the reads of cached windows built are the ones marked final."""
        read = self._read_closed
        mark_final = self._mark_final
        final: list[bytes] | None = None if mark_final is None else []
        fetch = read(final) if read is not None and closed else None
        if fetch is None:
            super()._emit_popped(closed, headers)
            return
        # a Bytes key is its own bytes (``Bytes.deserialize`` returns them): no call a window
        deserialize = None if type(self.key_serde) is Bytes else self.key_serde.deserialize
        forward, size = self.forward, self.windows.size_ms
        for _, start, raw_key in closed:
            vat = fetch(start, raw_key)
            if vat is not None:
                key = raw_key if deserialize is None else deserialize(raw_key)
                forward(
                    windowed(key, time_window(start, start + size)), Change(vat[0], None), vat[1], headers
                )
        if final:
            assert mark_final is not None
            mark_final(final)


class SessionWindowAggregateProcessor(WindowAggregateProcessor):
    """Session windows (Kafka Streams' ``KStreamSessionWindowAggregate``), merging sessions.

    A record at t joins every session of its key ending at or after ``t - gap`` and
    starting at or before ``t + gap``; when that makes a different window than
    ``[t, t]``, the sessions it bridges are removed (a tombstone each goes downstream
    without caching) and one merged session replaces them.
    """

    store: DslSessionStore

    def __init__(self, params: AggregateParams, op: TableOp, windows: SessionWindows) -> None:
        super().__init__(params, op)
        self.windows = windows
        assert params.merger is not None
        self.merger = params.merger

    def close_time(self, stream_time: int) -> int:
        return stream_time - self.windows.grace_ms - self.windows.inactivity_gap_ms

    def due_of(self, start_ms: int, end_ms: int) -> int:
        return end_ms + 1

    def _all_windows(self) -> Iterator[tuple[Windowed[Any], Any]]:
        return self.store.find_sessions_range(None, None, 0, MAX_TIME)

    def _update_timestamp(self, key: Windowed[Any], timestamp: int) -> int:
        return key.window.end_ms

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        # only a null key is skipped, as in KStreamSessionWindowAggregate (null values aggregate)
        if key is None and self.skip_null(key, value):
            return
        close_time = self.advance(timestamp)
        gap = self.windows.inactivity_gap_ms
        store = self.store
        merged = list(store.find_sessions(key, timestamp - gap, timestamp + gap))
        agg = self.params.initializer()
        start = end = timestamp
        for session, session_agg in merged:
            agg = self.merger(key, agg, session_agg)
            start = min(start, session.window.start_ms)
            end = max(end, session.window.end_ms)
        if end < close_time:
            self.drop_late(key, timestamp, start, end, close_time)
            self.emit_closed(headers)
            return
        self._headers = headers
        try:
            if start != timestamp or end != timestamp:
                pending = self.pending
                for session, _ in merged:
                    store.remove(session)
                    if pending is not None:
                        window = session.window
                        pending.remove(window.end_ms + 1, window.start_ms, self.raw_key(key))
            agg = self.params.aggregator(key, value, agg)
            store.put(Windowed(key, SessionWindow(start, end)), agg)
            self.track(end + 1, start, key)
        finally:
            self._headers = None
        self.emit_closed(headers)

    def emit_final(self, key: Any, due_ms: int, start_ms: int, headers: Headers) -> None:
        end = due_ms - 1
        agg = self.store.fetch_session(key, start_ms, end)
        if agg is not None:
            self.forward(Windowed(key, SessionWindow(start_ms, end)), Change(agg, None), end, headers)
