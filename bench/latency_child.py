"""A latency run's engine child: ``python -m bench.latency_child '<RunSpec as JSON>'``.

bench/latency.py measures stateless and count under three guarantees each; the 100 ms and
exactly-once variants of the stateless workload exist only here, so they are registered in
:data:`bench.workloads.WORKLOADS` of this child before :func:`bench.child.main` runs the
engine. Imported by both interpreters: stdlib and bench modules only.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from bench import child
from bench.workloads import WORKLOADS

#: the workloads bench/latency.py measures that bench/run.py does not
EXTRA_WORKLOADS = {
    "filter_map_json_alos_100ms": replace(
        WORKLOADS["filter_map_json"],
        name="filter_map_json_alos_100ms",
        description="the stateless workload, at-least-once, 100 ms commits",
        commit_interval_ms=100,
    ),
    "filter_map_json_eos_100ms": replace(
        WORKLOADS["filter_map_json"],
        name="filter_map_json_eos_100ms",
        description="the stateless workload under exactly-once, 100 ms commits",
        guarantee="exactly_once",
        commit_interval_ms=100,
    ),
}

if __name__ == "__main__":
    WORKLOADS.update(EXTRA_WORKLOADS)
    child.main(sys.argv[1])
