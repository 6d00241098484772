"""Local servers for the suites and the benchmarks: an S3 server (:mod:`.s3`), a Spark
standalone cluster (:mod:`.spark_cluster`), a Schema Registry (:mod:`.schema_registry`),
and the process marks that find every process they started (:mod:`.processes`).

Imported by name, each by the suite or benchmark that needs it (a server's own binaries
and jars are not installed everywhere); production code never imports them.
"""
