"""Changelog records a cache flush sends without a delivery report
(``runtime/producing/quiet_changelogs.py``): every one still reaches librdkafka in the same order, the
checkpoint offset is the last record's, and a record lost without a report fails the
collector's flush (what a failed report does: Kafka Streams' ``RecordCollectorImpl.flush``
-> ``checkForException``, a changelog send's failure being fatal) instead of being taken
for written.

librdkafka is a stand-in that gives consecutive offsets per partition and serves delivery
reports on ``poll``/``flush`` (the unit under test is the bookkeeping); every at-least-once
broker test with a cached store runs this path against Tansu and Apache Kafka.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Consumed, Materialized, Produced, TimeWindows
from platform_streams.processor.serialized_record import SerializedRecord
from platform_streams.runtime.producing.kafka_record_collector import KafkaRecordCollector, ProductionError
from platform_streams.runtime.producing.quiet_changelogs import QuietChangelogs
from platform_streams.runtime.producing.streams_producer import StreamsProducer
from platform_streams.serde import Long, String
from platform_streams.testing.records import DriverRecord
from tests.support.produce_args import produce_call
from tests.support.tasks import build_tasks

CHANGELOG = "tasks-counts-changelog"


class _Librdkafka:
    """One producer: consecutive offsets per (topic, partition) at ``produce``; a report for
    a record produced with ``on_delivery`` (or under a producer-wide one) at ``poll``/``flush``.
    ``lose`` drops the n-th changelog record produced without a report (it never gets an
    offset, as a record the broker never wrote)."""

    def __init__(self, conf: dict[str, Any], lose: int | None) -> None:
        self.on_delivery = conf.get("on_delivery")
        self.lose = lose
        self.written: list[tuple[str, Any, Any, int]] = []
        self.reports: list[tuple[Any, SerializedRecord]] = []
        self.reported = 0
        self.quiet = 0
        self._next: dict[tuple[str, int], int] = {}

    def produce(self, topic: str, value: Any, key: Any, *args: Any, **kwargs: Any) -> None:
        call = produce_call(topic, value, key, *args, **kwargs)
        partition = max(call.partition, 0)
        callback = call.on_delivery if call.on_delivery is not None else self.on_delivery
        if callback is None and topic == CHANGELOG:
            self.quiet += 1
            if self.quiet == self.lose:
                return
        offset = self._next.get((topic, partition), 0)
        self._next[(topic, partition)] = offset + 1
        self.written.append((topic, key, value, offset))
        if callback is not None:
            self.reports.append((callback, SerializedRecord(topic, partition, offset, key, value, 0)))

    def poll(self, timeout: float = 0) -> int:
        reports, self.reports = self.reports, []
        for callback, msg in reports:
            self.reported += 1
            callback(None, msg)
        return len(reports)

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return 0


class _FailOnce:
    """A mapper whose result the sink cannot serialize once, at its ``at``-th call (inside a
    cache flush's listener): the sink's failure leaves the flush half-way (a mapper's own
    error would not: its node handles it and the flush goes on, as in Kafka Streams)."""

    def __init__(self, at: int) -> None:
        self.calls, self.at = 0, at

    def __call__(self, value: int) -> int | str:
        self.calls += 1
        if self.calls == self.at:
            return "not a long"
        return value


def _topology(kind: str) -> Topology:
    builder = StreamsBuilder()
    consumed = Consumed(key_serde=String(), value_serde=String())
    if kind == "table":  # tombstones of keys the store never held: flushes that end in no write
        table = builder.table("in", consumed, Materialized.as_("counts"))
        table.to_stream().to("out", Produced(key_serde=String(), value_serde=String()))
        return builder.build()
    grouped = builder.stream("in", consumed).group_by_key()
    if kind == "windowed":  # a window store's cache flush (CachingWindowStore._flush_entries)
        grouped.windowed_by(TimeWindows.of_size_with_no_grace(50)).count(
            materialized=Materialized.as_("counts")
        )
        return builder.build()
    counts = grouped.count(materialized=Materialized.as_("counts")).to_stream()  # direct_flush
    if kind == "failing":  # one flush stops half-way (its listener raises), processing goes on
        counts = counts.map_values(_FailOnce(150))
    counts.to("out", Produced(key_serde=String(), value_serde=Long()))
    return builder.build()


def _records(kind: str) -> list[DriverRecord]:
    def record(i: int) -> DriverRecord:
        if kind == "table" and i % 3 == 2:
            return DriverRecord("in", 0, i, f"z{i}".encode(), None, 1_000 + i, None)
        return DriverRecord("in", 0, i, f"k{i * 7 % 97}".encode(), f"v{i}".encode(), 1_000 + i, None)

    return [record(i) for i in range(600)]


def _run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    quiet: bool,
    lose: int | None = None,
    kind: str = "count",
) -> tuple[dict[str, _Librdkafka], KafkaRecordCollector]:
    producers: dict[str, _Librdkafka] = {}

    def create(conf: dict[str, Any]) -> _Librdkafka:
        name = "changelog" if "changelog" in conf.get("client.id", "") else "main"
        producers[name] = _Librdkafka(conf, lose)
        return producers[name]

    monkeypatch.setattr("platform_streams.runtime.producing.streams_producer.create_producer", create)

    def producer(**callbacks: Any) -> StreamsProducer:
        return StreamsProducer(
            {"client.id": "p"},
            transactional_id=None,
            timeout_s=5,
            changelog_conf={"client.id": "p-changelog"},
            changelog_topics={CHANGELOG},
            quiet_changelogs=quiet,
            **callbacks,
        )

    collector = KafkaRecordCollector(producer, partition_count=lambda topic: 1, tracked_topics={CHANGELOG})
    # a cache of ~20 entries: flushes of a few entries each as new keys arrive
    (task,), _ = build_tasks(
        _topology(kind),
        tmp_path,
        collector=collector,
        statestore_cache_max_bytes=2_000,
        processing_exception_handler="log_and_continue",
        production_exception_handler="log_and_continue",
    )
    records = _records(kind)
    for start in range(0, len(records), 50):
        task.add_records(("in", 0), records[start : start + 50])
        task.process(50)
        collector.poll()
        if start % 200 == 150:  # a commit: caches flushed, every record acknowledged
            task.flush_caches()
            collector.flush()
    task.flush_caches()
    collector.flush()
    assert task.records_skipped == (kind == "failing")
    return producers, collector


@pytest.mark.parametrize("kind", ["count", "windowed", "table"])
def test_a_flush_reports_its_last_changelog_record_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    quiet, collector = _run(tmp_path / "quiet", monkeypatch, quiet=True, kind=kind)
    loud, loud_collector = _run(tmp_path / "loud", monkeypatch, quiet=False, kind=kind)
    # the same records, in the same order, to the changelog and the sink
    assert quiet["changelog"].written == loud["changelog"].written
    assert quiet["main"].written == loud["main"].written
    changelog = quiet["changelog"].written
    assert len(changelog) > 300
    # every record reported without quiet sends; with them, a fraction (the first flush's,
    # until an anchor is acknowledged, and each later flush's last)
    assert loud["changelog"].reported == len(changelog)
    assert 0 < quiet["changelog"].reported < len(changelog) / 3
    assert quiet["changelog"].quiet == len(changelog) - quiet["changelog"].reported
    # the checkpoint offset is the last record's, as with a report per record
    assert collector.offsets == loud_collector.offsets == {(CHANGELOG, 0): len(changelog) - 1}
    assert collector.first_offsets == {(CHANGELOG, 0): 0}
    # the sink's count is the producer's own, quiet records included
    assert collector.produced == loud_collector.produced


@pytest.mark.parametrize("kind", ["count", "windowed", "table", "failing"])
def test_a_changelog_record_lost_without_a_report_fails_the_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    with pytest.raises(ProductionError, match=rf"{CHANGELOG}\[0\]: 1 of \d+ changelog record"):
        _run(tmp_path, monkeypatch, quiet=True, lose=40, kind=kind)


def test_a_flush_stopped_half_way_sends_its_last_quiet_record_again_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listener raising in a flush (the production handler continues, the next commit
    comes): the quiet records before it still need a reported record after them."""
    quiet, collector = _run(tmp_path / "quiet", monkeypatch, quiet=True, kind="failing")
    loud, _ = _run(tmp_path / "loud", monkeypatch, quiet=False, kind="failing")
    written, loud_written = quiet["changelog"].written, loud["changelog"].written
    assert len(written) == len(loud_written) + 1  # one record twice: the proof of the others
    again = next(i for i, (a, b) in enumerate(zip(written, loud_written, strict=False)) if a[1:3] != b[1:3])
    assert written[again][1:3] == written[again - 1][1:3]
    assert [w[1:3] for w in written[:again] + written[again + 1 :]] == [w[1:3] for w in loud_written]
    assert collector.offsets == {(CHANGELOG, 0): len(written) - 1}


def test_the_proof_by_offsets() -> None:
    tp = ("t", 0)
    quiet = QuietChangelogs()
    assert not quiet.may_send_quietly(tp)  # no anchor yet: report every record
    quiet.acknowledged(tp, 10)  # the anchor
    assert quiet.may_send_quietly(tp)
    quiet.sent(tp, 4)
    quiet.acknowledged(tp, 15)  # a flush's last, after its four quiet records
    assert quiet.check({tp: 15}) == []
    quiet.sent(tp, 4)
    quiet.acknowledged(tp, 19)  # one of the four is missing: 16..19 hold four records, not five
    assert quiet.check({tp: 19}) == [
        "t[0]: 1 of 5 changelog record(s) sent after offset 15 were not written (the last written is 19)"
    ]
    quiet.sent(tp, 2)
    quiet.acknowledged(tp, 30)  # someone else wrote too: more offsets than records, no loss
    assert quiet.check({tp: 30}) == []
    quiet.forget(tp)  # a new task instance: no quiet sends until a new anchor
    assert not quiet.may_send_quietly(tp)
    quiet.acknowledged(tp, 31)
    assert quiet.may_send_quietly(tp)
    assert quiet.check({tp: 31}) == []
    # the wait for an earlier instance's records timed out: its acknowledgements may still
    # come, so none of them becomes the anchor before everything is acknowledged (a check)
    quiet.forget(tp, in_flight=True)
    quiet.acknowledged(tp, 40)
    assert not quiet.may_send_quietly(tp)
    assert quiet.check({tp: 40}) == []
    quiet.acknowledged(tp, 41)
    assert quiet.may_send_quietly(tp)
