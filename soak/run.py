"""``python -m soak`` / ``make soak``: set up, run the workload and the fault schedule for
``SOAK_MINUTES``, stop the input, wait for the applications to catch up, check, report.

Exit status 0 only when lost, wrong, duplicates and stuck are all 0 (``broker_leaked`` --
duplicates traced to a transaction the broker committed for a killed producer -- is
reported and does not fail the run).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from platform_streams.dev.brokers import ApacheKafkaBroker
from platform_streams.dev.brokers.apache_jars import apache_kafka_missing
from platform_streams.dev.brokers.embedded import EmbeddedBroker
from platform_streams.kafka import KafkaAdmin, TopicSpec
from soak.app import GROUPS, table_value
from soak.checker import AppChecker, caught_up, committed_input
from soak.cluster import REPO, App, AppSpec, Instance, Supervised
from soak.connection import client_conf
from soak.faults import FaultRunner, http_get
from soak.producer import Producer, produce_table
from soak.report import plot, summary_line, write_json
from soak.schedule import make_schedule

PARTITIONS = 4


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=float(env.get("SOAK_MINUTES", "60")))
    parser.add_argument("--seed", type=int, default=int(env["SOAK_SEED"]) if env.get("SOAK_SEED") else None)
    parser.add_argument("--rate", type=int, default=int(env.get("SOAK_RATE", "300")), help="records/s")
    parser.add_argument("--keys", type=int, default=int(env.get("SOAK_KEYS", "200")))
    parser.add_argument("--out", type=Path, default=Path(env["SOAK_OUT"]) if env.get("SOAK_OUT") else None)
    parser.add_argument("--bootstrap", default=env.get("PLATFORM_STREAMS_BOOTSTRAP"))
    parser.add_argument(
        "--broker",
        choices=("auto", "tansu", "kafka"),
        default=env.get("SOAK_BROKER", "auto"),
        help="the broker started when no --bootstrap is given: auto (default) is Apache Kafka "
        "where Java and Maven are, else the embedded Tansu",
    )
    parser.add_argument(
        "--settle-timeout",
        type=float,
        default=float(env.get("SOAK_SETTLE_S", "900")),
        help="seconds the applications get to catch up after the input stops",
    )
    return parser.parse_args(argv)


def _create_topics(admin: KafkaAdmin, run_id: str) -> dict[str, str]:
    names = {
        "SOAK_INPUT": f"soak-{run_id}-input",
        "SOAK_TABLE": f"soak-{run_id}-groups",
    }
    specs = [TopicSpec(name, PARTITIONS) for name in names.values()]
    admin.create_topics(specs)
    return names


def _app_topics(
    admin: KafkaAdmin, run_id: str, name: str, shared: dict[str, str]
) -> tuple[dict[str, str], str]:
    topics = {**shared}
    for env_name, suffix in (
        ("SOAK_COUNTS", "counts"),
        ("SOAK_WINDOWS", "windows"),
        ("SOAK_JOINED", "joined"),
    ):
        topics[env_name] = f"soak-{run_id}-{name}-{suffix}"
    dead_letter = f"soak-{run_id}-{name}-dead-letters"
    admin.create_topics(
        [TopicSpec(t, PARTITIONS) for k, t in topics.items() if k not in shared] + [TopicSpec(dead_letter, 1)]
    )
    return topics, dead_letter


def _all_running(app: App) -> bool:
    ports = app.ports()
    for port in ports:
        status, body = http_get(port, "/state", timeout_s=10)
        if status != 200 or json.loads(body).get("state") != "RUNNING":
            return False
    return True


def _wait(condition: Any, timeout_s: float, what: str, interval_s: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval_s)
    print(f"soak: timed out after {timeout_s:.0f}s waiting for {what}", flush=True)
    return False


class Sampler:
    """Every ``interval_s``: records produced, input committed per application, lag, load."""

    def __init__(
        self, admin: KafkaAdmin, apps: dict[str, App], producer: Producer, topic: str, t0: float
    ) -> None:
        self.samples: list[dict[str, Any]] = []
        self._args = (admin, apps, producer, topic, t0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        admin, apps, producer, topic, t0 = self._args
        while not self._stop.wait(5.0):
            try:
                committed = {n: committed_input(admin, a, topic, PARTITIONS) for n, a in apps.items()}
            except Exception:  # a paused broker: skip this sample
                continue
            end = sum(producer.history.ends.values())
            self.samples.append(
                {
                    "t": round(time.monotonic() - t0, 1),
                    "produced": producer.history.records,
                    "committed": committed,
                    "lag": {n: max(0, end - c) for n, c in committed.items()},
                    "load1": os.getloadavg()[0],
                }
            )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: where a long run is
    signal.signal(signal.SIGTERM, _terminated)
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    run_id = uuid.uuid4().hex[:8]
    run_dir = args.out or REPO / "soak-runs" / time.strftime(f"%Y%m%dT%H%M%S-{run_id}")
    run_dir.mkdir(parents=True, exist_ok=True)
    replay = f"SOAK_MINUTES={args.minutes:g} SOAK_SEED={seed} SOAK_RATE={args.rate} SOAK_KEYS={args.keys}"
    replay += " make soak"
    print(
        f"soak: seed {seed}, {args.minutes:g} min, {args.rate} records/s, {args.keys} keys; "
        f"run dir {run_dir}",
        flush=True,
    )
    print(f"soak: replay with: {replay}", flush=True)
    broker: EmbeddedBroker | ApacheKafkaBroker | None = None
    if args.bootstrap is None:
        broker = _local_broker(args.broker, run_dir)
        bootstrap = broker.bootstrap_servers
    else:
        bootstrap = args.bootstrap
    apps: dict[str, App] = {}
    try:
        return _run(args, seed, run_id, run_dir, bootstrap, broker, apps, replay)
    finally:
        for app in apps.values():
            app.stop()
        if broker is not None:
            broker.stop()


def _local_broker(kind: str, run_dir: Path) -> EmbeddedBroker | ApacheKafkaBroker:
    """Apache Kafka by default where it can run: the soak checks semantics, and on Tansu a
    killed producer's transaction is committed, groups can wedge and ListOffsets is inexact
    (README, "Where Tansu differs, and what we do"); Tansu where there is no Java/Maven."""
    missing = apache_kafka_missing() if kind == "auto" else None
    if kind == "kafka" or (kind == "auto" and missing is None):
        print("soak: broker: Apache Kafka (one KRaft node)", flush=True)
        return ApacheKafkaBroker(log_path=run_dir / "broker.log", kill_with_parent=True).start()
    why = f" ({missing.split(';')[0]})" if missing else ""
    print(f"soak: broker: embedded Tansu{why}", flush=True)
    return EmbeddedBroker(log_path=run_dir / "broker.log", kill_with_parent=True).start()


def _broker_name(broker: EmbeddedBroker | ApacheKafkaBroker | None) -> str | None:
    if broker is None:
        return None
    return "Apache Kafka" if isinstance(broker, ApacheKafkaBroker) else "embedded Tansu"


def _run(
    args: argparse.Namespace,
    seed: int,
    run_id: str,
    run_dir: Path,
    bootstrap: str,
    broker: EmbeddedBroker | ApacheKafkaBroker | None,
    apps: dict[str, App],
    replay: str,
) -> int:
    admin = KafkaAdmin(client_conf(bootstrap))
    aborts = admin.supports("aborts_fenced_transactions")
    print(
        f"soak: broker {'aborts' if aborts else 'COMMITS (Tansu)'} a killed producer's open transaction",
        flush=True,
    )
    shared = _create_topics(admin, run_id)
    table = [(f"g{i}", table_value(f"g{i}")) for i in range(GROUPS)]
    produce_table(bootstrap, shared["SOAK_TABLE"], table)
    for name, guarantee in (("eos", "exactly_once_v2"), ("alos", "at_least_once")):
        topics, dead_letter = _app_topics(admin, run_id, name, shared)
        spec = AppSpec(name, f"soak-{run_id}-{name}", guarantee, bootstrap, topics, run_dir, dead_letter)
        apps[name] = App(spec, Supervised(spec).start(), Instance(spec) if name == "eos" else None)
    for name, app in apps.items():
        if not _wait(
            lambda app=app: len(app.supervised.pids()) == app.spec.workers and _all_running(app),
            300,
            f"{name} RUNNING",
        ):
            raise SystemExit(f"soak: {name} did not start; see {app.supervised.log}")
    print("soak: both applications RUNNING", flush=True)

    faults = make_schedule(seed, args.minutes, broker_faults=broker is not None)
    print(f"soak: fault schedule (seed {seed}, {len(faults)} faults):", flush=True)
    for fault in faults:
        print(f"soak:   {fault.describe()}", flush=True)
    producer = Producer(bootstrap, shared["SOAK_INPUT"], args.rate, args.keys, seed).start()
    t0 = time.monotonic()
    runner = FaultRunner(apps, producer, broker.pid if broker else None, args.keys, seed)
    runner.start(faults, t0)
    sampler = Sampler(admin, apps, producer, shared["SOAK_INPUT"], t0).start()
    load: list[str] = []
    while time.monotonic() - t0 < args.minutes * 60:
        time.sleep(min(60.0, max(0.1, t0 + args.minutes * 60 - time.monotonic())))
        uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        load.append(f"+{(time.monotonic() - t0) / 60:.0f}m {uptime}")
        print(f"soak: {load[-1]}; produced {producer.history.records}", flush=True)
    producer.stop()
    runner.stop()
    input_stopped = time.monotonic()
    history = producer.history
    print(
        f"soak: input stopped: {history.records} records, {len(history.poison)} poison; waiting for catch-up",
        flush=True,
    )

    settled: dict[str, float | None] = {}
    for name, app in apps.items():
        ok = _wait(
            lambda app=app: caught_up(admin, app, history, shared["SOAK_INPUT"], PARTITIONS),
            args.settle_timeout,
            f"{name} to catch up",
            5.0,
        )
        settled[name] = round(time.monotonic() - input_stopped, 1) if ok else None
        print(f"soak: {name} caught up after {settled[name]}s", flush=True)
    time.sleep(5)  # the last commits' outputs
    sampler.stop()

    tallies, checks = {}, {}
    for name, app in apps.items():
        checker = AppChecker(app, history, PARTITIONS, {} if aborts else runner.leaky_pids)
        print(f"soak: checking {name}", flush=True)
        read = {
            "counts": checker.guarded(checker.check_counts, 0),
            "windows": checker.guarded(checker.check_windows, 0),
            "joined": checker.guarded(checker.check_joined, 0),
            "dead_letters": checker.guarded(checker.check_dead_letters, 0),
        }
        workers = checker.guarded(checker.check_workers, dict[str, Any]())
        asked = checker.guarded(checker.check_queries, 0)
        if settled[name] is None:
            checker.tally.stuck += 1
            checker.tally.note("not_caught_up", f"input not processed within {args.settle_timeout:.0f}s")
        tallies[name] = checker.tally
        checks[name] = {
            "records_read": read,
            "iq_keys_asked": asked,
            "workers": workers,
            "caught_up_after_s": settled[name],
            **checker.tally.to_dict(),
        }
    stop_status = {name: app.stop() for name, app in apps.items()}

    totals = {
        k: sum(getattr(t, k) for t in tallies.values())
        for k in ("lost", "wrong", "duplicates", "stuck", "broker_leaked")
    }
    totals["wrong"] += len(runner.http_5xx)
    line = summary_line(args.minutes, history.records, len(runner.done), totals)
    report = {
        "summary": line,
        "seed": seed,
        "replay": replay,
        "command": " ".join(
            [
                *(f"{k}={shlex.quote(v)}" for k, v in sorted(os.environ.items()) if k.startswith("SOAK_")),
                "python -m soak",
                *(shlex.quote(a) for a in sys.argv[1:]),
            ]
        ),
        "commit": _git_commit(),
        "minutes": args.minutes,
        "rate": args.rate,
        "keys": args.keys,
        "records": history.records,
        "poison_records": len(history.poison),
        "producer_failures": history.failed,
        "broker": _broker_name(broker) or bootstrap,
        "broker_aborts_dead_transactions": aborts,
        "totals": totals,
        "apps": checks,
        "http": {**runner.http, "5xx": runner.http_5xx[:50]},
        "faults": runner.done,
        "leaky_pids": runner.leaky_pids,
        "stop_status": stop_status,
        "load": load,
        "samples": sampler.samples,
    }
    write_json(run_dir, report)
    plot(run_dir, sampler.samples, runner.done, line)
    print(f"soak: report {run_dir / 'report.json'}", flush=True)
    print(line, flush=True)
    bad = totals["lost"] + totals["wrong"] + totals["duplicates"] + totals["stuck"]
    return 0 if bad == 0 else 1


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(f"soak: stopped by signal {signum}")


def _git_commit() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip()
