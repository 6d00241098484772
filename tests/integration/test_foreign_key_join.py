"""A foreign-key join on a real broker: updates and deletes on both sides, a second instance
joining in the middle (a rebalance moves tasks and their subscription stores), and the exact
final result.

The primary table has 4 partitions and the foreign table 2, as FK joins allow: the subscription
topic takes the foreign table's partition count and the response topic the primary table's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_streams import KafkaStreams, State, StreamsBuilder
from platform_streams.dsl import Consumed, Produced
from platform_streams.kafka import KafkaAdmin
from platform_streams.serde import String
from tests.integration.support_apps import active_tasks, app_config, read_to_end, running_app, wait_until
from tests.support.kafka import new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

S = String()
Rows = dict[str, str | None]


def _app(left: str, right: str, out: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    orders = builder.table(left, Consumed(key_serde=S, value_serde=S))
    customers = builder.table(right, Consumed(key_serde=S, value_serde=S))
    orders.join(customers, lambda v: v.split("|")[1], lambda o, c: f"{o}+{c}").to_stream().to(
        out, Produced(key_serde=S, value_serde=S)
    )
    return builder


def _expected(left: Rows, right: Rows) -> dict[str, str]:
    """The inner join of the final tables."""
    result = {}
    for key, value in left.items():
        if value is None:
            continue
        customer = right.get(value.split("|")[1])
        if customer is not None:
            result[key] = f"{value}+{customer}"
    return result


def _latest(bootstrap: str, out: str) -> dict[str, str]:
    """The output read as a table: the last record per key wins, a tombstone deletes."""
    table: dict[str, str] = {}
    records = sorted(read_to_end(bootstrap, out, 4, timeout_s=30), key=lambda r: (r.partition, r.offset))
    for record in records:
        key = (record.key or b"").decode()
        if record.value is None:
            table.pop(key, None)
        else:
            table[key] = record.value.decode()
    return table


def _apply(bootstrap: str, topic: str, rows: Rows, model: Rows) -> None:
    produce(bootstrap, topic, list(rows.items()))
    model.update(rows)


def test_fk_join_is_exact_across_updates_deletes_and_a_rebalance(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    left, right, out = (
        new_topic(admin, 4, "orders"),
        new_topic(admin, 2, "customers"),
        new_topic(admin, 4, "out"),
    )
    first_config = app_config(bootstrap_servers, tmp_path / "a")
    second_config = app_config(bootstrap_servers, tmp_path / "b", app_id=first_config.application_id)
    left_rows: Rows = {}
    right_rows: Rows = {}
    _apply(bootstrap_servers, right, {f"c{i}": f"name{i}" for i in range(10)}, right_rows)
    _apply(bootstrap_servers, left, {f"o{i}": f"order{i}|c{i % 10}" for i in range(30)}, left_rows)

    def converged(what: str) -> None:
        expected = _expected(left_rows, right_rows)
        wait_until(lambda: _latest(bootstrap_servers, out) == expected, 90, what, interval_s=0.5)

    # generous: on Kafka under load the first join (internal topics, two rebalances) took >30 s
    with running_app(_app(left, right, out), first_config, timeout_s=120, close_timeout_s=60) as first:
        converged("the first instance joined every order")
        assert len(active_tasks(first)) == 4 + 2  # primary side 4 tasks, foreign side 2
        second = KafkaStreams(_app(left, right, out), second_config)
        try:
            second.start()
            # updates while the group rebalances: foreign keys move, rows go on both sides
            _apply(
                bootstrap_servers, left, {f"o{i}": f"order{i}b|c{(i + 1) % 10}" for i in range(10)}, left_rows
            )
            _apply(bootstrap_servers, left, {f"o{i}": None for i in range(10, 15)}, left_rows)
            _apply(bootstrap_servers, right, {"c5": "name5b", "c9": None}, right_rows)

            def split() -> bool:
                a, b = active_tasks(first), active_tasks(second)
                running = first.state() is State.RUNNING and second.state() is State.RUNNING
                return running and bool(a) and bool(b) and len(a) + len(b) == 6

            wait_until(split, 120, "both instances run tasks")
            # after the rebalance: a deleted foreign row comes back, another goes, orders point to
            # a customer that appears only later, a deleted order comes back
            _apply(bootstrap_servers, right, {"c9": "name9c", "c0": None}, right_rows)
            _apply(bootstrap_servers, left, {f"o{i}": f"order{i}c|c11" for i in range(20, 25)}, left_rows)
            _apply(bootstrap_servers, left, {"o25": None, "o10": "order10c|c3"}, left_rows)
            _apply(bootstrap_servers, right, {"c11": "name11"}, right_rows)
            converged("both instances reached the exact join of the final tables")
        finally:
            assert second.close(timeout_s=60)
    final = _latest(bootstrap_servers, out)
    assert final == _expected(left_rows, right_rows)
    assert "o25" not in final and "o11" not in final and final["o20"] == "order20c|c11+name11"
    app = first_config.application_id
    counts = admin.partition_counts(
        [
            f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic",
            f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic",
        ]
    )
    assert list(counts.values()) == [2, 4]  # co-partitioned with the foreign and the primary table
