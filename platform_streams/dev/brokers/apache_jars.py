"""Apache Kafka's server jars, resolved with Maven from Maven Central: the JVM classpath.

Apache Kafka is not a Python package, but its jars are on Maven Central, which these
machines (and CI) reach with Maven. ``tools/kafka/pom.xml`` in the repository depends on
``org.apache.kafka:kafka_2.13`` (the ``kafka.Kafka`` server and ``kafka.tools.StorageTool``)
plus an slf4j->log4j2 binding; :func:`kafka_classpath` asks Maven for that pom's runtime
classpath (``dependency:build-classpath``), which downloads the jars into ``~/.m2`` once.
Nothing is downloaded from anywhere but Maven Central, and nothing is unpacked: the JVM
runs straight from ``~/.m2``.

Why the classpath is cached in ``tools/kafka/target/classpath.txt``: Maven itself takes
a few seconds to start even offline, and every broker start needs the classpath. The
cache is used only while every jar it names still exists and the pom has not changed
since; otherwise Maven runs again, offline first (``-o``: no network when ``~/.m2``
already holds everything), then online.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from platform_streams.errors import BrokerError

__all__ = ["KAFKA_POM_ENV", "apache_kafka_missing", "default_pom", "kafka_classpath", "require_java"]

# Where the pom is when platform_streams runs from a checkout (the editable install):
# <repo>/tools/kafka/pom.xml. Another location can be given in this variable.
KAFKA_POM_ENV = "PLATFORM_STREAMS_KAFKA_POM"
_MAVEN_TIMEOUT_S = 900.0  # a first download on a slow link; offline resolution takes seconds


def default_pom() -> Path:
    """The pom that lists Apache Kafka's server jars (``$PLATFORM_STREAMS_KAFKA_POM`` wins)."""
    given = os.environ.get(KAFKA_POM_ENV, "").strip()
    if given:
        return Path(given)
    return Path(__file__).resolve().parents[3] / "tools" / "kafka" / "pom.xml"


def require_java() -> str:
    """The ``java`` executable (``$JAVA_HOME/bin/java`` first), or a clear error."""
    java_home = os.environ.get("JAVA_HOME", "").strip()
    candidate = Path(java_home, "bin", "java") if java_home else None
    if candidate is not None and candidate.is_file():
        return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise BrokerError(
            "Apache Kafka needs Java 17+ on PATH (or JAVA_HOME); install a JDK (Debian: "
            "apt-get install openjdk-17-jre-headless) or use the embedded Tansu broker (--broker tansu)"
        )
    return found


def apache_kafka_missing(pom: Path | None = None) -> str | None:
    """Why Apache Kafka cannot be started here, or None when it can: Java, the pom, and
    either Maven or a classpath Maven already resolved. Runs nothing (no JVM, no Maven), so
    a tool can pick its default broker in a moment; a first download can still fail later."""
    try:
        require_java()
    except BrokerError as exc:
        return str(exc)
    pom = (pom or default_pom()).resolve()
    if not pom.is_file():
        return f"no Maven pom for Apache Kafka at {pom} (run from a platform_streams checkout)"
    if shutil.which("mvn") is None and _cached(pom.parent / "target" / "classpath.txt", pom) is None:
        return "Apache Kafka's jars come from Maven Central through Maven, but `mvn` is not on PATH"
    return None


def _cached(cache: Path, pom: Path) -> str | None:
    """The cached classpath, when it is newer than the pom and every jar still exists."""
    try:
        if cache.stat().st_mtime < pom.stat().st_mtime:
            return None
        classpath = cache.read_text().strip()
    except OSError:
        return None
    jars = [p for p in classpath.split(os.pathsep) if p]
    if not jars or not all(Path(j).is_file() for j in jars):
        return None
    return classpath


def kafka_classpath(pom: Path | None = None, *, refresh: bool = False) -> str:
    """The classpath of Apache Kafka's server (jars in ``~/.m2``), fetched by Maven if needed.

    Raises :class:`BrokerError` naming what is missing (the pom, ``mvn``) or quoting
    Maven's output when resolution fails.
    """
    pom = (pom or default_pom()).resolve()
    if not pom.is_file():
        raise BrokerError(
            f"no Maven pom for Apache Kafka at {pom}: run from a platform_streams checkout "
            f"(tools/kafka/pom.xml) or set {KAFKA_POM_ENV}"
        )
    cache = pom.parent / "target" / "classpath.txt"
    if not refresh and (classpath := _cached(cache, pom)) is not None:
        return classpath
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError(
            "Apache Kafka's jars come from Maven Central through Maven, but `mvn` is not on PATH "
            "(Debian: apt-get install maven); or use the embedded Tansu broker (--broker tansu)"
        )
    cache.parent.mkdir(parents=True, exist_ok=True)
    partial = cache.with_suffix(".tmp")
    base = [mvn, "-B", "-q", "-f", str(pom), "dependency:build-classpath", f"-Dmdep.outputFile={partial}"]
    output = ""
    for offline in (True, False):  # offline first: ~/.m2 usually has everything already
        cmd = [*base[:2], "-o", *base[2:]] if offline else base
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=_MAVEN_TIMEOUT_S, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired as exc:
            raise BrokerError(
                f"Maven did not resolve Apache Kafka's jars within {_MAVEN_TIMEOUT_S:.0f}s"
            ) from exc
        output = (done.stdout + done.stderr).strip()
        if done.returncode == 0 and partial.is_file():
            partial.replace(cache)
            if (classpath := _cached(cache, pom)) is not None:
                return classpath
    tail = "\n".join(output.splitlines()[-20:])
    raise BrokerError(f"Maven could not resolve Apache Kafka's jars from {pom}:\n{tail}")
