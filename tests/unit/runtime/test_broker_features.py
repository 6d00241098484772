"""runtime/broker_features.py without a broker: what the purger would delete, and when.

The broker side (DeleteRecords on Apache Kafka, skipped on Tansu) is in
tests/integration/test_apache_kafka.py; here only the bookkeeping Kafka Streams'
``TaskManager.maybePurgeCommittedRecords`` also does: repartition topics only, at most
once per ``repartition.purge.interval.ms``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from platform_streams import StreamsBuilder, StreamsConfig
from platform_streams.dsl import Consumed, Repartitioned
from platform_streams.runtime.broker_features import RepartitionPurger, membership_check_topic
from platform_streams.serde import String
from platform_streams.topology.compiler import compile_topology

S = String()


def _config(tmp_path: Path, **overrides: object) -> StreamsConfig:
    values = {"application_id": "app", "bootstrap_servers": "127.0.0.1:1", "state_dir": tmp_path, **overrides}
    return StreamsConfig(**values)  # type: ignore[arg-type]


def test_the_java_key_sets_the_purge_interval_and_is_validated(tmp_path: Path) -> None:
    props = {"application.id": "a", "bootstrap.servers": "h:1", "repartition.purge.interval.ms": "5000"}
    assert StreamsConfig.from_properties(props).repartition_purge_interval_ms == 5000
    assert _config(tmp_path).repartition_purge_interval_ms == 30_000  # Kafka Streams' default
    with pytest.raises(ValidationError, match="repartition_purge_interval_ms"):
        _config(tmp_path, repartition_purge_interval_ms=-1)


def test_only_repartition_topics_are_purged_and_only_after_the_interval(tmp_path: Path) -> None:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=S, value_serde=S)).select_key(lambda k, v: v).repartition(
        Repartitioned.as_("r")
    ).to("out")
    config = _config(tmp_path, repartition_purge_interval_ms=3_600_000)
    purger = RepartitionPurger(compile_topology(builder.build()), config)
    assert purger.enabled
    purger.after_commit({("app-r-repartition", 0): 10, ("in", 0): 5})  # before the interval: nothing
    assert purger.purged == {}
    stateless = StreamsBuilder()
    stateless.stream("in").to("out")
    assert not RepartitionPurger(compile_topology(stateless.build()), config).enabled


def test_at_least_once_never_needs_membership_checks(tmp_path: Path) -> None:
    # no broker is asked: the checks only guard exactly-once transactions
    assert membership_check_topic(_config(tmp_path), "app-control") is None
