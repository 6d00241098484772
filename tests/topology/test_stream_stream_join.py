"""Windowed KStream-KStream joins through the TopologyTestDriver (Kafka Streams 3.x semantics).

Inner joins emit each match at once, stamped with the larger timestamp. Left and outer
joins (KIP-633 factories: no spurious results) emit ``joiner(value, None)`` /
``joiner(None, value)`` only for records that never found a match, once their window has
closed in stream time (``t + after + grace`` for left records, ``t + before + grace`` for
right ones); out-of-order records already past their window are emitted at once.
"""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams.dsl import Consumed, Produced, StreamJoined, StreamsBuilder
from platform_streams.dsl.windows import JoinWindows
from platform_streams.errors import TopologyError
from platform_streams.serde import String
from platform_streams.testing import TopologyTestDriver
from platform_streams.topology import Topology

S = String()
CONSUMED = Consumed(key_serde=S, value_serde=S)


def _joined(left: Any, right: Any) -> str:
    return f"{left}+{right}"


def _topology(
    kind: str,
    windows: JoinWindows,
    stream_joined: StreamJoined | None = None,
    joiner: Any = _joined,
) -> Topology:
    builder = StreamsBuilder()
    left = builder.stream("left", CONSUMED)
    right = builder.stream("right", CONSUMED)
    method = {"inner": left.join, "left": left.left_join, "outer": left.outer_join}[kind]
    args = (right, joiner, windows) if stream_joined is None else (right, joiner, windows, stream_joined)
    method(*args).to("out", Produced(key_serde=S, value_serde=S))
    return builder.build()


class _Pipes:
    def __init__(self, driver: TopologyTestDriver) -> None:
        self.left = driver.create_input_topic("left", S, S)
        self.right = driver.create_input_topic("right", S, S)
        self.out = driver.create_output_topic("out", S, S)

    def read(self) -> list[tuple[Any, Any, int]]:
        return [(r.key, r.value, r.timestamp) for r in self.out.read_records_to_list()]


# ---------------------------------------------------------------------------- inner


def test_inner_join_emits_matches_within_the_window_with_the_larger_timestamp() -> None:
    with TopologyTestDriver(_topology("inner", JoinWindows.of_time_difference_with_no_grace(10))) as driver:
        io = _Pipes(driver)
        io.left.pipe_input("a", "A", 0)
        assert io.read() == []
        io.right.pipe_input("a", "a", 5)
        assert io.read() == [("a", "A+a", 5)]
        io.right.pipe_input("a", "b", 20)  # 20 - 0 > 10: no match
        io.right.pipe_input("z", "z", 21)  # other key
        assert io.read() == []
        io.left.pipe_input("a", "B", 15)  # joins a@5 (10 before) and b@20 (5 after)
        assert io.read() == [("a", "B+a", 15), ("a", "B+b", 20)]
        this_store = driver.get_window_store("KSTREAM-JOINTHIS-0000000004-store")
        assert list(this_store.fetch("a", 0, 100)) == [(0, "A"), (15, "B")]
        other_store = driver.get_window_store("KSTREAM-JOINOTHER-0000000005-store")
        assert list(other_store.fetch("a", 0, 100)) == [(5, "a"), (20, "b")]


def test_inner_join_keeps_duplicates_and_honours_asymmetric_windows() -> None:
    # a left record at t joins right records in [t, t + 10]
    windows = JoinWindows.of_time_difference_with_no_grace(0).after(10)
    with TopologyTestDriver(_topology("inner", windows)) as driver:
        io = _Pipes(driver)
        io.left.pipe_input("a", "A", 10)
        io.right.pipe_input("a", "x", 5)  # before the left record: outside
        io.right.pipe_input("a", "y", 15)
        io.right.pipe_input("a", "y2", 15)  # same key and time: both kept
        io.right.pipe_input("a", "z", 21)  # after t + 10
        assert io.read() == [("a", "A+y", 15), ("a", "A+y2", 15)]
        io.left.pipe_input("a", "B", 12)
        assert io.read() == [("a", "B+y", 15), ("a", "B+y2", 15), ("a", "B+z", 21)]


def test_inner_join_drops_null_keys_and_values_and_joins_with_key() -> None:
    windows = JoinWindows.of_time_difference_with_no_grace(10)
    with TopologyTestDriver(
        _topology("inner", windows, joiner=lambda k, left, right: f"{k}:{left}+{right}")
    ) as driver:
        io = _Pipes(driver)
        io.left.pipe_input(None, "N", 1)
        io.left.pipe_input("a", None, 1)
        io.right.pipe_input("a", "a", 2)
        assert io.read() == []
        io.left.pipe_input("a", "A", 3)
        assert io.read() == [("a", "a:A+a", 3)]
        assert sum(task.context.dropped_records for task in driver._tasks) == 2


# ---------------------------------------------------------------------------- left


def test_left_join_emits_unmatched_records_only_when_their_window_closes() -> None:
    with TopologyTestDriver(_topology("left", JoinWindows.of_time_difference_with_no_grace(10))) as driver:
        io = _Pipes(driver)
        io.left.pipe_input("a", "A", 0)
        io.right.pipe_input("b", "x", 1)  # unmatched right records never come out of a left join
        io.left.pipe_input("c", "C", 3)
        assert io.read() == []  # no spurious "A+None": a match may still arrive
        io.right.pipe_input("a", "a", 5)
        assert io.read() == [("a", "A+a", 5)]
        io.left.pipe_input("d", "D", 20)  # stream time 20: C's window (3 + 10) has closed
        assert io.read() == [("c", "C+None", 3)]
        io.left.pipe_input("e", "E", 30)  # D's window closes at 30 + ... not yet (20 + 10 >= 30)
        assert io.read() == []
        io.left.pipe_input("e", "E2", 31)
        assert io.read() == [("d", "D+None", 20)]
        io.left.pipe_input("f", "F", 2)  # out of order and past its window (2 + 10 < 31): at once
        assert io.read() == [("f", "F+None", 2)]
        assert driver.get_key_value_store("KSTREAM-OUTERSHARED-0000000004-store") is not None


