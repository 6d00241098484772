"""Test modules outside packages need distinct file names.

pytest imports a test file in a directory without ``__init__.py`` under its bare file name
(rootdir-relative "prepend" import mode), so two such files named alike fail collection of
the whole run ("import file mismatch") -- and only when both are collected together, as
``make test`` does, never when each suite is run on its own.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_outside_packages_share_a_name() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if not (path.parent / "__init__.py").exists():
            by_name[path.name].append(str(path.relative_to(TESTS)))
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"
