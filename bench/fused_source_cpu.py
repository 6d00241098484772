"""CPU per record of one task's source function, fused or plain, without a broker.

    python bench/fused_source_cpu.py            # fused (the default)
    python bench/fused_source_cpu.py --plain    # StreamsConfig(fusion=False)

Why: the end-to-end runner (bench/run.py) needs a quiet machine to compare code
generation changes, since its CPU figures include librdkafka's threads and poll waits.
This feeds 1,000 in-memory records x ``--rounds`` to the ``filter_map_json`` workload's
task (JSON in, filter, map_values, JSON out to a no-op collector) and prints the best
round's process CPU per record, which isolates what the generated code costs.
Run it with ``PYTHONPATH`` on two checkouts to compare them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from platform_streams import StreamsBuilder, StreamsConfig  # noqa: E402
from platform_streams.dsl import Consumed, Produced  # noqa: E402
from platform_streams.processor import TaskId  # noqa: E402
from platform_streams.runtime.task import StreamTask  # noqa: E402
from platform_streams.serde import Bytes, Json  # noqa: E402
from platform_streams.topology import compile_topology  # noqa: E402


class _NoopCollector:
    def send(self, *args: Any) -> None:
        pass

    def partition_count(self, topic: str) -> int:
        return 4


class _Message:
    """The four methods a source function calls on a confluent_kafka.Message."""

    __slots__ = ("_key", "_value")

    def __init__(self, key: bytes, value: bytes) -> None:
        self._key, self._value = key, value

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (0, 5)

    def headers(self) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plain", action="store_true", help="fusion=False (plain closures)")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed(key_serde=Bytes(), value_serde=Json()))
        .filter(lambda k, v: v["amount"] >= 25)
        .map_values(lambda v: {**v, "cents": v["amount"] * 100})
        .to("out", Produced(key_serde=Bytes(), value_serde=Json()))
    )
    plan = compile_topology(builder.build())
    tmp = Path(tempfile.mkdtemp())
    plain = {"fusion": False} if args.plain else {}  # (no key: runs on checkouts without the setting)
    config = StreamsConfig(application_id="cpu", bootstrap_servers="x:1", state_dir=tmp, **plain)
    task = StreamTask(
        TaskId(0, 0), plan, plan.subtopologies[0], config=config, collector=_NoopCollector(),
        clock_ms=lambda: 0, task_dir=tmp / "0",
    )  # fmt: skip
    task.initialize_stores()
    task.initialize_processors()
    source = task.graph.sources["in"]
    messages = [_Message(b"k%d" % i, orjson.dumps({"id": i, "amount": i % 100})) for i in range(1000)]
    best = float("inf")
    for _ in range(7):
        started = time.process_time()
        for _ in range(args.rounds):
            for msg in messages:
                source(msg)
        best = min(best, time.process_time() - started)
    per_record_us = best / (args.rounds * len(messages)) * 1e6
    print(f"{'plain' if args.plain else 'fused'}: {per_record_us:.3f} us CPU per record")


if __name__ == "__main__":
    main()
