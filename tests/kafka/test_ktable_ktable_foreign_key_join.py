"""Kafka's ``KTableKTableForeignKeyJoinIntegrationTest`` (streams/src/test/java/org/apache/kafka/streams/
integration/KTableKTableForeignKeyJoinIntegrationTest.java), translated: every case runs through the
TopologyTestDriver in Kafka too, parametrized as Kafka's ``data()`` (left join, optimization,
materialized, rejoin).

Not translated: ``shouldIgnoreOutOfOrderRecordsIffVersioned`` and the versioned-table parameters
(versioned stores are tested in tests/integration/test_versioned_store.py); the
``UniqueTopicSerdeScope`` assertions (serdes here take no topic name, so there are no
pseudo-topics to check).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dsl import Consumed, Materialized, StreamsBuilder
from platform_streams.dsl.internals.foreign_key_wire import CombinedKeySchema
from platform_streams.serde import String
from platform_streams.state import Stores
from platform_streams.testing import TestInputTopic, TestOutputTopic, TopologyTestDriver

S = String()
LEFT_TABLE, RIGHT_TABLE, OUTPUT, REJOIN_OUTPUT = (
    "left_table",
    "right_table",
    "output-topic",
    "rejoin-output-topic",
)
BASE = 1_000


def _java(value: Any) -> str:
    """Java's string concatenation: null prints as ``null``."""
    return "null" if value is None else str(value)


def _extract(value: str) -> str:
    return value.split("|")[1]


def _topology(
    optimization: str,
    store: str | None,
    left_join: bool,
    rejoin: bool,
    extractor: Callable[[str], Any] = _extract,
) -> Any:
    """Kafka's ``getTopology`` (caching off: the cache would hide the tombstones asserted on)."""
    config = StreamsConfig(
        application_id="fk-join", bootstrap_servers="x:9092", topology_optimization=optimization
    )
    builder = StreamsBuilder()
    left = builder.table(LEFT_TABLE, Consumed(key_serde=S, value_serde=S))
    right = builder.table(RIGHT_TABLE, Consumed(key_serde=S, value_serde=S))

    def joiner(value1: Any, value2: Any) -> str:
        return f"({_java(value1)},{_java(value2)})"

    def rejoiner(value1: Any, value2: Any) -> str:
        return f"rejoin({_java(value1)},{_java(value2)})"

    if store is None:
        main = Materialized(value_serde=S).with_caching_disabled()
        rejoin_mat = Materialized(value_serde=S)
    else:
        main = Materialized(store_supplier=Stores.in_memory_key_value_store(store), value_serde=S)
        main = main.with_caching_disabled()
        rejoin_mat = Materialized(
            store_supplier=Stores.in_memory_key_value_store(store + "-rejoin"), value_serde=S
        ).with_caching_disabled()
    if left_join:
        fk_join = left.left_join(right, extractor, joiner, main)
        fk_join.to_stream().to(OUTPUT)
        if rejoin:
            fk_join.left_join(left, rejoiner, rejoin_mat).to_stream().to(REJOIN_OUTPUT)
    else:
        fk_join = left.join(right, extractor, joiner, main)
        fk_join.to_stream().to(OUTPUT)
        if rejoin:
            fk_join.join(left, rejoiner, rejoin_mat).to_stream().to(REJOIN_OUTPUT)
    return builder.build(config)


