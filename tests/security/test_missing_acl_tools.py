"""Each ACL of the ``reset`` and ``topics`` sets, removed alone: the tool fails clearly.

Table-driven over ``acl_sets(...)["reset"]`` and ``["topics"]``: for every ACL a fresh
principal gets all the others and runs the CLI -- ``reset --yes`` for the reset set;
``topics create``, ``plan``, ``validate`` then ``delete --yes`` for the topics set. The
first command that fails must exit non-zero with exactly one line on stderr that names
the denied resource and does not read as a timeout (no retry loop hides the refusal),
and it must change nothing: the group's offsets stay where they were and no topic is
deleted (or, for ``create``, created). Every ACL must be needed: a case in which every
command succeeds fails the test. The cases run side by side, three CLI processes at a
time.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dev.brokers.secured import SecuredKafkaBroker
from platform_streams.kafka import KafkaAdmin, TopicPartition, create_consumer, create_producer
from platform_streams.kafka.acl_admin import Acl
from platform_streams.ops.acls import acl_sets
from tests.integration.ops_apps import build_topology
from tests.security.conftest import Principal, make_topics
from tests.security.test_secured_tools import APP, cli_env, run_cli

pytestmark = [pytest.mark.kafka_side]

#: a sanity bound only: starting the CLI alone takes 5-25 s on a loaded two-core machine.
#: A refusal hidden by a retry loop shows in the line itself ("within 30s", "timed out").
LIMIT_S = 45.0
CLEAR = ("authorization", "not allowed", "denied", "may not")
WAITED = ("timed out", "within", "timeout")


@dataclass
class Outcome:
    removed: Acl
    command: str
    returncode: int
    stderr: str
    seconds: float
    changed: list[str]


def _acls(kind: str, name: str) -> list[Acl]:
    config = StreamsConfig(application_id=name, bootstrap_servers="unused:9092")
    return list(acl_sets(build_topology(f"in-{name}", f"out-{name}"), config)[kind].acls)


def _prepare_reset(broker: SecuredKafkaBroker, admin: KafkaAdmin, user: Principal) -> None:
    """A stopped application: input offsets committed at 5, a repartition topic, a backup group."""
    name, source = user.name, f"in-{user.name}"
    make_topics(admin, (source, 2), (f"out-{name}", 1), (f"{name}-rekey-repartition", 2))
    for group in (name, f"{name}-offsets-backup"):
        consumer = create_consumer({**broker.client_config(), "group.id": group, "log_level": 0})
        consumer.commit(offsets=[TopicPartition(source, p, 5) for p in (0, 1)], asynchronous=False)
        consumer.close()


def _state(admin: KafkaAdmin, user: Principal) -> tuple[set[str], dict[tuple[str, int], int | None]]:
    name = user.name
    topics = {t for t in admin.list_topics() if t.startswith(f"{name}-")}
    return topics, admin.committed_offsets(name, [(f"in-{name}", 0), (f"in-{name}", 1)])


def _run_case(
    broker: SecuredKafkaBroker, admin: KafkaAdmin, kind: str, user: Principal, index: int
) -> Outcome:
    acls = _acls(kind, user.name)
    removed = acls.pop(index)
    broker.grant(acls)
    env = {**cli_env(user.config, user.name, f"in-{user.name}", f"out-{user.name}"),
           "PLATFORM_STREAMS_STATE_DIR": f"/tmp/ps-acl-{user.name}"}  # fmt: skip
    commands = [["reset", APP, "--yes"]] if kind == "reset" else [
        ["topics", "create", APP], ["topics", "plan", APP], ["topics", "validate", APP],
        ["topics", "delete", APP, "--yes"],
    ]  # fmt: skip
    for command in commands:
        before = _state(admin, user)
        started = time.monotonic()
        done = run_cli(env, *command, timeout=LIMIT_S + 60)
        seconds = time.monotonic() - started
        if done.returncode != 0:
            after = _state(admin, user)
            changed = [f"topics {sorted(before[0] ^ after[0])}"] if before[0] != after[0] else []
            if before[1] != after[1]:
                changed.append(f"offsets {before[1]} -> {after[1]}")
            return Outcome(removed, " ".join(command[:2]), done.returncode, done.stderr, seconds, changed)
    return Outcome(removed, "every command", 0, "", 0.0, [])


@pytest.mark.parametrize("kind", ["reset", "topics"])
def test_removing_any_one_tool_acl_fails_the_tool_clearly(
    kind: str, secured_broker: SecuredKafkaBroker, new_user, super_admin: KafkaAdmin  # type: ignore[no-untyped-def]
) -> None:
    count = len(_acls(kind, "x"))
    users = [new_user(f"{kind[:3]}{i}") for i in range(count)]
    for user in users:
        if kind == "reset":
            _prepare_reset(secured_broker, super_admin, user)
        else:
            make_topics(super_admin, (f"in-{user.name}", 2), (f"out-{user.name}", 1))
    producer = create_producer(secured_broker.client_config())
    for user in users:
        for p in range(10):
            producer.produce(f"in-{user.name}", key=b"k", value=b"v", partition=p % 2)
    assert producer.flush(30) == 0
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [
            pool.submit(_run_case, secured_broker, super_admin, kind, user, i) for i, user in enumerate(users)
        ]
        outcomes = [f.result() for f in futures]
    print(f"\n{kind}: {count} cases in {time.monotonic() - started:.1f} s")
    problems = []
    for o in outcomes:
        lines = [line for line in o.stderr.splitlines() if line.strip()]
        print(f"- without {o.removed.describe()}: {o.command} exit {o.returncode} {o.seconds:.1f}s: {lines}")
        if o.returncode == 0:
            problems.append(f"without {o.removed.describe()} every command succeeded: the ACL is not needed")
            continue
        clear = len(lines) == 1 and any(w in lines[0].lower() for w in CLEAR) and o.removed.name in lines[0]
        clear = clear and not any(w in lines[0].lower() for w in WAITED)
        if not clear:
            problems.append(f"without {o.removed.describe()}: {o.command} printed {lines}")
        if o.seconds > LIMIT_S:
            problems.append(f"without {o.removed.describe()}: {o.command} took {o.seconds:.0f} s to fail")
        if o.changed:
            problems.append(f"without {o.removed.describe()}: {o.command} failed but changed {o.changed}")
    assert not problems, "\n".join(problems)
