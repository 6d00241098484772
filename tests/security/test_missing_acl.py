"""Each ACL of the application set, removed alone: the application fails clearly.

Table-driven over ``acl_sets(...)["application"]``: for every ACL, an exactly-once app runs
with all the others. It must stop (ERROR, or ``start()`` raising) within the time limit --
no retry loop hiding the refusal -- with an error naming the denied operation, and commit
no output. The cases run side by side (one app each, its own principal), so the table
costs one app start, not eleven.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from platform_streams import KafkaStreams, State
from platform_streams.dev.brokers.secured import SecuredKafkaBroker
from platform_streams.kafka import create_producer
from platform_streams.ops.acls import OPTIONAL, acl_sets
from tests.integration.ops_apps import build_topology
from tests.security.conftest import Principal, make_topics
from tests.security.test_secured_app import app_config, read_values

pytestmark = [pytest.mark.kafka_side]

LIMIT_S = 60.0


def _run_case(
    broker: SecuredKafkaBroker, user: Principal, missing_index: int, state: Path
) -> tuple[str, bool, str, int]:
    """(ACL removed, whether it is optional, what happened, committed output records)."""
    source, sink = f"in-{user.name}", f"out-{user.name}"
    topology = build_topology(source, sink)
    config = app_config(user, user.name, state, processing_guarantee="exactly_once_v2")
    full = acl_sets(topology, config)["application"]
    acls, optional = list(full.acls), full.reasons[missing_index].startswith(OPTIONAL)
    removed = acls.pop(missing_index)
    broker.grant(acls)
    streams = KafkaStreams(topology, config)
    try:
        try:
            streams.start()
        except Exception as exc:  # the refusal may come before any worker runs
            outcome = f"start() raised {type(exc).__name__}: {exc}"
        else:
            deadline = time.monotonic() + LIMIT_S
            stopped = (State.ERROR, State.NOT_RUNNING)
            while time.monotonic() < deadline and streams.state() not in stopped:
                if optional and read_values(broker.client_config(), sink, 3, timeout_s=1.0):
                    break
                time.sleep(0.2)
            failure = streams.failure()
            outcome = f"{streams.state().value}: {failure}" if failure else f"{streams.state().value}"
    finally:
        streams.close(timeout_s=20)
    committed = len(read_values(broker.client_config(), sink, 3, timeout_s=3.0))
    return removed.describe(), optional, outcome, committed


def test_removing_any_one_application_acl_stops_the_app_clearly(
    secured_broker: SecuredKafkaBroker, new_user, super_admin, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    probe = new_user("probe")
    eos = app_config(probe, "x", tmp_path, processing_guarantee="exactly_once_v2")
    count = len(acl_sets(build_topology("i", "o"), eos)["application"].acls)
    users = [new_user(f"miss{i}") for i in range(count)]
    producer = create_producer(secured_broker.client_config())
    for user in users:
        make_topics(super_admin, (f"in-{user.name}", 1), (f"out-{user.name}", 1))
        for word in ("a", "bb", "a"):
            producer.produce(f"in-{user.name}", key=word.encode(), value=word.encode())
    assert producer.flush(30) == 0
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=3) as pool:  # more at once overloads two cores
        futures = [
            pool.submit(_run_case, secured_broker, user, i, tmp_path / f"s{i}")
            for i, user in enumerate(users)
        ]
        results = [f.result() for f in futures]
    print(f"\n{count} cases in {time.monotonic() - started:.1f} s")
    problems = []
    for removed, optional, outcome, committed in results:
        print(f"- without {removed}: {outcome[:300]} | committed output {committed}")
        if optional:
            if committed != 3:
                problems.append(f"without optional {removed} the app should still work: {outcome}")
            continue
        text = outcome.lower()
        clear = outcome.startswith(("start() raised", "ERROR: ")) and any(
            word in text for word in ("authorization failed", "not allowed to", "allow the principal to")
        )
        if not clear or committed:
            problems.append(f"without {removed}: {outcome} (committed {committed})")
    assert not problems, "\n".join(problems)
