"""Snapshots in S3 (versitygw), written by compaction jobs on a Spark standalone cluster.

The cluster (a master and two worker JVMs) runs the job with real executors; the driver is
a process of its own (:mod:`tests.spark_cluster.compact_driver`) so that it can be killed.
A "worker on another host" is a state directory of its own that shares no path with the
job or the first worker: everything it gets comes from the object store and the broker.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from platform_streams.dev.servers.s3 import S3Server
from platform_streams.dev.servers.spark_cluster import SparkCluster
from platform_streams.kafka import KafkaAdmin, TopicSpec, log_end_offsets
from platform_streams.state.snapshots import SnapshotCatalog, SnapshotManifest, open_snapshot_store
from tests.integration.support_apps import app_config, log_ends, new_app_id, running_app, wait_committed
from tests.spark.apps import CountByKey
from tests.spark.support import count_outputs as _outputs
from tests.spark.support import expected_counts as _expected
from tests.spark.support import restore_then_process, snapshot_content
from tests.spark_cluster.compact_driver import RESULT
from tests.spark_cluster.conftest import BUCKET, DRIVER, ROOT, CompactionDriver
from tests.support.kafka import new_topic, produce

pytestmark = [
    pytest.mark.spark,
    pytest.mark.broker,
    pytest.mark.kafka_side,
    pytest.mark.timeout(900),
]

PARTITIONS = 2


def _inputs(start: int, n: int) -> list[tuple[str, str]]:
    return [(f"user-{i % 50}", f"click-{i}") for i in range(start, start + n)]


@dataclass
class Built:
    app: CountByKey
    app_id: str
    bootstrap: str
    location: str
    older: list[SnapshotManifest]
    newer: list[SnapshotManifest]
    changelog_ends: dict[tuple[str, int], int]
    counts: Counter[str]
    committed: dict[tuple[str, int], int]
    parquet: dict[str, Any]


@pytest.fixture(scope="module")
def built(
    compaction_driver: CompactionDriver,
    s3_server: S3Server,
    bootstrap_servers: str,
    admin: KafkaAdmin,
    tmp_path_factory: pytest.TempPathFactory,
) -> Built:
    """Two snapshots per partition in s3:// (each made on the cluster), then a changelog tail."""
    tmp = tmp_path_factory.mktemp("host-a")
    source, sink = new_topic(admin, PARTITIONS, "clicks"), new_topic(admin, PARTITIONS, "counts")
    app, app_id = CountByKey(source, sink), new_app_id("s3snap")
    location = f"s3://{BUCKET}/{app_id}-run"
    job = {"bootstrap": bootstrap_servers, "application_id": app_id, "store": "counts",
           "location": location, "source_topics": [source]}
    config = app_config(bootstrap_servers, tmp / "state", app_id, statestore_cache_max_bytes=0)
    batches = [_inputs(0, 2_000), _inputs(2_000, 300), _inputs(2_300, 200)]
    placed: list[tuple[int, int]] = []
    snapshots = []
    parquet: dict[str, Any] = {}
    with running_app(app(), config):
        for n, batch in enumerate(batches):
            placed += produce(bootstrap_servers, source, batch)
            wait_committed(admin, app_id, log_ends(placed, source, PARTITIONS), f"batch {n} is committed")
            if n == 0:
                snapshots.append(compaction_driver.compact(job))
            elif n == 1:  # the newer snapshots also get the analysts' Parquet copy, by Spark's writer
                compaction_driver.submit({**job, "parquet": True})
                parquet = compaction_driver.result()
                snapshots.append([SnapshotManifest.model_validate(m) for m in parquet["manifests"]])
    ends = log_ends(placed, source, PARTITIONS)
    changelog = f"{app_id}-counts-changelog"
    changelog_partitions = [(changelog, p) for p in range(PARTITIONS)]
    return Built(
        app,
        app_id,
        bootstrap_servers,
        location,
        snapshots[0],
        snapshots[1],
        log_end_offsets({"bootstrap.servers": bootstrap_servers}, changelog_partitions),
        Counter(k for batch in batches for k, _ in batch),
        {tp: o or 0 for tp, o in admin.committed_offsets(app_id, list(ends)).items()},
        parquet,
    )


