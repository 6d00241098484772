"""Restore listeners behind one (runtime/observer.py) hear every callback: a snapshot restore
reaches each listener (the metrics recorder's snapshot-restore figures stayed 0 whenever a
second restore listener -- the query layer's, an application's -- was attached)."""

from __future__ import annotations

from platform_streams.runtime.observer import GuardReleasingListener, chain_restore_listener
from platform_streams.runtime.store_guard import StoreGuard
from platform_streams.state.restore import StateRestoreListener


class _Snapshots(StateRestoreListener):
    def __init__(self) -> None:
        self.heard: list[tuple[str, tuple[str, int], int, int, float]] = []

    def on_snapshot_restored(
        self, store_name: str, tp: tuple[str, int], snapshot_offset: int, num_records: int, seconds: float
    ) -> None:
        self.heard.append((store_name, tp, snapshot_offset, num_records, seconds))


def test_every_chained_listener_hears_a_snapshot_restore() -> None:
    first, second, third = _Snapshots(), _Snapshots(), _Snapshots()
    chained = chain_restore_listener(chain_restore_listener(first, second), third)
    chained.on_snapshot_restored("counts", ("app-counts-changelog", 2), 41, 7, 0.5)
    expected = [("counts", ("app-counts-changelog", 2), 41, 7, 0.5)]
    assert first.heard == expected
    assert second.heard == expected
    assert third.heard == expected


def test_an_application_listener_behind_the_store_guard_hears_a_snapshot_restore() -> None:
    guard = StoreGuard()
    guard.acquire_for_worker()
    application = _Snapshots()
    try:
        GuardReleasingListener(application, guard).on_snapshot_restored("counts", ("cl", 0), 9, 3, 0.25)
    finally:
        guard.release_for_worker()
    assert application.heard == [("counts", ("cl", 0), 9, 3, 0.25)]
