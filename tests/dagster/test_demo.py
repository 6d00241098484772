"""``make demo`` keeps working: ``python -m examples.demo`` end to end, as the README runs it.

The demo is the README's first command (embedded broker, Dagster webserver and daemon,
the example app's workers, an interactive query, the Spark compaction job through
Dagster), so it runs on its own embedded broker by design, whatever
``PLATFORM_STREAMS_BOOTSTRAP[_SERVERS]`` says: the embedded defaults are what it demonstrates.
It runs a second time with ``--broker kafka`` (its own Apache Kafka node).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.dagster, pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(720)  # the demo's own limit is 600 s (plus Apache Kafka's start); 480 ran out at load 45
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
    done = subprocess.run(
        [*command, "--broker", broker],
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("PLATFORM_STREAMS_BOOTSTRAP")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "[demo] OK" in out
    assert ("Apache Kafka (KRaft" if broker == "kafka" else "(Tansu, in memory) ready") in out
    assert "records out: 2,000 / 2,000 expected on 'orders-by-customer'" in out
    # the query answered with the expected count, and the Spark snapshots hold every customer
    assert "(expected count" in out and "keys (expected 100)" in out, out[-4000:]
    assert "(0 still alive)" in out
