"""The Quix Streams engine: each workload as the Quix app a user would write.

Runs in ``bench/.venv-quix`` (Quix pins its own confluent-kafka), so nothing here imports
platform_streams. Apps get the same librdkafka tuning as the other engines
(:data:`bench.common.CONSUMER_TUNING`/``PRODUCER_TUNING``), the workload's guarantee
(``processing_guarantee``) and commit interval, and otherwise Quix's defaults: RocksDB
state with changelog topics, its JSON serializers.

* stateless: ``sdf.filter(...).apply(...).to_topic(out)``;
* count: ``sdf.apply(count, stateful=True).to_topic(out)`` -- Quix keeps state per message
  key, so this is Kafka Streams' ``group_by_key().count()``; it emits every update;
* window_sum: ``sdf.tumbling_window(60 s).reduce(...).final(closing_strategy="partition")
  .to_topic(out)`` (windows close by the partition's stream time, as in Kafka Streams);
* restore: the count app started on an empty state directory; Quix recovers the store
  from its changelog before it processes anything.

The clock starts in Quix's assignment callback and stops when ``app.run()`` returns (every
input processed, checkpoint committed) or, for a restore, when its recovery returns.
Processing is done when every input partition's last offset was processed (Quix's
``on_message_processed`` callback; a dict lookup per record).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from quixstreams import Application, State
from quixstreams.state.recovery import RecoveryManager

from bench.common import CONSUMER_TUNING, PRODUCER_TUNING, EndTracker, RunSpec, Timer
from bench.workloads import WINDOW_MS, Workload


def _count(value: Any, state: State) -> int:
    count = state.get("count", 0) + 1
    state.set("count", count)
    return count


def _first_amount(value: dict[str, Any]) -> float:
    return 0.0 + value["amount"]


def _add_amount(total: float, value: dict[str, Any]) -> float:
    return total + value["amount"]


def _application(workload: Workload, spec: RunSpec, **extra: Any) -> Application:
    return Application(
        broker_address=spec.bootstrap,
        consumer_group=spec.app_id,
        auto_offset_reset="earliest",
        commit_interval=workload.commit_interval_ms / 1000,
        state_dir=Path(spec.state_dir) / "quix",
        processing_guarantee="exactly-once" if workload.exactly_once else "at-least-once",
        consumer_extra_config=dict(CONSUMER_TUNING),
        producer_extra_config=dict(PRODUCER_TUNING),
        loglevel="WARNING",
        **extra,
    )


def build(app: Application, workload: Workload, spec: RunSpec) -> None:
    source = app.topic(spec.input_topic, key_deserializer="bytes", value_deserializer="json")
    out = app.topic(spec.output_topic, key_serializer="bytes", value_serializer="json")
    sdf = app.dataframe(source)
    if workload.kind == "stateless":
        keep, mapper = workload.predicate, workload.mapper
        sdf = sdf.filter(lambda value: keep(None, value)).apply(mapper)
    elif workload.kind == "count":
        sdf = sdf.apply(_count, stateful=True)
    elif workload.kind == "window_sum":
        # "partition": windows close with the partition's stream time, as in Kafka Streams
        # (Quix's default "key" closes a key's windows only when that key has a newer record)
        window = sdf.tumbling_window(WINDOW_MS, grace_ms=0).reduce(_add_amount, _first_amount)
        sdf = window.final(closing_strategy="partition")
    else:
        raise ValueError(f"unknown workload kind {workload.kind!r}")
    sdf.to_topic(out)


def _time_assignment(timer: Timer) -> None:
    original = Application._on_assign

    def timed(self: Application, consumer: Any, partitions: list[Any]) -> None:
        if partitions:
            timer.start()
        original(self, consumer, partitions)

    Application._on_assign = timed  # type: ignore[method-assign]


def run(workload: Workload, spec: RunSpec, timer: Timer) -> dict[str, Any]:
    logging.getLogger("quixstreams").setLevel(logging.WARNING)
    _time_assignment(timer)
    if spec.phase == "restore":
        return _restore(workload, spec, timer)
    ends = EndTracker(spec)
    app: Application | None = None

    def on_processed(topic: str, partition: int, offset: int) -> None:
        if ends.processed(partition, offset):
            assert app is not None
            app.stop()

    app = _application(workload, spec, on_message_processed=on_processed)
    build(app, workload, spec)
    app.run()
    timer.stop()
    return {}


def _restore(workload: Workload, spec: RunSpec, timer: Timer) -> dict[str, Any]:
    app = _application(workload, spec)
    build(app, workload, spec)
    original = RecoveryManager.do_recovery
    found: dict[str, int] = {}

    def timed(self: RecoveryManager) -> None:
        original(self)
        timer.stop()
        found["entries"] = _entries(app)
        app.stop()

    RecoveryManager.do_recovery = timed  # type: ignore[method-assign]
    app.run()
    return {"restored_entries": found.get("entries", 0)}


def _entries(app: Application) -> int:
    """Keys in the default column family of every assigned store partition."""
    total = 0
    for stores in app._state_manager.stores.values():
        for store in stores.values():
            for partition in store.partitions.values():
                total += sum(1 for _ in partition.get_or_create_column_family("default").keys())  # noqa: SIM118
    return total
