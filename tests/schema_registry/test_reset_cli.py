"""``platform-streams reset --schema-registry-url``: the subjects of the internal topics the reset
deletes are soft-deleted (recoverable), and hard-deleted too with ``--hard-delete-subjects``;
the login comes from the environment, never from the command line."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path

import pytest

from platform_streams.cli import main
from platform_streams.kafka import KafkaAdmin, TopicSpec
from platform_streams.serde import Avro
from tests.support.kafka import new_topic

pytestmark = [pytest.mark.broker, pytest.mark.kafka_side]

SCHEMA = json.dumps(
    {"type": "record", "name": "Count", "namespace": "ps.reset", "fields": [{"name": "n", "type": "long"}]}
)


def _subjects(registry_url: str, deleted: bool = False) -> set[str]:
    query = "?deleted=true" if deleted else ""
    with urllib.request.urlopen(f"{registry_url}/subjects{query}", timeout=10) as response:
        return set(json.loads(response.read()))


def _codeless_app(admin: KafkaAdmin, registry_url: str, source: str) -> tuple[str, str]:
    """An application id with one changelog topic whose value subject is registered."""
    app_id = f"reg-reset-{uuid.uuid4().hex[:10]}"
    changelog = f"{app_id}-counts-changelog"
    admin.create_topics([TopicSpec(changelog, 1, config={"cleanup.policy": "compact"})])
    Avro(registry_url, SCHEMA, topic=changelog).serialize({"n": 1})
    return app_id, changelog


def test_reset_cli_deletes_the_internal_subjects_soft_then_hard(
    bootstrap_servers: str,
    admin: KafkaAdmin,
    registry_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = new_topic(admin, 1, "reg-reset-in")
    Avro(registry_url, SCHEMA, topic=source).serialize({"n": 1})
    # the test registry has no login: a wrong one would be refused, so none is set, but the
    # variable is the only place a login is read from
    monkeypatch.delenv("PLATFORM_STREAMS_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO", raising=False)

    def reset(app_id: str, *extra: str) -> None:
        args = ["reset", "--application-id", app_id, "--bootstrap-server", bootstrap_servers]
        args += ["--set", f"state.dir={tmp_path}", "--input-topics", source, "--yes"]
        assert main([*args, "--schema-registry-url", registry_url, *extra]) == 0

    soft_app, soft_changelog = _codeless_app(admin, registry_url, source)
    reset(soft_app)
    assert f"{soft_changelog}-value" not in _subjects(registry_url)
    assert f"{soft_changelog}-value" in _subjects(registry_url, deleted=True)  # recoverable

    hard_app, hard_changelog = _codeless_app(admin, registry_url, source)
    reset(hard_app, "--hard-delete-subjects")
    assert f"{hard_changelog}-value" not in _subjects(registry_url, deleted=True)
    assert f"{source}-value" in _subjects(registry_url)  # an input topic's subject is never touched


def test_reset_cli_refuses_a_login_in_the_registry_url(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "reset",
            "--application-id",
            "never-started",
            "--input-topics",
            "t",
            "--bootstrap-server",
            "127.0.0.1:1",
            "--schema-registry-url",
            "http://alice:s3cret@127.0.0.1:1",
            "--yes",
        ]
    )
    err = capsys.readouterr().err
    assert code != 0 and "basic.auth.user.info" in err and "s3cret" not in err
