"""FetchWaitEscalation's logic with a fake consumer and a fake clock (no broker).

The broker side (a real consumer recreated at its position) is
tests/integration/test_kafka_layer.py::test_fetch_wait_escalation_keeps_positions.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from platform_streams.kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
from platform_streams.kafka.fetch_wait import LONG_FETCH_WAIT_MS, FetchWaitEscalation


class _Msg:
    def __init__(self, code: int | None) -> None:
        self._err = None if code is None else KafkaError(code)

    def error(self) -> KafkaError | None:
        return self._err


class _Consumer:
    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf
        self.assigned: list[TopicPartition] = []
        self.closed = False

    def assign(self, tps: list[TopicPartition]) -> None:
        self.assigned = tps

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition) for tp in self.assigned]

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        # partition 0 advanced to 42; partition 1's logical start never resolved
        return [TopicPartition(tp.topic, tp.partition, 42 if tp.partition == 0 else -1001) for tp in tps]

    def close(self) -> None:
        self.closed = True


class _Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def _escalation(wait_ms: int = 10) -> tuple[FetchWaitEscalation, list[_Consumer], _Clock]:
    made: list[_Consumer] = []
    clock = _Clock()

    def factory(conf: dict[str, Any]) -> Any:
        made.append(_Consumer(conf))
        return made[-1]

    starts = {("t", 0): OFFSET_BEGINNING, ("t", 1): OFFSET_BEGINNING}
    conf = {"bootstrap.servers": "x", "fetch.wait.max.ms": wait_ms}
    guard = FetchWaitEscalation(conf, starts, reader="test reader", idle_s=2.0, factory=factory, clock=clock)
    guard.assign()
    return guard, made, clock


def test_records_and_eof_events_keep_the_short_wait() -> None:
    guard, made, clock = _escalation()
    for msgs in ([_Msg(None)], [_Msg(KafkaError._PARTITION_EOF)], [None, _Msg(None)]):
        clock.now += 1.9
        guard.after_consume([])
        clock.now += 0.05
        guard.after_consume(msgs)  # type: ignore[arg-type]
    assert len(made) == 1 and not guard.escalated and guard.conf["fetch.wait.max.ms"] == 10


def test_transient_errors_are_not_progress() -> None:
    guard, made, clock = _escalation()
    clock.now += 1.0
    guard.after_consume([_Msg(KafkaError._TRANSPORT)])  # type: ignore[list-item]
    clock.now += 1.0
    guard.after_consume([_Msg(KafkaError._TRANSPORT)])  # type: ignore[list-item]
    assert guard.escalated and len(made) == 2


def test_starved_reader_recreates_its_consumer_once_at_its_positions(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard, made, clock = _escalation()
    clock.now += 1.99
    guard.after_consume([None])
    assert len(made) == 1
    clock.now += 0.01
    with caplog.at_level(logging.WARNING, logger="platform_streams.kafka.fetch_wait"):
        guard.after_consume([])
    assert len(made) == 2 and made[0].closed and guard.consumer is made[1]
    assert made[1].conf["fetch.wait.max.ms"] == LONG_FETCH_WAIT_MS and guard.escalated
    assert [(tp.partition, tp.offset) for tp in made[1].assigned] == [(0, 42), (1, OFFSET_BEGINNING)]
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "test reader" in warning.getMessage() and "fetch.wait.max.ms=10" in warning.getMessage()
    clock.now += 60.0
    guard.after_consume([])
    assert len(made) == 2  # once only


def test_a_long_wait_is_never_escalated() -> None:
    guard, made, clock = _escalation(wait_ms=LONG_FETCH_WAIT_MS)
    clock.now += 60.0
    guard.after_consume([])
    assert len(made) == 1 and guard.escalated


def test_a_reader_opened_ahead_starts_its_watch_when_it_is_read() -> None:
    """A restore opens readers ahead of their turn (state/restore_read_ahead.py): the time
    nobody consumed from one is not starvation (``watch_from_now``)."""
    guard, made, clock = _escalation()
    clock.now += 30.0  # waited its turn
    guard.watch_from_now()
    guard.after_consume([])
    assert len(made) == 1 and not guard.escalated
    clock.now += 2.0  # and starves from there on
    guard.after_consume([])
    assert len(made) == 2 and guard.escalated
