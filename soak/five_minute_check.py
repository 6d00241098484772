"""NOT IN CI YET (issue 18 open): the soak harness's 5-minute form, kept outside tests/ so
``make test`` does not collect it. It fails today on a loaded machine: the wedged-group
repair (runtime/rebalance_wait.py) fires as a false alarm when rebalances take ~1 min and its
offset write-back can lose to a member that already joined the re-created group (see
docs/soak/README.md). Run it by hand: ``python -m pytest soak/five_minute_check.py``.

The soak harness's CI form: ``SOAK_MINUTES=5 python -m soak`` (what ``make soak`` runs
for an hour) must end with exit 0 and a summary line of zeros, and leave its report and plot.

The harness starts its own embedded broker (its fault schedule pauses the broker process,
so it cannot share the session's); with ``PLATFORM_STREAMS_BOOTSTRAP`` set it runs on that
broker instead and skips the broker pauses.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(
    r"^soak: 5 min, (\d+) records, (\d+) faults, lost=0 wrong=0 duplicates=0 stuck=0( broker_leaked=\d+)?$",
    re.MULTILINE,
)

pytestmark = [pytest.mark.slow, pytest.mark.broker]


@pytest.mark.timeout(2400)
def test_five_minutes_of_faults_lose_nothing(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "SOAK_MINUTES": "5",
        "SOAK_SEED": "27",  # kill -9, SIGSTOP, a deleted state dir, scaling, a broker pause, poison, HTTP
        "SOAK_OUT": str(tmp_path / "run"),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    done = subprocess.run(
        [sys.executable, "-m", "soak"], cwd=REPO, env=env, capture_output=True, text=True, timeout=2300
    )
    tail = done.stdout[-4000:] + done.stderr[-4000:]
    assert done.returncode == 0, tail
    found = SUMMARY.search(done.stdout)
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