def _run_worker(built: Built, state_dir: Path, location: str | None, new: list[tuple[str, str]]) -> Any:
    config = app_config(
        built.bootstrap,
        state_dir,
        built.app_id,
        statestore_cache_max_bytes=0,
        state_snapshot_location=location,
    )
    return restore_then_process(built.app(), config, built.app.source, PARTITIONS, new, built.committed)


def test_cluster_compaction_into_s3_restores_on_another_host_like_a_replay(
    built: Built, tmp_path: Path
) -> None:
    assert sorted(m.partition for m in built.newer) == [0, 1]
    assert all(n.offset > o.offset for n, o in zip(built.newer, built.older, strict=True))
    catalog = SnapshotCatalog(open_snapshot_store(built.location))
    assert [m.snapshot_id for m in catalog.manifests(built.app_id, "counts", 0)] == [
        built.newer[0].snapshot_id,
        built.older[0].snapshot_id,
    ]
    new = _inputs(10_000, 200)
    fast_out, fast = _run_worker(built, tmp_path / "host-b", built.location, new)
    full_out, _ = _run_worker(built, tmp_path / "host-c", None, new)
    used = {t.partition: [r.manifest.snapshot_id for r in rs] for t, rs in fast.last_snapshots.items()}
    assert used == {m.partition: [m.snapshot_id] for m in built.newer}
    for task_id in fast.last_snapshots:
        tail = built.changelog_ends[(f"{built.app_id}-counts-changelog", task_id.partition)]
        assert fast.last_restore[task_id] == {"counts": tail - built.newer[task_id.partition].offset - 1}
    assert _outputs(fast_out) == _outputs(full_out) == _expected(built.counts, new)


def test_parquet_copy_is_written_into_the_bucket_by_spark_and_equals_the_store(
    built: Built, tmp_path: Path
) -> None:
    """Spark's own Parquet writer reaches the s3:// location through Hadoop's s3a connector,
    set up from the same AWS settings as the snapshot store (versitygw, path-style)."""
    uri = built.parquet.get("parquet_uri")
    assert uri, "no Parquet copy was written (is hadoop-aws on Spark's classpath?)"
    assert all(m.parquet_uri == uri for m in built.newer)
    store = open_snapshot_store(built.location)
    prefix = uri.split(f"s3a://{BUCKET}/{built.app_id}-run/", 1)[1].rstrip("/") + "/"
    assert prefix.startswith(f"{built.app_id}/counts/parquet/")
    keys = store.list_keys(prefix)
    assert f"{prefix}_SUCCESS" in keys
    files = {k[len(prefix) :].split("/")[0] for k in keys if k.endswith(".parquet")}
    assert files == {f"partition={p}" for p in range(PARTITIONS)}, keys
    expected = sorted(
        [m.partition, key.hex(), value.hex()]
        for m in built.newer
        for key, value in snapshot_content(built.location, m, tmp_path / f"p{m.partition}")  # type: ignore[arg-type]
    )
    assert built.parquet["parquet_rows"] == expected


