"""The wedged-group repair (runtime/rebalance_wait.py) never deletes a group whose committed
offsets it could not read.

Found by the soak run (docs/soak/README.md): on Tansu a wedged group answered no committed
offsets at all; the repair deleted it anyway ("restored its committed offsets of 0
partitions"), the re-created group started over from ``auto.offset.reset`` and the
at-least-once application counted every record again (counts 1.75x the input). The admin
client is replaced here because the broker state that answers nothing cannot be set up on
demand; what is tested is the decision, not Kafka.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.runtime import rebalance_wait

PARTITIONS = [("in", 0), ("in", 1)]


class FakeAdmin:
    """Committed offsets as given; records what was asked of it."""

    def __init__(self, committed: dict[tuple[str, int], int | None]) -> None:
        self.committed = committed
        self.deleted: list[str] = []
        self.altered: list[dict[tuple[str, int], int]] = []

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def committed_offsets(self, group: str, partitions: Any, timeout: float = 10.0) -> dict[Any, Any]:
        return {tp: self.committed.get(tp) for tp in partitions}

    def delete_group(self, group: str) -> str | None:
        self.deleted.append(group)
        return None

    def alter_committed_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        self.altered.append(dict(offsets))


def _repair(monkeypatch: pytest.MonkeyPatch, admin: FakeAdmin) -> list[str]:
    monkeypatch.setattr(rebalance_wait, "KafkaAdmin", lambda conf: admin)
    monkeypatch.setattr(rebalance_wait.time, "sleep", lambda s: None)
    left: list[str] = []
    config = StreamsConfig(application_id="wedged", bootstrap_servers="127.0.0.1:1")
    rebalance_wait.repair_group(config, PARTITIONS, leave=lambda: left.append("left"))
    return left


def test_no_readable_offsets_no_delete(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    admin = FakeAdmin({})
    caplog.set_level(logging.ERROR, logger=rebalance_wait.__name__)
    left = _repair(monkeypatch, admin)
    assert admin.deleted == [] and admin.altered == []
    assert left == ["left"]  # the worker still rejoins with a fresh member
    assert "none of its committed offsets of 2 partitions could be read: not deleting it" in caplog.text


def test_readable_offsets_are_saved_and_written_back(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = FakeAdmin({("in", 0): 5})
    left = _repair(monkeypatch, admin)
    assert admin.deleted == ["wedged"] and admin.altered == [{("in", 0): 5}]
    assert left == ["left"]
