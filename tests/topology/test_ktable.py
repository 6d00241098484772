"""KTables through the TopologyTestDriver: updates, tombstones, table operators, caching,
materialization rules and the source-topic-changelog optimization (Kafka Streams semantics)."""

from __future__ import annotations

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dsl import Consumed, Materialized, Named, Produced, StreamsBuilder
from platform_streams.serde import Integer, String
from platform_streams.testing import TopologyTestDriver
from platform_streams.topology import Topology, compile_topology

S, INT = String(), Integer()
CONFIG = {"default_key_serde": "string", "default_value_serde": "string"}


def _records(
    driver: TopologyTestDriver, topic: str, value_serde: object = S
) -> list[tuple[object, object, int | None]]:
    out = driver.create_output_topic(topic, S, value_serde)  # type: ignore[arg-type]
    return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def _table_to_out(materialized: Materialized | None) -> Topology:
    builder = StreamsBuilder()
    builder.table("in", materialized=materialized).to_stream().to("out")
    return builder.build()


def test_source_table_upserts_and_tombstones_delete() -> None:
    topology = _table_to_out(Materialized.as_("t").with_caching_disabled())
    with TopologyTestDriver(topology, CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        source.pipe_input("a", "1", 10)
        source.pipe_input("b", "2", 11)
        source.pipe_input("a", "3", 12)
        source.pipe_input("a", None, 13)
        source.pipe_input(None, "ignored", 14)  # null keys are skipped
        assert _records(driver, "out") == [("a", "1", 10), ("b", "2", 11), ("a", "3", 12), ("a", None, 13)]
        store = driver.get_key_value_store("t")
        assert list(store.all()) == [("b", "2")]
        assert store.get("a") is None
        assert store.get_timestamped("b") == ("2", 11)


def test_uncached_delete_of_an_absent_key_is_forwarded_cached_one_is_not() -> None:
    for caching, expected in [(False, [("x", None, 1)]), (True, [])]:
        materialized = Materialized.as_("t") if caching else Materialized.as_("t").with_caching_disabled()
        with TopologyTestDriver(_table_to_out(materialized), CONFIG) as driver:
            driver.create_input_topic("in", S, S).pipe_input("x", None, 1)
            assert _records(driver, "out") == expected


def test_unmaterialized_source_table_has_no_store_but_burns_the_store_index() -> None:
    description = str(_table_to_out(None).describe())
    assert "Source: KSTREAM-SOURCE-0000000001 (topics: [in])" in description
    assert "Processor: KTABLE-SOURCE-0000000002 (stores: [])" in description
    assert "Processor: KTABLE-TOSTREAM-0000000003 (stores: [])" in description
    with TopologyTestDriver(_table_to_out(None), CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        source.pipe_input("a", "1", 1)
        source.pipe_input("a", None, 2)
        assert _records(driver, "out") == [("a", "1", 1), ("a", None, 2)]


def test_named_source_table_and_its_store_names() -> None:
    builder = StreamsBuilder()
    builder.table("in", Consumed(name="users"), Materialized.as_("user-store")).to_stream().to("out")
    description = str(builder.build().describe())
    # Kafka's InternalStreamsBuilder.table (StreamsBuilderTest.shouldUseSpecifiedNameForTableSourceProcessor)
    assert "Source: users-source (topics: [in])" in description
    assert "Processor: users (stores: [user-store])" in description


def test_filter_forwards_tombstones_for_rows_that_fail_the_predicate() -> None:
    """Without old values (nothing downstream needs them) Kafka Streams' KTableFilter emits a
    delete for every update that fails the predicate, even if the key was never in the result."""
    builder = StreamsBuilder()
    (
        builder.table("in", Consumed(value_serde=INT))
        .filter(lambda k, v: v >= 10)
        .to_stream()
        .to("out", Produced(value_serde=INT))
    )
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, INT)
        for key, value in [("a", 5), ("a", 15), ("b", 20), ("a", 7)]:
            source.pipe_input(key, value)
        assert [(k, v) for k, v, _ in _records(driver, "out", INT)] == [
            ("a", None),
            ("a", 15),
            ("b", 20),
            ("a", None),
        ]


def test_materialized_filter_not_and_map_values_keep_their_own_stores() -> None:
    builder = StreamsBuilder()
    table = builder.table("in", Consumed(value_serde=INT))
    small = table.filter_not(lambda k, v: v >= 10, materialized=Materialized.as_("small"))
    doubled = small.map_values(
        lambda v: v * 2, Named.as_("double"), Materialized.as_("doubled").with_value_serde(INT)
    )
    doubled.to_stream().to("out", Produced(value_serde=INT))
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, INT)
        source.pipe_input("a", 1, 1)
        source.pipe_input("b", 2, 2)
        source.pipe_input("a", 11, 3)
        assert sorted(driver.get_key_value_store("small").all()) == [("b", 2)]
        assert sorted(driver.get_key_value_store("doubled").all()) == [("b", 4)]
        assert _records(driver, "out", INT) == [("a", 2, 1), ("b", 4, 2), ("a", None, 3)]
    description = str(builder.build().describe())
    assert "Processor: double (stores: [doubled])" in description


