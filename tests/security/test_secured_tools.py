"""Tools and credentials on the secured cluster: ``acls --check``, ``topics`` with the
least-privilege principal, wrong passwords and untrusted certificates, and two applications
whose ids share a prefix (``orders``, ``orders-v2``) kept apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from platform_streams import cli
from platform_streams.config import StreamsConfig
from platform_streams.dev.brokers.secured import CertificateAuthority, SecuredKafkaBroker
from platform_streams.errors import BrokerError
from platform_streams.kafka import KafkaAdmin, KafkaException, TopicSpec, create_producer
from platform_streams.ops.acls import acl_sets, isolation_acls
from tests.integration.ops_apps import build_topology
from tests.security.conftest import Principal, make_topics

pytestmark = [pytest.mark.kafka_side]

APP = "tests.integration.ops_apps:topology"


def cli_env(conf: dict[str, str], app_id: str, source: str, sink: str) -> dict[str, str]:
    client = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
    return {
        "PLATFORM_STREAMS_BOOTSTRAP_SERVERS": conf["bootstrap.servers"],
        "PLATFORM_STREAMS_APPLICATION_ID": app_id,
        "PLATFORM_STREAMS_CLIENT_CONFIG": json.dumps(client),
        "OPS_TEST_INPUT": source,
        "OPS_TEST_OUTPUT": sink,
    }


def run_cli(env: dict[str, str], *args: str, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PLATFORM_STREAMS_")}
    return subprocess.run(
        [sys.executable, "-m", "platform_streams.cli", *args],
        env={**clean, **env}, capture_output=True, text=True, timeout=timeout,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip


def test_acls_check_finds_each_missing_acl(
    secured_broker: SecuredKafkaBroker,
    new_user,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    user: Principal = new_user("check")
    source, sink = f"in-{user.name}", f"out-{user.name}"
    config = StreamsConfig(application_id=user.name, bootstrap_servers="unused:9092")
    required = list(acl_sets(build_topology(source, sink), config)["application"].acls)
    for key, value in cli_env(secured_broker.client_config(), user.name, source, sink).items():
        monkeypatch.setenv(key, value)
    argv = ["acls", APP, "--sets", "application", "--check"]
    assert cli.main(argv) == 1  # nothing granted yet
    assert capsys.readouterr().out.count("MISSING") == len(required)
    secured_broker.grant(required)
    assert cli.main(argv) == 0, capsys.readouterr().out
    assert "ok: every required ACL is present" in capsys.readouterr().out
    secured_broker.revoke([required[-1]])
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert f"MISSING {required[-1].kafka_acls()}" in out and out.count("MISSING") == 1


def test_topics_plan_and_create_work_with_the_topics_set_only(
    secured_broker: SecuredKafkaBroker, new_user, super_admin: KafkaAdmin  # type: ignore[no-untyped-def]
) -> None:
    user: Principal = new_user("lifecycle")
    source, sink = f"in-{user.name}", f"out-{user.name}"
    make_topics(super_admin, (source, 2), (sink, 2))
    config = StreamsConfig(application_id=user.name, bootstrap_servers="unused:9092")
    secured_broker.grant(list(acl_sets(build_topology(source, sink), config)["topics"].acls))
    env = cli_env(user.config, user.name, source, sink)
    created = run_cli(env, "topics", "create", APP)
    assert created.returncode == 0, created.stderr
    assert f"{user.name}-rekey-repartition" in super_admin.list_topics()
    planned = run_cli(env, "topics", "plan", APP)
    assert planned.returncode == 0, planned.stderr
    assert "rekey-repartition" in planned.stdout


def test_wrong_password_is_one_clear_line(secured_broker: SecuredKafkaBroker, new_user) -> None:  # type: ignore[no-untyped-def]
    user: Principal = new_user("wrongpw")
    wrong = dict(user.config, **{"sasl.password": "not-the-password-" + uuid.uuid4().hex})
    done = run_cli(cli_env(wrong, user.name, "in", "out"), "topics", "plan", APP)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode != 0
    assert len(lines) == 1 and "authentication" in lines[0].lower(), done.stderr
    assert wrong["sasl.password"] not in done.stderr + done.stdout


def test_untrusted_certificate_is_one_clear_line(secured_broker: SecuredKafkaBroker, tmp_path: Path) -> None:
    stranger = CertificateAuthority(tmp_path / "other-ca", "some-other-ca").issue("intruder")
    conf = {**secured_broker.mtls_config(stranger), "ssl.ca.location": secured_broker.ca_location}
    done = run_cli(cli_env(conf, "intruder", "in", "out"), "topics", "plan", APP)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode != 0
    assert len(lines) == 1 and "ssl" in lines[0].lower(), done.stderr


def test_expired_certificate_is_one_clear_line(secured_broker: SecuredKafkaBroker) -> None:
    assert secured_broker.ca is not None
    expired = secured_broker.ca.issue(f"expired-{uuid.uuid4().hex[:6]}", expired=True)
    env = cli_env(secured_broker.mtls_config(expired), "expired", "in", "out")
    done = run_cli(env, "topics", "plan", APP)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode != 0
    assert len(lines) == 1 and "expired" in lines[0].lower(), done.stderr


def _denied(action) -> str:  # type: ignore[no-untyped-def]
    try:
        action()
    except (KafkaException, BrokerError) as exc:
        text = str(exc)
        assert "AUTHORIZATION" in text.upper(), text
        return text
    raise AssertionError("the operation was allowed")


def test_orders_and_orders_v2_cannot_touch_each_other(
    secured_broker: SecuredKafkaBroker, new_user, super_admin: KafkaAdmin  # type: ignore[no-untyped-def]
) -> None:
    orders: Principal = new_user("orders")
    v2 = Principal(f"{orders.name}-v2", orders.password + "2", {})
    secured_broker.add_scram_user(v2.name, v2.password)
    v2 = Principal(v2.name, v2.password, secured_broker.sasl_config(v2.name, v2.password))
    apps = {}
    for user in (orders, v2):
        source, sink = f"in-{user.name}", f"out-{user.name}"
        make_topics(super_admin, (source, 1), (sink, 1), (f"{user.name}-rekey-repartition", 1))
        config = StreamsConfig(
            application_id=user.name, bootstrap_servers="unused:9092", processing_guarantee="exactly_once_v2"
        )
        secured_broker.grant(list(acl_sets(build_topology(source, sink), config)["application"].acls))
        apps[user.name] = (user, source, sink)
    secured_broker.grant(list(isolation_acls(orders.name, [v2.name]).acls))
    for me, other in ((orders, v2), (v2, orders)):
        _, other_source, _ = apps[other.name]
        with KafkaAdmin(me.config) as admin:
            _denied(lambda: admin.create_topics([TopicSpec(f"{other.name}-sneaky", 1)]))  # noqa: B023
            _denied(lambda: admin.delete_topics([f"{other.name}-rekey-repartition"]))  # noqa: B023
            _denied(lambda: admin.committed_offsets(other.name, [(other_source, 0)]))  # noqa: B023
        producer = create_producer({**me.config, "transactional.id": f"{other.name}-1-1", "log_level": 0})
        _denied(lambda: producer.init_transactions(15))  # noqa: B023
