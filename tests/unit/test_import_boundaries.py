"""The dependency boundaries of DEVELOPERS.md / docs/architecture.md, checked on the source.

Only ``platform_streams/kafka/`` imports confluent_kafka, only the RocksDB backend
(``state/rocksdb.py`` and its column families, ``state/rocksdb_columns.py``) imports
rocksdict, only the metrics package imports prometheus_client and only the spark package
imports pyspark. Every ``import`` statement counts, also one inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: third-party package -> where it may be imported (paths relative to the checkout)
ALLOWED = {
    "rocksdict": (
        "platform_streams/state/rocksdb.py",
        "platform_streams/state/rocksdb_columns.py",
        "platform_streams/state/rocksdb_options.py",
    ),
    "confluent_kafka": ("platform_streams/kafka/",),
    "prometheus_client": ("platform_streams/metrics/",),
    "pyspark": ("platform_streams/ops/spark/",),
}


def _imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _sources() -> list[Path]:
    packages = (ROOT / "platform_streams", ROOT / "dagster_defs")
    return sorted(path for package in packages for path in package.rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_third_party_package_is_imported_only_behind_its_boundary(package: str) -> None:
    importers = [
        path.relative_to(ROOT).as_posix()
        for path in _sources()
        if package in _imported(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    ]
    assert importers, f"nothing imports {package}: the check would pass vacuously"
    outside = [path for path in importers if not path.startswith(ALLOWED[package])]
    assert outside == [], f"{package} imported outside {ALLOWED[package]}: {outside}"
