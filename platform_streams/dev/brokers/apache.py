"""Apache Kafka itself, run from its Maven Central jars: one node, or a 3-broker cluster.

The embedded Tansu broker is fast but differs from Apache Kafka (the project's broker
notes list how); every claim about Kafka's contract is checked against the real thing
here. :class:`ApacheKafkaBroker` has the interface of
:class:`~platform_streams.dev.brokers.embedded.EmbeddedBroker` (context manager,
``bootstrap_servers``, ``kill_with_parent``) so the CLI, the demo and the tests take
either. :class:`ApacheKafkaCluster` runs three of them as one KRaft quorum on loopback
for replication and failover tests.

What shaped it:

* **KRaft, combined roles.** Every node is ``process.roles=broker,controller`` with its
  own data directory, formatted by ``kafka.tools.StorageTool`` before the first start
  (``--standalone`` for one node, a static ``controller.quorum.voters`` list for three).
  Data lives in a temporary directory removed by :meth:`ApacheKafkaBroker.stop` unless
  ``data_dir`` was given; a restart with the same ``data_dir`` keeps the log.
* **Small and quick.** ``-Xmx512m`` (256m in the cluster), the serial collector, and
  broker settings for a single machine: replication factor 1 for the internal topics of
  one node, ``group.initial.rebalance.delay.ms=0``, minimum session timeouts of 1 s (the
  tests use short ones), and a log cleaner that looks for work every 500 ms, so topics
  with a small ``segment.ms`` and ``min.cleanable.dirty.ratio`` are really compacted
  within seconds. ``extra_config`` overrides any of it.
* **Ready means serving.** Start-up waits for a metadata round trip listing all brokers
  of the cluster, with the process still alive, then for the group and transaction
  coordinators to load (a fresh broker answers COORDINATOR_LOAD_IN_PROGRESS until then);
  the log tail is quoted on failure.
* **Stop means gone.** SIGTERM (Kafka's controlled shutdown), SIGKILL after ``grace``;
  :meth:`ApacheKafkaBroker.kill` is ``kill -9`` for failover tests. Signals only go to
  our own child's PID; ``kill_with_parent`` uses ``setpriv --pdeathsig`` as Tansu does.
"""

from __future__ import annotations

import atexit
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from platform_streams.dev.brokers.apache_jars import kafka_classpath, require_java
from platform_streams.dev.brokers.local import (
    BrokerProcess,
    find_free_port,
    hostport,
    kill_with_parent_prefix,
)
from platform_streams.errors import BrokerError, IllegalStateError
from platform_streams.kafka import KafkaException, TopicPartition
from platform_streams.kafka.clients import create_admin, create_consumer, create_producer

__all__ = ["ApacheKafkaBroker", "ApacheKafkaCluster", "single_node_config"]

_START_ATTEMPTS = 3  # only when we chose the ports: another process may take one first

_LOG4J2 = """Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Logger:
      - name: org.apache.kafka.controller
        level: WARN
      - name: kafka.log.LogCleaner
        level: INFO
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
"""

# Broker settings for one machine and short tests; see the module docstring.
_COMMON_CONFIG: dict[str, str] = {
    "auto.create.topics.enable": "false",
    # no time-based retention: tests write records with old timestamps, which a 7-day
    # retention would delete at the next check (Tansu enforces no retention either)
    "log.retention.ms": "-1",
    "num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    # streams groups (KIP-1071) as quick as the tests' classic groups: no first-assignment
    # delay, 6 s sessions and 0.5 s heartbeats (Kafka's minimums are 45 s and 5 s)
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.min.session.timeout.ms": "1000",
    "group.streams.session.timeout.ms": "6000",
    "group.streams.min.heartbeat.interval.ms": "500",
    "group.streams.heartbeat.interval.ms": "500",
    "log.cleaner.backoff.ms": "500",
    "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
    "log.initial.task.delay.ms": "1000",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "5000",
}


def single_node_config() -> dict[str, str]:
    """The settings a lone node needs on top of the common ones (replication factor 1)."""
    return {
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
    }


def _cluster_config(size: int) -> dict[str, str]:
    isr = str(min(2, size))
    return {
        "offsets.topic.replication.factor": str(size),
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": str(size),
        "transaction.state.log.min.isr": isr,
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": str(size),
        "share.coordinator.state.topic.min.isr": isr,
        "default.replication.factor": str(size),
        "min.insync.replicas": isr,
    }


