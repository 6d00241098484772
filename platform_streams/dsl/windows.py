"""Window specifications: which windows a record falls in, and how long they stay open.

Kafka Streams' ``TimeWindows`` (tumbling / hopping), ``SlidingWindows`` (KIP-450),
``SessionWindows`` and ``JoinWindows``, with the KIP-633 factories that make the grace
period explicit (``of_size_with_no_grace`` / ``of_size_and_grace``). Durations are epoch
milliseconds; a ``datetime.timedelta`` is accepted wherever a duration is.

The grace period is how long after a window ends (in *stream time*: the largest record
timestamp seen by the task) records for it are still accepted. A window is **closed**
once ``window end + grace <= stream time``; records for closed windows are dropped as
late, and "final" results (``EmitStrategy.on_window_close()``, ``suppress``) come out at
that moment. For sliding windows, whose end is inclusive, the exclusive end is
``end + 1``; for session windows the session can still grow until
``session end + inactivity gap + grace < stream time``.

The specs are immutable values: builders return a new object, so a spec can be shared.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from platform_streams.state.windowed import TimeWindow

__all__ = [
    "Duration",
    "JoinWindows",
    "SessionWindows",
    "SlidingWindows",
    "TimeWindows",
    "UnlimitedWindows",
    "to_millis",
]

#: A duration: milliseconds, or a ``timedelta``.
Duration = int | timedelta


def to_millis(duration: Duration, what: str) -> int:
    """Milliseconds of ``duration``; rejects negatives and fractions of a millisecond."""
    if isinstance(duration, timedelta):
        micros = duration // timedelta(microseconds=1)
        if micros % 1000:
            raise ValueError(f"{what} must be a whole number of milliseconds, got {duration!r}")
        millis = micros // 1000
    elif isinstance(duration, int) and not isinstance(duration, bool):
        millis = duration
    else:
        raise TypeError(f"{what} must be milliseconds (int) or a timedelta, got {duration!r}")
    if millis < 0:
        raise ValueError(f"{what} must not be negative, got {millis} ms")
    return millis


def _signed_millis(duration: Duration, what: str) -> int:
    """Like :func:`to_millis` but allows negatives (JoinWindows bounds may be negative)."""
    if isinstance(duration, timedelta):
        return -to_millis(-duration, what) if duration < timedelta(0) else to_millis(duration, what)
    if isinstance(duration, int) and not isinstance(duration, bool):
        return duration
    raise TypeError(f"{what} must be milliseconds (int) or a timedelta, got {duration!r}")


def _check_interval(before_ms: int, after_ms: int) -> None:
    if before_ms + after_ms < 0:
        raise ValueError(
            f"join window interval (before {before_ms} + after {after_ms} ms) must not be negative"
        )


def _positive(duration: Duration, what: str) -> int:
    millis = to_millis(duration, what)
    if millis == 0:
        raise ValueError(f"{what} must be larger than zero")
    return millis


@dataclass(frozen=True, slots=True)
class TimeWindows:
    """Fixed-size windows ``[start, start + size)``: tumbling, or hopping with ``advance_by``.

    Windows are aligned to the epoch: starts are multiples of ``advance_ms``. A record at
    time t belongs to every window with ``start <= t < start + size``.
    """

    size_ms: int
    advance_ms: int
    grace_ms: int

    @classmethod
    def of_size_with_no_grace(cls, size: Duration) -> TimeWindows:
        """Tumbling windows of ``size``; records are late as soon as their window ends."""
        size_ms = _positive(size, "window size")
        return cls(size_ms, size_ms, 0)

    @classmethod
    def of_size_and_grace(cls, size: Duration, grace: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` that accept out-of-order records for ``grace`` after they end."""
        size_ms = _positive(size, "window size")
        return cls(size_ms, size_ms, to_millis(grace, "grace period"))

    def advance_by(self, advance: Duration) -> TimeWindows:
        """Hopping windows: a new window every ``advance`` (0 < advance <= size)."""
        advance_ms = _positive(advance, "window advance")
        if advance_ms > self.size_ms:
            raise ValueError(
                f"window advance ({advance_ms} ms) must not be larger than the window size "
                f"({self.size_ms} ms)"
            )
        return replace(self, advance_ms=advance_ms)

    def size(self) -> int:
        """The window size in ms (Kafka Streams' ``Windows.size()``)."""
        return self.size_ms

    def grace_period_ms(self) -> int:
        return self.grace_ms

    def windows_for(self, timestamp: int) -> dict[int, TimeWindow]:
        """Every window containing ``timestamp``, by start, oldest first (Kafka's ``windowsFor``)."""
        size = self.size_ms
        return {start: TimeWindow(start, start + size) for start in self.window_starts(timestamp)}

    def window_starts(self, timestamp: int) -> range:
        """The starts of :meth:`windows_for` without building window objects (the per-record path)."""
        advance = self.advance_ms
        first = (max(0, timestamp - self.size_ms + advance) // advance) * advance
        return range(first, timestamp + 1, advance)


#: Kafka's ``Long.MAX_VALUE``: the end of an unlimited window.
MAX_TIME_MS = 2**63 - 1


@dataclass(frozen=True, slots=True)
class UnlimitedWindows:
    """One window per key from ``start_ms`` on that never ends (Kafka's ``UnlimitedWindows``).

    Kafka's ``UnlimitedWindow(start)`` is ``TimeWindow(start, MAX_TIME_MS)`` here. The window
    never closes (no grace period) and its store keeps it for ever. ``size_ms`` is what the
    time-window path adds to the start to get the end (``MAX_TIME_MS - start_ms``, so the end
    is exactly ``MAX_TIME_MS``); :meth:`size` answers Kafka's ``Long.MAX_VALUE``.
    """

    start_ms: int = 0

    @classmethod
    def of(cls) -> UnlimitedWindows:
        """The unlimited window starting at the epoch."""
        return cls(0)

    def start_on(self, start: Duration | datetime) -> UnlimitedWindows:
        """The unlimited window starting at ``start`` (epoch ms or an aware ``datetime``)."""
        if isinstance(start, datetime):
            start = timedelta(milliseconds=round(start.timestamp() * 1000))
        return UnlimitedWindows(to_millis(start, "window start time"))

    @property
    def size_ms(self) -> int:
        return MAX_TIME_MS - self.start_ms

    @property
    def advance_ms(self) -> int:
        """No hop: with ``start_ms == 0`` this equals ``size_ms`` and the tumbling fast path
        (``timestamp - timestamp % size`` = 0) is right; otherwise :meth:`window_starts` runs."""
        return MAX_TIME_MS

    @property
    def grace_ms(self) -> int:
        return 0

    def size(self) -> int:
        """Kafka's ``UnlimitedWindows.size()``: ``Long.MAX_VALUE``."""
        return MAX_TIME_MS

    def grace_period_ms(self) -> int:
        return 0

    def windows_for(self, timestamp: int) -> dict[int, TimeWindow]:
        """The one window if ``timestamp >= start_ms``, else none (Kafka's ``windowsFor``)."""
        return {start: TimeWindow(start, MAX_TIME_MS) for start in self.window_starts(timestamp)}

    def window_starts(self, timestamp: int) -> tuple[int, ...]:
        return (self.start_ms,) if timestamp >= self.start_ms else ()


@dataclass(frozen=True, slots=True)
class SlidingWindows:
    """Windows of ``time_difference`` sliding with the records (KIP-450).

    Two records are in a common window when their timestamps differ by at most
    ``time_difference_ms``; windows are ``[start, start + time_difference]`` with both
    ends inclusive, and exist only where records are (each record's left window ending
    at it, and right windows starting just after records). Results are keyed by
    ``TimeWindow(start, start + time_difference)``.
    """

    time_difference_ms: int
    grace_ms: int

    @classmethod
    def of_time_difference_with_no_grace(cls, time_difference: Duration) -> SlidingWindows:
        return cls(_positive(time_difference, "time difference"), 0)

    @classmethod
    def of_time_difference_and_grace(cls, time_difference: Duration, grace: Duration) -> SlidingWindows:
        return cls(_positive(time_difference, "time difference"), to_millis(grace, "grace period"))

    def size(self) -> int:
        return self.time_difference_ms

    def grace_period_ms(self) -> int:
        return self.grace_ms


@dataclass(frozen=True, slots=True)
class SessionWindows:
    """Sessions: records of a key closer than ``inactivity_gap_ms`` to each other form one window.

    A session is ``[first record, last record]`` (inclusive ends); a record falling
    within the gap of two sessions merges them into one.
    """

    inactivity_gap_ms: int
    grace_ms: int

    @classmethod
    def of_inactivity_gap_with_no_grace(cls, inactivity_gap: Duration) -> SessionWindows:
        return cls(_positive(inactivity_gap, "inactivity gap"), 0)

    @classmethod
    def of_inactivity_gap_and_grace(cls, inactivity_gap: Duration, grace: Duration) -> SessionWindows:
        return cls(_positive(inactivity_gap, "inactivity gap"), to_millis(grace, "grace period"))

    def inactivity_gap(self) -> int:
        return self.inactivity_gap_ms

    def grace_period_ms(self) -> int:
        return self.grace_ms


@dataclass(frozen=True, slots=True)
class JoinWindows:
    """The join window of a KStream-KStream join: a left record at t joins right records in
    ``[t - before_ms, t + after_ms]``.

    ``of_time_difference*`` sets both bounds to the difference; ``before``/``after`` then
    adjust one side. With the KIP-633 factories left/outer joins emit their unmatched
    (null-side) results only once the window has closed (``t + after + grace`` passed in
    stream time), never spuriously before a match could arrive.
    """

    before_ms: int
    after_ms: int
    grace_ms: int

    @classmethod
    def of_time_difference_with_no_grace(cls, time_difference: Duration) -> JoinWindows:
        diff = to_millis(time_difference, "time difference")
        return cls(diff, diff, 0)

    @classmethod
    def of_time_difference_and_grace(cls, time_difference: Duration, grace: Duration) -> JoinWindows:
        diff = to_millis(time_difference, "time difference")
        return cls(diff, diff, to_millis(grace, "grace period"))

    def before(self, time_difference: Duration) -> JoinWindows:
        """Right records up to ``time_difference`` *before* a left record still join it.

        May be negative (the window then starts after the left record), as long as
        ``before + after >= 0``, as in Kafka Streams.
        """
        before_ms = _signed_millis(time_difference, "time difference before")
        _check_interval(before_ms, self.after_ms)
        return replace(self, before_ms=before_ms)

    def after(self, time_difference: Duration) -> JoinWindows:
        """Right records up to ``time_difference`` *after* a left record still join it (may be negative)."""
        after_ms = _signed_millis(time_difference, "time difference after")
        _check_interval(self.before_ms, after_ms)
        return replace(self, after_ms=after_ms)

    def size(self) -> int:
        """``before + after``: the span of a join window (the size of the join stores)."""
        return self.before_ms + self.after_ms

    def grace_period_ms(self) -> int:
        return self.grace_ms
