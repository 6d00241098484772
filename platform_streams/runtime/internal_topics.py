"""Make sure an application's internal topics exist with the right size before it runs.

Kafka Streams' leader creates repartition and changelog topics during the first
rebalance; librdkafka has no pluggable assignor, so here every instance does it at
start-up, idempotently, before joining the group. Auto-creation is disabled on every
client, so a topic exists only because we created it, with our configs.
"""

from __future__ import annotations

import logging

from platform_streams.config import StreamsConfig
from platform_streams.errors import MissingSinkTopicError, StreamsConfigError, TopologyError
from platform_streams.kafka import KafkaAdmin, TopicSpec
from platform_streams.topology.compiler import TopologyPlan

log = logging.getLogger(__name__)


def internal_topic_specs(plan: TopologyPlan, config: StreamsConfig, admin: KafkaAdmin) -> list[TopicSpec]:
    """The internal topics ``plan`` needs, sized from the user topics that exist now."""
    users = plan.external_source_topics() + plan.global_source_topics()
    counts = admin.partition_counts(users)
    sizes = plan.resolve_partitions(counts)
    app = config.application_id
    return [
        TopicSpec(
            plan.physical_topic(name, app),
            sizes[name],
            config.replication_factor,
            dict(topic.config),
        )
        for name, topic in sorted(plan.internal_topics.items())
    ]


def prepare_topics(plan: TopologyPlan, config: StreamsConfig) -> dict[str, int]:
    """Create missing internal topics, check existing ones; return partition counts by topic.

    Raises :class:`MissingSourceTopicError` (:class:`MissingSinkTopicError`) when a user
    source (sink) topic is absent and :class:`TopologyError` when an existing internal topic
    has the wrong partition count (it would silently break co-partitioning).
    """
    with KafkaAdmin(config.admin_configs()) as admin:
        specs = internal_topic_specs(plan, config, admin)
        sinks = plan.external_sink_topics()
        missing_sinks = [t for t, n in admin.partition_counts(sinks).items() if not n]
        if missing_sinks:
            # checked like source topics (before anything is created): a missing sink shows
            # otherwise only when its first records time out, long after the app looked RUNNING
            raise MissingSinkTopicError(missing_sinks)
        existing = admin.partition_counts([s.name for s in specs])
        wrong = {
            s.name: (existing[s.name], s.num_partitions)
            for s in specs
            if existing.get(s.name) is not None and existing[s.name] != s.num_partitions
        }
        if wrong:
            detail = ", ".join(
                f"{t} has {have} partitions, needs {need}" for t, (have, need) in wrong.items()
            )
            raise TopologyError(
                f"internal topics have the wrong partition count: {detail}; reset the application"
            )
        missing = [s for s in specs if existing.get(s.name) is None]
        if missing:
            result = admin.create_topics(missing)
            log.info("internal topics: %s", ", ".join(f"{t} {r}" for t, r in sorted(result.items())))
        users = plan.external_source_topics() + plan.global_source_topics() + plan.external_sink_topics()
        dead_letter = config.errors_dead_letter_queue_topic_name
        if dead_letter:
            users.append(dead_letter)
        counts = {t: n for t, n in admin.partition_counts(users).items() if n}
        if dead_letter and dead_letter not in counts:
            # Kafka Streams (KIP-1034) does not create it either; failing now beats losing
            # the first poison record to a send that can never succeed.
            raise StreamsConfigError(
                f"errors_dead_letter_queue_topic_name: topic {dead_letter!r} does not exist; create it first"
            )
    counts.update({s.name: s.num_partitions for s in specs})
    return counts