class ApacheKafkaBroker(BrokerProcess):
    """One Apache Kafka KRaft node (broker+controller) on loopback, on free ports.

    Use as a context manager, or call :meth:`start` / :meth:`stop` (:class:`BrokerProcess`).

    Alone (the default) it is a whole cluster. :class:`ApacheKafkaCluster` builds nodes
    that share one quorum by passing ``node_id``, fixed ports and ``voters``.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        log_path: str | Path | None = None,
        *,
        data_dir: str | Path | None = None,
        heap: str = "512m",
        extra_config: Mapping[str, str] | None = None,
        startup_timeout: float = 180.0,
        kill_with_parent: bool = False,
        node_id: int = 1,
        port: int | None = None,
        controller_port: int | None = None,
        voters: str | None = None,
        cluster_id: str | None = None,
        expected_brokers: int = 1,
    ) -> None:
        super().__init__(host, port, log_path)
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._temp_dir: Path | None = None
        self._heap = heap
        self._extra = dict(extra_config or {})
        self._startup_timeout = startup_timeout
        self._kill_with_parent = kill_with_parent
        self.node_id = node_id
        self._controller_port = controller_port
        self._voters = voters
        self._cluster_id = cluster_id
        self._expected_brokers = expected_brokers
        self._log_file: IO[bytes] | None = None

    # ------------------------------------------------------------------ lifecycle

    _kind = "Apache Kafka broker"

    def start(self, *, wait: bool = True) -> Self:
        """Format the storage (first start only), launch the JVM, wait until it serves.

        When we picked the ports and another process took one first, the node is started
        again on new ports with fresh storage (the controller's address is in the
        formatted storage), up to three times.
        """
        if self.is_running():
            raise IllegalStateError(f"Apache Kafka broker already running (pid {self.pid})")
        ours = self._port is None and self._controller_port is None and self._data_dir is None
        for attempt in range(1, (_START_ATTEMPTS if ours else 1) + 1):
            try:
                return self._start_once(wait)
            except BrokerError as exc:
                if attempt == _START_ATTEMPTS or not ours or "Address already in use" not in str(exc):
                    raise
                self._port = self._controller_port = None  # stop() removed the storage
        raise AssertionError("unreachable")

    def _start_once(self, wait: bool) -> Self:
        java, classpath = require_java(), kafka_classpath()
        if self._data_dir is None:
            self._temp_dir = Path(tempfile.mkdtemp(prefix="apache-kafka-"))
            self._data_dir = self._temp_dir
        workdir = self._data_dir
        workdir.mkdir(parents=True, exist_ok=True)
        self._port = self._port or find_free_port(self._host)
        self._controller_port = self._controller_port or find_free_port(self._host)
        props = workdir / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self._config(workdir / "log").items()))
        log4j = workdir / "log4j2.yaml"
        log4j.write_text(_LOG4J2)
        if self._log_path is None:
            self._log_path = workdir / "server.log"
        jvm = [java, f"-Xmx{self._heap}", "-Xms64m", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError"]
        jvm += ["-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath]
        if not (workdir / "log" / "meta.properties").exists():
            self._format(jvm, props)
        cmd = [*kill_with_parent_prefix(self._kill_with_parent), *jvm, "kafka.Kafka", str(props)]
        self._log_file = open(self._log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            cmd, stdout=self._log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        atexit.register(self.stop)
        if wait:
            try:
                self.wait_ready()
            except BrokerError:
                self.stop()
                raise
        return self

    def _config(self, log_dir: Path) -> dict[str, str]:
        host, port, cport = self._host, self.port, self._controller_port
        assert cport is not None
        quorum: dict[str, str] = (
            {"controller.quorum.voters": self._voters}
            if self._voters
            else {"controller.quorum.bootstrap.servers": hostport(host, cport)}
        )
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            **quorum,
            "listeners": f"PLAINTEXT://{hostport(host, port)},CONTROLLER://{hostport(host, cport)}",
            "advertised.listeners": f"PLAINTEXT://{hostport(host, port)}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(log_dir),
            **_COMMON_CONFIG,
            **(
                single_node_config()
                if self._expected_brokers == 1
                else _cluster_config(self._expected_brokers)
            ),
            **self._extra,
        }

    def _format(self, jvm: list[str], props: Path) -> None:
        cluster_id = self._cluster_id or _random_cluster_id()
        cmd = [*jvm, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)]
        if not self._voters:
            cmd.append("--standalone")
        cmd += self._format_options()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise BrokerError(f"formatting Kafka storage failed:\n{(done.stdout + done.stderr)[-3000:]}")

    def _format_options(self) -> list[str]:
        """More ``kafka-storage format`` options (a secured node adds its setup user's SCRAM secret)."""
        return []

    def client_config(self) -> dict[str, str]:
        """The librdkafka settings that reach this node as a client allowed everything."""
        return {"bootstrap.servers": self.bootstrap_servers}

    def wait_ready(self) -> None:
        """Poll until a metadata request lists every expected broker; raise with the log tail."""
        deadline = time.monotonic() + self._startup_timeout
        admin = None
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                code = None if self._proc is None else self._proc.returncode
                raise BrokerError(
                    f"Apache Kafka exited during startup (status {code}); log tail:\n{self.log_tail()}"
                )
            if admin is None:
                admin = create_admin({**self.client_config(), "log_level": 0})
            try:
                if len(admin.list_topics(timeout=2.0).brokers) >= self._expected_brokers:
                    self._warm_up_coordinators(deadline)
                    return
            except KafkaException:
                pass
            time.sleep(0.2)
        raise BrokerError(
            f"Apache Kafka on {self.bootstrap_servers} not ready after {self._startup_timeout:.0f}s; "
            f"log tail:\n{self.log_tail()}"
        )

    def _warm_up_coordinators(self, deadline: float) -> None:
        """Load the group and transaction coordinators before anyone needs them.

        A fresh Kafka creates ``__consumer_offsets`` and ``__transaction_state`` on first
        use and answers COORDINATOR_LOAD_IN_PROGRESS meanwhile; the first test's commit or
        offset lookup would otherwise meet that. librdkafka's clients wait it out here.
        """
        conf = {**self.client_config(), "log_level": 0}
        consumer = create_consumer({**conf, "group.id": "platform-streams-warm-up"})
        try:
            while True:
                try:
                    consumer.committed([TopicPartition("platform-streams-warm-up", 0)], timeout=5.0)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
        finally:
            consumer.close()
        producer = create_producer(
            {**conf, "transactional.id": f"platform-streams-warm-up-{uuid.uuid4().hex}"}
        )
        producer.init_transactions(max(1.0, deadline - time.monotonic()))

    def terminate(self) -> None:
        """Send SIGTERM (controlled shutdown) without waiting; :meth:`stop` waits."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """``kill -9`` the node (failover tests); its data directory stays for a restart."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None
        self._close_log()

    def stop(self, grace: float = 30.0, *, keep_data: bool = False) -> None:
        """SIGTERM (controlled shutdown), SIGKILL after ``grace`` s; idempotent.

        A temporary data directory is removed unless ``keep_data`` (a restart follows).
        """
        self._end_process(signal.SIGTERM, grace)
        self._close_log()
        if self._temp_dir is not None and not keep_data:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = self._data_dir = None
            self._log_path = None

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def log_tail(self, max_lines: int = 40) -> str:
        if self._log_path is None or not self._log_path.exists():
            return "<no log>"
        lines = self._log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-max_lines:])

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.is_running() else "stopped"
        return f"ApacheKafkaBroker(node {self.node_id}, {self._host}:{self._port or '?'}, {state})"


