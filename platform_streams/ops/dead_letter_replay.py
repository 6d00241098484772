"""Dead-letter replay: send dead-lettered records back to their source topic, exactly once.

``platform-streams dlq replay APP`` (and the ``<app>_dlq_replay`` Dagster job) reads the
application's dead-letter topic (``errors_dead_letter_queue_topic_name``) and re-injects each
dead letter's key, value, timestamp and own headers into the topic its KIP-1034 headers name
(``__streams.errors.topic``, into partition ``__streams.errors.partition``), or into one
explicit replay topic (partitioned by key, as the Java client does).

Exactly once per record: a transactional producer (``transactional.id`` = the replay group)
writes the replayed records and commits the replay group's position on the dead-letter topic
in the same transaction (``send_offsets_to_transaction``), and the dead-letter topic is read
with read_committed. A replay killed at any point and run again starts from the last
committed position; the killed run's open transaction is aborted by the broker when the next
run's producer registers (Apache Kafka). The embedded broker commits it instead (the
README's table of the embedded broker's differences); the next run finds those records in
its targets and does not send them again (:mod:`.dead_letter_transactions`). A reader of
the targets must read read_committed not to see the aborted records (the result warns when
the application reads read_uncommitted).

The position belongs to the filter: the replay group is ``<application.id>-dlq-replay-<hash>``
of the dead-letter topic, the error classes, the time range and the replay topic. A record the
filter skips moves that group's position (it is not that replay's business), so another
filter -- another group -- still sees it. Two overlapping filters (class A, then every class)
both replay the overlap: replay disjoint filters, or one filter at a time to completion.

A production error's dead letter (``__streams.errors.output.topic``) with a source carries the
input record's raw key and value, as Kafka Streams' production handlers write it, and is
replayed like any other. Never replayed, always reported: dead letters cut to fit
(``__streams.errors.payload.truncated``: their value is null, the full record is still in the
source topic), dead letters without a source (punctuation, a cache flush, a record held for an
exactly-once commit: null topic, partition -1 -- a production error's is then the refused
output record), and -- without a replay topic -- dead letters whose source is
not a topic the application reads (a source, global or repartition topic of its topology):
the replay writes to nothing else. The replay reads up to the log end seen when it starts.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.errors import StreamsConfigError
from platform_streams.kafka import (
    OFFSET_BEGINNING,
    KafkaAdmin,
    KafkaException,
    Message,
    TopicPartition,
    create_consumer,
    log_end_offsets,
    read_partition_range,
    to_broker_error,
)
from platform_streams.ops.dead_letter_reading import READER, DeadLetter, decode, headers_of, read_dead_letters
from platform_streams.ops.dead_letter_transactions import CLOSED, TP, ReplayTransactions
from platform_streams.ops.offsets import parse_datetime_ms
from platform_streams.ops.results import OperationRefusedError, OpsResult
from platform_streams.ops.topics import AppLike, as_plan, internal_topic_kinds

__all__ = [
    "HEADER_REPLAY_DEAD_LETTER",
    "HEADER_REPLAY_GROUP",
    "HEADER_REPLAY_SOURCE",
    "ReplayFilter",
    "ReplayOptions",
    "ReplayResult",
    "replay_dead_letters",
    "replay_group_id",
]

log = logging.getLogger(__name__)

#: on every replayed record: ``topic:partition:offset`` of the record that failed ...
HEADER_REPLAY_SOURCE = "__streams.replay.source"
#: ... and of its dead letter (what an operator greps for when a replay is questioned)
HEADER_REPLAY_DEAD_LETTER = "__streams.replay.dead.letter"
#: ... and the replay group that sent it (a restarted replay looks for its own records)
HEADER_REPLAY_GROUP = "__streams.replay.group"
_ERRORS_PREFIX = "__streams.errors."

#: why a dead letter was not replayed
SKIP_FILTERED = "filtered"
SKIP_TRUNCATED = "truncated"
SKIP_NO_SOURCE = "no-source"
SKIP_FOREIGN = "foreign-topic"
SKIP_PARTITION = "no-such-partition"
SKIP_ALREADY = "already-replayed"

#: progress events a caller may watch (tests stop a replay at one): "sent" after each record,
#: "committed" after each transaction, with the number of records sent / committed so far
Progress = Callable[[str, int], None]


@dataclass(frozen=True)
class ReplayFilter:
    """Which dead letters to replay: by error class (``__streams.errors.exception``, the
    exception's class name) and by record timestamp (the failed record's own timestamp, which
    its dead letter carries), ``since_ms`` inclusive, ``until_ms`` exclusive."""

    error_classes: tuple[str, ...] = ()
    since_ms: int | None = None
    until_ms: int | None = None

    def matches(self, error_class: str | None, timestamp_ms: int) -> bool:
        if self.error_classes and error_class not in self.error_classes:
            return False
        if self.since_ms is not None and timestamp_ms < self.since_ms:
            return False
        return self.until_ms is None or timestamp_ms < self.until_ms

    @classmethod
    def parse(cls, error_classes: Sequence[str], since: str | None, until: str | None) -> ReplayFilter:
        """From the CLI's or the Dagster job's values: ISO 8601 times (StreamsConfigError if not)."""
        return cls(
            error_classes=tuple(error_classes),
            since_ms=None if since is None else parse_datetime_ms(since),
            until_ms=None if until is None else parse_datetime_ms(until),
        )

    def describe(self) -> str:
        parts = [f"error classes {', '.join(self.error_classes)}"] if self.error_classes else []
        parts += [f"timestamp >= {self.since_ms}"] if self.since_ms is not None else []
        parts += [f"timestamp < {self.until_ms}"] if self.until_ms is not None else []
        return "; ".join(parts) or "every dead letter"


@dataclass(frozen=True)
class ReplayOptions:
    filter: ReplayFilter = field(default_factory=ReplayFilter)
    #: send every replayed record here instead of its source topic
    replay_topic: str | None = None
    dry_run: bool = False
    #: how many would-be / replayed records the result lists
    show: int = 20
    #: records per transaction (and per committed position)
    transaction_records: int = 500
    #: the replay group (and transactional.id); default :func:`replay_group_id`
    group_id: str | None = None
    timeout_s: float = 30.0
    on_progress: Progress | None = None


@dataclass
class ReplayResult(OpsResult):
    """What a replay sent (or, dry, would send), and every dead letter it did not."""

    dead_letter_topic: str = ""
    group_id: str = ""
    filter: str = ""
    replay_topic: str | None = None
    #: per dead-letter partition: the position the replay started at and the end it read to
    start_offsets: dict[int, int] = field(default_factory=dict)
    end_offsets: dict[int, int] = field(default_factory=dict)
    read: int = 0
    replayed: int = 0
    #: every dead letter read, by error class
    by_error_class: dict[str, int] = field(default_factory=dict)
    #: the replayed (dry: to-be-replayed) ones, "error class -> target topic -> count"
    sent: dict[str, dict[str, int]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    #: the first ``show`` replayed records and every truncated / unreplayable one
    #: (coordinates and classes only: never a key or value)
    first: list[dict[str, Any]] = field(default_factory=list)
    not_replayed: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> str:
        verb = "would replay" if self.dry_run else "replayed"
        lines = self._header(f"Dead-letter replay of {self.dead_letter_topic!r}")
        lines.append(f"  group {self.group_id}; filter: {self.filter}")
        lines.append(f"  read {self.read} dead letters; {verb} {self.replayed}")
        for cls, targets in sorted(self.sent.items()):
            for topic, n in sorted(targets.items()):
                lines.append(f"    {cls} -> {topic}: {n}")
        for reason, n in sorted(self.skipped.items()):
            lines.append(f"  not replayed ({reason}): {n}")
        for item in self.not_replayed:
            if item["reason"] != SKIP_FILTERED:
                lines.append(
                    f"    {item['dead_letter']} ({item['error_class']}): {item['reason']} {item['detail']}"
                )
        if self.first:
            lines.append(f"  first {len(self.first)}:")
            lines += [f"    {r['dead_letter']} -> {r['target']} ({r['error_class']})" for r in self.first]
        return "\n".join(lines + self._footer())


def replay_group_id(application_id: str, dead_letter_topic: str, options: ReplayOptions) -> str:
    """``<application.id>-dlq-replay-<12 hex>``: one per dead-letter topic, filter and target."""
    f = options.filter
    key = "\0".join(
        [dead_letter_topic, ",".join(sorted(f.error_classes)), str(f.since_ms), str(f.until_ms),
         options.replay_topic or ""]
    )  # fmt: skip
    return f"{application_id}-dlq-replay-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _readable_topics(app: AppLike, application_id: str) -> set[str]:
    """Topics the application's topology reads: the only ones a dead letter may go back to."""
    plan = as_plan(app)
    repartition = {
        t for t, kind in internal_topic_kinds(plan, application_id).items() if kind == "repartition"
    }
    return {*plan.external_source_topics(), *plan.global_source_topics(), *repartition}