def test_left_join_grace_keeps_windows_open_for_late_matches() -> None:
    with TopologyTestDriver(_topology("left", JoinWindows.of_time_difference_and_grace(10, 5))) as driver:
        io = _Pipes(driver)
        io.left.pipe_input("a", "A", 0)
        io.left.pipe_input("b", "B", 12)  # A's window closes at 0 + 10 + 5 = 15
        io.right.pipe_input("a", "a", 9)  # out of order, within A's window
        assert io.read() == [("a", "A+a", 9)]
        io.left.pipe_input("c", "C", 16)
        assert io.read() == []
        io.left.pipe_input("d", "D", 40)
        assert io.read() == [("b", "B+None", 12), ("c", "C+None", 16)]


def test_left_join_forwards_null_key_records_at_once() -> None:
    # KIP-962: a left record without a key can never match; it is emitted unjoined
    with TopologyTestDriver(_topology("left", JoinWindows.of_time_difference_with_no_grace(10))) as driver:
        io = _Pipes(driver)
        io.left.pipe_input(None, "N", 5)
        assert io.read() == [(None, "N+None", 5)]


# ---------------------------------------------------------------------------- outer


def test_outer_join_emits_unmatched_records_of_both_sides_after_their_windows() -> None:
    windows = JoinWindows.of_time_difference_with_no_grace(10).before(3)
    with TopologyTestDriver(_topology("outer", windows)) as driver:
        io = _Pipes(driver)
        io.left.pipe_input("a", "A", 0)
        io.right.pipe_input("b", "b", 2)
        io.right.pipe_input("a", "a", 4)
        assert io.read() == [("a", "A+a", 4)]
        io.left.pipe_input("z", "Z", 14)
        # right b@2 waits "before" (3): closed at 14; a left record would wait "after" (10)
        assert io.read() == [("b", "None+b", 2)]
        io.right.pipe_input("z", "zz", 20)
        assert io.read() == [("z", "Z+zz", 20)]
        io.left.pipe_input("q", "Q", 50)
        assert io.read() == []  # Z was matched: no "Z+None"


def test_outer_join_processor_and_store_names() -> None:
    text = str(_topology("outer", JoinWindows.of_time_difference_with_no_grace(10)).describe())
    assert "Processor: KSTREAM-WINDOWED-0000000002 (stores: [KSTREAM-OUTERTHIS-0000000004-store])" in text
    assert (
        "Processor: KSTREAM-OUTERTHIS-0000000004 (stores: "
        "[KSTREAM-OUTEROTHER-0000000005-store, KSTREAM-OUTERSHARED-0000000004-store])"
    ) in text
    assert "Processor: KSTREAM-MERGE-0000000006 (stores: [])" in text
    left_text = str(_topology("left", JoinWindows.of_time_difference_with_no_grace(10)).describe())
    assert "Processor: KSTREAM-JOINTHIS-0000000004" in left_text
    assert "Processor: KSTREAM-OUTEROTHER-0000000005" in left_text


def test_stream_joined_names_processors_and_stores() -> None:
    sj = StreamJoined(name="j", store_name="s")
    text = str(_topology("left", JoinWindows.of_time_difference_with_no_grace(10), sj).describe())
    for expected in (
        "Processor: j-this-windowed (stores: [s-this-join-store])",
        "Processor: j-other-windowed (stores: [s-outer-other-join-store])",
        "Processor: j-this-join (stores: [s-left-shared-join-store, s-outer-other-join-store])",
        "Processor: j-outer-other-join (stores: [s-this-join-store, s-left-shared-join-store])",
        "Processor: j-merge (stores: [])",
    ):
        assert expected in text


# ---------------------------------------------------------------------------- topology


def test_key_changing_sides_are_repartitioned_and_copartitioned() -> None:
    builder = StreamsBuilder()
    left = builder.stream("left", CONSUMED).select_key(lambda k, v: v[0])
    right = builder.stream("right", CONSUMED)
    # select_key drops the key serde: StreamJoined gives it back for the repartition topic
    left.join(right, _joined, JoinWindows.of_time_difference_with_no_grace(10), StreamJoined(key_serde=S)).to(
        "out", Produced(key_serde=S, value_serde=S)
    )
    topology = builder.build()
    assert frozenset({"KSTREAM-KEY-SELECT-0000000001-repartition", "right"}) in topology.copartition_groups
    with TopologyTestDriver(topology) as driver:
        io = _Pipes(driver)
        io.left.pipe_input("ignored", "xyz", 1)
        io.right.pipe_input("x", "r", 2)
        assert io.read() == [("x", "xyz+r", 2)]


def test_windowed_join_needs_a_stream_on_the_other_side() -> None:
    builder = StreamsBuilder()
    left = builder.stream("left", CONSUMED)
    with pytest.raises(TopologyError, match="KStream"):
        left.join(object(), _joined, JoinWindows.of_time_difference_with_no_grace(10))
