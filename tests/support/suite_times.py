"""Print the wall time each suite (a directory under ``tests/``) took, at the end of a run.

Why: CI has a time budget, and ``make test`` runs two pytest processes side by side; the
per-suite sums say where each side's minutes go (``--durations`` lists only the slowest
tests, not the suites that add up from many short ones). Setup and teardown count with the
test that triggered them, so a session fixture's start-up (a JVM broker, a registry, a Spark
cluster) is charged to the first suite that needed it.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import PurePosixPath

import pytest

_seconds: defaultdict[str, float] = defaultdict(float)
_tests: defaultdict[str, int] = defaultdict(int)


def suite_of(nodeid: str) -> str:
    """``tests/integration/test_x.py::test_y[kafka]`` -> ``tests/integration``."""
    parts = PurePosixPath(nodeid.split("::", 1)[0]).parts
    return "/".join(parts[:2]) if len(parts) > 2 else (parts[0] if parts else nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    suite = suite_of(report.nodeid)
    _seconds[suite] += report.duration
    if report.when == "call" or (report.when == "setup" and report.skipped):
        _tests[suite] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _seconds:
        return
    terminalreporter.section("time per suite")
    for suite, seconds in sorted(_seconds.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{seconds:8.1f}s  {_tests[suite]:5d} tests  {suite}")
    terminalreporter.write_line(f"{sum(_seconds.values()):8.1f}s  in all")
