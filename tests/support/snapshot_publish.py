"""Publish a one-record state snapshot by hand: what the snapshot GC tests prune."""

from __future__ import annotations

import time
from pathlib import Path

from platform_streams.state.snapshots import SnapshotCatalog, SnapshotManifest, file_checksum, new_snapshot_id


def publish_snapshot(
    catalog: SnapshotCatalog, app_id: str, store: str, partition: int, offset: int, sst: Path
) -> SnapshotManifest:
    """Upload ``sst`` as the snapshot of ``store``'s ``partition`` at ``offset`` and commit its
    manifest (the last write, which makes it visible)."""
    manifest = SnapshotManifest(
        snapshot_id=new_snapshot_id(),
        application_id=app_id,
        store=store,
        changelog_topic=f"{app_id}-{store}-changelog",
        partition=partition,
        offset=offset,
        record_count=1,
        checksum=file_checksum(sst),
        size_bytes=sst.stat().st_size,
        created_at_ms=int(time.time() * 1000),
    )
    catalog.upload_sst(manifest, sst)
    catalog.commit(manifest)
    return manifest
