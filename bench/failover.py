"""Failover and scale-out: today's placement (``range``) against the state-aware assignor.

    python bench/failover.py                                   # embedded broker, both assignors
    python bench/failover.py --assignors state_aware --keys 30000
    PLATFORM_STREAMS_BOOTSTRAP=host:9092 python bench/failover.py

The application is the counting app of the exactly-once tests (``tests/integration/
eos_runner.py``: cache off, one changelog record per input record), at-least-once,
``num_standby_replicas=1``, 6 partitions, 6 s sessions, run as separate processes. Per
assignor, two scenarios, each on a fresh application:

* **kill -9 of one of three instances** once every standby has caught up, while input
  trickles in (100 records every 0.1 s): *restored* = changelog records the survivors
  replayed to take the lost tasks over; *gap* = the longest time any output partition
  went without a new record, from the kill until every task is placed again;
* **scale-out 3 -> 4**: a fourth instance joins under the same trickle; *restored* =
  changelog records replayed by every task that became active somewhere after the join;
  *gap* = the longest silence of any output partition from the join until the assignment
  settles (the state-aware assignor: after its probing rebalance, ``probing_ms``).

Gaps are measured from outside: a consumer tails the output and notes when records
arrive (output records carry their input's timestamp, so theirs cannot be used). They
include failure detection (the session timeout, after a kill), the group rebalance, the
assignment, restores and commit delays.
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
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.run import broker  # noqa: E402
from platform_streams.kafka import (  # noqa: E402
    OFFSET_END,
    KafkaAdmin,
    TopicPartition,
    create_consumer,
    log_end_offsets,
)
from tests.integration.eos_support import Feeder, Runner, RunnerApp, inputs, new_app_id, runners  # noqa: E402
from tests.integration.support_apps import wait_until  # noqa: E402
from tests.support.kafka import produce  # noqa: E402

PARTITIONS = 6


class Trickle:
    """100 input records every 0.1 s from a background thread until stopped."""

    def __init__(self, bootstrap: str, topic: str, keys: int) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(bootstrap, topic, keys), daemon=True)
        self._thread.start()

    def _run(self, bootstrap: str, topic: str, keys: int) -> None:
        sent = 10_000_000
        while not self._stop.is_set():
            produce(bootstrap, topic, inputs(sent, 100, keys))
            sent += 100
            self._stop.wait(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def _actives(group: list[Runner]) -> list[set[str]]:
    return [set(r.last("ACTIVE") or ()) for r in group]


def _placed(group: list[Runner]) -> bool:
    every = [t for a in _actives(group) for t in a]
    return len(every) == PARTITIONS == len(set(every))


def _standbys_current(group: list[Runner], changelog: str, bootstrap: str) -> bool:
    held: dict[str, int] = {}
    for r in group:
        for task, offsets in (r.last("STANDBY") or {}).items():
            held[task] = offsets.get(f"{changelog}:{task.split('_')[1]}", -1)
    if len(held) < PARTITIONS:
        return False
    ends = log_end_offsets(
        {"bootstrap.servers": bootstrap}, [(changelog, int(t.split("_")[1])) for t in held]
    )
    return all(held[t] >= ends[(changelog, int(t.split("_")[1]))] - 101 for t in held)


class OutputWatcher:
    """Tails the output topic and notes when each record *arrives* (wall clock, per partition).

    Output records carry their input record's timestamp (as in Kafka Streams), so the
    processing gap must be seen from the outside: a group-less consumer from the log end,
    fetching every 10 ms.
    """

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.arrivals: dict[int, list[float]] = defaultdict(list)
        self._stop = threading.Event()
        self._consumer = create_consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"watch-{topic}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                "fetch.queue.backoff.ms": 10,
            }
        )
        self._consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(PARTITIONS)])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for msg in self._consumer.consume(1000, 0.05):
                if msg.error() is None:
                    self.arrivals[msg.partition()].append(time.time())

    def longest_silence(self, start: float, end: float) -> float:
        """The longest time (s) any partition went without a new record in [start, end]."""
        worst = 0.0
        for p in range(PARTITIONS):
            points = [start, *(t for t in self.arrivals.get(p, []) if start <= t <= end), end]
            worst = max(worst, *(b - a for a, b in itertools.pairwise(points)))
        return worst

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()


def _marks(group: list[Runner]) -> dict[int, int]:
    """Where each runner's event log is now (restores are counted from there)."""
    return {id(r): len(r.events) for r in group}


def _restores_since(runner: Runner, marks: dict[int, int]) -> list[dict[str, int]]:
    prefix = "RESTORED "
    return [
        json.loads(e[len(prefix) :])
        for e in runner.events[marks.get(id(runner), 0) :]
        if e.startswith(prefix)
    ]


def _restored(group: list[Runner], marks: dict[int, int], tasks: set[str] | None) -> int:
    """Changelog records replayed by restores after ``marks`` (each rebalance's restores once)."""
    return sum(
        n
        for r in group
        for restored in _restores_since(r, marks)
        for t, n in restored.items()
        if tasks is None or t in tasks
    )


