"""bench/rebalance.py's Java instance: replaces itself with the JVM running
tools/kafka-streams-oracle's ``Rebalance`` app with the same flags (so a SIGKILL or SIGTERM
of this process reaches Kafka Streams itself)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.engine_java import ensure_built

if __name__ == "__main__":
    os.execvp("java", ["java", "-cp", ensure_built(), "io.platformstreams.oracle.Rebalance", *sys.argv[1:]])
