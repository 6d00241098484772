"""Many real group members: how many stream threads one application can have, and how long
its group takes to place every task.

    python bench/many_members.py                          # 128 members, embedded broker
    python bench/many_members.py --members 200 --threads 25 --member-slots 256
    python bench/many_members.py --members 100 --member-slots 64   # today's default slots
    python bench/many_members.py --members 128 --existing-slots 64  # an app created with 64
    PLATFORM_STREAMS_BOOTSTRAP=host:9092 python bench/many_members.py --members 128

A tiny stateless application (``stream(in).mapValues(upper).to(out)``) on an input of as many
partitions as members, so every member gets exactly one task, runs as ``--members /
--threads`` client processes of ``--threads`` stream threads each (every client its own
process id and state directory: a separate client of the placement). Each child writes its
threads' state and active tasks to a file every half second; the parent waits until every
member runs exactly one task and every task has exactly one owner, then produces one record
per partition and waits until the output holds all of them. It prints the time from the
start until the placement was complete, until every record came out, and the peak RSS of
the children. A member count above ``--member-slots`` shows what happens beyond the slots:
a generation looks complete without the members that got no slot, the leader places without
them, and they start new generations.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from platform_streams import KafkaStreams, StreamsBuilder, StreamsConfig  # noqa: E402
from platform_streams.dev.brokers import EmbeddedBroker  # noqa: E402
from platform_streams.kafka import (  # noqa: E402
    KafkaAdmin,
    TopicPartition,
    TopicSpec,
    create_consumer,
    create_producer,
)

#: librdkafka's logical offset "the beginning of the partition"
OFFSET_BEGINNING = -2

#: generous group timings: a hundred members and the broker share two cores
TIMING: dict[str, Any] = {
    "session_timeout_ms": 30000,
    "heartbeat_interval_ms": 3000,
    "max_poll_interval_ms": 60000,
}


def _child(args: argparse.Namespace) -> None:
    """One client: ``--threads`` stream threads; its threads' tasks go to ``--status`` twice a second."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("platform_streams.runtime.task_assignment.coordinator").setLevel(logging.INFO)
    builder = StreamsBuilder()
    builder.stream(args.source).map_values(lambda v: v.upper() if isinstance(v, str) else v).to(args.sink)
    config = StreamsConfig(
        application_id=args.app_id,
        bootstrap_servers=args.bootstrap,
        state_dir=args.state_dir,
        num_stream_threads=args.threads,
        member_slots=args.member_slots,
        commit_interval_ms=1000,
        default_key_serde="string",
        default_value_serde="string",
        **TIMING,
    )
    streams = KafkaStreams(builder.build(), config)
    streams.start()
    status = Path(args.status)
    try:
        while not Path(args.stop).exists():
            threads = streams.metadata_for_local_threads()
            tmp = status.with_suffix(".tmp")
            tmp.write_text(json.dumps({"threads": threads, "rss_mb": _rss_mb()}))
            tmp.replace(status)
            time.sleep(0.5)
    finally:
        streams.close(timeout_s=60)


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _placement(status_files: list[Path]) -> tuple[int, dict[str, int], float]:
    """(threads reporting, task -> owners, summed RSS MB) over every child's latest status."""
    owners: dict[str, int] = {}
    threads = 0
    rss = 0.0
    for path in status_files:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        rss += data.get("rss_mb", 0.0)
        for thread in data["threads"]:
            threads += 1
            for task in thread["active_tasks"]:
                owners[task] = owners.get(task, 0) + 1
    return threads, owners, rss


