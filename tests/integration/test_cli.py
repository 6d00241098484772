"""The ``platform-streams`` command, run as users run it: a separate process.

``run`` is exercised on the example app (examples/orders_app.py) against the test broker
with fresh topics (through the app's ``*_TOPIC`` environment variables) and a fresh
application id (through ``--set``), and is stopped with SIGTERM like a Kubernetes pod.
Commands that need no broker (describe, config errors) run without the marker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from examples.orders_app import build_topology, is_big
from platform_streams.cli import main
from platform_streams.dev.brokers import find_free_port
from platform_streams.kafka import KafkaAdmin
from tests.support.kafka import consume_all, new_topic, produce

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_APP = "examples.orders_app:topology"
EXAMPLE_CONFIG = str(REPO / "examples" / "orders.yaml")


class Cli:
    """One ``python -m platform_streams.cli`` process; output goes to files (no pipe stalls)."""

    def __init__(
        self, tmp_path: Path, *args: str, env: dict[str, str] | None = None, cwd: Path = REPO
    ) -> None:
        name = uuid.uuid4().hex[:6]
        self.stdout_path, self.stderr_path = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(cwd)]), **(env or {})}
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "platform_streams.cli", *args],
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
                env=full_env,
            )

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text()

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def wait_for(self, condition: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert self.proc.poll() is None, f"exited ({self.proc.returncode}) before {what}:\n{self.stderr}"
            assert time.monotonic() < deadline, f"no {what} after {timeout_s}s:\n{self.stderr}"
            time.sleep(0.05)

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, then the exit status (the test fails if it does not exit in time)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"did not exit within {timeout_s}s of SIGTERM:\n{self.stderr}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Callable[..., Cli]]:
    started: list[Cli] = []

    def start(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> Cli:
        process = Cli(tmp_path, *args, env=env, cwd=cwd)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def run_to_end(tmp_path: Path, *args: str, cwd: Path = REPO, timeout_s: float = 60) -> Cli:
    process = Cli(tmp_path, *args, cwd=cwd)
    try:
        process.proc.wait(timeout_s)
    finally:
        process.kill()
    return process


def run_args(app: str, bootstrap_servers: str, *options: str, **settings: object) -> list[str]:
    """``run APP OPTIONS`` on the test broker, with a ``--set KEY=VALUE`` per setting."""
    args = ["run", app, *options]
    for key, value in {"bootstrap_servers": bootstrap_servers, **settings}.items():
        args += ["--set", f"{key}={value}"]
    return args


def example_run_args(bootstrap_servers: str, *options: str, **settings: object) -> list[str]:
    """``run`` of the example app with its config file (examples/orders.yaml)."""
    return run_args(EXAMPLE_APP, bootstrap_servers, "--config", EXAMPLE_CONFIG, *options, **settings)


def sample_orders(count: int) -> list[tuple[str, str]]:
    return [
        (f"o-{i}", json.dumps({"order_id": f"o-{i}", "customer": f"c-{i % 7}", "amount": float(i % 250)}))
        for i in range(count)
    ]


def produce_orders(bootstrap_servers: str, topics: dict[str, str], count: int) -> list[tuple[str, str]]:
    """``count`` sample orders, written to the example app's input topic."""
    orders = sample_orders(count)
    produce(bootstrap_servers, topics["ORDERS_TOPIC"], orders)
    return orders


def assert_input_committed(admin: KafkaAdmin, app_id: str, topics: dict[str, str], count: int) -> None:
    """The group committed offsets past ``count`` input records over both input partitions."""
    committed = admin.committed_offsets(app_id, [(topics["ORDERS_TOPIC"], p) for p in range(2)])
    assert sum(o or 0 for o in committed.values()) == count, committed


def expected_big(orders: list[tuple[str, str]]) -> int:
    return sum(1 for key, value in orders if is_big(key, json.loads(value)))


