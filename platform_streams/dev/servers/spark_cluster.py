"""A Spark standalone cluster from PySpark's own launcher: one master, N workers, each its own JVM.

``bin/spark-class`` of the installed PySpark starts ``org.apache.spark.deploy.master.Master``
and ``...worker.Worker`` (what ``sbin/start-master.sh``/``start-worker.sh`` run, minus the
daemonising, which the PySpark wheel does not ship). Each worker gets its own work
directory and small memory, so executors are real separate processes that receive the
job's pickled closures, jars and Python path over the network like on a real cluster.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


def spark_home() -> Path:
    """Where pyspark is installed (its ``bin/spark-class``), found without importing it."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed: pip install 'platform-streams[spark]'")
    return Path(spec.origin).resolve().parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class SparkCluster:
    master_url: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def _launch(args: list[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_for(log: Path, text: str, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        content = log.read_text(errors="replace") if log.exists() else ""
        if text in content:
            return
        if process.poll() is not None:
            raise RuntimeError(f"{log.name}: the JVM exited with {process.returncode}: {content[-2000:]}")
        time.sleep(0.3)
    raise RuntimeError(f"{log.name}: no {text!r} within {timeout_s:.0f}s")


def start_spark_cluster(
    work: Path,
    *,
    workers: int = 2,
    worker_memory: str = "768m",
    worker_env: Mapping[str, str] | None = None,
    timeout_s: float = 180.0,
) -> SparkCluster:
    """Start the master, then ``workers`` workers with one core each; wait until all registered."""
    work.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_LOCAL_IP": "127.0.0.1",
        **(worker_env or {}),
    }
    port = _free_port()
    cluster = SparkCluster(f"spark://127.0.0.1:{port}")
    try:
        master_log = work / "master.log"
        master = _launch(
            [
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(_free_port()),
            ],
            env,
            master_log,
        )
        cluster.processes.append(master)
        cluster.logs.append(master_log)
        _wait_for(master_log, "I have been elected leader", master, timeout_s)
        for n in range(workers):
            log = work / f"worker-{n}.log"
            worker_dir = work / f"worker-{n}"
            worker_dir.mkdir(exist_ok=True)
            process = _launch(
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host", "127.0.0.1", "--cores", "1", "--memory", worker_memory,
                    "--webui-port", str(_free_port()), "--work-dir", str(worker_dir),
                    cluster.master_url,
                ],
                env,
                log,
            )
            cluster.processes.append(process)
            cluster.logs.append(log)
        for process, log in zip(cluster.processes[1:], cluster.logs[1:], strict=True):
            _wait_for(log, "Successfully registered with master", process, timeout_s)
    except BaseException:
        cluster.stop()
        raise
    return cluster
