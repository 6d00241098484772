"""The Java side of the differential harness: one long-lived Kafka Streams process.

``tools/kafka-streams-oracle`` (Maven) is built on first use when its jar is missing
(``mvn -q -B package``; offline when ~/.m2 already holds the dependencies); the process
then answers one JSON request per line (see ``Oracle.java``), so thousands of cases pay
for one JVM start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

ORACLE_DIR = Path(__file__).resolve().parents[2] / "tools" / "kafka-streams-oracle"
JAR = ORACLE_DIR / "target" / "kafka-streams-oracle.jar"
LIB = ORACLE_DIR / "target" / "lib"


class OracleUnavailable(RuntimeError):
    """Java or Maven is missing, or the build failed: the message says which."""


def build_oracle() -> None:
    """Build the jar and its lib/ classpath unless they are newer than every source file."""
    sources = [ORACLE_DIR / "pom.xml", *ORACLE_DIR.joinpath("src").rglob("*.java")]
    if JAR.exists() and LIB.is_dir() and JAR.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
        return
    mvn = shutil.which("mvn")
    if mvn is None or shutil.which("java") is None:
        raise OracleUnavailable("the Java oracle needs java (17+) and mvn on PATH")
    offline = subprocess.run([mvn, "-q", "-B", "-o", "package"], cwd=ORACLE_DIR, capture_output=True, text=True)
    if offline.returncode == 0:
        return
    online = subprocess.run([mvn, "-q", "-B", "package"], cwd=ORACLE_DIR, capture_output=True, text=True)
    if online.returncode != 0:
        raise OracleUnavailable(f"mvn package failed:\n{online.stdout[-4000:]}\n{online.stderr[-4000:]}")


def classpath() -> str:
    return f"{JAR}:{LIB}/*"


class JavaOracle:
    """Runs cases through Kafka Streams' own TopologyTestDriver in a child JVM."""

    def __init__(self) -> None:
        # ORACLE_CLASSPATH: a prebuilt copy (a long soak keeps running while the jar is rebuilt)
        path = os.environ.get("ORACLE_CLASSPATH")
        if not path:
            build_oracle()
            path = classpath()
        self._process = subprocess.Popen(
            ["java", "-cp", path, "io.platformstreams.oracle.Oracle"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self._lock = threading.Lock()

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """One case in, one answer out (``{"ok": .., "out": .., "store": .., "describe": ..}``)."""
        assert self._process.stdin is not None and self._process.stdout is not None
        with self._lock:
            self._process.stdin.write(json.dumps(request) + "\n")
            self._process.stdin.flush()
            line = self._process.stdout.readline()
        if not line:
            raise OracleUnavailable(f"the Java oracle exited (status {self._process.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
