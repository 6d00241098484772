"""Async processors and changelog timestamps: a store written downstream of an async call logs
the change with the timestamp of the record the call completed, as a store written by the
record itself does (Kafka's ChangeLoggingKeyValueBytesStore logs
``recordContext().timestamp()``, the context the completed record is forwarded under)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from platform_streams import StreamsBuilder, StreamsConfig
from platform_streams.dsl import Consumed
from platform_streams.processor import Processor, Record
from platform_streams.processor.record_collector import OutgoingRecord
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.tasks.task import start_task
from platform_streams.serde import String
from platform_streams.state import Stores
from platform_streams.testing.records import DriverRecord
from platform_streams.topology.compiler import compile_topology

S = String()
#: two records of different keys, so that both calls are in flight at once
STAMPED = [(b"a", 100), (b"b", 200)]


class _Put(Processor):
    def init(self, context: Any) -> None:
        self.store = context.get_state_store("kv")

    def process(self, record: Record) -> None:
        self.store.put(record.key, record.value)


class _Changelog:
    def __init__(self) -> None:
        self.logged: list[tuple[bytes | None, int]] = []

    def send(self, *record: *OutgoingRecord) -> None:
        self.logged.append((record[1], record[3]))

    def partition_count(self, topic: str) -> int:
        return 1


def test_a_change_after_an_async_call_carries_its_records_timestamp(tmp_path: Path) -> None:
    builder = StreamsBuilder()
    builder.add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"), S, S))
    builder.stream("in", Consumed(key_serde=S, value_serde=S)).map_values_async(str.upper).process(_Put, "kv")
    config = StreamsConfig(application_id="async-stamp", bootstrap_servers="dummy:9092", state_dir=tmp_path)
    changelog = _Changelog()
    plan = compile_topology(builder.build())
    task = start_task(TaskId(0, 0), plan, tmp_path, {}, config, changelog, lambda: 0)
    task.initialize_processors()
    try:
        records = [DriverRecord("in", 0, i, key, b"v", ts, []) for i, (key, ts) in enumerate(STAMPED)]
        task.add_records(("in", 0), records)
        task.process(10)  # both reach the async node; their calls complete after the second
        while task.complete_in_flight():
            pass
        assert sorted(changelog.logged) == STAMPED
    finally:
        task.close()
