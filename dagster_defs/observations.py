"""What the health sensor records on the asset pages: an application's numbers over time.

Numeric metadata of ``AssetObservation`` events is a time series per key (one value per
tick, listed on the asset's Events page); the sensor therefore observes, every tick:

* the **app**: records/s in (processed, from the workers' ``/state``) and out (growth of its
  output topics' log ends), consumer lag, end-to-end latency p99, restored, dead-letter and
  dropped records, workers alive -- plus links (``MetadataValue.url``) to each worker's
  endpoint and, when a Grafana address is configured, to the overview dashboard;
* each **topic**: records ever written (the sum of its log end offsets) and records/s, with a
  ``data_version`` of that sum, so Dagster's automation sees a topic change when it grows;
* each **store**: its entry count (RocksDB's ``estimate-num-keys``, summed over the workers).

Rates come from the difference with the previous tick, kept in the sensor's cursor.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

__all__ = ["WorkerMetrics", "app_metadata", "grafana_dashboard_url", "parse_samples", "rate"]

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_E2E_BUCKET = "kafka_streams_processor_node_record_e2e_latency_seconds_bucket"
_TOTALS = {
    "restored": "kafka_streams_task_restore_total",
    "dead_letter": "kafka_streams_task_dead_letter_records_total",
    "dropped": "kafka_streams_task_dropped_records_total",
}
#: the dashboard the app asset links to (grafana/dashboards/platform-streams-overview.json)
OVERVIEW_DASHBOARD_UID = "ps-overview"


def parse_samples(text: str) -> Iterable[tuple[str, dict[str, str], float]]:
    """``(name, labels, value)`` of every sample of a Prometheus text exposition."""
    for line in text.splitlines():
        found = _SAMPLE.match(line) if line and not line.startswith("#") else None
        if found is None:
            continue
        try:
            value = float(found.group(3))
        except ValueError:
            continue
        yield found.group(1), dict(_LABEL.findall(found.group(2) or "")), value


@dataclass
class WorkerMetrics:
    """The workers' counters and histograms that the asset plots need, summed over workers."""

    totals: dict[str, float] = field(default_factory=lambda: dict.fromkeys(_TOTALS, 0.0))
    store_entries: dict[str, float] = field(default_factory=dict)
    e2e_buckets: dict[float, float] = field(default_factory=dict)

    def add(self, text: str) -> None:
        names = {v: k for k, v in _TOTALS.items()}
        for name, labels, value in parse_samples(text):
            if name in names:
                self.totals[names[name]] += value
            elif name == "kafka_streams_state_estimate_num_keys" and "store" in labels:
                self.store_entries[labels["store"]] = self.store_entries.get(labels["store"], 0.0) + value
            elif name == _E2E_BUCKET and "le" in labels:
                le = float(labels["le"])
                self.e2e_buckets[le] = self.e2e_buckets.get(le, 0.0) + value

    def e2e_p99_ms(self) -> float | None:
        """The 99th percentile's bucket bound, in ms (None before any record went through)."""
        bounds = sorted(self.e2e_buckets)
        total = self.e2e_buckets.get(math.inf, 0.0)
        if not total:
            return None
        for le in bounds:
            if self.e2e_buckets[le] >= 0.99 * total:
                return None if math.isinf(le) else round(le * 1000, 3)
        return None


def rate(now: float, before: float | None, elapsed_s: float | None) -> float | None:
    """Per-second growth since the previous tick (None on the first tick or after a reset)."""
    if before is None or elapsed_s is None or now < before:
        return None
    return round((now - before) / max(elapsed_s, 1e-6), 3)


def _number(value: float | int | None) -> Any:
    return dg.MetadataValue.null() if value is None else value


def grafana_dashboard_url(grafana_url: str, application_id: str) -> str:
    query = urllib.parse.urlencode({"var-application_id": application_id})
    return f"{grafana_url.rstrip('/')}/d/{OVERVIEW_DASHBOARD_UID}?{query}"


def app_metadata(
    numbers: Mapping[str, float | int | None],
    endpoints: Mapping[str, str],
    grafana_url: str | None,
    application_id: str,
) -> dict[str, Any]:
    """The app observation's metadata: the numbers (null when unknown) and the links."""
    metadata: dict[str, Any] = {name: _number(value) for name, value in numbers.items()}
    for client_id, endpoint in sorted(endpoints.items()):
        metadata[f"endpoint {client_id}"] = dg.MetadataValue.url(endpoint)
    if grafana_url:
        metadata["grafana_dashboard"] = dg.MetadataValue.url(
            grafana_dashboard_url(grafana_url, application_id)
        )
    return metadata
