"""Rebalances as a user sees them: the longest output gap per task, eager vs cooperative vs Java.

    python bench/rebalance.py                                  # embedded broker
    PLATFORM_STREAMS_BOOTSTRAP=host:9092 python bench/rebalance.py --engines eager,cooperative,java
    python bench/rebalance.py --events join --partitions 12 --instances 3 --repeats 3

The application is the counting app of the exactly-once tests (``tests/integration/
eos_runner.py``; for ``java`` the same topology in Java Kafka Streams 4.3.1,
tools/kafka-streams-oracle's ``Rebalance``): cache off (one output record per input record),
at-least-once, 200 ms commits, one standby, 6 s sessions, each instance its own process.
Steady input: one record per partition every 50 ms (keys ``p<partition>-<n % 50>``, so every
store stays small and a caught-up copy moves at once). Engines: ``eager`` and
``cooperative`` (platform_streams' ``rebalance_protocol``), ``java``. Events, each on a fresh
application that has run 10 s in steady state first:

* **join**: ``--instances`` run, one more joins; until every task is placed and nothing
  moved for 5 s;
* **rolling**: static membership (``group.instance.id``); each instance in turn is stopped
  (SIGTERM), restarted with the same id and state directory, and waited for until it runs
  tasks again and the placement is complete;
* **kill**: one instance is killed (SIGKILL, dynamic membership); until the survivors run
  every task (the session timeout, 6 s, is part of it).

Reported per run: the longest gap between output records of each partition during the
event (from its start to 2 s after it settled), split into *kept* tasks (same owner before
and after; for ``rolling``: the tasks of the instances not being restarted at that step)
and *moved* ones, and the end-to-end latency p99 (arrival of an output record minus its
input record's timestamp, which the output carries) during the event against the 10 s of
steady state before it. Gaps are measured from outside by a group-less consumer.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.run import broker  # noqa: E402
from platform_streams.kafka import OFFSET_END, KafkaAdmin, TopicPartition, create_consumer, create_producer  # noqa: E402
from tests.integration.eos_support import Runner, RunnerApp, new_app_id  # noqa: E402

JAVA_SHIM = Path(__file__).with_name("rebalance_java.py")
INTERVAL_S = 0.05
STEADY_S = 10.0


class JavaRunner(Runner):
    """tools/kafka-streams-oracle's ``Rebalance`` app, with eos_runner's flags and events."""

    runner = JAVA_SHIM


class Feed(threading.Thread):
    """One record per partition every ``INTERVAL_S``."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.producer = create_producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.partitions = topic, partitions
        self.stop = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            for p in range(self.partitions):
                self.producer.produce(self.topic, key=f"p{p}-{n % 50}".encode(), value=b"x", partition=p)
            self.producer.poll(0)
            n += 1
            time.sleep(INTERVAL_S)
        self.producer.flush(30)


