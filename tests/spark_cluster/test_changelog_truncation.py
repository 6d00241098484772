"""Changelogs bounded by snapshots: ``platform-streams snapshot truncate`` (DeleteRecords).

The snapshot is made by the compaction job on the Spark standalone cluster into s3://
(versitygw); the changelog is truncated below it on the session's broker. The rule under
test (docs/spark.md, "Changelogs bounded by snapshots"): never below what a live standby
reported it needs, and a standby or a fresh instance restores exactly afterwards.
"""

from __future__ import annotations

import json
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from platform_streams.dev.brokers import EmbeddedBroker
from platform_streams.dev.servers.s3 import S3Server
from platform_streams.kafka import KafkaAdmin, log_end_offsets
from platform_streams.state.checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from tests.integration.support_apps import (
    app_config,
    log_ends,
    new_app_id,
    running_app,
    wait_committed,
    wait_until,
)
from tests.spark.apps import CountByKey
from tests.spark.support import count_outputs, expected_counts, restore_then_process
from tests.spark_cluster.conftest import BUCKET, CompactionDriver
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.kafka_side, pytest.mark.timeout(900)]

PARTITIONS = 2
APP = "tests.spark.apps:count_by_key_from_env"


def _inputs(start: int, n: int) -> list[tuple[str, str]]:
    return [(f"user-{i % 50}", f"click-{i}") for i in range(start, start + n)]


def _truncate(
    bootstrap: str, app_id: str, location: str, capsys: pytest.CaptureFixture[str], *, refused: bool = False
) -> Any:
    from platform_streams.cli import main

    capsys.readouterr()  # what ran before (the driver's timings) is not the command's output
    settings = [f"application.id={app_id}", f"bootstrap.servers={bootstrap}",
                f"state.snapshot.location={location}", "state.snapshot.truncate.changelogs=true"]  # fmt: skip
    args = ["snapshot", "truncate", APP, "--json", *[a for s in settings for a in ("--set", s)]]
    code = main(args)
    out, err = capsys.readouterr()
    if not refused:
        assert code == 0, err
        return json.loads(out)
    return code, err


