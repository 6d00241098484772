"""The Helm chart's KEDA values for an application: the topics its group reads, sized.

KEDA scales on the lag of the consumer group (the application id) per topic. The group reads
the topology's input topics and its repartition topics -- the topics ``topics plan`` knows
-- so this reads them from the plan and the broker rather than asking the user to copy
names: ``platform-streams topics keda MODULE:FACTORY`` prints a values block for
``helm upgrade -f``. ``partitions`` is the largest partition count among those topics:
KEDA's Kafka scaler gives no pod beyond it any partition, and the chart refuses a
``maxReplicas`` above it.
"""

from __future__ import annotations

from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.errors import StreamsConfigError
from platform_streams.kafka import KafkaAdmin
from platform_streams.ops.topics import AppLike, admin_for, as_plan
from platform_streams.runtime.internal_topics import internal_topic_specs

__all__ = ["keda_values"]


def keda_values(app: AppLike, config: StreamsConfig, *, admin: KafkaAdmin | None = None) -> dict[str, Any]:
    """``{"autoscaling": {"keda": {...}}}`` for the chart: enabled, topics, partitions,
    minReplicas 1 and maxReplicas = partitions. The input topics must exist (their
    partition counts size everything)."""
    plan = as_plan(app)
    client, owned = admin_for(config, admin)
    try:
        inputs = plan.external_source_topics()
        counts = client.partition_counts(inputs)
        missing = [t for t in inputs if not counts.get(t)]
        if missing:
            raise StreamsConfigError(f"input topics do not exist (create them first): {missing}")
        repartition = {
            spec.name: spec.num_partitions
            for spec in internal_topic_specs(plan, config, client)
            if spec.name.endswith("-repartition")
        }
    finally:
        if owned:
            client.close()
    sizes = {**{t: int(counts[t] or 0) for t in inputs}, **repartition}
    partitions = max(sizes.values())
    return {
        "autoscaling": {
            "keda": {
                "enabled": True,
                "topics": list(sizes),
                "partitions": partitions,
                "minReplicas": 1,
                "maxReplicas": partitions,
            }
        }
    }
