"""The per-record shortcuts (performance) behave exactly like the general code.

Each shortcut replaces a call chain on the hot path; these tests pin that the results, and
the errors, are the ones the general path gives.
"""

from __future__ import annotations

from typing import Any

import confluent_kafka as ck
import pytest

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Produced, TimeWindows
from platform_streams.errors import DeserializationError, ProcessorError, SerializationError
from platform_streams.runtime.restore.changelog_filter import CommittedInputFilter
from platform_streams.serde import Bytes, Double, Integer, Json, Long, String
from platform_streams.state.timestamped import ValueAndTimestamp, ValueAndTimestampSerde, value_and_timestamp
from platform_streams.testing import TopologyTestDriver

CONFIG = {"application_id": "hot", "bootstrap_servers": "x:1"}


@pytest.mark.parametrize(
    ("inner", "value"),
    [(Long(), 5), (Long(), -(2**63)), (Double(), 2.5), (Integer(), 7), (Json(), {"a": [1]}), (String(), "x")],
)
def test_timestamped_serde_round_trips_with_the_timestamp_first(inner: Any, value: Any) -> None:
    serde = ValueAndTimestampSerde(inner)
    raw = serde.serialize(ValueAndTimestamp(value, 1234))
    assert raw == (1234).to_bytes(8, "big", signed=True) + inner.serialize(value)
    back = serde.deserialize(raw)
    assert back == (value, 1234) and type(back) is ValueAndTimestamp
    assert back.value == value and back.timestamp == 1234


def test_timestamped_serde_reports_bad_values_through_the_inner_serde() -> None:
    serde = ValueAndTimestampSerde(Long())
    with pytest.raises(SerializationError, match="Long serde cannot encode"):
        serde.serialize(("not a number", 1))
    with pytest.raises(DeserializationError, match="too short"):
        serde.deserialize(b"\x00\x01")
    assert serde.serialize(None) is None and serde.deserialize(None) is None


def test_value_and_timestamp_builds_the_named_tuple() -> None:
    vat = value_and_timestamp("v", 3)
    assert vat == ValueAndTimestamp("v", 3) and vat.value == "v" and vat.timestamp == 3


def _pipe(values: list[Any], *, handler: str = "log_and_continue") -> tuple[list[Any], TopologyTestDriver]:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=Bytes(), value_serde=Json())).map_values(lambda v: v).to(
        "out", Produced(key_serde=Bytes(), value_serde=Json())
    )
    driver = TopologyTestDriver(builder.build(), {**CONFIG, "deserialization_exception_handler": handler})
    topic = driver.create_input_topic("in", Bytes(), Bytes())
    for value in values:
        topic.pipe_input(b"k", value)
    return driver.create_output_topic("out", Bytes(), Json()).read_values_to_list(), driver


def test_fused_json_source_decodes_and_keeps_tombstones() -> None:
    out, _ = _pipe([b'{"a": 1}', None, b"[2]"])
    assert out == [{"a": 1}, None, [2]]


def test_fused_json_source_reports_the_serde_error_for_invalid_json() -> None:
    out, driver = _pipe([b"{bad", b'{"a": 2}'])
    assert out == [{"a": 2}]
    assert driver._tasks[0].records_skipped == 1
    with pytest.raises(DeserializationError, match="Json serde: invalid JSON"):
        _pipe([b"{bad"], handler="log_and_fail")


def test_fused_bytes_sink_passes_bytes_converts_bytearray_and_rejects_str() -> None:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=String(), value_serde=String())).select_key(
        lambda k, v: {"b": b"raw", "ba": bytearray(b"arr"), "s": "text"}[v]
    ).to("out", Produced(key_serde=Bytes(), value_serde=String()))
    driver = TopologyTestDriver(
        builder.build(), {**CONFIG, "production_exception_handler": "log_and_continue"}
    )
    topic = driver.create_input_topic("in", String(), String())
    for value in ("b", "ba", "s"):
        topic.pipe_input("k", value)
    out = driver.create_output_topic("out", Bytes(), String()).read_key_values_to_list()
    assert out == [(b"raw", "b"), (b"arr", "ba")]
    assert type(out[1][0]) is bytes


def _json_sink(values: list[Any], serde: Json, handler: str) -> TopologyTestDriver:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=Bytes(), value_serde=String())).map_values(
        lambda v: {"none": None, "set": {1}, "map": {"b": 1, "a": 2}}[v]
    ).to("out", Produced(key_serde=Bytes(), value_serde=serde))
    driver = TopologyTestDriver(builder.build(), {**CONFIG, "production_exception_handler": handler})
    topic = driver.create_input_topic("in", Bytes(), String())
    for value in values:
        topic.pipe_input(b"k", value)
    return driver