def _random_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (as StorageTool's).

    Never one that starts with a dash: ``kafka-storage format -t -x...`` reads it as an
    option and fails (1 id in 64; CI met it). Kafka's own ``Uuid.randomUuid()``
    (clients/src/main/java/org/apache/kafka/common/Uuid.java) draws again for the same
    reason, and never returns the reserved ids 0 and 1.
    """
    import base64

    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not text.startswith("-") and int.from_bytes(raw, "big") > 1:
            return text


class ApacheKafkaCluster:
    """``size`` KRaft nodes (each broker+controller) forming one cluster on loopback.

    Internal topics and new topics get replication factor ``size`` and
    ``min.insync.replicas`` 2, so a cluster of three survives one node being killed.
    Nodes can be killed (:meth:`ApacheKafkaBroker.kill`) and started again with
    :meth:`restart_node`; their data directories stay until :meth:`stop`.
    """

    def __init__(
        self,
        size: int = 3,
        host: str = "127.0.0.1",
        *,
        heap: str = "256m",
        extra_config: Mapping[str, str] | None = None,
        kill_with_parent: bool = False,
        startup_timeout: float = 240.0,
    ) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self._root = Path(tempfile.mkdtemp(prefix="apache-kafka-cluster-"))
        ports = [(find_free_port(host), find_free_port(host)) for _ in range(size)]
        voters = ",".join(f"{i + 1}@{hostport(host, c)}" for i, (_, c) in enumerate(ports))
        cluster_id = _random_cluster_id()
        self.nodes = [
            ApacheKafkaBroker(
                host,
                data_dir=self._root / f"node-{i + 1}",
                heap=heap,
                extra_config=extra_config,
                startup_timeout=startup_timeout,
                kill_with_parent=kill_with_parent,
                node_id=i + 1,
                port=p,
                controller_port=c,
                voters=voters,
                cluster_id=cluster_id,
                expected_brokers=size,
            )
            for i, (p, c) in enumerate(ports)
        ]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.bootstrap_servers for node in self.nodes)

    def start(self) -> ApacheKafkaCluster:
        """Start every node (they need each other for a quorum), then wait for all."""
        try:
            for node in self.nodes:
                node.start(wait=False)
            for node in self.nodes:
                node.wait_ready()
        except BaseException:
            self.stop()
            raise
        atexit.register(self.stop)
        return self

    def restart_node(self, index: int) -> None:
        """Start a stopped or killed node again on its ports and data."""
        self.nodes[index].start()

    def stop(self) -> None:
        """SIGTERM every node at once (sequential controlled shutdowns would lose the
        quorum half way), SIGKILL stragglers, remove the data."""
        atexit.unregister(self.stop)
        for node in self.nodes:
            node.terminate()
        for node in self.nodes:
            node.stop(grace=30.0, keep_data=True)
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> ApacheKafkaCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
