"""State TTL against Kafka Streams, translated in spirit.

Kafka Streams has no state TTL; its users write one with a punctuator. The Java side is that
scenario written with the Processor API (``TtlCount.java`` in tools/kafka-streams-oracle:
a count in a timestamped store; an entry whose timestamp + ttl is at most the stream time
reads as absent; a STREAM_TIME punctuator every ``sweep`` ms deletes expired entries and
forwards a tombstone stamped with the punctuation time). The Python side is the DSL's
``group_by_key().count(Materialized.as_("counts").with_ttl(ttl, sweep))``, uncached so that
each update leaves at once as the processor's ``forward`` does. Both run in their own
TopologyTestDriver; the output records (key, value, timestamp, in order) must be identical.

Store contents are not compared: a record older than stream time - ttl writes an entry
that is already expired, which Java's store holds until the next sweep while
platform_streams' reads show it absent (the output, which both sides agree on, shows its
count and its tombstone).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from platform_streams.dsl import Consumed, Materialized, Produced, StreamsBuilder
from platform_streams.serde import Bytes, Long, String
from platform_streams.testing import TopologyTestDriver
from tests.oracle.cases import _steps
from tests.oracle.catalogue import Entry
from tests.oracle.java_oracle import JavaOracle

pytestmark = [pytest.mark.oracle, pytest.mark.kafka_side]

S, L, B = String(), Long(), Bytes()
EXAMPLES = int(os.environ.get("ORACLE_TTL_EXAMPLES", "60"))
_SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None


def _python(params: dict[str, int], steps: list[list[Any]]) -> list[list[Any]]:
    builder = StreamsBuilder()
    materialized = Materialized.as_("counts").with_ttl(params["ttl"], sweep_interval=params["sweep"])
    (
        builder.stream("in", Consumed(key_serde=S, value_serde=S))
        .group_by_key()
        .count(materialized=materialized.with_caching_disabled())
        .to_stream()
        .to("out", Produced(key_serde=S, value_serde=L))
    )
    rows: list[list[Any]] = []
    state_dir = Path(tempfile.mkdtemp(prefix="ps-ttl-oracle-", dir=_SCRATCH))
    config = {"default_key_serde": "string", "default_value_serde": "string", "state_dir": state_dir}
    try:
        with TopologyTestDriver(builder.build(), config, initial_wall_clock_ms=0) as driver:
            topic = driver.create_input_topic("in", S, S)
            out = driver.create_output_topic("out", B, B)
            for index, step in enumerate(steps):
                if step[0] == "a":
                    driver.advance_wall_clock_time(step[1])
                else:
                    topic.pipe_input(step[2], step[3], step[4])
                written = out.read_records_to_list()
                rows.extend([_hex(r.key), _hex(r.value), r.timestamp, index] for r in written)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    return rows


def _hex(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


def _java(oracle: JavaOracle, params: dict[str, int], steps: list[list[Any]]) -> list[list[Any]]:
    answer = oracle.run({"topology": "ttlcount", "params": params, "steps": steps, "store": None})
    assert answer.get("ok"), answer
    rows: list[list[Any]] = answer["out"]
    return rows


def _decoded(rows: list[list[Any]]) -> list[tuple[str, int | None, int]]:
    return [
        (S.deserialize(bytes.fromhex(k)), None if v is None else L.deserialize(bytes.fromhex(v)), ts)
        for k, v, ts, _ in rows
    ]


def test_expiry_refresh_and_sweep_agree_with_a_java_punctuator(java_oracle: JavaOracle) -> None:
    params = {"ttl": 100, "sweep": 50}
    steps: list[list[Any]] = [
        ["p", "in", "a", "1", 0],
        ["p", "in", "b", "1", 10],
        ["p", "in", "a", "1", 80],  # refreshes a before it expires (at 100)
        ["p", "in", "c", "1", 105],  # b (10) expired at 110; stream time 105: still there
        ["p", "in", "b", "1", 112],  # b expired on read: counts from 1 again
        ["p", "in", "d", "1", 5],  # late and already expired: written, swept next time
        ["p", "in", "c", "1", 150],  # sweep at 150 (every 50): d goes
        ["p", "in", "e", "1", 260],  # sweep at 260: a (80), c (150), b (112) go
    ]
    java = _java(java_oracle, params, steps)
    assert _decoded(java) == [
        ("a", 1, 0), ("b", 1, 10), ("a", 2, 80), ("c", 1, 105), ("b", 1, 112), ("d", 1, 5),
        ("c", 2, 150), ("d", None, 150), ("e", 1, 260), ("a", None, 260), ("b", None, 260), ("c", None, 260),
    ]  # fmt: skip
    assert _python(params, steps) == java


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    ttl=st.integers(1, 60),
    sweep=st.integers(1, 60),
    steps=_steps(Entry(build=lambda name, params: None, inputs=("in",))),  # type: ignore[arg-type,return-value]
)
def test_generated_inputs_agree_with_a_java_punctuator(
    java_oracle: JavaOracle, ttl: int, sweep: int, steps: list[list[Any]]
) -> None:
    params = {"ttl": ttl, "sweep": sweep}
    java = _java(java_oracle, params, steps)
    python = _python(params, steps)
    assert python == java, f"{params} {steps}\njava:   {_decoded(java)}\npython: {_decoded(python)}"
