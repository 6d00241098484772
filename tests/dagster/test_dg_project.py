"""dagster_defs as a ``dg`` component library, in a fresh dg project as a user makes one.

``dg list components`` finds ``dagster_defs.StreamAppComponent`` through the package's
``dagster_dg_cli.registry_modules`` entry point (pyproject.toml); ``dg scaffold defs`` writes
``defs/<app>/defs.yaml``; ``dg check yaml`` validates it; ``dg.load_from_defs_folder`` loads
two apps sharing a topic as ONE topic asset, with a YAML ``translation`` applied.

Where the checkout is not installed with that entry point yet (a venv installed before it was
added), the test registers the entry point of pyproject.toml in a throwaway ``.dist-info`` on
``PYTHONPATH``: either way the entry point under test is the one pyproject.toml declares.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import dagster as dg
import pytest
import yaml

pytestmark = pytest.mark.dagster

REPO = Path(__file__).resolve().parents[2]
GROUP = "dagster_dg_cli.registry_modules"
DG = Path(sys.executable).parent / "dg"
AUDIT = {
    "type": "dagster_defs.StreamAppComponent",
    "attributes": {
        "name": "audit",
        "app": "orders",
        "app_config": {"orders_topic": "big-orders", "big_orders_topic": "audited", "counts_topic": None,
                       "by_customer_topic": "big-by-customer"},
        "streams": {"application_id": "audit-app"},
        "translation": {"group_name": "audit_{{ kind }}", "tags": {"team": "risk"}},
    },
}  # fmt: skip
PROJECT_TOML = """
[project]
name = "my-streams"
version = "0.1.0"
dependencies = ["platform-streams[dagster]"]

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "my_streams"
"""
DEFINITIONS = """
from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
"""


def _declared_entry_points() -> dict[str, str]:
    document = tomllib.loads((REPO / "pyproject.toml").read_text())
    return dict(document["project"]["entry-points"][GROUP])


def _entry_point_dir(tmp_path: Path) -> Path | None:
    """A throwaway distribution carrying pyproject's entry point, unless it is installed."""
    declared = _declared_entry_points()
    installed = {e.name: e.value for e in entry_points(group=GROUP)}
    if all(installed.get(k) == v for k, v in declared.items()):
        return None
    info = tmp_path / "entry" / "platform_streams_dg_entry-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: platform-streams-dg-entry\nVersion: 0\n")
    lines = "".join(f"{k} = {v}\n" for k, v in declared.items())
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{lines}")
    return info.parent


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "my-streams"
    (root / "my_streams" / "defs").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PROJECT_TOML)
    (root / "my_streams" / "__init__.py").write_text("")
    (root / "my_streams" / "defs" / "__init__.py").write_text("")
    (root / "my_streams" / "definitions.py").write_text(DEFINITIONS)
    paths = [str(REPO), str(root)]
    extra = _entry_point_dir(tmp_path)
    if extra is not None:
        paths.append(str(extra))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])}
    env["PATH"] = f"{DG.parent}{os.pathsep}{env.get('PATH', '')}"
    return root, env


def _dg(project: tuple[Path, dict[str, str]], *args: str) -> subprocess.CompletedProcess[str]:
    root, env = project
    done = subprocess.run(
        [str(DG), *args], cwd=root, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, f"dg {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def test_dg_lists_scaffolds_checks_and_loads_shared_topics(
    project: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, env = project
    listed = json.loads(_dg(project, "list", "components", "--json").stdout)
    assert "dagster_defs.StreamAppComponent" in {item["key"] for item in listed["items"]}

    _dg(project, "scaffold", "defs", "dagster_defs.StreamAppComponent", "shop", "--app", "orders")
    shop = yaml.safe_load((root / "my_streams" / "defs" / "shop" / "defs.yaml").read_text())
    assert shop == {
        "type": "dagster_defs.StreamAppComponent",
        "attributes": {"name": "shop", "app": "orders", "streams": {"application_id": "shop"}, "workers": 1},
    }
    # dg check yaml validates one file per component type, so each case has one file.
    good = (root / "my_streams" / "defs" / "shop" / "defs.yaml").read_text()
    (root / "my_streams" / "defs" / "shop" / "defs.yaml").write_text(good.replace("workers: 1", "workerz: 1"))
    bad = subprocess.run(
        [str(DG), "check", "yaml"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert bad.returncode != 0 and "workerz" in bad.stdout + bad.stderr, bad
    (root / "my_streams" / "defs" / "shop" / "defs.yaml").write_text(good)
    _dg(project, "check", "yaml")

    (root / "my_streams" / "defs" / "audit").mkdir()
    (root / "my_streams" / "defs" / "audit" / "defs.yaml").write_text(yaml.safe_dump(AUDIT))
    monkeypatch.syspath_prepend(str(root))
    defs = dg.load_from_defs_folder(path_within_project=root / "my_streams")
    none = {k: dg.ResourceDefinition.none_resource() for k in ("kafka", "streams_deployment", "spark")}
    graph = dg.Definitions.merge(defs, dg.Definitions(resources=none)).get_repository_def().asset_graph
    big = graph.get(dg.AssetKey(["kafka", "big_orders"]))  # one asset, written by shop, read by audit
    assert big.parent_keys == {dg.AssetKey(["shop"])} and big.child_keys == {dg.AssetKey(["audit"])}
    audit = graph.get(dg.AssetKey(["audit"]))
    assert audit.group_name == "audit_app" and audit.tags["team"] == "risk"
    assert graph.get(dg.AssetKey(["shop"])).group_name == "shop"  # the other app's translation
