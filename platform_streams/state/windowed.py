"""Window value classes shared by the window/session stores and (later) the DSL.

They mirror Kafka Streams' ``Window`` / ``TimeWindow`` / ``SessionWindow`` /
``Windowed``. They are frozen dataclasses because they are used as dict keys (the
record cache, DSL aggregations) and because a window handed downstream must never
change under the consumer's feet. ``TimeWindow`` and ``SessionWindow`` never compare
equal to each other even with the same bounds: their bounds mean different things
(half-open vs closed interval).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["SessionWindow", "TimeWindow", "Window", "Windowed", "time_window", "windowed"]

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


def _slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """The ``__set__`` of a slot's own descriptor: a frozen dataclass refuses only ``setattr``."""
    setter: Callable[[Any, Any], None] = vars(cls)[name].__set__
    return setter


_new = object.__new__
_set_start, _set_end = _slot_setter(Window, "start_ms"), _slot_setter(Window, "end_ms")
_set_key, _set_window = _slot_setter(Windowed, "key"), _slot_setter(Windowed, "window")


def time_window(start_ms: int, end_ms: int) -> TimeWindow:
    """``TimeWindow(start_ms, end_ms)`` for bounds known valid (``0 <= start < end``: a window
    the store holds). A frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__`` and then runs ``__post_init__``'s checks; this sets the slots
    directly, at half the cost, for the burst of windows an emit-final aggregation emits
    when a tumbling window closes for every key."""
    window = _new(TimeWindow)
    _set_start(window, start_ms)
    _set_end(window, end_ms)
    return window


def windowed(key: K, window: Window) -> Windowed[K]:
    """``Windowed(key, window)`` without the frozen dataclass's ``__init__`` (see
    :func:`time_window`)."""
    result: Windowed[K] = _new(Windowed)
    _set_key(result, key)
    _set_window(result, window)
    return result
