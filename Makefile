# The two commands a newcomer needs:
#   make demo   - set up and run the main job end to end (Apache Kafka where Java is)
#   make test   - set up and run the whole test suite (what CI runs)
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint typecheck bench clean oracle oracle-soak kafka kafka-jars soak s3-server registry-interop

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip >/dev/null
	$(BIN)/python -m pip install -e '.[dev,test,spark,s3,dagster,helm,embedded,schema-registry]'
	@# examples/ is not in the wheel: the checkout's root on this venv's path keeps the demo
	@# app and the orders plugin (examples.orders_app) importable from any directory.
	$(BIN)/python -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "platform-streams-checkout.pth").write_text(str(pathlib.Path.cwd()) + "\n")'
	touch $@

setup: $(BIN)/.installed

# The local broker of `make demo` and `make soak`: auto (Apache Kafka where Java and Maven
# are, else the embedded Tansu), kafka or tansu: `make demo BROKER=tansu`.
BROKER ?= auto

demo: setup
	$(BIN)/python -m examples.demo --broker $(BROKER)

# The suite runs as three pytest processes side by side (tools/test_sides.sh): the tests on
# Apache Kafka and the suites with servers of their own (a secured node, a Schema Registry,
# Spark), which mostly wait, beside all the rest on the embedded Tansu. pytest's 5
# ("no tests collected", e.g. a -k filter matched nothing) does not fail the build; any
# other non-zero status does. PYTEST_ARGS narrows a run.
test: setup
	@bash tools/test_sides.sh $(BIN)/python $(PYTEST_ARGS)

# Apache Kafka itself (Java 17 + Maven): its server jars come from Maven Central through
# tools/kafka/pom.xml into ~/.m2 (offline once there). `make kafka` runs one KRaft node
# (broker+controller) on a free port until Ctrl-C, then stops it and removes its data.
kafka-jars: setup
	$(BIN)/python -c "from platform_streams.dev.brokers.apache_jars import kafka_classpath; kafka_classpath()"

kafka: kafka-jars
	$(BIN)/python -m platform_streams.cli broker --broker kafka --port 0

lint: setup
	$(BIN)/ruff check platform_streams tests bench examples
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: setup
	$(BIN)/python bench/run.py

# The Java Kafka Streams oracle (tools/kafka-streams-oracle) and a long differential run
# against it (docs/oracle.md); `make test` runs a bounded one (tests/oracle, 200 cases).
oracle:
	cd tools/kafka-streams-oracle && mvn -q -B package

ORACLE_CASES ?= 10000
oracle-soak: setup oracle
	PYTHONPATH=. $(BIN)/python -m tests.oracle.soak --cases $(ORACLE_CASES) --out oracle-soak.jsonl

# The Java producer and consumer of the Schema Registry interop test (tools/registry-interop,
# Apicurio's serdes from Maven Central); tests/support/registry_interop.py builds it on first use.
registry-interop:
	cd tools/registry-interop && mvn -q -B package

# The soak run (soak/, docs/soak/): a steady input, two applications as worker processes,
# a seeded fault schedule for SOAK_MINUTES, then a check of the whole history. Exit 0 only
# when nothing was lost, wrong, duplicated or stuck; the report lands in soak-runs/<run>/.
# SOAK_SEED replays a schedule; BROKER picks the local broker (as for the demo);
# PLATFORM_STREAMS_BOOTSTRAP runs it on another broker.
SOAK_MINUTES ?= 60
soak: setup
	SOAK_MINUTES=$(SOAK_MINUTES) SOAK_BROKER=$(BROKER) PYTHONPATH=$(CURDIR) $(BIN)/python -m soak

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache

# Spark's Kafka connector and Hadoop's s3a connector jars (tools/spark-kafka/pom.xml, from
# Maven Central via mvn) into the per-user cache that spark_session puts on spark.jars; the
# Spark and Spark-cluster tests fetch them too.
.PHONY: spark-kafka
spark-kafka: setup
	$(BIN)/python -m platform_streams.ops.spark.connector

# The S3-compatible server of the snapshot-store tests (versitygw, built once with `go install`
# from the Go module proxy into ~/.cache/platform-streams/versitygw; its go.mod asks for Go 1.25).
s3-server: setup
	$(BIN)/python -m platform_streams.dev.servers.s3