def example_app_topics(admin: KafkaAdmin) -> dict[str, str]:
    """Fresh topics for the example app, as the environment variables its factory reads."""
    return {
        "ORDERS_TOPIC": new_topic(admin, 2, "orders"),
        "BIG_ORDERS_TOPIC": new_topic(admin, 2, "big-orders"),
        "ORDERS_BY_CUSTOMER_TOPIC": new_topic(admin, 2, "orders-by-customer"),
    }


@pytest.fixture
def example_topics(admin: KafkaAdmin) -> dict[str, str]:
    return example_app_topics(admin)


# ---------------------------------------------------------------------------- no broker


def test_describe_prints_the_topology_description(tmp_path: Path) -> None:
    done = run_to_end(tmp_path, "describe", EXAMPLE_APP)
    assert done.proc.returncode == 0, done.stderr
    assert done.stdout == str(build_topology().describe())
    assert "Sink: KSTREAM-SINK-0000000003 (topic: big-orders)" in done.stdout
    assert "Sub-topology: 1" in done.stdout


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("session_timeout_ms=abc", "session_timeout_ms"),
        ("bootstrap.servers=no-port", "bootstrap_servers"),
        ("processing.guarantee=exactly_once", "processing_guarantee"),
    ],
)
def test_invalid_config_exits_non_zero_naming_the_field(tmp_path: Path, override: str, field: str) -> None:
    done = run_to_end(tmp_path, "run", EXAMPLE_APP, "--config", EXAMPLE_CONFIG, "--set", override)
    assert done.proc.returncode == 2
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and f"invalid config: {field}:" in errors[0], done.stderr
    assert "Traceback" not in done.stderr


def test_missing_settings_are_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [n for n in os.environ if n.startswith("PLATFORM_STREAMS_")]:
        monkeypatch.delenv(name)
    assert main(["--log-level", "ERROR", "run", EXAMPLE_APP]) == 2
    err = capsys.readouterr().err
    assert "application_id: required" in err and "bootstrap_servers: required" in err, err
    assert err.count("\n") == 1