def _start_group(
    app: RunnerApp, started: Any, tmp: Path, args: dict[str, Any], keys: int, count: int
) -> tuple[list[Runner], str]:
    changelog = f"{app.app_id}-counts-changelog"
    tmp.mkdir(parents=True, exist_ok=True)
    group = [
        started.start(tmp / f"i{i}.log", running=False, state_dir=tmp / f"s{i}", **args) for i in range(count)
    ]
    # the state is built after the group settled: no instance keeps an old copy of a task
    # from the start-up rebalances (that would hide what a placement costs)
    wait_until(lambda: _placed(group) and all(_actives(group)), 180, "tasks placed on every instance")
    time.sleep(5)
    wait_until(lambda: _placed(group) and all(_actives(group)), 180, "tasks placed on every instance")
    feed = Feeder(app.bootstrap, app.source, 3 * keys, keys, chunk=10_000, pause_s=0.0).start()
    feed.join(300)
    wait_until(app.all_committed, 300, "input processed")
    wait_until(lambda: _standbys_current(group, changelog, app.bootstrap), 180, "standbys caught up")
    return group, changelog


def kill_one_of_three(
    bootstrap: str, admin: KafkaAdmin, assignor: str, keys: int, tmp: Path
) -> dict[str, Any]:
    app = RunnerApp.create(bootstrap, admin, new_app_id(f"fo-{assignor}"), PARTITIONS)
    args = app.runner_args(
        guarantee="at_least_once", commit_interval_ms=200, standbys=1, task_assignor=assignor
    )
    with runners() as started:
        group, changelog = _start_group(app, started, tmp, args, keys, 3)
        doomed = max(group, key=lambda r: len(r.last("ACTIVE") or ()))
        lost = set(doomed.last("ACTIVE"))
        sizes = log_end_offsets(
            {"bootstrap.servers": bootstrap}, [(changelog, int(t.split("_")[1])) for t in lost]
        )
        survivors = [r for r in group if r is not doomed]
        marks = _marks(survivors)
        watcher = OutputWatcher(bootstrap, app.sink)
        trickle = Trickle(bootstrap, app.source, keys)
        time.sleep(2)
        killed = time.time()
        doomed.kill()

        def taken_over() -> bool:
            if not (_placed(survivors) and lost <= set().union(*_actives(survivors))):
                return False
            return all(_restores_since(r, marks) for r in survivors if lost & set(r.last("ACTIVE")))

        wait_until(taken_over, 180, "lost tasks taken over")
        time.sleep(3)
        gap = watcher.longest_silence(killed, time.time())
        trickle.stop()
        watcher.close()
        restored = _restored(survivors, marks, lost)
        for r in survivors:
            r.terminate()
    return {
        "lost_tasks": sorted(lost),
        "lost_changelog": sum(sizes.values()),
        "restored": restored,
        "gap_s": gap,
    }


def scale_out(
    bootstrap: str, admin: KafkaAdmin, assignor: str, keys: int, tmp: Path, probing_ms: int
) -> dict[str, Any]:
    app = RunnerApp.create(bootstrap, admin, new_app_id(f"so-{assignor}"), PARTITIONS)
    args = app.runner_args(
        guarantee="at_least_once",
        commit_interval_ms=200,
        standbys=1,
        task_assignor=assignor,
        probing_ms=probing_ms,
    )
    with runners() as started:
        group, changelog = _start_group(app, started, tmp, args, keys, 3)
        sizes = log_end_offsets({"bootstrap.servers": bootstrap}, [(changelog, p) for p in range(PARTITIONS)])
        marks = _marks(group)
        watcher = OutputWatcher(bootstrap, app.sink)
        trickle = Trickle(bootstrap, app.source, keys)
        time.sleep(2)
        joined = time.time()
        newcomer = started.start(tmp / "new.log", running=False, state_dir=tmp / "new", **args)
        everyone = [*group, newcomer]
        wait_until(lambda: newcomer.last("ACTIVE") and _placed(everyone), 300, "newcomer runs tasks")
        time.sleep(probing_ms / 1000 + 8 if assignor == "state_aware" else 8)
        wait_until(lambda: _placed(everyone), 120, "settled")
        gap = watcher.longest_silence(joined, time.time())
        trickle.stop()
        watcher.close()
        restored = _restored(everyone, marks, None)
        counts = [len(a) for a in _actives(everyone)]
        for r in everyone:
            r.terminate()
    return {
        "changelog": sum(sizes.values()),
        "restored": restored,
        "gap_s": gap,
        "active_per_instance": counts,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--assignors", default="range,state_aware")
    parser.add_argument("--keys", type=int, default=30_000)
    parser.add_argument("--probing-ms", type=int, default=10_000)
    parser.add_argument("--bootstrap", default=None, help="default: PLATFORM_STREAMS_BOOTSTRAP or embedded")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    runs: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    with (
        broker(args.bootstrap or os.environ.get("PLATFORM_STREAMS_BOOTSTRAP")) as bootstrap,
        KafkaAdmin({"bootstrap.servers": bootstrap}) as admin,
    ):
        for _ in range(args.repeats):
            for assignor in args.assignors.split(","):
                for scenario in ("kill -9 1 of 3", "scale-out 3->4"):
                    with tempfile.TemporaryDirectory() as tmp:
                        if scenario.startswith("kill"):
                            run = kill_one_of_three(bootstrap, admin, assignor, args.keys, Path(tmp))
                        else:
                            run = scale_out(bootstrap, admin, assignor, args.keys, Path(tmp), args.probing_ms)
                    print(json.dumps({"assignor": assignor, "scenario": scenario, **run}), flush=True)
                    runs[(assignor, scenario)].append(run)
    results = {
        f"{assignor} / {scenario}": {
            "restored_median": statistics.median(r["restored"] for r in got),
            "gap_s_median": round(statistics.median(r["gap_s"] for r in got), 2),
            "gap_s_runs": [round(r["gap_s"], 2) for r in got],
            "restored_runs": [r["restored"] for r in got],
        }
        for (assignor, scenario), got in runs.items()
    }
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
