"""Fixtures of the integration tests that need a particular broker feature."""

from __future__ import annotations

import os

import pytest

from platform_streams.config.sources import BOOTSTRAP_ENV
from platform_streams.kafka.streams_group import broker_supports_streams_groups


@pytest.fixture(scope="module")
def streams_bootstrap(request: pytest.FixtureRequest) -> str:
    """A broker that speaks StreamsGroupHeartbeat (KIP-1071): the Apache Kafka node (the
    shared one when ``PLATFORM_STREAMS_BOOTSTRAP`` names it, else the session's), never the
    embedded broker; skipped (with the reason) where the broker has no streams groups."""
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    bootstrap = external or str(request.getfixturevalue("kafka_bootstrap_servers"))
    if not broker_supports_streams_groups(bootstrap):
        pytest.skip(f"{bootstrap} does not speak StreamsGroupHeartbeat (no streams groups)")
    return bootstrap