def test_corrupt_object_is_refused_and_the_previous_snapshot_is_used(
    built: Built, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = open_snapshot_store(built.location)
    broken_location = f"{built.location}-broken"
    broken = open_snapshot_store(broken_location)
    for key in source.list_keys(""):
        broken.put_bytes(key, source.get_bytes(key))
    victim = built.newer[0]
    key = SnapshotCatalog.snapshot_prefix(victim) + "data.sst"
    data = bytearray(broken.get_bytes(key))
    data[len(data) // 2] ^= 0xFF  # same size, one flipped byte
    broken.put_bytes(key, bytes(data))
    new = _inputs(20_000, 100)
    with caplog.at_level(logging.WARNING, logger="platform_streams.state.snapshot_restore"):
        out, lifecycle = _run_worker(built, tmp_path / "host-d", broken_location, new)
    used = {t.partition: [r.manifest.snapshot_id for r in rs] for t, rs in lifecycle.last_snapshots.items()}
    assert used == {0: [built.older[0].snapshot_id], 1: [built.newer[1].snapshot_id]}
    refused = [r.getMessage() for r in caplog.records if "checksum" in r.getMessage()]
    assert len(refused) == 1 and victim.snapshot_id in refused[0]
    assert _outputs(out) == _expected(built.counts, new)


def test_state_endpoint_names_the_snapshot_each_task_restored_from(built: Built, tmp_path: Path) -> None:
    """A running worker with an empty state dir and the s3:// location: GET /state says which
    snapshot each task's store came from."""
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    config = app_config(
        built.bootstrap,
        tmp_path / "host-e",
        built.app_id,
        statestore_cache_max_bytes=0,
        state_snapshot_location=built.location,
        http_port=port,
    )
    with running_app(built.app(), config):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/state", timeout=10) as reply:
            state = json.loads(reply.read())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            metrics = reply.read().decode()
    restored = {
        task: [(r["store"], r["snapshot_id"], r["offset"]) for r in used]
        for worker in state["workers"]
        for task, used in worker["snapshot_restores"].items()
    }
    assert sorted(restored.values()) == sorted(
        [("counts", m.snapshot_id, m.offset)] for m in built.newer
    )
    # the restore metrics count each snapshot restore: one per task, its keys, its time
    samples = _samples(metrics, "kafka_streams_task_snapshot_restore")
    assert samples["kafka_streams_task_snapshot_restore_total"] == {"0_0": 1.0, "0_1": 1.0}
    assert samples["kafka_streams_task_snapshot_restore_records_total"] == {
        f"0_{m.partition}": float(m.record_count) for m in built.newer
    }
    assert all(v > 0 for v in samples["kafka_streams_task_snapshot_restore_seconds_total"].values())


def _samples(text: str, prefix: str) -> dict[str, dict[str, float]]:
    """Prometheus text: metric name -> task_id -> value, for the names starting with ``prefix``."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if line.startswith(prefix) and "{" in line:
            name, rest = line.split("{", 1)
            labels, value = rest.rsplit("} ", 1)
            task = next(p.split('"')[1] for p in labels.split(",") if p.startswith("task_id="))
            out.setdefault(name, {})[task] = float(value)
    return out


def test_killed_job_publishes_nothing_and_the_next_run_completes(
    spark_cluster: SparkCluster,
    compaction_driver: CompactionDriver,
    s3_server: S3Server,
    bootstrap_servers: str,
    admin: KafkaAdmin,
    tmp_path: Path,
) -> None:
    # Partition 0 is big and partition 1 tiny, so partition 1's SST is uploaded while
    # partition 0's task is still sorting: the job is killed between the two uploads.
    app_id, store = new_app_id("s3kill"), "kv"
    changelog = f"{app_id}-{store}-changelog"
    admin.create_topics([TopicSpec(changelog, PARTITIONS, config={"cleanup.policy": "compact"})])
    big = [(f"k{i % 60_000:06d}", f"v{i}", 0) for i in range(120_000)]
    small = [(f"k{i:03d}", f"v{i}", 1) for i in range(50)]
    produce(bootstrap_servers, changelog, big + small)
    location = f"s3://{BUCKET}/{app_id}"
    store_view = open_snapshot_store(location)
    catalog = SnapshotCatalog(store_view)
    job = {"bootstrap": bootstrap_servers, "application_id": app_id, "store": store, "location": location}
    compaction_driver.submit(job)  # the suite's driver: this test runs last, it ends the driver
    deadline = time.monotonic() + 400
    uploaded: list[str] = []
    while not uploaded and time.monotonic() < deadline and compaction_driver.process.poll() is None:
        uploaded = [k for k in store_view.list_keys(f"{app_id}/") if k.endswith("/data.sst")]
        time.sleep(0.05)
    compaction_driver.kill()  # the driver and its JVM, mid-write
    assert uploaded, "no SST was uploaded before the driver ended"
    assert compaction_driver.process.returncode == -signal.SIGKILL
    assert catalog.manifests(app_id, store) == []  # an uploaded SST alone is no snapshot

    started = time.monotonic()
    rerun = subprocess.run(
        [sys.executable, "-m", DRIVER, spark_cluster.master_url, json.dumps(job)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    print(f"the next run, a new driver: {time.monotonic() - started:.1f}s")
    out = json.loads(rerun.stdout.strip().splitlines()[-1][len(RESULT) :])
    assert "error" not in out, out.get("trace")
    manifests = [SnapshotManifest.model_validate(m) for m in out["manifests"]]
    assert sorted((m.partition, m.record_count) for m in manifests) == [(0, 60_000), (1, 50)]
    assert sorted(m.snapshot_id for m in catalog.manifests(app_id, store)) == sorted(
        m.snapshot_id for m in manifests
    )
    small_content = snapshot_content(location, manifests[1], tmp_path)  # type: ignore[arg-type]
    assert small_content == sorted((k.encode(), v.encode()) for k, v, _p in small)
