"""Restore from a Spark-made snapshot plus the changelog tail, against a full changelog replay.

One streaming run builds the state (many updates per key); a Spark compaction snapshots
it halfway; more input makes a changelog tail after the snapshot. Then workers start with
no local state and must end up exactly where a full replay ends up.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from platform_streams.kafka import KafkaAdmin, log_end_offsets
from platform_streams.ops.spark.compaction import compact_changelog
from platform_streams.state.snapshots import SnapshotCatalog, SnapshotManifest, open_snapshot_store
from tests.integration.support_apps import (
    app_config,
    log_ends,
    new_app_id,
    read_to_end,
    running_app,
    wait_committed,
)
from tests.spark.apps import CountByKey
from tests.spark.support import count_outputs as _outputs
from tests.spark.support import expected_counts as _expected
from tests.spark.support import restore_then_process, snapshot_config
from tests.support.kafka import new_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.broker]

PARTITIONS = 2


@dataclass
class Built:
    app: CountByKey
    app_id: str
    bootstrap: str
    state_dir: Path
    snapshots: Path
    manifests: list[SnapshotManifest]
    changelog_ends: dict[tuple[str, int], int]
    counts: Counter[str]
    #: the group's committed input offsets once the streaming run stopped
    committed: dict[tuple[str, int], int]


def _inputs(start: int, n: int) -> list[tuple[str, str]]:
    return [(f"user-{i % 40}", f"click-{i}") for i in range(start, start + n)]


@pytest.fixture(scope="module")
def built(
    spark: Any, bootstrap_servers: str, admin: KafkaAdmin, tmp_path_factory: pytest.TempPathFactory
) -> Built:
    tmp = tmp_path_factory.mktemp("snapshot-restore")
    source, sink = new_topic(admin, PARTITIONS, "clicks"), new_topic(admin, PARTITIONS, "counts")
    app, app_id = CountByKey(source, sink), new_app_id("snap")
    config = app_config(bootstrap_servers, tmp / "state", app_id, statestore_cache_max_bytes=0)
    first, tail = _inputs(0, 3_000), _inputs(3_000, 400)
    with running_app(app(), config):
        placed = produce(bootstrap_servers, source, first)
        ends = log_ends(placed, source, PARTITIONS)
        wait_committed(admin, app_id, ends, "the first batch is committed")
        result = compact_changelog(
            spark,
            {"bootstrap.servers": bootstrap_servers},
            app_id,
            "counts",
            tmp / "snaps",
            source_topics=[source],
        )
        assert result.cuts == {}  # everything was committed
        ends = log_ends(placed + produce(bootstrap_servers, source, tail), source, PARTITIONS)
        wait_committed(admin, app_id, ends, "the tail is committed")
    changelog = f"{app_id}-counts-changelog"
    changelog_ends = log_end_offsets(
        {"bootstrap.servers": bootstrap_servers}, [(changelog, p) for p in range(PARTITIONS)]
    )
    return Built(
        app,
        app_id,
        bootstrap_servers,
        tmp / "state",
        tmp / "snaps",
        result.manifests,
        changelog_ends,
        Counter(k for k, _ in first + tail),
        {tp: o or 0 for tp, o in admin.committed_offsets(app_id, list(ends)).items()},
    )


def test_worker_with_deleted_state_restores_snapshot_plus_tail_like_a_full_replay(built: Built) -> None:
    assert {m.partition for m in built.manifests} == {0, 1}
    assert all(m.record_count > 0 for m in built.manifests)
    new = _inputs(10_000, 300)
    shutil.rmtree(built.state_dir)  # the worker lost its disk
    fast_out, fast = restore_then_process(
        built.app(),
        snapshot_config(built.bootstrap, built.app_id, built.state_dir, built.snapshots),
        built.app.source,
        PARTITIONS,
        new,
        built.committed,
    )
    full_out, full = restore_then_process(
        built.app(),
        snapshot_config(built.bootstrap, built.app_id, built.state_dir.with_name("full"), None),
        built.app.source,
        PARTITIONS,
        new,
        built.committed,
    )

    assert len(fast.last_snapshots) == PARTITIONS
    tail = {
        m.partition: built.changelog_ends[(m.changelog_topic, m.partition)] - m.offset - 1
        for m in built.manifests
    }
    for task_id, restores in fast.last_snapshots.items():
        assert [r.manifest.partition for r in restores] == [task_id.partition]
        assert fast.last_restore[task_id] == {"counts": tail[task_id.partition]}
        assert full.last_restore[task_id] == {
            "counts": built.changelog_ends[(restores[0].manifest.changelog_topic, task_id.partition)]
        }
    assert 0 < fast.total_restored < full.total_restored / 4
    assert _outputs(fast_out) == _outputs(full_out) == _expected(built.counts, new)


def test_corrupt_snapshot_is_rejected_and_the_worker_falls_back_to_the_changelog(
    built: Built, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "snaps"
    shutil.copytree(built.snapshots, broken)
    catalog = SnapshotCatalog(open_snapshot_store(broken))
    for manifest in built.manifests:
        sst = broken / (catalog.snapshot_prefix(manifest) + "data.sst")
        data = bytearray(sst.read_bytes())
        data[len(data) // 2] ^= 0xFF  # same size, one flipped byte
        sst.write_bytes(bytes(data))
    new = _inputs(20_000, 100)
    with caplog.at_level(logging.WARNING, logger="platform_streams.state.snapshot_restore"):
        out, lifecycle = restore_then_process(
            built.app(),
            snapshot_config(built.bootstrap, built.app_id, tmp_path / "state", broken),
            built.app.source,
            PARTITIONS,
            new,
            built.committed,
        )
    assert all(not restores for restores in lifecycle.last_snapshots.values())
    assert lifecycle.total_restored == sum(built.changelog_ends.values())
    assert sum("checksum" in r.getMessage() for r in caplog.records) == len(built.manifests)
    assert _outputs(out) == _expected(built.counts, new)


def test_running_app_with_deleted_state_starts_from_the_snapshot(
    built: Built, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """The real worker loop: KafkaStreams with ``state_snapshot_location`` and an empty state dir."""
    config = snapshot_config(built.bootstrap, built.app_id, tmp_path / "state", built.snapshots)
    new = _inputs(30_000, 200)
    with running_app(built.app(), config) as streams:
        lifecycle = streams.workers[0].state_lifecycle
        used = sorted(r.manifest.partition for rs in lifecycle.last_snapshots.values() for r in rs)
        assert used == [0, 1]
        ends = log_ends(produce(built.bootstrap, built.app.source, new), built.app.source, PARTITIONS)
        ends = {tp: max(o, admin.committed_offsets(built.app_id, [tp])[tp] or 0) for tp, o in ends.items()}
        wait_committed(admin, built.app_id, ends, "new input is committed")
    outputs = read_to_end(built.bootstrap, built.app.sink, PARTITIONS)
    # counts above the pre-existing ones can only come from this run, computed on the snapshot's state
    fresh = Counter(
        (k, c)
        for r in outputs
        if r.key and r.value
        for k, c in [(r.key.decode(), int.from_bytes(r.value, "big", signed=True))]
        if c > built.counts[k]
    )
    assert fresh == _expected(built.counts, new)


def test_snapshot_cli_creates_and_lists_snapshots_with_decoded_parquet(
    spark: Any,
    built: Built,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from platform_streams.cli import main

    monkeypatch.setenv("PS_SPARK_TEST_SOURCE", built.app.source)
    monkeypatch.setenv("PS_SPARK_TEST_SINK", built.app.sink)
    app = "tests.spark.apps:count_by_key_from_env"
    settings = ["--set", f"application.id={built.app_id}", "--set", f"bootstrap.servers={built.bootstrap}"]
    location = tmp_path / "cli-snaps"
    assert main(["snapshot", "create", app, "--location", str(location), "--json", *settings]) == 0
    created = json.loads(capsys.readouterr().out)["counts"]
    assert sorted(m["partition"] for m in created) == [0, 1]
    assert sum(m["record_count"] for m in created) == len(built.counts)  # one key per user
    assert main(["snapshot", "list", app, "--location", str(location), "--json", *settings]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted(m["snapshot_id"] for m in listed) == sorted(m["snapshot_id"] for m in created)
    rows = spark.read.parquet(created[0]["parquet_uri"]).collect()
    decoded = {json.loads(r["key_decoded"]): json.loads(r["value_decoded"]) for r in rows}
    assert all(count >= built.counts[user] for user, (count, _ts) in decoded.items())  # ValueAndTimestamp
    assert spark.sparkContext._jsc is not None  # the CLI left the shared session running
