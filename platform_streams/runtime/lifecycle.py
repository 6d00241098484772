"""Kafka Streams' client lifecycle states and their legal transitions."""

from __future__ import annotations

import enum


class State(enum.Enum):
    """``KafkaStreams.State``: CREATED -> REBALANCING <-> RUNNING -> PENDING_SHUTDOWN -> NOT_RUNNING,
    or -> PENDING_ERROR -> ERROR when a worker fails and the client shuts down."""

    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    PENDING_ERROR = "PENDING_ERROR"
    ERROR = "ERROR"

    def is_running_or_rebalancing(self) -> bool:
        return self in (State.RUNNING, State.REBALANCING)

    def can_transition_to(self, new: State) -> bool:
        return new in _TRANSITIONS[self]


_TRANSITIONS: dict[State, frozenset[State]] = {
    State.CREATED: frozenset({State.REBALANCING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.REBALANCING: frozenset(
        {State.RUNNING, State.REBALANCING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}
    ),
    State.RUNNING: frozenset({State.REBALANCING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.PENDING_SHUTDOWN: frozenset({State.NOT_RUNNING}),
    State.NOT_RUNNING: frozenset(),
    State.PENDING_ERROR: frozenset({State.ERROR}),
    State.ERROR: frozenset(),
}


class StreamsUncaughtExceptionResponse(enum.Enum):
    """What to do when a worker dies of an exception (Kafka Streams' KIP-671)."""

    REPLACE_WORKER = "REPLACE_WORKER"
    SHUTDOWN_CLIENT = "SHUTDOWN_CLIENT"
    SHUTDOWN_APPLICATION = "SHUTDOWN_APPLICATION"
