"""Settings errors are caught while the config is loaded, named with their layer and a hint.

Pass-through client properties are checked by librdkafka itself (through
``platform_streams.kafka.properties``, no client is created), so an unknown key or a bad
value fails at validation -- not at the first client, minutes into ``start()``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from platform_streams.cli_app_loader import CliError, load_config
from platform_streams.config import StreamsConfig
from platform_streams.config.sources import NOT_SETTINGS
from platform_streams.errors import StreamsConfigError
from platform_streams.kafka.properties import client_property_problem, known_property_names

BASE = {"application.id": "app", "bootstrap.servers": "h:9092"}


def _load_error(**kwargs: object) -> str:
    with pytest.raises(StreamsConfigError) as info:
        StreamsConfig.load(**kwargs)  # type: ignore[arg-type]
    return str(info.value)


def test_librdkafka_answers_without_creating_a_client() -> None:
    assert client_property_problem("producer", "linger.ms", 5) is None
    assert client_property_problem("consumer", "auto.offset.reset", "earliest") is None
    assert client_property_problem("client", "num.stream.thread", 2) == "unknown"
    assert "auto.offset.reset" in (client_property_problem("consumer", "auto.offset.reset", "bogus") or "")
    assert {"linger.ms", "session.timeout.ms", "sasl.password"} <= known_property_names()


def test_unknown_key_names_the_set_layer_and_the_closest_setting() -> None:
    message = _load_error(env={}, overrides={**BASE, "num.stream.thread": "2"})
    assert "'num.stream.thread' in --set overrides" in message
    assert "did you mean 'num.stream.threads'?" in message


def test_unknown_key_names_the_file_and_keeps_the_prefix_in_the_hint(tmp_path: Path) -> None:
    path = tmp_path / "app.properties"
    path.write_text("application.id=a\nbootstrap.servers=h:1\nconsumer.auto.offset.rest=earliest\n")
    message = _load_error(path=path, env={})
    assert f"'consumer.auto.offset.rest' in config file {str(path)!r}" in message
    assert "did you mean 'consumer.auto.offset.reset'?" in message


def test_unknown_yaml_snake_case_key_suggests_the_field(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text("application_id: a\nbootstrap_servers: h:1\nnum_stream_thread: 2\n")
    message = _load_error(path=path, env={})
    assert "'num_stream_thread' in config file" in message and "did you mean 'num_stream_threads'?" in message


def test_unknown_key_in_env_json_and_factory_settings_name_their_layer() -> None:
    env = {"PLATFORM_STREAMS_CLIENT_CONFIG": json.dumps({"lingr.ms": 5})}
    message = _load_error(env=env, overrides=BASE)
    assert "'client_config.lingr.ms' in PLATFORM_STREAMS_* environment variables" in message
    message = _load_error(env={}, overrides=BASE, defaults={"producer.linger.msec": 5})
    assert "'producer.linger.msec' in the app factory's settings" in message
    assert "did you mean 'producer.linger.ms'?" in message


def test_bad_values_are_librdkafkas_message_and_secrets_are_not_echoed() -> None:
    message = _load_error(env={}, overrides={**BASE, "consumer.auto.offset.reset": "bogus"})
    assert "'consumer.auto.offset.reset' in --set overrides" in message and "bogus" in message
    message = _load_error(env={}, overrides={**BASE, "sasl.jaas.config": "x required password=hunter2;"})
    assert "JAAS configuration is not supported" in message and "hunter2" not in message


def test_the_model_checks_client_dicts_too() -> None:
    with pytest.raises(
        ValidationError, match=r"producer_config[\s\S]*'linger.msx'.*did you mean 'linger.ms'"
    ):
        StreamsConfig(application_id="a", bootstrap_servers="h:1", producer_config={"linger.msx": 5})


def test_unknown_platform_streams_variable_is_an_error_with_a_hint() -> None:
    env = {"PLATFORM_STREAMS_NUM_STREAM_THREAD": "2", "PLATFORM_STREAMS_NOT_A_THING": "x"}
    message = _load_error(env=env, overrides=BASE)
    assert "PLATFORM_STREAMS_NUM_STREAM_THREAD matches no setting; did you mean " in message
    assert "PLATFORM_STREAMS_NUM_STREAM_THREADS?" in message
    assert "PLATFORM_STREAMS_NOT_A_THING matches no setting" in message


def test_variables_of_other_parts_and_kubernetes_service_links_are_not_settings() -> None:
    env = {f"PLATFORM_STREAMS_{suffix}": "x" for suffix in NOT_SETTINGS}
    env |= {
        "PLATFORM_STREAMS_SERVICE_HOST": "10.0.0.1",
        "PLATFORM_STREAMS_SERVICE_PORT_HTTP": "8080",
        "PLATFORM_STREAMS_PORT": "tcp://10.0.0.1:8080",
        "PLATFORM_STREAMS_PORT_8080_TCP_ADDR": "10.0.0.1",
        "PLATFORM_STREAMS_ORDERS_SERVICE_HOST": "10.0.0.2",
    }
    assert StreamsConfig.load(env=env, overrides=BASE).application_id == "app"


def test_a_non_utf8_file_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.properties"
    path.write_bytes(b"application.id=a\nbootstrap.servers=h:1\ncomment=caf\xe9\n")
    message = _load_error(path=path, env={})
    assert f"config file {str(path)!r} is not UTF-8 text (byte 0xe9" in message


def test_value_errors_name_the_layer_that_set_the_value(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text("application.id: a\nbootstrap.servers: h:1\nsession.timeout.ms: soon\n")
    with pytest.raises(CliError) as info:
        load_config(path, [], env={})
    assert "session_timeout_ms:" in str(info.value) and f"[from config file {str(path)!r}]" in str(info.value)
    with pytest.raises(CliError) as info:
        load_config(path, ["session.timeout.ms=later"], env={})
    assert "'later'" in str(info.value) and "[from --set overrides]" in str(info.value)
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("num.stream.threads: 1_0", "line 3, column 21: a number written with '_'"),  # YAML 1.1: 10
        ("num.stream.threads: 010", "line 3, column 21"),  # YAML 1.1: octal 8
        ("commit.interval.ms: 1:30", "line 3, column 21"),  # YAML 1.1: sexagesimal 90
        ("application.id: b", "line 3, column 1: duplicate key 'application.id' (first at line 1)"),
    ],
)
def test_yaml_numbers_and_keys_java_would_refuse(tmp_path: Path, line: str, fragment: str) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(f"application.id: a\nbootstrap.servers: h:1\n{line}\n")
    message = _load_error(path=path, env={})
    assert f"invalid YAML in config file {str(path)!r}, {fragment}" in message
