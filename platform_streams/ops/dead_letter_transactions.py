"""The dead-letter replay's transactions: replayed records, the replay group's position on the
dead-letter topic and lower bounds of where it writes, committed together.

The lower bounds are offsets the group commits for the *target* partitions (a source topic's
partition, the replay topic's): before the replay first writes to a partition, an
offsets-only transaction commits that partition's log end, and every commit moves it past the
records just written. A restarted replay reads its targets from these bounds for records it
sent beyond its committed position: none on Apache Kafka, which aborts a killed producer's
open transaction, but the embedded broker commits it (the README's table of its differences),
and those records must not be sent again.
A replay that finishes commits :data:`CLOSED` as every bound instead: nothing of it can be
left open, so the next run reads nothing (rather than all that others wrote since).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaError, KafkaException, Message, TopicPartition, create_producer

if TYPE_CHECKING:
    from platform_streams.ops.dead_letter_replay import ReplayOptions

__all__ = ["CLOSED", "TP", "ReplayTransactions"]

log = logging.getLogger(__name__)

TP = tuple[str, int]
#: the bound a finished replay commits: beyond any log end, "nothing to look for here"
CLOSED = 1 << 62


class ReplayTransactions:
    """The transactional producer (``transactional.id`` = the replay group)."""

    def __init__(
        self,
        config: StreamsConfig,
        group: str,
        consumer: Any,
        dlq: str,
        options: ReplayOptions,
        end_of: Callable[[TP], int],
    ) -> None:
        conf = {
            **config.producer_configs(), "client.id": f"{group}-producer", "transactional.id": group,
            "enable.idempotence": True, "acks": "all", "linger.ms": 5, "partitioner": "murmur2_random",
        }  # fmt: skip
        self.producer = create_producer(conf)
        self.group, self.consumer, self.dlq, self.options, self.end_of = group, consumer, dlq, options, end_of
        # registers the transactional.id: fences a replay still running with it, and makes the
        # broker settle a killed run's open transaction before anything else is sent
        self.producer.init_transactions(options.timeout_s)
        #: committed lower bounds of the target partitions
        self.bounds: dict[TP, int] = {}
        #: per target partition, past the last record delivered in the open transaction
        self.written: dict[TP, int] = {}
        self.positions: dict[int, int] = {}
        self.open = False
        self.in_transaction = 0
        self.since_commit = 0
        self.sent = 0
        self.committed = 0

    def ensure_bounds(self, partitions: list[TP]) -> None:
        """Commit a lower bound for every partition of ``partitions`` that has none yet."""
        missing = {tp: self.end_of(tp) for tp in partitions if tp not in self.bounds}
        if missing:
            self.commit(missing)

    def send(self, topic: str, partition: int | None, key: Any, value: Any, ts: int,
             headers: list[tuple[str, bytes | None]]) -> None:  # fmt: skip
        if partition is not None:
            self.ensure_bounds([(topic, partition)])
        if not self.open:
            self.producer.begin_transaction()
            self.open = True
        kept: Any = headers
        if partition is None:
            self.producer.produce(
                topic, value=value, key=key, headers=kept, timestamp=max(ts, 0), on_delivery=self._delivered
            )
        else:
            self.producer.produce(
                topic, value, key, partition, headers=kept, timestamp=max(ts, 0), on_delivery=self._delivered
            )
        self.producer.poll(0)
        self.in_transaction += 1
        self.sent += 1
        if self.options.on_progress is not None:
            self.options.on_progress("sent", self.sent)

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            tp = (msg.topic() or "", msg.partition() or 0)
            self.written[tp] = max(self.written.get(tp, 0), (msg.offset() or 0) + 1)

    def advance(self, partition: int, position: int) -> None:
        self.positions[partition] = position
        self.since_commit += 1
        if self.since_commit >= self.options.transaction_records:
            self.commit()

    def finish(self) -> None:
        """Commit what is open, every bound :data:`CLOSED`."""
        self.commit(dict.fromkeys([*self.bounds, *self.written], CLOSED), closing=True)

    def commit(self, new_bounds: dict[TP, int] | None = None, *, closing: bool = False) -> None:
        """Commit the open transaction with the position and the targets' bounds."""
        if not self.positions and not new_bounds and not self.open:
            return
        if not self.open:
            self.producer.begin_transaction()
        self.producer.flush(self.options.timeout_s)  # every delivery report: the bounds move past them
        bounds = {**(new_bounds or {}), **({} if closing else self.written)}
        offsets = [TopicPartition(self.dlq, p, o) for p, o in sorted(self.positions.items())]
        offsets += [TopicPartition(t, p, o) for (t, p), o in sorted(bounds.items())]
        self.producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(),
                                                  self.options.timeout_s)  # fmt: skip
        self.producer.commit_transaction(self.options.timeout_s)
        self.bounds = {} if closing else {**self.bounds, **bounds}
        self.committed += self.in_transaction
        self.positions, self.written, self.open, self.in_transaction, self.since_commit = {}, {}, False, 0, 0
        if self.options.on_progress is not None:
            self.options.on_progress("committed", self.committed)

    def abort(self) -> None:
        if self.open:
            try:
                self.producer.abort_transaction(self.options.timeout_s)
            except KafkaException as exc:
                log.warning("dead-letter replay: aborting the transaction failed (%s)", exc)
