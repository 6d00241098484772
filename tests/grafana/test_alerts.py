"""The alerts fire against real workers put into each condition, on a real Prometheus.

Prometheus (the Debian package) loads ``grafana/rules`` rendered with short ``for:``
durations and windows (``generate_rules.Tuning``; the expressions and thresholds are the
committed ones) and scrapes real workers:

* a worker whose processor throws, with the default ``SHUTDOWN_CLIENT`` handler: the client
  ends in ERROR -> PlatformStreamsClientError, PlatformStreamsClientNotRunning and
  PlatformStreamsStreamThreadFailed;
* a worker whose processor throws once, with ``REPLACE_WORKER``: the thread is replaced and
  the client keeps RUNNING -> PlatformStreamsStreamThreadFailed only;
* a worker slower than its input (a processor that sleeps, a small input buffer) ->
  PlatformStreamsConsumerLagGrowing;
* a worker whose state directory is a 1 MiB tmpfs (root mounts it; CI runs as root) and
  whose store gets ~24 MiB of distinct keys: RocksDB's background memtable flush fails with
  ENOSPC, ``rocksdb.background-errors`` becomes 1 -> PlatformStreamsRocksDBErrors; more
  writes then fail the thread -> PlatformStreamsStreamThreadFailed, and the gauge goes.

Dropped records and end-to-end latency fire in ``test_dashboards.py`` (its worker gets bad
and back-filled records); restore stuck and rebalancing too long in
``test_restore_and_assignment_series.py`` (a worker whose restore is held).
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from platform_streams import KafkaStreams, State, StreamsBuilder
from platform_streams.dsl import Consumed, Materialized
from platform_streams.kafka import KafkaAdmin
from platform_streams.processor import Processor, Record
from platform_streams.runtime.lifecycle import StreamsUncaughtExceptionResponse
from platform_streams.serde import String
from tests.grafana.rules_support import SHORT, generate_rules
from tests.integration.support_apps import app_config, wait_until
from tests.support.kafka import new_topic, produce
from tests.support.prometheus import running_prometheus

pytestmark = [pytest.mark.grafana, pytest.mark.broker, pytest.mark.slow]

_failed_once = threading.Event()
#: A few records per fetch: a slow loop still iterates (and refreshes the lag gauge) often.
SMALL_FETCHES = {
    "message.max.bytes": 1000,
    "fetch.max.bytes": 1024,
    "max.partition.fetch.bytes": 1024,
    "queued.max.messages.kbytes": 1,
}


class Throws(Processor):
    """Raises on every record: the stream thread dies."""

    def process(self, record: Record) -> None:
        raise RuntimeError(f"poison record {record.key!r}")


class ThrowsOnce(Processor):
    """Raises on the first record only: the replacement thread then carries on."""

    def process(self, record: Record) -> None:
        if not _failed_once.is_set():
            _failed_once.set()
            raise RuntimeError("transient failure")


class Slow(Processor):
    """10 ms per record: ~100 records/s, slower than the test's producer."""

    def process(self, record: Record) -> None:
        time.sleep(0.01)


def _app(source: str, processor: type[Processor]) -> StreamsBuilder:
    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=String(), value_serde=String())).process(processor)
    return builder


@contextmanager
def _worker(
    bootstrap: str, source: str, processor: type[Processor], tmp: Path, **overrides: Any
) -> Iterator[tuple[KafkaStreams, str]]:
    handler = overrides.pop("handler", None)
    config = app_config(bootstrap, tmp / f"state-{processor.__name__}", http_port=0, **overrides)
    streams = KafkaStreams(_app(source, processor).build(), config)
    if handler is not None:
        streams.set_uncaught_exception_handler(handler)
    streams.start()
    try:
        assert streams.http_server is not None
        yield streams, f"127.0.0.1:{streams.http_server.address.port}"
    finally:
        streams.close(timeout_s=30)


