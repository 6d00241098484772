"""Key placement: which source topics a store's key routing depends on, the per-record check
in fused source code, the verdict's persistence, and ``query_metadata_for_key`` saying
"not available" for a store whose keys are not murmur2-placed."""

from __future__ import annotations

import logging
import zlib
from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsBuilder, StreamsConfig
from platform_streams.dsl import Consumed, Grouped, Materialized
from platform_streams.processor import TaskId
from platform_streams.processor.partitioner import PlacementCheck, default_partition
from platform_streams.query.placement import PRODUCER_SETTING, KeyPlacement, store_source_topics
from platform_streams.runtime.tasks.task import StreamTask
from platform_streams.serde import String
from platform_streams.testing.records import DriverRecord
from platform_streams.topology import compile_topology

S = String()
CONSUMED = Consumed(key_serde=S, value_serde=S)
APP = "placed"


def _topology() -> Any:
    """``counts``: keyed as the source; ``by_first``: re-keyed (repartition); ``table``: a source table."""
    builder = StreamsBuilder()
    stream = builder.stream("events", CONSUMED)
    stream.group_by_key().count(materialized=Materialized.as_("counts"))
    stream.group_by(lambda k, v: v[:1], Grouped(key_serde=S, value_serde=S)).count(
        materialized=Materialized.as_("by_first")
    )
    builder.table("users", CONSUMED, Materialized.as_("table"))
    return builder.build()


def test_stores_depend_on_their_external_source_topics_only() -> None:
    plan = compile_topology(_topology())
    topics = store_source_topics(plan, APP)
    assert topics["counts"] == {"events"}
    assert topics["table"] == {"users"}
    assert topics["by_first"] == frozenset(), "behind a repartition topic: always murmur2 (ours)"


def _crc_placed_keys(partitions: int, partition: int, count: int) -> list[bytes]:
    """Keys that consistent_random (CRC32) puts in ``partition`` but murmur2 does not."""
    keys = []
    i = 0
    while len(keys) < count:
        key = f"k{i}".encode()
        if zlib.crc32(key) % partitions == partition and default_partition(key, partitions) != partition:
            keys.append(key)
        i += 1
    return keys


def test_placement_check_hashes_each_key_once_and_reports_misplaced_records() -> None:
    seen: list[tuple[str, int]] = []
    check = PlacementCheck("events", 1, 4, lambda topic, partition: seen.append((topic, partition)))
    good = next(f"g{i}".encode() for i in range(100) if default_partition(f"g{i}".encode(), 4) == 1)
    check.check(good)
    assert good in check.good and None in check.good
    (bad,) = _crc_placed_keys(4, 1, 1)
    check.check(bad)
    check.check(bad)
    assert bad not in check.good and seen == [("events", 1), ("events", 1)]


class _Collector:
    def send(self, *args: Any) -> None:
        pass

    def partition_count(self, topic: str) -> int:
        return 4


def _checked_task(tmp_path: Path) -> tuple[StreamTask, KeyPlacement]:
    """Partition 2's task of the ``counts`` store, its ``events`` source checked (4 partitions)."""
    plan = compile_topology(_topology())
    config = StreamsConfig(application_id=APP, bootstrap_servers="x:1", state_dir=tmp_path)
    placement = KeyPlacement(plan, APP, tmp_path, lambda: {"events": 4, "users": 4})
    sub = plan.subtopology_of_store("counts")
    task = StreamTask(
        TaskId(sub.id, 2),
        plan,
        sub,
        config=config,
        collector=_Collector(),
        clock_ms=lambda: 0,
        task_dir=tmp_path / "task",
        key_placement=placement,
    )
    task.initialize_stores()
    task.initialize_processors()
    return task, placement


def test_fused_source_checks_raw_keys_of_checked_topics(tmp_path: Path, caplog: Any) -> None:
    plan = compile_topology(_topology())
    task, placement = _checked_task(tmp_path)
    source = task.graph.sources["events"]
    assert "place" in source.__ps_source__  # type: ignore[attr-defined]
    placed = next(f"p{i}".encode() for i in range(100) if default_partition(f"p{i}".encode(), 4) == 2)
    source(DriverRecord("events", 2, 0, placed, b"v", 1, []))
    source(DriverRecord("events", 2, 1, None, b"v", 2, []))
    assert placement.is_routable("counts") and not placement.mismatches
    caplog.set_level(logging.WARNING)
    caplog.clear()  # the null-keyed record above logs Kafka's skip warning; only the mismatches count here
    for offset, key in enumerate(_crc_placed_keys(4, 2, 3), start=2):
        source(DriverRecord("events", 2, offset, key, b"v", offset, []))
    assert placement.mismatches == {"events": 3}
    assert not placement.is_routable("counts")
    assert placement.is_routable("by_first") and placement.is_routable("table")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, "one warning per topic"
    assert "events" in warnings[0] and PRODUCER_SETTING in warnings[0] and "counts" in warnings[0]
    task.close()

    # the verdict survives a restart: a new client with the same state directory knows it
    again = KeyPlacement(plan, APP, tmp_path, lambda: {})
    assert not again.is_routable("counts") and again.misplaced == {"events": "persisted"}
    assert "partitioner=murmur2_random" in again.reason("counts")


