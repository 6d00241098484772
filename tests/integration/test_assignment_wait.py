"""The wait for a generation's placement is bounded (docs/soak/README.md).

State-aware assignment (``runtime/task_assignment``) places tasks once every member of a
generation has published its report on the control topic, and the member with the lowest
id publishes the placement. In the 60-minute soak of 2026-11-24 (20:48 UTC) a group
re-created by a repair kept a member that never reported: both workers waited for the
placement for 23 minutes, silently, with no task. Now a waiting worker warns, the leader
places the tasks over the members that reported once a member has had ample time to
report, and a member still unplaced after the longest legitimate rebalance makes the group
start a new generation (a changed subscription).

The broken member is played by a plain consumer of the application's group ("ghost"): it
holds member slots, and in its first generation it publishes a report with the lowest
member id, so it is that generation's leader, and never places anything. The worker must
start a new generation (the first bound), lead the next generation without the ghost's report (the
second), and process its input. Both brokers.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from platform_streams import KafkaStreams, State
from platform_streams.kafka import KafkaAdmin, create_consumer, create_producer
from platform_streams.runtime.membership.control_channel import control_topic_name
from platform_streams.runtime.task_assignment.protocol import (
    REPORT_PREFIX,
    Report,
    group_generation,
    members_topic_name,
)
from tests.integration.support_apps import (
    APP_TIMING,
    app_config,
    upper_case_app,
    wait_until,
)
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]


class Ghost:
    """A member of the application's group that reports once as leader and never leads."""

    def __init__(self, bootstrap: str, application_id: str) -> None:
        self.application_id = application_id
        self.consumer = create_consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": application_id,
                "client.id": "0-ghost",  # sorts before every worker's member id: the leader
                "session.timeout.ms": APP_TIMING["session_timeout_ms"],
                "heartbeat.interval.ms": APP_TIMING["heartbeat_interval_ms"],
                "max.poll.interval.ms": APP_TIMING["max_poll_interval_ms"],
                "enable.auto.commit": False,
            }
        )
        self.producer = create_producer({"bootstrap.servers": bootstrap})
        self.reported: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.consumer.subscribe([members_topic_name(self.application_id)], on_assign=self._on_assign)
        self._thread.start()

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        consumer.assign([])
        if self.reported:
            return  # reports only in its first generation
        generation, member = group_generation(consumer.consumer_group_metadata())
        report = Report(
            generation,
            member,
            "ghost",
            tuple(sorted(tp.partition for tp in partitions)),
            int(time.time() * 1000),
        )
        self.producer.produce(
            control_topic_name(self.application_id),
            json.dumps(report.to_json()).encode(),
            (REPORT_PREFIX + member).encode(),
            partition=0,
        )
        self.producer.flush(10)
        self.reported.append(generation)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.1)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def test_a_member_that_reports_and_never_leads_does_not_hold_the_group(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source, sink = new_topic(admin, 2, "in"), new_topic(admin, 2, "out")
    config = app_config(bootstrap_servers, tmp_path, task_assignor="state_aware")
    streams = KafkaStreams(upper_case_app(source, sink), config)
    ghost = Ghost(bootstrap_servers, config.application_id)
    caplog.set_level(logging.INFO, logger="platform_streams")
    try:
        streams.start()
        wait_until(lambda: streams.state() is State.RUNNING, 90, "the worker runs alone")
        ghost.start()
        wait_until(lambda: ghost.reported, 90, "the ghost joined and reported as leader")
        wait_until(
            lambda: "starting a new generation" in caplog.text, 120, "the worker starts a new generation"
        )
        wait_until(
            lambda: "placing the tasks over the 1 members that reported" in caplog.text, 120, "partial lead"
        )
        wait_until(lambda: streams.state() is State.RUNNING, 60, "the worker runs again")
        produce(bootstrap_servers, source, [(f"k{i}", f"v{i}") for i in range(50)])
        out = consume_all(bootstrap_servers, sink, 50)
        assert sorted((r.value or b"").decode() for r in out) == sorted(f"V{i}" for i in range(50))
    finally:
        ghost.close()
        assert streams.close(timeout_s=60)
