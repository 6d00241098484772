"""Side-by-side benchmarks: workloads x engines on one broker, results in ``bench/RESULTS.md``.

Run ``python bench/run.py --help``. Every engine run is a fresh subprocess (so CPU time and
peak RSS are that run's alone) reading the same pre-produced input; the table reports the
median of the repeats and each engine's ratio to the raw confluent-kafka loop.
"""