class _Replay:
    def __init__(
        self, app: AppLike, config: StreamsConfig, options: ReplayOptions, result: ReplayResult
    ) -> None:
        self.config, self.options, self.result = config, options, result
        self.readable = _readable_topics(app, config.application_id)
        self.partition_counts: dict[str, int | None] = {}
        self.admin = KafkaAdmin(config.admin_configs())
        #: dead letters (``partition:offset``) an interrupted run sent and the broker committed
        self.already: set[str] = set()

    def target(self, dl: DeadLetter, timestamp_ms: int) -> tuple[str | None, str]:
        """``(topic, "")`` to replay to, or ``(None, reason)``; ``detail`` goes in the result."""
        if not self.options.filter.matches(dl.error_class, timestamp_ms):
            return None, SKIP_FILTERED
        if dl.source is None:
            return None, SKIP_NO_SOURCE
        if dl.truncated is not None:
            return None, SKIP_TRUNCATED
        topic = self.options.replay_topic or dl.source[0]
        if self.options.replay_topic is None and topic not in self.readable:
            return None, SKIP_FOREIGN
        if self.options.replay_topic is None and dl.source[1] >= self.partition_counts_of(topic):
            return None, SKIP_PARTITION
        return topic, ""

    def partition_counts_of(self, topic: str) -> int:
        if topic not in self.partition_counts:
            self.partition_counts.update(self.admin.partition_counts([topic]))
        return self.partition_counts.get(topic) or 0

    def record_skip(self, dl: DeadLetter, reason: str) -> None:
        self.result.skipped[reason] = self.result.skipped.get(reason, 0) + 1
        if reason == SKIP_FILTERED:
            return
        detail = {
            SKIP_NO_SOURCE: "no source topic/partition/offset headers"
            + ("" if dl.output_topic is None else f" (the output record for {dl.output_topic})"),
            SKIP_TRUNCATED: f"cut to fit ({dl.truncated}); read the full record from the source",
            SKIP_FOREIGN: "the source is not a topic the application reads",
            SKIP_PARTITION: "the source partition does not exist",
            SKIP_ALREADY: "sent by an interrupted replay whose open transaction the broker committed",
        }[reason]
        source = None if dl.source is None else ":".join(map(str, dl.source))
        self.result.not_replayed.append(
            {"dead_letter": dl.where, "source": source, "error_class": dl.error_class, "reason": reason,
             "detail": detail}
        )  # fmt: skip