def test_fused_json_sink_encodes_in_c_keeps_tombstones_and_reports_the_serde_error() -> None:
    """The fused sink calls ``orjson.dumps`` itself (Json.fast_serializer); a None value stays a
    tombstone, and a value it cannot encode is encoded again by ``Json.serialize``, whose
    SerializationError reaches the production handler (processor/fusion.py FastSerializer)."""
    driver = _json_sink(["map", "none", "set", "map"], Json(), "log_and_continue")
    out = driver.create_output_topic("out", Bytes(), Bytes()).read_values_to_list()
    assert out == [b'{"b":1,"a":2}', None, b'{"b":1,"a":2}']
    assert "<fused" in driver._tasks[0].graph.sources["in"].__code__.co_filename
    with pytest.raises(ProcessorError, match="SerializationError: Json serde cannot encode set"):
        _json_sink(["set"], Json(), "log_and_fail")


def test_json_sink_with_options_keeps_the_serde_method() -> None:
    assert Json().fast_serializer() is not None
    assert Json(sort_keys=True).fast_serializer() is None
    assert Json(default=str).fast_serializer() is None
    driver = _json_sink(["map"], Json(sort_keys=True), "log_and_fail")
    assert driver.create_output_topic("out", Bytes(), Bytes()).read_values_to_list() == [b'{"a":2,"b":1}']


class _Enveloped(Json):
    """A user's serde: JSON in an envelope (its own ``serialize``/``deserialize``)."""

    def serialize(self, obj: Any) -> bytes | None:
        return None if obj is None else super().serialize({"v": 1, "data": obj})

    def deserialize(self, data: bytes | None) -> Any:
        decoded = super().deserialize(data)
        return None if decoded is None else decoded["data"]


def test_a_json_subclass_with_its_own_codec_keeps_it_in_fused_code() -> None:
    """The C-level shortcuts are Json's own: a subclass overriding ``serialize`` or
    ``deserialize`` is called (a review found the first fast sink serializer skipped it)."""
    assert _Enveloped().fast_serializer() is None and _Enveloped().fast_deserializer() is None
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=Bytes(), value_serde=_Enveloped())).map_values(
        lambda v: {"x": v["x"] + 1}
    ).to("out", Produced(key_serde=Bytes(), value_serde=_Enveloped()))
    driver = TopologyTestDriver(builder.build(), CONFIG)
    driver.create_input_topic("in", Bytes(), Bytes()).pipe_input(b"k", b'{"v":1,"data":{"x":1}}')
    out = driver.create_output_topic("out", Bytes(), Bytes()).read_values_to_list()
    assert out == [b'{"v":1,"data":{"x":2}}']


def _changelog_record(header: bytes | None) -> Any:
    headers = None if header is None else [("__ps_src", header)]
    return ck.Message(
        topic="app-store-changelog", partition=0, offset=1, key=b"k", value=b"v", headers=headers
    )


@pytest.mark.parametrize(
    ("header", "applied"), [(b"9", True), (b"10", False), (b"-1", True), (b"3,4", True), (None, True)]
)
def test_single_input_filter_reads_one_number(header: bytes | None, applied: bool) -> None:
    one = CommittedInputFilter([("in", 0)], {("in", 0): 10})
    assert one(_changelog_record(header)) is applied
    assert one.skipped == (0 if applied else 1)


def test_two_input_filter_still_compares_every_position() -> None:
    two = CommittedInputFilter([("a", 0), ("b", 0)], {("a", 0): 10, ("b", 0): 5})
    assert [two(_changelog_record(h)) for h in (b"9,4", b"9,5", b"3")] == [True, False, True]


@pytest.mark.parametrize(
    "windows",
    [
        TimeWindows.of_size_with_no_grace(10),
        TimeWindows.of_size_with_no_grace(10).advance_by(3),
        TimeWindows.of_size_and_grace(7, 2).advance_by(7),
    ],
)
def test_window_starts_are_the_starts_of_windows_for(windows: TimeWindows) -> None:
    for ts in (0, 1, 6, 9, 10, 11, 29, 1_000_003):
        starts = list(windows.window_starts(ts))
        assert starts == list(windows.windows_for(ts))
        assert all(start <= ts < start + windows.size_ms for start in starts)
