"""``bench/latency.py`` end to end on a second of input: the paced producer, the engine
children and the read_committed reader produce a latency row per engine.

Only the raw loop and platform_streams (Quix Streams needs bench/.venv-quix); no latency is
asserted -- speed lives in bench/, this only shows the runner measures something.
"""

from __future__ import annotations

import pytest

from bench import latency

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.servers_side]  # ~100 s off the long pole


def test_latency_rows_for_the_raw_loop_and_platform_streams(
    bootstrap_servers: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = latency.main(
        [
            "--seconds",
            "1",
            "--rates",
            "50",
            "--max-records",
            "2000",
            "--workloads",
            "count_eos_100ms",
            "--engines",
            "raw_confluent,platform_streams",
            "--bootstrap",
            bootstrap_servers,
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "FAILED" not in out, out
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| count_eos_100ms")]
    assert [row[3].strip() for row in rows] == ["raw_confluent", "platform_streams"], out
    for row in rows:
        assert int(row[6].strip().replace(",", "")) > 0, out  # outputs were read back (committed)