def replay_dead_letters(app: AppLike, config: StreamsConfig, options: ReplayOptions) -> ReplayResult:
    """Replay the application's dead letters (see the module docstring); a dry run sends and
    commits nothing. Refuses when the dead-letter or replay topic does not exist."""
    dlq = config.errors_dead_letter_queue_topic_name
    if dlq is None:
        raise StreamsConfigError(
            "errors_dead_letter_queue_topic_name is not set: the application has no dead letters"
        )
    if options.transaction_records < 1:
        raise StreamsConfigError(f"transaction_records must be >= 1, got {options.transaction_records}")
    group = options.group_id or replay_group_id(config.application_id, dlq, options)
    result = ReplayResult(
        operation="dlq-replay", application_id=config.application_id, dry_run=options.dry_run,
        dead_letter_topic=dlq, group_id=group, filter=options.filter.describe(),
        replay_topic=options.replay_topic,
    )  # fmt: skip
    replay = _Replay(app, config, options, result)
    if config.consumer_configs().get("isolation.level") != "read_committed" and options.replay_topic is None:
        result.warnings.append(
            "the application reads read_uncommitted (at_least_once): it also sees the records of a "
            "replay killed inside a transaction, which the broker aborts; run it exactly_once_v2 or "
            "with consumer_config isolation.level=read_committed"
        )
    try:
        counts = replay.admin.partition_counts(
            [dlq, *([options.replay_topic] if options.replay_topic else [])]
        )
        missing = [t for t, n in counts.items() if not n]
        if missing:
            result.warnings.append(f"topic(s) {', '.join(missing)} do not exist")
            raise OperationRefusedError(
                f"dead-letter replay: topic(s) {', '.join(missing)} do not exist", result
            )
        _run(replay, dlq, counts[dlq] or 0, group)
    finally:
        replay.admin.close()
    return result


def _consumer_conf(config: StreamsConfig, group: str) -> dict[str, Any]:
    conf = config.restore_consumer_configs()
    conf.update({**READER, "group.id": group, "client.id": f"{group}-consumer"})
    return conf


