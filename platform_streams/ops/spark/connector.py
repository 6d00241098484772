"""Spark's Kafka connector and Hadoop's s3a jars: where they are cached, fetching them from Maven Central.

PySpark's wheel has no Kafka data source; ``spark.read.format("kafka")`` needs
``spark-sql-kafka-0-10_2.13`` and what it brings (``spark-token-provider-kafka-0-10``,
``kafka-clients``, ``commons-pool2``). :func:`fetch_connector` runs Maven on
``tools/spark-kafka/pom.xml`` (``dependency:copy-dependencies``), which caches the
artifacts in ``~/.m2`` (later fetches run offline) and copies the jars into a directory
per PySpark version; :func:`connector_jars` lists that directory for
:func:`~platform_streams.ops.spark.session.spark_session`, which puts them on
``spark.jars``. The same fetch brings Hadoop's s3a connector (``hadoop-aws`` of PySpark's
Hadoop version and the AWS SDK modules it uses), so that Spark's own writers reach
``s3a://`` (the snapshots' Parquet copy). On a cluster the connectors come with the deployment instead
(``--packages`` / ``spark.jars.packages`` or jars baked into the image: docs/spark.md).

The connector's version should equal Spark's. When Maven Central has no connector of
that version (it had no Spark 4.3.0 artifacts at all when this was written, while PyPI
had pyspark 4.3.0), the newest release of the same major version before it is fetched,
with a warning; the reader probe (:mod:`.kafka_source`) then checks that it loads.

Command line: ``python -m platform_streams.ops.spark.connector [--dir DIR] [--offline]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from xml.etree import ElementTree

__all__ = [
    "CONNECTOR_ARTIFACT",
    "JARS_ENV",
    "connector_dir",
    "connector_jars",
    "fetch_connector",
    "hadoop_version",
    "spark_version",
]

log = logging.getLogger(__name__)

#: Directory holding the connector jars (overrides the per-user cache).
JARS_ENV = "PLATFORM_STREAMS_SPARK_KAFKA_JARS"
#: Spark 4 is built for Scala 2.13 only.
SCALA_BINARY = "2.13"
CONNECTOR_ARTIFACT = f"spark-sql-kafka-0-10_{SCALA_BINARY}"
_CENTRAL = "https://repo.maven.apache.org/maven2/org/apache/spark"
_MANIFEST = "connector.json"
_POM = Path(__file__).resolve().parents[3] / "tools" / "spark-kafka" / "pom.xml"


def spark_version() -> str:
    """The installed PySpark's version (the Spark the local session runs)."""
    import pyspark

    return str(pyspark.__version__)


def hadoop_version() -> str:
    """The Hadoop version PySpark ships (its ``hadoop-client-api`` jar): hadoop-aws must equal it."""
    import pyspark

    found = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    if not found:
        raise RuntimeError("cannot tell PySpark's Hadoop version: no hadoop-client-api jar in pyspark/jars")
    return found[-1].name[len("hadoop-client-api-") : -len(".jar")]


def _pom_digest() -> str:
    return hashlib.sha256(_POM.read_bytes()).hexdigest()


def connector_dir(directory: str | Path | None = None) -> Path:
    """Where the jars are: ``directory``, ``$PLATFORM_STREAMS_SPARK_KAFKA_JARS``, or the cache."""
    if directory is not None:
        return Path(directory)
    if os.environ.get(JARS_ENV):
        return Path(os.environ[JARS_ENV])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "platform-streams" / "spark-kafka" / f"spark-{spark_version()}"


def connector_jars(directory: str | Path | None = None) -> list[str]:
    """The fetched jars (absolute paths), or ``[]`` when no complete fetch is there."""
    folder = connector_dir(directory)
    try:
        manifest = json.loads((folder / _MANIFEST).read_text())
    except (OSError, ValueError):
        return []
    if _POM.is_file() and manifest.get("pom_sha256") != _pom_digest():
        return []  # fetched for another pom (e.g. before the s3a jars were part of it)
    jars = [folder / name for name in manifest.get("jars", [])]
    if not jars or not all(jar.is_file() for jar in jars):
        return []
    return [str(jar.resolve()) for jar in jars]


