"""What metrics cost the hot path: the same app with metrics off, at INFO, at DEBUG, and scraped.

    python bench/metrics_overhead.py                      # embedded broker, 300k records, 3 repeats
    python bench/metrics_overhead.py --records 1000000 --repeats 5

Two workloads: ``filter_map_json`` (stateless, from bench/run.py) and ``count_json`` (the
same JSON orders counted per user: a RocksDB store with caching and a changelog, so the
DEBUG store-latency hooks fire on every get and put). Modes:

* ``off``   -- the metrics recorder is not attached (what the worker costs without metrics);
* ``info``  -- the default: one recorder call per loop iteration and per commit;
* ``debug`` -- plus a timer and a histogram update around every store operation;
* ``scraped`` -- ``info`` with the HTTP endpoint on and ``/metrics`` scraped every 0.5 s
  (the scrape runs on another thread, but under the GIL it competes with the worker).

Every run is a fresh child process (its own CPU time) timed from partition assignment to
"every record processed and committed", as in bench/run.py. The table gives the median
records/s per mode and its ratio to ``off``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.run import GROUP_TIMING, WORKLOADS, Timer, broker, machine, produce_inputs  # noqa: E402
from platform_streams import KafkaStreams, State, StreamsBuilder, StreamsConfig  # noqa: E402
from platform_streams.dsl import Consumed, Produced  # noqa: E402
from platform_streams.kafka import KafkaAdmin, TopicSpec  # noqa: E402
from platform_streams.metrics import StreamsMetrics  # noqa: E402
from platform_streams.serde import Bytes, Json, Long  # noqa: E402

MODES = ("off", "info", "debug", "scraped")
APP_WORKLOADS = ("filter_map_json", "count_json")


@dataclass(frozen=True)
class Spec:
    workload: str
    mode: str
    bootstrap: str
    input_topic: str
    records: int
    state_dir: str


def _topology(spec: Spec) -> StreamsBuilder:
    orders = WORKLOADS["filter_map_json"]
    builder = StreamsBuilder()
    stream = builder.stream(spec.input_topic, Consumed(key_serde=Bytes(), value_serde=Json()))
    output = f"{spec.input_topic}-out-{uuid.uuid4().hex[:6]}"
    with KafkaAdmin({"bootstrap.servers": spec.bootstrap}) as admin:
        admin.create_topics([TopicSpec(output, 4)])
    if spec.workload == "count_json":
        stream.group_by_key().count().to_stream().to(output, Produced(key_serde=Bytes(), value_serde=Long()))
    else:
        stream.filter(orders.predicate).map_values(orders.mapper).to(
            output, Produced(key_serde=Bytes(), value_serde=Json())
        )
    return builder


def _scrape_forever(url: str, stop: threading.Event) -> None:
    while not stop.wait(0.5):
        with urllib.request.urlopen(url, timeout=5) as response:
            response.read()


def child(spec: Spec) -> dict[str, Any]:
    if spec.mode == "off":
        StreamsMetrics.attach_worker = lambda self, worker: None  # type: ignore[method-assign,assignment,return-value]
        StreamsMetrics.on_worker_state = lambda self, worker, state: None  # type: ignore[method-assign]
    builder = _topology(spec)
    config = StreamsConfig(
        application_id=f"bench-metrics-{uuid.uuid4().hex[:8]}",
        bootstrap_servers=spec.bootstrap,
        state_dir=Path(spec.state_dir),
        metrics_recording_level="DEBUG" if spec.mode == "debug" else "INFO",
        http_port=0 if spec.mode == "scraped" else None,
        **GROUP_TIMING,
    )
    streams = KafkaStreams(builder, config)
    streams.start()
    streams.wait_for_state(State.RUNNING, timeout_s=120)
    stop = threading.Event()
    if streams.http_server is not None:
        url = f"http://{streams.http_server.address}/metrics"
        threading.Thread(target=_scrape_forever, args=(url, stop), daemon=True).start()
    timer = Timer()
    timer.start()
    while sum(w.processed_total for w in streams.workers) < spec.records:
        if streams.state() not in (State.RUNNING, State.REBALANCING):
            raise RuntimeError(f"the app stopped: {streams.state()}")
        time.sleep(0.01)
    stop.set()
    streams.close(timeout_s=120)
    timer.stop()
    return {"workload": spec.workload, "mode": spec.mode, "wall_s": timer.wall_s, "cpu_s": timer.cpu_s}


def micro(calls: int = 200_000) -> list[tuple[str, float]]:
    """Nanoseconds per call of each piece the worker pays for, on real recorder objects.

    Deterministic where the end-to-end runs are noisy (a shared 2-core machine): the per-loop
    hooks at INFO, and what DEBUG adds to a store get/put.
    """
    from types import SimpleNamespace

    from platform_streams.dsl import Materialized
    from platform_streams.metrics.catalog import Level
    from platform_streams.metrics.recorders import ThreadRecorder, _latency_hook, _metered
    from platform_streams.runtime.store_guard import StoreGuard
    from platform_streams.serde import String
    from platform_streams.testing import TopologyTestDriver

    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=String(), value_serde=String())).group_by_key().count(
        materialized=Materialized.as_("counts")
    )
    out: list[tuple[str, float]] = []
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("in", String(), String()).pipe_input("k", "v")
        tasks = {task.task_id: task for task in driver._tasks}
        worker = SimpleNamespace(
            name="w",
            tasks=tasks,
            consumer=None,
            plan=driver.plan,
            state_lifecycle=SimpleNamespace(listener=None),
        )
        recorder = ThreadRecorder(worker, Level.INFO)
        guard = StoreGuard()
        guard.acquire_for_worker()

        def timed(label: str, fn: Any) -> None:
            start = time.perf_counter_ns()
            for _ in range(calls):
                fn()
            out.append((label, (time.perf_counter_ns() - start) / calls))

        perf = time.perf_counter
        timed(
            "loop hooks (INFO): yield_point + 2 perf_counter + on_loop",
            lambda: (guard.yield_point(), recorder.on_loop(perf(), perf(), 500, 500)),
        )
        timed("commit hook: on_commit", lambda: recorder.on_commit(perf()))
        store = driver.get_state_store("counts")
        timed("store get + put, no hook", lambda: store.put_timestamped("k", store.get("k") or 0, 1))
        metered = _metered(store)
        assert metered is not None
        metered.set_metrics_hook(_latency_hook({}))
        timed("store get + put, DEBUG hook", lambda: store.put_timestamped("k", store.get("k") or 0, 1))
        guard.release_for_worker()
    return out


def run_child(spec: Spec) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(asdict(spec))],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{spec.workload}/{spec.mode} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--micro", action="store_true", help="only the per-call costs (no broker)")
    args = parser.parse_args(argv)
    if args.micro:
        print("| what | ns per call |\n|---|---:|")
        for label, ns in micro():
            print(f"| {label} | {ns:,.0f} |")
        return 0
    if args.child:
        print(json.dumps(child(Spec(**json.loads(args.child)))), flush=True)
        return 0
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with broker(args.bootstrap) as bootstrap, KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        topic = produce_inputs(bootstrap, admin, WORKLOADS["filter_map_json"], args.records, args.partitions)
        for repeat in range(args.repeats):
            for workload in APP_WORKLOADS:
                for mode in MODES:  # interleaved, so drift on the machine hits every mode alike
                    with tempfile.TemporaryDirectory() as state_dir:
                        spec = Spec(workload, mode, bootstrap, topic, args.records, state_dir)
                        result = run_child(spec)
                    results.setdefault((workload, mode), []).append(result)
                    rate = args.records / result["wall_s"]
                    print(f"repeat {repeat + 1} {workload:16} {mode:8} {rate:>10,.0f} rec/s", file=sys.stderr)
    print(
        f"\n{machine()}; {args.records:,} records, {args.partitions} partitions, median of {args.repeats}\n"
    )
    print("| workload | metrics | records/s | vs off | CPU s |")
    print("|---|---|---:|---:|---:|")
    for workload in APP_WORKLOADS:
        base = statistics.median(args.records / r["wall_s"] for r in results[(workload, "off")])
        for mode in MODES:
            runs = results[(workload, mode)]
            rate = statistics.median(args.records / r["wall_s"] for r in runs)
            cpu = statistics.median(r["cpu_s"] for r in runs)
            print(f"| {workload} | {mode} | {rate:,.0f} | {rate / base:.3f} | {cpu:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
