"""The package's layer contracts (pyproject.toml ``[tool.importlinter]``) hold.

Runs ``lint-imports`` as ``make lint`` does, so CI (``make test``) enforces that the DSL's
run-time processors (``dsl/internals``) never import its public API, that the engine
below the DSL never imports the DSL, and that the runtime never imports its add-ons
(``server``, ``query``, ``metrics``), which see it through ``runtime/api.py``, and that
production code never imports the test driver (``platform_streams.testing``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if exe is None:
        pytest.fail("lint-imports (import-linter, a dev dependency) is not installed")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(
        [exe, "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_runtime_add_on_contract_is_declared() -> None:
    """The runtime/add-on contract is in the checked configuration (not only the code)."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    runtime = [c for c in contracts if c["source_modules"] == ["platform_streams.runtime"]]
    assert runtime, "no contract for platform_streams.runtime"
    assert set(runtime[0]["forbidden_modules"]) == {
        "platform_streams.server",
        "platform_streams.query",
        "platform_streams.metrics",
    }


def test_the_embedded_brokers_name_stays_in_the_kafka_layer() -> None:
    """Production code speaks of broker capabilities (probed at start), not of a product:
    the embedded test broker's name lives in ``platform_streams/kafka/``, the development
    launchers (``platform_streams/dev/``), docs and tests."""
    named = [
        str(path.relative_to(ROOT))
        for package in ("platform_streams", "dagster_defs")
        for path in sorted((ROOT / package).rglob("*.py"))
        if "tansu" in path.read_text(encoding="utf-8").lower()
        and not path.is_relative_to(ROOT / "platform_streams" / "kafka")
        and not path.is_relative_to(ROOT / "platform_streams" / "dev")
    ]
    assert named == []
