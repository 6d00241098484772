"""Spark jobs of the platform: changelog compaction into state snapshots, and backfill.

The only package of platform_streams that imports pyspark (install the ``spark`` extra;
PySpark 4 needs Java 17+). Workers never import it: they read snapshots through
:mod:`platform_streams.state.snapshots` and :mod:`platform_streams.state.snapshot_restore`.

* :func:`spark_session` -- local mode by default, any master by argument or
  ``$PLATFORM_STREAMS_SPARK_MASTER``;
* :func:`compact_changelog` / :func:`compact_application` -- latest value per key of a
  store's changelog, written as SST snapshots (+ a Parquet copy) with manifests;
* :func:`backfill` -- an application's own topology over historical Kafka or Parquet input,
  sub-topology by sub-topology, with repartition topics as Spark shuffles.

The driver plans Kafka offset ranges (:mod:`.kafka_ranges`); Spark reads them through its
own Kafka source when the session has the connector (:mod:`.connector` fetches it), else
with confluent-kafka inside the tasks (:mod:`.kafka_source` chooses).
"""

from platform_streams.ops.spark.backfill import (
    BackfillResult,
    KafkaInput,
    KafkaOutput,
    ParquetInput,
    ParquetOutput,
    backfill,
)
from platform_streams.ops.spark.compaction import (
    CompactionResult,
    compact_application,
    compact_changelog,
    snapshot_stores,
)
from platform_streams.ops.spark.kafka_ranges import OffsetRange, plan_offset_ranges
from platform_streams.ops.spark.session import spark_job_session, spark_session

__all__ = [
    "BackfillResult",
    "CompactionResult",
    "KafkaInput",
    "KafkaOutput",
    "OffsetRange",
    "ParquetInput",
    "ParquetOutput",
    "backfill",
    "compact_application",
    "compact_changelog",
    "plan_offset_ranges",
    "snapshot_stores",
    "spark_job_session",
    "spark_session",
]