def fetch_connector(
    directory: str | Path | None = None, *, version: str | None = None, offline: bool = False
) -> list[str]:
    """Fetch the connector for the installed PySpark (no-op when already there); its jars.

    Needs ``mvn`` on the PATH and the source tree's ``tools/spark-kafka/pom.xml``. Raises
    ``RuntimeError`` naming what failed.
    """
    folder = connector_dir(directory)
    present = connector_jars(folder)
    if present:
        return present
    if shutil.which("mvn") is None:
        raise RuntimeError("cannot fetch Spark's Kafka connector: mvn (Apache Maven) is not on the PATH")
    if not _POM.is_file():
        raise RuntimeError(f"cannot fetch Spark's Kafka connector: {_POM} is missing (not a source tree)")
    wanted = version or spark_version()
    chosen = wanted if _published(wanted, offline) else _nearest_release(wanted, offline)
    if chosen != wanted:
        log.warning(
            "Maven Central has no %s %s; fetching %s, the newest release before it "
            "(the kafka source is probed before use)",
            CONNECTOR_ARTIFACT,
            wanted,
            chosen,
        )
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="spark-kafka-", dir=folder) as tmp:
        command = ["mvn", "-q", "-B", "-f", str(_POM)]
        command += ["dependency:copy-dependencies@kafka", "dependency:copy-dependencies@s3a"]
        command += [f"-Dspark.version={chosen}", f"-Dhadoop.version={hadoop_version()}"]
        command.append(f"-DoutputDirectory={tmp}")
        if offline:
            command.append("-o")
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            raise RuntimeError(
                f"mvn could not fetch {CONNECTOR_ARTIFACT} {chosen} and hadoop-aws: " + " | ".join(tail)
            )
        names = sorted(p.name for p in Path(tmp).glob("*.jar"))
        for name in names:
            os.replace(Path(tmp) / name, folder / name)
    manifest = {
        "spark_version": spark_version(),
        "connector_version": chosen,
        "hadoop_version": hadoop_version(),
        "pom_sha256": _pom_digest(),
        "jars": names,
    }
    (folder / _MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    log.info("Spark's Kafka connector %s: %s in %s", chosen, ", ".join(names), folder)
    return connector_jars(folder)


def _published(version: str, offline: bool) -> bool:
    """Whether the connector exists in that version (the local ~/.m2, else one HEAD request)."""
    local = _m2() / CONNECTOR_ARTIFACT / version / f"{CONNECTOR_ARTIFACT}-{version}.jar"
    if local.is_file() or offline:
        return local.is_file()
    url = f"{_CENTRAL}/{CONNECTOR_ARTIFACT}/{version}/{CONNECTOR_ARTIFACT}-{version}.pom"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=30):
            return True
    except OSError:
        return False


def _nearest_release(version: str, offline: bool) -> str:
    """The newest release (no previews) of the same major version, not newer than ``version``."""
    if offline:
        versions = [p.name for p in (_m2() / CONNECTOR_ARTIFACT).glob("*") if p.is_dir()]
    else:
        url = f"{_CENTRAL}/{CONNECTOR_ARTIFACT}/maven-metadata.xml"
        with urllib.request.urlopen(url, timeout=30) as response:
            versions = [v.text or "" for v in ElementTree.fromstring(response.read()).iter("version")]
    wanted = _numbers(version)
    releases = [v for v in versions if re.fullmatch(r"\d+\.\d+\.\d+", v)]
    fitting = [v for v in releases if _numbers(v)[0] == wanted[0] and _numbers(v) <= wanted]
    if not fitting:
        raise RuntimeError(f"no {CONNECTOR_ARTIFACT} release for Spark {version} (found {versions})")
    return max(fitting, key=_numbers)


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version)[:3])


def _m2() -> Path:
    return Path.home() / ".m2" / "repository" / "org" / "apache" / "spark"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Fetch Spark's Kafka connector and Hadoop's s3a jars with Maven."
    )
    parser.add_argument("--dir", help=f"target directory (default: ${JARS_ENV} or the per-user cache)")
    parser.add_argument("--version", help="connector version (default: the installed PySpark's)")
    parser.add_argument("--offline", action="store_true", help="use ~/.m2 only (mvn -o)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        jars = fetch_connector(args.dir, version=args.version, offline=args.offline)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("\n".join(jars))
    return 0


if __name__ == "__main__":
    sys.exit(main())
