"""The ACLs an application and its tools need on a secured cluster, and a check against a cluster.

What Kafka Streams' security guide asks for, narrowed to the operations this runtime makes
(docs/security.md lists every rule and why):

* **the application** -- on topics prefixed ``<application.id>-`` (its repartition,
  changelog and coordination topics): CREATE, READ, WRITE, and optionally DELETE (purging
  consumed repartition records; without it they stay, with a warning); READ on the group
  ``<application.id>``; READ on each input topic, WRITE on each output (and dead-letter)
  topic; under exactly-once WRITE on transactional ids prefixed
  ``<application.id>-`` (the workers' ids are ``<application.id>-<process>-<n>``); READ on
  groups prefixed ``<application.id>-`` (the control channel's reader group and the offsets
  a group repair saves). No
  cluster ACL: since Kafka 3.0 (KIP-679) WRITE on a topic implies IDEMPOTENT_WRITE.
* **reset** -- DELETE on the prefixed topics, READ on the group, DELETE on groups
  prefixed ``<application.id>-`` (the offsets backup), READ on the input topics (log ends
  and times come from their records). READ and DELETE imply DESCRIBE.
* **topic lifecycle** (``topics plan|create|validate|delete``) -- CREATE, DELETE (which
  implies the DESCRIBE that lets the tool see the topics) and DESCRIBE_CONFIGS on the
  prefixed topics, DESCRIBE on the input topics (their partition counts size the
  repartition topics).
* **Spark jobs** (snapshot compaction, backfill) and **Dagster sensors** -- see
  :func:`acl_sets`.

Why the prefix ends with a dash: ACL prefixes match names, not applications, so
``orders`` would also match everything of ``orders-v2``. Even ``orders-`` matches
``orders-v2-...``; :func:`isolation_acls` adds DENY rules for such neighbours (DENY wins
over ALLOW in Kafka's authorizer).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from platform_streams.config import StreamsConfig
from platform_streams.kafka.acl_admin import Acl
from platform_streams.ops.io_topics import io_topic_kinds
from platform_streams.ops.topics import AppLike, as_plan

__all__ = ["AclCheck", "AclSet", "acl_sets", "check_acls", "isolation_acls", "render"]

#: how a reason starts when the ACL is not required: without it a feature is skipped, with a warning
OPTIONAL = "optional:"
#: the names of the sets, in the order they are printed
SETS = ("application", "reset", "topics", "spark", "dagster")


@dataclass(frozen=True)
class AclSet:
    """A named set of ACLs and what each one is for (``acls[i]`` is needed by ``reasons[i]``)."""

    name: str
    title: str
    acls: tuple[Acl, ...]
    reasons: tuple[str, ...]


_Add = Callable[[str, str, str, Iterable[str], str], None]


def _builder(principal: str) -> tuple[list[Acl], list[str], _Add]:
    acls: list[Acl] = []
    reasons: list[str] = []

    def add(resource: str, name: str, pattern: str, operations: Iterable[str], reason: str) -> None:
        for operation in operations:
            acls.append(Acl(principal, resource, name, pattern, operation))
            reasons.append(reason)

    return acls, reasons, add


def acl_sets(app: AppLike, config: StreamsConfig, principal: str | None = None) -> dict[str, AclSet]:
    """Every ACL set of the application ``app`` with ``config``, for ``principal``
    (default ``User:<application.id>``)."""
    plan = as_plan(app)
    app_id = config.application_id
    who = principal or f"User:{app_id}"
    prefix = f"{app_id}-"
    kinds = io_topic_kinds(plan, config)
    inputs = sorted(t for t, k in kinds.items() if k in ("source", "global-source"))
    outputs = sorted(t for t, k in kinds.items() if k in ("sink", "dead-letter"))
    sets: dict[str, AclSet] = {}

    acls, reasons, add = _builder(who)
    add("TOPIC", prefix, "PREFIXED", ("CREATE",), "create internal and coordination topics")
    add("TOPIC", prefix, "PREFIXED", ("READ",), "read repartition topics, restore changelogs")
    add("TOPIC", prefix, "PREFIXED", ("WRITE",), "write repartition, changelog and coordination topics")
    add("TOPIC", prefix, "PREFIXED", ("DELETE",), f"{OPTIONAL} purge consumed repartition records")
    add("GROUP", app_id, "LITERAL", ("READ",), "join the group, commit offsets")
    add("GROUP", prefix, "PREFIXED", ("READ",), "groups <app>-control-reader, <app>-offsets-backup")
    for topic in inputs:
        add("TOPIC", topic, "LITERAL", ("READ",), f"read input topic {topic}")
    for topic in outputs:
        add("TOPIC", topic, "LITERAL", ("WRITE",), f"write output topic {topic}")
    if config.exactly_once:
        # WRITE implies DESCRIBE on a transactional id
        add("TRANSACTIONAL_ID", prefix, "PREFIXED", ("WRITE",), "exactly-once transactions")
    sets["application"] = AclSet("application", "the application's workers", *_frozen(acls, reasons))

    acls, reasons, add = _builder(who)
    add("TOPIC", prefix, "PREFIXED", ("DELETE",), "delete internal topics")
    # READ implies DESCRIBE on the group, DELETE on the backup group: no DESCRIBE rules
    add("GROUP", app_id, "LITERAL", ("READ",), "read and move the group's committed offsets")
    add("GROUP", prefix, "PREFIXED", ("DELETE",), "delete the offsets backup <app>-offsets-backup")
    for topic in inputs:
        add("TOPIC", topic, "LITERAL", ("READ",), f"log end and times of {topic} (read from its records)")
    sets["reset"] = AclSet("reset", "platform-streams reset", *_frozen(acls, reasons))

    acls, reasons, add = _builder(who)
    add("TOPIC", prefix, "PREFIXED", ("CREATE",), "create internal topics")
    # DELETE implies DESCRIBE: without it create, plan and validate cannot see the topics
    add("TOPIC", prefix, "PREFIXED", ("DELETE",), "delete internal topics; gives DESCRIBE (see them)")
    add("TOPIC", prefix, "PREFIXED", ("DESCRIBE_CONFIGS",), "validate: compare topic configs")
    for topic in inputs:
        add("TOPIC", topic, "LITERAL", ("DESCRIBE",), f"partition count of {topic} (repartition topics)")
    title = "platform-streams topics plan|create|validate|delete"
    sets["topics"] = AclSet("topics", title, *_frozen(acls, reasons))

    acls, reasons, add = _builder(who)
    add("TOPIC", prefix, "PREFIXED", ("READ",), "read changelogs (snapshots) and repartition topics")
    add("GROUP", app_id, "LITERAL", ("DESCRIBE",), "committed input offsets (the snapshot's cut)")
    for topic in inputs:
        add("TOPIC", topic, "LITERAL", ("READ",), f"read input topic {topic} (backfill)")
    for topic in outputs:
        add("TOPIC", topic, "LITERAL", ("WRITE",), f"write output topic {topic} (backfill)")
    sets["spark"] = AclSet("spark", "Spark jobs: snapshot compaction, backfill", *_frozen(acls, reasons))

    acls, reasons, add = _builder(who)
    add("GROUP", app_id, "LITERAL", ("DESCRIBE",), "group state and committed offsets (lag)")
    # READ, not DESCRIBE: log ends are found by fetching (the ListOffsets probe needs
    # scratch topics a least-privilege principal may not create), and dead letters are read
    for topic in inputs:
        add("TOPIC", topic, "LITERAL", ("READ",), f"log end offsets of {topic} (lag)")
    for topic in outputs:
        add("TOPIC", topic, "LITERAL", ("READ",), f"records of {topic} (observations, dead letters)")
    add("TOPIC", prefix, "PREFIXED", ("DESCRIBE", "DESCRIBE_CONFIGS"), "internal topics check (validate)")
    add("GROUP", prefix, "PREFIXED", ("DESCRIBE",), "internal topics check: groups of apps named <app>-*")
    sets["dagster"] = AclSet("dagster", "Dagster sensors and checks", *_frozen(acls, reasons))
    return sets


def _frozen(acls: list[Acl], reasons: list[str]) -> tuple[tuple[Acl, ...], tuple[str, ...]]:
    return tuple(acls), tuple(reasons)


def isolation_acls(app_id: str, others: Iterable[str], principal: str | None = None) -> AclSet:
    """DENY rules that keep ``app_id``'s principal off the applications in ``others`` whose
    names its prefix ``<app_id>-`` would otherwise match (``orders`` vs ``orders-v2``)."""
    acls, reasons, add = _builder(principal or f"User:{app_id}")
    for other in sorted(set(others)):
        if not other.startswith(f"{app_id}-"):
            continue
        deny = f"keep off {other}'s resources"
        for resource in ("TOPIC", "GROUP", "TRANSACTIONAL_ID"):
            add(resource, other, "PREFIXED", ("ALL",), deny)
    denied = tuple(Acl(a.principal, a.resource_type, a.name, a.pattern, a.operation, "DENY") for a in acls)
    title = "isolation from applications whose names start with this one's"
    return AclSet("isolation", title, denied, tuple(reasons))


def render(sets: Iterable[AclSet], bootstrap: str) -> str:
    """The sets as ``kafka-acls.sh --add`` command lines, one per ACL, a comment per set."""
    lines: list[str] = []
    for acl_set in sets:
        if not acl_set.acls:
            continue
        lines.append(f"# {acl_set.name}: {acl_set.title}")
        for acl, reason in zip(acl_set.acls, acl_set.reasons, strict=True):
            lines.append(f"kafka-acls.sh --bootstrap-server {bootstrap} --add {acl.kafka_acls()}  # {reason}")
    return "\n".join(lines) + "\n"


@dataclass
class AclCheck:
    """What a cluster lacks (and has beyond) the required ACLs of one principal."""

    missing: list[Acl] = field(default_factory=list)
    extra: list[Acl] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing

    def summary(self) -> str:
        lines = [f"MISSING {acl.kafka_acls()}" for acl in self.missing]
        lines += [f"extra   {acl.kafka_acls()}" for acl in self.extra]
        verdict = "ok: every required ACL is present"
        if not self.ok:
            verdict = f"{len(self.missing)} required ACL(s) missing"
        return "\n".join([*lines, verdict]) + "\n"


def check_acls(required: Iterable[Acl], present: Iterable[Acl]) -> AclCheck:
    """Compare ``required`` with the cluster's ACLs of the same principals (``present``).

    An ALLOW counts as present when the cluster has it exactly, or ALL on the same resource
    pattern.
    """
    have = set(present)
    wanted = list(dict.fromkeys(required))
    result = AclCheck()
    for acl in wanted:
        as_all = Acl(acl.principal, acl.resource_type, acl.name, acl.pattern, "ALL", acl.permission, acl.host)
        if acl not in have and (acl.permission != "ALLOW" or as_all not in have):
            result.missing.append(acl)
    principals = {acl.principal for acl in wanted}
    result.extra = sorted(a for a in have if a.principal in principals and a not in wanted)
    return result
