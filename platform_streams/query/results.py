"""Query results per store partition (Kafka Streams' ``QueryResult`` / ``StateQueryResult``).

A query runs against every partition of a store the instance hosts (or the partitions
asked for); each partition answers on its own, succeeding with a result and the position
it reflected, or failing with a :class:`FailureReason` saying whether asking again
elsewhere or later can help.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from platform_streams.query.position import Position

__all__ = ["FailureReason", "QueryResult", "StateQueryResult"]


class FailureReason(enum.Enum):
    """Why one partition could not answer (Kafka Streams' ``FailureReason``)."""

    #: The query asked for an active task; this instance hosts the partition as a standby,
    #: or the active task is still restoring.
    NOT_ACTIVE = "NOT_ACTIVE"
    #: The store has not yet reached the query's position bound: retry, or ask the active.
    NOT_UP_TO_BOUND = "NOT_UP_TO_BOUND"
    #: The partition exists but is not hosted here (ask the owner: query_metadata_for_key).
    NOT_PRESENT = "NOT_PRESENT"
    #: The partition does not exist at all (beyond the store's partition count).
    DOES_NOT_EXIST = "DOES_NOT_EXIST"
    #: This kind of store cannot answer this kind of query.
    UNKNOWN_QUERY_TYPE = "UNKNOWN_QUERY_TYPE"
    #: The store raised while answering (the message says what).
    STORE_EXCEPTION = "STORE_EXCEPTION"


@dataclass(slots=True)
class QueryResult:
    """One partition's answer: a result with its position, or a failure with a reason."""

    result: Any = None
    failure_reason: FailureReason | None = None
    failure_message: str = ""
    position: Position = field(default_factory=Position)
    execution_info: list[str] = field(default_factory=list)

    @classmethod
    def for_result(cls, result: Any, position: Position | None = None) -> QueryResult:
        return cls(result=result, position=position or Position())

    @classmethod
    def for_failure(cls, reason: FailureReason, message: str) -> QueryResult:
        return cls(failure_reason=reason, failure_message=message)

    def is_success(self) -> bool:
        return self.failure_reason is None

    def is_failure(self) -> bool:
        return self.failure_reason is not None

    def get_result(self) -> Any:
        """The result; raises if this partition failed (check :meth:`is_success` first)."""
        if self.failure_reason is not None:
            reason = self.failure_reason.value
            raise ValueError(f"cannot get the result of a failed query ({reason}: {self.failure_message})")
        return self.result

    def get_position(self) -> Position:
        return self.position


@dataclass(slots=True)
class StateQueryResult:
    """Every partition's :class:`QueryResult`, keyed by partition number."""

    partition_results: dict[int, QueryResult] = field(default_factory=dict)

    def add_result(self, partition: int, result: QueryResult) -> None:
        self.partition_results[partition] = result

    def get_partition_results(self) -> dict[int, QueryResult]:
        return dict(self.partition_results)

    def get_only_partition_result(self) -> QueryResult | None:
        """The one successful partition result that holds a value (a key query's answer), or None.

        As in Kafka Streams, successful results whose value is None (the key lives in
        another partition) are ignored; raises ValueError if several partitions hold a value.
        """
        ok = [r for r in self.partition_results.values() if r.is_success() and r.result is not None]
        if len(ok) > 1:
            raise ValueError(f"{len(ok)} partitions answered; expected one")
        return ok[0] if ok else None

    def get_position(self) -> Position:
        """The merged position of every successful partition (feed it to the next bound)."""
        merged = Position()
        for result in self.partition_results.values():
            if result.is_success():
                merged = merged.merge(result.position)
        return merged
