"""At-least-once sends: what librdkafka refuses locally takes the producer's failure paths.

``StreamsProducer._produce_now`` produces each record at once (at-least-once and eager
exactly-once). A full local queue (``BufferError``) waits for room by serving delivery
reports and sends the same record again; a record librdkafka refuses (``KafkaException``:
too large, unknown topic) goes to the send-error handler with the whole record, as Kafka
Streams' ``RecordCollectorImpl.send`` hands a send exception to the production exception
handler. A pure unit test of that logic over a fake producer (the broker paths are in
tests/integration/test_failures.py and test_dead_letter.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams.kafka import KafkaError, KafkaException
from platform_streams.runtime.producing.streams_producer import StreamsProducer
from tests.support.produce_args import produce_call


class _RefusingProducer:
    """Refuses the first ``full`` produces with BufferError, and every record of topic ``bad``."""

    def __init__(self, full: int) -> None:
        self.full = full
        self.produced: list[tuple[Any, ...]] = []
        self.polls = 0

    def produce(self, topic: str, value: Any, key: Any, *args: Any, **kwargs: Any) -> None:
        if topic == "bad":
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
        if self.full:
            self.full -= 1
            raise BufferError("queue full")
        call = produce_call(topic, value, key, *args, **kwargs)
        self.produced.append((topic, key, value, call.partition, call.timestamp, call.headers))

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return 0


def _producer(monkeypatch: pytest.MonkeyPatch, fake: _RefusingProducer, errors: list[Any]) -> StreamsProducer:
    monkeypatch.setattr(
        "platform_streams.runtime.producing.streams_producer.create_producer", lambda conf: fake
    )
    return StreamsProducer(
        {},
        transactional_id=None,
        on_delivery=lambda e, m: None,
        on_send_error=lambda record, exc: errors.append((record, exc)),
        timeout_s=5,
    )


def test_a_full_queue_waits_for_room_and_sends_the_same_record(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, errors = _RefusingProducer(full=2), []
    producer = _producer(monkeypatch, fake, errors)
    producer.send("out", b"k", b"v", 7, [("h", b"1")], 3)
    producer.send("out", b"k2", b"v2", 8, None, None)
    assert fake.produced == [
        ("out", b"k", b"v", 3, 7, [("h", b"1")]),
        ("out", b"k2", b"v2", -1, 8, None),  # -1: librdkafka's partitioner decides
    ]
    assert fake.polls == 2 and errors == []
    assert producer.sent_by_topic == {"out": 2}


def test_a_refused_record_goes_whole_to_the_send_error_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, errors = _RefusingProducer(full=0), []
    producer = _producer(monkeypatch, fake, errors)
    producer.send("bad", b"k", b"v", 7, [("h", b"1")], 2)
    assert fake.produced == []
    assert [record for record, _ in errors] == [("bad", b"k", b"v", 7, [("h", b"1")], 2)]
    assert isinstance(errors[0][1], KafkaException)
