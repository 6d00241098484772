"""Bytewax 0.21.1 beside the other engines: the same inputs, workloads and output checks.

    python bench/bytewax_bench.py                                 # 200,000 records, 1 repeat
    python bench/bytewax_bench.py --records 1000000 --repeats 3 --engines bytewax,platform_streams

Bytewax pins nothing platform_streams needs, but it is not installed in the project's
virtualenv: its children run in ``bench/.venv-bytewax`` (created here on first use with
``python3.11 -m venv`` and ``bytewax[kafka]==0.21.1``). The app is in bench/engine_bytewax.py
(recovery on), run like every engine by bench/run.py's ``run_child`` (bench/child.py knows it
as an optional engine, outside bench/run.py's defaults). Each
run's output is read back and checked (bench/verify.py) and the table is bench/run.py's.
Only at-least-once workloads: Bytewax has no exactly-once Kafka sink.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import verify  # noqa: E402
from bench.common import RunSpec  # noqa: E402
from bench.run import broker, ensure_quix_python, machine, produce_input, run_child, table  # noqa: E402
from bench.tables import Results  # noqa: E402
from bench.workloads import WORKLOADS  # noqa: E402
from platform_streams.kafka import KafkaAdmin, TopicSpec  # noqa: E402

BYTEWAX_VERSION = "0.21.1"
#: the one broker of a run (the embedded one, or the one ``--bootstrap`` names), as tables name it
_BROKER = "broker"
BYTEWAX_VENV = ROOT / "bench" / ".venv-bytewax"


def ensure_bytewax_python() -> str:
    """The interpreter of ``bench/.venv-bytewax``, created with Bytewax on first use."""
    python = BYTEWAX_VENV / "bin" / "python"
    if not (BYTEWAX_VENV / ".installed").exists():
        print(f"creating {BYTEWAX_VENV} with bytewax=={BYTEWAX_VERSION} ...", flush=True)
        subprocess.run(["python3.11", "-m", "venv", str(BYTEWAX_VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"bytewax[kafka]=={BYTEWAX_VERSION}", "orjson"],
            check=True,
        )
        (BYTEWAX_VENV / ".installed").touch()
    return str(python)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--workloads", default="filter_map_json,count")
    parser.add_argument("--engines", default="raw_confluent,quixstreams,bytewax,platform_streams")
    parser.add_argument("--bootstrap", default=os.environ.get("PLATFORM_STREAMS_BOOTSTRAP_SERVERS") or None)
    args = parser.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    pythons = {e: sys.executable for e in engines}
    if "quixstreams" in engines:
        pythons["quixstreams"] = ensure_quix_python()
    if "bytewax" in engines:
        pythons["bytewax"] = ensure_bytewax_python()
    #: keyed as bench/tables.py's ``Results``: (broker, workload, engine); one broker here
    results: Results = {}
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}", flush=True)
    with broker(args.bootstrap) as bootstrap, KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        for name in (w for w in args.workloads.split(",") if w):
            workload = WORKLOADS[name]
            source = produce_input(bootstrap, admin, workload.input, args.records, args.partitions)
            answer = verify.Answer(workload, args.records, source.base_ts)
            for repeat in range(args.repeats):
                for engine in engines if repeat % 2 == 0 else engines[::-1]:
                    app_id = f"bench-{name}-{engine}-{uuid.uuid4().hex[:8]}"
                    admin.create_topics([TopicSpec(f"{app_id}-out", args.partitions)])
                    state_dir = tempfile.mkdtemp(prefix="ps-bench-bytewax-")
                    spec = RunSpec(
                        name,
                        engine,
                        bootstrap,
                        source.topic,
                        f"{app_id}-out",
                        args.records,
                        state_dir,
                        app_id,
                        input_ends={str(p): end for p, end in source.ends.items()},
                    )
                    load = f"{os.getloadavg()[0]:.1f}"
                    try:
                        result = run_child(spec, pythons[engine])
                    finally:
                        shutil.rmtree(state_dir, ignore_errors=True)
                    result.note = load
                    result.outputs = answer.check(bootstrap, f"{app_id}-out", args.partitions, engine)
                    results.setdefault((_BROKER, name, engine), []).append(result)
                    print(
                        f"  {name} run {repeat + 1} {engine}: {result.records_per_s:,.0f} records/s, "
                        f"{result.cpu_s:.1f}s CPU, {result.peak_rss_mb:.0f} MB, {result.outputs:,} outputs "
                        f"(checked), load {load}",
                        flush=True,
                    )
    print()
    print(table(results, _BROKER))
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
