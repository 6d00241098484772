"""Log positions that are right on Kafka *and* Tansu: log end, and offset-for-timestamp.

Offset tools (the application reset) need three facts per partition: where the log
starts, where it ends, and which offset a point in time maps to. The broker's
ListOffsets answers all three, but Tansu gets two of them wrong:

* **Log end.** ListOffsets(latest) returns the start of the last batch + 1 there (20
  records in batches of 5: 16). :func:`log_end_offsets` takes the end from the fetch side
  instead: it assigns every partition at the logical end and waits for librdkafka's
  partition-EOF event, whose offset is the high watermark of a Fetch response (exact on
  both brokers; on Tansu the logical end resolves a little early and the few records
  before the true end are simply read past).
* On a broker where both are exact (probed: ``KafkaAdmin.supports("exact_list_offsets")``,
  true on Apache Kafka) the broker's answers are used directly, as Kafka's tools do.
* **Offset for a timestamp.** Tansu matches the target against its own batch write time,
  not record timestamps (a lookup for an old timestamp answers offset 0, one in the future
  answers 0 too). :func:`offsets_for_time` asks the broker, then checks the answer against
  the records themselves -- the record at the answer must carry the timestamp the broker
  reported and be >= the target, and the record before it must be < the target -- and
  when the check fails it finds the offset by scanning the partition, bounded by
  ``max_scan_records``. Every answer says which method produced it. It never returns an
  offset it could not justify: beyond the scan limit it raises.

The earliest offset is right on both brokers and comes straight from ListOffsets
(:meth:`KafkaAdmin.list_offsets`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import OFFSET_END, KafkaError, KafkaException

from platform_streams.errors import BrokerError, StreamsTimeoutError, UnsupportedBrokerFeatureError
from platform_streams.kafka.admin import KafkaAdmin
from platform_streams.kafka.errors import is_fatal, to_broker_error
from platform_streams.kafka.fetch_wait import FetchWaitEscalation
from platform_streams.kafka.log_reader import read_partition_range

__all__ = ["TimeLookup", "empty_partitions", "log_end_offsets", "offsets_for_time"]

_log = logging.getLogger(__name__)

TP = tuple[str, int]

# Position tools read what the log holds, as Java's reset tool does (read_uncommitted):
# an offset inside an aborted transaction is a valid position, the consumer skips it.
_POSITION_READER: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "isolation.level": "read_uncommitted",
    "fetch.wait.max.ms": 10,  # a fast EOF; escalated when Tansu starves it (kafka/fetch_wait.py)
    "fetch.queue.backoff.ms": 10,
}

# A refusal is final too: retried, it would only turn into a timeout that hides it.
_TERMINAL: frozenset[int] = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
    }
)

# How many offsets before the broker's answer are read to find the preceding record
# (offsets are not dense: transaction markers and removed aborted records leave gaps).
_LOOKBACK = 16


def _reader_conf(consumer_conf: Mapping[str, Any]) -> dict[str, Any]:
    conf = {**consumer_conf, **_POSITION_READER}
    conf.setdefault("group.id", f"platform-streams-positions-{uuid.uuid4().hex[:12]}")
    conf.pop("group.instance.id", None)
    return conf


def log_end_offsets(
    consumer_conf: Mapping[str, Any],
    partitions: Iterable[TP],
    timeout_s: float = 30.0,
    *,
    admin: KafkaAdmin | None = None,
) -> dict[TP, int]:
    """The log end offset (high watermark) of every partition.

    Given an ``admin`` on a broker whose ListOffsets is exact (``exact_list_offsets``,
    Apache Kafka), one ListOffsets(latest) request answers. Otherwise one group-less
    consumer assigns all partitions at the logical end and waits for each partition's EOF
    event; nothing is committed. Raises :class:`StreamsTimeoutError` if a partition gives
    no EOF within ``timeout_s`` and :class:`BrokerError` for an unknown topic or partition.
    """
    wanted = list(dict.fromkeys(partitions))
    if not wanted:
        return {}
    if admin is not None and admin.supports("exact_list_offsets"):
        return {tp: offset for tp, (offset, _ts) in admin.list_offsets(wanted, "latest", timeout_s).items()}
    conf = _reader_conf(consumer_conf)
    conf["enable.partition.eof"] = True
    reader = FetchWaitEscalation(conf, dict.fromkeys(wanted, OFFSET_END), reader="log end offsets")
    ends: dict[TP, int] = {}
    try:
        try:
            # All-topics metadata first (a named lookup could create the topic on Tansu);
            # it also spares librdkafka its 500 ms leader-wait timer for OFFSET_END.
            reader.consumer.list_topics(timeout=min(timeout_s, 10.0))
        except KafkaException as exc:
            raise to_broker_error(exc, "fetch metadata for log end offsets") from exc
        reader.assign()
        deadline = time.monotonic() + timeout_s
        while len(ends) < len(wanted):
            if time.monotonic() > deadline:
                missing = sorted(set(wanted) - set(ends))
                raise StreamsTimeoutError(f"no log end offset within {timeout_s:.0f}s for {missing}")
            messages = reader.consumer.consume(num_messages=1000, timeout=0.05)
            reader.after_consume(messages)  # starved by short fetch waits: a new consumer
            for msg in messages:
                err = msg.error()
                if err is None:
                    continue  # a record before the end (Tansu's early logical end)
                key = (msg.topic() or "", msg.partition() or 0)
                if err.code() == KafkaError._PARTITION_EOF:
                    ends.setdefault(key, msg.offset() or 0)
                elif err.code() in _TERMINAL or is_fatal(err):
                    raise BrokerError(f"log end offset of {key[0]}-{key[1]}: {err.str()}", code=err.name())
                else:
                    _log.debug("transient error while looking up log end offsets: %s", err)
    finally:
        reader.close()
    return ends


def empty_partitions(admin: KafkaAdmin, partitions: Iterable[TP], timeout_s: float = 10.0) -> set[TP]:
    """The partitions that hold no record at all, from one ListOffsets(latest) request.

    An answer of 0 means an empty log on both brokers: Apache Kafka's answer is the high
    watermark, and Tansu's wrong one (the start of the last batch + 1) is at least 1 for
    any log with a batch. Any other answer says nothing exact on Tansu, so only 0 is used.
    The request is read_uncommitted: records of an open transaction count as records.
    """
    wanted = list(dict.fromkeys(partitions))
    if not wanted:
        return set()
    ends = admin.list_offsets(wanted, "latest", timeout_s)
    return {tp for tp in wanted if ends.get(tp, (-1, -1))[0] == 0}


@dataclass(frozen=True)
class TimeLookup:
    """Where a timestamp lands in one partition.

    ``offset`` is the first offset whose record timestamp is >= the target, or the log end
    when there is none (``record_timestamp`` None). ``method`` says how it was found:
    ``"list_offsets"`` (the broker's time index, checked against the records), ``"scan"``
    (records read from the log start) or ``"empty"`` (nothing to look up).
    """

    offset: int
    method: Literal["list_offsets", "scan", "empty"]
    record_timestamp: int | None


def offsets_for_time(
    admin: KafkaAdmin,
    consumer_conf: Mapping[str, Any],
    timestamp_ms: int,
    bounds: Mapping[TP, tuple[int, int]],
    *,
    max_scan_records: int = 1_000_000,
    timeout_s: float = 30.0,
) -> tuple[dict[TP, TimeLookup], list[str]]:
    """Resolve ``timestamp_ms`` in each partition of ``bounds`` (``{tp: (earliest, end)}``).

    Returns the lookups and warnings (one when the broker's answer was rejected). Once one
    broker answer fails the check, the remaining partitions are scanned right away: a
    broker that indexes by write time is wrong everywhere. Raises
    :class:`UnsupportedBrokerFeatureError` when a scan would exceed ``max_scan_records``.
    """
    result: dict[TP, TimeLookup] = {}
    warnings: list[str] = []
    todo = {tp: b for tp, b in bounds.items() if b[1] > b[0]}
    for tp, (_earliest, end) in bounds.items():
        if tp not in todo:
            result[tp] = TimeLookup(end, "empty", None)
    if not todo:
        return result, warnings
    conf = _reader_conf(consumer_conf)
    try:
        answers: dict[TP, tuple[int, int]] = admin.list_offsets(todo, timestamp_ms, timeout=timeout_s)
    except BrokerError as exc:
        warnings.append(f"the broker's timestamp lookup failed ({exc}); resolved by scanning")
        answers = {}
    trusted = bool(answers)
    if trusted and admin.supports("exact_list_offsets"):
        # the broker's time index matches record timestamps (probed): its answer is the answer
        return {**result, **{tp: _direct(answers.get(tp), end) for tp, (_e, end) in todo.items()}}, warnings
    for tp, (earliest, end) in sorted(todo.items()):
        if trusted:
            verdict = _check_answer(conf, tp, earliest, end, timestamp_ms, answers.get(tp), timeout_s)
            if isinstance(verdict, TimeLookup):
                result[tp] = verdict
                continue
            trusted = False
            warnings.append(
                f"the broker's timestamp lookup is not exact here ({tp[0]}-{tp[1]}: {verdict}); it "
                "probably matches broker write times (e.g. Tansu): resolved by scanning records"
            )
        result[tp] = _scan(conf, tp, earliest, end, timestamp_ms, max_scan_records, timeout_s)
    return result, warnings


def _direct(answer: tuple[int, int] | None, end: int) -> TimeLookup:
    """A ListOffsets(timestamp) answer taken as is: offset -1 (none) means the log end."""
    if answer is None or answer[0] < 0 or answer[0] >= end:
        return TimeLookup(end, "list_offsets", None)
    return TimeLookup(answer[0], "list_offsets", answer[1])


def _check_answer(
    conf: Mapping[str, Any],
    tp: TP,
    earliest: int,
    end: int,
    target: int,
    answer: tuple[int, int] | None,
    timeout_s: float,
) -> TimeLookup | str:
    """Accept the broker's answer if the records around it agree; else say why not."""
    if answer is None:
        return "no answer for this partition"
    offset, broker_ts = answer
    if offset < 0 or offset >= end:
        # "No record at or after the target": the last record must be older than it.
        window = _read(conf, tp, max(earliest, end - _LOOKBACK), end, timeout_s)
        if window and window[-1][1] >= target:
            return f"no offset returned, but offset {window[-1][0]} has timestamp {window[-1][1]}"
        return TimeLookup(end, "list_offsets", None)
    if offset < earliest:
        return f"offset {offset} is before the log start {earliest}"
    window = _read(conf, tp, max(earliest, offset - _LOOKBACK), min(end, offset + 1), timeout_s)
    at = [ts for off, ts in window if off == offset]
    before = [(off, ts) for off, ts in window if off < offset]
    if not at:
        return f"offset {offset} holds no record"
    if at[0] != broker_ts:
        return f"offset {offset} has timestamp {at[0]}, the broker reported {broker_ts}"
    if at[0] < target:
        return f"offset {offset} has timestamp {at[0]} < {target}"
    if before and before[-1][1] >= target:
        return f"the earlier offset {before[-1][0]} already has timestamp {before[-1][1]} >= {target}"
    return TimeLookup(offset, "list_offsets", at[0])


def _read(conf: Mapping[str, Any], tp: TP, start: int, end: int, timeout_s: float) -> list[tuple[int, int]]:
    """``(offset, timestamp)`` of the records in ``[start, end)``."""
    return [
        (msg.offset() or 0, msg.timestamp()[1])
        for msg in read_partition_range(conf, tp[0], tp[1], start, end_offset=end, timeout_s=timeout_s)
    ]


def _scan(
    conf: Mapping[str, Any], tp: TP, earliest: int, end: int, target: int, limit: int, timeout_s: float
) -> TimeLookup:
    """First record with timestamp >= ``target`` in ``[earliest, end)``, by reading them."""
    records = read_partition_range(conf, tp[0], tp[1], earliest, end_offset=end, timeout_s=timeout_s)
    for seen, msg in enumerate(records, start=1):
        ts = msg.timestamp()[1]
        if ts >= target:
            return TimeLookup(msg.offset() or 0, "scan", ts)
        if seen >= limit:
            raise UnsupportedBrokerFeatureError(
                "offsets_for_times",
                f"{tp[0]}-{tp[1]}: the broker's timestamp lookup is not exact and no record at or "
                f"after {target} was found in the first {limit} records (log {earliest}..{end}); "
                "refusing to guess. Reset by offset (--to-offset / --from-file) or raise the scan limit.",
            )
    return TimeLookup(end, "scan", None)
