"""``make demo`` keeps working: ``python -m examples.demo`` end to end, as the README runs it.

The demo is the README's first command (a local broker, Dagster webserver and daemon,
the example app's workers, an interactive query, the Spark compaction job through
Dagster), so it starts its own broker by design, whatever
``PLATFORM_STREAMS_BOOTSTRAP[_SERVERS]`` says. It runs twice: with ``--broker tansu``
(the embedded broker) and ``--keep-running``, stopped by SIGTERM once everything is up;
and with no ``--broker`` at all, which is Apache Kafka (its own node) where Java and Maven
are -- what ``make demo`` runs.

The demo starts the Dagster webserver and daemon in their own sessions and the workers
outlive the Dagster run that started them. However the test ends (a failure, the demo's
780 s limit, pytest-timeout), the demo gets Ctrl-C first, so its own ``finally`` blocks stop
Dagster and the workers, and then every process carrying this test's environment mark is
stopped (platform_streams/dev/servers/processes.py): none outlives the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from platform_streams.dev.servers.processes import kill_marked, marked_env, marked_pids, new_mark

pytestmark = [pytest.mark.dagster, pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)  # the limit below is 780 s (+ Kafka's start): 183 s quiet, 494-637 s at load 20-30
@pytest.mark.parametrize("broker", ["tansu", "kafka"])  # "kafka": tests/conftest.py's Kafka side
def test_the_demo_runs_every_step_and_checks_its_results(
    tmp_path: Path, broker: str, request: pytest.FixtureRequest
) -> None:
    """``tansu``: the embedded broker, chosen explicitly, with ``--keep-running`` stopped by
    SIGTERM as ``kill`` or a service manager would; ``kafka``: no ``--broker`` at all, the
    default, which must be Apache Kafka where Java and Maven are (skipped without them,
    except in CI)."""
    if broker == "kafka":
        request.getfixturevalue("kafka_bootstrap_servers")  # skipped without Java/Maven (not in CI)
    command = [
        sys.executable,
        "-m",
        "examples.demo",
        "--orders",
        "2000",
        "--state-dir",
        str(tmp_path / "demo"),
        *(["--broker", "tansu", "--keep-running"] if broker == "tansu" else []),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLATFORM_STREAMS_BOOTSTRAP")}
    mark = new_mark()
    demo = subprocess.Popen(
        command,
        cwd=REPO,
        env=marked_env(env, mark),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=_read, args=(demo, lines), daemon=True)
    reader.start()
    deadline = time.monotonic() + 780
    left: list[str] = []
    finished = False
    try:
        if broker == "tansu":
            left = _sigterm_once_up(demo, lines, mark, deadline)
        demo.wait(timeout=max(1.0, deadline - time.monotonic()))
        finished = True
    except subprocess.TimeoutExpired:
        pass
    finally:
        _stop_demo(demo)
        reader.join(timeout=10)
        kill_marked(mark)
    out = "".join(lines)
    assert finished, "the demo did not finish within 780 s (or 90 s after SIGTERM):\n" + out[-4000:]
    assert demo.returncode == 0, out[-4000:]
    assert "[demo] OK" in out
    assert ("(Tansu, in memory) ready" if broker == "tansu" else "Apache Kafka (KRaft") in out
    assert "records out: 2,000 / 2,000 expected on 'orders-by-customer'" in out
    # the query answered with the expected count, and the Spark snapshots hold every customer
    assert "(expected count" in out and "keys (expected 100)" in out, out[-4000:]
    assert "(0 still alive)" in out
    assert not left, f"left running after SIGTERM: {left}\n" + out[-4000:]


def _read(demo: subprocess.Popen[str], lines: list[str]) -> None:
    assert demo.stdout is not None
    for line in demo.stdout:
        lines.append(line)


def _sigterm_once_up(demo: subprocess.Popen[str], lines: list[str], mark: str, deadline: float) -> list[str]:
    """Wait until the demo says everything stays up, SIGTERM the demo process alone (not its
    group, as ``kill PID`` does) and return what it started that is still running 60 s later:
    the Dagster webserver and daemon, the workers and the broker must all be gone."""
    while not any("--keep-running: everything stays up" in line for line in lines):
        if demo.poll() is not None or time.monotonic() > deadline:
            return []  # finished or stuck before the end: the asserts on its output say why
        time.sleep(0.5)
    started = marked_pids(mark)
    assert len(started) >= 5, f"expected the broker, Dagster's two processes and two workers: {started}"
    demo.send_signal(signal.SIGTERM)
    demo.wait(timeout=90)
    deadline = time.monotonic() + 60
    while (left := marked_pids(mark)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return [f"{pid}: {_cmdline(pid)}" for pid in left]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"


def _stop_demo(demo: subprocess.Popen[str]) -> None:
    """Ctrl-C a demo still running (its ``finally`` blocks stop Dagster and the workers),
    SIGKILL its process group if that takes over 60 s."""
    if demo.poll() is not None:
        return
    os.killpg(demo.pid, signal.SIGINT)
    try:
        demo.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(demo.pid, signal.SIGKILL)
        demo.wait()
