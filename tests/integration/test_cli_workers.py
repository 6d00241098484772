"""``platform-streams run --workers N``: a worker that dies is restarted, the others keep running.

The process-level counterpart of Kafka Streams' REPLACE_THREAD
(StreamsUncaughtExceptionHandler, streams/src/main/java/org/apache/kafka/streams/errors/
StreamsUncaughtExceptionHandler.java): the supervisor restarts a dead worker with backoff
(runtime/workers/worker_restarts.py) and stops all only when one keeps failing, saying why.
Before, the death of one worker (SIGKILL, a state directory it could not use) stopped the
healthy ones too.
"""

from __future__ import annotations

import os
import re
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin
from tests.integration.test_cli import (
    Cli,
    cli,
    example_run_args,
    example_topics,
    expected_big,
    produce_orders,
)
from tests.support.kafka import consume_all

__all__ = ["cli", "example_topics"]  # fixtures used here

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def _worker_pids(app: Cli) -> list[int]:
    found = re.search(r"supervising \d+ workers of '[^']+': pids \[([\d, ]+)\]", app.stderr)
    assert found, app.stderr
    return [int(p) for p in found.group(1).split(",")]


def _running(app: Cli, pid: int) -> bool:
    return f"[pid {pid}] platform_streams.runtime.streams_runtime: state REBALANCING -> RUNNING" in app.stderr


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_killed_worker_is_restarted_and_the_others_keep_running(
    cli: Callable[..., Cli],
    bootstrap_servers: str,
    admin: KafkaAdmin,
    example_topics: dict[str, str],
    tmp_path: Path,
) -> None:
    app_id = f"cli-restart-{uuid.uuid4().hex[:8]}"
    app = cli(
        *example_run_args(
            bootstrap_servers,
            "--workers",
            "2",
            "--restart-backoff",
            "0.5",
            application_id=app_id,
            state_dir=tmp_path / "state",
        ),
        env=example_topics,
    )
    app.wait_for(lambda: "supervising 2 workers" in app.stderr, "the supervisor", 30)
    healthy, victim = _worker_pids(app)
    app.wait_for(lambda: _running(app, healthy) and _running(app, victim), "both workers RUNNING", 90)

    os.kill(victim, signal.SIGKILL)
    app.wait_for(lambda: "worker 1 restarted: pid" in app.stderr, "worker 1 restarted", 60)
    replacement = int(re.findall(r"worker 1 restarted: pid (\d+)", app.stderr)[-1])
    assert "exited with status -9: restarting it" in app.stderr, app.stderr
    app.wait_for(lambda: _running(app, replacement), "the restarted worker RUNNING", 120)
    assert _alive(healthy), f"the healthy worker was stopped:\n{app.stderr}"

    orders = produce_orders(bootstrap_servers, example_topics, 100)
    big = consume_all(bootstrap_servers, example_topics["BIG_ORDERS_TOPIC"], expected_big(orders), 90)
    assert len(big) >= expected_big(orders), app.stderr
    assert app.stop(timeout_s=90) == 0, app.stderr
    assert app.stderr.count(f"application '{app_id}' stopped cleanly") == 2, app.stderr


def test_a_worker_that_keeps_failing_stops_all_and_says_why(
    cli: Callable[..., Cli],
    bootstrap_servers: str,
    example_topics: dict[str, str],
    tmp_path: Path,
) -> None:
    # A worker that keeps dying: killed three times. (A state directory that cannot be used
    # is a configuration error since the settings checks: refused up front with exit 2, and
    # a worker exiting 2 stops all at once -- test_cli_config.py.)
    app = cli(
        *example_run_args(
            bootstrap_servers,
            "--workers",
            "2",
            "--restart-limit",
            "2",
            "--restart-backoff",
            "0.2",
            application_id=f"cli-give-up-{uuid.uuid4().hex[:8]}",
            state_dir=tmp_path / "state",
        ),
        env=example_topics,
    )
    app.wait_for(lambda: "supervising 2 workers" in app.stderr, "the supervisor", 30)
    victim = _worker_pids(app)[1]
    for kill in range(3):
        os.kill(victim, signal.SIGKILL)
        if kill < 2:
            app.wait_for(
                lambda n=kill: app.stderr.count("worker 1 restarted: pid") == n + 1, "worker 1 restarted", 60
            )
            victim = int(re.findall(r"worker 1 restarted: pid (\d+)", app.stderr)[-1])
    code = app.proc.wait(180)
    assert code == 1, app.stderr
    assert app.stderr.count("worker 1 restarted: pid") == 2, app.stderr
    assert "worker 0 restarted" not in app.stderr
    last = app.stderr.strip().splitlines()[-1]
    assert "worker 1" in last and "failure 3 within 300s (restart limit 2)" in last, app.stderr
