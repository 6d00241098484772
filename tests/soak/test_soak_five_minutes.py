"""The soak harness's CI form: ``SOAK_MINUTES=5 python -m soak`` (what ``make soak`` runs
for an hour) must end with exit 0 and a summary line of zeros, and leave its report and plot.

It runs in ``make test``'s Kafka-side process (marker ``kafka_side``: a CPU and time split
only, tools/test_sides.sh; the soak still runs on its own embedded Tansu broker), at a
lower rate than the hour (100 records/s, 100 keys: the same schedule of faults, less
catch-up work on a loaded 2-core machine) and with a catch-up limit of 5 minutes, so that
it ends within ~15 minutes however loaded the machine is.

The harness starts its own embedded broker (``SOAK_BROKER=tansu``: ``make soak`` picks
Apache Kafka where Java is; its fault schedule pauses the broker process, so it cannot
share the session's); with ``PLATFORM_STREAMS_BOOTSTRAP`` set it runs on that
broker instead and skips the broker pauses.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(
    r"^soak: 5 min, (\d+) records, (\d+) faults, lost=0 wrong=0 duplicates=0 stuck=0( broker_leaked=\d+)?$",
    re.MULTILINE,
)

pytestmark = [pytest.mark.slow, pytest.mark.broker, pytest.mark.kafka_side]


def _run_soak(env: dict[str, str], timeout_s: float) -> tuple[str, str, int]:
    """``python -m soak`` in a session of its own: past ``timeout_s`` the harness and
    everything it started (broker, supervisors, workers) are stopped, not left running."""
    soak = subprocess.Popen(
        [sys.executable, "-m", "soak"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = soak.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(soak.pid, signal.SIGTERM)
        try:
            stdout, stderr = soak.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(soak.pid, signal.SIGKILL)
            stdout, stderr = soak.communicate()
        pytest.fail(f"the soak did not end within {timeout_s:.0f}s: {stdout[-3000:]}{stderr[-3000:]}")
    return stdout, stderr, soak.returncode


def _details(run_dir: Path, lines_per_log: int = 60) -> str:
    """What the checker noted per application (the lost keys and updates, their trace through
    the repartition topic) and the workers' warnings and errors: CI keeps no run directory,
    so a failure must carry them."""
    found = []
    try:
        apps = json.loads((run_dir / "report.json").read_text())["apps"]
        found += [f"{name}: {app.get('details')}" for name, app in apps.items()]
    except (OSError, ValueError, KeyError):
        pass
    for log in sorted(run_dir.glob("*.log")):
        lines = [line[:300] for line in log.read_text(errors="replace").splitlines() if line[:1] != "%"]
        said = [line for line in lines if " WARNING " in line or " ERROR " in line]
        # and how each log ends, at every level: a stand-still logs no warning (docs/soak/README.md)
        found += [f"--- {log.name}", *said[:lines_per_log], f"--- {log.name}, last lines", *lines[-25:]]
    return "\n" + "\n".join(found)


@pytest.mark.timeout(1140)
def test_five_minutes_of_faults_lose_nothing(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "SOAK_MINUTES": "5",
        "SOAK_SEED": "27",  # kill -9, SIGSTOP, a deleted state dir, scaling, a broker pause, poison, HTTP
        "SOAK_RATE": "100",
        "SOAK_KEYS": "100",
        "SOAK_SETTLE_S": "300",
        "SOAK_BROKER": "tansu",  # make soak's default is Apache Kafka; this form stays on Tansu
        "SOAK_OUT": str(tmp_path / "run"),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    stdout, stderr, status = _run_soak(env, timeout_s=1100)
    tail = stdout[-4000:] + stderr[-4000:] + _details(tmp_path / "run")
    assert status == 0, tail
    found = SUMMARY.search(stdout)
    assert found, tail
    records, faults = int(found.group(1)), int(found.group(2))
    assert records > 0 and faults >= 5, tail
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["seed"] == 27 and report["summary"] == found.group(0)
    assert (tmp_path / "run" / "soak.png").stat().st_size > 0
    for app in ("eos", "alos"):
        read = report["apps"][app]["records_read"]
        assert read["counts"] >= records and read["joined"] >= records, report["apps"][app]
        assert read["dead_letters"] >= report["poison_records"] > 0