def test_bad_app_references_fail_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "not_an_app.py").write_text("def topology():\n    return 42\n")
    cases = {
        "examples.orders_app": "must look like 'package.module:factory'",
        "no_such_module_x:topology": "cannot import 'no_such_module_x'",
        "examples.orders_app:nothing": "has no attribute 'nothing'",
        "not_an_app:topology": "gave int; expected a Topology",
    }
    monkeypatch.syspath_prepend(str(tmp_path))
    for spec, message in cases.items():
        assert main(["--log-level", "ERROR", "describe", spec]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


def test_settings_layers_factory_file_env_set(tmp_path: Path) -> None:
    """A factory's settings are the lowest layer; --set wins over the environment and the file."""
    from platform_streams.cli_app_loader import load_config

    file = tmp_path / "app.properties"
    file.write_text("application.id=from-file\nbootstrap.servers=file:9092\ncommit.interval.ms=5\n")
    config = load_config(
        file,
        ["commit.interval.ms=7"],
        {"application.id": "from-factory", "poll.ms": 3, "commit.interval.ms": 1},
        env={"PLATFORM_STREAMS_BOOTSTRAP_SERVERS": "env:9092", "PLATFORM_STREAMS_COMMIT_INTERVAL_MS": "6"},
    )
    assert (config.application_id, config.bootstrap_servers) == ("from-file", "env:9092")
    assert (config.poll_ms, config.commit_interval_ms) == (3, 7)


# ---------------------------------------------------------------------------- with a broker


@pytest.mark.broker
def test_run_processes_records_and_stops_cleanly_on_sigterm(
    cli: Callable[..., Cli],
    bootstrap_servers: str,
    admin: KafkaAdmin,
    example_topics: dict[str, str],
    tmp_path: Path,
) -> None:
    app_id = f"cli-run-{uuid.uuid4().hex[:8]}"
    orders = produce_orders(bootstrap_servers, example_topics, 300)
    app = cli(
        *example_run_args(bootstrap_servers, state_dir=tmp_path / "state"),
        env={**example_topics, "PLATFORM_STREAMS_APPLICATION_ID": app_id},
    )
    big = consume_all(
        bootstrap_servers, example_topics["BIG_ORDERS_TOPIC"], expected_big(orders), timeout_s=30
    )
    by_customer = consume_all(bootstrap_servers, example_topics["ORDERS_BY_CUSTOMER_TOPIC"], len(orders), 30)
    assert app.proc.poll() is None, app.stderr
    assert len(big) == expected_big(orders) and len(by_customer) == len(orders), app.stderr
    assert all(json.loads(r.value or b"")["tier"] in ("big", "review") for r in big)
    assert {r.key for r in by_customer} == {f"c-{i}".encode() for i in range(7)}

    assert app.stop() == 0, app.stderr
    assert "SIGTERM received" in app.stderr and "stopped cleanly" in app.stderr
    assert_input_committed(admin, app_id, example_topics, len(orders))


@pytest.mark.broker
def test_run_with_two_workers_shares_the_input_and_stops_both(
    cli: Callable[..., Cli],
    bootstrap_servers: str,
    admin: KafkaAdmin,
    example_topics: dict[str, str],
    tmp_path: Path,
) -> None:
    app_id = f"cli-workers-{uuid.uuid4().hex[:8]}"
    orders = produce_orders(bootstrap_servers, example_topics, 200)
    app = cli(
        *example_run_args(
            bootstrap_servers, "--workers", "2", application_id=app_id, state_dir=tmp_path / "state"
        ),
        env=example_topics,
    )
    # two worker processes start, join and rebalance (up to ~10 s on this broker) first
    by_customer = consume_all(bootstrap_servers, example_topics["ORDERS_BY_CUSTOMER_TOPIC"], len(orders), 60)
    assert len(by_customer) >= len(orders), app.stderr  # at-least-once: a rebalance may repeat some
    app.wait_for(lambda: app.stderr.count("REBALANCING -> RUNNING") >= 2, "both workers RUNNING", 60)

    assert app.stop() == 0, app.stderr
    assert "supervising 2 workers" in app.stderr, app.stderr
    assert app.stderr.count(f"application '{app_id}' stopped cleanly") == 2, app.stderr
    assert f"state dir {tmp_path / 'state'}-w0" in app.stderr and f"{tmp_path / 'state'}-w1" in app.stderr
    assert_input_committed(admin, app_id, example_topics, len(orders))


@pytest.mark.broker
def test_run_exits_non_zero_when_the_app_fails(
    cli: Callable[..., Cli], bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 1, "bad-in"), new_topic(admin, 1, "bad-out")
    (tmp_path / "failing_app.py").write_text(
        "from platform_streams import StreamsBuilder\n"
        "def topology():\n"
        "    builder = StreamsBuilder()\n"
        f"    builder.stream({source!r}).map_values(lambda v: 1 / 0).to({sink!r})\n"
        "    return builder, {'session.timeout.ms': 6000, 'heartbeat.interval.ms': 500,"
        " 'max.poll.interval.ms': 10000}\n"
    )
    produce(bootstrap_servers, source, [(b"k", b"v")])
    app = cli(
        *run_args(
            "failing_app:topology",
            bootstrap_servers,
            application_id=f"cli-fail-{uuid.uuid4().hex[:8]}",
            state_dir=tmp_path / "state",
        ),
        cwd=tmp_path,
    )
    try:
        code = app.proc.wait(60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"a failing app must exit on its own:\n{app.stderr}")
    assert code == 1
    last = app.stderr.strip().splitlines()[-1]
    assert "error: application" in last and "ZeroDivisionError" in last and "KSTREAM-MAPVALUES" in last
    assert "Traceback" not in app.stderr


@pytest.mark.broker
def test_run_reports_a_missing_source_topic(bootstrap_servers: str, tmp_path: Path) -> None:
    missing = f"absent-{uuid.uuid4().hex[:8]}"
    process = Cli(
        tmp_path,
        *example_run_args(bootstrap_servers, application_id=f"cli-missing-{uuid.uuid4().hex[:8]}"),
        env={"ORDERS_TOPIC": missing},
    )
    try:
        assert process.proc.wait(30) == 1
    finally:
        process.kill()
    assert "cannot start" in process.stderr and missing in process.stderr, process.stderr


@pytest.mark.broker
def test_broker_command_serves_until_sigterm(cli: Callable[..., Cli]) -> None:
    port = find_free_port()
    broker = cli("broker", "--port", str(port))
    broker.wait_for(lambda: "ready" in broker.stdout, "ready line")
    assert f"bootstrap.servers=127.0.0.1:{port}" in broker.stdout
    with KafkaAdmin(f"127.0.0.1:{port}") as admin:
        assert isinstance(admin.list_topics(), dict)
    tansu_pid = int(broker.stdout.split("(pid ", 1)[1].split(",", 1)[0])

    assert broker.stop(15) == 0, broker.stderr
    deadline = time.monotonic() + 5
    while _alive(tansu_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(tansu_pid), "the Tansu process outlived the broker command"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) counts as gone
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[-1].startswith("Z"))


