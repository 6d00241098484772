"""The Java side of the Schema Registry interop test: tools/registry-interop.

A producer and a consumer with Apicurio's Avro serdes (the release of tools/schema-registry)
in their Confluent-compatible mode. Built with Maven when its jar is missing or older than its
sources (offline first: ~/.m2 usually holds the jars; a clean machine fetches them, ~1 min),
then reused. ``python -m tests.support.registry_interop`` only builds it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from platform_streams.dev.servers.schema_registry import CCOMPAT

MODULE = Path(__file__).resolve().parents[2] / "tools" / "registry-interop"
JAR = MODULE / "target" / "registry-interop.jar"


def build_interop() -> str:
    """The module's JVM classpath, built first when missing or stale."""
    lib = MODULE / "target" / "lib"
    sources = [MODULE / "pom.xml", *MODULE.joinpath("src").rglob("*.java")]
    newest = max(p.stat().st_mtime for p in sources)
    if not (JAR.is_file() and lib.is_dir() and JAR.stat().st_mtime >= newest):
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError("tools/registry-interop needs Maven (mvn) and Java 17+")
        for offline in (["-o"], []):
            command = [mvn, "-q", "-B", *offline, "package"]
            done = subprocess.run(command, cwd=MODULE, capture_output=True, text=True, check=False)
            if done.returncode == 0:
                break
        else:
            raise RuntimeError(f"mvn package in {MODULE} failed: {(done.stdout + done.stderr)[-3000:]}")
    return f"{JAR}:{lib}/*"


def native_api(ccompat_url: str) -> str:
    """The registry's own API (what Apicurio's serdes speak) beside its Confluent-compatible one."""
    return ccompat_url.removesuffix(CCOMPAT) + "/apis/registry/v2"


def run_java(mode: str, bootstrap: str, registry_url: str, topic: str, n: int) -> list[dict[str, Any]]:
    """``Interop produce|consume``; the consumer's JSON lines (value, bytes, re-encoded bytes)."""
    done = subprocess.run(
        ["java", "-cp", build_interop(), "io.platformstreams.interop.Interop", mode, bootstrap,
         native_api(registry_url), topic, str(n)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"Interop {mode} exited {done.returncode}: {done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


if __name__ == "__main__":
    print(build_interop())
