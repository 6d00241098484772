"""The worker's collector and producer without a broker: skipped production errors are
counted as dropped records, and a closed producer lets its librdkafka client go."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import confluent_kafka as ck
import pytest

from platform_streams.errors import TaskCorruptedError
from platform_streams.runtime.producing.kafka_record_collector import KafkaRecordCollector
from platform_streams.runtime.producing.streams_producer import StreamsProducer


class _Producer:
    """Just enough of a confluent Producer (weak-referenceable, unlike the real one)."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.flushed = 0

    def init_transactions(self, timeout: float) -> None:
        pass

    def begin_transaction(self) -> None:
        pass

    def produce(self, topic: str, value: Any, key: Any, *args: Any, **kwargs: Any) -> None:
        if self.refuse:
            raise ck.KafkaException(ck.KafkaError(ck.KafkaError.MSG_SIZE_TOO_LARGE))

    def flush(self, timeout: float) -> int:
        self.flushed += 1
        return 0

    def poll(self, timeout: float) -> int:
        return 0

    def commit_transaction(self, timeout: float) -> None:
        pass

    def abort_transaction(self, timeout: float) -> None:
        pass


def _collector(
    monkeypatch: pytest.MonkeyPatch, policy: str, *, eos: bool = False, refuse: bool = False
) -> tuple[KafkaRecordCollector, _Producer]:
    fake = _Producer(refuse)
    monkeypatch.setattr(
        "platform_streams.runtime.producing.streams_producer.create_producer", lambda conf: fake
    )

    def factory(**callbacks: Any) -> StreamsProducer:
        return StreamsProducer({}, transactional_id="t-1" if eos else None, timeout_s=5, **callbacks)

    collector = KafkaRecordCollector(
        factory, partition_count=lambda topic: 1, tracked_topics={"changelog"}, production_policy=policy
    )
    return collector, fake


def _rejected(topic: str) -> Any:
    return ck.Message(topic=topic, partition=0, offset=-1, key=b"k", value=b"v")


def test_broker_rejections_handled_with_continue_are_dropped_records(monkeypatch: pytest.MonkeyPatch) -> None:
    collector, _ = _collector(monkeypatch, "log_and_continue")
    collector.on_delivery(ck.KafkaError(ck.KafkaError.MSG_SIZE_TOO_LARGE), _rejected("out"))
    assert collector.records_skipped == 1 and collector.production_handler.count == 1
    collector.flush()  # skipped: nothing to raise

    collector.on_delivery(ck.KafkaError(ck.KafkaError.MSG_SIZE_TOO_LARGE), _rejected("changelog"))
    assert collector.records_skipped == 1, "a changelog record is never skipped: it fails the commit"


def test_broker_rejections_handled_with_fail_are_not_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    collector, _ = _collector(monkeypatch, "log_and_fail")
    collector.on_delivery(ck.KafkaError(ck.KafkaError.MSG_SIZE_TOO_LARGE), _rejected("out"))
    assert collector.records_skipped == 0 and collector.production_handler.count == 1
    with pytest.raises(Exception, match="could not be written"):
        collector.flush()


def test_records_refused_at_the_exactly_once_commit_are_dropped_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    collector, _ = _collector(monkeypatch, "log_and_continue", eos=True, refuse=True)
    collector.send("out", b"k", b"v", 0, [], None)
    # the first refusal at the commit names no input record: the transaction is aborted for
    # the tasks to process their input again with sizes checked as records are held
    with pytest.raises(TaskCorruptedError, match="refused at the commit"):
        collector.commit_transaction([], None, lambda: None)
    assert collector.records_skipped == 0
    collector.abort()
    collector.send("out", b"k", b"v", 0, [], None)  # as processed again: not too large, held
    assert collector.commit_transaction([], None, lambda: None)  # refused at the commit again
    assert collector.records_skipped == 1


def test_close_releases_the_librdkafka_producer(monkeypatch: pytest.MonkeyPatch) -> None:
    collector, fake = _collector(monkeypatch, "log_and_fail")
    producer = weakref.ref(fake)
    del fake
    monkeypatch.undo()  # the patched factory holds the fake too
    collector.streams_producer.close()
    collector.streams_producer.close()  # twice: nothing more happens
    gc.disable()  # released by reference counting, not by a later collection
    try:
        assert producer() is None and collector.streams_producer.producer is None
    finally:
        gc.enable()
