"""``make demo``: the platform end to end on embedded defaults, finishing by itself.

1. starts a local broker -- Apache Kafka (its jars from Maven Central) where Java and
   Maven are, else the embedded Tansu (in memory); ``--broker tansu|kafka`` chooses -- and
   creates the topics;
2. starts Dagster -- ``dagster-webserver`` and ``dagster-daemon`` -- on the code location
   ``dagster_defs`` (``dagster dev -m dagster_defs`` does the same);
3. materializes the example app asset ``orders_app`` through Dagster's GraphQL API: the run
   starts two ``platform-streams run`` worker processes of ``examples/orders_app.py``;
4. produces sample orders and waits, with a deadline, until the outputs are complete;
5. prints the Dagster UI URL, a worker's metrics URL and a sample interactive query, and
   checks the query's answer against the input;
6. runs the Spark job ``orders_app_compact_store`` through Dagster (local Spark): the
   changelog of the store ``orders-per-customer`` is compacted into per-partition
   snapshots (SST + Parquet) that restarted workers restore from; checks that the
   snapshots hold one key per customer;
7. shuts everything down (Dagster first, so its health sensor does not restart the workers)
   and exits 0 if every step worked. ``--keep-running`` leaves it all up until Ctrl-C or
   SIGTERM; either, at any step, stops everything the demo started.

    python -m examples.demo [--orders N] [--keep-running] [--state-dir DIR] [--broker auto|tansu|kafka]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from dagster_defs.deploy.local import LocalProcessLauncher
from examples.orders_app import (
    BIG_ORDERS_TOPIC,
    COUNTS_STORE,
    ORDER_COUNTS_TOPIC,
    ORDERS_BY_CUSTOMER_TOPIC,
    ORDERS_TOPIC,
    Order,
    is_big,
)
from platform_streams.dev.brokers import ApacheKafkaBroker, EmbeddedBroker, find_free_port
from platform_streams.dev.brokers.apache_jars import apache_kafka_missing
from platform_streams.errors import StreamsError
from platform_streams.kafka import (
    OFFSET_BEGINNING,
    KafkaAdmin,
    TopicPartition,
    TopicSpec,
    create_consumer,
    create_producer,
)
from platform_streams.state.snapshots import SnapshotCatalog, SnapshotManifest, open_snapshot_store

APP = "orders_app"  # the asset (dagster_defs/apps/orders.yaml)
APPLICATION_ID = "orders-app"  # its streams.application_id
DLQ_TOPIC = "orders-dlq"
PARTITIONS = 4
CUSTOMERS = 100
DEADLINE_S = 360.0  # each wait polls: the Spark compaction took 58 s at load 5, over 240 s at 20-30
REPO = Path(__file__).resolve().parent.parent

#: topic -> [(partition, key, value)]
Output = dict[str, list[tuple[int, bytes | None, bytes | None]]]

LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchPipelineExecution(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on Error { message }
  }
}
"""
RUN_STATUS = "query Run($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status } } }"
LOCATIONS = """
query Locations {
  workspaceOrError {
    ... on Workspace {
      locationEntries { name locationOrLoadError { __typename ... on PythonError { message } } }
    }
  }
}
"""


class DemoError(Exception):
    """A step failed; the message says which and why."""


def say(text: str) -> None:
    print(f"[demo] {text}", flush=True)


def sample_orders(count: int, seed: int = 7) -> list[tuple[str, Order]]:
    """Deterministic orders: ~18% are big (amount >= 100), a few need review (>= 500)."""
    rng = random.Random(seed)
    orders = []
    for i in range(count):
        order_id = f"o-{i:05d}"
        orders.append(
            (
                order_id,
                {
                    "order_id": order_id,
                    "customer": f"c-{rng.randrange(CUSTOMERS):03d}",
                    "amount": round(rng.lognormvariate(3.8, 0.9), 2),
                    "items": rng.randint(1, 5),
                },
            )
        )
    return orders


