"""``make demo`` keeps working: ``python -m examples.demo`` end to end, as the README runs it.

The demo is the README's first command (embedded broker, Dagster webserver and daemon,
the example app's workers, an interactive query, the Spark compaction job through
Dagster), so it runs on its own embedded broker by design, whatever
``PLATFORM_STREAMS_BOOTSTRAP[_SERVERS]`` says: the embedded defaults are what it demonstrates.
It runs a second time with ``--broker kafka`` (its own Apache Kafka node).

The demo starts the Dagster webserver and daemon in their own sessions and the workers
outlive the Dagster run that started them. However the test ends (a failure, the demo's
600 s limit, pytest-timeout), the demo gets Ctrl-C first, so its own ``finally`` blocks stop
Dagster and the workers, and then every process carrying this test's environment mark is
stopped (tests/support/processes.py): none outlives the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import kill_marked, marked_env, new_mark

pytestmark = [pytest.mark.dagster, pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(75)  # the demo's own limit is 600 s (plus Apache Kafka's start); 480 ran out at load 45
@pytest.mark.parametrize("broker", ["tansu", "kafka"])
def test_the_demo_runs_every_step_and_checks_its_results(
    tmp_path: Path, broker: str, request: pytest.FixtureRequest
) -> None:
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
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLATFORM_STREAMS_BOOTSTRAP")}
    mark = new_mark()
    demo = subprocess.Popen(
        [*command, "--broker", broker],
        cwd=REPO,
        env=marked_env(env, mark),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    out, finished = "", False
    try:
        out, _ = demo.communicate(timeout=600)
        finished = True
    except subprocess.TimeoutExpired:
        pass
    finally:
        out += _stop_demo(demo)
        kill_marked(mark)
    assert finished, "the demo did not finish within 600 s:\n" + out[-4000:]
    assert demo.returncode == 0, out[-4000:]
    assert "[demo] OK" in out
    assert ("Apache Kafka (KRaft" if broker == "kafka" else "(Tansu, in memory) ready") in out
    assert "records out: 2,000 / 2,000 expected on 'orders-by-customer'" in out
    # the query answered with the expected count, and the Spark snapshots hold every customer
    assert "(expected count" in out and "keys (expected 100)" in out, out[-4000:]
    assert "(0 still alive)" in out


def _stop_demo(demo: subprocess.Popen[str]) -> str:
    """Ctrl-C a demo still running (its ``finally`` blocks stop Dagster and the workers),
    SIGKILL its process group if that takes over 60 s; returns what it printed meanwhile."""
    if demo.poll() is not None:
        return ""
    os.killpg(demo.pid, signal.SIGINT)
    try:
        return demo.communicate(timeout=60)[0]
    except subprocess.TimeoutExpired:
        os.killpg(demo.pid, signal.SIGKILL)
        return demo.communicate()[0]
