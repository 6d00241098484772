"""What the Tansu fencing workaround costs an exactly-once commit, measured on Apache Kafka.

    python bench/eos_membership_commits.py                     # Apache Kafka, 200,000 records, 3 repeats
    python bench/eos_membership_commits.py --records 50000 --repeats 1
    PLATFORM_STREAMS_BOOTSTRAP_SERVERS=host:9092 python bench/eos_membership_commits.py

Under ``exactly_once_v2`` on a broker that accepts stale transactional offset commits
(Tansu), every commit is preceded by a plain offset commit to the control topic that the
group coordinator checks against the membership, and the collector repeats it before
``commit_transaction`` (``StreamWorker._check_membership``). Apache Kafka fences a stale
member itself (KIP-447), so the capability probe (``txn_offset_commit_fencing``) switches
those commits off there (``runtime/broker_features.py``). This bench runs the
``count_eos_100ms`` workload of bench/run.py (count per key, 100 ms commits) on Apache
Kafka both ways, alternating, each run a fresh child process and application:

* ``probed`` -- as shipped: the broker fences, no membership-check commits;
* ``membership_commits`` -- the Tansu workaround forced on
  (``membership_check_topic`` patched to return the control topic);
* ``deferred_sends`` -- the other Tansu workaround forced on: records held in memory until
  the commit instead of sent as they come in the open transaction (``sends_eagerly``
  patched to return False; the broker probe ``aborts_fenced_transactions`` says Kafka needs
  neither).

It reports the latency of each commit that committed something (``StreamWorker.commit``:
flush caches, membership checks if on, ``commit_transaction`` with the input offsets) --
mean, p50, p99 -- the number of those commits and the records/s of the run; every run's
output is checked (bench/verify.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import verify  # noqa: E402
from bench.common import RunSpec  # noqa: E402
from bench.run import broker, machine, new_run, produce_input  # noqa: E402
from bench.workloads import WORKLOADS  # noqa: E402
from platform_streams.kafka import KafkaAdmin  # noqa: E402

WORKLOAD = WORKLOADS["count_eos_100ms"]
MODES = ("probed", "membership_commits", "deferred_sends")


def child(spec_json: str, mode: str) -> dict[str, Any]:
    """One run in this process: the count app under EOS, every commit timed."""
    from bench.engine_ps import build, streams_config
    from platform_streams import KafkaStreams, State
    from platform_streams.runtime import streams_runtime as runtime_client
    from platform_streams.runtime.workers.worker import StreamWorker

    spec = RunSpec(**json.loads(spec_json))
    if mode == "membership_commits":
        runtime_client.membership_check_topic = lambda config, topic: topic  # type: ignore[assignment]
    if mode == "deferred_sends":
        runtime_client.sends_eagerly = lambda config: False  # type: ignore[assignment]
    latencies: list[float] = []
    checks = {"on": False, "eager": False}
    original = StreamWorker.commit

    def timed(self: StreamWorker) -> None:
        before, started = self.committed_total, time.perf_counter()
        original(self)
        if self.committed_total > before:
            latencies.append(time.perf_counter() - started)
        checks["on"] = self._control_topic is not None
        checks["eager"] = self.collector is not None and self.collector.streams_producer.eager

    StreamWorker.commit = timed  # type: ignore[method-assign]
    streams = KafkaStreams(build(WORKLOAD, spec), streams_config(WORKLOAD, spec))
    streams.start()
    streams.wait_for_state(State.RUNNING, timeout_s=120)
    started = time.perf_counter()
    while sum(w.processed_total for w in streams.workers) < spec.records:
        if streams.state() not in (State.RUNNING, State.REBALANCING):
            raise RuntimeError(f"platform_streams stopped: {streams.state()}")
        time.sleep(0.01)
    streams.close(timeout_s=120)
    wall = time.perf_counter() - started
    return {
        "latencies": latencies,
        "wall_s": wall,
        "membership_commits": checks["on"],
        "eager_sends": checks["eager"],
    }


def run_mode(
    mode: str, bootstrap: str, admin: KafkaAdmin, source: Any, args: argparse.Namespace
) -> dict[str, Any]:
    spec = new_run(WORKLOAD.name, f"platform_streams-{mode}", bootstrap, admin, source, args)
    sink, state_dir = spec.output_topic, spec.state_dir
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(spec.__dict__), "--mode", mode],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
            cwd=ROOT,
        )
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} run failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["membership_commits"] != (mode == "membership_commits"):
        raise AssertionError(f"{mode}: membership-check commits were {result['membership_commits']}")
    if result["eager_sends"] != (mode != "deferred_sends"):
        raise AssertionError(f"{mode}: records sent as they come was {result['eager_sends']}")
    verify.Answer(WORKLOAD, args.records, source.base_ts).check(bootstrap, sink, args.partitions, mode)
    return result


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bootstrap", default=os.environ.get("PLATFORM_STREAMS_BOOTSTRAP_SERVERS") or None)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.mode)), flush=True)
        return 0
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    with broker(args.bootstrap, "kafka") as bootstrap, KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        source = produce_input(bootstrap, admin, WORKLOAD.input, args.records, args.partitions)
        for repeat in range(args.repeats):
            for mode in MODES if repeat % 2 == 0 else MODES[::-1]:
                load = os.getloadavg()[0]
                result = run_mode(mode, bootstrap, admin, source, args)
                result["load"] = load
                runs[mode].append(result)
                lat = result["latencies"]
                print(
                    f"  {mode}: {len(lat)} commits, mean {statistics.fmean(lat) * 1000:.1f} ms, "
                    f"p50 {_ms(lat, 0.5):.1f} ms, p99 {_ms(lat, 0.99):.1f} ms, "
                    f"{args.records / result['wall_s']:,.0f} records/s, load {load:.1f}",
                    flush=True,
                )
    print("\n| mode | commits (runs) | commit ms mean | p50 | p99 | records/s (median) | load |")
    print("|---|---|---:|---:|---:|---:|---|")
    for mode, results in runs.items():
        loads = ", ".join(f"{r['load']:.1f}" for r in results)
        every = [x for r in results for x in r["latencies"]]
        rate = statistics.median(args.records / r["wall_s"] for r in results)
        print(
            f"| {mode} | {', '.join(str(len(r['latencies'])) for r in results)} "
            f"| {statistics.fmean(every) * 1000:.1f} | {_ms(every, 0.5):.1f} | {_ms(every, 0.99):.1f} "
            f"| {rate:,.0f} | {loads} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
