"""No configuration error shows a secret's value: every secret setting through every error path.

The CLI's own rendering is exercised in-process (``platform_streams.cli.main`` with stderr
captured): it is the code that prints the line users see. The subprocess runs of the same
paths (and ``-v`` tracebacks) are in tests/integration/test_cli_config.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from platform_streams.cli import main
from platform_streams.config import StreamsConfig

APP = "examples.orders_app:topology"

#: every kind of secret setting, as a YAML file spells it -> a value seen nowhere else
SECRETS = {
    "http.auth.token": "tok-SEKRIT-1a",
    "consumer.sasl.password": "pw-SEKRIT-2b",
    "producer.ssl.key.password": "kp-SEKRIT-3c",
    "ssl.keystore.password": "ks-SEKRIT-4d",
    "admin.sasl.oauthbearer.client.secret": "cs-SEKRIT-5e",
    "sasl.oauthbearer.config": "principal=oc-SEKRIT-6f",
    "ssl.key.pem": "pem-SEKRIT-7g",
}
#: where each secret goes in the environment: (variable, key inside its JSON or None)
ENV_OF = {
    "http.auth.token": ("PLATFORM_STREAMS_HTTP_AUTH_TOKEN", None),
    "consumer.sasl.password": ("PLATFORM_STREAMS_CONSUMER_CONFIG", "sasl.password"),
    "producer.ssl.key.password": ("PLATFORM_STREAMS_PRODUCER_CONFIG", "ssl.key.password"),
    "ssl.keystore.password": ("PLATFORM_STREAMS_CLIENT_CONFIG", "ssl.keystore.password"),
    "admin.sasl.oauthbearer.client.secret": (
        "PLATFORM_STREAMS_ADMIN_CONFIG",
        "sasl.oauthbearer.client.secret",
    ),
    "sasl.oauthbearer.config": ("PLATFORM_STREAMS_CLIENT_CONFIG", "sasl.oauthbearer.config"),
    "ssl.key.pem": ("PLATFORM_STREAMS_CLIENT_CONFIG", "ssl.key.pem"),
}
BASE = {
    "application.id": "secrets-app",
    "bootstrap.servers": "127.0.0.1:1",
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "500",
    "max.poll.interval.ms": "10000",
}
#: the error paths: name -> (YAML lines after the base, --set items, how the secret is given)
PATHS = {
    "field validation": ("num.stream.threads: many\n", [], "file"),
    "cross-field validation": ("heartbeat.interval.ms: 7000\n", [], "file"),
    "cross-field, secret from the environment": ("", ["heartbeat.interval.ms=7000"], "env"),
    "field validation, secret from the environment": ("", ["num.stream.threads=many"], "env"),
    "YAML syntax error on the secret's line": ("", [], "broken line"),
    "YAML type error: the secret as a list": ("", [], "list"),
    "YAML type error: the secret as a mapping": ("", [], "mapping"),
    "YAML type error of another field": ("num.stream.threads: [1, 2]\n", [], "file"),
    "duplicate YAML key": ("", [], "duplicate"),
    "environment variable that is not JSON": ("", [], "bad env JSON"),
    "the secret in --set": ("", [], "--set"),
}


def _secret_lines(key: str, how: str) -> str:
    value = SECRETS[key]
    if how == "file":
        return f"{key}: {value}\n"
    if how == "broken line":
        return f"{key}: {value}: x: [\n"
    if how == "list":
        return f"{key}: [{value}]\n"
    if how == "mapping":
        return f"{key}: {{v: {value}}}\n"
    if how == "duplicate":
        return f"{key}: {value}\n{key}: other-{value}\n"
    return ""


def _run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: str,
    path: str,
) -> tuple[int, str]:
    extra, overrides, how = PATHS[path]
    value = SECRETS[key]
    variable, inner = ENV_OF[key]
    if how == "env":
        monkeypatch.setenv(variable, value if inner is None else json.dumps({inner: value}))
    elif how == "bad env JSON":
        monkeypatch.setenv(variable, value if inner is None else f'{{"{inner}": "{value}", oops')
        if inner is None:  # the token is no JSON: break it the way it can break (a space)
            monkeypatch.setenv(variable, f"{value} {value}")
    elif how == "--set":
        overrides = [f"{key}={value}"]
    argv = ["run", APP, "--set", f"state.dir={tmp_path / 'state'}"]
    if how in ("env", "bad env JSON", "--set"):
        # no file: the environment's settings come first in what the model is given, so an
        # error that echoes its input shows the secret within its first characters
        argv += [f"--set={k}={v}" for k, v in BASE.items()]
    else:
        # the secret first, for the same reason
        config = tmp_path / "app.yaml"
        base = "".join(f"{k}: {v}\n" for k, v in BASE.items())
        config.write_text(_secret_lines(key, how) + base + extra)
        argv += ["--config", str(config)]
    for item in overrides:
        argv += ["--set", item]
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.err + captured.out


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("key", list(SECRETS))
def test_no_config_error_prints_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], key: str, path: str
) -> None:
    for name in ("PLATFORM_STREAMS_BOOTSTRAP", "PLATFORM_STREAMS_BOOTSTRAP_SERVERS"):
        monkeypatch.delenv(name, raising=False)
    code, output = _run(tmp_path, monkeypatch, capsys, key, path)
    assert code == 2, output
    value = SECRETS[key]
    core = value.split("-", 1)[1]  # a YAML error could quote a part of the value
    assert value not in output and core not in output, output
    errors = [line for line in output.splitlines() if "error:" in line]
    assert len(errors) == 1, output


def test_python_api_validation_errors_do_not_show_the_input() -> None:
    # pydantic prints the rejected input; a cross-field error's input is every setting
    with pytest.raises(ValidationError) as info:
        StreamsConfig(
            application_id="a",
            bootstrap_servers="h:1",
            heartbeat_interval_ms=7000,
            session_timeout_ms=6000,
            http_auth_token="tok-SEKRIT-api",  # type: ignore[arg-type]
            consumer_config={"sasl.password": "pw-SEKRIT-api"},
        )
    assert "SEKRIT" not in str(info.value) and "SEKRIT" not in repr(info.value)
    assert "heartbeat_interval_ms" in str(info.value)


def test_an_app_plugins_config_file_with_a_yaml_error_does_not_quote_the_secret(tmp_path: Path) -> None:
    # `apps validate` and PLATFORM_STREAMS_APP_CONFIG=@file read app configs (streams settings
    # included) with their own loader
    from platform_streams.apps import load_config_file
    from platform_streams.errors import StreamsConfigError

    path = tmp_path / "app.yaml"
    path.write_text("streams:\n  http.auth.token: tok-SEKRIT-apps: x: [\n")
    with pytest.raises(StreamsConfigError) as info:
        load_config_file(path)
    assert "SEKRIT" not in str(info.value) and "line 2" in str(info.value)


def test_an_app_plugins_field_errors_do_not_echo_a_secret_fields_value() -> None:
    from pydantic import BaseModel

    from platform_streams.apps import field_errors

    class Model(BaseModel):
        db_password: int
        retries: int

    with pytest.raises(ValidationError) as info:
        Model(db_password="pw-SEKRIT-app", retries="x")  # type: ignore[arg-type]
    errors = {error.field: error.value for error in field_errors(info.value)}
    assert errors == {"db_password": None, "retries": "x"}
