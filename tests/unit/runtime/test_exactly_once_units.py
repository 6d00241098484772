"""The pure pieces of exactly-once and failure handling, without a broker.

* the ``__ps_src`` header: what a changelog write records, per input record and per flush;
* the restore filter: which changelog records reflect committed input;
* the error classification that decides retry / rejoin / abort / fail;
* the producer's exactly-once buffer: nothing is sent before the commit, an abort drops it;
* the checkpoint guard: a store spilling uncommitted writes to disk removes the checkpoint.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.errors import ProducerFencedError, StreamsError, TaskCorruptedError, TaskMigratedError
from platform_streams.kafka import KafkaError, KafkaException
from platform_streams.processor.context import TaskContext
from platform_streams.processor.serialized_record import SerializedRecord
from platform_streams.processor.source_position import SOURCE_HEADER, SourcePositionHeader
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.broker_calls import Outcome, classify, retrying, translate
from platform_streams.runtime.producing.streams_producer import StreamsProducer
from platform_streams.runtime.restore.changelog_filter import CommittedInputFilter
from platform_streams.serde import Bytes
from platform_streams.state.checkpoint import OffsetCheckpoint
from platform_streams.state.manager import ProcessorStateManager
from platform_streams.state.stores import Stores
from platform_streams.state.wrappers.base import innermost


def _msg(topic: str, partition: int, offset: int, headers: Any = None) -> SerializedRecord:
    """A consumed record as the task sees it (the production stand-in for a confluent Message)."""
    return SerializedRecord(topic, partition, offset, None, None, 0, headers)


def test_the_header_names_the_record_being_processed_or_the_last_consumed_offsets() -> None:
    consumed: dict[tuple[str, int], int] = {}
    single = SourcePositionHeader([("in", 3)], consumed)
    record = _msg("in", 3, 41)
    assert single.headers(record) == [(SOURCE_HEADER, b"41")]
    assert single.headers(record) is single.headers(record), "built once per input record"
    consumed[("in", 3)] = 41
    assert single.headers(None) == [(SOURCE_HEADER, b"41")], "a flush names what was consumed"

    joined = SourcePositionHeader([("right", 0), ("left", 0)], {("left", 0): 7})
    assert joined.headers(_msg("right", 0, 3)) == [(SOURCE_HEADER, b"7,3")], "sorted by topic: left, right"
    assert joined.headers(None) == [(SOURCE_HEADER, b"7,-1")]


def test_the_filter_keeps_only_records_written_for_committed_input() -> None:
    task_filter = CommittedInputFilter([("in", 0)], {("in", 0): 100})
    assert task_filter(_msg("cl", 0, 5, [(SOURCE_HEADER, b"99")]))
    assert not task_filter(_msg("cl", 0, 6, [(SOURCE_HEADER, b"100")]))
    assert task_filter(_msg("cl", 0, 7, None)), "records without the header are applied"
    assert task_filter.skipped == 1
    nothing = CommittedInputFilter([("in", 0)], {("in", 0): None})
    assert not nothing(_msg("cl", 0, 0, [(SOURCE_HEADER, b"0")])), "nothing committed: nothing applies"
    joined = CommittedInputFilter([("a", 1), ("b", 1)], {("a", 1): 10, ("b", 1): 5})
    assert joined(_msg("cl", 1, 0, [(SOURCE_HEADER, b"9,4")]))
    assert not joined(_msg("cl", 1, 1, [(SOURCE_HEADER, b"9,5")]))
    source_as_changelog = CommittedInputFilter([("table", 2)], {("table", 2): 3})
    assert source_as_changelog(_msg("table", 2, 2)) and not source_as_changelog(_msg("table", 2, 3))


def test_a_batch_is_judged_as_its_records_one_by_one() -> None:
    """``batch_for_partition`` (the restore's per-batch filter) keeps and skips exactly what
    the per-record judge does, for every header shape, and counts the same skips."""
    rng = random.Random(17)
    shapes: list[Any] = [
        None,
        [],
        [(SOURCE_HEADER, b"5")],
        [(SOURCE_HEADER, b"99")],
        [(SOURCE_HEADER, b"100")],
        [(SOURCE_HEADER, b"x")],
        [("other", b"1")],
        [("other", b"1"), (SOURCE_HEADER, b"150")],
    ]
    for _ in range(200):
        batch = [_msg("cl", 0, i, rng.choice(shapes)) for i in range(rng.randrange(1, 12))]
        one_by_one = CommittedInputFilter([("in", 0)], {("in", 0): 100})
        batched = CommittedInputFilter([("in", 0)], {("in", 0): 100})
        judge = one_by_one.for_partition("cl", 0)
        expected = [msg for msg in batch if judge(msg)]
        assert batched.batch_for_partition("cl", 0)(batch) == expected
        assert batched.skipped == one_by_one.skipped


@pytest.mark.parametrize(
    ("code", "outcome", "error"),
    [
        (KafkaError.UNKNOWN_MEMBER_ID, Outcome.MIGRATED, TaskMigratedError),
        (KafkaError.ILLEGAL_GENERATION, Outcome.MIGRATED, TaskMigratedError),
        (KafkaError.PRODUCER_FENCED, Outcome.FENCED, ProducerFencedError),
        (KafkaError._TRANSPORT, Outcome.RETRY, None),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, Outcome.FATAL, StreamsError),
    ],
)
def test_broker_errors_are_sorted_by_what_the_worker_does(code: int, outcome: Outcome, error: Any) -> None:
    exc = KafkaException(KafkaError(code))
    assert classify(exc) is outcome
    if error is not None:
        assert isinstance(translate(exc, "commit"), error)


def test_transient_errors_are_retried_until_the_call_succeeds() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        return "done"

    assert retrying(flaky, "flaky", timeout_s=5, pause_s=0.01) == "done" and len(calls) == 3
    with pytest.raises(TaskCorruptedError):
        retrying(lambda: _raise(KafkaError(KafkaError._STATE, txn_requires_abort=True)), "txn", timeout_s=1)


def _raise(err: KafkaError) -> None:
    raise KafkaException(err)


class FakeProducer:
    def __init__(self) -> None:
        self.produced: list[tuple[Any, ...]] = []
        self.produce_kwargs: list[dict[str, Any]] = []
        self.calls: list[str] = []

    def init_transactions(self, timeout: float) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def produce(self, topic: str, value: Any, key: Any, *args: Any, **kwargs: Any) -> None:
        self.produced.append((topic, key, value))
        self.produce_kwargs.append(kwargs)

    def flush(self, timeout: float) -> int:
        return 0

    def send_offsets_to_transaction(self, offsets: Any, meta: Any, timeout: float) -> None:
        self.calls.append("offsets")

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append("commit")

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort")


def _transactional_producer(
    monkeypatch: pytest.MonkeyPatch, *, eager: bool
) -> tuple[FakeProducer, StreamsProducer]:
    fake = FakeProducer()
    monkeypatch.setattr(
        "platform_streams.runtime.producing.streams_producer.create_producer", lambda conf: fake
    )
    producer = StreamsProducer(
        {},
        transactional_id="app-p-1",
        on_delivery=lambda e, m: None,
        on_send_error=lambda r, e: None,
        timeout_s=5,
        eager=eager,
    )
    return fake, producer


def _commit_checked(producer: StreamsProducer) -> list[str]:
    """Commit with offsets; returns the order in which the delivery and membership checks ran."""
    checks: list[str] = []
    assert producer.commit(
        ["offset"],
        "meta",
        before_commit=lambda: checks.append("member"),
        check_delivery=lambda: checks.append("acked"),
    )
    return checks


def test_exactly_once_sends_nothing_before_the_commit_and_an_abort_drops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake, producer = _transactional_producer(monkeypatch, eager=False)
    producer.send("out", b"k", b"v1", 0, None, None)
    assert fake.produced == [] and producer.buffered == 1
    producer.abort()
    assert producer.buffered == 0 and "abort" not in fake.calls, "nothing was open: nothing to abort"
    producer.send("out", b"k", b"v2", 0, None, None)
    checks = _commit_checked(producer)
    assert fake.produced == [("out", b"k", b"v2")]
    assert fake.calls == ["init", "begin", "offsets", "commit"] and checks == ["acked", "member"]
    # what was sent is counted per topic at the commit (the topic-level records-produced)
    assert producer.sent_by_topic == {"out": 1} and producer.sent == 1

    def expelled() -> None:
        raise TaskMigratedError("expelled")

    producer.send("out", b"k", b"v3", 0, None, None)
    with pytest.raises(TaskMigratedError):
        producer.commit(["offset"], "meta", before_commit=expelled, check_delivery=lambda: None)
    assert fake.calls[-1] == "abort" and producer.transactions_aborted == 1


def test_an_eager_producer_sends_as_records_come_in_an_always_open_transaction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka Streams' own EOS send path (``StreamsProducer.send`` inside the open transaction,
    apache/kafka streams/.../processor/internals/StreamsProducer.java), used where the broker
    aborts a fenced producer's open transaction (probed: ``aborts_fenced_transactions``)."""
    fake, producer = _transactional_producer(monkeypatch, eager=True)
    assert fake.calls == ["init", "begin"], "a transaction is open before the first record"
    assert not producer.commit([], "meta", before_commit=lambda: None, check_delivery=lambda: None)
    producer.abort()
    assert "abort" not in fake.calls, "an open transaction that holds nothing is kept"
    producer.send("out", b"k", b"v1", 0, None, None)
    assert fake.produced == [("out", b"k", b"v1")] and producer.buffered == 0, "sent at once"
    checks = _commit_checked(producer)
    assert fake.calls == ["init", "begin", "offsets", "commit", "begin"] and checks == ["acked", "member"]
    assert producer.sent_by_topic == {"out": 1} and producer.transactions_committed == 1
    # offsets alone are a transaction too
    assert producer.commit(["offset"], "meta", before_commit=lambda: None, check_delivery=lambda: None)
    assert fake.calls[-3:] == ["offsets", "commit", "begin"]

    def expelled() -> None:
        raise TaskMigratedError("expelled")

    producer.send("out", b"k", b"v2", 0, None, None)
    with pytest.raises(TaskMigratedError):
        producer.commit(["offset"], "meta", before_commit=expelled, check_delivery=lambda: None)
    assert fake.calls[-2:] == ["abort", "begin"], "the sent record is taken back; a new transaction opens"
    assert producer.transactions_aborted == 1


def test_an_eager_producer_that_cannot_open_the_next_transaction_is_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Committed, but fenced before the next transaction opens: nothing may be sent with it
    (a send outside a transaction would be refused and could be dropped by the handler), so
    the commit raises for the worker, which replaces the producer (``needs_reset``)."""
    fake, producer = _transactional_producer(monkeypatch, eager=True)
    producer.send("out", b"k", b"v1", 0, None, None)

    def fenced() -> None:
        raise KafkaException(KafkaError(KafkaError.PRODUCER_FENCED))

    monkeypatch.setattr(fake, "begin_transaction", fenced)
    with pytest.raises(ProducerFencedError):
        _commit_checked(producer)
    assert fake.calls[-1] == "commit" and producer.transactions_committed == 1
    assert producer.needs_reset


def test_a_spill_of_uncommitted_writes_removes_the_checkpoint(tmp_path: Path) -> None:
    config = StreamsConfig(application_id="app", bootstrap_servers="localhost:9092", state_dir=tmp_path)
    task_dir = tmp_path / "0_0"
    manager = ProcessorStateManager(TaskId(0, 0), task_dir, eos=False)
    context = TaskContext(
        config=config,
        task_id=TaskId(0, 0),
        collector=_Collector(),
        clock_ms=lambda: 0,
        task_dir=task_dir,
        changelog_topics={"s": "app-s-changelog"},
        registrar=manager,
    )
    supplier = Stores.persistent_key_value_store("s")
    store = Stores.key_value_store_builder(supplier, Bytes(), Bytes()).with_caching_disabled().build()
    store.init(context, store)
    manager.checkpoint({("app-s-changelog", 0): 10}, enforce=True)
    checkpoint = OffsetCheckpoint(task_dir / ".checkpoint")
    assert checkpoint.exists()
    store.put(b"k", b"v")
    backend = innermost(store).backend
    backend.flush()
    assert checkpoint.exists(), "a flush belongs to a commit: the next checkpoint follows it"
    store.put(b"k", b"v2")
    backend.write_pending()  # what a full overlay or a scan does between commits
    assert not checkpoint.exists(), "disk may now hold uncommitted writes"
    manager.close()


class _Collector:
    def send(self, *args: Any) -> None:
        pass

    def partition_count(self, topic: str) -> int:
        return 1


def test_reports_for_changelog_records_only_until_a_transaction_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``changelog_reports_only``: no producer-wide delivery callback; changelog records carry
    their own. A failed sink record is unreported, but librdkafka fails the transaction
    (abortable): after that the producer is replaced by one reporting every record, so a
    record failing again is named (the collector makes that fatal, as before)."""
    confs: list[dict[str, Any]] = []
    fakes: list[FakeProducer] = []

    def create(conf: dict[str, Any]) -> FakeProducer:
        confs.append(conf)
        fakes.append(FakeProducer())
        return fakes[-1]

    monkeypatch.setattr("platform_streams.runtime.producing.streams_producer.create_producer", create)
    producer = StreamsProducer(
        {},
        transactional_id="app-p-1",
        on_delivery=lambda e, m: None,
        on_send_error=lambda r, e: None,
        timeout_s=5,
        changelog_topics={"app-counts-changelog"},
        changelog_reports_only=True,
    )
    assert "on_delivery" not in confs[0]
    producer.send("app-counts-changelog", b"j", b"1", 0, None, 0)
    producer.send("app-counts-changelog", b"i", b"1", 0, None, 1)
    producer.send("out", b"k", b"1", 0, None, None)
    producer.send("app-counts-changelog", b"k", b"1", 0, None, 0)

    def refused(timeout: float) -> None:
        err = KafkaError(KafkaError._STATE, "a message failed", txn_requires_abort=True)
        raise KafkaException(err)

    monkeypatch.setattr(fakes[0], "commit_transaction", refused)
    with pytest.raises(TaskCorruptedError):
        _commit_checked(producer)
    sent = fakes[0].produce_kwargs
    # a callback on the last record of each changelog partition only (held for the commit)
    assert ["on_delivery" in kw for kw in sent] == [False, True, False, True]
    assert fakes[0].calls[-1] == "abort" and producer.needs_reset
    producer.reset()
    assert "on_delivery" in confs[1], "the new producer reports every record"
    producer.send("app-counts-changelog", b"k", b"2", 0, None, 0)
    _commit_checked(producer)
    assert fakes[1].produced == [("app-counts-changelog", b"k", b"2")] and not producer.needs_reset
