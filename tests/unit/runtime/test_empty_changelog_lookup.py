"""``TaskStateLifecycle._empty_changelogs``: which changelog partitions a restore may skip.

Only partitions restored from the beginning are looked up (a checkpointed one must be read:
a checkpoint into an empty log means the log was recreated, and the store is wiped), and a
broker that does not answer costs only the lookup's time: every partition is then read as
before. The broker side (``kafka.empty_partitions`` on both brokers, a fresh application
opening no reader) is in tests/integration/test_kafka_layer.py and
tests/integration/test_assign_before_restore.py.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.runtime.restore import task_state
from platform_streams.runtime.restore.task_state import TaskStateLifecycle
from platform_streams.state.manager import FROM_BEGINNING


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _lifecycle(tmp_path: Path) -> TaskStateLifecycle:
    config = StreamsConfig(
        application_id="empty-lookup", bootstrap_servers=f"127.0.0.1:{_closed_port()}", state_dir=tmp_path
    )
    return TaskStateLifecycle(config)


def test_checkpointed_partitions_are_not_looked_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[object] = []
    monkeypatch.setattr(task_state, "empty_partitions", lambda admin, parts, timeout: asked.append(parts))
    assert _lifecycle(tmp_path)._empty_changelogs([("c", 0, 17), ("c", 1, 0)]) == set()
    assert asked == []


def test_only_partitions_from_the_beginning_are_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[list[tuple[str, int]]] = []

    def answer(admin: object, parts: list[tuple[str, int]], timeout: float) -> set[tuple[str, int]]:
        asked.append(list(parts))
        return {("c", 2)}

    monkeypatch.setattr(task_state, "empty_partitions", answer)
    plan = [("c", 0, 17), ("c", 1, FROM_BEGINNING), ("c", 2, FROM_BEGINNING)]
    assert _lifecycle(tmp_path)._empty_changelogs(plan) == {("c", 2)}
    assert asked == [[("c", 1), ("c", 2)]]


def test_a_broker_that_does_not_answer_means_read_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(task_state, "_EMPTY_LOOKUP_S", 0.5)
    with caplog.at_level(logging.INFO, logger="platform_streams.runtime.restore.task_state"):
        assert _lifecycle(tmp_path)._empty_changelogs([("c", 0, FROM_BEGINNING)]) == set()
    assert any("not listed" in r.getMessage() for r in caplog.records)
