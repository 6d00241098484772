"""``RestoreReadAhead``: a restore opens the next changelog partition's reader while it reads
the current one (state/restore_read_ahead.py).

Kafka Streams' ``StoreChangelogReader`` restores every changelog partition of a thread's
tasks through one restore consumer assigned all of them, so no partition waits for its own
consumer's start; the read-ahead is our form of it. What must hold: every partition is
restored exactly as without it (the same records, the same offsets), the reader of the next
partition is the one opened ahead, a partition started again from another offset (the
out-of-range reset) gets a fresh reader without losing the one opened ahead, and no reader
is left open.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.errors import BrokerError
from platform_streams.kafka import KafkaAdmin, PartitionReader, TopicSpec
from platform_streams.processor.task_id import TaskId
from platform_streams.serde import String
from platform_streams.state import ChangelogReader, ProcessorStateManager, Stores, changelog_topic_name
from platform_streams.state import restore_read_ahead as read_ahead_module
from platform_streams.state.restore import read_start
from platform_streams.state.restore_read_ahead import RestoreReadAhead
from tests.support.kafka import produce

from .conftest import FakeContext

S = String()


class _Opened:
    """Records every reader the read-ahead opens: where (thread), what, and whether closed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, real: bool) -> None:
        self.opened: list[tuple[str, int, int, str]] = []
        self.confs: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
        self.closed: list[tuple[str, int, int]] = []
        self.fail: set[tuple[str, int]] = set()
        record = self

        class Recording(PartitionReader if real else object):  # type: ignore[misc]
            def __init__(
                self, conf: Any, topic: str, partition: int, start: int, *, timeout_s: float
            ) -> None:
                record.opened.append((topic, partition, start, threading.current_thread().name))
                record.confs.setdefault((topic, partition, start), []).append(dict(conf))
                if (topic, partition) in record.fail:
                    raise BrokerError(f"{topic}-{partition}: cannot open", code="BROKER_NOT_AVAILABLE")
                self.what = (topic, partition, start)
                if real:
                    super().__init__(conf, topic, partition, start, timeout_s=timeout_s)

            def batches(self, **kwargs: Any) -> Iterator[list[Any]]:
                yield from super().batches(**kwargs) if real else ()

            def close(self) -> None:
                record.closed.append(self.what)
                if real:
                    super().close()

        monkeypatch.setattr(read_ahead_module, "PartitionReader", Recording)


def _wait_opened(opened: _Opened, n: int) -> None:
    """Until ``n`` readers were opened (openings ahead run in the background)."""
    deadline = time.monotonic() + 10
    while len(opened.opened) < n and time.monotonic() < deadline:
        time.sleep(0.01)


# -- the plan's logic (no broker: readers stand in) -----------------------------------------


