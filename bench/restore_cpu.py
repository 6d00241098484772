"""CPU per record of a changelog restore, in process, from a real broker.

    python bench/restore_cpu.py                     # embedded Tansu, 200,000 records, best of 5
    python bench/restore_cpu.py --records 500000 --repeats 3
    python bench/restore_cpu.py --trusted           # its range trusted, as a clean close leaves it

Why: bench/run.py's restore phase measures a whole worker (group join, assignment, a
consumer per changelog partition) on a shared, loaded machine. This writes one changelog
partition shaped like count_unique's (distinct keys, 8-byte timestamped values, the
``__ps_src`` header of a one-partition task) once, then restores it into a fresh RocksDB
count store through the runtime's own path (``ChangelogReader`` with the committed-input
filter, ``ProcessorStateManager.restore``) ``--repeats`` times, and prints the best run's
process CPU per record (Python and librdkafka threads) and the main thread's share. Run it
with ``PYTHONPATH`` on two checkouts to compare them. ``--trusted`` trusts the whole changelog
(:mod:`platform_streams.runtime.restore.restore_ranges`: what a restore after a clean close does, no
header read per record); without it every record's source header is judged.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.stateful_cpu import TOPIC, _Collector, _task  # noqa: E402
from platform_streams import StreamsConfig  # noqa: E402
from platform_streams.dev.brokers import EmbeddedBroker  # noqa: E402
from platform_streams.kafka import KafkaAdmin, TopicSpec, create_producer  # noqa: E402
from platform_streams.processor.source_position import SOURCE_HEADER  # noqa: E402
from platform_streams.runtime.restore.changelog_filter import CommittedInputFilter  # noqa: E402
from platform_streams.state.restore import ChangelogReader  # noqa: E402

#: the changelog of the count store of application "cpu" (bench/stateful_cpu.py's task)
CHANGELOG = "cpu-counts-changelog"


def _write_changelog(bootstrap: str, topic: str, records: int) -> None:
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    admin.create_topics([TopicSpec(topic, 1)])
    producer = create_producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    value = (5).to_bytes(8, "big") + (1).to_bytes(8, "big")
    for i in range(records):
        producer.produce(topic, value, b"order-%08d" % i, headers=[(SOURCE_HEADER, b"%d" % i)])
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)


def restore_once(bootstrap: str, records: int, trusted: bool = False) -> tuple[float, float]:
    """(process CPU seconds, main-thread CPU seconds) of one restore into a fresh store."""
    state_dir = Path(tempfile.mkdtemp(prefix="restore-cpu-"))
    try:
        task = _task("count_unique", state_dir, _Collector())
        config = StreamsConfig(application_id="cpu", bootstrap_servers=bootstrap, state_dir=state_dir)
        record_filter = CommittedInputFilter(task.partitions, {(TOPIC, 0): records})
        if trusted:
            record_filter.trust({(CHANGELOG, 0): (0, records)})
        reader = ChangelogReader(config.restore_consumer_configs(), record_filter=record_filter)
        started, main_started = time.process_time(), time.thread_time()
        applied = reader.restore(task.state_manager)
        elapsed, main = time.process_time() - started, time.thread_time() - main_started
        assert sum(applied.values()) == records, applied
        task.close()
        return elapsed, main
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--trusted", action="store_true", help="trust the changelog's range (see above)")
    args = parser.parse_args()
    with EmbeddedBroker(kill_with_parent=True) as broker:
        bootstrap = broker.bootstrap_servers
        _write_changelog(bootstrap, CHANGELOG, args.records)
        runs = [restore_once(bootstrap, args.records, args.trusted) for _ in range(args.repeats)]
    best, main = min(runs)
    print(
        f"restore: {best / args.records * 1e6:.2f} us CPU per changelog record, main thread "
        f"{main / args.records * 1e6:.2f} (best of {args.repeats}, load {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
