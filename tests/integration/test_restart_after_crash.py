"""A ``--workers 2`` application that crashed on a poison record is back soon after a restart.

The most common operation there is: the application stops on an undecodable record
(``log_and_fail``), the operator switches the handler to ``log_and_continue`` and restarts
it. New input must be processed within the session timeout plus 10 s of the restarted
workers' start on both brokers: a member of the crashed run that did not leave is expired
after a session timeout; anything longer is the group waiting for nothing. On the embedded
broker a leader that leaves mid-rebalance wedges the group until the group repair (20-54 s
here, docs/brokers.md), and the supervisor stops the surviving worker while the crash's
leave makes the group rebalance: the worker must let that rebalance finish before it
leaves (runtime/membership/leave_guard.py). Measured from the first
"starting application" line of the restart, so the interpreters' start on a loaded machine
is not counted; both figures are printed (``-s`` shows them).
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from platform_streams.kafka import OFFSET_BEGINNING, KafkaAdmin, TopicPartition, create_consumer
from tests.integration.test_cli import Cli, example_app_topics, example_run_args
from tests.support.kafka import new_group_id, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

SESSION_TIMEOUT_S = 6.0  # examples/orders.yaml


def _order(key: str) -> tuple[str, str]:
    return key, json.dumps({"order_id": key, "customer": f"c-{key}", "amount": 150.0})


def _log_time(line: str) -> float:
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


class _Output:
    """Every key that reached a topic so far (one group-less reader from its start)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.consumer = create_consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": new_group_id("restart-out"),
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 50,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self.keys: set[str] = set()

    def read(self, seconds: float) -> set[str]:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for msg in self.consumer.consume(num_messages=500, timeout=0.1):
                if msg.error() is None and msg.key() is not None:
                    self.keys.add(msg.key().decode())
        return self.keys

    def close(self) -> None:
        self.consumer.close()


@pytest.mark.kafka_side  # make test's time split: a long wait on group joins
def test_a_crashed_two_worker_app_restarted_with_log_and_continue_processes_new_input_soon(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    topics = example_app_topics(admin)
    app_id = f"restart-crash-{uuid.uuid4().hex[:8]}"
    run_args = example_run_args(
        bootstrap_servers, "--workers", "2", application_id=app_id, state_dir=tmp_path / "state"
    )
    before = [_order(f"before-{i}") for i in range(10)]
    produce(bootstrap_servers, topics["ORDERS_TOPIC"], [*before, ("poison", b"\xff not json", 0)])
    output = _Output(bootstrap_servers, topics["BIG_ORDERS_TOPIC"], 2)
    try:
        crashed = Cli(tmp_path, *run_args, "--restart-limit", "0", env=topics)
        try:
            assert crashed.proc.wait(120) == 1, crashed.stderr
        finally:
            crashed.kill()
        assert "poison" in crashed.stderr or "orders" in crashed.stderr, crashed.stderr

        launched = time.time()
        restarted = Cli(
            tmp_path,
            *run_args,
            "--set",
            "default.deserialization.exception.handler=log_and_continue",
            env=topics,
        )
        try:
            new = [_order(f"new-{i}") for i in range(40)]
            produce(bootstrap_servers, topics["ORDERS_TOPIC"], new)
            wanted = {key for key, _ in new}
            deadline = time.monotonic() + 180
            while not wanted <= output.read(0.5) and time.monotonic() < deadline:
                assert restarted.proc.poll() is None, restarted.stderr
            done = time.time()
            missing = wanted - output.keys
            starts = [line for line in restarted.stderr.splitlines() if "starting application" in line]
            assert starts, restarted.stderr
            started = min(_log_time(line) for line in starts)
            back_s = done - started
            print(
                f"\nrestart after a crash ({bootstrap_servers}): new input processed {back_s:.1f}s after the "
                f"workers started ({started - launched:.1f}s to start the interpreters); "
                f"{len(missing)} of {len(wanted)} missing"
            )
            assert not missing, f"{len(missing)} unprocessed after 180 s:\n{restarted.stderr[-6000:]}"
            assert back_s <= SESSION_TIMEOUT_S + 10, (
                f"{back_s:.1f}s after the restart:\n{crashed.stderr[-4000:]}\n---\n{restarted.stderr[-6000:]}"
            )
            assert "did not rebalance" not in restarted.stderr, restarted.stderr[-6000:]
            assert restarted.stop(60) == 0, restarted.stderr[-4000:]
        finally:
            restarted.kill()
    finally:
        output.close()
