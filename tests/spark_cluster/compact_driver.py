"""The compaction job's driver as a process of its own: ``python -m tests.spark_cluster.compact_driver``.

A test runs it as a user runs a Spark job against a cluster (its own driver JVM, executors
on the cluster's workers), so that it can also be killed in the middle. ``JOB`` is one JSON
object with bootstrap, application_id, store, location and optionally source_topics and
parquet (write the Parquet copy too, and read it back through Spark: ``parquet_rows``).
With ``--serve`` the driver keeps its session (and its executors, which take minutes to
start on a loaded two-core machine) and runs one job per line read from stdin. Each
result is one line: ``RESULT <json>``.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

RESULT = "RESULT "


def _run(spark: Any, job: dict[str, Any]) -> dict[str, Any]:
    from platform_streams.ops.spark.compaction import compact_changelog

    result = compact_changelog(
        spark,
        {"bootstrap.servers": job["bootstrap"]},
        job["application_id"],
        job["store"],
        job["location"],
        source_topics=job.get("source_topics"),
        parquet=bool(job.get("parquet")),
    )
    out = {"manifests": [m.model_dump() for m in result.manifests], "reader": result.reader}
    if result.parquet_uri:
        # read back by Spark's own reader, from the bucket (s3a), as an analyst would
        rows = spark.read.parquet(result.parquet_uri).select("partition", "key", "value").collect()
        out["parquet_uri"] = result.parquet_uri
        out["parquet_rows"] = sorted([r.partition, bytes(r.key).hex(), bytes(r.value).hex()] for r in rows)
    return out


def main(argv: list[str]) -> None:
    # imported here: the suite's conftest reads RESULT before it knows pyspark is installed
    from platform_streams.ops.spark.session import spark_session

    master, rest = argv[0], argv[1:]
    spark = spark_session(
        master,
        "platform-streams-cluster-test",
        {
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.default.parallelism": "2",
            "spark.sql.shuffle.partitions": "2",
        },
        ui=False,
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        jobs = sys.stdin if rest == ["--serve"] else rest
        for text in jobs:
            if not text.strip():
                continue
            try:
                out = _run(spark, json.loads(text))
            except Exception as exc:
                out = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
            print(RESULT + json.dumps(out), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
