"""Platform operations on an application's Kafka resources, safe to run against production.

Triggered by the platform (the ``platform-streams topics|reset`` commands, Dagster jobs),
never by the running application itself:

* internal topic lifecycle -- :func:`plan_internal_topics`, :func:`create_internal_topics`,
  :func:`validate_internal_topics`, :func:`delete_internal_topics` (deletes only topics
  the application owns);
* :func:`reset_application` -- ``kafka-streams-application-reset`` plus local state cleanup,
  with the reset tool's offset scenarios (:class:`OffsetScenario`).

Each returns a structured result (:mod:`platform_streams.ops.results`) with ``to_dict()``
and ``summary()``; a refusal raises :class:`OperationRefusedError` carrying the result.
"""

from platform_streams.ops.offsets import OffsetScenario, parse_datetime_ms, parse_duration, parse_reset_plan
from platform_streams.ops.reset import ResetOptions, reset_application
from platform_streams.ops.results import (
    InternalTopicStatus,
    LocalStateAction,
    OperationRefusedError,
    OpsResult,
    PartitionOffsetChange,
    RefusedTopic,
    ResetResult,
    TopicIssue,
    TopicsResult,
)
from platform_streams.ops.topics import (
    create_internal_topics,
    delete_internal_topics,
    plan_internal_topics,
    validate_internal_topics,
)

__all__ = [
    "InternalTopicStatus",
    "LocalStateAction",
    "OffsetScenario",
    "OperationRefusedError",
    "OpsResult",
    "PartitionOffsetChange",
    "RefusedTopic",
    "ResetOptions",
    "ResetResult",
    "TopicIssue",
    "TopicsResult",
    "create_internal_topics",
    "delete_internal_topics",
    "parse_datetime_ms",
    "parse_duration",
    "parse_reset_plan",
    "plan_internal_topics",
    "reset_application",
    "validate_internal_topics",
]
