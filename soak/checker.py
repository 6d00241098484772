"""The checks after the input stops: every output against the produced history, the
dead-letter topic against the poison records, the workers' health and the interactive
queries against the output.

Per application the tally is ``lost`` (an input whose update never appeared), ``wrong`` (an
update or final value that differs from the history, an IQ answer that differs from the
output, a 5xx from an endpoint), ``duplicates`` (exactly-once only: an update written twice)
and ``broker_leaked`` (a duplicate first written by a process whose open transaction the
broker committed instead of aborting -- Tansu; see soak/faults.py). Details are kept (the
first few of each kind) for the report.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from platform_streams.errors import StreamsError
from platform_streams.kafka import KafkaAdmin, KafkaException, read_partition_batches
from platform_streams.kafka.positions import log_end_offsets
from soak.app import COUNTS_STORE, REPARTITION, SUBTOPOLOGIES, group_of, table_value
from soak.cluster import App
from soak.connection import client_conf
from soak.faults import http_get
from soak.output import Writers, scan
from soak.producer import History

MAX_DETAILS = 20
TP = tuple[str, int]
T = TypeVar("T")


@dataclass
class Tally:
    lost: int = 0
    wrong: int = 0
    duplicates: int = 0
    broker_leaked: int = 0
    redelivered: int = 0  # at-least-once repeats: allowed, counted for the report
    stuck: int = 0
    details: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def note(self, kind: str, text: str) -> None:
        self.counts[kind] += 1
        if self.counts[kind] <= MAX_DETAILS:
            self.details.append(f"{kind}: {text}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "lost": self.lost,
            "wrong": self.wrong,
            "duplicates": self.duplicates,
            "broker_leaked": self.broker_leaked,
            "at_least_once_redelivered": self.redelivered,
            "stuck": self.stuck,
            "by_kind": dict(self.counts),
            "details": self.details,
        }


class AppChecker:
    """The checks of one application."""

    def __init__(self, app: App, history: History, partitions: int, leaky: dict[int, float]) -> None:
        self.app = app
        self.history = history
        self.partitions = partitions
        self.leaky = leaky
        self.eos = app.spec.guarantee == "exactly_once_v2"
        self.tally = Tally()
        self.final_counts: dict[str, int] = {}

    def _repeat(self, what: str, first_pid: int | None, text: str) -> None:
        t = self.tally
        if not self.eos:
            t.redelivered += 1
        elif first_pid in self.leaky:
            t.broker_leaked += 1
            t.counts[f"{what}_broker_leaked"] += 1
        else:
            t.duplicates += 1
            t.note(f"{what}_duplicate", text)

    def guarded(self, check: Callable[[], T], failed: T) -> T:
        """Run one check; one that cannot finish (an output that cannot be read to its end,
        an endpoint that does not answer) counts as stuck instead of ending the run."""
        try:
            return check()
        except Exception as exc:
            self.tally.stuck += 1
            self.tally.note("check_failed", f"{check.__name__}: {exc!r}")
            return failed

    # ------------------------------------------------------------------ outputs

    def _scan(self, topic_env: str, on_record: Any) -> int:
        spec = self.app.spec
        return scan(
            spec.bootstrap, spec.topics[topic_env], self.partitions, on_record, committed_only=self.eos
        )

    def _count_missing(self, writers: Writers, what: str) -> list[tuple[str, int]]:
        """Every key's updates ``1..n`` (n: the records produced for it) must have been seen.
        Returns the first few missing ``(key, update)`` pairs (what a trace can follow)."""
        lost: list[tuple[str, int]] = []
        for key, n in self.history.last_seq.items():
            missing = writers.missing(key, n)
            if missing:
                self.tally.lost += missing
                first = writers.missing_updates(key, n, limit=5)
                lost.extend((key, i) for i in first)
                self.tally.note(f"{what}_lost", f"{key}: {missing} of 1..{n} never written (first: {first})")
        return lost[:MAX_DETAILS]

    def check_counts(self) -> int:
        writers, top = Writers(), Counter[str]()
        last: dict[str, int] = {}

        def on_record(key: str, value: str, partition: int) -> None:
            count_text, pid_text = value.split("|")
            count, pid = int(count_text), int(pid_text)
            first = writers.seen(key, count)
            if first is not None:
                self._repeat("count", first, f"{key} update {count} again (first by pid {first}, now {pid})")
            else:
                writers.mark(key, count, pid)
            top[key] = max(top[key], count)
            last[key] = count

        read = self._scan("SOAK_COUNTS", on_record)
        self._count_missing(writers, "count")
        for key, n in self.history.last_seq.items():
            if last.get(key) != n or top[key] > n:
                self.tally.wrong += 1
                self.tally.note(
                    "count_wrong", f"{key}: last update {last.get(key)}, max {top[key]}, expected {n}"
                )
        self.final_counts = last
        return read

    def check_windows(self) -> int:
        emitted: dict[tuple[str, int], int] = {}
        expected = self.history.windows

        def on_record(key: str, value: str, partition: int) -> None:
            name, start_text = key.rsplit("@", 1)
            window = (name, int(start_text))
            total, n, pid = (int(x) for x in value.split("|"))
            if window in emitted:
                self._repeat("window", emitted[window], f"{key} emitted again by pid {pid}")
                return
            emitted[window] = pid
            if list(expected.get(window, (None, None))) != [total, n]:
                self.tally.wrong += 1
                self.tally.note(
                    "window_wrong", f"{key}: {total}|{n} by pid {pid}, expected {expected.get(window)}"
                )

        read = self._scan("SOAK_WINDOWS", on_record)
        for window in self.history.closed_windows():
            if window not in emitted:
                self.tally.lost += 1
                self.tally.note("window_lost", f"{window[0]}@{window[1]} closed but never emitted")
        return read

    def check_joined(self) -> int:
        writers, upstream = Writers(), Writers()
        read = self._scan("SOAK_JOINED", lambda k, v, _p: self.on_joined(writers, upstream, k, v))
        lost = self._count_missing(writers, "join")
        if lost:
            self.guarded(lambda: self.trace_lost_joins(lost), None)
        return read

    def trace_lost_joins(self, lost: list[tuple[str, int]]) -> None:
        """Which hop lost a join: look for each lost ``(key, seq)`` in the repartition topic.
        Found there (partition, offset, writer pid): the repartitioned record was written and
        the join side lost it; absent: it was lost before or at the repartition write."""
        wanted = {f"{key}|{seq}": (key, seq) for key, seq in lost}
        found: dict[tuple[str, int], str] = {}

        def on_record(key: str, value: str, partition: int, offset: int) -> None:
            name_seq, _, pid = value.rpartition("|")
            hit = wanted.get(name_seq)
            if hit is not None:
                where = f"partition {partition} offset {offset} by pid {pid}"
                found[hit] = f"{found[hit]}, {where}" if hit in found else where

        topic = repartition_topic(self.app)
        scan(
            self.app.spec.bootstrap,
            topic,
            self.partitions,
            on_record,
            committed_only=self.eos,
            with_offsets=True,
        )
        for hit in lost:
            self.tally.note(
                "join_lost_trace",
                f"{hit[0]} seq {hit[1]} ({group_of(hit[0])}): "
                + (f"in {topic} at {found[hit]}" if hit in found else f"not in {topic}"),
            )

    def on_joined(self, writers: Writers, upstream: Writers, key: str, value: str) -> None:
        """One join result ``<name>|<seq>|<upstream pid>|<tv>|<pid>``. The record crossed the
        repartition topic: a copy written twice there (by a killed process whose open
        transaction Tansu committed, then by its replacement) is joined twice by one healthy
        process, so a repeat is the broker's when either hop's first writer was killed."""
        name, seq_text, up_text, tv, pid_text = value.split("|")
        seq, up, pid = int(seq_text), int(up_text), int(pid_text)
        if key != group_of(name) or tv != table_value(key):
            self.tally.wrong += 1
            self.tally.note("join_wrong", f"{key} -> {value}")
        first = writers.seen(name, seq)
        if first is None:
            writers.mark(name, seq, pid)
            upstream.mark(name, seq, up)
            return
        first_up = upstream.seen(name, seq)
        self._repeat(
            "join",
            first_up if first_up in self.leaky else first,
            f"{name} seq {seq} joined again (first by pid {first} from pid {first_up}, now {pid} from {up})",
        )

    def check_dead_letters(self) -> int:
        seen: Counter[str] = Counter()
        spec = self.app.spec

        def on_record(key: str, value: str, partition: int) -> None:
            seen[value] += 1

        read = scan(spec.bootstrap, spec.dead_letter, 1, on_record, committed_only=self.eos)
        for value, times in seen.items():
            if value not in self.history.poison:
                self.tally.wrong += 1
                self.tally.note("dead_letter_wrong", f"{value!r} dead-lettered but not poison")
            elif times > 1:
                # the DLQ record carries no pid: a repeat is the broker's if a leaking fault
                # of this application came after the poison record was produced
                leaked = any(at >= self.history.poison[value] for at in self.leaky.values())
                for _ in range(times - 1):
                    self._repeat(
                        "dead_letter", next(iter(self.leaky)) if leaked else None, f"{value} x{times}"
                    )
        for value in self.history.poison:
            if value not in seen:
                self.tally.lost += 1
                self.tally.note("dead_letter_lost", f"{value} never dead-lettered")
        return read

    # ------------------------------------------------------------------ live checks

    def check_workers(self) -> dict[str, Any]:
        """Every worker RUNNING, every task assigned (GET /state on each endpoint)."""
        tasks: set[str] = set()
        states = {}
        for port in self.app.ports():
            status, body = _get_with_retries(port, "/state")
            doc = json.loads(body) if status == 200 else {}
            state = doc.get("state")
            threads = [w.get("state") for w in doc.get("workers", [])]
            states[port] = {"state": state, "threads": threads}
            if state != "RUNNING" or any(s != "RUNNING" for s in threads):
                self.tally.stuck += 1
                self.tally.note("worker_not_running", f"port {port}: {state} {threads} (HTTP {status})")
            tasks.update(t for w in doc.get("workers", []) for t in w.get("active_tasks", []))
        expected = {f"{s}_{p}" for s in range(SUBTOPOLOGIES) for p in range(self.partitions)}
        if not expected <= tasks:
            self.tally.stuck += 1
            self.tally.note("tasks_unassigned", f"{sorted(expected - tasks)} not active anywhere")
        return {"endpoints": states, "active_tasks": sorted(tasks)}

    def check_queries(self, sample: int = 20) -> int:
        """Interactive queries against the output: every key's count through one range scan
        (asked of one endpoint, answered by all), and ``sample`` keys one by one through
        other endpoints (forwarded to the owner). Returns the keys compared."""
        ports = self.app.ports()
        expected = self.history.last_seq
        status, body = _get_with_retries(ports[0], f"/stores/{COUNTS_STORE}/range?limit=100000")
        doc = json.loads(body) if status == 200 else {}
        scanned = {row["key"]: row["value"] for row in doc.get("rows", [])}
        if status != 200 or doc.get("missing_partitions"):
            self.tally.wrong += 1
            self.tally.note(
                "iq_scan_failed", f"HTTP {status}, missing partitions {doc.get('missing_partitions')}"
            )
        for key, n in sorted(expected.items()):
            if scanned.get(key) != n or self.final_counts.get(key) != n:
                self.tally.wrong += 1
                self.tally.note(
                    "iq_wrong",
                    f"{key}: IQ scan {scanned.get(key)!r}, output {self.final_counts.get(key)}, expected {n}",
                )
        for i, key in enumerate(sorted(expected)[:sample]):
            port = ports[(i + 1) % len(ports)]
            status, body = _get_with_retries(port, f"/stores/{COUNTS_STORE}/keys/{key}")
            value = json.loads(body).get("value") if status == 200 else None
            if value != expected[key]:
                self.tally.wrong += 1
                self.tally.note(
                    "iq_wrong", f"{key}: IQ at port {port} HTTP {status} {value!r}, expected {expected[key]}"
                )
        return len(scanned) + min(sample, len(expected))


def _get_with_retries(port: int, path: str, attempts: int = 5) -> tuple[int, bytes]:
    status, body = 0, b""
    for attempt in range(attempts):
        status, body = http_get(port, path, timeout_s=30)
        if status == 200 or (400 <= status < 500 and status != 404):
            break
        time.sleep(2 + 2 * attempt)
    return status, body


_LAST_SAID: dict[str, float] = {}


def _say(app: App, text: str, every_s: float = 30.0) -> None:
    """Progress while waiting for catch-up, at most every ``every_s`` per application."""
    if time.monotonic() - _LAST_SAID.get(app.spec.name, 0.0) >= every_s:
        _LAST_SAID[app.spec.name] = time.monotonic()
        print(f"soak: {app.spec.name}: {text}", flush=True)


def committed_input(admin: KafkaAdmin, app: App, input_topic: str, partitions: int) -> int:
    committed = admin.committed_offsets(app.spec.app_id, [(input_topic, p) for p in range(partitions)])
    return sum(o or 0 for o in committed.values())


def caught_up(admin: KafkaAdmin, app: App, history: History, input_topic: str, partitions: int) -> bool:
    """Input committed to its end, and the repartition topic to within one (a transaction
    marker) of its end as found by fetching. A broker too slow to answer (a loaded machine,
    a paused broker) is "not yet", never the end of the run."""
    try:
        return _caught_up(admin, app, history, input_topic, partitions)
    except (StreamsError, KafkaException) as exc:
        _say(app, f"catch-up not known yet: {exc}")
        return False


def repartition_topic(app: App) -> str:
    return f"{app.spec.app_id}-{REPARTITION}-repartition"


def _caught_up(admin: KafkaAdmin, app: App, history: History, input_topic: str, partitions: int) -> bool:
    input_behind = sum(history.ends.values()) - committed_input(admin, app, input_topic, partitions)
    if input_behind > 0:
        _say(app, f"input {input_behind} records behind")
        return False
    topic = repartition_topic(app)
    tps = [(topic, p) for p in range(partitions)]
    ends = log_end_offsets(client_conf(app.spec.bootstrap), tps)
    committed = admin.committed_offsets(app.spec.app_id, tps)
    behind = {tp: end - (committed.get(tp) or 0) for tp, end in ends.items()}
    pending = {tp: committed.get(tp) or 0 for tp, n in behind.items() if n > 0}
    if pending and app.spec.guarantee == "exactly_once_v2":
        # Past the committed offsets an exactly-once topic may hold only what read_committed
        # never shows: transaction markers, aborted records, a dead producer's open
        # transaction (which Tansu leaves open). Caught up means no committed record there.
        pending = committed_records_after(app.spec.bootstrap, pending)
    if pending:
        _say(app, f"repartition topic behind {{{', '.join(f'{tp[1]}: {behind[tp]}' for tp in pending)}}}")
        return False
    return True


def committed_records_after(
    bootstrap: str, positions: dict[tuple[str, int], int]
) -> dict[tuple[str, int], int]:
    """The partitions of ``positions`` with a committed record at or after their offset
    (read_committed, to the last stable offset)."""
    conf = {**client_conf(bootstrap), "isolation.level": "read_committed"}
    with_records = {}
    for (topic, partition), start in positions.items():
        with closing(read_partition_batches(conf, topic, partition, start, batch_size=1)) as batches:
            if next(batches, None) is not None:
                with_records[(topic, partition)] = start
    return with_records
