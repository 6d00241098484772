"""From one client's tasks to its group members (stream threads), stickily and evenly.

Kafka Streams' ``StreamsPartitionAssignor`` distributes each client's tasks over its
consumers; here likewise: every member keeps the tasks it had in the previous generation
up to its share, the rest go to the members with the fewest tasks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from platform_streams.processor.task_id import TaskId

__all__ = ["distribute_over_members"]


def distribute_over_members(
    tasks: Iterable[TaskId], members: Iterable[str], previous: Mapping[str, Iterable[TaskId]]
) -> dict[str, list[TaskId]]:
    """Member id -> its tasks: balanced by count (max - min <= 1), sticky to ``previous``."""
    ids = sorted(set(members))
    out: dict[str, list[TaskId]] = {m: [] for m in ids}
    if not ids:
        return out
    todo = sorted(set(tasks))
    share = -(-len(todo) // len(ids))
    low = len(todo) // len(ids)
    extra = len(todo) - low * len(ids)  # members that may hold low + 1
    rest: list[TaskId] = []
    for task in todo:
        owner = next((m for m in ids if task in set(previous.get(m, ()))), None)
        if owner is not None and len(out[owner]) < share:
            if len(out[owner]) == low and extra == 0:
                rest.append(task)
                continue
            if len(out[owner]) == low:
                extra -= 1
            out[owner].append(task)
        else:
            rest.append(task)
    for task in rest:
        member = min(ids, key=lambda m: (len(out[m]), m))
        out[member].append(task)
    return out
