"""Spark's own writers on ``s3://`` snapshot locations: Hadoop's s3a connector, set up like the store.

The snapshot store reaches S3 through obstore; Spark's writers (the Parquet copy) reach it
through Hadoop's ``S3AFileSystem`` (``hadoop-aws``, fetched with Spark's Kafka connector by
:mod:`.connector`), under the ``s3a://`` scheme :meth:`S3SnapshotStore.uri` gives. So that
both land in the same bucket of the same server, the store's endpoint, region and addressing
style are copied into the session's Hadoop configuration, scoped to the store's bucket
(``fs.s3a.bucket.<bucket>.*``). Credentials are never copied: S3A's default provider chain
reads ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN`` from each JVM's
own environment (then an instance role), as the executors' obstore does, so they travel in
no job configuration.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import SparkSession

from platform_streams.state.snapshots import SnapshotStore

__all__ = ["parquet_writable", "s3a_settings"]

log = logging.getLogger(__name__)

_S3A_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"


def s3a_settings(store: Any) -> dict[str, str]:
    """The Hadoop settings that point s3a at ``store``'s bucket as obstore reaches it (no secrets)."""
    scope = f"fs.s3a.bucket.{store.bucket}."
    out = {scope + "path.style.access": "true" if store.path_style else "false"}
    if store.endpoint:
        out[scope + "endpoint"] = store.endpoint
        out[scope + "connection.ssl.enabled"] = "false" if store.endpoint.startswith("http://") else "true"
    if store.region:
        out[scope + "endpoint.region"] = store.region
    return out


def parquet_writable(spark: SparkSession, target: SnapshotStore) -> bool:
    """Whether Spark's own writer can write the Parquet copy into ``target``; sets s3a up for it.

    Checked before the job uploads anything, so a missing connector costs the analysts'
    copy (with a warning saying why), never the snapshots.
    """
    if not target.uri("").startswith("s3a://"):
        return True
    jvm: Any = spark.sparkContext._jvm
    try:
        # spark.jars are on the context class loader (Spark's and Hadoop's lookups use it),
        # not on the one a bare Class.forName from the py4j gateway uses
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(_S3A_CLASS, False, loader)
    except Exception:
        log.warning(
            "no Parquet copy at %s: Hadoop's s3a connector (hadoop-aws) is not on Spark's classpath "
            "(python -m platform_streams.ops.spark.connector fetches it)",
            target.uri(""),
        )
        return False
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    for key, value in s3a_settings(target).items():
        hadoop.set(key, value)
    return True
