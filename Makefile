# The two commands a newcomer needs:
#   make demo   - set up and run the main job on the embedded defaults
#   make test   - set up and run the whole test suite (what CI runs)
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint typecheck bench clean kafka kafka-jars

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip >/dev/null
	$(BIN)/python -m pip install -e '.[dev,spark,dagster,helm]'
	touch $@

setup: $(BIN)/.installed

demo: setup
	$(BIN)/python -m examples.demo

# pytest exits 5 when it collected no test (e.g. a -k filter matched nothing): say so and
# do not fail the build for it; any other non-zero status fails. PYTEST_ARGS narrows a run.
test: setup
	@$(BIN)/python -m pytest -q -ra $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests"; exit 0; fi; exit $$status

# Apache Kafka itself (Java 17 + Maven): its server jars come from Maven Central through
# tools/kafka/pom.xml into ~/.m2 (offline once there). `make kafka` runs one KRaft node
# (broker+controller) on a free port until Ctrl-C, then stops it and removes its data.
kafka-jars: setup
	$(BIN)/python -c "from platform_streams.kafka.apache_jars import kafka_classpath; kafka_classpath()"

kafka: kafka-jars
	$(BIN)/python -m platform_streams.cli broker --broker kafka --port 0

lint: setup
	$(BIN)/ruff check platform_streams tests bench examples
	$(BIN)/mypy

bench: setup
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
