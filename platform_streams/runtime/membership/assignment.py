"""From a consumer-group assignment to tasks, and why co-partitioned inputs stay together.

(This is the ``task_assignor="range"`` path; the state-aware assignor hands out whole tasks
by construction, :mod:`platform_streams.runtime.task_assignment`, and its partitions are
checked here too.)

librdkafka has no pluggable assignor, so the partitions a worker gets are the ``range``
assignor's choice (forced in ``StreamsConfig.consumer_configs``). For every topic, range
sorts the members and hands each one the same contiguous block of partition numbers when
the topics have the same partition count -- so a member that gets partition ``p`` of one
co-partitioned input gets ``p`` of all of them, which is exactly one task ``<sub>_<p>``.
Partition counts are checked to be equal before anything runs (``resolve_partitions``:
``CoPartitioningError``), and every assignment is checked again here: a task whose inputs
arrive split over several workers would join against half its data, so that is an error,
never a silent degradation.
"""

from __future__ import annotations

from collections.abc import Iterable

from platform_streams.errors import CoPartitioningError
from platform_streams.processor.task_id import TaskId
from platform_streams.topology.compiler import TopologyPlan

__all__ = ["tasks_of_assignment"]


def tasks_of_assignment(
    plan: TopologyPlan, application_id: str, assigned: Iterable[tuple[str, int]]
) -> list[TaskId]:
    """The tasks whose input partitions ``assigned`` holds; raises if one has only some of them."""
    have = set(assigned)
    task_ids: list[TaskId] = []
    for sub in plan.subtopologies:
        topics = [plan.physical_topic(t, application_id) for t in sub.source_topics]
        for number in sorted({p for (t, p) in have if t in topics}):
            missing = [t for t in topics if (t, number) not in have]
            if missing:
                raise CoPartitioningError(
                    {},
                    f"sub-topology {sub.id}: partition {number} of {missing} is not assigned with the "
                    f"rest of task {sub.id}_{number}; co-partitioned topics need the range assignor "
                    "and equal partition counts",
                )
            task_ids.append(TaskId(sub.id, number))
    return task_ids
