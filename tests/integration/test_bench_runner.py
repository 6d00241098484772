"""``bench/run.py`` end to end on a few records: the runner, its engines and its checks work.

Quix Streams needs its own virtualenv (bench/.venv-quix), so only the raw loop and
platform_streams run here; the restore phase is included (``count_unique``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import run

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def test_count_unique_and_its_restore_run_checked_on_both_engines(
    bootstrap_servers: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run.main(
        [
            "--records",
            "3000",
            "--repeats",
            "1",
            "--workloads",
            "count_unique",
            "--engines",
            "raw_confluent,platform_streams",
            "--bootstrap",
            bootstrap_servers,
            "--state-root",
            str(tmp_path),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| count_unique")]
    # one processing row and one restore row per engine; each run's output was checked
    assert len(rows) == 4, out
    assert "3,000 entries" in out  # the rebuilt stores hold one entry per key
    assert not list(tmp_path.iterdir())  # every run's state directory was removed
