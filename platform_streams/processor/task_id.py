"""Task identity: one task per (sub-topology, partition), named ``<subtopology>_<partition>``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True, slots=True)
class TaskId:
    """Identifies a task the way Kafka Streams does (``0_3`` = sub-topology 0, partition 3)."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TaskId:
        """Parse ``"0_3"``; raises ValueError naming the text when it is not a task id."""
        try:
            sub, part = text.split("_", 1)
            return cls(int(sub), int(part))
        except ValueError:
            raise ValueError(f"not a task id (expected '<subtopology>_<partition>'): {text!r}") from None
