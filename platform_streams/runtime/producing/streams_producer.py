"""``StreamsProducer``: the worker's producer, and under exactly_once_v2 its transactions.

Kafka Streams keeps everything about exactly-once in one class of this name; so do we.
At-least-once: records are produced as they come and a commit waits until all are
acknowledged. Exactly-once (one transactional producer per worker, KIP-447 "v2"): a
commit is one transaction holding the output records, the changelog records and the
input offsets (``send_offsets_to_transaction`` with the consumer's group metadata).

Records of the next transaction are kept in memory and produced when the commit runs
(begin -> produce -> flush -> send offsets -> fencing check -> commit). Why not produce
them as they come, like Kafka Streams: on a broker that does not abort transactions the
way Kafka does (some deliver records sent before an explicit abort, and commit a dead
producer's open transaction when its transactional.id comes back), a record already sent
can no longer be taken back. Deferring the sends makes an abort before the commit exact
on every broker (nothing was sent) and keeps the window in which a killed process leaves
an open transaction behind to the few milliseconds of the commit itself. The price is
memory for one commit interval of records (100 ms by default under EOS); when more than
``max_buffered`` records wait, the producer asks the worker for an early commit.

Where the broker aborts a fenced producer's open transaction (probed at start:
``aborts_fenced_transactions``, Apache Kafka), a sent record can always be taken back, so
``eager`` producers work as Kafka Streams does: a transaction is open at all times and each
record is produced as it comes, overlapping the sends with processing; the commit then only
waits for the acknowledgements, adds the offsets and commits.

At-least-once with changelogs, the worker may hand over a second configuration
(``changelog_conf``): changelog records then go to a producer of their own that reports
deliveries (a checkpoint needs the offset written), while sinks, repartition topics and dead
letters go to a producer that reports failures only (``delivery.report.only.error``). With
``quiet_changelogs`` (an idempotent changelog producer) a record sent through
:attr:`quiet_produce` gets no report at all: a cache flush sends all its records but the
last that way, and the collector proves them written by the last one's offset. A
success report costs a Python callback per record (~1 us with librdkafka's own work); a sink
record's success tells nothing anyone reads. Kafka Streams uses one producer per thread; the
split changes no order that Kafka keeps (order is per partition, and a partition's records
all go through one of the two). Exactly-once keeps one producer: a transaction is one
producer's.

Exactly-once with ``changelog_reports_only`` and records held for the commit: the producer
has no delivery callback of its own; the last record of each changelog partition in a
commit carries one (the checkpoint needs that offset), so the other records cost no Python
callback. A failed record still fails the commit: librdkafka counts it and puts the
transaction in an abortable state, and the commit raises (the worker rebuilds its tasks).
What is lost is the record's own error text; so the first abortable failure switches the
producer back to a report per record (it is replaced), and a record that fails again is
named, fatally, as before. An eager producer reports every record: it keeps sending after a
failed record, and the transaction refuses those sends before a commit could name it.

Failures are sorted by :mod:`platform_streams.runtime.broker_calls`: transient ones are
retried for ``task_timeout_ms``; on a fenced producer or a fatal error the producer must be
:meth:`reset` (a new instance, ``init_transactions`` again) before the worker rejoins.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import partial
from typing import Any, Unpack

from platform_streams.errors import ProducerFencedError, StreamsError, StreamsTimeoutError, TaskCorruptedError
from platform_streams.kafka import KafkaError, KafkaException, create_producer
from platform_streams.processor.dead_letters import message_size
from platform_streams.processor.record import Headers
from platform_streams.processor.record_collector import OutgoingRecord
from platform_streams.runtime.broker_calls import Outcome, classify, retrying, translate

__all__ = ["StreamsProducer"]

log = logging.getLogger(__name__)

#: one broker call of the transactional API may take this long before it is retried
_CALL_TIMEOUT_S = 10.0


class StreamsProducer:
    """Owns one Kafka producer; ``send`` is the hot path, ``commit`` the transaction."""

    def __init__(
        self,
        conf: Mapping[str, Any],
        *,
        transactional_id: str | None,
        on_delivery: Callable[[Any, Any], None],
        on_send_error: Callable[[OutgoingRecord, BaseException], None],
        timeout_s: float,
        max_buffered: int = 100_000,
        eager: bool = False,
        changelog_conf: Mapping[str, Any] | None = None,
        changelog_topics: Collection[str] = (),
        changelog_reports_only: bool = False,
        quiet_changelogs: bool = False,
    ) -> None:
        if changelog_conf is not None and transactional_id is not None:
            raise StreamsError("a transaction is one producer's: changelog_conf is at-least-once only")
        #: at-least-once, split: the changelog producer has no delivery callback of its own
        #: (see the module docstring); :attr:`quiet_produce` is its bare ``produce``
        self._quiet_changelogs = quiet_changelogs and changelog_conf is not None
        #: librdkafka's ``produce`` of the changelog producer, sending without a report (None
        #: unless ``quiet_changelogs``); replaced when the producer is rebuilt
        self.quiet_produce: Any = None
        self._conf = dict(conf)
        self._changelog_conf = None if changelog_conf is None else dict(changelog_conf)
        #: exactly-once: delivery reports for changelog records only (see the module docstring)
        # deferred sends only: an eager producer keeps sending after a failed record, and the
        # transaction then refuses every send (_STATE) before the commit could name the record
        self._changelog_reports_only = changelog_reports_only and transactional_id is not None and not eager
        #: topics sent through ``_produce_changelog`` (empty: every record the same way)
        self._changelog_topics = (
            frozenset(changelog_topics)
            if changelog_conf is not None or self._changelog_reports_only
            else frozenset()
        )
        self.transactional_id = transactional_id
        self.eos = transactional_id is not None
        #: EOS sends as records come, in an always open transaction (see the module docstring)
        self.eager = self.eos and eager
        #: eager only: records sent when the open transaction began (see ``_holds_anything``)
        self._sent_at_begin = 0
        #: eager only: the open transaction has offsets in it (an abort must reach the broker)
        self._offsets_in_transaction = False
        self._on_delivery = on_delivery
        self._on_send_error = on_send_error
        self._timeout_s = timeout_s
        self._max_buffered = max_buffered
        self._buffer: list[OutgoingRecord] = []
        self._in_transaction = False
        #: set when the producer is fenced or failed fatally: call :meth:`reset` before reuse
        self.needs_reset = False
        #: records handed to librdkafka so far, per topic (the topic-level records-produced
        #: metric): a plain dict, counted in place of a plain total (see ``_produce_now``)
        self.sent_by_topic: dict[str, int] = {}
        self.transactions_committed = 0
        self.transactions_aborted = 0
        self.producer: Any = None
        self._produce: Any = None
        #: the changelog records' producer: ``producer`` itself unless ``changelog_conf`` was given
        self.changelog_producer: Any = None
        self._produce_changelog: Any = None
        self._create()
        #: the collector's send: buffered for the next transaction, or produced now
        self.send: Callable[[Unpack[OutgoingRecord]], None] = (
            self._buffer_record if self.eos and not self.eager else self._produce_now
        )

    # -- lifecycle --------------------------------------------------------------------------

    def _create(self) -> None:
        reports_only_changelogs = self._changelog_reports_only
        producer = create_producer(
            self._conf if reports_only_changelogs else {**self._conf, "on_delivery": self._on_delivery}
        )
        if self.eos:
            # Kafka aborts (some brokers commit) whatever a previous incarnation with this
            # transactional.id left open, and fences that incarnation if it is still alive.
            retrying(
                lambda: producer.init_transactions(_CALL_TIMEOUT_S), "init_transactions", self._timeout_s
            )
        self.producer = producer
        self._produce = producer.produce
        quiet = self._quiet_changelogs
        if self._changelog_conf is None:
            self.changelog_producer = producer
        elif quiet:
            self.changelog_producer = create_producer(self._changelog_conf)
            self.quiet_produce = self.changelog_producer.produce
        else:
            changelog_conf = {**self._changelog_conf, "on_delivery": self._on_delivery}
            self.changelog_producer = create_producer(changelog_conf)
        self._produce_changelog = (
            partial(self.changelog_producer.produce, on_delivery=self._on_delivery)
            if reports_only_changelogs or quiet
            else self.changelog_producer.produce
        )
        if self.eager:
            self._begin()

    def _begin(self) -> None:
        """Open the next transaction (eager EOS): local to librdkafka, no broker call."""
        self.producer.begin_transaction()
        self._in_transaction = True
        self._sent_at_begin = self.sent
        self._offsets_in_transaction = False

    @property
    def holds_records(self) -> bool:
        """Whether the next commit's transaction has records in it (exactly-once)."""
        return bool(self._buffer) or (self.eager and self.sent > self._sent_at_begin)

    @property
    def _holds_anything(self) -> bool:
        """Eager only: whether the open transaction has records or offsets in it (derived from
        the per-topic counts, so the at-least-once send path counts nothing extra)."""
        return self._offsets_in_transaction or self.sent > self._sent_at_begin

    def reset(self) -> None:
        """Replace a fenced or failed producer (records not yet sent are dropped)."""
        self._buffer = []
        self._in_transaction = False
        self.needs_reset = False
        for old in self._producers:
            try:
                old.purge()
                old.flush(0)
            except Exception as exc:  # a fatal producer may refuse anything
                log.debug("discarding the old producer: %s", exc)
        self._create()

    @property
    def _producers(self) -> list[Any]:
        """The librdkafka producers: one, or the sinks' and the changelogs' (see the module
        docstring); none once closed."""
        if self.producer is None:
            return []
        if self.changelog_producer is self.producer or self.changelog_producer is None:
            return [self.producer]
        return [self.producer, self.changelog_producer]

    def close(self, timeout_s: float = 10.0) -> None:
        """Abort what is not committed (EOS) or wait for outstanding records (at-least-once),
        then let the librdkafka producer go.

        Dropping every reference (the producers and their bound ``produce``) destroys the
        clients now: they hold this object's delivery callback, so left in place they would
        live (and keep reconnecting to a broker that may be gone) until the garbage collector
        breaks the cycle. Sending after ``close`` is an error; closing twice does nothing.
        """
        if self.producer is None:
            return
        try:
            if self.eos:
                self.abort()
            else:
                self._flush_all(self._producers, timeout_s)
        finally:
            self.producer = self.changelog_producer = None
            self._produce = self._produce_changelog = self.quiet_produce = None

    @staticmethod
    def _flush_all(producers: list[Any], timeout_s: float) -> None:
        """Flush each producer, the next one even if one raised (the first error is raised)."""
        if producers:
            try:
                producers[0].flush(timeout_s)
            finally:
                StreamsProducer._flush_all(producers[1:], timeout_s)

    @property
    def max_message_bytes(self) -> int | None:
        """The producer's ``message.max.bytes`` when set (the largest record it sends)."""
        value = self._conf.get("message.max.bytes")
        return None if value is None else int(value)

    @property
    def sent(self) -> int:
        """Records handed to librdkafka so far."""
        return sum(self.sent_by_topic.values())

    # -- sending ----------------------------------------------------------------------------

    def sends_directly(self, topic: str) -> bool:
        """Whether a record for ``topic`` only goes to librdkafka's ``produce`` (``_produce``,
        replaced when the producer is rebuilt) and is counted in :attr:`sent_by_topic`:
        at-least-once and eager exactly-once, a topic that is no changelog. A fused sink
        then does that itself and calls :meth:`send` only for a record librdkafka refuses
        (a full queue, too large): a Python call less a record (processor/fusion.py)."""
        return self.send == self._produce_now and topic not in self._changelog_topics

    def send_refused(self, exc: BaseException, *record: *OutgoingRecord) -> None:
        """What :meth:`_produce_now` does with a record whose ``produce`` raised ``exc``, for a
        fused sink that called ``produce`` itself (:meth:`sends_directly`): count the record,
        then wait for room and produce it (``BufferError``), give it to the production handler
        (``KafkaException``: refused locally), or raise ``exc``. The record is not offered to
        ``produce`` a second time first, so the handler sees the error that refused it."""
        topic = record[0]
        self.sent_by_topic[topic] = self.sent_by_topic.get(topic, 0) + 1
        self._refused(record, exc)

    def _refused(self, record: OutgoingRecord, exc: BaseException) -> None:
        """A record ``produce`` did not queue: wait for room and produce it (``BufferError``),
        give it to the production handler (``KafkaException``: refused locally), or raise."""
        if isinstance(exc, BufferError):
            self._produce_when_room(record)
        elif isinstance(exc, KafkaException):
            self._on_send_error(record, exc)
        else:
            raise exc

    def _buffer_record(self, *record: *OutgoingRecord) -> None:
        self._buffer.append(record)

    def send_with_report(self, on_delivery: Callable[[Any, Any], None], *record: *OutgoingRecord) -> None:
        """Send a record (not a changelog's) with a delivery callback of its own, for the rare
        record whose sender must have it back if it is refused (a dead letter: delivery reports
        carry no headers). Records held for the commit are held as :attr:`send` holds them
        (a refused one fails the commit); else produced now."""
        if self.send != self._produce_now:
            self.send(*record)
            return
        topic, key, value, timestamp, headers, partition = record
        self.sent_by_topic[topic] = self.sent_by_topic.get(topic, 0) + 1
        while True:
            try:
                self._produce(
                    topic,
                    value,
                    key,
                    -1 if partition is None else partition,
                    on_delivery=on_delivery,
                    timestamp=timestamp,
                    headers=headers or None,
                )
                return
            except BufferError:
                self.producer.poll(0.05)
            except KafkaException as exc:
                self._on_send_error(record, exc)
                return

    def check_sizes(self, on: bool) -> None:
        """Records held for the commit (deferred exactly-once): whether each is checked against
        ``message.max.bytes`` as it is held, so that a record too large is refused while the
        task that sent it still knows its input record, rather than at the commit. Off unless
        asked for (a size computation per record); the collector asks after a refusal at the
        commit (kafka_record_collector.py). Replaces :attr:`send`: the caller rebinds its copy."""
        if self.eos and not self.eager:
            self.send = self._buffer_checked if on else self._buffer_record

    def _buffer_checked(self, *record: *OutgoingRecord) -> None:
        topic, key, value, _, headers, _ = record
        limit = self.max_message_bytes or 1_000_000
        if message_size(key, value, headers) <= limit:
            self._buffer.append(record)
            return
        self.sent_by_topic[topic] = self.sent_by_topic.get(topic, 0) + 1  # as _produce_now counts it
        refused = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, f"record larger than message.max.bytes {limit}")
        self._on_send_error(record, KafkaException(refused))

    def _produce_now(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        partition: int | None,
    ) -> None:
        """Count one record and hand it to librdkafka: at once under at-least-once (and eager
        exactly-once), at the commit under deferred exactly-once (:meth:`_send_buffered`).

        A full local queue waits for room (:meth:`_produce_when_room`). A record librdkafka
        refuses locally (too large, unknown topic) goes to the production handler the same
        way under both guarantees: it raises to fail, or returns to leave the record out (and
        dead-letters it without a value that was too large, see the collector). The record
        arrives as arguments, not a tuple: this runs once per record sent.
        """
        try:  # a dict item, not a Counter: a dict subclass is 3x slower to update per record
            self.sent_by_topic[topic] += 1
        except KeyError:
            self.sent_by_topic[topic] = 1
        try:
            if topic not in self._changelog_topics:
                # librdkafka's own produce, positional only: (topic, value, key, partition -- -1
                # any --, callback, on_delivery -- None: the producer's --, timestamp, headers);
                # keywords cost ~0.45 us more a call (bench/RESULTS.md)
                self._produce(
                    topic,
                    value,
                    key,
                    -1 if partition is None else partition,
                    None,
                    None,
                    timestamp,
                    headers or None,
                )
            elif headers:  # may bind ``on_delivery`` by keyword (a partial): keywords here
                if partition is None:
                    self._produce_changelog(topic, value, key, timestamp=timestamp, headers=headers)
                else:
                    self._produce_changelog(
                        topic, value, key, partition, timestamp=timestamp, headers=headers
                    )
            elif partition is None:
                self._produce_changelog(topic, value, key, timestamp=timestamp)
            else:
                self._produce_changelog(topic, value, key, partition, timestamp=timestamp)
        except (BufferError, KafkaException) as exc:
            self._refused((topic, key, value, timestamp, headers, partition), exc)

    def _produce_when_room(self, record: OutgoingRecord) -> None:
        """The local queue is full: serve delivery reports until the record fits."""
        topic, key, value, timestamp, headers, partition = record
        args = (topic, value, key) if partition is None else (topic, value, key, partition)
        changelog = topic in self._changelog_topics
        producer = self.changelog_producer if changelog else self.producer
        produce = self._produce_changelog if changelog else self._produce
        while True:
            producer.poll(0.05)
            try:
                produce(*args, timestamp=timestamp, headers=headers)
                return
            except BufferError:
                continue

    @property
    def buffered(self) -> int:
        """Records waiting for the next transaction (always 0 under at-least-once)."""
        return len(self._buffer)

    @property
    def commit_needed(self) -> bool:
        """True when so many records wait that the worker should commit now."""
        return len(self._buffer) >= self._max_buffered

    def poll(self) -> None:
        """Serve delivery reports without waiting."""
        self.producer.poll(0)
        if self.changelog_producer is not self.producer:
            self.changelog_producer.poll(0)

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every produced record is acknowledged (retrying through broker outages);
        one deadline (``timeout_s``, else task_timeout_ms) for both producers of a split."""
        deadline = time.monotonic() + (self._timeout_s if timeout_s is None else timeout_s)
        for producer in self._producers:
            self._flush_one(producer, deadline)

    def _flush_one(self, producer: Any, deadline: float) -> None:
        while True:
            try:
                remaining = producer.flush(min(5.0, max(0.1, deadline - time.monotonic())))
            except SystemError as exc:
                # without an error_cb, confluent_kafka raises a fatal producer error (fenced: a
                # transaction that outlived transaction.timeout.ms) from flush, and a delivery
                # report served meanwhile turns it into a SystemError: the cause is the failure
                if isinstance(exc.__cause__, KafkaException):
                    raise translate(exc.__cause__, "flush") from exc.__cause__
                raise
            if not remaining:
                return
            if time.monotonic() >= deadline:
                raise StreamsTimeoutError(
                    f"{remaining} record(s) not acknowledged within {self._timeout_s:.0f}s (task_timeout_ms)"
                )
            log.warning("%d record(s) still waiting for the broker; retrying", remaining)

    # -- transactions -----------------------------------------------------------------------

    def commit(
        self,
        offsets: Sequence[Any],
        group_metadata: Any,
        *,
        before_commit: Callable[[], None],
        check_delivery: Callable[[], None],
    ) -> bool:
        """Commit the buffered records and ``offsets`` as one transaction (EOS only).

        ``check_delivery`` raises if a record failed (after the flush); ``before_commit`` is
        the last check that this worker still owns its tasks (it raises TaskMigratedError).
        Returns False when there was nothing to commit. On any failure the transaction is
        aborted (or the producer marked for :meth:`reset`) and the error is raised.
        """
        if not self.eos:
            raise StreamsError("commit() is the exactly-once path; at-least-once commits through flush()")
        buffer, self._buffer = self._buffer, []
        if not (buffer or offsets or (self.eager and self._holds_anything)):
            return False
        try:
            if self.eager:  # the records are sent already, in the open transaction
                if not self._in_transaction:  # an earlier commit failed after its commit_transaction
                    self._begin()
                self._offsets_in_transaction = True  # an abort must reach the broker
            else:
                self.producer.begin_transaction()
                self._in_transaction = True
                self._send_buffered(buffer)
            self._finish(offsets, group_metadata, before_commit, check_delivery)
        except BaseException as exc:
            self._failed(exc)
            raise
        self._in_transaction = False
        self.transactions_committed += 1
        if self.eager:
            try:
                self._begin()  # the next transaction opens at once
            except KafkaException as exc:
                # committed, but nothing may be sent before the producer is replaced: the
                # worker handles this like a failed commit (its tasks' state is consistent)
                self.needs_reset = True
                raise translate(exc, "begin_transaction") from exc
        return True

    def _send_buffered(self, buffer: list[OutgoingRecord]) -> None:
        """Produce the records held for this transaction (and dead letters added meanwhile)."""
        send = self._produce_now
        while buffer:
            if self._changelog_reports_only and self._changelog_topics:
                self._send_reporting_last(buffer)
            else:
                for record in buffer:
                    send(*record)
            buffer, self._buffer = self._buffer, []

    def _send_reporting_last(self, buffer: list[OutgoingRecord]) -> None:
        """Produce ``buffer`` with a delivery report for the last record of each changelog
        partition only: the offset a checkpoint needs is that one's. The others are in the
        same transaction of the same producer, so they are all written or the commit fails.

        ``_produce_now`` takes changelog records' produce from ``_produce_changelog``; it is
        the reporting one for those last records and the plain one for the rest (restored
        afterwards, also on failure).
        """
        changelogs = self._changelog_topics
        last = {(record[0], record[5]): i for i, record in enumerate(buffer) if record[0] in changelogs}
        send, reporting, plain = self._produce_now, self._produce_changelog, self._produce
        start = 0
        try:
            for i in sorted(last.values()):  # the plain runs between them without a check per record
                self._produce_changelog = plain
                for record in buffer[start:i]:
                    send(*record)
                self._produce_changelog = reporting
                send(*buffer[i])
                start = i + 1
            self._produce_changelog = plain
            for record in buffer[start:]:
                send(*record)
        finally:
            self._produce_changelog = reporting

    def _finish(
        self,
        offsets: Sequence[Any],
        group_metadata: Any,
        before_commit: Callable[[], None],
        check_delivery: Callable[[], None],
    ) -> None:
        """The open transaction's last steps: acknowledged records, offsets, fencing check, commit."""
        self.flush()
        check_delivery()
        if offsets:
            retrying(
                lambda: self.producer.send_offsets_to_transaction(offsets, group_metadata, _CALL_TIMEOUT_S),
                "send_offsets_to_transaction",
                self._timeout_s,
            )
        before_commit()
        retrying(
            lambda: self.producer.commit_transaction(_CALL_TIMEOUT_S),
            "commit_transaction",
            self._timeout_s,
        )

    def _failed(self, exc: BaseException) -> None:
        """A commit failed: abort, or mark a fenced or fatally failed producer for :meth:`reset`.

        With delivery reports for changelog records only, an abortable failure may be a sink
        record the broker refused, unreported: the producer is replaced by one reporting
        every record, so that a record failing again is named (the module docstring).
        """
        if is_fatal_for_producer(exc):
            self._in_transaction = False  # nothing to abort with: the producer is replaced
            self.needs_reset = True
        else:
            self.abort()
            if self._changelog_reports_only and isinstance(exc, TaskCorruptedError):
                log.warning(
                    "the transaction failed (%s); a record without a delivery report may have been "
                    "refused: reporting every delivery from now on (the producer is replaced)",
                    exc,
                )
                # the routing stays as it is (consistent) until reset() creates the new producer
                self._changelog_reports_only = False
                self.needs_reset = True

    def abort(self) -> None:
        """Drop the records of the next transaction and abort the open one, if any.

        A fenced or fatally failed producer cannot abort: it is marked for :meth:`reset`.
        """
        self._buffer = []
        if not self._in_transaction:
            return
        if self.eager and not self._holds_anything:
            return  # an eager producer's open transaction holds nothing yet: keep it
        self._in_transaction = False
        self.transactions_aborted += 1
        try:
            retrying(
                lambda: self.producer.abort_transaction(_CALL_TIMEOUT_S), "abort_transaction", self._timeout_s
            )
        except StreamsError as exc:
            log.warning("could not abort the transaction (%s); the producer will be replaced", exc)
            self.needs_reset = True
        except KafkaException as exc:  # pragma: no cover - retrying translates these
            log.warning("could not abort the transaction (%s)", translate(exc, "abort_transaction"))
            self.needs_reset = True
        if self.eager and not self.needs_reset:
            try:
                self._begin()
            except KafkaException as exc:
                log.warning("could not open the next transaction (%s); the producer will be replaced", exc)
                self.needs_reset = True


def is_fatal_for_producer(exc: BaseException) -> bool:
    """True if ``exc`` leaves the producer unusable (fenced, fatal): it must be reset."""
    if isinstance(exc, ProducerFencedError):
        return True
    cause = exc.__cause__
    return cause is not None and classify(cause) in (Outcome.FENCED, Outcome.FATAL)
