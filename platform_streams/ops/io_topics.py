"""Create an application's missing input and output topics: a development helper.

``platform-streams topics create-io APP --partitions N --topic-config k=v`` creates the
source, sink and global-source topics of the topology -- and the dead-letter topic
``errors.dead.letter.queue.topic.name`` when one is set -- that do not exist yet, so a
developer can start an application on an empty broker (the runtime never creates user
topics: a missing source topic fails ``start()``, as in Kafka Streams).

Why it is safe to point at a shared cluster: it only ever *creates missing* topics. An
existing topic is reported with its partition count and left exactly as it is (no
config change, no partition change, no deletion), and a topic that is not an input or
output of the topology is refused as a whole (nothing is created). In production, user
topics belong to whoever owns the data and are created by their own tooling.

Partition counts: ``partitions`` (default 1), except that a missing topic which must be
co-partitioned with an existing one (a join) gets the existing topic's count, so the
application can start; a warning says when that overrides ``partitions``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Literal

from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaAdmin, TopicSpec
from platform_streams.ops.results import (
    InternalTopicStatus,
    OperationRefusedError,
    RefusedTopic,
    TopicsResult,
)
from platform_streams.ops.topics import AppLike, admin_for, as_plan
from platform_streams.topology.compiler import TopologyPlan

__all__ = ["create_io_topics", "io_topic_kinds"]

log = logging.getLogger(__name__)

IoKind = Literal["source", "sink", "global-source", "dead-letter"]


def io_topic_kinds(plan: TopologyPlan, config: StreamsConfig) -> dict[str, IoKind]:
    """The application's user topics: ``{topic: "source" | "sink" | "global-source" | "dead-letter"}``."""
    kinds: dict[str, IoKind] = {}
    if config.errors_dead_letter_queue_topic_name is not None:
        kinds[config.errors_dead_letter_queue_topic_name] = "dead-letter"
    kinds.update({t: "sink" for t in plan.external_sink_topics()})
    kinds.update({t: "global-source" for t in plan.global_source_topics()})
    kinds.update({t: "source" for t in plan.external_source_topics()})
    return kinds


def _partitions_for(
    topic: str, plan: TopologyPlan, existing: Mapping[str, int], requested: int
) -> tuple[int, str | None]:
    """``requested``, or the count of an existing topic ``topic`` must be co-partitioned with."""
    for group in plan.topology.copartition_groups:
        if topic not in group:
            continue
        present = sorted((t, existing[t]) for t in group if t in existing)
        if present:
            other, count = present[0]
            note = None if count == requested else f"{topic}: {count} partitions like co-partitioned {other}"
            return count, note
    return requested, None


def create_io_topics(
    app: AppLike,
    config: StreamsConfig,
    *,
    partitions: int = 1,
    topic_config: Mapping[str, str] | None = None,
    topics: Sequence[str] | None = None,
    dry_run: bool = False,
    admin: KafkaAdmin | None = None,
) -> TopicsResult:
    """Create the missing input/output topics of the application (all, or ``topics``).

    Raises :class:`OperationRefusedError` (creating nothing) when a requested topic is not
    an input or output topic of the topology. See the module docstring.
    """
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    plan = as_plan(app)
    kinds = io_topic_kinds(plan, config)
    result = TopicsResult("create-io", config.application_id, dry_run=dry_run)
    wanted = sorted(kinds) if topics is None else list(dict.fromkeys(topics))
    result.refused = [
        RefusedTopic(t, "not an input or output topic of the application") for t in wanted if t not in kinds
    ]
    if result.refused:
        names = ", ".join(r.topic for r in result.refused)
        raise OperationRefusedError(
            f"refusing to create topics the application does not use: {names}", result
        )
    configs = dict(topic_config or {})
    client, owned = admin_for(config, admin)
    try:
        existing = client.list_topics()
        specs: list[TopicSpec] = []
        for topic in (t for t in wanted if t not in existing):
            count, note = _partitions_for(topic, plan, existing, partitions)
            if note is not None:
                result.warnings.append(note)
            specs.append(TopicSpec(topic, count, config.replication_factor, dict(configs)))
        created = client.create_topics(specs) if specs and not dry_run else {}
    finally:
        if owned:
            client.close()
    by_name = {s.name: s for s in specs}
    for topic in wanted:
        spec = by_name.get(topic)
        if spec is None:
            status = InternalTopicStatus(topic, kinds[topic], "exists", actual_partitions=existing[topic])
        else:
            verb = "would_create" if dry_run else created.get(topic, "created")
            status = InternalTopicStatus(topic, kinds[topic], verb, spec.num_partitions, dict(spec.config))
        result.topics.append(status)
    log.info("create-io for %s: %s", config.application_id, {t.topic: t.status for t in result.topics})
    return result
