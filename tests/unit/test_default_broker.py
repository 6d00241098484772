"""Which local broker ``make demo`` and ``make soak`` start by default: Apache Kafka where
it can run (Java, and Maven or its jars already resolved), else the embedded Tansu, which
needs nothing. The check runs neither a JVM nor Maven: it looks at PATH, JAVA_HOME and
the pom."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from examples.demo import choose_broker
from platform_streams.dev.brokers.apache_jars import apache_kafka_missing


def _without_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no java, no mvn


def test_without_java_the_default_is_the_embedded_broker_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _without_java(monkeypatch, tmp_path)
    missing = apache_kafka_missing()
    assert missing is not None and "Java" in missing
    kind, why = choose_broker("auto")
    assert kind == "tansu"
    assert "Apache Kafka cannot run here" in why and "Java" in why


def test_java_without_maven_or_resolved_jars_is_not_enough(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    pom = tmp_path / "pom.xml"
    pom.write_text("<project/>")
    missing = apache_kafka_missing(pom)
    assert missing is not None and "mvn" in missing
    (tmp_path / "target").mkdir()
    jar = tmp_path / "kafka.jar"
    jar.write_text("")
    (tmp_path / "target" / "classpath.txt").write_text(str(jar))
    assert apache_kafka_missing(pom) is None  # the jars Maven resolved before are enough


@pytest.mark.skipif(
    shutil.which("java") is None and not os.environ.get("JAVA_HOME"), reason="no Java here"
)
def test_with_java_and_maven_the_default_is_apache_kafka() -> None:
    if apache_kafka_missing() is not None:
        pytest.skip(f"Apache Kafka cannot run here: {apache_kafka_missing()}")
    assert choose_broker("auto")[0] == "kafka"


def test_an_explicit_choice_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _without_java(monkeypatch, tmp_path)
    assert choose_broker("kafka") == ("kafka", "chosen with --broker kafka")
    assert choose_broker("tansu") == ("tansu", "chosen with --broker tansu")
