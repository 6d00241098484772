"""``StateQueryRequest``: which store, which query, which partitions, how fresh.

Built fluently as in Kafka Streams::

    request = (
        StateQueryRequest.in_store("counts")
        .with_query(KeyQuery.with_key("alice"))
        .with_partitions({2})            # default: every partition hosted here
        .with_position_bound(bound)      # default: unbounded
        .require_active()                # default: standbys (and restoring tasks) may answer
    )

Each call returns a new request; a request is an immutable value that can be reused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from platform_streams.query.position import PositionBound
from platform_streams.query.queries import KeyQuery, Query

__all__ = ["StateQueryRequest"]

_UNBOUNDED = PositionBound.unbounded()


@dataclass(frozen=True, slots=True)
class StateQueryRequest:
    """A query addressed to one store (see the module docstring)."""

    store_name: str
    query: Query | None = None
    partitions: frozenset[int] | None = None
    position_bound: PositionBound = _UNBOUNDED
    active_only: bool = False
    execution_info: bool = False

    @classmethod
    def in_store(cls, name: str) -> StateQueryRequest:
        if not name:
            raise ValueError("a store name is required")
        return cls(name)

    def with_query(self, query: Query) -> StateQueryRequest:
        if not isinstance(query, Query):
            raise TypeError(f"expected a Query, got {type(query).__name__}")
        return replace(self, query=query)

    def with_partitions(self, partitions: set[int] | frozenset[int] | list[int]) -> StateQueryRequest:
        return replace(self, partitions=frozenset(int(p) for p in partitions))

    def with_all_partitions(self) -> StateQueryRequest:
        return replace(self, partitions=None)

    def with_position_bound(self, bound: PositionBound) -> StateQueryRequest:
        return replace(self, position_bound=bound)

    def require_active(self) -> StateQueryRequest:
        """Only active, running tasks answer (no standbys, no task that is still restoring)."""
        return replace(self, active_only=True)

    def enable_execution_info(self) -> StateQueryRequest:
        """Each partition result then says which task and store answered and how long it took."""
        return replace(self, execution_info=True)

    def is_all_partitions(self) -> bool:
        return self.partitions is None

    def is_key_query(self) -> bool:
        return isinstance(self.query, KeyQuery)
