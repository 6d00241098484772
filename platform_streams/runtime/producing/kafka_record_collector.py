"""``RecordCollector`` over the worker's :class:`StreamsProducer`: send, track, handle failures.

Delivery reports come back on ``poll``/``flush``; the callback stays cheap per record: for
changelog topics it remembers the offset written (checkpoints need it; the records of a
cache flush but its last have no report at all, see :mod:`quiet_changelogs`), with ``count_bytes``
(metrics at DEBUG) it adds up the bytes written per topic, and failures go to the production
exception handler. Records sent per topic are the producer's own count (``produced``).
A commit waits for every outstanding record and raises if one failed, so offsets are never
committed past a record that was not written.

Which failures the production handler (``production_exception_handler``: log_and_fail,
log_and_continue or a callable; plus the dead-letter topic when one is configured) sees:

* a record the producer rejects locally (too large, unknown topic) -- at the send under
  at-least-once, at the commit under exactly-once (records are produced then); either way
  the handler sees the output record, so both guarantees dead-letter the same thing;
* a record the broker rejects, under at-least-once (``CONTINUE`` drops it and counts it);
* serialization failures in sinks are handled by the task (it knows the input record).

The dead letter's ``__streams.errors.topic/partition/offset`` name the input record the
task was processing when the record was sent (KIP-1034's error context): the worker sets
:attr:`KafkaRecordCollector.source` around each task's processing, so a record refused at
the send names it. Records held for the commit of a transaction (deferred exactly-once) are
refused at the commit, when no input record is known: the first such refusal for its size
aborts the transaction, has the tasks process their input again with each record's size
checked as it is held (:meth:`StreamsProducer.check_sizes`), so the refusal happens while
the input record is known, and the check is dropped once that record was handled and
committed (tasks built before keep it until they are next rebuilt). A refusal reported by
the broker has no input record to name: null topic, partition and offset -1.

Never handled, always fatal: a changelog record that cannot be written (the store already
holds the change), a dead-letter record that cannot be written for another reason than
its size (no loop), and under exactly-once a record the broker rejects (the transaction
can only be aborted). Dead letters are cut to :attr:`KafkaRecordCollector.dead_letter_limit`
(the producer's ``message.max.bytes`` and the dead-letter topic's ``max.message.bytes``,
see :mod:`~platform_streams.processor.dead_letters`); one refused for its size all the same
lowers the limit and is written again cut: at once under at-least-once, after the
transaction is aborted and the input processed again under exactly-once.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from platform_streams.errors import StreamsError, TaskCorruptedError
from platform_streams.kafka import KafkaAdmin, as_kafka_error
from platform_streams.processor.dead_letters import HEADER_PAYLOAD_TRUNCATED, DeadLetterLimit, record_size
from platform_streams.processor.exception_handlers import (
    HEADER_OUTPUT_TOPIC,
    HandlerResponse,
    RecordExceptionHandler,
)
from platform_streams.processor.record import Headers
from platform_streams.processor.record_collector import OutgoingRecord
from platform_streams.runtime.producing.quiet_changelogs import QuietChangelogs
from platform_streams.runtime.producing.streams_producer import StreamsProducer
from platform_streams.state.store_context import QuietSend

log = logging.getLogger(__name__)

#: a first offset no acknowledgement reaches: the instance claims no range of its own
_NEVER = 2**63 - 1
#: how long a task's start waits for records in flight before it claims no range instead
_IN_FLIGHT_WAIT_S = 5.0
#: librdkafka's default ``message.max.bytes``
_PRODUCER_MAX_BYTES = 1_000_000
#: a record refused for its size: by librdkafka at the send, or by the broker (batch too large)
_SIZE_ERRORS = frozenset({"MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"})


class ProductionError(StreamsError):
    """A record could not be written (after librdkafka's own retries)."""


class _FailedRecord:
    """A record that never became a message, shaped like one for the exception handler: the
    position of ``source`` (the raw input record it was sent for; null topic, partition and
    offset -1 when unknown), and as key and value the input record's raw bytes,
    as Kafka Streams' production handlers dead-letter ``context.sourceRawKey()`` /
    ``sourceRawValue()`` (``DefaultProductionExceptionHandler``), so the dead letter can be
    replayed into its source topic. Without an input record (a punctuator's or a cache
    flush's output, a record held for an exactly-once commit) they are the output record's,
    rather than Kafka's nulls, so the data is not lost; ``__streams.errors.output.topic``
    says where it was going. Timestamp and headers are the output record's."""

    __slots__ = ("_record", "_source")

    def __init__(self, record: OutgoingRecord, source: Any) -> None:
        self._record = record
        self._source = source

    def topic(self) -> str | None:
        return None if self._source is None else self._source.topic()

    def key(self) -> bytes | None:
        source = self._source
        return self._record[1] if source is None else source.key()

    def value(self) -> bytes | None:
        source = self._source
        return self._record[2] if source is None else source.value()

    def timestamp(self) -> tuple[int, int]:
        return (1, self._record[3])

    def headers(self) -> Headers:
        return self._record[4]

    def partition(self) -> int:
        return -1 if self._source is None else int(self._source.partition())

    def offset(self) -> int:
        return -1 if self._source is None else int(self._source.offset())


def _size_error(err: Any) -> bool:
    return err is not None and err.name() in _SIZE_ERRORS


def dead_letter_topic_limit(admin_conf: dict[str, Any], topic: str) -> int | None:
    """The dead-letter topic's ``max.message.bytes`` (None: unknown, or left to the broker's
    default, which the embedded broker does not report): what the broker accepts in one record batch."""
    try:
        with KafkaAdmin(admin_conf) as admin:
            configs = admin.describe_topic_configs([topic]).get(topic, {})
        value = configs.get("max.message.bytes")
        return None if value is None else int(value)
    except (StreamsError, ValueError) as exc:
        log.info("dead-letter topic %s: max.message.bytes unknown (%s); the producer's applies", topic, exc)
        return None


class KafkaRecordCollector:
    """The worker's producer-backed collector (shared by all its tasks)."""

    def __init__(
        self,
        producer_factory: Callable[..., StreamsProducer],
        *,
        partition_count: Callable[[str], int],
        tracked_topics: set[str] | None = None,
        production_policy: Any = "log_and_fail",
        dead_letter_topic: str | None = None,
        dead_letter_topic_max_bytes: Callable[[], int | None] | None = None,
        count_bytes: bool = False,
    ) -> None:
        #: key + value bytes acknowledged per topic that is not tracked (``count_bytes`` only)
        self.produced_bytes: defaultdict[str, int] | None = defaultdict(int) if count_bytes else None
        if count_bytes:  # the byte count only costs where asked for (a callback per record)
            self.on_delivery = self._on_delivery_counting_bytes  # type: ignore[method-assign]
        #: topics whose written offsets are tracked (changelogs); their failures are fatal
        self.tracked_topics: set[str] = set(tracked_topics or ())
        #: (topic, partition) -> offset of the last acknowledged record, for tracked topics
        self.offsets: dict[tuple[str, int], int] = {}
        #: (topic, partition) -> offset of the first record acknowledged since
        #: :meth:`forget_first_offsets` (a task instance's first changelog write: restore_ranges)
        self.first_offsets: dict[tuple[str, int], int] = {}
        self.errors: list[str] = []
        #: production failures seen outside a task (delivery reports, EOS commit)
        self.production_handler = RecordExceptionHandler(
            "production", production_policy, dead_letter_topic, self, None
        )
        #: records those failures dropped (``CONTINUE``): Kafka Streams' dropped-records, which
        #: its per-task RecordCollectorImpl records; this collector is shared by the worker's tasks
        self.records_skipped = 0
        self.streams_producer = producer_factory(
            on_delivery=self.on_delivery, on_send_error=self.on_send_error
        )
        self.eos = self.streams_producer.eos
        #: how large a dead letter may be (the handlers cut theirs to it); None without a topic
        self.dead_letter_limit: DeadLetterLimit | None = None
        #: asks the broker for the dead-letter topic's ``max.message.bytes`` (None: unknown)
        self._topic_max_bytes = dead_letter_topic_max_bytes
        if dead_letter_topic:
            self.dead_letter_limit = DeadLetterLimit(self._dead_letter_max_bytes(), self._send_dead_letter)
        #: the context of the task processing records now (set by the worker around each
        #: task's ``process``): a record refused at its send names the input record
        self.source: Any = None
        #: exactly-once: dead letters the broker refused for their size (see raise_if_failed)
        self._refused_dead_letters: list[str] = []
        #: deferred exactly-once: records are size-checked as they are held (see the docstring);
        #: ``_checked_refusal``: a record was refused that way since the check began
        self._checking_sizes = False
        self._checked_refusal = False
        #: at-least-once, split producers: what proves changelog records sent without a report
        #: written (:meth:`quiet_sender`); None where every changelog record is reported
        self._quiet = QuietChangelogs() if self.streams_producer.quiet_produce is not None else None
        #: hot path: the producer's own send (buffered under EOS, produced at once otherwise)
        self.send = self.streams_producer.send
        self._partition_count = partition_count

    def quiet_sender(self, topic: str, partition: int) -> QuietSend | None:
        """For one cache flush of changelog partition ``topic[partition]``: librdkafka's
        ``produce`` of the changelog producer, which sends without a delivery report, and
        ``sent(n)``, to be called once the flush has sent ``n`` records that way (also when
        it stops half-way); the flush's last record goes through :attr:`send` (reported).
        None where every record must be reported (see :mod:`quiet_changelogs`)."""
        quiet, produce = self._quiet, self.streams_producer.quiet_produce
        if quiet is None or produce is None or not quiet.may_send_quietly((topic, partition)):
            return None
        return QuietSend(produce, partial(self._sent_quietly, topic, partition))

    def _sent_quietly(self, topic: str, partition: int, records: int, complete: bool = True) -> None:
        assert self._quiet is not None
        counts = self.streams_producer.sent_by_topic
        counts[topic] = counts.get(topic, 0) + records
        self._quiet.sent((topic, partition), records)
        if not complete:  # no reported record follows these: they cannot be proved, start over
            self._quiet.forget((topic, partition))

    @property
    def records_sent_quietly(self) -> int:
        """Changelog records sent without a delivery report so far (:meth:`quiet_sender`)."""
        return 0 if self._quiet is None else self._quiet.total

    def direct_producer(self, topic: str) -> StreamsProducer | None:
        """The producer a fused sink to ``topic`` may hand its records to itself
        (:meth:`StreamsProducer.sends_directly`), or None where :attr:`send` does more."""
        producer = self.streams_producer
        return producer if self.send == producer.send and producer.sends_directly(topic) else None

    @property
    def produced(self) -> dict[str, int]:
        """Records sent per topic (sinks, changelogs, dead letters: the metrics pick the sinks)."""
        return self.streams_producer.sent_by_topic

    def on_delivery(self, err: Any, msg: Any) -> None:
        """Delivery report callback (set as the producer's ``on_delivery``)."""
        if err is not None:
            self._delivery_failed(err, msg)
            return
        topic = msg.topic()
        if topic in self.tracked_topics:
            key = (topic, msg.partition())
            offset = msg.offset()
            if offset > self.offsets.get(key, -1):
                self.offsets[key] = offset
                if key not in self.first_offsets:
                    self.first_offsets[key] = offset
            if self._quiet is not None:
                self._quiet.acknowledged(key, offset)

    def _on_delivery_counting_bytes(self, err: Any, msg: Any) -> None:
        """``on_delivery`` that also counts the key and value bytes of sink records (DEBUG)."""
        KafkaRecordCollector.on_delivery(self, err, msg)
        if err is None and msg.topic() not in self.tracked_topics:
            assert self.produced_bytes is not None
            self.produced_bytes[msg.topic()] += len(msg.key() or b"") + len(msg.value() or b"")

    def _delivery_failed(self, err: Any, msg: Any) -> None:
        where = f"{msg.topic()}[{msg.partition()}]: {err}"
        record: OutgoingRecord = (
            msg.topic(),
            msg.key(),
            msg.value(),
            msg.timestamp()[1],
            msg.headers() or [],
            msg.partition(),
        )
        if msg.topic() == self.production_handler.dead_letter_topic and _size_error(err):
            if self.eos:  # held for the commit, so reported without its own callback
                self._dead_letter_refused_in_transaction(record, where)
            else:  # not sent by _send_dead_letter: its headers are lost
                self._dead_letter_again(record, where)
            return
        dead_letter = msg.topic() == self.production_handler.dead_letter_topic
        if msg.topic() in self.tracked_topics or self.eos or dead_letter:
            self._remember(where)
            return
        try:  # reported after the send: which input record it was sent for is not known
            response = self.production_handler.handle(
                _FailedRecord(record, None), _DeliveryError(str(err)), self._output_topic(record)
            )
        except Exception as exc:  # the dead-letter send itself failed
            self._remember(f"{where} (dead-letter send failed: {exc})")
            return
        if response is HandlerResponse.FAIL:
            self._remember(where)
        else:
            self.records_skipped += 1

    def on_send_error(self, record: OutgoingRecord, exc: BaseException) -> None:
        """A record the producer refused locally (at the send, or the EOS commit): handler decides."""
        topic = record[0]
        if topic in self.tracked_topics:
            raise ProductionError(f"changelog record for {topic} refused by the producer: {exc}") from exc
        if topic == self.production_handler.dead_letter_topic:
            if not _size_error(as_kafka_error(exc)):
                raise ProductionError(f"dead-letter record refused by the producer: {exc}") from exc
            self._dead_letter_again(record, f"{topic}: {exc}")
            return
        source = None if self.source is None else self.source.current
        if source is None and self._check_sizes_and_retry(exc):
            raise TaskCorruptedError(
                [],
                f"a record for {topic} was refused at the commit ({exc}); processing the input "
                "again to find the input record it was sent for",
            )
        if self._checking_sizes:
            self._checked_refusal = True
        failed = _FailedRecord(record, source)
        if self.production_handler.handle(failed, exc, self._output_topic(record)) is HandlerResponse.FAIL:
            raise ProductionError(f"record for {topic} refused by the producer: {exc}") from exc
        self.records_skipped += 1

    def _check_sizes_and_retry(self, exc: BaseException) -> bool:
        """Refused for its size at the commit of held records: check sizes as records are held
        from now on, and say so (True: the caller aborts the transaction)."""
        producer = self.streams_producer
        if not self.eos or producer.eager or self._checking_sizes or not _size_error(as_kafka_error(exc)):
            return False
        self._checking_sizes, self._checked_refusal = True, False
        producer.check_sizes(True)
        self.send = producer.send
        return True

    @staticmethod
    def _output_topic(record: OutgoingRecord) -> list[tuple[str, bytes | None]]:
        return [(HEADER_OUTPUT_TOPIC, record[0].encode())]

    def _dead_letter_max_bytes(self) -> int:
        limits = [self.streams_producer.max_message_bytes or _PRODUCER_MAX_BYTES]
        topic_limit = self._topic_max_bytes() if self._topic_max_bytes is not None else None
        if topic_limit:
            limits.append(topic_limit)
        return min(limits)

    def _lower_dead_letter_limit(self, record: OutgoingRecord) -> None:
        """A dead letter was refused for its size: ask the broker for the topic's limit again
        (it may have changed since the start); if that does not explain it (a limit the
        broker does not report), halve the refused record's size."""
        limit = self.dead_letter_limit
        if limit is None:
            return
        now = self._dead_letter_max_bytes()
        if now < limit.max_bytes:
            limit.max_bytes = now
        else:
            limit.lower(record_size(record[1], record[2], record[4]))

    def _send_dead_letter(self, *record: *OutgoingRecord) -> None:
        """How the handlers send dead letters: reported one by one, with the record itself
        (delivery reports carry no headers, and a dead letter without them is useless)."""
        self.streams_producer.send_with_report(partial(self._dead_letter_reported, record), *record)

    def _dead_letter_reported(self, record: OutgoingRecord, err: Any, msg: Any) -> None:
        if err is None:
            return
        where = f"{msg.topic()}[{msg.partition()}]: {err}"
        if not _size_error(err):
            self._remember(where)
        elif self.eos:
            self._dead_letter_refused_in_transaction(record, where)
        else:
            self._dead_letter_again(record, where)

    def _dead_letter_refused_in_transaction(self, record: OutgoingRecord, where: str) -> None:
        """The transaction is lost: abort it, process the input again, cut smaller."""
        self._lower_dead_letter_limit(record)
        self._refused_dead_letters.append(where)
        # the refused record used a sequence number of its partition that no write will ever
        # fill: librdkafka fails the next transaction's writes there (OUT_OF_ORDER_SEQUENCE_NUMBER)
        # unless a new producer (a new epoch) writes them
        self.streams_producer.needs_reset = True

    def _dead_letter_again(self, record: OutgoingRecord, where: str) -> None:
        """A dead letter refused for its size although it was cut to the limit: lower the
        limit and send it again cut to the new one; drop it (logged) if nothing is left to cut."""
        limit = self.dead_letter_limit
        topic, key, value, timestamp, headers, _ = record
        already_cut = any(name == HEADER_PAYLOAD_TRUNCATED for name, _ in headers or ())
        if limit is None or (already_cut and key is None and value is None):
            log.warning("dead letter dropped: refused for its size with no payload left to cut (%s)", where)
            return
        self._lower_dead_letter_limit(record)
        own = [(n, v) for n, v in headers or () if n != HEADER_PAYLOAD_TRUNCATED]
        key, value, cut_headers, cut = limit.fit(key, value, own)
        if cut is None:  # small enough: refused with a larger one it was batched with
            self._send_dead_letter(*record)
            return
        self.production_handler.dead_letters_truncated += 1
        limit.warn_once(cut, f"a dead letter refused for its size ({where})", topic)
        self._send_dead_letter(topic, key, value, timestamp, cut_headers, None)

    def _remember(self, error: str) -> None:
        if len(self.errors) < 10:
            self.errors.append(error)

    def partition_count(self, topic: str) -> int:
        return self._partition_count(topic)

    def poll(self) -> None:
        """Serve pending delivery reports without waiting."""
        self.streams_producer.poll()

    def flush(self) -> None:
        """Wait until every record is acknowledged; raise if any failed."""
        self.streams_producer.flush()
        if self._quiet is not None:
            for lost in self._quiet.check(self.offsets):
                self._remember(lost)
        self.raise_if_failed()

    def forget_first_offsets(self, partitions: Iterable[tuple[str, int]]) -> None:
        """A task instance begins: its first writes to ``partitions`` are the next ones
        acknowledged. Records still in flight (an earlier instance closed dirty) are waited
        for first, so that none of theirs is taken for the new instance's."""
        partitions = list(partitions)
        if not partitions:
            return  # no changelog: nothing to wait for
        try:  # bounded: this runs in the rebalance callback
            self.streams_producer.flush(timeout_s=_IN_FLIGHT_WAIT_S)
            first = None
        except StreamsError as exc:  # unknown which reports are still to come: claim nothing
            log.warning("could not wait for records in flight (%s): no changelog ranges this time", exc)
            first = _NEVER
        for tp in partitions:
            if first is None:
                self.first_offsets.pop(tp, None)
            else:
                self.first_offsets[tp] = first
            if self._quiet is not None:
                self._quiet.forget(tp, in_flight=first == _NEVER)

    def raise_if_failed(self) -> None:
        refused, self._refused_dead_letters = self._refused_dead_letters, []
        if self.errors:
            errors, self.errors = self.errors, []
            raise ProductionError("records could not be written: " + "; ".join(errors))
        if refused:  # only dead letters too large: the worker aborts, its tasks process again
            raise TaskCorruptedError(
                [], "dead letters refused for their size, written again cut: " + "; ".join(refused)
            )

    def commit_transaction(
        self, offsets: list[Any], group_metadata: Any, before_commit: Callable[[], None]
    ) -> bool:
        """Exactly-once: one transaction with the buffered records and the input offsets."""
        committed = self.streams_producer.commit(
            offsets, group_metadata, before_commit=before_commit, check_delivery=self.raise_if_failed
        )
        if committed and self._checking_sizes and self._checked_refusal:
            self._checking_sizes = False  # the refused record was found and handled
            self.streams_producer.check_sizes(False)
            self.send = self.streams_producer.send
        return committed

    def abort(self) -> None:
        """Drop what the next transaction would have held; forget failures of it."""
        self.streams_producer.abort()
        self.errors = []
        self._refused_dead_letters = []


class _DeliveryError(Exception):
    """The broker rejected a record (the librdkafka error text)."""
