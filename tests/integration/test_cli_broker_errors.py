"""What the CLI says when the broker is not there, and when a topic the app needs is missing.

An unreachable cluster is one line naming the bootstrap address and what was tried, within
a few seconds, exit status 3, rather than librdkafka's stream of ``FAIL`` lines ending in
"Failed to get metadata: Local: Broker transport failure", which names no address
(README, CLI: "Exit status"); librdkafka's own lines are Python log records at DEBUG.
The closed port is a real port on 127.0.0.1 that nothing listens on.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from platform_streams.cli_app_loader import BROKER_UNREACHABLE
from platform_streams.dev.brokers import find_free_port
from platform_streams.kafka import KafkaAdmin, create_producer
from platform_streams.kafka.reachability import bootstrap_addresses
from tests.support.kafka import new_topic

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_APP = "examples.orders_app:topology"
EXAMPLE_CONFIG = str(REPO / "examples" / "orders.yaml")


def _cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    """Run ``python -m platform_streams.cli ARGS`` to the end: (status, stderr, seconds)."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "platform_streams.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        timeout=120,
    )
    return done.returncode, done.stderr, time.monotonic() - started


def _log_time(line: str) -> datetime:
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")


@pytest.mark.parametrize("command", ["topics", "run"])
def test_an_unreachable_broker_is_one_line_naming_the_address_quickly(tmp_path: Path, command: str) -> None:
    closed = f"127.0.0.1:{find_free_port()}"
    args = [
        *(["topics", "plan", EXAMPLE_APP] if command == "topics" else ["run", EXAMPLE_APP]),
        *("--config", EXAMPLE_CONFIG, "--set", f"bootstrap.servers={closed}"),
        *("--set", f"state.dir={tmp_path / 'state'}"),
    ]
    status, stderr, _ = _cli(tmp_path, *args)
    assert status == BROKER_UNREACHABLE == 3, stderr
    lines = stderr.strip().splitlines()
    assert not [line for line in lines if line.startswith("%") or "FAIL" in line], stderr
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1 and errors == lines[-1:], stderr
    assert f"bootstrap.servers={closed}" in errors[0] and "connection refused" in errors[0], stderr
    # librdkafka alone waited out its 10 s metadata timeout; the address check gives up after
    # 3 s. The machine may be loaded, so what is timed is the wait, not the interpreter's start.
    if command == "topics":
        assert len(lines) == 1, stderr
        # timed from its DEBUG lines: the admin client is created, the command fails
        debug_status, debug_stderr, _ = _cli(tmp_path, "--log-level", "DEBUG", *args)
        assert debug_status == 3, debug_stderr
        debug_lines = debug_stderr.splitlines()
        started = _log_time(next(line for line in debug_lines if "creating Kafka admin" in line))
        failed = _log_time(next(line for line in debug_lines if "topics failed" in line))
    else:  # `run` logs its INFO lines (starting, state changes) before the error
        started = _log_time(next(line for line in lines if "starting application" in line))
        failed = _log_time(next(line for line in lines if "-> PENDING_ERROR" in line))
    assert (failed - started).total_seconds() < 7.0, stderr


def test_librdkafka_lines_are_python_debug_records_not_stderr(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """A client of the factories that meets a closed port logs librdkafka's FAIL lines on
    ``platform_streams.kafka.librdkafka`` at DEBUG, and writes nothing to stderr itself."""
    closed = f"127.0.0.1:{find_free_port()}"
    caplog.set_level(logging.DEBUG, logger="platform_streams.kafka.librdkafka")
    producer = create_producer({"bootstrap.servers": closed, "client.id": f"quiet-{uuid.uuid4().hex[:6]}"})
    producer.produce("nowhere", b"v")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not caplog.records:
        producer.poll(0.2)
    producer.purge()
    producer.flush(0)
    records = [r for r in caplog.records if r.name == "platform_streams.kafka.librdkafka"]
    assert records, "no librdkafka line reached Python logging"
    assert {r.levelno for r in records} == {logging.DEBUG}
    assert any(closed in r.getMessage() and "ERROR" in r.getMessage() for r in records), records
    assert "FAIL" not in capfd.readouterr().err


def test_bootstrap_addresses_are_read_as_librdkafka_reads_them() -> None:
    assert bootstrap_addresses("a:1, SASL_SSL://b:2,[::1]:3,c") == [
        ("a", 1),
        ("b", 2),
        ("::1", 3),
        ("c", 9092),
    ]


@pytest.mark.broker
@pytest.mark.parametrize("missing_kind", ["source", "sink"])
def test_a_missing_topic_error_gives_the_command_that_creates_it(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, missing_kind: str
) -> None:
    """The error names the missing topic and the exact ``topics create-io`` command; that
    command, run as printed (same directory, same environment), creates it, and then the
    application starts."""
    missing = f"absent-{missing_kind}-{uuid.uuid4().hex[:8]}"
    env = {
        "ORDERS_TOPIC": new_topic(admin, 1, "orders"),
        "BIG_ORDERS_TOPIC": new_topic(admin, 1, "big-orders"),
        "ORDERS_BY_CUSTOMER_TOPIC": new_topic(admin, 1, "orders-by-customer"),
        ("ORDERS_TOPIC" if missing_kind == "source" else "BIG_ORDERS_TOPIC"): missing,
    }
    app_id = f"cli-hint-{uuid.uuid4().hex[:8]}"
    args = [
        *("run", EXAMPLE_APP, "--config", EXAMPLE_CONFIG),
        *("--set", f"bootstrap.servers={bootstrap_servers}", "--set", f"application.id={app_id}"),
        *("--set", f"state.dir={tmp_path / 'state'}"),
    ]
    status, stderr, _ = _cli(tmp_path, *args, env=env)
    assert status == 1, stderr
    line = stderr.strip().splitlines()[-1]
    assert missing in line and "topics create-io" in line, stderr
    command = shlex.split(line.split("with: ", 1)[1])
    assert command[:4] == ["platform-streams", "topics", "create-io", EXAMPLE_APP], line
    created, created_err, _ = _cli(tmp_path, *command[1:], env=env)
    assert created == 0, created_err
    assert missing in admin.list_topics()