class Case:
    """One parametrized run: driver, topics, and the result store when materialized."""

    def __init__(
        self,
        left_join: bool,
        optimization: str,
        materialized: bool,
        rejoin: bool,
        extractor: Callable[[str], Any] = _extract,
    ) -> None:
        self.materialized, self.rejoin = materialized, rejoin
        topology = _topology(optimization, "store" if materialized else None, left_join, rejoin, extractor)
        self.driver = TopologyTestDriver(
            topology, {"default_key_serde": "string", "default_value_serde": "string"}
        )
        self.right: TestInputTopic = self.driver.create_input_topic(RIGHT_TABLE, S, S)
        self.left: TestInputTopic = self.driver.create_input_topic(LEFT_TABLE, S, S)
        self.output: TestOutputTopic = self.driver.create_output_topic(OUTPUT, S, S)
        self.rejoin_output: TestOutputTopic = self.driver.create_output_topic(REJOIN_OUTPUT, S, S)

    def check(self, output: dict[str, Any], store: dict[str, Any] | None = None) -> None:
        # Kafka's TestOutputTopic.readKeyValuesToMap keeps a tombstone as key -> null
        assert dict(self.output.read_key_values_to_list()) == output
        if self.materialized:
            assert dict(self.driver.get_key_value_store("store").all()) == (
                output if store is None else store
            )

    def check_rejoin(self, expected: dict[str, Any]) -> None:
        if self.rejoin:
            assert dict(self.rejoin_output.read_key_values_to_list()) == expected


PARAMS = [
    pytest.param((left_join, optimization, materialized, rejoin), id=f"{kind}-{optimization}-{mat}-{re}")
    for left_join, kind in ((True, "left"), (False, "inner"))
    for optimization in ("all", "none")
    for materialized, mat in ((True, "materialized"), (False, "unmaterialized"))
    for rejoin, re in ((True, "rejoin"), (False, "norejoin"))
]
#: CI budget: the optimization parameter only changes which topic restores the source tables, so the
#: full matrix runs for the first case and the rest run unoptimized (as the versioned cases in Kafka)
UNOPTIMIZED = [p for p in PARAMS if p.values[0][1] == "none"]  # type: ignore[index]
PARAMS_WITHOUT_LEFT_JOIN = [p for p in UNOPTIMIZED if p.values[0][0]]  # type: ignore[index]


@pytest.fixture
def case(request: pytest.FixtureRequest) -> Iterator[Case]:
    made = Case(*request.param)
    yield made
    made.driver.close()


@pytest.mark.parametrize("case", PARAMS, indirect=True)
def test_do_join_from_left_then_delete_left_entity(case: Case) -> None:
    """doJoinFromLeftThenDeleteLeftEntity"""
    case.right.pipe_input("rhs1", "rhsValue1", BASE)
    case.right.pipe_input("rhs2", "rhsValue2", BASE + 1)
    case.right.pipe_input("rhs3", "rhsValue3", BASE + 2)  # this unreferenced FK won't show up in any results
    case.check({})
    case.check_rejoin({})
    case.left.pipe_input("lhs1", "lhsValue1|rhs1", BASE + 3)
    case.left.pipe_input("lhs2", "lhsValue2|rhs2", BASE + 4)
    case.check({"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,rhsValue2)"})
    case.check_rejoin(
        {
            "lhs1": "rejoin((lhsValue1|rhs1,rhsValue1),lhsValue1|rhs1)",
            "lhs2": "rejoin((lhsValue2|rhs2,rhsValue2),lhsValue2|rhs2)",
        }
    )
    # Add another reference to an existing FK
    case.left.pipe_input("lhs3", "lhsValue3|rhs1", BASE + 5)
    case.check(
        {"lhs3": "(lhsValue3|rhs1,rhsValue1)"},
        {
            "lhs1": "(lhsValue1|rhs1,rhsValue1)",
            "lhs2": "(lhsValue2|rhs2,rhsValue2)",
            "lhs3": "(lhsValue3|rhs1,rhsValue1)",
        },
    )
    case.check_rejoin({"lhs3": "rejoin((lhsValue3|rhs1,rhsValue1),lhsValue3|rhs1)"})
    # Now delete one LHS entity such that one delete is propagated down to the output.
    case.left.pipe_input("lhs1", None, BASE + 6)
    case.check({"lhs1": None}, {"lhs2": "(lhsValue2|rhs2,rhsValue2)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"})
    case.check_rejoin({"lhs1": None})


