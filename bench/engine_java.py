"""The Java Kafka Streams engine: the peer a Kafka user would pick instead of platform_streams.

The workload apps are Java (tools/kafka-streams-oracle/.../Bench.java, Kafka Streams from
Maven Central, built on first use with ``mvn package``) with default ``StreamsConfig``
except the workload's guarantee and commit interval and the harness's group timings. The
JVM measures itself (its clock starts when Kafka Streams first reaches RUNNING, or when a
restore starts, and stops when ``close()`` returns after the last input record) and reports
wall, CPU (every JVM thread) and peak RSS, which this child passes on instead of its own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.common import GROUP_TIMING, RunSpec, Timer
from bench.workloads import Workload

ORACLE_DIR = Path(__file__).resolve().parent.parent / "tools" / "kafka-streams-oracle"


def ensure_built() -> str:
    """The JVM classpath of tools/kafka-streams-oracle (this engine's app and the differential
    oracle of tests/oracle), built with Maven when missing or older than its sources: offline
    first (~/.m2 already holds the dependencies), else online (a clean machine: ~1 min)."""
    jar, lib = ORACLE_DIR / "target" / "kafka-streams-oracle.jar", ORACLE_DIR / "target" / "lib"
    sources = [ORACLE_DIR / "pom.xml", *ORACLE_DIR.joinpath("src").rglob("*.java")]
    if not (jar.exists() and lib.is_dir() and jar.stat().st_mtime >= max(p.stat().st_mtime for p in sources)):
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError("the kafka_streams engine needs Maven (mvn) and Java 17+")
        if subprocess.run([mvn, "-q", "-B", "-o", "package"], cwd=ORACLE_DIR, check=False).returncode:
            subprocess.run([mvn, "-q", "-B", "package"], cwd=ORACLE_DIR, check=True)
    return f"{jar}:{lib}/*"


def run(workload: Workload, spec: RunSpec, timer: Timer) -> dict[str, Any]:
    request = {
        **asdict(spec),
        "kind": workload.kind,
        "guarantee": "exactly_once_v2" if workload.exactly_once else "at_least_once",
        "commit_interval_ms": workload.commit_interval_ms,
        "group_timing": GROUP_TIMING,
    }
    proc = subprocess.run(
        ["java", "-cp", ensure_built(), "io.platformstreams.oracle.Bench", json.dumps(request)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise RuntimeError(f"the Kafka Streams bench app failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result