@pytest.mark.broker
def test_run_reports_a_missing_sink_topic(
    bootstrap_servers: str, admin: KafkaAdmin, example_topics: dict[str, str], tmp_path: Path
) -> None:
    """Issue 13: a missing output topic looked like success (RUNNING, retries, exit 0 on
    SIGTERM). It is now checked at start, like a source topic, before anything is created."""
    missing = f"absent-out-{uuid.uuid4().hex[:8]}"
    app_id = f"cli-missing-sink-{uuid.uuid4().hex[:8]}"
    process = Cli(
        tmp_path,
        *example_run_args(bootstrap_servers, application_id=app_id, state_dir=tmp_path / "state"),
        env={**example_topics, "BIG_ORDERS_TOPIC": missing},
    )
    try:
        assert process.proc.wait(60) == 1, process.stderr
    finally:
        process.kill()
    assert "cannot start" in process.stderr and "sink topic" in process.stderr, process.stderr
    assert missing in process.stderr
    assert not [t for t in admin.list_topics() if t.startswith(app_id) or t == missing]


@pytest.mark.broker
@pytest.mark.slow
@pytest.mark.kafka_side  # make test's time split: a long wait on group joins
def test_run_exits_non_zero_when_records_cannot_be_written_at_the_stop(
    cli: Callable[..., Cli], bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """A sink topic chosen per record (not checkable at start) that does not exist: SIGTERM
    arrives while its records wait for the broker; the last commit fails, and the exit status
    says so (it was 0: the worker's failure while stopping was not reported)."""
    source = new_topic(admin, 1, "unwritable-in")
    missing = f"absent-dyn-{uuid.uuid4().hex[:8]}"
    (tmp_path / "unwritable_app.py").write_text(
        "import sys\n"
        "from platform_streams import StreamsBuilder\n"
        "def route(key, value, meta):\n"
        "    print('routing a record', file=sys.stderr, flush=True)\n"
        f"    return {missing!r}\n"
        "def topology():\n"
        "    builder = StreamsBuilder()\n"
        f"    builder.stream({source!r}).to(route)\n"
        "    return builder, {'session.timeout.ms': 6000, 'heartbeat.interval.ms': 500,"
        " 'max.poll.interval.ms': 120000, 'commit.interval.ms': 600000}\n"
    )
    produce(bootstrap_servers, source, [(b"k", b"v")] * 3)
    app = cli(
        *run_args(
            "unwritable_app:topology",
            bootstrap_servers,
            "--close-timeout",
            "120",
            application_id=f"cli-unwritable-{uuid.uuid4().hex[:8]}",
            state_dir=tmp_path / "state",
        ),
        cwd=tmp_path,
    )
    app.wait_for(lambda: "routing a record" in app.stderr, "a record sent to the missing topic", 90)
    code = app.stop(timeout_s=180)
    assert code == 1, app.stderr
    last = app.stderr.strip().splitlines()[-1]
    assert "error: application" in last and "could not be written" in last, app.stderr
    assert missing not in admin.list_topics()
