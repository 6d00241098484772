"""A Java Kafka Streams instance and a platform_streams instance in one streams group.

The experiment behind docs/streams-groups.md ("Java and Python in one group"): the counting
topology of ``tests/integration/support_apps.count_app`` in Java (``MixCount.java``, Kafka
Streams from the oracle's jars, ``group.protocol=streams``) starts first and counts 200
records; a platform_streams client with ``group_protocol="streams"`` joins the same
application id; the broker moves tasks to it; 200 more records are produced; the final
counts must be 50 per key (the Python member restored the moved tasks from the Java
member's changelog and committed offsets).

Run from the repository root, after ``mvn -q -f tools/kafka-streams-oracle/pom.xml package``::

    javac -cp "$(ls tools/kafka-streams-oracle/target/lib/*.jar | tr '\\n' :)" \\
        -d /tmp/mix tools/streams-groups-mix/MixCount.java
    .venv/bin/python tools/streams-groups-mix/mix.py BOOTSTRAP /tmp/mix
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from platform_streams import KafkaStreams
from platform_streams.kafka import KafkaAdmin
from tests.integration.support_apps import app_config, count_app, new_app_id
from tests.integration.test_streams_groups import _describe, _final_counts
from tests.support.kafka import consume_all, new_topic, produce

LIB = Path(__file__).resolve().parents[1] / "kafka-streams-oracle" / "target" / "lib"


def main(bootstrap: str, classes: str) -> int:
    with KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        source, sink = new_topic(admin, 4, "mix-in"), new_topic(admin, 4, "mix-out")
    records = [(f"k{i % 8}", "v") for i in range(200)]
    produce(bootstrap, source, records)
    app = new_app_id("mix")
    classpath = ":".join([classes, *(str(j) for j in sorted(LIB.glob("*.jar")))])
    java = subprocess.Popen(
        ["java", "-cp", classpath, "MixCount", bootstrap, app, source, sink, tempfile.mkdtemp(), "90000"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert java.stdout is not None
    for line in java.stdout:
        if "STATE RUNNING" in line:
            break
    print(_describe(bootstrap, app))
    config = app_config(
        bootstrap, Path(tempfile.mkdtemp()), app, group_protocol="streams", statestore_cache_max_bytes=0
    )
    streams = KafkaStreams(count_app(source, sink).build(), config)
    try:
        streams.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not streams.workers[0].tasks:
            time.sleep(0.5)
        print("python tasks:", sorted(str(t) for t in streams.workers[0].tasks))
        print(_describe(bootstrap, app))
        produce(bootstrap, source, records)
        time.sleep(8)
        counts = _final_counts(consume_all(bootstrap, sink, 10**6, 5))
        print("final counts:", counts)
        return 0 if counts == {f"k{i}": 50 for i in range(8)} else 1
    finally:
        streams.close(timeout_s=30)
        java.terminate()
        java.wait(30)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
