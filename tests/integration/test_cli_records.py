"""``platform-streams produce`` and ``consume``, run as a user runs them: separate processes.

Records produced from stdin lines come back from ``consume`` as the same lines, each key on
the partition Kafka Streams computes for it (Java's murmur2: what ``murmur2_random`` does for
keyed records); ``consume`` without ``--from-beginning`` prints only records that arrive
after it started; a missing topic is an error naming it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin
from platform_streams.processor.partitioner import default_partition
from tests.support.kafka import consume_all, new_topic

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, stdin: str | None = None, timeout_s: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "platform_streams.cli", *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=timeout_s,
    )


def test_lines_produced_come_back_from_consume_on_kafka_streams_partitions(
    bootstrap_servers: str, admin: KafkaAdmin
) -> None:
    topic = new_topic(admin, 4, "records")
    lines = [f'key-{i}|{{"n": {i}, "text": "a|b"}}' for i in range(24)]
    produced = _cli(
        "produce",
        topic,
        "--bootstrap-server",
        bootstrap_servers,
        "--key-separator",
        "|",
        stdin="\n".join(lines) + "\n",
    )
    assert produced.returncode == 0, produced.stderr
    assert "produced 24 record(s)" in produced.stderr

    consumed = _cli(
        "consume",
        topic,
        "--bootstrap-server",
        bootstrap_servers,
        "--key-separator",
        "|",
        "--from-beginning",
        "--max-messages",
        "24",
        "--timeout",
        "60",
    )
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == sorted(lines)

    for record in consume_all(bootstrap_servers, topic, 24):
        assert record.key is not None
        assert record.partition == default_partition(record.key, 4), record


def test_consume_without_from_beginning_prints_only_new_records(
    bootstrap_servers: str, admin: KafkaAdmin
) -> None:
    topic = new_topic(admin, 2, "records")
    old = _cli("produce", topic, "--bootstrap-server", bootstrap_servers, stdin="old\tbefore\n")
    assert old.returncode == 0, old.stderr
    err_path = Path(f"/tmp/consume-{uuid.uuid4().hex[:8]}.err")
    with open(err_path, "w") as err:
        reader = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "platform_streams.cli",
                "consume",
                topic,
                "--bootstrap-server",
                bootstrap_servers,
                "--max-messages",
                "2",
                "--timeout",
                "60",
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    try:
        deadline = time.monotonic() + 60
        while "reading" not in err_path.read_text():
            assert reader.poll() is None, err_path.read_text()
            assert time.monotonic() < deadline, err_path.read_text()
            time.sleep(0.1)
        new = _cli("produce", topic, "--bootstrap-server", bootstrap_servers, stdin="k1\tnew 1\nk2\tnew 2\n")
        assert new.returncode == 0, new.stderr
        out, _ = reader.communicate(timeout=60)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
        stderr = err_path.read_text()
        err_path.unlink()
    assert reader.returncode == 0, stderr
    assert sorted(out.splitlines()) == ["k1\tnew 1", "k2\tnew 2"], stderr


def test_a_missing_topic_or_a_line_without_key_is_one_line(bootstrap_servers: str, admin: KafkaAdmin) -> None:
    missing = f"absent-{uuid.uuid4().hex[:8]}"
    for command in ("produce", "consume"):
        result = (
            _cli(command, missing, "--bootstrap-server", bootstrap_servers, "--timeout", "1")
            if command == "consume"
            else _cli(command, missing, "--bootstrap-server", bootstrap_servers, stdin="k\tv\n")
        )
        assert result.returncode == 1, result.stderr
        assert (
            result.stderr.strip()
            .splitlines()[-1]
            .endswith(f"topic {missing!r} does not exist (nothing creates it here)")
        )
    assert missing not in admin.list_topics()
    topic = new_topic(admin, 1, "records")
    result = _cli("produce", topic, "--bootstrap-server", bootstrap_servers, stdin="k\tv\nno separator\n")
    assert result.returncode == 2, result.stderr
    assert "stdin line 2: no key separator" in result.stderr and "1 earlier record(s) sent" in result.stderr
