"""Snapshot garbage collection in S3 (versitygw): ``platform-streams snapshot prune --keep K``,
and the unpublished uploads of killed jobs once they are older than ``--orphan-grace``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from platform_streams.dev.servers.s3 import S3Server
from platform_streams.state.rocksdb import write_sst_file
from platform_streams.state.snapshots import (
    SnapshotCatalog,
    new_snapshot_id,
    open_snapshot_store,
)
from tests.spark_cluster.conftest import BUCKET
from tests.support.snapshot_publish import publish_snapshot

pytestmark = [pytest.mark.kafka_side]


def test_prune_keeps_the_newest_k_per_partition_and_leaves_unpublished_uploads(
    s3_server: S3Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from platform_streams.cli import main

    app_id = f"gc-{new_snapshot_id()}"
    location = f"s3://{BUCKET}/{app_id}"
    catalog = SnapshotCatalog(open_snapshot_store(location))
    sst = tmp_path / "one.sst"
    write_sst_file(sst, iter([(b"k", b"v")]))
    offsets = (10, 40, 20, 30)
    published = {
        p: [publish_snapshot(catalog, app_id, "counts", p, offset, sst) for offset in offsets] for p in (0, 1)
    }
    orphan = f"{app_id}/counts/0/{99:020d}-unpublished/data.sst"
    catalog.store.put_file(orphan, sst)  # a killed job's upload: no manifest

    monkeypatch.setenv("PS_SPARK_TEST_SOURCE", "clicks")
    monkeypatch.setenv("PS_SPARK_TEST_SINK", "counts")
    settings = ["--set", f"application.id={app_id}", "--set", "bootstrap.servers=127.0.0.1:9"]
    app = "tests.spark.apps:count_by_key_from_env"
    args = ["snapshot", "prune", app, "--keep", "2", "--location", location, "--json", *settings]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out) == {"snapshots": {"counts": {"0": 2, "1": 2}}, "orphans": []}

    for partition, made in published.items():
        kept = catalog.manifests(app_id, "counts", partition)
        assert [m.offset for m in kept] == [40, 30]
        gone = [m for m in made if m.offset in (10, 20)]
        keys = catalog.store.list_keys(SnapshotCatalog.partition_prefix(app_id, "counts", partition))
        assert not [k for k in keys if any(m.snapshot_id in k for m in gone)]
    assert orphan in catalog.store.list_keys(f"{app_id}/")  # younger than the default grace (1 h)
    assert main([*args[:3], "--keep", "0", *args[5:]]) != 0

    # Past the grace period a killed job's upload goes; published snapshots stay.
    assert main([*args, "--orphan-grace", "0"]) == 0
    orphans = json.loads(capsys.readouterr().out)["orphans"]
    assert orphans == [f"{app_id}/counts/0/{99:020d}-unpublished/"]
    assert orphan not in catalog.store.list_keys(f"{app_id}/")
    assert [[m.offset for m in catalog.manifests(app_id, "counts", p)] for p in (0, 1)] == [[40, 30]] * 2
