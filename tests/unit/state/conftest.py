"""Fixtures of the state store tests: a fake task context, and stores built on both backends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from platform_streams.processor.record import RecordMetadata
from platform_streams.processor.task_id import TaskId
from platform_streams.state import ProcessorStateManager, StateStore
from platform_streams.state.store_context import RestoreCallback, StateStoreContext

BACKENDS = ["memory", "rocksdb"]


class FakeContext(StateStoreContext):
    """A task context that records what stores ask of it (the ABC implemented for tests)."""

    def __init__(
        self,
        state_dir: Path,
        *,
        application_id: str = "app",
        task_id: TaskId = TaskId(0, 0),
        cache_max_bytes: int = 10 * 1024 * 1024,
        manager: ProcessorStateManager | None = None,
    ) -> None:
        self._state_dir = state_dir
        self._application_id = application_id
        self._task_id = task_id
        self._config: Any = SimpleNamespace(statestore_cache_max_bytes=cache_max_bytes)
        self.manager = manager
        self.registered: list[tuple[Any, RestoreCallback, str | None]] = []
        self.logged: list[tuple[str, bytes, bytes | None, int]] = []
        self.stream_time = 0

    @property
    def application_id(self) -> str:
        return self._application_id

    @property
    def task_id(self) -> TaskId:
        return self._task_id

    @property
    def config(self) -> Any:
        return self._config

    @property
    def state_dir(self) -> Path:
        return self._state_dir

    @property
    def changelog_partition(self) -> int:
        return self._task_id.partition

    def register(self, store: Any, restore_callback: RestoreCallback, changelog_topic: str | None) -> None:
        self.registered.append((store, restore_callback, changelog_topic))
        if self.manager is not None:
            self.manager.register_store(store, restore_callback, changelog_topic, self.changelog_partition)

    def log_change(self, store_name: str, key: bytes, value: bytes | None, timestamp: int) -> None:
        self.logged.append((store_name, key, value, timestamp))

    def record_metadata(self) -> RecordMetadata | None:
        return None

    def current_stream_time_ms(self) -> int:
        return self.stream_time

    def current_system_time_ms(self) -> int:
        return 1_000


@pytest.fixture
def context(tmp_path: Path) -> FakeContext:
    return FakeContext(tmp_path / "0_0")


@pytest.fixture(params=BACKENDS)
def persistent(request: pytest.FixtureRequest) -> bool:
    """Runs a test once per backend: False = in-memory, True = RocksDB."""
    return bool(request.param == "rocksdb")


@pytest.fixture
def open_store(context: FakeContext) -> Iterator[Callable[..., Any]]:
    """Init a built store (or bytes store) with ``context``; closes everything at teardown."""
    opened: list[StateStore] = []

    def _open(store: Any, ctx: FakeContext | None = None) -> Any:
        store.init(ctx or context, store)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        if store.is_open:
            store.close()
