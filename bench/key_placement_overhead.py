"""What the key-placement check costs on the hot path of a stateful task (no broker).

    python bench/key_placement_overhead.py [--records 200000] [--keys 1000] [--repeats 5]

Runs the count app's real StreamTask (fused source -> aggregate -> RocksDB store) over
in-memory records, with and without the :class:`PlacementCheck` of its source topic, in
alternating order, and prints the median microseconds per record of each and the ratio.
Two inputs: keys placed by murmur2 (the check is one set lookup per record after each
key's first record) and keys placed by CRC32 like confluent-kafka's default (every record
of a misplaced key is hashed and counted). Stateless tasks get no check at all: their
fused source code is unchanged (tests/unit/query/test_key_placement.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import timeit
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from platform_streams import StreamsBuilder, StreamsConfig  # noqa: E402
from platform_streams.dsl import Consumed, Materialized  # noqa: E402
from platform_streams.processor import TaskId  # noqa: E402
from platform_streams.processor.partitioner import default_partition  # noqa: E402
from platform_streams.query.placement import KeyPlacement  # noqa: E402
from platform_streams.runtime.tasks.task import StreamTask  # noqa: E402
from platform_streams.serde import String  # noqa: E402
from platform_streams.testing.records import DriverRecord  # noqa: E402
from platform_streams.topology import compile_topology  # noqa: E402

PARTITIONS = 4
PARTITION = 1


class _Collector:
    def send(self, *args: object) -> None:
        pass

    def partition_count(self, topic: str) -> int:
        return PARTITIONS


def _keys(count: int, crc: bool) -> list[bytes]:
    """``count`` keys that the partitioner in question puts in :data:`PARTITION`."""
    keys: list[bytes] = []
    i = 0
    while len(keys) < count:
        key = f"user-{i:07d}".encode()
        placed = zlib.crc32(key) % PARTITIONS if crc else default_partition(key, PARTITIONS)
        if placed == PARTITION:
            keys.append(key)
        i += 1
    return keys


def _run(records: list[DriverRecord], checked: bool, tmp: Path, run: int) -> float:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=String(), value_serde=String())).group_by_key().count(
        materialized=Materialized.as_("counts")
    )
    plan = compile_topology(builder.build())
    config = StreamsConfig(application_id="bench-placement", bootstrap_servers="x:1", state_dir=tmp)
    placement = KeyPlacement(plan, "bench-placement", tmp / f"p{run}", lambda: {"in": PARTITIONS})
    task = StreamTask(
        TaskId(0, PARTITION),
        plan,
        plan.subtopologies[0],
        config=config,
        collector=_Collector(),
        clock_ms=lambda: 0,
        task_dir=tmp / f"task{run}",
        key_placement=placement if checked else None,
    )
    task.initialize_stores()
    task.initialize_processors()
    source = task.graph.sources["in"]
    started = time.perf_counter()
    for record in records:
        source(record)
    elapsed = time.perf_counter() - started
    task.close(wipe=True)
    return elapsed / len(records) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print("| input | without check us/record | with check us/record | ratio |")
    print("|---|---|---|---|")
    for label, crc in (("murmur2-placed", False), ("CRC32-placed (consistent_random)", True)):
        keys = _keys(args.keys, crc)
        records = [
            DriverRecord("in", PARTITION, i, keys[i % len(keys)], b"v", i, None) for i in range(args.records)
        ]
        times: dict[bool, list[float]] = {False: [], True: []}
        with tempfile.TemporaryDirectory(prefix="ps-bench-placement-") as tmp:
            for run in range(args.repeats):
                for checked in (False, True) if run % 2 == 0 else (True, False):
                    times[checked].append(_run(records, checked, Path(tmp), run * 2 + checked))
        off, on = statistics.median(times[False]), statistics.median(times[True])
        print(f"| {label} | {off:.2f} | {on:.2f} | {on / off:.3f} |")
    # the check alone, as the fused code runs it for a key already seen in place
    good: set[bytes | None] = {None, *_keys(args.keys, False)}
    key = next(iter(good - {None}))
    loop = timeit.timeit("bytes(k) not in good", globals={"k": key, "good": good}, number=1_000_000)
    base = timeit.timeit("bytes(k)", globals={"k": key, "good": good}, number=1_000_000)
    print(f"\nthe per-record check (set lookup of a fresh key object): {(loop - base) * 1e3:.0f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