def test_each_take_opens_the_next_partitions_of_the_plan_in_the_background(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened = _Opened(monkeypatch, real=False)
    plan = [("c", 0, -2), ("c", 1, 5), ("d", 0, -2), ("d", 1, -2)]
    ahead = RestoreReadAhead(plan, depth=2)
    first = ahead.take({"x": 1}, "c", 0, -2, timeout_s=1)  # opens c-1 and d-0 ahead
    _wait_opened(opened, 3)
    assert sorted(o[:3] for o in opened.opened) == sorted(plan[:3])
    second = ahead.take({"x": 1}, "c", 1, 5, timeout_s=1)  # d-0 stays, d-1 is opened
    third = ahead.take({"x": 1}, "d", 0, -2, timeout_s=1)
    fourth = ahead.take({"x": 1}, "d", 1, -2, timeout_s=1)
    ahead.close()
    assert sorted(o[:3] for o in opened.opened) == sorted(plan)  # each opened once
    # the first is opened by the caller, the others ahead of their turn, by the read-ahead's threads
    assert opened.opened[0][3] == threading.current_thread().name
    assert all(o[3].startswith("restore-read-ahead") for o in opened.opened[1:])
    assert [r.what for r in (first, second, third, fourth)] == plan
    assert opened.closed == []  # taken readers are the caller's to close


def test_another_start_offset_or_other_settings_get_a_fresh_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    opened = _Opened(monkeypatch, real=False)
    ahead = RestoreReadAhead([("c", 0, -2), ("c", 1, -2), ("c", 2, -2)], depth=1)
    ahead.take({"iso": "committed"}, "c", 0, -2, timeout_s=1)  # opens c-1 ahead
    # c-0 again from the beginning (an out-of-range reset): fresh, and c-1 stays opened ahead
    ahead.take({"iso": "committed"}, "c", 0, -2, timeout_s=1)
    assert opened.closed == []
    # c-1 with other settings (the read_committed fallback): the one opened ahead is closed
    reader = ahead.take({"iso": "uncommitted"}, "c", 1, -2, timeout_s=1)
    ahead.close()
    assert reader.what == ("c", 1, -2)
    # (openings ahead run in the background: compared without their order)
    got = sorted(o[:3] for o in opened.opened)
    # c-2 is opened ahead with the new settings, unless close() dropped its opening first
    opened_c2 = [("c", 2, -2)] if ("c", 2, -2) in got else []
    assert got == sorted([("c", 0, -2), ("c", 1, -2), ("c", 0, -2), ("c", 1, -2), *opened_c2])
    # closed: the c-1 opened ahead with the old settings, and c-2 (if opened) never taken
    assert sorted(opened.closed) == [("c", 1, -2), *opened_c2]


def test_a_reader_opened_ahead_at_another_start_offset_is_closed_not_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened = _Opened(monkeypatch, real=False)
    ahead = RestoreReadAhead([("c", 0, -2), ("c", 1, -2)], depth=1)
    ahead.take({}, "c", 0, -2, timeout_s=1)  # opens c-1 from the beginning, ahead
    reader = ahead.take({}, "c", 1, 500, timeout_s=1)  # c-1's start moved (a retry, a snapshot)
    ahead.close()
    assert reader.what == ("c", 1, 500)
    # the one opened ahead at -2 is closed, or was dropped before its opening started
    at_start = [("c", 1, -2)] if ("c", 1, -2) in [o[:3] for o in opened.opened] else []
    assert sorted(o[:3] for o in opened.opened) == [("c", 0, -2), *at_start, ("c", 1, 500)]
    assert opened.closed == at_start


def test_a_partition_taken_once_is_not_opened_ahead_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task's restore retried: its partitions restart where the last attempt stopped, which
    the plan's start offsets do not know."""
    opened = _Opened(monkeypatch, real=False)
    ahead = RestoreReadAhead([("c", 0, -2), ("c", 1, -2), ("c", 2, -2)], depth=2)
    ahead.take({}, "c", 0, -2, timeout_s=1)  # opens c-1, c-2
    ahead.take({}, "c", 1, -2, timeout_s=1)
    ahead.take({}, "c", 0, 40, timeout_s=1)  # the retry: c-1 is not opened again at -2
    ahead.take({}, "c", 1, 30, timeout_s=1)
    ahead.take({}, "c", 2, -2, timeout_s=1)  # still the one opened ahead
    ahead.close()
    assert [o[:3] for o in opened.opened if o[3].startswith("restore-read-ahead")] in (
        [("c", 1, -2), ("c", 2, -2)],
        [("c", 2, -2), ("c", 1, -2)],
    )
    assert sorted(o[:3] for o in opened.opened) == sorted(
        [("c", 0, -2), ("c", 1, -2), ("c", 2, -2), ("c", 0, 40), ("c", 1, 30)]
    )
    assert opened.closed == []


def test_readers_opened_ahead_bound_their_fetch_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    opened = _Opened(monkeypatch, real=False)
    ahead = RestoreReadAhead([("c", 0, -2), ("c", 1, -2), ("d", 0, -2)], depth=2)
    ahead.take({"bootstrap.servers": "b"}, "c", 0, -2, timeout_s=1)
    _wait_opened(opened, 3)
    ahead.close()
    assert opened.confs[("c", 0, -2)] == [{"bootstrap.servers": "b"}]  # the caller's own reader
    assert opened.confs[("c", 1, -2)] == [{"bootstrap.servers": "b", "queued.max.messages.kbytes": 16384}]
    ahead = RestoreReadAhead([("c", 0, -2), ("c", 1, -2)], depth=1)  # the settings' own bound wins
    ahead.take({"queued.max.messages.kbytes": 1024}, "c", 0, -2, timeout_s=1)
    _wait_opened(opened, 5)
    ahead.close()
    assert opened.confs[("c", 1, -2)][-1] == {"queued.max.messages.kbytes": 1024}


def test_a_take_that_cannot_open_ahead_closes_its_own_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """E.g. a stream thread restoring while the interpreter exits: the executor refuses work."""
    opened = _Opened(monkeypatch, real=False)

    class Refusing:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def submit(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("cannot schedule new futures after interpreter shutdown")

        def shutdown(self, **kwargs: Any) -> None:
            pass

    monkeypatch.setattr(read_ahead_module, "ThreadPoolExecutor", Refusing)
    ahead = RestoreReadAhead([("c", 0, -2), ("c", 1, -2)])
    with pytest.raises(RuntimeError, match="cannot schedule"):
        ahead.take({}, "c", 0, -2, timeout_s=1)
    ahead.close()
    assert opened.closed == [("c", 0, -2)]


def test_depth_must_be_positive() -> None:
    with pytest.raises(ValueError, match="depth must be >= 1, got 0"):
        RestoreReadAhead([], depth=0)


def test_a_failed_opening_ahead_is_retried_by_the_taker_who_gets_its_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened = _Opened(monkeypatch, real=False)
    opened.fail.add(("c", 1))
    ahead = RestoreReadAhead([("c", 0, -2), ("c", 1, -2)])
    ahead.take({}, "c", 0, -2, timeout_s=1)  # c-1 fails in the background: nothing raised here
    with pytest.raises(BrokerError, match="c-1: cannot open"):
        ahead.take({}, "c", 1, -2, timeout_s=1)
    ahead.close()
    assert [o[:3] for o in opened.opened] == [("c", 0, -2), ("c", 1, -2), ("c", 1, -2)]
    assert opened.closed == []  # the failed opening left nothing open; the rest is the caller's


# -- against the broker ---------------------------------------------------------------------


def _manager(tmp_path: Path, app: str, partition: int) -> tuple[ProcessorStateManager, Any]:
    task = TaskId(0, partition)
    manager = ProcessorStateManager(task, tmp_path / str(task), eos=False)
    context = FakeContext(tmp_path / str(task), application_id=app, task_id=task, manager=manager)
    store = Stores.key_value_store_builder(Stores.persistent_key_value_store("kv"), S, S).build()
    store.init(context, store)
    return manager, store


@pytest.mark.broker
@pytest.mark.apache_kafka
def test_tasks_restore_exactly_with_readers_opened_ahead(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = f"read-ahead-{uuid.uuid4().hex[:10]}"
    topic = changelog_topic_name(app, "kv")
    admin.create_topics([TopicSpec(topic, 3, config={"cleanup.policy": "compact"})])
    expected: dict[int, dict[str, str]] = {0: {}, 1: {}, 2: {}}
    records = []
    for i in range(3000):
        partition, key, value = i % 3, f"k{i % 211}", f"v{i}"
        records.append((key, value, partition))
        expected[partition][key] = value
    produce(bootstrap_servers, topic, records)

    # partition 1's checkpoint lies beyond the log (a recreated log): wiped and restored from the start
    stale, _ = _manager(tmp_path, app, 1)
    stale.flush()
    stale.checkpoint({(topic, 1): 10_000})
    stale.close()

    opened = _Opened(monkeypatch, real=True)
    stores = {p: _manager(tmp_path, app, p) for p in range(3)}
    plan = [  # as the runtime plans it: a key-value changelog "from the beginning" is offset 0
        (part.topic, part.partition, read_start(stores[p][0], part))
        for p in range(3)
        for part in stores[p][0].changelog_offsets_to_restore()
    ]
    assert [start for _, _, start in plan] == [0, 10_001, 0]
    ahead = RestoreReadAhead(plan)
    conf = {"bootstrap.servers": bootstrap_servers, "allow.auto.create.topics": False}
    try:
        for p in range(3):
            manager, _ = stores[p]
            assert ChangelogReader(conf, batch_size=300, timeout_s=20, read_ahead=ahead).restore(manager) == {
                "kv": 1000
            }
    finally:
        ahead.close()
    for p in range(3):
        manager, store = stores[p]
        assert dict(store.all()) == expected[p]
        assert manager.changelog_offsets() == {(topic, p): 999}
        manager.close()
    # 0 by the caller; 1 ahead (out of range), then again from the start by the caller; 2 ahead
    by_caller = threading.current_thread().name
    assert sorted(o[:3] for o in opened.opened) == [
        (topic, 0, 0),
        (topic, 1, 0),
        (topic, 1, 10_001),
        (topic, 2, 0),
    ]
    assert {o[:3]: o[3] == by_caller for o in opened.opened} == {
        (topic, 0, 0): True,
        (topic, 1, 10_001): False,
        (topic, 1, 0): True,
        (topic, 2, 0): False,
    }
    assert sorted(opened.closed) == sorted(o[:3] for o in opened.opened)  # every reader closed


@pytest.mark.broker
@pytest.mark.apache_kafka
def test_a_checkpoint_beyond_the_log_end_wipes_the_store_with_the_runtimes_settings(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """The runtime's restore settings name ``auto.offset.reset=earliest``; a restore must still
    see the out-of-range start (Apache Kafka answers OFFSET_OUT_OF_RANGE) and wipe the store,
    not restart at the log's start on top of it (Kafka Streams: ``StoreChangelogReader``
    turns ``InvalidOffsetException`` into ``TaskCorruptedException``, which wipes the store)."""
    app = f"read-ahead-oor-{uuid.uuid4().hex[:10]}"
    topic = changelog_topic_name(app, "kv")
    admin.create_topics([TopicSpec(topic, 1, config={"cleanup.policy": "compact"})])
    produce(bootstrap_servers, topic, [("a", "1", 0), ("b", "2", 0)])
    manager, store = _manager(tmp_path, app, 0)
    store.put("stale", "local only")
    manager.flush()
    manager.checkpoint({(topic, 0): 1000})  # the log was recreated since
    manager.close()

    conf = StreamsConfig(application_id=app, bootstrap_servers=bootstrap_servers).restore_consumer_configs()
    assert conf["auto.offset.reset"] == "earliest"
    manager, store = _manager(tmp_path, app, 0)
    assert manager.changelog_offsets_to_restore()[0].start_offset == 1001
    assert ChangelogReader(conf, timeout_s=20).restore(manager) == {"kv": 2}
    assert dict(store.all()) == {"a": "1", "b": "2"}
    manager.close()
