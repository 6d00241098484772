"""The deploy gate's tests: the deployed application, running on the test broker.

:func:`running_counts_app` starts tests/integration/gate_apps.py ``counts`` (a store whose
name the DSL generates), lets it count a few orders so its changelog holds state, and keeps
it running while the test judges candidates against it, as a deploy would.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from platform_streams import KafkaStreams, State
from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaAdmin
from platform_streams.topology.manifest import topology_manifest
from tests.integration import gate_apps
from tests.support.kafka import GROUP_TIMING, consume_all, new_topic, produce

__all__ = ["Deployed", "running_counts_app"]


@dataclass
class Deployed:
    config: StreamsConfig
    #: the topics the gate apps' factories read from the environment
    env: dict[str, str]
    store: str
    changelog: str


@contextmanager
def running_counts_app(
    admin: KafkaAdmin, bootstrap_servers: str, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Deployed]:
    source, sink = new_topic(admin, 2, "gate-in"), new_topic(admin, 2, "gate-out")
    env = {"GATE_INPUT": source, "GATE_OUTPUT": sink}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = StreamsConfig(
        application_id=f"gate-{uuid.uuid4().hex[:10]}",
        bootstrap_servers=bootstrap_servers,
        state_dir=state_dir,
        commit_interval_ms=100,
        session_timeout_ms=GROUP_TIMING["session.timeout.ms"],
        heartbeat_interval_ms=GROUP_TIMING["heartbeat.interval.ms"],
        max_poll_interval_ms=GROUP_TIMING["max.poll.interval.ms"],
    )
    topology = gate_apps.counts()
    [store] = topology_manifest(topology)["stores"]
    streams = KafkaStreams(topology, config)
    streams.start()
    try:
        deadline = time.monotonic() + 90
        while streams.state() is not State.RUNNING:
            assert time.monotonic() < deadline, f"not RUNNING: {streams.state()}"
            time.sleep(0.1)
        produce(bootstrap_servers, source, [("o1", "ann"), ("o2", "bob"), ("o3", "ann")])
        assert len(consume_all(bootstrap_servers, sink, 2, timeout_s=60)) >= 2  # caching may merge ann's
        yield Deployed(config, env, store, f"{config.application_id}-{store}-changelog")
    finally:
        streams.close(30)
        admin.delete_topics(
            [t for t in admin.list_topics() if t.startswith(config.application_id)] + [source, sink]
        )
