"""Standby placement: least loaded clients, or spread over racks/zones by client tags.

Translated from Kafka Streams' ``DefaultStandbyTaskAssignor`` and
``ClientTagAwareStandbyTaskAssignor`` (KIP-708). A standby never goes to a client that
already has the task (active or standby). With ``rack_aware_assignment_tags`` (and clients
that report those tags: ``client_tags``, or ``rack`` from ``client.rack``), a task's
standbys go first to clients whose value differs, on every tag dimension that still has
an unused value, from the clients already holding the task; standbys that cannot be spread
that way fall back to the least loaded clients, as without tags.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.task_assignment.client_state import (
    AssignmentConfigs,
    ClientState,
    ConstrainedPrioritySet,
)

__all__ = ["assign_standby_tasks", "standby_movement_allowed", "tag_aware_enabled"]

log = logging.getLogger(__name__)


def tag_aware_enabled(clients: Mapping[str, ClientState], tags: Iterable[str]) -> bool:
    """Kafka uses the tag-aware assignor when tags are configured and some client has them."""
    keys = set(tags)
    return bool(keys) and any(keys & set(state.tags) for state in clients.values())


def _least_loaded_queue(clients: Mapping[str, ClientState]) -> ConstrainedPrioritySet:
    queue = ConstrainedPrioritySet(
        lambda c, t: not clients[c].has_assigned_task(t), lambda c: clients[c].assigned_task_load()
    )
    queue.offer_all(clients)
    return queue


def _assign_least_loaded(
    clients: Mapping[str, ClientState], task: TaskId, count: int, queue: ConstrainedPrioritySet
) -> int:
    """Give ``task`` up to ``count`` standbys on the least loaded clients; returns how many."""
    polled: list[str] = []
    for _ in range(count):
        client = queue.poll(task)
        if client is None:
            break
        clients[client].assign_standby(task)
        polled.append(client)
    queue.offer_all(polled)
    return len(polled)


def _owner(clients: Mapping[str, ClientState], task: TaskId) -> str | None:
    return next((c for c, s in sorted(clients.items()) if task in s.active), None)


def assign_standby_tasks(
    clients: Mapping[str, ClientState], stateful_tasks: Iterable[TaskId], configs: AssignmentConfigs
) -> None:
    """Place ``num_standby_replicas`` standbys of every stateful task (see the module docstring)."""
    replicas = configs.num_standby_replicas
    if replicas <= 0:
        return
    tags = tuple(configs.rack_aware_assignment_tags)
    tag_aware = tag_aware_enabled(clients, tags)
    values: dict[str, set[str]] = {k: {s.tags[k] for s in clients.values() if k in s.tags} for k in tags}
    queue = _least_loaded_queue(clients)
    pending: dict[TaskId, int] = {}
    for task in sorted(set(stateful_tasks)):
        remaining = replicas
        if tag_aware:
            remaining -= _assign_on_other_tags(clients, task, replicas, tags, values, queue)
            if remaining > 0:
                pending[task] = remaining
            continue
        remaining -= _assign_least_loaded(clients, task, remaining, queue)
        if remaining > 0:
            _warn_short(task, remaining, replicas)
    for task, remaining in sorted(pending.items()):
        left = remaining - _assign_least_loaded(clients, task, remaining, queue)
        if left > 0:
            _warn_short(task, left, replicas)


def standby_movement_allowed(
    clients: Mapping[str, ClientState], tags: Iterable[str], source: str, destination: str, task: TaskId
) -> bool:
    """Kafka's ``ClientTagAwareStandbyTaskAssignor.isAllowedTaskMovement``: moving ``task``'s
    standby from ``source`` to ``destination`` leaves at least as many distinct tag values
    (over ``tags``) among the task's holders as before."""
    keys = tuple(tags)

    def tag_set(client: str) -> set[tuple[str, str]]:
        own = clients[client].tags
        return {(k, own[k]) for k in keys if k in own}

    others: set[tuple[str, str]] = set()
    for client, state in clients.items():
        if client not in (source, destination) and state.has_assigned_task(task):
            others |= tag_set(client)
    return len(others | tag_set(destination)) >= len(others | tag_set(source))


def _assign_on_other_tags(
    clients: Mapping[str, ClientState],
    task: TaskId,
    replicas: int,
    tags: tuple[str, ...],
    values: Mapping[str, set[str]],
    queue: ConstrainedPrioritySet,
) -> int:
    """Standbys on clients that differ from every holder on every dimension not exhausted yet."""
    owner = _owner(clients, task)
    used: list[str] = [owner] if owner is not None else []
    assigned = 0
    polled: list[str] = []
    while assigned < replicas:
        excluded: set[str] = set()
        for key in tags:
            used_values = {clients[c].tags.get(key) for c in used} - {None}
            if len(values.get(key, set())) <= len(used_values):
                continue  # every value of this dimension is used already: it cannot separate
            excluded |= {c for c, s in clients.items() if s.tags.get(key) in used_values}
        client = queue.poll(task, _outside(excluded))
        if client is None:
            break
        clients[client].assign_standby(task)
        polled.append(client)
        used.append(client)
        assigned += 1
    queue.offer_all(polled)
    return assigned


def _outside(excluded: set[str]) -> Callable[[str], bool]:
    frozen = frozenset(excluded)
    return lambda c: c not in frozen


def _warn_short(task: TaskId, missing: int, replicas: int) -> None:
    log.warning(
        "unable to assign %d of %d standby tasks for task %s: not enough clients; add instances "
        "to keep the requested number of standby replicas",
        missing,
        replicas,
        task,
    )
