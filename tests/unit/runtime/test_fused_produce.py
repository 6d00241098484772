"""A fused sink hands its records to librdkafka itself where the producer's send would only
produce and count them (``StreamsProducer.sends_directly``, ``Emitter.produce`` in
processor/fusion.py): the same records in the same order, the same counts per topic, and a
record ``produce`` refuses goes through the producer's own send, which waits for room or
hands it to the production handler exactly as it does without fusion (Kafka Streams'
``RecordCollectorImpl.send``: a send the producer refuses goes to the
``ProductionExceptionHandler``).

librdkafka is a stand-in here (the unit under test is the generated code's choice and its
fallback, not the client); the sinks of every broker test run this code against Tansu and
Apache Kafka.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Consumed, Produced
from platform_streams.runtime.producing.kafka_record_collector import KafkaRecordCollector
from platform_streams.runtime.producing.streams_producer import StreamsProducer
from platform_streams.serde import String
from platform_streams.testing.records import DriverRecord
from tests.support.produce_args import produce_call
from tests.support.tasks import build_tasks

S = String()


class _Librdkafka:
    """A producer that queues what it is given; a value ending in ``7`` finds the queue
    full twice (the producer's send then waits for room), a value ``BIG`` is too large, a
    value ``BAD`` fails the argument checks. Each refusal is offered to ``produce`` once."""

    def __init__(self) -> None:
        self.queued: list[tuple[Any, ...]] = []
        self.attempts: Counter[Any] = Counter()
        self.polls = 0

    def produce(self, topic: str, value: Any, key: Any, *args: Any, **kwargs: Any) -> None:
        self.attempts[(topic, key, value)] += 1
        if value is not None and value.endswith(b"7") and self.attempts[(topic, key, value)] <= 2:
            raise BufferError("Local: Queue full")
        if value == b"BIG":
            raise ck.KafkaException(ck.KafkaError(ck.KafkaError.MSG_SIZE_TOO_LARGE))
        if value == b"BAD":  # what librdkafka's argument checks raise (bad headers, say)
            raise TypeError("headers must be a list")
        call = produce_call(topic, value, key, *args, **kwargs)
        self.queued.append((topic, key, value, call.timestamp, call.headers))

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return 0

    def init_transactions(self, timeout: float) -> None:
        pass

    def begin_transaction(self) -> None:
        pass

    def flush(self, timeout: float) -> int:
        return 0


def _topology() -> Topology:
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed(key_serde=S, value_serde=S))
    stream.to("audit", Produced(key_serde=S, value_serde=S))
    stream.filter(lambda k, v: v != "drop").map_values(lambda v: v.upper()).to(
        "out", Produced(key_serde=S, value_serde=S)
    )
    return builder.build()


def _records() -> list[DriverRecord]:
    values = [f"a{i}" for i in range(60)] + ["drop", "big", "x17", "drop", "y27", "bad"]
    return [
        DriverRecord("in", 0, i, f"k{i % 7}".encode(), value.encode(), 1_000 + i, [("n", str(i).encode())])
        for i, value in enumerate(values)
    ]


def _run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, fusion: bool, batch: int, eos: bool = False
) -> tuple[Any, ...]:
    librdkafka = _Librdkafka()
    monkeypatch.setattr(
        "platform_streams.runtime.producing.streams_producer.create_producer", lambda conf: librdkafka
    )

    def producer(**callbacks: Any) -> StreamsProducer:
        return StreamsProducer({}, transactional_id="t-1" if eos else None, timeout_s=5, **callbacks)

    collector = KafkaRecordCollector(
        producer, partition_count=lambda topic: 1, production_policy="log_and_continue"
    )
    handler = "log_and_continue"
    (task,), _ = build_tasks(
        _topology(), tmp_path, collector=collector, fusion=fusion, production_exception_handler=handler
    )
    records = _records()
    for start in range(0, len(records), batch):
        task.add_records(("in", 0), records[start : start + batch])
        assert task.process(batch) == len(records[start : start + batch])
    sources = [*task.graph.sources.values(), *task.graph.batches.values()]
    direct = bool(sources) and all("._produce" in getattr(fn, "__ps_source__", "") for fn in sources)
    skipped = (collector.records_skipped, task.records_skipped)
    return librdkafka.queued, dict(collector.produced), skipped, direct, librdkafka.attempts


@pytest.mark.parametrize("batch", [1, 50])
def test_a_fused_sink_produces_what_the_producers_send_produces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    fused = _run(tmp_path / "fused", monkeypatch, fusion=True, batch=batch)
    queued, produced, skipped, direct, attempts = fused
    plain = _run(tmp_path / "plain", monkeypatch, fusion=False, batch=1)
    assert direct and not plain[3]
    assert (queued, produced, skipped, attempts) == (plain[0], plain[1], plain[2], plain[4])
    # what the stand-in did: every record queued once but the two it refused for "out" ("big"
    # and "bad" upper-cased), both counted as sent (as the producer's send counts them); the
    # too-large one skipped by the collector's production handler, the one that failed the
    # argument checks by the task's (a sink failure)
    assert produced == {"audit": 66, "out": 64} and skipped == (1, 1)
    assert len(queued) == 66 + 64 - 2
    assert attempts[("out", b"k6", b"X17")] == 3 and attempts[("out", b"k5", b"BIG")] == 1
    assert [v for t, _k, v, *_ in queued if t == "out"][-3:] == [b"A59", b"X17", b"Y27"]
    assert ("out", b"k6", b"X17", 1_062, [("n", b"62")]) in queued


def test_records_held_for_a_transaction_keep_the_producers_send(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued, produced, _skipped, direct, _attempts = _run(
        tmp_path, monkeypatch, fusion=True, batch=50, eos=True
    )
    assert not direct  # deferred exactly-once: the send buffers for the commit
    assert queued == [] and produced == {}


def test_which_sends_a_sink_may_make_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """At-least-once and eager exactly-once send straight away; a changelog topic keeps the
    send (its own producer and delivery reports); deferred exactly-once holds records."""
    librdkafka = _Librdkafka()
    monkeypatch.setattr(
        "platform_streams.runtime.producing.streams_producer.create_producer", lambda conf: librdkafka
    )

    def producer(**options: Any) -> StreamsProducer:
        return StreamsProducer(
            {}, timeout_s=5, on_delivery=lambda err, msg: None, on_send_error=lambda r, e: None, **options
        )

    assert producer(transactional_id=None).sends_directly("out")
    split = producer(transactional_id=None, changelog_conf={}, changelog_topics={"app-counts-changelog"})
    assert split.sends_directly("out") and not split.sends_directly("app-counts-changelog")
    assert producer(transactional_id="t-1", eager=True).sends_directly("out")
    assert not producer(transactional_id="t-1").sends_directly("out")