def _placed_keys(partitions: int, partition: int, count: int, prefix: str) -> list[bytes]:
    keys = (f"{prefix}{i}".encode() for i in range(100 * count))
    return [key for key in keys if default_partition(key, partitions) == partition][:count]


def test_a_fused_batch_hashes_in_line_and_stops_remembering_keys_that_never_repeat(tmp_path: Path) -> None:
    """The batch form of the check (``compile_batch``): every key not remembered is hashed
    in line, each misplaced record is reported, and remembering placed keys stops after
    batches of only new keys and starts again later (``PlacementCheck.after_batch``)."""
    task, placement = _checked_task(tmp_path)
    assert "murmur2" in task.graph.batches["events"].__ps_source__  # type: ignore[attr-defined]
    check = task.graph._placement_checks["events"]
    offsets = iter(range(1_000_000))

    def batch(keys: list[bytes]) -> None:
        task.add_records(
            ("events", 2), [DriverRecord("events", 2, next(offsets), k, b"v", 1, []) for k in keys]
        )
        assert task.process(len(keys)) == len(keys)

    fresh = _placed_keys(4, 2, 1_000, "new")
    for start in range(0, 800, 200):  # four batches of new keys only
        assert check.remember
        batch(fresh[start : start + 200])
    assert not check.remember and len(check.good) == 801  # the fourth batch was still remembered
    batch(fresh[800:])  # not remembered now: hashed in line
    assert len(check.good) == 801 and placement.is_routable("counts")
    misplaced = _crc_placed_keys(4, 2, 3)
    batch(misplaced + misplaced[:1] + fresh[:5])
    assert placement.mismatches == {"events": 4}, "each misplaced record, also a repeated key"
    for _ in range(63):  # 64 batches after it stopped, remembering starts again
        batch(fresh[:1])
    assert check.remember
    batch(fresh[900:1_000])
    assert set(fresh[900:1_000]) <= check.good
    task.close()


def test_remembering_pays_only_while_keys_repeat() -> None:
    check = PlacementCheck("events", 0, 4, lambda topic, partition: None)
    check.good.update(f"k{i}".encode() for i in range(500))
    check.after_batch(500)  # 500 new keys in 500 records
    check.good.update(f"r{i}".encode() for i in range(10))
    check.after_batch(500)  # then mostly repeats: the streak breaks
    for n in range(3):
        check.good.update(f"n{n}-{i}".encode() for i in range(500))
        check.after_batch(500)
    assert check.remember, "three batches of new keys in a row are not yet four"
    check.after_batch(50)  # too small to say anything: the streak breaks again
    for n in range(4):
        check.good.update(f"m{n}-{i}".encode() for i in range(500))
        check.after_batch(500)
    assert not check.remember
    check.good.update(f"x{i}".encode() for i in range(70_000))
    check.after_batch(500)
    assert check.good == {None}, "the remembered keys are bounded"


def test_tasks_without_stores_fed_by_a_source_get_no_check(tmp_path: Path) -> None:
    builder = StreamsBuilder()
    builder.stream("in", CONSUMED).filter(lambda k, v: True).to("out")
    plan = compile_topology(builder.build())
    placement = KeyPlacement(plan, APP, tmp_path, lambda: {"in": 4})
    assert placement.checked_topics == frozenset()
    assert placement.checks_for(["in"], 0) == {}


def test_verdicts_learnt_from_the_metadata_topic_are_persisted(tmp_path: Path) -> None:
    plan = compile_topology(_topology())
    placement = KeyPlacement(plan, APP, tmp_path, lambda: {})
    published: list[str] = []
    placement.publisher = published.append
    placement.learn("users", "metadata topic")
    assert not placement.is_routable("table") and placement.is_routable("counts")
    assert published == [], "learnt verdicts are not re-published"
    assert KeyPlacement(plan, APP, tmp_path, lambda: {}).misplaced == {"users": "persisted"}


@pytest.mark.parametrize("reason", ["", "why"])
def test_key_query_metadata_not_available_carries_its_reason(reason: str) -> None:
    from platform_streams.query.metadata import KeyQueryMetadata

    meta = KeyQueryMetadata.not_available(reason=reason)
    assert not meta.is_available() and meta.partition == -1
    assert meta.to_dict().get("reason") == (reason or None)
