"""``KTable.suppress``: hold table updates back, emit only final (or rate-limited) results.

Kafka Streams' ``Suppressed`` and ``BufferConfig``:

* ``Suppressed.until_window_closes(BufferConfig.unbounded())`` -- for a windowed
  aggregation's table: nothing of a window goes downstream until it closes; then its
  latest value goes out exactly once. Close means ``window end + grace <= stream time``
  of the suppress operator (sliding windows, whose end is inclusive: ``end + 1 + grace``;
  sessions add their inactivity gap). Only a *strict* buffer
  (``unbounded()`` or ``...shut_down_when_full()``) is accepted: emitting early would break
  the "final" promise.
* ``Suppressed.until_time_limit(ms, buffer_config)`` -- per key, the latest value is
  emitted once ``ms`` of stream time has passed since the key's *first* buffered update
  (a rate limit: later updates don't reset the timer).

The buffer is a changelogged key-value store (Kafka Streams' ``KTABLE-SUPPRESS-STATE-STORE``),
so buffered updates survive a restart and emitted ones are not emitted again. A bounded
buffer (``max_records`` / ``max_bytes``) either emits its oldest entries early when full
(``emit_early_when_full()``, only for time limits) or stops the application
(``shut_down_when_full()``).

``with_wall_clock_close(idle_ms)`` is our extension: emit by wall-clock time when the
input goes quiet (see :class:`platform_streams.dsl.internals.window_close.WallClockClose` for the
exact rule and how it differs from stream-time semantics).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from platform_streams.dsl.windows import Duration, to_millis

__all__ = ["BufferConfig", "Suppressed"]

FullStrategy = Literal["emit_early", "shut_down"]


@dataclass(frozen=True, slots=True)
class BufferConfig:
    """How much a suppress buffer may hold and what happens when it is full."""

    record_limit: int | None = None
    byte_limit: int | None = None
    when_full: FullStrategy = "shut_down"
    logging_enabled: bool = True
    log_config: dict[str, str] = field(default_factory=dict)

    @classmethod
    def unbounded(cls) -> BufferConfig:
        """No limit (a strict buffer: it never emits early); bounded only by memory and disk."""
        return cls()

    @classmethod
    def max_records(cls, records: int) -> BufferConfig:
        """At most ``records`` keys; emits the oldest early when full (``shut_down_when_full`` to change)."""
        return cls(record_limit=_limit(records, "max records"), when_full="emit_early")

    @classmethod
    def max_bytes(cls, byte_count: int) -> BufferConfig:
        """At most ``byte_count`` bytes of buffered keys and values; emits early when full."""
        return cls(byte_limit=_limit(byte_count, "max bytes"), when_full="emit_early")

    def with_max_records(self, records: int) -> BufferConfig:
        return replace(self, record_limit=_limit(records, "max records"))

    def with_max_bytes(self, byte_count: int) -> BufferConfig:
        return replace(self, byte_limit=_limit(byte_count, "max bytes"))

    def with_no_bound(self) -> BufferConfig:
        """Remove both limits (keeps the full strategy; an unbounded buffer is never full)."""
        return replace(self, record_limit=None, byte_limit=None)

    def emit_early_when_full(self) -> BufferConfig:
        """When full, emit the oldest buffered updates early (not allowed for final results)."""
        return replace(self, when_full="emit_early")

    def shut_down_when_full(self) -> BufferConfig:
        """When full, fail the task (the application stops) instead of emitting early."""
        return replace(self, when_full="shut_down")

    def with_logging_disabled(self) -> BufferConfig:
        """No changelog: the buffer's content is lost on restart (its updates are never emitted)."""
        return replace(self, logging_enabled=False, log_config={})

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> BufferConfig:
        return replace(self, logging_enabled=True, log_config=dict(config or {}))

    @property
    def strict(self) -> bool:
        return self.when_full == "shut_down"


def _limit(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a non-negative integer, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Suppressed:
    """A suppression: ``until_window_closes(...)`` or ``until_time_limit(...)``."""

    kind: Literal["until_window_closes", "until_time_limit"]
    buffer_config: BufferConfig
    time_to_wait_ms: int = 0
    name: str | None = None
    #: close by wall clock after this much input silence (None: stream time only)
    wall_clock_idle_ms: int | None = None

    @classmethod
    def until_window_closes(cls, buffer_config: BufferConfig) -> Suppressed:
        """Final results of a windowed table: each window once, when it closes."""
        if not buffer_config.strict:
            raise ValueError(
                "until_window_closes needs a strict buffer (BufferConfig.unbounded() or "
                "....shut_down_when_full()): emitting early would not give final results"
            )
        return cls("until_window_closes", buffer_config)

    @classmethod
    def until_time_limit(
        cls, time_to_wait_for_more_events: Duration, buffer_config: BufferConfig
    ) -> Suppressed:
        """Per key, the latest update once ``time_to_wait`` (stream time) passed since its first update."""
        wait = to_millis(time_to_wait_for_more_events, "time to wait for more events")
        return cls("until_time_limit", buffer_config, wait)

    def with_name(self, name: str) -> Suppressed:
        """Names the suppress node (and its buffer store ``<name>-store``)."""
        return replace(self, name=name)

    def with_wall_clock_close(self, idle_ms: Duration) -> Suppressed:
        """Also advance this operator's stream time by wall-clock time after ``idle_ms`` without input."""
        idle = to_millis(idle_ms, "wall-clock close idle time")
        if idle == 0:
            raise ValueError("wall-clock close idle time must be larger than zero")
        return replace(self, wall_clock_idle_ms=idle)
