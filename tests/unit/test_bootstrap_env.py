"""One bootstrap variable across the CLI, the workers, Dagster and the tests (with the guide's
short name PLATFORM_STREAMS_BOOTSTRAP read as the same setting)."""

from __future__ import annotations

import os

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.config.sources import BOOTSTRAP_ENV
from platform_streams.errors import StreamsConfigError


def test_the_workers_read_the_one_bootstrap_variable() -> None:
    assert BOOTSTRAP_ENV == "PLATFORM_STREAMS_BOOTSTRAP_SERVERS"
    config = StreamsConfig.load(
        None, env={BOOTSTRAP_ENV: "kafka-0:9092", "PLATFORM_STREAMS_APPLICATION_ID": "a"}
    )
    assert config.bootstrap_servers == "kafka-0:9092"


def test_the_short_name_is_the_same_setting_and_never_a_second_value() -> None:
    env = {"PLATFORM_STREAMS_BOOTSTRAP": "kafka-0:9092", "PLATFORM_STREAMS_APPLICATION_ID": "a"}
    assert StreamsConfig.load(None, env=env).bootstrap_servers == "kafka-0:9092"
    env[BOOTSTRAP_ENV] = "other:9092"
    with pytest.raises(StreamsConfigError, match="disagree"):
        StreamsConfig.load(None, env=env)


def test_dagster_reads_the_same_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("dagster")
    from dagster_defs.definitions import default_resources

    monkeypatch.setenv(BOOTSTRAP_ENV, "kafka-0:9092")
    assert default_resources()["kafka"].bootstrap_servers.env_var_name == BOOTSTRAP_ENV
    monkeypatch.delenv(BOOTSTRAP_ENV)
    monkeypatch.setenv("PLATFORM_STREAMS_BOOTSTRAP", "kafka-0:9092")
    assert default_resources()["kafka"].bootstrap_servers.env_var_name == BOOTSTRAP_ENV
    assert os.environ[BOOTSTRAP_ENV] == "kafka-0:9092"