def test_truncation_stops_at_standbys_and_every_restore_stays_exact(
    compaction_driver: CompactionDriver,
    s3_server: S3Server,
    bootstrap_servers: str,
    admin: KafkaAdmin,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, sink = new_topic(admin, PARTITIONS, "clicks"), new_topic(admin, PARTITIONS, "counts")
    monkeypatch.setenv("PS_SPARK_TEST_SOURCE", source)
    monkeypatch.setenv("PS_SPARK_TEST_SINK", sink)
    app, app_id = CountByKey(source, sink), new_app_id("trunc")
    location = f"s3://{BUCKET}/{app_id}"
    changelog = f"{app_id}-counts-changelog"
    changelogs = [(changelog, p) for p in range(PARTITIONS)]

    # A broker without DeleteRecords (the embedded Tansu): refused, nothing deleted.
    with EmbeddedBroker(kill_with_parent=True) as tansu:
        code, err = _truncate(tansu.bootstrap_servers, app_id, location, capsys, refused=True)
    assert code != 0 and "does not support DeleteRecords" in err, err
    if not admin.supports("delete_records"):
        pytest.skip("the session's broker has no DeleteRecords: only the refusal applies")

    def config(host: str) -> Any:
        return app_config(bootstrap_servers, tmp_path / host, app_id, statestore_cache_max_bytes=0,
                          state_snapshot_location=location, state_snapshot_truncate_changelogs=True,
                          num_standby_replicas=1)  # fmt: skip

    placed: list[tuple[int, int]] = []

    def feed(batch: list[tuple[str, str]], what: str) -> None:
        placed.extend(produce(bootstrap_servers, source, batch))
        wait_committed(admin, app_id, log_ends(placed, source, PARTITIONS), what)

    def standbys_caught_up(client: Any) -> bool:
        ends = log_end_offsets({"bootstrap.servers": bootstrap_servers}, changelogs)
        have = {tp: o for positions in client.standbys.positions().values() for tp, o in positions.items()}
        return bool(have) and all(o + 1 >= ends[tp] for tp, o in have.items())

    def log_starts() -> dict[int, int]:
        return {p: o for (_, p), (o, _) in admin.list_offsets(changelogs, "earliest").items()}

    batches = [_inputs(0, 2_000), _inputs(2_000, 300), _inputs(2_300, 300), _inputs(2_600, 200)]
    job = {"bootstrap": bootstrap_servers, "application_id": app_id, "store": "counts",
           "location": location, "source_topics": [source]}  # fmt: skip
    with ExitStack() as host_a:
        a = host_a.enter_context(running_app(app(), config("host-a")))
        feed(batches[0], "batch 0")
        snapshots = {m.partition: m for m in compaction_driver.compact(job)}
        with running_app(app(), config("host-b")) as b:
            # B's standbys start from the snapshot (the changelog may no longer start at 0)
            feed(batches[1], "batch 1")
            wait_until(lambda: standbys_caught_up(b), 60, "host-b's standbys caught up")
            # A partition whose standby reported no position (B's, reported before it had any
            # state) stays; the others go no further than the snapshot and the standbys' positions.
            cuts = _truncate(bootstrap_servers, app_id, location, capsys)
            for cut in cuts:
                if cut["truncate_before"] is None:
                    assert "standby" in cut["reason"], cuts
                    assert log_starts()[cut["partition"]] == 0
                else:
                    assert cut["truncate_before"] <= snapshots[cut["partition"]].offset + 1, cuts
        # B is gone (a clean close): once A holds no standby either, the changelogs go up to the snapshots
        wait_until(lambda: a.local_standby_tasks() == [], 60, "host-a runs every task, no standby")
        _truncate(bootstrap_servers, app_id, location, capsys)
        assert log_starts() == {p: m.offset + 1 for p, m in snapshots.items()}
        assert all(m.offset > 0 for m in snapshots.values())
        with running_app(app(), config("host-b")) as b:
            # the standbys resume from their checkpoints, past the new log start
            feed(batches[2], "batch 2")
            wait_until(lambda: standbys_caught_up(b), 60, "host-b's standbys caught up again")
            host_a.close()  # B takes A's tasks over from its standbys' stores
            feed(batches[3], "batch 3")
    totals = Counter(k for batch in batches for k, _ in batch)
    outputs = consume_all(bootstrap_servers, sink, sum(len(b) for b in batches))
    last: dict[str, int] = {}
    for record in outputs:
        assert record.key is not None and record.value is not None
        key, count = record.key.decode(), int.from_bytes(record.value, "big", signed=True)
        last[key] = max(last.get(key, 0), count)
    assert last == dict(totals)

    # A fresh instance (empty state dir) restores from the snapshot and the truncated changelog.
    ends = log_ends(placed, source, PARTITIONS)
    committed = {tp: o or 0 for tp, o in admin.committed_offsets(app_id, list(ends)).items()}
    new = _inputs(10_000, 100)
    out, lifecycle = restore_then_process(app(), config("host-fresh"), source, PARTITIONS, new, committed)
    assert sorted(t.partition for t in lifecycle.last_snapshots) == [0, 1]
    assert count_outputs(out) == expected_counts(totals, new)

    # A store checkpointed below the new log start (its client was down while the changelog was
    # truncated): the broker answers OFFSET_OUT_OF_RANGE, the store is re-seeded from the snapshot.
    for p in range(PARTITIONS):
        checkpoint = tmp_path / "host-fresh" / app_id / f"0_{p}" / CHECKPOINT_FILE_NAME
        OffsetCheckpoint(checkpoint).write({(changelog, p): 5})
    again = _inputs(20_000, 100)
    out, lifecycle = restore_then_process(app(), config("host-fresh"), source, PARTITIONS, again, committed)
    assert {t.partition: len(used) for t, used in lifecycle.last_snapshots.items()} == {0: 1, 1: 1}
    assert count_outputs(out) == expected_counts(totals, again)
