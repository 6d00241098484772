"""The ``<app>_prune_snapshots`` job: the newest K snapshots of each store partition stay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from dagster_defs import build_stream_app_defs
from dagster_defs.spec import resolve_app
from platform_streams.state.rocksdb import write_sst_file
from platform_streams.state.snapshots import (
    SnapshotCatalog,
    open_snapshot_store,
)
from tests.dagster.support import orders_spec
from tests.support.snapshot_publish import publish_snapshot

pytestmark = [pytest.mark.dagster, pytest.mark.broker]

STORE = "orders-per-customer"


def test_prune_job_keeps_the_newest_k_per_partition(
    orders_topics: dict[str, str], app_id: str, resources: dict[str, Any], tmp_path: Path
) -> None:
    app = resolve_app(orders_spec(orders_topics, app_id))
    location = str(tmp_path / "snapshots")
    catalog = SnapshotCatalog(open_snapshot_store(location))
    sst = tmp_path / "one.sst"
    write_sst_file(sst, iter([(b"k", b"v")]))
    for partition in (0, 1):
        for offset in (5, 15, 10):
            publish_snapshot(catalog, app_id, STORE, partition, offset, sst)
    defs = dg.Definitions.merge(build_stream_app_defs(app), dg.Definitions(resources=resources))
    job = defs.resolve_job_def("orders_test_prune_snapshots")
    op = "orders_test_prune_snapshots_op"
    result = job.execute_in_process(
        run_config={"ops": {op: {"config": {"keep": 1, "snapshots": location}}}}
    )
    assert result.success
    data = result.output_for_node(op)
    assert data["deleted"] == 4
    assert data["by_store"][STORE] == {0: 2, 1: 2}
    assert [m.offset for m in catalog.manifests(app_id, STORE, 0)] == [15]
    assert [m.offset for m in catalog.manifests(app_id, STORE, 1)] == [15]
    refused = job.execute_in_process(
        run_config={"ops": {op: {"config": {"keep": 1, "snapshots": location, "stores": ["nope"]}}}},
        raise_on_error=False,
    )
    assert not refused.success
    with pytest.raises(ValueError, match="keep"):  # refused before anything is deleted
        job.execute_in_process(run_config={"ops": {op: {"config": {"keep": 0}}}})
