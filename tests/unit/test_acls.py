"""The ACL sets ``platform-streams acls`` prints and the comparison ``--check`` makes (pure logic;
the sets are proven against a secured Apache Kafka in tests/security/)."""

from __future__ import annotations

import pytest

from platform_streams import cli
from platform_streams.config import StreamsConfig
from platform_streams.kafka.acl_admin import Acl
from platform_streams.ops.acls import acl_sets, check_acls, isolation_acls
from tests.integration.ops_apps import build_topology


def _config(**more: object) -> StreamsConfig:
    return StreamsConfig(application_id="orders", bootstrap_servers="b:9093", **more)


def test_transactional_ids_only_under_exactly_once() -> None:
    topology = build_topology("words", "counts")
    eos = acl_sets(topology, _config(processing_guarantee="exactly_once_v2"))["application"].acls
    alos = acl_sets(topology, _config())["application"].acls
    assert Acl("User:orders", "TRANSACTIONAL_ID", "orders-", "PREFIXED", "WRITE") in eos
    assert not [a for a in alos if a.resource_type == "TRANSACTIONAL_ID"]
    assert Acl("User:orders", "TOPIC", "words", "LITERAL", "READ") in alos
    assert Acl("User:orders", "TOPIC", "counts", "LITERAL", "WRITE") in alos
    assert {a.name for a in alos if a.pattern == "PREFIXED"} == {"orders-"}  # never the bare id


def test_isolation_denies_only_applications_the_prefix_matches() -> None:
    denied = isolation_acls("orders", ["orders-v2", "ordersx", "payments"]).acls
    kinds = {"TOPIC", "GROUP", "TRANSACTIONAL_ID"}
    got = {(a.resource_type, a.name, a.permission) for a in denied}
    assert got == {(k, "orders-v2", "DENY") for k in kinds}


def test_check_counts_all_and_reports_missing_and_extra() -> None:
    need = [Acl("User:o", "TOPIC", "o-", "PREFIXED", "READ"), Acl("User:o", "GROUP", "o", "LITERAL", "READ")]
    have = [Acl("User:o", "TOPIC", "o-", "PREFIXED", "ALL"), Acl("User:o", "TOPIC", "x", "LITERAL", "WRITE")]
    result = check_acls(need, have)
    assert result.missing == [need[1]] and not result.ok
    assert Acl("User:o", "TOPIC", "x", "LITERAL", "WRITE") in result.extra


def test_acls_command_prints_kafka_acls_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPS_TEST_INPUT", "words")
    monkeypatch.setenv("OPS_TEST_OUTPUT", "counts")
    argv = ["acls", "tests.integration.ops_apps:topology", "--set", "bootstrap.servers=b:9093",
            "--set", "application.id=orders", "--sets", "application",
            "--isolate-from", "orders-v2"]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert (
        "kafka-acls.sh --bootstrap-server b:9093 --add --allow-principal User:orders --operation Read "
        "--topic words --resource-pattern-type literal" in out
    )
    deny = "--deny-principal User:orders --operation All --topic orders-v2 --resource-pattern-type prefixed"
    assert deny in out
    assert cli.main([*argv[:-4], "--sets", "nonsense"]) == 2
