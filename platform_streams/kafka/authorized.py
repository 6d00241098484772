"""What the connected principal may do to named topics and groups (KIP-430's authorized operations).

Why a tool asks before it acts: a principal without DESCRIBE on a topic does not see it
at all -- the topic list leaves it out as if it did not exist -- so a tool working from
that list would skip it and report success; and a tool that learns of a refusal half-way
(offsets moved, then the topic deletion refused) has already changed something. So a
tool about to change the cluster first describes the topics and groups it will touch
with ``include_authorized_operations`` and refuses, with one line naming each resource
and operation, before changing anything.

The check runs only on an authenticated connection (``security.protocol`` SSL or SASL_*):
a PLAINTEXT cluster has no principals to tell apart, and naming topics in a metadata
request could auto-create them on brokers that ignore the request's "do not create" flag
(Tansu). A broker that returns no authorized operations makes the check answer "nothing
missing" as well: the tool then runs as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException, TopicCollection

from platform_streams.kafka.admin import KafkaAdmin
from platform_streams.kafka.errors import as_kafka_error, to_broker_error

__all__ = ["missing_operations", "not_allowed"]

_DENIED = {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED}
_ABSENT = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError.GROUP_ID_NOT_FOUND}


def missing_operations(
    admin: KafkaAdmin,
    topics: Mapping[str, Iterable[str]],
    groups: Mapping[str, Iterable[str]],
    timeout_s: float = 10.0,
) -> list[str]:
    """``"DELETE on topic 'x'"`` for every wanted operation the principal lacks, sorted.

    ``topics``/``groups`` map a name to the operations (``READ``, ``DELETE``, ...) the
    tool will use on it. A resource that does not exist (and that the principal may
    describe) needs nothing; one the broker hides (authorization failed) lacks them all.
    """
    if str(admin.conf.get("security.protocol", "plaintext")).lower() == "plaintext":
        return []
    client = admin._admin()
    missing: list[str] = []
    names = sorted(topics)
    if names:
        futures = client.describe_topics(
            TopicCollection(names), include_authorized_operations=True, request_timeout=timeout_s
        )
        for name in names:
            missing += _lacking("topic", name, topics[name], futures[name], timeout_s)
    ids = sorted(groups)
    if ids:
        futures = client.describe_consumer_groups(
            ids, include_authorized_operations=True, request_timeout=timeout_s
        )
        for group in ids:
            missing += _lacking("group", group, groups[group], futures[group], timeout_s)
    return sorted(missing)


def _lacking(kind: str, name: str, wanted: Iterable[str], future: object, timeout_s: float) -> list[str]:
    try:
        found = future.result(timeout_s)  # type: ignore[attr-defined]
    except KafkaException as exc:
        err = as_kafka_error(exc)
        if err is not None and err.code() in _DENIED:
            return [f"{op} on {kind} {name!r}" for op in wanted]
        if err is not None and err.code() in _ABSENT:
            return []
        raise to_broker_error(exc, f"describe {kind} {name!r}") from exc
    allowed = {getattr(op, "name", str(op)) for op in (found.authorized_operations or [])}
    if not allowed:  # the broker did not say (no authorizer): nothing known to be missing
        return []
    return [f"{op} on {kind} {name!r}" for op in wanted if op not in allowed]


def not_allowed(missing: Iterable[str], acl_set: str) -> str:
    """The one line a tool refuses with: what is missing, that nothing changed, where the set is."""
    return (
        f"not allowed: {', '.join(missing)}; nothing was changed "
        f"(`platform-streams acls APP --sets {acl_set}` lists the ACLs this needs)"
    )
