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
