"""The rule generator (``grafana/generate_rules.py``, a script, not a package) for tests,
and the short ``for:`` durations and windows the live tests render the rules with."""

from __future__ import annotations

import sys

from tests.grafana.dashboard_support import REPO

sys.path.insert(0, str(REPO / "grafana"))
import generate_rules

__all__ = ["SHORT", "generate_rules"]

#: The committed expressions and thresholds, with ``for:`` and windows a test can wait for.
SHORT = generate_rules.Tuning(
    not_running_for="2s",
    error_for="1s",
    thread_failed_window="5m",
    lag_window="10s",
    lag_growing_for="5s",
    latency_window="10s",
    latency_for="2s",
    dropped_window="10s",
    dropped_for="2s",
    compat_window="10s",
    rocksdb_for="1s",
)