def _run(replay: _Replay, dlq: str, partitions: int, group: str) -> None:
    options, result = replay.options, replay.result
    conf = _consumer_conf(replay.config, group)
    ends = log_end_offsets(conf, [(dlq, p) for p in range(partitions)], options.timeout_s, admin=replay.admin)
    consumer = create_consumer(conf)
    producer = None
    try:
        committed = consumer.committed([TopicPartition(dlq, p) for p in range(partitions)], options.timeout_s)
        starts = {tp.partition: tp.offset if tp.offset >= 0 else OFFSET_BEGINNING for tp in committed}
        result.start_offsets = {p: max(o, 0) for p, o in starts.items()}
        result.end_offsets = {p: ends[(dlq, p)] for p in range(partitions)}
        if not options.dry_run:
            # even with nothing to replay: registering the transactional.id settles a killed
            # run's open transaction, which would hold back read_committed readers of its targets
            producer = ReplayTransactions(replay.config, group, consumer, dlq, options, _end_of(replay, conf))
            _find_already_sent(replay, producer, conf, group, dlq)
        todo = [p for p in range(partitions) if result.end_offsets[p] > result.start_offsets[p]]
        if todo:
            consumer.assign([TopicPartition(dlq, p, starts[p]) for p in todo])
            if producer is not None and options.replay_topic is not None:
                n = replay.partition_counts_of(options.replay_topic)
                producer.ensure_bounds([(options.replay_topic, p) for p in range(n)])
            for msg in read_dead_letters(consumer, result.end_offsets, set(todo), options.timeout_s):
                _one(replay, msg, producer)
        if producer is not None:
            producer.finish()
    except KafkaException as exc:
        if producer is not None:
            producer.abort()
        raise to_broker_error(exc, f"replay dead letters of {dlq}") from exc
    finally:
        consumer.close()


def _one(replay: _Replay, msg: Message, producer: ReplayTransactions | None) -> None:
    result = replay.result
    dl = decode(msg)
    timestamp = msg.timestamp()[1]
    result.read += 1
    cls = dl.error_class or "(none)"
    result.by_error_class[cls] = result.by_error_class.get(cls, 0) + 1
    topic, reason = replay.target(dl, timestamp)
    if topic is not None and dl.where in replay.already:
        topic, reason = None, SKIP_ALREADY
    if topic is not None and dl.source is not None:
        source = ":".join(map(str, dl.source))
        if producer is not None:
            headers = [(n, v) for n, v in headers_of(msg) if not n.startswith(_ERRORS_PREFIX)]
            headers += [(HEADER_REPLAY_SOURCE, source.encode()),
                        (HEADER_REPLAY_DEAD_LETTER, f"{msg.topic()}:{dl.where}".encode()),
                        (HEADER_REPLAY_GROUP, producer.group.encode())]  # fmt: skip
            partition = None if replay.options.replay_topic else dl.source[1]
            producer.send(topic, partition, msg.key(), msg.value(), timestamp, headers)
        result.replayed += 1
        targets = result.sent.setdefault(cls, {})
        targets[topic] = targets.get(topic, 0) + 1
        if len(result.first) < replay.options.show:
            result.first.append(
                {"dead_letter": dl.where, "source": source, "error_class": cls, "target": topic}
            )
    else:
        replay.record_skip(dl, reason)
    if producer is not None:
        producer.advance(dl.partition, dl.offset + 1)


def _end_of(replay: _Replay, conf: dict[str, Any]) -> Callable[[TP], int]:
    def end_of(tp: TP) -> int:
        return log_end_offsets(conf, [tp], replay.options.timeout_s, admin=replay.admin)[tp]

    return end_of


def _find_already_sent(replay: _Replay, producer: ReplayTransactions, conf: dict[str, Any], group: str,
                       dlq: str) -> None:  # fmt: skip
    """After ``init_transactions``: the dead letters this group sent beyond its committed
    position. None on Apache Kafka (a killed run's transaction is aborted); on the embedded
    broker the killed run's open transaction is committed instead, and its records are found here, in
    each target partition from the lower bound the group committed before writing there."""
    if replay.options.replay_topic is not None:
        topics = [replay.options.replay_topic]
    else:
        topics = sorted(replay.readable)
    candidates = [(t, p) for t in topics for p in range(replay.partition_counts_of(t))]
    committed = replay.admin.committed_offsets(group, candidates) if candidates else {}
    producer.bounds.update({tp: o for tp, o in committed.items() if o is not None and 0 <= o < CLOSED})
    prefix = f"{dlq}:".encode()
    for (topic, partition), bound in producer.bounds.items():
        for msg in read_partition_range(conf, topic, partition, bound, timeout_s=replay.options.timeout_s):
            headers = dict(headers_of(msg))
            origin = headers.get(HEADER_REPLAY_DEAD_LETTER) or b""
            if headers.get(HEADER_REPLAY_GROUP) == group.encode() and origin.startswith(prefix):
                replay.already.add(origin[len(prefix) :].decode())