@pytest.mark.parametrize("case", UNOPTIMIZED, indirect=True)
def test_do_join_from_right_then_delete_right_entity(case: Case, request: pytest.FixtureRequest) -> None:
    """doJoinFromRightThenDeleteRightEntity"""
    left_join = request.node.callspec.id.startswith("left")
    case.left.pipe_input("lhs1", "lhsValue1|rhs1", BASE)
    case.left.pipe_input("lhs2", "lhsValue2|rhs2", BASE + 1)
    case.left.pipe_input("lhs3", "lhsValue3|rhs1", BASE + 2)
    half = {"lhs1": "(lhsValue1|rhs1,null)", "lhs2": "(lhsValue2|rhs2,null)", "lhs3": "(lhsValue3|rhs1,null)"}
    case.check(half if left_join else {})
    case.right.pipe_input("rhs1", "rhsValue1", BASE + 3)
    joined_1 = {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"}
    case.check(joined_1, {**half, **joined_1} if left_join else joined_1)
    case.right.pipe_input("rhs2", "rhsValue2", BASE + 4)
    all_joined = {**joined_1, "lhs2": "(lhsValue2|rhs2,rhsValue2)"}
    case.check({"lhs2": "(lhsValue2|rhs2,rhsValue2)"}, all_joined)
    case.right.pipe_input("rhs3", "rhsValue3", BASE + 5)  # this unreferenced FK won't show up in any results
    case.check({}, all_joined)
    # Now delete the RHS entity such that all matching keys have deletes propagated.
    case.right.pipe_input("rhs1", None, BASE + 6)
    if left_join:
        unjoined = {"lhs1": "(lhsValue1|rhs1,null)", "lhs3": "(lhsValue3|rhs1,null)"}
        case.check(unjoined, {**unjoined, "lhs2": "(lhsValue2|rhs2,rhsValue2)"})
    else:
        case.check({"lhs1": None, "lhs3": None}, {"lhs2": "(lhsValue2|rhs2,rhsValue2)"})


@pytest.mark.parametrize("case", UNOPTIMIZED, indirect=True)
def test_should_emit_tombstone_when_deleting_non_joining_records(
    case: Case, request: pytest.FixtureRequest
) -> None:
    """shouldEmitTombstoneWhenDeletingNonJoiningRecords"""
    left_join = request.node.callspec.id.startswith("left")
    case.left.pipe_input("lhs1", "lhsValue1|rhs1", BASE)
    case.check({"lhs1": "(lhsValue1|rhs1,null)"} if left_join else {})
    # Deleting a non-joining record produces an unnecessary tombstone for inner joins, because
    # it's not possible to know whether a result was previously emitted.
    case.left.pipe_input("lhs1", None, BASE + 1)
    case.check({"lhs1": None}, {})
    # Deleting a non-existing record is idempotent
    case.left.pipe_input("lhs1", None, BASE + 2)
    case.check({}, {})


@pytest.mark.parametrize("case", UNOPTIMIZED, indirect=True)
def test_should_not_emit_tombstones_when_deleting_non_existing_records(case: Case) -> None:
    """shouldNotEmitTombstonesWhenDeletingNonExistingRecords"""
    case.left.pipe_input("lhs1", None, BASE)
    case.check({}, {})


@pytest.mark.parametrize("case", UNOPTIMIZED, indirect=True)
def test_join_should_produce_nulls_when_value_has_non_matching_foreign_key(
    case: Case, request: pytest.FixtureRequest
) -> None:
    """joinShouldProduceNullsWhenValueHasNonMatchingForeignKey"""
    left_join = request.node.callspec.id.startswith("left")

    def half(fk: str) -> dict[str, Any]:
        return {"lhs1": f"(lhsValue1|{fk},null)"} if left_join else {}

    case.left.pipe_input("lhs1", "lhsValue1|rhs1", BASE)
    case.check(half("rhs1"))
    # "moving" the subscription to another non-existent FK: an unnecessary tombstone for the inner join
    case.left.pipe_input("lhs1", "lhsValue1|rhs2", BASE + 1)
    case.check({"lhs1": "(lhsValue1|rhs2,null)" if left_join else None}, half("rhs2"))
    case.left.pipe_input("lhs1", "lhsValue1|rhs3", BASE + 2)
    case.check({"lhs1": "(lhsValue1|rhs3,null)" if left_join else None}, half("rhs3"))
    # an RHS record no row references any more: no change at all
    case.right.pipe_input("rhs1", "rhsValue1", BASE + 3)
    case.check({}, half("rhs3"))
    # now, we change to a FK that exists, and see the join completes
    case.left.pipe_input("lhs1", "lhsValue1|rhs1", BASE + 4)
    case.check({"lhs1": "(lhsValue1|rhs1,rhsValue1)"})
    # updated again to a non-existent one: a tombstone for the inner join, an update for the left join
    case.left.pipe_input("lhs1", "lhsValue1|rhs2", BASE + 5)
    case.check({"lhs1": "(lhsValue1|rhs2,null)" if left_join else None}, half("rhs2"))


@pytest.mark.parametrize("case", UNOPTIMIZED, indirect=True)
def test_should_unsubscribe_old_foreign_key_if_left_side_is_updated(case: Case) -> None:
    """shouldUnsubscribeOldForeignKeyIfLeftSideIsUpdated"""
    case.right.pipe_input("rhs1", "rhsValue1", BASE)
    case.right.pipe_input("rhs2", "rhsValue2", BASE + 1)
    case.check({}, {})
    case.left.pipe_input("lhs1", "lhsValue1|rhs1", BASE + 2)
    case.check({"lhs1": "(lhsValue1|rhs1,rhsValue1)"})
    # Change LHS foreign key reference
    case.left.pipe_input("lhs1", "lhsValue1|rhs2", BASE + 3)
    case.check({"lhs1": "(lhsValue1|rhs2,rhsValue2)"})
    # Populate RHS update on old LHS foreign key ref
    case.right.pipe_input("rhs1", "rhsValue1Delta", BASE + 4)
    case.check({}, {"lhs1": "(lhsValue1|rhs2,rhsValue2)"})


@pytest.mark.parametrize("params", PARAMS_WITHOUT_LEFT_JOIN)
def test_should_emit_record_on_null_foreign_key_for_left_joins(params: tuple[Any, ...]) -> None:
    """shouldEmitRecordOnNullForeignKeyForLeftJoins"""
    case = Case(*params, extractor=lambda value: None)
    case.left.pipe_input("lhs1", "lhsValue1|rhs1", BASE)
    case.check({"lhs1": "(lhsValue1|rhs1,null)"})
    case.driver.close()


@pytest.mark.parametrize("params", PARAMS_WITHOUT_LEFT_JOIN)
def test_should_emit_record_when_old_and_new_fk_differ(params: tuple[Any, ...]) -> None:
    """shouldEmitRecordWhenOldAndNewFkDiffer"""

    def extractor(value: str) -> str | None:
        split = value.split("|")[1]
        return None if split == "returnNull" else split

    case = Case(*params, extractor=extractor)
    store_name = next(name for name in case.driver.plan.topology.stores if "SUBSCRIPTION-STATE-STORE" in name)
    subscriptions = case.driver.get_key_value_store(store_name)
    key = CombinedKeySchema(S, S).to_bytes("rhs1", "lhs1")
    case.left.pipe_input("lhs1", "lhsValue1|rhs1", BASE)
    case.check({"lhs1": "(lhsValue1|rhs1,null)"})
    assert subscriptions.get(key) is not None
    case.left.pipe_input("lhs1", "lhsValue1|returnNull", BASE)
    case.check({"lhs1": "(lhsValue1|returnNull,null)"})
    assert subscriptions.get(key) is None
    case.driver.close()
