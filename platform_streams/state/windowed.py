"""Window value classes shared by the window/session stores and (later) the DSL.

They mirror Kafka Streams' ``Window`` / ``TimeWindow`` / ``SessionWindow`` /
``Windowed``. They are frozen dataclasses because they are used as dict keys (the
record cache, DSL aggregations) and because a window handed downstream must never
change under the consumer's feet. ``TimeWindow`` and ``SessionWindow`` never compare
equal to each other even with the same bounds: their bounds mean different things
(half-open vs closed interval).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["SessionWindow", "TimeWindow", "Window", "Windowed"]

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class Window:
    """A time interval in epoch milliseconds; subclasses say whether ``end_ms`` is inclusive."""

    start_ms: int
    end_ms: int

    def __post_init__(self) -> None:
        if self.start_ms < 0:
            raise ValueError(f"window start must be >= 0, got {self.start_ms}")
        if self.end_ms < self.start_ms:
            raise ValueError(f"window end {self.end_ms} is before its start {self.start_ms}")

    def start(self) -> int:
        """The window's start in ms (Kafka's ``Window.start()``)."""
        return self.start_ms

    def end(self) -> int:
        """The window's end in ms (Kafka's ``Window.end()``)."""
        return self.end_ms

    def overlaps(self, other: Window) -> bool:
        """True if the two windows share at least one millisecond (closed interval by default)."""
        return self.start_ms <= other.end_ms and other.start_ms <= self.end_ms


@dataclass(frozen=True, slots=True)
class TimeWindow(Window):
    """A fixed-size (tumbling/hopping/sliding) window: ``[start_ms, end_ms)``, half-open."""

    def __post_init__(self) -> None:
        if self.start_ms < 0:
            raise ValueError(f"window start must be >= 0, got {self.start_ms}")
        if self.end_ms <= self.start_ms:
            raise ValueError(f"time window end {self.end_ms} must be after its start {self.start_ms}")

    def overlaps(self, other: Window) -> bool:
        """Half-open windows touching at a boundary do not overlap (Kafka Streams' rule)."""
        return self.start_ms < other.end_ms and other.start_ms < self.end_ms


@dataclass(frozen=True, slots=True)
class SessionWindow(Window):
    """A session: ``[start_ms, end_ms]``, both ends inclusive; a one-record session has start == end."""


@dataclass(frozen=True, slots=True)
class Windowed(Generic[K]):
    """A record key together with the window it was aggregated in (the key of windowed results)."""

    key: K
    window: Window

    def __repr__(self) -> str:
        return f"[{self.key!r}@{self.window.start_ms}/{self.window.end_ms}]"
