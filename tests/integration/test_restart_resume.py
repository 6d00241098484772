"""Process restarts: kill -9 loses nothing (at-least-once), SIGTERM commits (no duplicates).

The app runs in a subprocess (``restart_runner.py``) so it can really be SIGKILLed: no
close, no final commit, no leave-group. The restarted instance must resume from the last
committed offsets.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin, log_end_offsets
from tests.integration.support_apps import (
    AppProcess,
    RunnerApp,
    log_ends,
    new_app_id,
    read_to_end,
    wait_committed,
    wait_until,
)
from tests.support.kafka import consume_all, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]


def _inputs(start: int, n: int) -> list[tuple[str, str]]:
    return [(f"k{i % 101}", f"v{i}") for i in range(start, start + n)]


def _outputs(bootstrap: str, topic: str) -> Counter[str]:
    """Input value -> how many times it was output, over the whole sink topic."""
    return Counter(
        r.value.decode().removesuffix("|done") for r in read_to_end(bootstrap, topic, 4) if r.value
    )


def test_kill_dash_nine_mid_stream_then_restart_loses_nothing(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    app = RunnerApp.create(bootstrap_servers, admin, new_app_id("restart"), 4)
    source, sink, app_id = app.source, app.sink, app.app_id
    total = 20_000
    placed = produce(bootstrap_servers, source, _inputs(0, total))
    args = app.runner_args(state_dir=tmp_path / "state", commit_interval_ms=100)
    conf = {"bootstrap.servers": bootstrap_servers}
    first = AppProcess(tmp_path / "first.log", delay_us=300, **args)  # ~6 s of work: killed half way
    try:
        first.expect("RUNNING")
        # the output's log ends summed over its 4 partitions (no transactions: one offset per
        # record): cheap to poll, unlike re-reading thousands of records in a short window
        wait_until(
            lambda: sum(log_end_offsets(conf, [(sink, p) for p in range(4)]).values()) >= total // 4,
            30,
            "a quarter of the output exists",
        )
        first.kill()
    finally:
        first.close()
    ends = log_ends(placed, source, 4)
    at_kill = admin.committed_offsets(app_id, list(ends))
    assert any(at_kill.values()), "the killed instance committed progress"
    assert sum(o or 0 for o in at_kill.values()) < total, "it was killed before the end"

    second = AppProcess(tmp_path / "second.log", **args)
    try:
        second.expect("RUNNING")  # after the group evicts the dead member (session timeout)
        wait_committed(admin, app_id, ends, "offsets committed to the end")
        assert second.terminate() == 0
    finally:
        second.close()
    outputs = _outputs(bootstrap_servers, sink)
    missing = {f"v{i}" for i in range(total)} - set(outputs)
    assert not missing, f"{len(missing)} inputs were lost, e.g. {sorted(missing)[:5]}"
    assert set(outputs) == {f"v{i}" for i in range(total)}  # duplicates allowed, nothing else


def test_sigterm_at_a_quiet_point_commits_so_a_restart_has_no_duplicates(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    app = RunnerApp.create(bootstrap_servers, admin, new_app_id("graceful"), 4)
    source, sink, app_id = app.source, app.sink, app.app_id
    # a commit interval longer than the test: only the graceful close can commit
    args = app.runner_args(state_dir=tmp_path / "state", commit_interval_ms=600_000)
    placed = produce(bootstrap_servers, source, _inputs(0, 1_000))
    first = AppProcess(tmp_path / "first.log", **args)
    try:
        first.expect("RUNNING")
        assert len(consume_all(bootstrap_servers, sink, 1_000, timeout_s=30)) == 1_000  # the quiet point
        ends = log_ends(placed, source, 4)
        assert admin.committed_offsets(app_id, list(ends)) == dict.fromkeys(ends)  # nothing committed yet
        assert first.terminate() == 0, "graceful close must succeed"
        first.expect("CLOSED")
    finally:
        first.close()
    assert admin.committed_offsets(app_id, list(ends)) == ends

    placed += produce(bootstrap_servers, source, _inputs(1_000, 500))
    second = AppProcess(tmp_path / "second.log", **args)
    try:
        second.expect("RUNNING")
        assert len(consume_all(bootstrap_servers, sink, 1_500, timeout_s=30)) == 1_500
        assert second.terminate() == 0
    finally:
        second.close()
    outputs = _outputs(bootstrap_servers, sink)
    assert outputs == Counter(f"v{i}" for i in range(1_500)), "every input exactly once"
    assert admin.committed_offsets(app_id, list(ends)) == log_ends(placed, source, 4)
