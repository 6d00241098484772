"""The registry suite's Schema Registry is the session's ``registry_url`` (tests/conftest.py),
shared with the Spark and Dagster tests that read and write registry formats."""
