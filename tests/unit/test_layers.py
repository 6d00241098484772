"""The package's layer contracts (pyproject.toml ``[tool.importlinter]``) hold.

Runs ``lint-imports`` as ``make lint`` does, so CI (``make test``) enforces that the DSL's
run-time processors (``dsl/internals``) never import its public API, and that the engine
below the DSL never imports the DSL.
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
