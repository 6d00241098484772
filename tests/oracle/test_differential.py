"""Property: for generated inputs, platform_streams' TopologyTestDriver produces exactly the
records (key, value, timestamp, in order, byte for byte) and final store contents that Java
Kafka Streams' TopologyTestDriver produces for the same topology (tests/oracle/catalogue.py,
tools/kafka-streams-oracle/.../Catalogue.java).

CI runs ``ORACLE_EXAMPLES`` cases (default 200); a soak run sets it higher (docs/oracle.md
records the count). Each distinct mismatch found becomes a fixed case in
test_regressions.py.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.oracle import python_side
from tests.oracle.cases import assert_same, cases
from tests.oracle.java_oracle import JavaOracle

EXAMPLES = int(os.environ.get("ORACLE_EXAMPLES", "200"))
#: Comma-separated catalogue names to restrict a run to (default: the whole catalogue).
NAMES = [name for name in os.environ.get("ORACLE_TOPOLOGIES", "").split(",") if name] or None

pytestmark = pytest.mark.oracle


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases(NAMES))
def test_platform_streams_matches_kafka_streams(java_oracle: JavaOracle, case: dict[str, Any]) -> None:
    assert_same(case, java_oracle.run(case), python_side.run(case))


#: Kafka's internal emit intervals (``StreamsConfig.InternalConfig``) at KafkaStreams' default,
#: 1 s of wall clock, where both drivers put them at 0: the generated wall-clock advances (0.1,
#: 1 and 10 s) then hold emit-final windows and unmatched outer-join records back
EMIT_INTERVALS = {
    "__emit.interval.ms.kstreams.windowed.aggregation__": 1000,
    "__emit.interval.ms.kstreams.outer.join.spurious.results.fix__": 1000,
}
THROTTLED = [f"{kind}_final" for kind in ("tumbling", "hopping", "sliding", "session")] + [
    "ssjoin_left",
    "ssjoin_outer",
]


@settings(
    max_examples=int(os.environ.get("ORACLE_EMIT_INTERVAL_EXAMPLES", "40")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases(THROTTLED))
def test_emit_intervals_match_kafka_streams(java_oracle: JavaOracle, case: dict[str, Any]) -> None:
    """Emit-final windows (time, sliding, session) and left/outer stream-stream joins with both
    emit intervals set: the same output as Kafka's driver with the same settings."""
    case = {**case, "props": EMIT_INTERVALS}
    assert_same(case, java_oracle.run(case), python_side.run(case))
