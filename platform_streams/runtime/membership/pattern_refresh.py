"""Regex source subscriptions at run time: which topics the patterns match, and new ones later.

Kafka Streams subscribes its consumer to the patterns; the consumer's metadata refresh
(``metadata.max.age.ms``, 5 minutes by default) finds a new matching topic and the rebalance
that follows gives its partitions to tasks. This engine assigns partitions itself (the
range assignor over the plan's topics, or the control-topic placement), so the plan must
name the topics: :func:`subscribe_patterns` lists the broker's topics and gives every
pattern source the ones it matches (``TopologyPlan.subscribe``, in place: workers, the
assignment coordinator and the add-ons hold that plan). :class:`PatternRefresher` repeats
the listing every ``metadata.max.age.ms`` of ``consumer_config``; when the matched set
changed, the caller's ``on_change`` re-sizes and restarts the workers, whose new
subscription is the rebalance Kafka's consumer would have started. Tasks stay one per
sub-topology partition, so a new topic adds its partitions to the existing tasks (and new
tasks if it has more partitions).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaAdmin
from platform_streams.runtime.membership.control_channel import control_topic_name
from platform_streams.runtime.task_assignment.protocol import members_topic_name
from platform_streams.topology.compiler import TopologyPlan

log = logging.getLogger(__name__)

#: Kafka's consumer default of ``metadata.max.age.ms``
DEFAULT_METADATA_MAX_AGE_MS = 300_000


def uses_patterns(plan: TopologyPlan) -> bool:
    return any(s.pattern is not None for sub in plan.subtopologies for s in sub.sources)


def subscribe_patterns(plan: TopologyPlan, config: StreamsConfig) -> bool:
    """Give the plan's pattern sources the broker's matching topics; True if any changed."""
    with KafkaAdmin(config.admin_configs()) as admin:
        topics = admin.list_topics()
    # this application's own topics (internal, control, members) are never an input
    app = config.application_id
    own = {plan.physical_topic(t, app) for t in plan.internal_topics}
    own.update((control_topic_name(app), members_topic_name(app)))
    changed = plan.subscribe(t for t in topics if t not in own)
    if changed:
        log.info("pattern sources now read %s", plan.external_source_topics())
    return changed


def metadata_max_age_s(config: StreamsConfig) -> float:
    raw = config.consumer_configs().get("metadata.max.age.ms", DEFAULT_METADATA_MAX_AGE_MS)
    return max(0.1, int(raw) / 1000.0)


class PatternRefresher(threading.Thread):
    """Every ``metadata.max.age.ms``: list the topics; on a change call ``on_change``."""

    def __init__(self, plan: TopologyPlan, config: StreamsConfig, on_change: Callable[[], None]) -> None:
        super().__init__(name=f"{config.effective_client_id}-pattern-refresh", daemon=True)
        self.plan, self.config, self._on_change = plan, config, on_change
        self._stop_event = threading.Event()
        self.refreshes = 0

    def run(self) -> None:
        interval = metadata_max_age_s(self.config)
        while not self._stop_event.wait(interval):
            try:
                changed = subscribe_patterns(self.plan, self.config)
            except Exception as exc:  # a failed listing is retried at the next refresh
                log.warning("pattern subscription: listing topics failed (%s); tried again later", exc)
                continue
            self.refreshes += 1
            if changed and not self._stop_event.is_set():
                try:
                    self._on_change()
                except Exception:
                    log.exception("pattern subscription: applying the new topics failed")

    def stop(self) -> None:
        self._stop_event.set()
