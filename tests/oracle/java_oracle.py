"""The Java side of the differential harness: one long-lived Kafka Streams process.

``tools/kafka-streams-oracle`` (Maven) is built on first use when its jar is missing or
older than its sources (:func:`bench.engine_java.ensure_built`, shared with the bench
engine); the process then answers one JSON request per line (see ``Oracle.java``), so
thousands of cases pay for one JVM start.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from typing import Any

from bench.engine_java import ensure_built


class JavaOracle:
    """Runs cases through Kafka Streams' own TopologyTestDriver in a child JVM."""

    def __init__(self) -> None:
        # ORACLE_CLASSPATH: a prebuilt copy (a long soak keeps running while the jar is rebuilt)
        path = os.environ.get("ORACLE_CLASSPATH") or ensure_built()
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
            raise RuntimeError(f"the Java oracle exited (status {self._process.poll()})")
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
