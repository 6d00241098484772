"""Development tools a production image need not import: local brokers for the CLI's
``broker`` command, the demo, the tests and the benchmarks (:mod:`.brokers`).

Production code never imports this package (an import-linter contract in pyproject.toml).
"""
