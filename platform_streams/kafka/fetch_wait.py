"""Escalate a reader's short ``fetch.wait.max.ms`` when the broker starves it.

Our assign()-based readers (log end lookups, changelog restore, range reads) use
``fetch.wait.max.ms=10`` so that the fetch that finds the log end answers in ~10 ms
instead of librdkafka's 500 ms (every partition restore pays it once; see
``docs/brokers.md`` "Latency").

Tansu (memory storage) answers a fetch *empty* -- no records and no high watermark
advance, hence no partition-EOF either -- when its own read of the partition takes longer
than the fetch's max wait, and that read grows with the partition: after an hour at
300 records/s (140k-400k records per partition, broker busy) a 10 ms reader got nothing
at all for 80 s, 30 ms needed ~7 s for the EOF, 100-250 ms 0.4-0.6 s. Apache Kafka
answers with whatever it has when the wait expires, so it never starves this way.

:class:`FetchWaitEscalation` keeps the short wait first and watches consume rounds: when
a reader has seen neither a record nor an EOF event for ``idle_s`` it recreates the
consumer, same assignment and positions, with ``fetch.wait.max.ms`` =
:data:`LONG_FETCH_WAIT_MS` (librdkafka's default), once, logging one WARNING. The cost on
a healthy broker is nothing; on a starving one, ``idle_s`` once per reader. A reader on a
broker this process already found answering a fetch when its wait runs out
(``fetch_answers_when_wait_expires``, :mod:`.capabilities`: Apache Kafka) is not watched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from platform_streams.kafka.clients import create_consumer

__all__ = ["LONG_FETCH_WAIT_MS", "STARVATION_S", "FetchWaitEscalation"]

_log = logging.getLogger(__name__)

#: The wait a starved reader switches to: librdkafka's default.
LONG_FETCH_WAIT_MS = 500
#: Consume rounds without a record or an EOF after which a short-wait reader escalates.
STARVATION_S = 2.0

TP = tuple[str, int]


def _is_progress(msg: Message) -> bool:
    err = msg.error()
    return err is None or err.code() == KafkaError._PARTITION_EOF


def _answers_when_wait_expires(conf: Mapping[str, Any]) -> bool:
    # imported here: the capability probes read logs through this module's readers
    from platform_streams.kafka.capabilities import known_support

    return known_support(conf, "fetch_answers_when_wait_expires") is True


class FetchWaitEscalation:
    """One reader's consumer plus the starvation watch (see the module docstring).

    ``conf`` is the reader's full consumer config; ``starts`` where each partition starts
    (kept for a partition whose position is not resolved yet, e.g. a logical offset).
    The reader uses :attr:`consumer` (created here), calls :meth:`assign` once, passes
    what every consume round returned to :meth:`after_consume` (which may replace
    :attr:`consumer`), and finally :meth:`close`.
    """

    def __init__(
        self,
        conf: Mapping[str, Any],
        starts: Mapping[TP, int],
        *,
        reader: str,
        idle_s: float | None = None,
        factory: Callable[[dict[str, Any]], Consumer] = create_consumer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.conf: dict[str, Any] = dict(conf)
        self._starts = dict(starts)
        self._reader = reader
        self._idle_s = STARVATION_S if idle_s is None else idle_s
        self._factory = factory
        self._clock = clock
        #: True once the consumer runs with the long wait (or never had a short one)
        self.escalated = int(self.conf.get("fetch.wait.max.ms", LONG_FETCH_WAIT_MS)) >= LONG_FETCH_WAIT_MS
        #: False where the broker never starves a short wait (or the wait is long already)
        self.watching = not self.escalated and not _answers_when_wait_expires(self.conf)
        self.consumer: Consumer = factory(dict(self.conf))
        self._last_progress = clock()

    def assign(self) -> None:
        """Assign :attr:`consumer` at ``starts`` (a reader may warm metadata first)."""
        self.consumer.assign([TopicPartition(t, p, o) for (t, p), o in self._starts.items()])
        self._last_progress = self._clock()

    def after_consume(self, messages: Iterable[Message | None]) -> None:
        """Note one consume round; replaces :attr:`consumer` when the reader starves."""
        if any(m is not None and _is_progress(m) for m in messages):
            self._last_progress = self._clock()
        elif self.watching and self._clock() - self._last_progress >= self._idle_s:
            self._escalate()

    def watch_from_now(self) -> None:
        """Start the starvation watch over: a reader opened ahead of its use (a restore's
        next partition) did not starve while nobody consumed from it."""
        self._last_progress = self._clock()

    def close(self) -> None:
        self.consumer.close()

    def _escalate(self) -> None:
        assigned = self.consumer.assignment()
        for tp in self.consumer.position(assigned) if assigned else []:
            if tp.offset >= 0:  # resolved: resume exactly there
                self._starts[(tp.topic, tp.partition)] = tp.offset
        _log.warning(
            "%s: no record and no end-of-partition for %.1fs with fetch.wait.max.ms=%s; the broker "
            "answers fetches empty when its read of a large partition takes longer than the fetch "
            "wait (Tansu): reading on with fetch.wait.max.ms=%d",
            self._reader,
            self._clock() - self._last_progress,
            self.conf.get("fetch.wait.max.ms"),
            LONG_FETCH_WAIT_MS,
        )
        self.consumer.close()
        self.conf["fetch.wait.max.ms"] = LONG_FETCH_WAIT_MS
        self.escalated = True
        self.watching = False
        self.consumer = self._factory(dict(self.conf))
        self.assign()
