"""A real Schema Registry for the tests: Apicurio Registry from tools/schema-registry.

Built once with Maven (``mvn -q package`` in tools/schema-registry: Apicurio's Maven Central
jars turned into a runnable Quarkus jar, about two minutes the first time, then reused while
the module's files are older than the jar) and started on a free loopback port with in-memory
storage. Its Confluent-compatible API is under ``/apis/ccompat/v7``.

Command line (builds, starts, prints the URL until Ctrl-C):
``python -m platform_streams.dev.servers.schema_registry``.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from platform_streams.dev.servers.processes import stop_process

MODULE = Path(__file__).resolve().parents[3] / "tools" / "schema-registry"
RUNNER = MODULE / "target" / "schema-registry-runner.jar"
CCOMPAT = "/apis/ccompat/v7"


def _stale() -> bool:
    if not RUNNER.is_file():
        return True
    built = RUNNER.stat().st_mtime
    sources = [MODULE / "pom.xml", *(p for p in (MODULE / "src").rglob("*") if p.is_file())]
    return any(p.stat().st_mtime > built for p in sources)


def build_registry(timeout_s: float = 900.0) -> Path:
    """The runnable jar, built first if missing or older than the module's files."""
    if not _stale():
        return RUNNER
    mvn = shutil.which("mvn")
    if mvn is None or shutil.which("java") is None:
        raise RuntimeError("the schema registry is not built and mvn/java are not installed")
    started = time.monotonic()
    for offline in (["-o"], []):  # offline first: no network once ~/.m2 holds the jars
        done = subprocess.run(
            [mvn, "-q", "-B", *offline, "package"],
            cwd=MODULE,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode == 0 and RUNNER.is_file():
            print(f"built the schema registry in {time.monotonic() - started:.0f}s", file=sys.stderr)
            return RUNNER
    raise RuntimeError(f"mvn package in {MODULE} failed: {(done.stdout + done.stderr)[-3000:]}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_registry(log: Path, start_timeout_s: float = 180.0) -> Iterator[str]:
    """Yields the registry's Confluent-compatible base URL; stops the JVM on exit."""
    jar = build_registry()
    port = _free_port()
    java = shutil.which("java") or "java"
    started = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                java,
                "-Xmx512m",
                "-XX:TieredStopAtLevel=1",  # starts in about half the time; the tests load it lightly
                f"-Dquarkus.http.port={port}",
                "-Dquarkus.http.host=127.0.0.1",
                "-jar",
                str(jar),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}{CCOMPAT}"
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the schema registry exited ({process.returncode}); log: {log}")
            try:
                with urllib.request.urlopen(f"{url}/subjects", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() - started > start_timeout_s:
                raise RuntimeError(
                    f"the schema registry did not answer within {start_timeout_s:.0f}s; log: {log}"
                )
            time.sleep(0.5)
        print(f"schema registry up in {time.monotonic() - started:.1f}s at {url}", file=sys.stderr)
        yield url
    finally:
        stop_process(process, 20.0)


if __name__ == "__main__":
    import tempfile

    with running_registry(Path(tempfile.mkdtemp()) / "registry.log") as base_url:
        print(base_url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
