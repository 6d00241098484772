"""What the translated Kafka Streams tests share: Kafka's ``MockApiProcessorSupplier`` and config.

Each test module under ``tests/kafka/`` translates one Java test class of apache/kafka
(named in its docstring); each test names the Java method it translates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from platform_streams.processor import Processor, Record
from platform_streams.serde import Serde

#: Kafka's KeyValueTimestamp
KVT = tuple[Any, Any, int]


def streams_config(key_serde: str, value_serde: str, **overrides: Any) -> dict[str, Any]:
    """``StreamsTestUtils.getStreamsConfig(keySerde, valueSerde)`` plus overrides."""
    return {"default_key_serde": key_serde, "default_value_serde": value_serde, **overrides}


class MockApiProcessor(Processor):
    """Records every (key, value, timestamp) it is given (Kafka's ``MockApiProcessor``)."""

    def __init__(self) -> None:
        self.processed: list[KVT] = []

    def process(self, record: Record) -> None:
        self.processed.append((record.key, record.value, record.timestamp))

    def check_and_clear_process_result(self, *expected: KVT) -> None:
        assert self.processed == list(expected), f"{self.processed} != {list(expected)}"
        self.processed.clear()


class MockApiProcessorSupplier:
    """Hands out :class:`MockApiProcessor` s and keeps them (``capturedProcessors(n)``)."""

    def __init__(self) -> None:
        self.processors: list[MockApiProcessor] = []

    def __call__(self) -> MockApiProcessor:
        processor = MockApiProcessor()
        self.processors.append(processor)
        return processor

    def captured_processors(self, expected: int) -> list[MockApiProcessor]:
        assert len(self.processors) == expected, self.processors
        return self.processors


def serdes(key: Serde, value: Serde) -> dict[str, Serde]:
    return {"key_serde": key, "value_serde": value}


EXPECTED_DIR = Path(__file__).parent / "expected"


def expected_description(java_class: str, java_test: str) -> str:
    """Kafka's expected ``describe()`` text for ``java_class.java_test``, kept verbatim (its lines
    are longer than this project's line limit) in ``tests/kafka/expected/``."""
    return (EXPECTED_DIR / f"{java_class}.{java_test}.txt").read_text()


def cases_without_python_equivalent(java_class: str, cases: dict[str, str]) -> Any:
    """One skipped test per Java test method of ``java_class`` that has no equivalent here.

    The issue asks for the untranslated Kafka cases to be tests whose skip reason says why,
    so the list stays visible in every test run (``pytest -rs``) instead of in a docstring.
    ``cases`` maps the Java method name to the reason.
    """
    import pytest

    params = [
        pytest.param(name, id=name, marks=pytest.mark.skip(reason=f"{java_class}.{name}: {why}"))
        for name, why in cases.items()
    ]

    @pytest.mark.parametrize("java_case", params)
    def test_java_case_without_python_equivalent(java_case: str) -> None:
        raise AssertionError(f"{java_class}.{java_case} has no Python equivalent (always skipped)")

    return test_java_case_without_python_equivalent


def refuses_null_argument(call: Any) -> None:
    """Kafka's NullPointerException for a null function or topic (``Objects.requireNonNull``):
    here a TypeError naming the parameter, raised while the topology is built."""
    import pytest

    with pytest.raises(TypeError, match="parameter"):
        call()


#: the store name Kafka's tests pass to be refused (``INVALID_STORE_NAME``)
INVALID_STORE_NAME = "~foo bar~"


def refuses_invalid_name(call: Any) -> None:
    """Kafka's TopologyException for a name that cannot be part of a topic name
    (``Named.validate``): the same here, raised when the name is given."""
    import pytest

    from platform_streams.errors import TopologyError

    with pytest.raises(TopologyError, match="illegal"):
        call()


def task_drops_and_lateness(metrics: Any) -> tuple[float, float, float]:
    """From the scraped task metrics of a driver (``tests.unit.metrics``' ``_watched``):
    dropped records, records whose lateness was recorded, and their average lateness in ms."""
    from tests.unit.metrics.test_metrics_task_hooks import _samples

    samples = _samples(metrics)
    dropped = sum(samples["kafka_streams_task_dropped_records_total"].values())
    lateness_s = sum(samples["kafka_streams_task_record_lateness_seconds_sum"].values())
    count = sum(samples["kafka_streams_task_record_lateness_seconds_count"].values())
    return dropped, count, lateness_s / count * 1000 if count else 0.0


def dropped_records(driver: Any) -> float:
    """The task's dropped-records-total of a TopologyTestDriver (its tasks scraped as a worker's)."""
    from tests.unit.metrics.test_metrics_task_hooks import _samples, _watched

    metrics, _ = _watched(driver, "INFO")
    return sum(_samples(metrics)["kafka_streams_task_dropped_records_total"].values())


#: skip reasons shared by many Java test classes
JAVA_OPTIONAL_NULL = (
    "passes null for an optional Named or Materialized, which Java refuses; in Python None "
    "means 'not given' (the default), so there is nothing to refuse"
)
JAVA_TYPE_VARIANCE = "checks Java generics at compile time; Python has no equivalent"


def pipe_uncommitted(
    driver: Any, topic: str, key_serde: Serde, value_serde: Serde, records: list[KVT]
) -> None:
    """Process ``(key, value, timestamp)`` records without a commit between them, then commit once.

    The Java processor tests drive a processor through a mock context that never commits: its
    caches flush only when the test calls ``store.flush()``, so a cached store forwards one
    update per session for the whole run. Kafka's TopologyTestDriver (and ours) commits after
    every record instead; this stands in for the mock context where such a test checks the
    forwarded results of a cached store.
    """
    task = driver._task_by_topic[topic]
    for key, value, timestamp in records:
        raw_key, raw_value = key_serde.serialize(key), value_serde.serialize(value)
        record = driver._record(topic, raw_key, raw_value, timestamp, None)
        task.add_records((topic, 0), [record])
        while task.process(1_000_000):
            pass
    driver._commit_and_drain()  # nothing pending: the stores flush (``sessionStore.flush()``)


def check_windowed_null_key_skip(caplog: Any, windows: Any, why: str) -> None:
    """``shouldLogAndMeterWhenSkippingNullKey`` of the time and sliding window aggregate tests: a
    record with a null key piped into a windowed aggregation is dropped (dropped-records-total
    1) and Kafka's warning is logged: "Skipping record due to <why>. topic=[topic] partition=[0]
    offset=[0]"."""
    import logging

    from platform_streams.dsl import Consumed, Grouped, Materialized, StreamsBuilder
    from platform_streams.serde import String
    from platform_streams.testing import TopologyTestDriver

    s = String()
    builder = StreamsBuilder()
    builder.stream("topic", Consumed(key_serde=s, value_serde=s)).group_by_key(
        Grouped(key_serde=s, value_serde=s)
    ).windowed_by(windows).aggregate(
        lambda: "0",
        lambda k, v, agg: f"{agg}+{v}",
        Materialized.as_("topic1-Canonicalized").with_value_serde(s),
    )
    config = streams_config("string", "string")
    with caplog.at_level(logging.WARNING), TopologyTestDriver(builder.build(), config) as driver:
        driver.create_input_topic("topic", s, s).pipe_input(None, "1", 0)
        assert dropped_records(driver) == 1
    assert f"Skipping record due to {why}. topic=[topic] partition=[0] offset=[0]" in caplog.messages
