"""``ChangelogReader`` against the real broker: replay to the log end, resume after a
checkpoint, transactions (non-dense offsets), the record filter hook, an out-of-range
checkpoint."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from platform_streams.errors import BrokerError
from platform_streams.kafka import KafkaAdmin, TopicSpec, create_producer
from platform_streams.processor.task_id import TaskId
from platform_streams.serde import String
from platform_streams.state import (
    FROM_BEGINNING,
    ChangelogReader,
    ProcessorStateManager,
    StateRestoreListener,
    Stores,
    changelog_topic_name,
)
from platform_streams.state.restore_read_ahead import RestoreReadAhead
from tests.support.kafka import produce

from .conftest import FakeContext

pytestmark = pytest.mark.broker

PARTITION = 1
S = String()


class Recorder(StateRestoreListener):
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def on_restore_start(
        self, store_name: str, tp: tuple[str, int], start_offset: int, end: int | None
    ) -> None:
        self.events.append(("start", store_name, tp, start_offset))

    def on_batch_restored(self, store_name: str, tp: tuple[str, int], batch_end_offset: int, n: int) -> None:
        self.events.append(("batch", store_name, batch_end_offset, n))

    def on_restore_end(self, store_name: str, tp: tuple[str, int], total: int) -> None:
        self.events.append(("end", store_name, total))


def _app(admin: KafkaAdmin) -> tuple[str, str]:
    app = f"restore-{uuid.uuid4().hex[:10]}"
    topic = changelog_topic_name(app, "kv")
    admin.create_topics([TopicSpec(topic, 3, config={"cleanup.policy": "compact"})])
    return app, topic


def _open(task_dir: Path, app: str, *, eos: bool = False) -> tuple[ProcessorStateManager, Any]:
    manager = ProcessorStateManager(TaskId(0, PARTITION), task_dir, eos=eos)
    context = FakeContext(task_dir, application_id=app, task_id=TaskId(0, PARTITION), manager=manager)
    store = Stores.key_value_store_builder(Stores.persistent_key_value_store("kv"), S, S).build()
    store.init(context, store)
    return manager, store


def _conf(bootstrap: str, *, eos: bool = False) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "isolation.level": "read_committed" if eos else "read_uncommitted",
        "allow.auto.create.topics": False,
    }


def test_restore_to_log_end_then_resume_from_checkpoint(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    app, topic = _app(admin)
    expected: dict[str, str] = {}
    records: list[tuple[str, str | None, int]] = []
    for i in range(2500):
        key = f"k{i % 300}"
        value = None if i % 17 == 0 else f"v{i}"
        records.append((key, value, PARTITION))
        if value is None:
            expected.pop(key, None)
        else:
            expected[key] = value
    produce(bootstrap_servers, topic, records)
    produce(bootstrap_servers, topic, [("other", "partition", 0)])  # must not leak in

    task_dir = tmp_path / f"0_{PARTITION}"
    manager, store = _open(task_dir, app)
    listener = Recorder()
    reader = ChangelogReader(_conf(bootstrap_servers), batch_size=400, listener=listener)
    assert reader.restore(manager) == {"kv": 2500}
    assert dict(store.all()) == expected
    assert listener.events[0] == ("start", "kv", (topic, PARTITION), FROM_BEGINNING)
    assert listener.events[-1] == ("end", "kv", 2500)
    assert sum(e[3] for e in listener.events if e[0] == "batch") == 2500
    assert manager.changelog_offsets() == {(topic, PARTITION): 2499}
    manager.flush()
    manager.checkpoint({})
    manager.close()

    produce(bootstrap_servers, topic, [("k1", "late", PARTITION), ("new", "x", PARTITION)])
    manager, store = _open(task_dir, app)
    assert manager.changelog_offsets_to_restore()[0].start_offset == 2500
    assert reader.restore(manager) == {"kv": 2}
    assert store.get("k1") == "late" and store.get("new") == "x"
    assert store.get("k2") == expected["k2"]
    manager.close()


def test_transactions_make_offsets_sparse(bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path) -> None:
    """Commit markers take offsets: restore must count records, not offsets, and still end.

    (Aborted transactions are left out: Tansu hands records of a transaction aborted
    after they were sent to read_committed consumers, unlike Kafka.)
    """
    app, topic = _app(admin)
    producer = create_producer(
        {"bootstrap.servers": bootstrap_servers, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"}
    )
    producer.init_transactions(30)
    for batch in [range(0, 10), range(10, 20)]:
        producer.begin_transaction()
        for i in batch:
            producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=PARTITION)
        producer.flush(30)
        producer.commit_transaction(30)

    manager, store = _open(tmp_path / f"0_{PARTITION}", app, eos=True)
    counts = ChangelogReader(_conf(bootstrap_servers, eos=True)).restore(manager)
    assert counts == {"kv": 20}
    assert sorted(k for k, _ in store.all()) == sorted(f"k{i}" for i in range(20))
    assert manager.changelog_offsets()[(topic, PARTITION)] == 20  # offset 10 is a commit marker
    manager.close()


def test_record_filter_skips_but_advances(bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path) -> None:
    app, topic = _app(admin)
    produce(bootstrap_servers, topic, [("a", "1", PARTITION), ("b", "2", PARTITION)])
    produce(bootstrap_servers, topic, [("c", "3", PARTITION)], headers=[("__ps_src", b"zombie")])

    def keep(msg: Any) -> bool:
        return not any(name == "__ps_src" and value == b"zombie" for name, value in msg.headers() or [])

    manager, store = _open(tmp_path / f"0_{PARTITION}", app)
    assert ChangelogReader(_conf(bootstrap_servers), record_filter=keep).restore(manager) == {"kv": 2}
    assert dict(store.all()) == {"a": "1", "b": "2"}
    assert manager.changelog_offsets() == {(topic, PARTITION): 2}
    manager.close()


def test_checkpoint_beyond_log_end_wipes_and_restores(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    app, topic = _app(admin)
    produce(bootstrap_servers, topic, [("a", "1", PARTITION), ("b", "2", PARTITION)])
    task_dir = tmp_path / f"0_{PARTITION}"
    manager, store = _open(task_dir, app)
    store.put("stale", "local only")
    manager.flush()
    manager.checkpoint({(topic, PARTITION): 1000})  # the log was recreated since
    manager.close()

    manager, store = _open(task_dir, app)
    assert manager.changelog_offsets_to_restore()[0].start_offset == 1001
    assert ChangelogReader(_conf(bootstrap_servers), timeout_s=20).restore(manager) == {"kv": 2}
    assert dict(store.all()) == {"a": "1", "b": "2"}
    manager.close()


def test_empty_changelog(bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path) -> None:
    app, _ = _app(admin)
    manager, store = _open(tmp_path / f"0_{PARTITION}", app)
    assert ChangelogReader(_conf(bootstrap_servers)).restore(manager) == {"kv": 0}
    assert list(store.all()) == []
    assert manager.changelog_offsets() == {}
    manager.close()


class _CountingReadAhead(RestoreReadAhead):
    """A read-ahead that counts the readers it is asked for."""

    def __init__(self) -> None:
        super().__init__([])
        self.taken: list[tuple[str, int, int]] = []

    def take(self, conf: Any, topic: str, partition: int, start_offset: int, *, timeout_s: float) -> Any:
        self.taken.append((topic, partition, start_offset))
        return super().take(conf, topic, partition, start_offset, timeout_s=timeout_s)


def test_known_empty_changelog_opens_no_reader(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """A partition the runtime found empty (``known_empty``) restored from the beginning opens
    no reader, and the listener hears start and end as Kafka Streams' StoreChangelogReader
    tells it of a changelog with end offset 0 (``hasRestoredToEnd``)."""
    app, topic = _app(admin)
    manager, store = _open(tmp_path / f"0_{PARTITION}", app)
    listener, ahead = Recorder(), _CountingReadAhead()
    reader = ChangelogReader(
        _conf(bootstrap_servers), listener=listener, read_ahead=ahead, known_empty={(topic, PARTITION)}
    )
    assert reader.restore(manager) == {"kv": 0}
    assert ahead.taken == []
    assert listener.events == [("start", "kv", (topic, PARTITION), FROM_BEGINNING), ("end", "kv", 0)]
    assert list(store.all()) == []
    assert manager.changelog_offsets() == {}
    manager.close()


def test_known_empty_changelog_with_a_stale_checkpoint_still_wipes(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """``known_empty`` skips only a restore from the beginning: a checkpoint into an empty
    changelog (the log was recreated) is read, found beyond the end, and the store wiped."""
    app, topic = _app(admin)
    task_dir = tmp_path / f"0_{PARTITION}"
    manager, store = _open(task_dir, app)
    store.put("stale", "local only")
    manager.flush()
    manager.checkpoint({(topic, PARTITION): 1000})
    manager.close()

    manager, store = _open(task_dir, app)
    ahead = _CountingReadAhead()
    reader = ChangelogReader(
        _conf(bootstrap_servers), timeout_s=20, read_ahead=ahead, known_empty={(topic, PARTITION)}
    )
    assert reader.restore(manager) == {"kv": 0}
    assert ahead.taken == [(topic, PARTITION, 1001)]
    assert list(store.all()) == []
    manager.close()


def _truncated_changelog(admin: KafkaAdmin, bootstrap: str) -> tuple[str, str]:
    """A changelog holding a:1 b:2 a:3 c:4 (offsets 0-3) with the records below 2 deleted."""
    if not admin.supports("delete_records"):
        pytest.skip("the broker has no DeleteRecords: its changelogs cannot be truncated")
    app = f"restore-{uuid.uuid4().hex[:10]}"
    topic = changelog_topic_name(app, "kv")
    policy = {"cleanup.policy": "compact,delete", "retention.ms": "-1", "retention.bytes": "-1"}
    admin.create_topics([TopicSpec(topic, 3, config=policy)])
    produce(bootstrap, topic, [("a", "1", PARTITION), ("b", "2", PARTITION), ("a", "3", PARTITION),
                               ("c", "4", PARTITION)])  # fmt: skip
    admin.delete_records({(topic, PARTITION): 2})
    return app, topic


@pytest.mark.apache_kafka
def test_key_value_changelog_truncated_below_its_start_is_never_replayed_from_there(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """A key-value changelog only loses records to DeleteRecords (it is compact-only): a restore
    "from the beginning" reads from offset 0, so a truncated log is refused (CHANGELOG_TRUNCATED)
    unless a snapshot re-seeds the store -- never rebuilt from what is left (b would be lost)."""
    app, _ = _truncated_changelog(admin, bootstrap_servers)
    manager, store = _open(tmp_path / f"0_{PARTITION}", app)
    with pytest.raises(BrokerError) as refused:
        ChangelogReader(_conf(bootstrap_servers), timeout_s=20).restore(manager)
    assert refused.value.code == "CHANGELOG_TRUNCATED", refused.value
    assert list(store.all()) == []

    seeded: list[int] = []

    def reseed(manager: ProcessorStateManager, part: Any) -> int:
        # the snapshot of offsets 0-1 a worker would ingest
        manager.restore("kv", [(b"a", b"1"), (b"b", b"2")], last_offset=1)
        seeded.append(part.start_offset)
        return 2

    reader = ChangelogReader(_conf(bootstrap_servers), timeout_s=20, reseed=reseed)
    assert reader.restore(manager) == {"kv": 2}
    assert seeded == [FROM_BEGINNING]
    assert dict(store.all()) == {"a": "3", "b": "2", "c": "4"}
    manager.close()

    # a re-seed that finds no snapshot: refused as well
    manager, store = _open(tmp_path / "again" / f"0_{PARTITION}", app)
    with pytest.raises(BrokerError) as refused:
        ChangelogReader(_conf(bootstrap_servers), timeout_s=20, reseed=lambda m, p: FROM_BEGINNING).restore(
            manager
        )
    assert refused.value.code == "CHANGELOG_TRUNCATED", refused.value
    manager.close()
