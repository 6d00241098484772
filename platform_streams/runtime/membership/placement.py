"""Standby placement: which client keeps a warm copy of which stateful task.

librdkafka has no pluggable assignor, so the group protocol cannot place standby tasks as
Kafka Streams' assignor does, and the admin API cannot be relied on to list the members
(some brokers' describe_consumer_groups shows none). Instead every client publishes what it runs
on the application's control topic (see :mod:`platform_streams.runtime.membership.control_channel`),
and each client computes the same placement from the same published view, here:

* the ring is the sorted ids of the live clients;
* a task's standbys go to the ``num_standby_replicas`` clients that follow its active
  owner on the ring (never the owner itself; fewer when there are not enough clients);
* a task whose owner nobody has published yet is anchored at a hash of its id instead.

So with two clients each keeps a standby of every stateful task the other runs. The
function is deterministic and needs no coordination: clients whose views differ for a
moment (a heartbeat in flight) converge at the next heartbeat. What it cannot do is make
the *group* give a failed client's tasks to the client that holds their standbys: the
range assignor decides that (with two clients it is always the survivor).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from platform_streams.processor.task_id import TaskId

__all__ = ["MemberInfo", "standby_placement", "standby_tasks_of"]


@dataclass(frozen=True)
class MemberInfo:
    """What one client published about itself."""

    process_id: str
    active: frozenset[TaskId] = field(default_factory=frozenset)
    standby: frozenset[TaskId] = field(default_factory=frozenset)
    host: str | None = None
    timestamp_ms: int = 0


def _anchor(task: TaskId, ring: list[str]) -> int:
    return zlib.crc32(str(task).encode()) % len(ring)


def standby_placement(
    members: Mapping[str, MemberInfo], stateful_tasks: Iterable[TaskId], replicas: int
) -> dict[TaskId, list[str]]:
    """Task -> the client ids that should keep its standbys (see the module docstring)."""
    ring = sorted(members)
    if replicas <= 0 or len(ring) < 2:
        return {}
    owner_of: dict[TaskId, str] = {}
    for pid in ring:  # sorted: a task briefly published by two clients goes to the first
        for task in members[pid].active:
            owner_of.setdefault(task, pid)
    placement: dict[TaskId, list[str]] = {}
    for task in sorted(set(stateful_tasks)):
        owner = owner_of.get(task)
        start = ring.index(owner) + 1 if owner is not None else _anchor(task, ring)
        chosen: list[str] = []
        for step in range(len(ring)):
            pid = ring[(start + step) % len(ring)]
            if pid != owner and pid not in chosen:
                chosen.append(pid)
            if len(chosen) == replicas:
                break
        placement[task] = chosen
    return placement


def standby_tasks_of(
    me: str,
    members: Mapping[str, MemberInfo],
    stateful_tasks: Iterable[TaskId],
    replicas: int,
    local_active: Iterable[TaskId] = (),
) -> set[TaskId]:
    """The standby tasks client ``me`` should keep (never one of its own active tasks)."""
    if me not in members:
        return set()
    mine = {
        task
        for task, holders in standby_placement(members, stateful_tasks, replicas).items()
        if me in holders
    }
    return mine - set(local_active)
