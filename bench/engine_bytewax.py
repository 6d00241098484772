"""The Bytewax engine: each workload as the dataflow a Bytewax 0.21 user writes.

Runs in ``bench/.venv-bytewax`` (created by bench/bytewax_bench.py with ``bytewax[kafka]==0.21.1``),
so nothing here imports platform_streams; bench/child.py runs it as the optional engine ``bytewax``.

* stateless: ``kop.input -> op.filter_map(loads, keep, map, dumps) -> kop.output``;
* count: ``op.key_on(key) -> op.stateful_map(count) -> kop.output`` (Bytewax keeps state per
  key in its own store and emits every update, as Quix does).

Recovery is on, for the fair comparison with engines that keep a changelog: a SQLite
recovery partition (``init_db_dir``) snapshotted at every epoch, the epoch being the
workload's commit interval. Bytewax has no exactly-once sink to Kafka, so only
at-least-once workloads run. The source reads the input from the beginning with
``tail=False``: the dataflow ends when every partition is read, so the clock runs from
``run_main`` to its return (Bytewax joins no consumer group; its start-up is in the time).
Same librdkafka tuning as the other engines (:data:`bench.common.CONSUMER_TUNING`'s fetch
settings and :data:`bench.common.PRODUCER_TUNING`), one worker as the other engines' one
process.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
import orjson
from bytewax.connectors.kafka import KafkaSinkMessage, KafkaSourceMessage
from bytewax.connectors.kafka import operators as kop
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import run_main

from bench.common import CONSUMER_TUNING, PRODUCER_TUNING, RunSpec, Timer
from bench.workloads import Workload

_FETCH = ("fetch.wait.max.ms", "fetch.queue.backoff.ms")


def build(workload: Workload, spec: RunSpec) -> Dataflow:
    flow = Dataflow(f"bench-{workload.name}")
    consumer = {k: str(CONSUMER_TUNING[k]) for k in _FETCH}
    source = kop.input(
        "in", flow, brokers=[spec.bootstrap], topics=[spec.input_topic], tail=False, add_config=consumer
    )
    if workload.kind == "stateless":
        keep, mapper = workload.predicate, workload.mapper

        def filter_map(msg: KafkaSourceMessage[Any, Any]) -> KafkaSinkMessage[Any, Any] | None:
            value = orjson.loads(msg.value)
            if not keep(msg.key, value):
                return None
            return KafkaSinkMessage(msg.key, orjson.dumps(mapper(value)))

        out = op.filter_map("filter_map", source.oks, filter_map)
    elif workload.kind == "count":

        def count(state: int | None, msg: KafkaSourceMessage[Any, Any]) -> tuple[int, int]:
            orjson.loads(msg.value)  # the same decoding work as the other engines' JSON serdes
            n = (state or 0) + 1
            return n, n

        keyed = op.key_on("key", source.oks, lambda msg: msg.key.decode())
        counts = op.stateful_map("count", keyed, count)
        out = op.map("encode", counts, lambda kv: KafkaSinkMessage(kv[0].encode(), str(kv[1]).encode()))
    else:
        raise ValueError(f"no Bytewax dataflow for {workload.kind!r}")
    producer = {k: str(v) for k, v in PRODUCER_TUNING.items()}
    kop.output("out", out, brokers=[spec.bootstrap], topic=spec.output_topic, add_config=producer)
    return flow


def run(workload: Workload, spec: RunSpec, timer: Timer) -> dict[str, Any]:
    if workload.exactly_once or spec.phase != "process":
        raise ValueError("the Bytewax engine runs at-least-once processing runs only")
    db_dir = Path(spec.state_dir) / "bytewax-recovery"
    db_dir.mkdir(parents=True, exist_ok=True)
    init_db_dir(db_dir, 1)
    flow = build(workload, spec)
    timer.start()
    run_main(
        flow,
        epoch_interval=timedelta(milliseconds=workload.commit_interval_ms),
        recovery_config=RecoveryConfig(db_dir),
    )
    timer.stop()
    return {}


if __name__ == "__main__":  # ``python -m bench.engine_bytewax '<RunSpec>'``: the same as bench.child
    import sys

    from bench import child

    child.main(sys.argv[1])