def _alerts_of(prometheus: Any, application_id: str) -> set[str]:
    return {
        a["labels"]["alertname"]
        for a in prometheus.alerts()
        if a["labels"].get("application_id") == application_id
    }


def test_a_failed_thread_and_a_client_in_error_fire_their_alerts(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source = new_topic(admin, 1, "alert-in")
    _failed_once.clear()
    with ExitStack() as stack:
        dying, dying_at = stack.enter_context(_worker(bootstrap_servers, source, Throws, tmp_path))
        replaced, replaced_at = stack.enter_context(
            _worker(
                bootstrap_servers,
                source,
                ThrowsOnce,
                tmp_path,
                handler=lambda exc: StreamsUncaughtExceptionResponse.REPLACE_WORKER,
            )
        )
        rules = generate_rules.write(tmp_path / "rules", SHORT)
        prometheus = stack.enter_context(
            running_prometheus([dying_at, replaced_at], tmp_path / "prometheus", rule_files=rules)
        )
        prometheus.wait_for("count(kafka_streams_client_state) == 14")  # two clients, seven states each
        produce(bootstrap_servers, source, [("k", "boom")])
        dying.wait_for_state(State.ERROR, timeout_s=60)
        wait_until(_failed_once.is_set, 60, "the replaced worker's processor to throw")
        wait_until(lambda: replaced.state() is State.RUNNING, 60, "the replacement to run")

        dying_id, replaced_id = dying.config.application_id, replaced.config.application_id
        error = prometheus.wait_for_alert("PlatformStreamsClientError")
        assert error["labels"]["application_id"] == dying_id and error["labels"]["state"] == "ERROR"
        assert error["labels"]["severity"] == "critical"
        not_running = prometheus.wait_for_alert("PlatformStreamsClientNotRunning")
        assert not_running["labels"]["application_id"] == dying_id
        wait_until(
            lambda: (
                {dying_id, replaced_id}
                <= {
                    a["labels"]["application_id"]
                    for a in prometheus.alerts()
                    if a["labels"]["alertname"] == "PlatformStreamsStreamThreadFailed"
                }
            ),
            60,
            "both clients' thread-failure alerts",
        )
        # the replaced client keeps running: no state alert for it
        assert not {"PlatformStreamsClientError", "PlatformStreamsClientNotRunning"} & _alerts_of(
            prometheus, replaced_id
        )
        prometheus.wait_for(
            f'kafka_streams_client_state{{application_id="{replaced_id}",state="RUNNING"}} == 1'
        )


def test_consumer_lag_growing_fires_for_a_worker_slower_than_its_input(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source = new_topic(admin, 1, "lag-in")
    stop = threading.Event()

    def flood() -> None:  # ~500 records/s against ~100/s processed
        n = 0
        while not stop.wait(0.1):
            produce(bootstrap_servers, source, [(f"k{i}", "v") for i in range(n, n + 50)])
            n += 50

    feeder = threading.Thread(target=flood, daemon=True)
    with ExitStack() as stack:
        slow, slow_at = stack.enter_context(
            _worker(
                bootstrap_servers,
                source,
                Slow,
                tmp_path,
                buffered_records_per_partition=20,
                max_poll_interval_ms=60_000,
                consumer_config=SMALL_FETCHES,
            )
        )
        slow.wait_for_state(State.RUNNING, timeout_s=60)
        rules = generate_rules.write(tmp_path / "rules", SHORT)
        prometheus = stack.enter_context(
            running_prometheus([slow_at], tmp_path / "prometheus", rule_files=rules)
        )
        feeder.start()
        stack.callback(feeder.join, 10)
        stack.callback(stop.set)
        alert = prometheus.wait_for_alert("PlatformStreamsConsumerLagGrowing", timeout_s=120)
        assert alert["labels"]["topic"] == source
        assert alert["labels"]["application_id"] == slow.config.application_id
        lag = prometheus.query(f'sum(kafka_streams_consumer_records_lag{{topic="{source}"}})')
        assert float(lag[0]["value"][1]) > 0


#: ~24 MiB of distinct keys: past the 10 MiB record cache, over 8 MiB reach RocksDB (in
#: overlay batches of ``rocksdb.MAX_PENDING`` puts) and fill its memtable
#: (``_WRITE_BUFFER_BYTES``); its background flush of random (incompressible) values fails
#: on the 1 MiB tmpfs. Too few puts follow to push another batch, and the commit (which
#: flushes) is far off, so the worker keeps running and exporting the error count. A second
#: flood then pushes a batch into the stopped instance: the stream thread fails.
_FLOOD_RECORDS = 45_000
_TINY_TMPFS = "1m"


def _unavailable(reason: str) -> None:
    """Skip here; fail in CI, which runs as root and must prove this alert."""
    if os.environ.get("CI"):  # as tests/support/prometheus.py: CI must prove it
        pytest.fail(f"CI must run the RocksDB disk-full alert test: {reason}")
    pytest.skip(reason)


@contextmanager
def _tiny_tmpfs(path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs at ``path`` (root only), unmounted afterwards; only this mount is touched."""
    path.mkdir(parents=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        _unavailable("mounting a tmpfs for the RocksDB disk-full alert needs root and mount(8)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={_TINY_TMPFS},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        _unavailable(f"cannot mount a tmpfs at {path}: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=True)  # a file still open: detach


def test_rocksdb_errors_fire_for_a_store_whose_flush_finds_the_disk_full(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source = new_topic(admin, 1, "rocks-in")
    with ExitStack() as stack:
        disk = stack.enter_context(_tiny_tmpfs(tmp_path / "tiny-disk"))
        builder = StreamsBuilder()
        builder.table(
            source,
            Consumed(key_serde=String(), value_serde=String()),
            Materialized.as_("full-disk-store"),
        )
        config = app_config(
            bootstrap_servers,
            disk / "state",
            http_port=0,
            commit_interval_ms=600_000,  # no commit-time flush during the test: only the background one
        )
        streams = KafkaStreams(builder.build(), config)
        streams.start()
        stack.callback(streams.close, timeout_s=30)
        assert streams.http_server is not None
        streams.wait_for_state(State.RUNNING, timeout_s=60)
        rules = generate_rules.write(tmp_path / "rules", SHORT)
        prometheus = stack.enter_context(
            running_prometheus(
                [f"127.0.0.1:{streams.http_server.address.port}"],
                tmp_path / "prometheus",
                rule_files=rules,
            )
        )
        produce(
            bootstrap_servers,
            source,
            [(f"key-{i:06d}", base64.b64encode(os.urandom(384)).decode()) for i in range(_FLOOD_RECORDS)],
        )
        alert = prometheus.wait_for_alert("PlatformStreamsRocksDBErrors", timeout_s=90)
        assert alert["labels"]["store"] == "full-disk-store"
        assert alert["labels"]["application_id"] == config.application_id
        assert alert["labels"]["severity"] == "critical"
        # a background error: the worker itself has not failed (yet)
        assert streams.state() is State.RUNNING
        errors = prometheus.query('sum(kafka_streams_state_background_errors{store="full-disk-store"})')
        assert float(errors[0]["value"][1]) >= 1

        # the next batch written to the stopped instance fails the thread; the gauge goes
        # with the closed store (docs/runbooks.md: the thread alerts take over)
        produce(bootstrap_servers, source, [(f"more-{i:06d}", "x" * 500) for i in range(30_000)])
        streams.wait_for_state(State.ERROR, timeout_s=60)
        prometheus.wait_for_alert("PlatformStreamsStreamThreadFailed")
        wait_until(
            lambda: not prometheus.query('kafka_streams_state_background_errors{store="full-disk-store"}'),
            30,
            "the closed store's background-errors gauge to go away",
        )