def produce_orders(bootstrap: str, orders: Iterable[tuple[str, Order]]) -> int:
    """Produce JSON orders keyed by order id; returns how many were acknowledged."""
    producer = create_producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "partitioner": "murmur2_random"}
    )
    failures: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    sent = 0
    for key, order in orders:
        while True:
            try:
                producer.produce(ORDERS_TOPIC, orjson.dumps(order), key.encode(), on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        sent += 1
    if producer.flush(30) or failures:
        raise StreamsError(f"producing sample orders failed: {failures[:3] or 'flush timed out'}")
    return sent


def read_outputs(bootstrap: str, expected: dict[str, int], deadline: float) -> Output:
    """Read the output topics from the beginning until each holds ``expected`` records.

    No consumer group (``assign``), so nothing waits for a group join; returns whatever
    arrived by ``deadline`` and lets the caller judge completeness.
    """
    consumer = create_consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"orders-demo-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
        }
    )
    out: Output = {topic: [] for topic in expected}
    try:
        consumer.list_topics(timeout=10)  # all-topics metadata: offsets resolve at once
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in expected for p in range(PARTITIONS)])
        while time.monotonic() < deadline and any(len(out[t]) < n for t, n in expected.items()):
            for msg in consumer.consume(num_messages=1000, timeout=0.1):
                if msg.error() is None:
                    out[msg.topic() or ""].append((msg.partition() or 0, msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def _wait(condition: Any, what: str, timeout_s: float, procs: Iterable[subprocess.Popen[bytes]] = ()) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = condition()
        except (OSError, urllib.error.URLError):
            value = None
        if value:
            return value
        for proc in procs:
            if proc.poll() is not None:
                raise DemoError(f"{what}: {proc.args!r} exited ({proc.returncode}); see its log")
        if time.monotonic() > deadline:
            raise DemoError(f"no {what} after {timeout_s:.0f}s")
        time.sleep(0.25)


def _graphql(base: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(f"{base}/graphql", body, {"Content-Type": "application/json"})
    # launching a run answers once the run's process is spawned: over 30 s on a loaded machine
    with urllib.request.urlopen(request, timeout=120) as answer:
        document = json.loads(answer.read())
    if "errors" in document:
        raise DemoError(f"GraphQL error: {document['errors']}")
    return dict(document["data"])


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@contextlib.contextmanager
def dagster(
    bootstrap: str, state_dir: Path, port: int
) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """dagster-webserver + dagster-daemon on the code location; stopped on exit."""
    home = state_dir / "dagster_home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    # Runs start at once; the daemon still runs the health sensors. No telemetry (closed network).
    (home / "dagster.yaml").write_text(
        "run_coordinator:\n  module: dagster._core.run_coordinator\n  class: DefaultRunCoordinator\n"
        "telemetry:\n  enabled: false\n"
    )
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "PLATFORM_STREAMS_BOOTSTRAP_SERVERS": bootstrap,
        "PLATFORM_STREAMS_DEPLOY_DIR": str(state_dir / "deployments"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    bin_dir = Path(sys.executable).parent
    commands = [
        [str(bin_dir / "dagster-webserver"), "-m", "dagster_defs", "-h", "127.0.0.1", "-p", str(port)],
        [str(bin_dir / "dagster-daemon"), "run", "-m", "dagster_defs"],
    ]
    procs: list[subprocess.Popen[bytes]] = []
    ui = f"http://127.0.0.1:{port}"
    try:
        for command in commands:
            log = open(state_dir / f"{Path(command[0]).name}.log", "wb")  # noqa: SIM115 (closed below)
            procs.append(
                subprocess.Popen(
                    command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )  # fmt: skip
            log.close()
            if len(procs) == 1:
                # the daemon only once the webserver answers: both create the instance's
                # SQLite storage on a fresh DAGSTER_HOME, and together (under load) they raced
                # ("alembic_version has more than one head": the code location did not load)
                _wait(lambda: _get(f"{ui}/server_info")[0] == 200, "Dagster webserver", DEADLINE_S, procs)
        yield ui, procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def run_job(base: str, what: str, selector: dict[str, Any], run_config: dict[str, Any]) -> str:
    """Launch a Dagster run through GraphQL; returns its id once it succeeded."""
    params = {
        "selector": {
            "repositoryLocationName": "dagster_defs",
            "repositoryName": "__repository__",
            **selector,
        },
        "runConfigData": run_config,
    }
    launched = _graphql(base, LAUNCH, {"params": params})["launchPipelineExecution"]
    if launched["__typename"] != "LaunchRunSuccess":
        raise DemoError(f"launching the {what} failed: {_location_error(base) or launched}")
    run_id = str(launched["run"]["runId"])

    def finished() -> str | None:
        status = _graphql(base, RUN_STATUS, {"id": run_id})["runOrError"]["status"]
        return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None

    status = _wait(finished, f"finished {what} run", DEADLINE_S)
    if status != "SUCCESS":
        raise DemoError(f"the {what} run {run_id} ended {status}: see {base}/runs/{run_id}")
    return run_id


def _location_error(base: str) -> str | None:
    """Why the code location did not load, if it did not: a launch then fails with a bare
    ``InvalidSubsetError``/``PipelineNotFoundError`` that says nothing of the import error."""
    try:
        workspace = _graphql(base, LOCATIONS, {})["workspaceOrError"]
    except (DemoError, OSError, KeyError):
        return None
    for entry in workspace.get("locationEntries") or []:
        loaded = entry.get("locationOrLoadError") or {}
        if loaded.get("__typename") == "PythonError":
            lines = [line for line in str(loaded.get("message", "")).splitlines() if line.strip()]
            return (
                f"the code location {entry.get('name')} did not load: {lines[0] if lines else '?'} "
                "(the whole error: dagster-webserver.log in the state directory)"
            )
    return None


def materialize(base: str) -> str:
    """Materialize the app asset (starts the workers)."""
    return run_job(
        base, "materialization", {"pipelineName": "__ASSET_JOB", "assetSelection": [{"path": [APP]}]}, {}
    )


def compact(base: str, state_dir: Path) -> tuple[str, list[SnapshotManifest]]:
    """Run the Spark compaction job of the counts store; returns the run id and the
    newest snapshot of each partition."""
    job = f"{APP}_compact_store"
    config = {"ops": {f"{job}_op": {"config": {"store": COUNTS_STORE}}}}
    run_id = run_job(base, "Spark compaction", {"pipelineName": job}, config)
    # the job's default location: <deploy dir>/<app>/snapshots (dagster_defs/jobs.py)
    catalog = SnapshotCatalog(open_snapshot_store(state_dir / "deployments" / APP / "snapshots"))
    newest: dict[int, SnapshotManifest] = {}
    for manifest in catalog.manifests(APPLICATION_ID, COUNTS_STORE):  # newest first
        newest.setdefault(manifest.partition, manifest)
    return run_id, [newest[p] for p in sorted(newest)]


def query_count(endpoints: list[str], customer: str) -> tuple[str, Any]:
    """Ask the workers for one customer's count (an endpoint forwards to the key's owner)."""
    last: Any = None
    for endpoint in endpoints:
        url = f"{endpoint}/stores/{COUNTS_STORE}/keys/{customer}"
        status, document = _get(url)
        if status == 200:
            return url, document
        last = (url, status, document)
    raise DemoError(f"no worker answered the query: {last}")


def choose_broker(kind: str) -> tuple[str, str]:
    """``auto`` -> Apache Kafka where it can run (Java, and Maven or its jars already
    resolved), else Tansu; returns the kind and why it was chosen.

    Apache Kafka by default because the demo needs Java anyway (its Spark step) and because a
    newcomer's first broker should be the one whose semantics the code is written for, not
    the embedded one's differences (README, "Where Tansu differs, and what we do")."""
    if kind != "auto":
        return kind, f"chosen with --broker {kind}"
    missing = apache_kafka_missing()
    if missing is None:
        return "kafka", "the default where Java and Maven are"
    return "tansu", f"Apache Kafka cannot run here: {missing.split(';')[0]}"


def local_broker(kind: str) -> tuple[EmbeddedBroker | ApacheKafkaBroker, str]:
    """The demo's broker and how to call it: Tansu (ready at once) or Apache Kafka."""
    if kind == "kafka":
        return ApacheKafkaBroker(kill_with_parent=True), "Apache Kafka (KRaft, one node)"
    return EmbeddedBroker(kill_with_parent=True), "embedded Kafka broker (Tansu, in memory)"


def run_demo(order_count: int, state_dir: Path, keep_running: bool, broker_kind: str = "auto") -> int:
    started = time.monotonic()
    state_dir.mkdir(parents=True, exist_ok=True)
    launcher = LocalProcessLauncher(state_dir / "deployments")
    launcher.stop(APP)  # workers a previous, interrupted demo may have left
    shutil.rmtree(state_dir / "deployments", ignore_errors=True)
    orders = sample_orders(order_count)
    expected = {
        BIG_ORDERS_TOPIC: sum(1 for key, order in orders if is_big(key, order)),
        ORDERS_BY_CUSTOMER_TOPIC: order_count,
    }
    per_customer = Counter(str(order["customer"]) for _key, order in orders)

    kind, why = choose_broker(broker_kind)
    chosen, description = local_broker(kind)
    say(f"broker: {description} -- {why}")
    with chosen as broker:
        bootstrap = broker.bootstrap_servers
        say(f"{description} ready at {bootstrap}")
        topics = (ORDERS_TOPIC, BIG_ORDERS_TOPIC, ORDERS_BY_CUSTOMER_TOPIC, ORDER_COUNTS_TOPIC)
        with KafkaAdmin(bootstrap) as admin:
            admin.create_topics([TopicSpec(t, PARTITIONS) for t in topics] + [TopicSpec(DLQ_TOPIC, 1)])
        try:
            with dagster(bootstrap, state_dir, find_free_port()) as (ui, procs):
                say(f"Dagster webserver and daemon up on the code location dagster_defs: {ui}")
                t0 = time.monotonic()
                run_id = materialize(ui)
                status = launcher.status(APP)
                endpoints = status.endpoints
                say(
                    f"materialized {APP} in {time.monotonic() - t0:.1f}s (run {run_id}): "
                    f"{len(endpoints)} worker processes RUNNING (pids {[w.pid for w in status.alive]})"
                )
                t0 = time.monotonic()
                produced = produce_orders(bootstrap, orders)
                say(f"produced {produced:,} orders to '{ORDERS_TOPIC}' in {time.monotonic() - t0:.2f}s")
                output = read_outputs(bootstrap, expected, time.monotonic() + DEADLINE_S)
                took = time.monotonic() - t0
                complete = all(len(output[t]) == n for t, n in expected.items())
                customer = per_customer.most_common(1)[0][0]
                url, answer = _wait(
                    lambda: _counted(endpoints, customer, per_customer[customer]), "query", 30
                )
                _print_summary(
                    description, ui, run_id, endpoints, output, expected, took, url, answer,
                    per_customer[customer],
                )  # fmt: skip
                t0 = time.monotonic()
                compaction_run, snapshots = compact(ui, state_dir)
                live_keys = sum(m.record_count for m in snapshots)
                say(
                    f"Spark compaction of '{COUNTS_STORE}' in {time.monotonic() - t0:.1f}s "
                    f"(run {compaction_run}): {len(snapshots)} partition snapshots, {live_keys} keys "
                    f"(expected {len(per_customer)}), at changelog offsets {[m.offset for m in snapshots]}"
                )
                ok = (
                    complete
                    and answer.get("value") == per_customer[customer]
                    and live_keys == len(per_customer)
                )
                if keep_running:
                    say("--keep-running: everything stays up; press Ctrl-C (or send SIGTERM) to stop")
                    with contextlib.suppress(KeyboardInterrupt):
                        while all(p.poll() is None for p in procs):
                            time.sleep(1)
        finally:
            stopped = launcher.stop(APP)  # after Dagster is down: its sensor would restart them
            say(f"stopped the workers ({len(stopped.alive)} still alive)")
    say(f"{'OK' if ok else 'FAILED'}: total {time.monotonic() - started:.1f}s")
    return 0 if ok else 1


def _counted(endpoints: list[str], customer: str, want: int) -> tuple[str, Any] | None:
    """The query's answer once the count reached ``want`` (commits and caches lag a little)."""
    url, answer = query_count(endpoints, customer)
    return (url, answer) if answer.get("value") == want else None


def _print_summary(
    broker: str,
    ui: str,
    run_id: str,
    endpoints: list[str],
    output: Output,
    expected: dict[str, int],
    took: float,
    query_url: str,
    answer: Any,
    want: int,
) -> None:
    print()
    print(f"=== platform_streams demo: Dagster + examples/orders_app.py; broker: {broker} ===")
    for topic, count in expected.items():
        print(f"records out: {len(output[topic]):,} / {count:,} expected on '{topic}'")
    print(f"processing : output complete {took:.2f}s after producing")
    print(f"Dagster UI : {ui}/asset-groups/{APP}   (run: {ui}/runs/{run_id})")
    print(f"metrics    : {endpoints[0]}/metrics")
    print(f"worker state: {endpoints[0]}/state")
    print(f"query      : curl {query_url}")
    print(f"             -> {json.dumps(answer)[:200]}  (expected count {want})")
    big = output[BIG_ORDERS_TOPIC][:1]
    for partition, key, value in big:
        print(
            f"sample     : {BIG_ORDERS_TOPIC}[{partition}] {(key or b'').decode()} -> "
            f"{(value or b'').decode()}"
        )
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=10_000, help="sample orders to produce (default 10000)")
    parser.add_argument("--state-dir", type=Path, default=Path("state/demo"), help="default ./state/demo")
    parser.add_argument("--keep-running", action="store_true", help="leave everything up until Ctrl-C")
    parser.add_argument(
        "--broker",
        choices=("auto", "tansu", "kafka"),
        default="auto",
        help="auto (default): Apache Kafka where Java and Maven are, else tansu; "
        "kafka: Apache Kafka (Java 17 + Maven); tansu: embedded, in memory, ready at once",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        return run_demo(args.orders, args.state_dir.resolve(), args.keep_running, args.broker)
    except (StreamsError, DemoError) as exc:
        say(f"FAILED: {type(exc).__name__}: {exc}")
        return 1
    except KeyboardInterrupt as exc:
        said = "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C"
        say(f"stopped by {said} before the end; everything it started is stopped")
        return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the demo is, so it unwinds as from Ctrl-C."""


def _stop_on_sigterm(_signum: int, _frame: object) -> None:
    """SIGTERM (``kill``, a service manager) stops the demo as Ctrl-C does: the ``finally``
    blocks stop Dagster, the workers and the broker, which run in sessions of their own and
    would otherwise outlive the demo. Once only: a second SIGTERM must not cut that short."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


if __name__ == "__main__":
    sys.exit(main())