def _run(args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    members, per = args.members, args.threads
    clients = -(-members // per)
    run = uuid.uuid4().hex[:8]
    app_id, source, sink = f"many-{run}", f"many-in-{run}", f"many-out-{run}"
    with KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([TopicSpec(source, members, 1), TopicSpec(sink, members, 1)])
        if args.existing_slots:  # an application created before, with that many slots
            compact = {"cleanup.policy": "compact"}
            admin.create_topics([TopicSpec(f"{app_id}-members", args.existing_slots, 1, compact)])
    work = Path(tempfile.mkdtemp(prefix="many-members-"))
    stop = work / "stop"
    status_files = [work / f"client-{i}.json" for i in range(clients)]
    children = []
    started = time.monotonic()
    for i in range(clients):
        threads = min(per, members - i * per)
        command = [
            sys.executable, __file__, "--child", "--bootstrap", bootstrap, "--app-id", app_id,
            "--source", source, "--sink", sink, "--threads", str(threads),
            "--member-slots", str(args.member_slots), "--state-dir", str(work / f"state-{i}"),
            "--status", str(status_files[i]), "--stop", str(stop),
        ]  # fmt: skip
        log = (work / f"client-{i}.log").open("w")
        children.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT))
    result: dict[str, Any] = {"members": members, "clients": clients, "member_slots": args.member_slots}
    if args.existing_slots:
        result["existing_slots"] = args.existing_slots
    peak_rss = 0.0
    try:
        deadline = started + args.timeout
        placed_at = None
        while time.monotonic() < deadline:
            threads, owners, rss = _placement(status_files)
            peak_rss = max(peak_rss, rss)
            complete = threads == members and len(owners) == members and set(owners.values()) == {1}
            if complete and placed_at is None:
                placed_at = time.monotonic()
            elif not complete:
                placed_at = None
            if placed_at is not None and time.monotonic() - placed_at >= args.stable_s:
                break
            if any(c.poll() is not None for c in children):
                raise RuntimeError(f"a client exited early; logs in {work}")
            time.sleep(0.5)
        threads, owners, rss = _placement(status_files)
        result["threads_reporting"] = threads
        result["generations"] = _generations(work, clients)
        with KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
            counts = admin.partition_counts([f"{app_id}-members"])
        result["members_topic_partitions"] = counts[f"{app_id}-members"]
        result["tasks_owned"] = len(owners)
        result["tasks_owned_twice"] = sum(1 for n in owners.values() if n > 1)
        if placed_at is None:
            result["placed_s"] = None
            return result
        result["placed_s"] = round(placed_at - started, 1)
        result["delivered_s"] = _deliver(bootstrap, source, sink, members, args.timeout)
        result["delivered_after_start_s"] = round(time.monotonic() - started, 1)
        return result
    finally:
        result["children_peak_rss_mb"] = round(peak_rss)
        stop.touch()
        for child in children:
            try:
                child.wait(timeout=90)
            except subprocess.TimeoutExpired:
                child.kill()
        result["work_dir"] = str(work)


def _generations(work: Path, clients: int) -> int:
    """The group generations the members joined (from the clients' logs)."""
    seen: set[str] = set()
    for i in range(clients):
        text = (work / f"client-{i}.log").read_text(errors="replace")
        seen.update(re.findall(r"joined generation (\d+)", text))
    return len(seen)


def _deliver(bootstrap: str, source: str, sink: str, partitions: int, timeout_s: float) -> float | None:
    """Produce one record per input partition; seconds until all came out (None: not in time)."""
    producer = create_producer({"bootstrap.servers": bootstrap})
    begin = time.monotonic()
    for p in range(partitions):
        producer.produce(source, key=f"k{p}".encode(), value=f"v{p}".encode(), partition=p)
    producer.flush(30)
    consumer = create_consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}"})
    consumer.assign([TopicPartition(sink, p, OFFSET_BEGINNING) for p in range(partitions)])
    seen: set[bytes] = set()
    try:
        while len(seen) < partitions and time.monotonic() - begin < timeout_s:
            for msg in consumer.consume(500, 0.5):
                if msg.error() is None and msg.value() is not None:
                    seen.add(msg.value())
    finally:
        consumer.close()
    return round(time.monotonic() - begin, 1) if len(seen) >= partitions else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=128)
    parser.add_argument("--threads", type=int, default=16, help="stream threads per client process")
    parser.add_argument("--member-slots", type=int, default=None, help="default: --members rounded up to 64s")
    parser.add_argument(
        "--existing-slots",
        type=int,
        default=0,
        help="create the members topic with this many partitions first (an existing application)",
    )
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--stable-s", type=float, default=5.0, help="how long the placement must hold")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for name in ("--bootstrap", "--app-id", "--source", "--sink", "--state-dir", "--status", "--stop"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    if args.member_slots is None:
        args.member_slots = max(64, -(-args.members // 64) * 64)
    external = os.environ.get("PLATFORM_STREAMS_BOOTSTRAP")
    if external:
        print(json.dumps({"broker": external, **_run(args, external)}))
        return
    with EmbeddedBroker(kill_with_parent=True) as broker:
        print(json.dumps({"broker": "embedded Tansu", **_run(args, broker.bootstrap_servers)}))


if __name__ == "__main__":
    main()
