"""A corrupt RocksDB data block found while processing: the task is rebuilt, the app goes on.

A corrupt SST *footer* (or MANIFEST/CURRENT) makes RocksDB refuse to open: the backend wipes
the store and it is restored from the changelog (tests/unit/state/test_state_rocksdb.py,
``test_corrupt_database_is_wiped_and_reported_empty``). A corrupt *data block* opens fine and
is only found when a read touches it ("block checksum mismatch"). Here the counting app of
``eos_runner.py`` (one partition, one task) counts enough keys for its clean close to flush
an SST file of many blocks; bytes in the middle of that file's data region are flipped; the
restarted app counts every key once more, so its reads reach the corrupt block.

Expected, as Kafka Streams handles a ``TaskCorruptedException`` (``TaskManager.handleCorruption``:
the open transaction aborted under exactly-once, the task closed dirty, its corrupted state
wiped, the task revived and restored from its changelog): the worker does not die (no
crash loop of worker replacements), one WARN names the store, the task and the corruption,
the corrupt files are gone, the store is restored from the beginning of its changelog, and
every key's final count is exact (under exactly-once, read_committed sees each count once).

With ``platform-streams run --workers 2`` the worker process that meets a corrupt store goes
on as well: the supervisor restarts nobody and the other worker is never stopped.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin
from tests.integration.eos_support import (
    RunnerApp,
    duplicate_updates,
    final_counts,
    new_app_id,
    read_updates,
    runners,
)
from tests.integration.support_apps import APP_TIMING, wait_until
from tests.integration.test_cli import Cli, cli, run_args
from tests.support.kafka import produce

__all__ = ["cli"]  # a fixture used here

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

#: distinct keys: with the store's 16 KB blocks, enough for an SST file of many data blocks
KEYS = 12_000


def _inputs(round_: int) -> list[tuple[str, str]]:
    return [(f"key-{i:06d}", f"r{round_}-{i}") for i in range(KEYS)]


def _corrupt_data_block(state_dir: Path) -> Path:
    """Flip 64 bytes a third into the store's largest SST file: inside its data blocks (the
    index, filter and properties blocks and the footer sit at the end of the file)."""
    ssts = sorted(state_dir.glob("**/rocksdb/counts/*.sst"), key=lambda p: p.stat().st_size)
    assert ssts, f"the clean close flushed no SST file under {state_dir}"
    size = ssts[-1].stat().st_size
    # ~360 KB of entries in 16 KB blocks, LZ4-compressed: ~20 data blocks, then ~15 KB of filter
    assert size > 32 * 1024, f"{ssts[-1]} ({size} bytes) holds too few data blocks"
    return _flip_bytes(ssts[-1])


def _flip_bytes(sst: Path) -> Path:
    size = sst.stat().st_size
    with sst.open("r+b") as fh:
        fh.seek(size // 3)
        data = fh.read(64)
        fh.seek(size // 3)
        fh.write(bytes(b ^ 0xFF for b in data))
    return sst


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_corrupt_data_block_is_wiped_and_restored_without_a_crash_loop(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, guarantee: str
) -> None:
    app = RunnerApp.create(bootstrap_servers, admin, new_app_id("corrupt"), 1)
    state_dir = tmp_path / "state"
    args = app.runner_args(guarantee=guarantee, state_dir=state_dir, commit_interval_ms=200)
    expected: Counter[str] = Counter()
    with runners() as started:
        first = started.start(tmp_path / "first.log", **args)
        produce(bootstrap_servers, app.source, _inputs(0))
        expected.update(k for k, _ in _inputs(0))
        wait_until(app.all_committed, 120, "the first round committed")
        assert first.terminate() == 0  # a clean close: the store is flushed to SST files

        sst = _corrupt_data_block(state_dir)
        corrupt = sst.read_bytes()
        log = tmp_path / "second.log"
        second = started.start(log, **args)
        produce(bootstrap_servers, app.source, _inputs(1))  # every key is read again
        expected.update(k for k, _ in _inputs(1))
        wait_until(app.all_committed, 120, f"the second round committed (see {log})")
        assert second.terminate() == 0
    text = log.read_text()
    failures = [line for line in text.splitlines() if re.search(r"worker \S+ failed", line)]
    assert not failures, f"the worker died on the corrupt block: {failures[:2]}"
    warnings = [line for line in text.splitlines() if " WARNING " in line and "corrupt" in line.lower()]
    assert len(warnings) == 1, f"one WARN for the corruption, got {warnings}"
    assert "counts" in warnings[0] and "0_0" in warnings[0], warnings[0]
    # a rebuilt store may reuse the file's number: its bytes tell the files apart
    assert not (sst.exists() and sst.read_bytes() == corrupt), "the corrupt SST file was not wiped"
    restored = [int(n) for n in re.findall(r"task 0_0 restored (\d+) changelog records", text)]
    assert restored and max(restored) >= KEYS, f"no restore from the changelog's beginning: {restored}"
    updates = read_updates(app, committed_only=guarantee == "exactly_once_v2")
    assert final_counts(updates) == dict(expected)
    if guarantee == "exactly_once_v2":
        assert duplicate_updates(updates, expected) == {}


def _placed(run: Cli) -> bool:
    """Each of the two worker processes runs one of the two tasks (its latest assignment)."""
    latest = dict(
        re.findall(
            r"\[pid (\d+)\] platform_streams\.runtime\.workers\.worker_rebalance: \S+: assignment received: "
            r"tasks (\[[^\]]*\])",
            run.stderr,
        )
    )
    return sorted(latest.values()) == ["['0_0']", "['0_1']"]


def _final_counts(app: RunnerApp) -> dict[str, int]:
    return final_counts(read_updates(app, committed_only=False))


@pytest.mark.kafka_side  # make test's time split: a long wait on group joins
def test_with_workers_a_corrupt_store_stops_no_worker(
    cli: Callable[..., Cli], bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """``run --workers 2`` over two partitions: every store's SST files of many blocks are
    corrupted between two runs (each worker process has its own ``<state_dir>-w<i>``); a
    process that meets one rebuilds the store, no worker is restarted or stopped, counts are
    exact. Each round's input is produced once each worker runs one task, so that the second
    run's workers usually resume their own (corrupt) stores, which must then stop no worker
    (a worker that failed would be restarted by the supervisor)."""
    app = RunnerApp.create(bootstrap_servers, admin, f"corrupt-cli-{uuid.uuid4().hex[:8]}", 2)
    env = {"COUNT_INPUT": app.source, "COUNT_OUTPUT": app.sink}
    args = run_args(
        "tests.integration.corrupt_count_app:topology",
        bootstrap_servers,
        "--workers",
        "2",
        application_id=app.app_id,
        state_dir=tmp_path / "state",
        commit_interval_ms=200,
        **APP_TIMING,
    )
    expected: Counter[str] = Counter()
    for round_ in range(2):
        if round_:
            # ~6,000 keys a task: ~10 data blocks (~1 KB each, LZ4), then ~8 KB of filter
            ssts = [p for p in tmp_path.glob("state-w*/**/rocksdb/counts/*.sst") if p.stat().st_size > 16_384]
            assert ssts, "the clean close flushed no SST file of many blocks"
            corrupt = {sst: _flip_bytes(sst).read_bytes() for sst in ssts}
        run = cli(*args, env=env)
        run.wait_for(lambda r=run: _placed(r), "each worker running one task", 180)  # type: ignore[misc]
        produce(bootstrap_servers, app.source, _inputs(round_))
        expected.update(k for k, _ in _inputs(round_))
        run.wait_for(app.all_committed, f"round {round_} committed", 180)
        assert run.stop(timeout_s=90) == 0, run.stderr
    text = run.stderr
    assert "restarted: pid" not in text and not re.search(r"worker \S+ failed", text), text
    # Whether a worker reads its corrupt files depends on the restart's placement: a member
    # that joins first may take both tasks for a moment and restore one over its stale copy
    # (newer versions of every key then shadow the corrupt block), seen on Apache Kafka. The
    # single-process tests above always meet it; here what must hold whatever the placement.
    warnings = [line for line in text.splitlines() if " WARNING " in line and "is corrupt (" in line]
    assert len(warnings) <= len(corrupt), warnings  # once per store at most
    kept = [sst for sst, data in corrupt.items() if sst.exists() and sst.read_bytes() == data]
    assert len(kept) <= len(corrupt) - len(warnings)  # each store a worker met was wiped
    assert _final_counts(app) == dict(expected)
