"""``StreamWorker._close_clients``: a consumer whose close raises (confluent-kafka's C code can
raise a SystemError there) does not keep the producer open or the worker from finishing."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from platform_streams.runtime.workers.worker import StreamWorker


class _Closing:
    def __init__(self, error: BaseException | None = None) -> None:
        self.closed = 0
        self._error = error

    def close(self) -> None:
        self.closed += 1
        if self._error is not None:
            raise self._error


def _worker(consumer: _Closing, producer: _Closing) -> Any:
    worker = StreamWorker.__new__(StreamWorker)
    threading.Thread.__init__(worker, name="w-1")  # the name only: the worker's own init builds clients
    worker.repartition_purger = _Closing()
    worker.streams_group = None
    worker.failure = None
    worker.consumer = consumer
    worker.task_manager = SimpleNamespace(collector=SimpleNamespace(streams_producer=producer))
    return worker


def test_a_consumer_close_that_raises_still_closes_the_producer(caplog: pytest.LogCaptureFixture) -> None:
    consumer = _Closing(
        SystemError("_PyErr_SetObject: exception <class 'str'> is not a BaseException subclass")
    )
    producer = _Closing()
    worker = _worker(consumer, producer)
    worker._close_clients()
    assert consumer.closed == 1 and producer.closed == 1
    assert worker.consumer is None
    assert "w-1: closing the consumer failed: _PyErr_SetObject" in caplog.text


def test_clients_close_once() -> None:
    consumer, producer = _Closing(), _Closing()
    worker = _worker(consumer, producer)
    worker._close_clients()
    worker._close_clients()
    assert consumer.closed == 1 and worker.consumer is None
