"""Punctuation schedules: callbacks on stream time or wall-clock time, per task."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from platform_streams.processor.api import PunctuationType, Punctuator


@dataclass
class PunctuationSchedule:
    """One ``schedule()`` call: fires at most once per check, then moves past ``now``.

    As in Kafka Streams, a punctuator that fell behind (a long pause, a jump in
    stream time) fires once, not once per missed interval.
    """

    node_name: str
    interval_ms: int
    punctuation_type: PunctuationType
    callback: Punctuator
    next_ms: int
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True

    def due(self, now_ms: int) -> bool:
        return not self.cancelled and now_ms >= self.next_ms

    def advance(self, now_ms: int) -> None:
        missed = (now_ms - self.next_ms) // self.interval_ms + 1
        self.next_ms += missed * self.interval_ms


class PunctuationQueue:
    """The schedules of one task, split by punctuation type."""

    def __init__(self) -> None:
        self.schedules: list[PunctuationSchedule] = []

    def add(self, schedule: PunctuationSchedule) -> PunctuationSchedule:
        if schedule.interval_ms < 1:
            raise ValueError(f"punctuation interval must be >= 1 ms, got {schedule.interval_ms}")
        self.schedules.append(schedule)
        return schedule

    def fire_due(
        self,
        punctuation_type: PunctuationType,
        now_ms: int,
        run: Callable[[PunctuationSchedule, int], None],
    ) -> int:
        """Run every due schedule of ``punctuation_type``; returns how many fired."""
        if not self.schedules:
            return 0
        fired = 0
        for schedule in list(self.schedules):
            if schedule.punctuation_type is punctuation_type and schedule.due(now_ms):
                schedule.advance(now_ms)
                run(schedule, now_ms)
                fired += 1
        self.schedules = [s for s in self.schedules if not s.cancelled]
        return fired
