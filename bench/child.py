"""One measured run, in a fresh process: ``python -m bench.child '<RunSpec as JSON>'``.

Runs under the main virtualenv (raw_confluent, platform_streams) or ``bench/.venv-quix``
(quixstreams); prints a :class:`~bench.common.RunResult` as JSON on its last line.
"""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import asdict

from bench.common import RunResult, RunSpec, Timer, peak_rss_mb
from bench.workloads import WORKLOADS

#: engine -> module with ``run(workload, spec, timer) -> dict`` (kept in step with bench/run.py)
MODULES = {
    "raw_confluent": "bench.engine_raw",
    "quixstreams": "bench.engine_quix",
    "platform_streams": "bench.engine_ps",
    "kafka_streams": "bench.engine_java",
}
#: engines that run only when a script asks for them (bench/bytewax_bench.py), not by default
OPTIONAL_MODULES = {"bytewax": "bench.engine_bytewax"}


def main(spec_json: str) -> None:
    spec = RunSpec(**json.loads(spec_json))
    timer = Timer()
    module = importlib.import_module({**OPTIONAL_MODULES, **MODULES}[spec.engine])
    extra = module.run(WORKLOADS[spec.workload], spec, timer)
    # an engine in another process (kafka_streams: a JVM) measures itself and reports it
    result = RunResult(
        spec.workload,
        spec.engine,
        extra.get("records", spec.records),
        extra.get("wall_s", timer.wall_s),
        extra.get("cpu_s", timer.cpu_s),
        extra.get("peak_rss_mb", peak_rss_mb()),
        restored_entries=extra.get("restored_entries", 0),
    )
    print(json.dumps(asdict(result)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
