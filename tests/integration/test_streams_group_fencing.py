"""Exactly-once on a streams group after the broker dropped the member (KIP-1071).

A member the broker dropped (its session expired: a paused process, a paused broker) finds
out when its transactional offset commit is refused (ILLEGAL_GENERATION) or its heartbeat is
fenced. It aborts the transaction, closes its tasks dirty, joins again and runs what the
broker assigns it; a session later it rebuilds the tasks of its consumer's partitions (the
classic path's recovery when no assignment came), which closes tasks that run again by then.
That close must abort what the exactly-once producer already sent in the open transaction,
or the next commit publishes those updates a second time beside their re-processed copies.
Needs Apache Kafka (streams groups).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin
from tests.integration.eos_support import (
    Feeder,
    RunnerApp,
    duplicate_updates,
    final_counts,
    new_app_id,
    read_updates,
    runners,
)
from tests.integration.support_apps import APP_TIMING, wait_until

pytestmark = [pytest.mark.broker, pytest.mark.kafka_side]

PARTITIONS = 4


def test_a_dropped_member_publishes_each_update_once_after_it_joined_again(
    streams_bootstrap: str, tmp_path: Path
) -> None:
    """One instance under steady input is paused past its session timeout; the broker drops
    it; resumed, it joins again and gets its tasks back. For the following session timeout
    and more, input keeps coming: every update is published exactly once."""
    with KafkaAdmin({"bootstrap.servers": streams_bootstrap}) as admin:
        app = RunnerApp.create(streams_bootstrap, admin, new_app_id("sgfence"), PARTITIONS, "streams")
        # 1 ms a record, about the input's rate: the open transaction mostly holds sent updates
        args = app.runner_args(guarantee="exactly_once_v2", delay_us=1000, state_dir=tmp_path / "state")
        session_s = APP_TIMING["session_timeout_ms"] / 1000
        # ~20 s of input, ~30 s of processing: through the pause, the rejoin and two session
        # timeouts after it
        feeder = Feeder(streams_bootstrap, app.source, 8_000, 40, chunk=200, pause_s=0.25).start()
        with runners() as started:
            runner = started.start(tmp_path / "runner.log", **args)
            wait_until(lambda: app.committed_total() > 0, 60, "the first commit")
            runner.signal(signal.SIGSTOP)
            try:
                time.sleep(session_s + 2)
            finally:
                runner.signal(signal.SIGCONT)
            wait_until(
                lambda: "the broker fenced this member" in runner.log_path.read_text(),
                30,
                "the member found out it was dropped",
            )
            expected = feeder.join(120)
            wait_until(app.all_committed, 90, "every input committed")
            assert runner.terminate() == 0
            log = runner.log_path.read_text()
        app.assert_ran_as_streams_members(log)
        updates = read_updates(app, committed_only=True)
        assert final_counts(updates) == dict(expected)
        twice = duplicate_updates(updates, expected)
        assert not twice, f"{len(twice)} keys had an update published twice, e.g. {list(twice.items())[:2]}"