def test_map_values_with_key_and_unnamed_materialized_is_not_materialized() -> None:
    builder = StreamsBuilder()
    builder.table("in").map_values(
        lambda k, v: f"{k}={v}", materialized=Materialized(key_serde=S)
    ).to_stream().to("out")
    topology = builder.build()
    description = str(topology.describe())
    # index 0: table store, 1: source, 2: table source, 3: map_values, 4: burned store index, 5: to_stream
    assert "Processor: KTABLE-MAPVALUES-0000000003 (stores: [])" in description
    assert "Processor: KTABLE-TOSTREAM-0000000005 (stores: [])" in description
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 3)
        assert _records(driver, "out") == [("k", "k=v", 3)]


def test_to_stream_with_a_key_mapper_selects_a_new_key() -> None:
    builder = StreamsBuilder()
    builder.table("in").to_stream(lambda k, v: v).to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 3)
        assert _records(driver, "out") == [("v", "v", 3)]


@pytest.mark.parametrize("caching", [True, False])
def test_stream_to_table_and_caching(caching: bool) -> None:
    """Two updates of one key from one input record: one downstream update with caching."""
    materialized = Materialized.as_("latest")
    if not caching:
        materialized = materialized.with_caching_disabled()
    builder = StreamsBuilder()
    (
        builder.stream("in")
        .flat_map_values(lambda v: v.split(","))
        .to_table(materialized=materialized)
        .to_stream()
        .to("out")
    )
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "first,second", 9)
        expected = [("k", "second", 9)] if caching else [("k", "first", 9), ("k", "second", 9)]
        assert _records(driver, "out") == expected
        assert driver.get_key_value_store("latest").get("k") == "second"


def test_to_table_after_a_key_change_repartitions() -> None:
    builder = StreamsBuilder()
    builder.stream("in").select_key(lambda k, v: v).to_table().to_stream().to("out")
    topology = builder.build()
    description = str(topology.describe())
    assert "(topic: KSTREAM-TOTABLE-0000000002-repartition)" in description
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 3)
        assert _records(driver, "out") == [("v", "v", 3)]


def test_source_topic_is_reused_as_changelog_only_under_optimization() -> None:
    def build(config: StreamsConfig | None) -> Topology:
        builder = StreamsBuilder(config)
        builder.table("in", materialized=Materialized.as_("t")).to_stream().to("out")
        return builder.build()

    plain = compile_topology(build(None))
    assert plain.changelog_topic("t") == "t-changelog"
    assert "t-changelog" in plain.internal_topics
    config = StreamsConfig(application_id="app", bootstrap_servers="x:1", topology_optimization="all")
    optimized_topology = build(config)
    optimized = compile_topology(optimized_topology)
    assert optimized.changelog_topic("t") == "in"
    assert "t-changelog" not in optimized.internal_topics
    # nothing is logged (the source topic already holds every update) and the table still works
    with TopologyTestDriver(optimized_topology, {**CONFIG, "topology_optimization": "all"}) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 1)
        assert driver.get_key_value_store("t").get("k") == "v"
        assert driver.produced_topic_names() == {"out"}
