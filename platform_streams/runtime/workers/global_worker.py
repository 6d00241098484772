"""``GlobalStreamWorker``: bootstraps the global stores, then keeps them up to date.

Kafka Streams' ``GlobalStreamThread``. Before any stream task of the client processes,
every partition of every global topic is read *to its end* into the global stores
(:meth:`GlobalStreamWorker.bootstrap`), so a KStream-GlobalKTable join sees the whole
table from the first record. The end is found by fetching (partition EOF, see
:func:`platform_streams.kafka.read_partition_range`), never by ListOffsets, which is
wrong on some brokers. The thread then tails the same partitions from the
bootstrapped positions, applying new records as they arrive, and flushes and
checkpoints every ``commit_interval_ms``.

Use::

    worker = bootstrap(config, plan, partition_counts)   # blocks until caught up, starts tailing
    for task in tasks: task.context.global_stores = worker.stores
    ...
    worker.close()
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.errors import BrokerError
from platform_streams.kafka import (
    OFFSET_BEGINNING,
    KafkaAdmin,
    KafkaError,
    KafkaException,
    TopicPartition,
    create_consumer,
    read_partition_range,
)
from platform_streams.runtime.tasks.global_state import GlobalStateUpdater
from platform_streams.topology.compiler import TopologyPlan

__all__ = ["GlobalStreamWorker", "bootstrap"]

log = logging.getLogger(__name__)


class GlobalStreamWorker(threading.Thread):
    """Owns the client's global stores: a synchronous bootstrap, then a tailing thread."""

    def __init__(
        self,
        plan: TopologyPlan,
        config: StreamsConfig,
        partition_counts: Mapping[str, int] | None = None,
        *,
        on_failure: Callable[[BaseException], None] | None = None,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        super().__init__(name=f"{config.effective_client_id}-GlobalStreamThread", daemon=True)
        self.plan = plan
        self.config = config
        self._partition_counts = dict(partition_counts or {})
        self._on_failure = on_failure
        self.updater = GlobalStateUpdater(
            plan, config, Path(config.state_dir), clock_ms=clock_ms or (lambda: int(time.time() * 1000))
        )
        self._stop_event = threading.Event()
        self._bootstrapped = False
        self.failure: BaseException | None = None
        #: records read by the last bootstrap (all partitions)
        self.bootstrap_records = 0

    @property
    def stores(self) -> Mapping[str, Any]:
        """Store name -> global store; hand it to every task (``TaskContext.global_stores``)."""
        return self.updater.stores

    # -- bootstrap ------------------------------------------------------------------------

    def bootstrap(self, timeout_s: float = 60.0) -> GlobalStateUpdater:
        """Open the stores and read every global partition to its current end (blocking).

        ``timeout_s`` bounds the time without progress on one partition.
        """
        topics = sorted(self.plan.global_source_topics())
        counts = self._counts(topics)
        self.updater.initialize(counts)
        try:
            self._read_all(topics, counts, timeout_s)
        except BrokerError as exc:
            if exc.code != "OFFSET_OUT_OF_RANGE":
                raise
            # A checkpoint beyond the log end: the topic was recreated (or the broker lost
            # it). The local copy belongs to another log: rebuild from the beginning.
            log.warning("global stores: checkpoint is outside the log (%s); rebuilding", exc)
            self.updater.reset()
            self._read_all(topics, counts, timeout_s)
        self.updater.checkpoint()
        self._bootstrapped = True
        log.info("global stores bootstrapped: %d records from %s", self.bootstrap_records, topics)
        return self.updater

    def _counts(self, topics: list[str]) -> dict[str, int]:
        missing = [t for t in topics if not self._partition_counts.get(t)]
        if missing:
            with KafkaAdmin(self.config.admin_configs()) as admin:
                found = admin.partition_counts(missing)
            for topic in missing:
                count = found.get(topic)
                if not count:
                    raise BrokerError(f"global topic {topic} does not exist", code="UNKNOWN_TOPIC_OR_PART")
                self._partition_counts[topic] = count
        return {t: self._partition_counts[t] for t in topics}

    def _read_all(self, topics: list[str], counts: Mapping[str, int], timeout_s: float) -> None:
        conf = self._consumer_conf()
        update = self.updater.update
        for topic in topics:
            for partition in range(counts[topic]):
                start = self.updater.offsets.get((topic, partition), OFFSET_BEGINNING)
                for msg in read_partition_range(conf, topic, partition, start, timeout_s=timeout_s):
                    update(msg)
                    self.bootstrap_records += 1

    def _consumer_conf(self) -> dict[str, Any]:
        conf = self.config.restore_consumer_configs()
        conf["client.id"] = f"{self.config.effective_client_id}-global-consumer"
        return conf

    # -- tailing --------------------------------------------------------------------------

    def run(self) -> None:
        consumer = None
        try:
            if not self._bootstrapped:
                self.bootstrap()
            conf = self._consumer_conf()
            conf["group.id"] = f"{self.config.application_id}-global-{uuid.uuid4().hex[:8]}"  # never joined
            consumer = create_consumer(conf)
            consumer.list_topics(timeout=10)  # all-topics metadata: resolves logical offsets at once
            counts = self._counts(sorted(self.plan.global_source_topics()))
            consumer.assign(
                [
                    TopicPartition(topic, p, self.updater.offsets.get((topic, p), OFFSET_BEGINNING))
                    for topic, n in counts.items()
                    for p in range(n)
                ]
            )
            self._tail(consumer)
        except BaseException as exc:
            self.failure = exc
            log.error("global stream thread failed: %s", exc, exc_info=exc)
            if self._on_failure is not None:
                self._on_failure(exc)
        finally:
            if consumer is not None:
                consumer.close()

    def _tail(self, consumer: Any) -> None:
        interval_s = self.config.commit_interval_ms / 1000.0
        next_checkpoint = time.monotonic() + interval_s
        update = self.updater.update
        while not self._stop_event.is_set():
            for msg in consumer.consume(1000, 0.1):
                err = msg.error()
                if err is None:
                    update(msg)
                elif err.code() != KafkaError._PARTITION_EOF:
                    if err.fatal():
                        raise KafkaException(err)
                    log.warning("global consumer error (will retry): %s", err)
            if time.monotonic() >= next_checkpoint:
                self.updater.checkpoint()
                next_checkpoint = time.monotonic() + interval_s

    def shutdown(self) -> None:
        """Ask the tailing loop to stop (``close`` also waits and closes the stores)."""
        self._stop_event.set()

    def close(self, timeout_s: float | None = 30.0) -> None:
        """Stop tailing, checkpoint and close the stores."""
        self.shutdown()
        if self.is_alive() and self is not threading.current_thread():
            self.join(timeout_s)
        self.updater.close()


def bootstrap(
    config: StreamsConfig,
    plan: TopologyPlan,
    partition_counts: Mapping[str, int] | None = None,
    *,
    on_failure: Callable[[BaseException], None] | None = None,
    timeout_s: float = 60.0,
) -> GlobalStreamWorker | None:
    """Bootstrap the plan's global stores and start tailing; None if the plan has none.

    Blocks until every global partition was read to its end. The returned worker's
    :attr:`~GlobalStreamWorker.stores` are what stream tasks read; ``close()`` it on shutdown.
    """
    if not plan.global_stores:
        return None
    worker = GlobalStreamWorker(plan, config, partition_counts, on_failure=on_failure)
    worker.bootstrap(timeout_s)
    worker.start()
    return worker
