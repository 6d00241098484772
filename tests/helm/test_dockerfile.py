"""The worker image's Dockerfile, checked without a Docker engine (none runs here).

What can be checked is checked for real: the instructions are parsed and held to the
conventions the chart relies on (non-root numeric user equal to the chart's runAsUser,
exec-form ``platform-streams`` entrypoint, the HTTP port the chart probes, pinned base
tags), and the build stage's ``pip install .`` is replayed on exactly the build context
``.dockerignore`` lets through, so a file the package needs but the context drops fails
here rather than in a registry build.
"""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.helm.chart_support import CHART, REPO

pytestmark = pytest.mark.helm


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in (REPO / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def _included(relative: str, patterns: list[str]) -> bool:
    """``.dockerignore`` semantics (last matching pattern wins; ``!`` re-includes)."""
    keep = True
    parts = relative.split("/")
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        body = body.rstrip("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(prefix, body) for prefix in prefixes) or body == "**":
            keep = negate
    return keep


def _dockerignore() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_the_image_runs_platform_streams_as_the_chart_s_non_root_user() -> None:
    steps = _instructions()
    bases = [args.split()[0] for keyword, args in steps if keyword == "FROM"]
    assert bases and all(":" in b and not b.endswith(":latest") for b in bases), bases
    assert bases[-1] == "python:3.11-slim"
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert ">=3.11" in requires
    users = [args for keyword, args in steps if keyword == "USER"]
    assert users == ["10001:10001"], users
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    uid, gid = (int(x) for x in users[0].split(":"))
    assert (
        uid != 0
        and values["podSecurityContext"]["runAsUser"] == uid == values["securityContext"]["runAsUser"]
    )
    assert values["podSecurityContext"]["runAsGroup"] == gid == values["podSecurityContext"]["fsGroup"]
    last_user = max(i for i, (k, _) in enumerate(steps) if k == "USER")
    assert all(k != "RUN" for k, _ in steps[last_user:]), "RUN after USER would run as the app user"
    (entrypoint,) = [args for keyword, args in steps if keyword == "ENTRYPOINT"]
    assert entrypoint == '["platform-streams"]'  # exec form: SIGTERM reaches the worker
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["platform-streams"] == "platform_streams.cli:main"
    (exposed,) = [args for keyword, args in steps if keyword == "EXPOSE"]
    assert int(exposed) == values["http"]["port"]
    assert not [k for k, _ in steps if k == "ADD"], "COPY, not ADD"
    for keyword, args in steps:
        if keyword == "RUN" and "pip install" in args:
            assert "--no-cache-dir" in args


def test_the_build_context_is_enough_to_build_the_package(tmp_path: Path) -> None:
    """Replays the build stage: copy what .dockerignore lets through and what COPY names,
    then ``pip wheel .`` there, with build isolation as in the image (PyPI's setuptools)."""
    patterns = _dockerignore()
    context = tmp_path / "context"
    copied = 0
    for keyword, args in _instructions():
        if keyword != "COPY" or args.startswith("--from"):
            continue
        *sources, _dest = args.split()
        for source in sources:
            path = REPO / source
            assert path.exists(), f"COPY {source}: no such file in the repository"
            files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
            for file in files:
                relative = file.relative_to(REPO).as_posix()
                if not _included(relative, patterns):
                    continue
                target = context / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(file, target)
                copied += 1
    assert (context / "platform_streams" / "cli.py").is_file() and copied > 50
    assert not list(context.rglob("__pycache__")), ".dockerignore must drop bytecode caches"
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(wheels),
            ".",
        ],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("platform_streams-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        assert "platform-streams = platform_streams.cli:main" in archive.read(entry_points).decode()
    assert "platform_streams/cli.py" in names
    # the example is not installed as a top-level package: the image copies it into /app
    assert not [n for n in names if n.startswith("examples/")]
    assert ("COPY", "examples ./examples") in _instructions()
