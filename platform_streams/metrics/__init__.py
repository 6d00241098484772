"""Metrics: the only package that imports prometheus_client.

Kafka Streams' metric groups, names and tags, exported with Prometheus conventions
(``docs/metrics.md`` has the full mapping, generated from :data:`CATALOG`). Recorders are
attached to each worker by :class:`StreamsMetrics`; the hot path pays one observer call
per loop iteration and nothing per record at the default INFO level.
"""

from platform_streams.metrics.catalog import CATALOG, Level, MetricSpec, mapping_table
from platform_streams.metrics.streams_metrics import StreamsMetrics

__all__ = ["CATALOG", "Level", "MetricSpec", "StreamsMetrics", "mapping_table"]
