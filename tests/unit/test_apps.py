"""App plugins: discovery through entry points, field-level config errors, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from platform_streams.apps import AppConfigError, UnknownAppError, discover_apps, get_app
from platform_streams.cli import main


def test_the_example_plugin_is_installed_and_builds() -> None:
    installed = discover_apps()
    assert "orders" in installed.apps and not installed.broken
    plugin = get_app("orders")
    topology = plugin.build({"counts_topic": None})
    assert "orders-per-customer" not in str(topology.describe())
    assert "orders-per-customer" in str(plugin.build().describe())


def test_config_errors_name_every_field() -> None:
    with pytest.raises(AppConfigError) as caught:
        get_app("orders").validate_config({"big_order_amount": 0, "orders_topic": "", "colour": "red"})
    assert {e.field for e in caught.value.errors} == {"big_order_amount", "orders_topic", "colour"}
    with pytest.raises(UnknownAppError, match=r"installed: .*orders"):
        get_app("no-such-app")


def test_cli_apps_list_describe_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["apps", "list"]) == 0
    assert "orders" in capsys.readouterr().out
    assert main(["apps", "describe", "orders", "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["stores"] == ["orders-per-customer"] and described["source_topics"] == ["orders"]
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("big_order_amount: 250\n")
    bad.write_text("big_order_amount: -1\nunknown: 1\n")
    assert main(["apps", "validate", "orders", str(good)]) == 0
    assert "OK" in capsys.readouterr().out
    assert main(["apps", "validate", "orders", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "big_order_amount: Input should be greater than 0 (got -1)" in out and "unknown:" in out
