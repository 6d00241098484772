"""Which application a topic named like an internal topic belongs to.

Internal topics are named ``<application.id>-<name>``. When one application's id extends
another's (``orders`` and ``orders-v2``), the names of the longer one parse for both:
``orders-v2-counts-changelog`` is ``orders`` + ``v2-counts-changelog`` as much as
``orders-v2`` + ``counts-changelog``. Kafka's reset tool decides by name alone
(``StreamsResetter.isInferredInternalTopic``: the ``<application.id>-`` prefix and an
internal suffix, ``matchesInternalTopicFormat``), so resetting ``orders`` deletes the
changelogs of a running ``orders-v2``. Here a topic belongs to application ``A`` only if

1. it **parses** as ``<A>-<internal name>`` (:func:`parses_as_internal`): one of ``A``'s
   coordination topics exactly, or a non-empty name ending in one of Kafka's internal
   suffixes (``-changelog``, ``-repartition``, the foreign-key join's
   ``-subscription-registration-topic`` / ``-subscription-response-topic`` and their
   generated ``KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-<n>-topic`` forms); and
2. **no longer application id on the cluster claims it** (:class:`OtherApplications`): an
   id ``C`` = ``<A>-...`` with which the topic parses too, where ``C`` is a consumer group
   the broker lists (live, or only committed offsets, as a stopped application leaves
   them), a group the broker describes as active (some brokers list only groups with committed
   offsets), a streams group in any state (librdkafka lists none: it is described by id), or
   the id of an existing coordination topic (``C-control``, ``C-metadata``,
   ``C-members``: only a run of this runtime names a topic so).

Evidence can be missing -- an application that stopped long ago, whose group's offsets
expired and that never ran on this runtime, leaves neither -- which is why ``--dry-run``
lists every topic a reset would delete.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from platform_streams.kafka import KafkaAdmin
from platform_streams.query.directory import metadata_topic
from platform_streams.runtime.membership.control_channel import control_topic_name
from platform_streams.runtime.task_assignment.protocol import members_topic_name

__all__ = [
    "INTERNAL_SUFFIXES",
    "OtherApplications",
    "coordination_names",
    "find_other_applications",
    "internal_name_rule",
    "parses_as_internal",
]

#: Kafka's internal topic suffixes (StreamsResetter.matchesInternalTopicFormat).
INTERNAL_SUFFIXES = (
    "-changelog",
    "-repartition",
    "-subscription-registration-topic",
    "-subscription-response-topic",
)
# the foreign-key join's topics when the join is not named (KTABLE-FK-JOIN-... + index),
# after an optional prefix as in Kafka's pattern
_GENERATED_FK_TOPIC = re.compile(r"(?:.+-)?KTABLE-FK-JOIN-SUBSCRIPTION-(?:REGISTRATION|RESPONSE)-\d+-topic")


def coordination_names(application_id: str) -> tuple[str, str, str]:
    """The runtime's coordination topics of ``application_id``: control, metadata, members."""
    return (
        control_topic_name(application_id),
        metadata_topic(application_id),
        members_topic_name(application_id),
    )


def _internal_name(name: str) -> bool:
    if _GENERATED_FK_TOPIC.fullmatch(name):
        return True
    return any(name.endswith(suffix) and len(name) > len(suffix) for suffix in INTERNAL_SUFFIXES)


def parses_as_internal(topic: str, application_id: str) -> bool:
    """True if ``topic`` is named like an internal or coordination topic of ``application_id``."""
    prefix = f"{application_id}-"
    if not topic.startswith(prefix):
        return False
    return topic in coordination_names(application_id) or _internal_name(topic[len(prefix) :])


def internal_name_rule(application_id: str) -> str:
    """The naming rule, for messages."""
    names = ", ".join(f"'{t}'" for t in coordination_names(application_id))
    suffixes = ", ".join(INTERNAL_SUFFIXES)
    return f"'{application_id}-<name>' ending in {suffixes} (or a generated foreign-key join's), or {names}"


def longer_ids(topic: str, application_id: str) -> list[str]:
    """Ids that extend ``application_id`` and with which ``topic`` parses too, longest first."""
    found = []
    cut = topic.find("-", len(application_id) + 1)
    while cut != -1:
        if parses_as_internal(topic, topic[:cut]):
            found.append(topic[:cut])
        cut = topic.find("-", cut + 1)
    return found[::-1]


@dataclass(frozen=True)
class OtherApplications:
    """The applications on the cluster whose ids extend ``application_id``, and how we know."""

    application_id: str
    evidence: dict[str, str] = field(default_factory=dict)
    """``{application id: why we know it exists}``."""

    def claimant(self, topic: str) -> str | None:
        """The longest of them with which ``topic`` parses as an internal topic too, or None."""
        return next((c for c in longer_ids(topic, self.application_id) if c in self.evidence), None)

    def claim(self, topic: str) -> str | None:
        """Why ``topic`` is another application's, for a message; None if it is not."""
        other = self.claimant(topic)
        if other is None:
            return None
        return f"it belongs to application {other!r} ({self.evidence[other]})"


def application_evidence(
    admin: KafkaAdmin, application_id: str, existing: Iterable[str], timeout_s: float
) -> str | None:
    """Why ``application_id`` is a running or ran application here: its coordination topic
    exists, its consumer group is active or it has a streams group. None if none of these (a
    group's committed offsets alone do not say: the reset's own backup group has only those)."""
    present = set(existing)
    topic = next((t for t in coordination_names(application_id) if t in present), None)
    if topic is not None:
        return f"its topic {topic!r} exists"
    group = admin.describe_group(application_id, timeout=timeout_s)
    if group.group_type == "streams":
        return f"its streams group {application_id!r} exists"
    if group.active:
        return f"its consumer group {application_id!r} is active"
    return None


def find_other_applications(
    admin: KafkaAdmin, application_id: str, existing: Iterable[str], timeout_s: float = 10.0
) -> OtherApplications:
    """Every application whose id extends ``application_id`` and that claims one of the
    ``existing`` topics named like internal topics of ``application_id`` (module docstring)."""
    prefixed = [t for t in existing if t.startswith(f"{application_id}-")]
    evidence: dict[str, str] = {}
    for topic in prefixed:  # another's coordination topics never parse as ours: all prefixed ones
        for other in longer_ids(topic, application_id):
            if topic in coordination_names(other):
                evidence.setdefault(other, f"its topic {topic!r} exists")
    ours = [t for t in prefixed if parses_as_internal(t, application_id)]
    candidates = dict.fromkeys(c for t in ours for c in longer_ids(t, application_id))
    listed = set(admin.list_group_ids(timeout=timeout_s))
    for other in candidates:
        if other in listed:
            evidence.setdefault(other, f"its consumer group {other!r} exists")
    for other in candidates:
        if other in evidence:
            continue
        group = admin.describe_group(other, timeout=timeout_s)
        if group.group_type == "streams":
            evidence[other] = f"its streams group {other!r} exists"
        elif group.active:
            evidence[other] = f"its consumer group {other!r} is active"
    return OtherApplications(application_id, evidence)
