"""The compaction job as a separate driver process: ``python -m tests.spark_cluster.compact_driver``.

A test runs it like a user runs a Spark job against a cluster (its own driver, its own
JVM), so it can also be killed in the middle. Argument: one JSON object with master,
bootstrap, application_id, store, location and optionally source_topics. Prints the
published manifests as one JSON line.
"""

from __future__ import annotations

import json
import sys

from platform_streams.ops.spark.compaction import compact_changelog
from platform_streams.ops.spark.session import spark_session


def main() -> None:
    job = json.loads(sys.argv[1])
    spark = spark_session(
        job["master"],
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
        result = compact_changelog(
            spark,
            {"bootstrap.servers": job["bootstrap"]},
            job["application_id"],
            job["store"],
            job["location"],
            source_topics=job.get("source_topics"),
            parquet=False,
        )
        print(json.dumps({"manifests": [m.model_dump() for m in result.manifests], "reader": result.reader}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
