"""The Java Kafka Streams oracle for the differential tests (built on first use)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.oracle.java_oracle import JavaOracle


@pytest.fixture(scope="session")
def java_oracle() -> Iterator[JavaOracle]:
    """One JVM running Kafka Streams' TopologyTestDriver for the whole session."""
    oracle = JavaOracle()
    try:
        yield oracle
    finally:
        oracle.close()