class Watch(threading.Thread):
    """Tails the output from its end: per input partition (the key names it), arrival times
    and end-to-end latencies (arrival minus the record's timestamp, the input's)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.consumer = create_consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"watch-{topic}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                "fetch.queue.backoff.ms": 10,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
        self.partitions = partitions
        self.stop = threading.Event()
        self.seen: list[list[tuple[float, float]]] = [[] for _ in range(partitions)]

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for msg in self.consumer.consume(1000, 0.05):
                    if msg.error() is not None or msg.key() is None:
                        continue
                    now, key = time.time(), msg.key().decode()
                    self.seen[int(key[1 : key.index("-")])].append((now, now - msg.timestamp()[1] / 1000))
        finally:
            self.consumer.close()

    def gaps(self, since: float, until: float) -> list[float]:
        out = []
        for seen in self.seen:
            window = [since, *(t for t, _ in seen if since <= t <= until), until]
            out.append(max(b - a for a, b in itertools.pairwise(window)))
        return out

    def p99(self, since: float, until: float) -> float:
        lat = sorted(lat for seen in self.seen for t, lat in seen if since <= t <= until)
        return lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else float("nan")


def owners(group: list[Runner]) -> dict[int, int]:
    """Input partition -> index in ``group`` of the runner whose last ACTIVE lists its task."""
    return {
        int(t.split("_")[1]): i
        for i, r in enumerate(group)
        if r.proc.poll() is None
        for t in (r.last("ACTIVE") or ())
    }


def placed(group: list[Runner], partitions: int) -> bool:
    tasks = [t for r in group if r.proc.poll() is None for t in (r.last("ACTIVE") or ())]
    return len(tasks) == partitions == len(set(tasks))


def settle(group: list[Runner], partitions: int, done: Callable[[], bool], timeout_s: float) -> float:
    """Wait until ``done`` and the placement is complete and unchanged for 5 s; returns the
    time the final placement was first seen."""
    deadline = time.monotonic() + timeout_s
    last, since = None, time.time()
    while time.monotonic() < deadline:
        now = owners(group) if placed(group, partitions) and done() else None
        if now != last:
            last, since = now, time.time()
        elif now is not None and time.time() - since >= 5.0:
            return since
        time.sleep(0.1)
    raise AssertionError(f"not settled within {timeout_s}s: {owners(group)}")


def run_event(
    bootstrap: str, admin: KafkaAdmin, engine: str, event: str, args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    parts, n = args.partitions, args.instances
    app = RunnerApp.create(bootstrap, admin, new_app_id(f"rb-{engine}-{event}"), parts)
    common = app.runner_args(guarantee="at_least_once", commit_interval_ms=200, standbys=1)
    if engine != "java":
        common["rebalance_protocol"] = engine
    kind = JavaRunner if engine == "java" else Runner
    static = event == "rolling"

    def start(i: int) -> Runner:
        return kind(
            tmp / f"i{i}.log",
            state_dir=tmp / f"s{i}",
            instance_id=f"{app.app_id}-i{i}" if static else None,
            **common,
        )

    group = [start(i) for i in range(n)]
    feed, watch = Feed(bootstrap, app.source, parts), Watch(bootstrap, app.sink, parts)
    try:
        settle(group, parts, lambda: all(r.last("ACTIVE") for r in group), 240)
        feed.start()
        watch.start()
        time.sleep(STEADY_S)
        before, t0 = owners(group), time.time()
        bystander: list[float] = []
        if event == "join":
            group.append(start(n))
            t1 = settle(group, parts, lambda: bool(group[-1].last("ACTIVE")), 300)
        elif event == "kill":
            group[0].kill()
            t1 = settle(group, parts, lambda: True, 300)
        else:
            t1 = t0
            for i in range(n):
                step0, mine = time.time(), {p for p, o in owners(group).items() if o == i}
                group[i].terminate(60)
                group[i] = start(i)
                t1 = settle(group, parts, lambda i=i: bool(group[i].last("ACTIVE")), 300)
                step_gaps = watch.gaps(step0, t1)
                bystander += [step_gaps[p] for p in range(parts) if p not in mine]
        time.sleep(2.0)
        end = t1 + 2.0
        after = owners(group)
        gaps = watch.gaps(t0, end)
        if event == "kill":
            kept = [p for p in range(parts) if before.get(p) != 0 and before.get(p) == after.get(p)]
        else:
            kept = [p for p in range(parts) if before.get(p) == after.get(p)]
        moved = [p for p in range(parts) if p not in kept]
        return {
            "engine": engine,
            "event": event,
            "settled_s": round(t1 - t0, 2),
            "gap_per_partition_s": [round(g, 2) for g in gaps],
            "kept": kept,
            "kept_max_gap_s": round(max((gaps[p] for p in kept), default=float("nan")), 2),
            "moved_max_gap_s": round(max((gaps[p] for p in moved), default=float("nan")), 2),
            "bystander_max_gap_s": round(max(bystander), 2) if bystander else None,
            "p99_steady_s": round(watch.p99(t0 - STEADY_S, t0), 3),
            "p99_event_s": round(watch.p99(t0, end), 3),
        }
    finally:
        feed.stop.set()
        watch.stop.set()
        for r in group:
            if r.proc.poll() is None:
                try:
                    r.terminate(60)
                except Exception:
                    r.kill()
            r.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engines", default="eager,cooperative,java")
    parser.add_argument("--events", default="join,rolling,kill")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--bootstrap", default=None, help="default: PLATFORM_STREAMS_BOOTSTRAP or embedded")
    args = parser.parse_args(argv)
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with (
        broker(args.bootstrap or os.environ.get("PLATFORM_STREAMS_BOOTSTRAP")) as bootstrap,
        KafkaAdmin({"bootstrap.servers": bootstrap}) as admin,
    ):
        for _ in range(args.repeats):
            for event in args.events.split(","):
                for engine in args.engines.split(","):
                    with tempfile.TemporaryDirectory() as tmp:
                        got = run_event(bootstrap, admin, engine, event, args, Path(tmp))
                    print(json.dumps(got), flush=True)
                    runs.setdefault((engine, event), []).append(got)
    summary = {
        f"{engine} / {event}": {
            key: [r[key] for r in got]
            for key in (
                "kept_max_gap_s",
                "moved_max_gap_s",
                "bystander_max_gap_s",
                "p99_steady_s",
                "p99_event_s",
            )
        }
        | {"kept_gap_median_s": statistics.median(r["kept_max_gap_s"] for r in got)}
        for (engine, event), got in runs.items()
    }
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
