"""Application reset on the real broker: reprocessing, refusal while running, offset scenarios.

The application (tests/integration/ops_apps.py) counts words in two logged stores behind
a repartition topic. Its output from scratch is fully determined by its input, so after a
reset a restarted instance must emit exactly the same records again -- which it only does
if the input offsets went back, the changelogs were deleted (else restore would bring the
old counts back) and the local state was wiped. The run also creates the runtime's
coordination topics (``<id>-control``; ``<id>-metadata`` as it has an application server):
the reset deletes them too, and the restarted run recreates them.

Offset scenarios run without the application: committed offsets are set directly, the
reset moves them, and they are read back with ``KafkaAdmin.committed_offsets``. Inputs are
produced in several batches because that is what makes Tansu's ListOffsets(latest) wrong
(it answers the last batch's start + 1), and with old explicit timestamps, which Tansu's
timestamp lookup ignores (it matches its own write time): the expected offsets are the
exact ones on both brokers.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from platform_streams import KafkaStreams, State
from platform_streams.cli import main
from platform_streams.config import StreamsConfig
from platform_streams.errors import UnsupportedBrokerFeatureError
from platform_streams.kafka import KafkaAdmin, TopicSpec
from platform_streams.ops import (
    OffsetScenario,
    OperationRefusedError,
    ResetOptions,
    ResetResult,
    create_internal_topics,
    reset_application,
)
from platform_streams.query.directory import metadata_topic
from platform_streams.runtime.membership.control_channel import control_topic_name
from platform_streams.runtime.membership.rebalance_wait import backup_group
from platform_streams.runtime.task_assignment.protocol import members_topic_name
from platform_streams.topology.topology import Topology
from tests.integration.ops_apps import build_dsl_topology, build_topology
from tests.support.kafka import GROUP_TIMING, consume_all, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

REPO = Path(__file__).resolve().parents[2]
WORDS = ["a", "bb", "a", "ccc", "bb", "a", "dddd", "a"]
BASE_TS = 1_600_000_000_000  # 2020: far from any broker write time
TP0_TIMESTAMPS = [BASE_TS + i * 1000 for i in range(10)]  # partition 0: 10 records, 1 s apart
TP1_TIMESTAMPS = [BASE_TS + i * 2000 for i in range(5)]  # partition 1: 5 records, 2 s apart


@dataclass
class App:
    topology: Topology
    config: StreamsConfig
    input: str
    output: str
    internal_names: tuple[str, ...] = ("rekey-repartition", "words-changelog", "letters-changelog")

    @property
    def id(self) -> str:
        return self.config.application_id

    @property
    def internal_topics(self) -> set[str]:
        return {f"{self.id}-{n}" for n in self.internal_names}

    @property
    def coordination_topics(self) -> set[str]:
        return {control_topic_name(self.id), metadata_topic(self.id), members_topic_name(self.id)}

    @property
    def state_dir(self) -> Path:
        return Path(self.config.state_dir) / self.id


@pytest.fixture
def app(admin: KafkaAdmin, bootstrap_servers: str, tmp_path: Path) -> Iterator[App]:
    source, sink = new_topic(admin, 2, "reset-in"), new_topic(admin, 2, "reset-out")
    config = StreamsConfig(
        application_id=f"ops-reset-{uuid.uuid4().hex[:10]}",
        bootstrap_servers=bootstrap_servers,
        state_dir=tmp_path / "state",
        commit_interval_ms=100,
        session_timeout_ms=GROUP_TIMING["session.timeout.ms"],
        heartbeat_interval_ms=GROUP_TIMING["heartbeat.interval.ms"],
        max_poll_interval_ms=GROUP_TIMING["max.poll.interval.ms"],
    )
    yield App(build_topology(source, sink), config, source, sink)
    admin.delete_topics(
        [t for t in admin.list_topics() if t.startswith(config.application_id)] + [source, sink]
    )


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def output_of(app: App, expected: int) -> Counter[tuple[bytes | None, bytes | None]]:
    # a fresh run joins the group and creates its internal topics first: generous on a loaded machine
    records = consume_all(app.config.bootstrap_servers, app.output, expected, timeout_s=60)
    assert len(records) == expected, f"expected {expected} output records, got {len(records)}"
    return Counter((r.key, r.value) for r in records)


def run_once(app: App, expected_output: int) -> Counter[tuple[bytes | None, bytes | None]]:
    """Start the app, wait for ``expected_output`` records in total on the output, close it."""
    with KafkaStreams(app.topology, app.config) as streams:
        streams.start()
        produced = output_of(app, expected_output)
    assert streams.state() is State.NOT_RUNNING
    return produced


def snapshot(admin: KafkaAdmin, app: App, *, files: bool = True) -> tuple[object, ...]:
    """Everything a reset may change: committed offsets, topics, local state (its files, or
    only whether it exists while the app runs and writes them itself)."""
    state: object = app.state_dir.exists()
    if files and app.state_dir.exists():
        state = sorted(str(p.relative_to(app.state_dir)) for p in app.state_dir.rglob("*"))
    # only this test's topics: the broker may be shared with other tests creating theirs
    topics = sorted(t for t in admin.list_topics() if t.startswith(app.id) or t in (app.input, app.output))
    return admin.committed_offsets(app.id), topics, state


@pytest.mark.parametrize("api", ["processor_api", "dsl"])
def test_reset_makes_a_restarted_app_reproduce_its_output(app: App, admin: KafkaAdmin, api: str) -> None:
    per_word, fourth_a = 1, b"4:4"
    if api == "dsl":  # one repartition topic per aggregation; a count and a letter total per word
        app.topology = build_dsl_topology(app.input, app.output)
        app.config = app.config.with_overrides(statestore_cache_max_bytes=0)
        app.internal_names = (
            "words-repartition",
            "words-changelog",
            "letters-repartition",
            "letters-changelog",
        )
        per_word, fourth_a = 2, b"count:4"
    # an advertised address (nothing listens there) makes the run publish to <id>-metadata too
    app.config = app.config.with_overrides(application_server="localhost:9")
    produce(app.config.bootstrap_servers, app.input, [(None, w) for w in WORDS])
    first = run_once(app, per_word * len(WORDS))
    assert first[(b"a", fourth_a)] == 1  # the fourth "a": state counted across records
    assert app.state_dir.exists()
    assert app.internal_topics | app.coordination_topics <= set(admin.list_topics())

    result = reset_application(app.topology, app.config)

    assert result.completed and not result.dry_run and result.group_state in ("EMPTY", "DEAD")
    assert {(c.topic, c.partition): c.target for c in result.offsets} == {
        (app.input, 0): 0,
        (app.input, 1): 0,
    }
    assert admin.committed_offsets(app.id, [(app.input, 0), (app.input, 1)]) == {
        (app.input, 0): 0,
        (app.input, 1): 0,
    }
    deleted = {t.topic: t.kind for t in result.internal_topics if t.status == "deleted"}
    assert set(deleted) == app.internal_topics | app.coordination_topics
    assert {deleted[t] for t in app.coordination_topics} == {"coordination"}
    assert not (app.internal_topics | app.coordination_topics) & set(admin.list_topics())
    assert result.local_state is not None and result.local_state.action == "deleted"
    assert not app.state_dir.exists()
    assert {app.input, app.output} <= set(admin.list_topics())  # user topics are never touched

    both = run_once(app, 2 * per_word * len(WORDS))
    assert both == first + first, "the restarted app did not reproduce its output with state rebuilt"
    assert app.coordination_topics <= set(admin.list_topics()), "the restart did not recreate them"


def test_reset_refuses_while_the_app_runs_and_works_after_close(app: App, admin: KafkaAdmin) -> None:
    produce(app.config.bootstrap_servers, app.input, [(None, w) for w in WORDS])
    streams = KafkaStreams(app.topology, app.config)
    try:
        streams.start()
        output_of(app, len(WORDS))
        wait_until(lambda: admin.group_state(app.id) == "STABLE", "the group is STABLE")
        inputs = [(app.input, 0), (app.input, 1)]
        wait_until(
            lambda: sum(o or 0 for o in admin.committed_offsets(app.id, inputs).values()) == len(WORDS),
            "the app committed all its input",
        )
        before = snapshot(admin, app, files=False)

        with pytest.raises(OperationRefusedError, match="STABLE") as refused:
            reset_application(app.topology, app.config)
        found = refused.value.result
        assert isinstance(found, ResetResult) and found.group_state == "STABLE" and not found.completed
        dry = reset_application(app.topology, app.config, ResetOptions(dry_run=True))
        assert dry.blocked is not None and not dry.ok and "STABLE" in dry.summary()
        control = control_topic_name(app.id)
        assert (control, "would_delete") in {(t.topic, t.status) for t in dry.internal_topics}
        assert snapshot(admin, app, files=False) == before, "a refused reset changed something"
        assert control in admin.list_topics()  # the running app's control topic is left alone
    finally:
        streams.close()

    wait_until(lambda: admin.group_state(app.id) in ("EMPTY", "DEAD"), "the group is empty")
    result = reset_application(app.topology, app.config)
    assert result.completed
    assert admin.committed_offsets(app.id, [(app.input, 0)]) == {(app.input, 0): 0}


def test_dry_run_changes_nothing(app: App, admin: KafkaAdmin) -> None:
    produce(app.config.bootstrap_servers, app.input, [(b"k", b"v", 0)] * 4 + [(b"k", b"v", 1)] * 2)
    admin.alter_committed_offsets(app.id, {(app.input, 0): 3, (app.input, 1): 1})
    create_internal_topics(app.topology, app.config)
    admin.create_topics(
        [TopicSpec(t, 1, config={"cleanup.policy": "compact"}) for t in app.coordination_topics]
    )
    (app.state_dir / "0_0").mkdir(parents=True)
    (app.state_dir / "0_0" / "CURRENT").write_text("x")
    before = snapshot(admin, app)

    for scenario in (
        OffsetScenario.to_earliest(),
        OffsetScenario.to_offset(2),
        OffsetScenario.by_duration("PT1H"),
    ):
        result = reset_application(app.topology, app.config, ResetOptions(scenario=scenario, dry_run=True))
        assert result.dry_run and not result.completed and result.ok
        assert len(result.offsets) == 2 and all(c.target is not None for c in result.offsets)
        assert {t.status for t in result.internal_topics} == {"would_delete"}
        assert app.coordination_topics <= {t.topic for t in result.internal_topics}
        assert result.local_state is not None and result.local_state.action == "would_delete"
        assert result.summary().startswith("DRY RUN")
        assert snapshot(admin, app) == before, f"dry run {scenario.describe()} changed something"


@pytest.fixture
def seeded(app: App, admin: KafkaAdmin) -> App:
    """Input with 10 + 5 records in several batches, old timestamps; committed at 5 and 2."""
    bootstrap = app.config.bootstrap_servers
    for chunk in (range(0, 3), range(3, 6), range(6, 10)):
        produce(
            bootstrap,
            app.input,
            [(b"k", b"v", 0) for _ in chunk],
            timestamp_ms=[TP0_TIMESTAMPS[i] for i in chunk],
        )
    for chunk in (range(0, 2), range(2, 5)):
        produce(
            bootstrap,
            app.input,
            [(b"k", b"v", 1) for _ in chunk],
            timestamp_ms=[TP1_TIMESTAMPS[i] for i in chunk],
        )
    admin.alter_committed_offsets(app.id, {(app.input, 0): 5, (app.input, 1): 2})
    return app


SCENARIOS: list[tuple[str, Callable[[Path], OffsetScenario], tuple[int, int]]] = [
    ("to-earliest", lambda _: OffsetScenario.to_earliest(), (0, 0)),
    ("to-latest", lambda _: OffsetScenario.to_latest(), (10, 5)),
    ("to-offset", lambda _: OffsetScenario.to_offset(3), (3, 3)),
    ("to-offset-clamped", lambda _: OffsetScenario.to_offset(7), (7, 5)),
    ("shift-back", lambda _: OffsetScenario.shift_by(-2), (3, 0)),
    ("shift-forward-clamped", lambda _: OffsetScenario.shift_by(4), (9, 5)),
    ("to-datetime", lambda _: OffsetScenario.to_datetime("2020-09-13T12:26:44.500Z"), (5, 3)),
    ("to-datetime-before", lambda _: OffsetScenario.to_datetime("2019-01-01T00:00:00Z"), (0, 0)),
    ("to-datetime-after", lambda _: OffsetScenario.to_datetime("2020-09-14T00:00:00Z"), (10, 5)),
    ("by-duration", lambda _: OffsetScenario.by_duration("PT5.5S"), (5, 3)),
    ("from-file", lambda tmp: OffsetScenario.from_file(_plan_file(tmp, "in,0,8\n")), (8, 2)),
    (
        "from-file-clamped",
        lambda tmp: OffsetScenario.from_file(_plan_file(tmp, "in,0,99\nin,1,1\n")),
        (10, 1),
    ),
]


def _plan_file(tmp: Path, text: str) -> Path:
    path = tmp / "plan.csv"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("make", "expected"), [s[1:] for s in SCENARIOS], ids=[s[0] for s in SCENARIOS])
def test_offset_scenarios_land_on_the_expected_offsets(
    seeded: App,
    admin: KafkaAdmin,
    broker_kind: str,
    tmp_path: Path,
    make: Callable[[Path], OffsetScenario],
    expected: tuple[int, int],
) -> None:
    assert OffsetScenario.to_datetime("2020-09-13T12:26:44.500Z").value == BASE_TS + 4500
    scenario = make(tmp_path)
    if scenario.kind == "from_file":  # the plan names the topic "in": point it at this test's topic
        scenario = OffsetScenario.from_plan({(seeded.input, p): o for (_, p), o in scenario.plan.items()})
    result = reset_application(
        seeded.topology, seeded.config, ResetOptions(scenario=scenario), now_ms=BASE_TS + 10_000
    )
    partitions = [(seeded.input, 0), (seeded.input, 1)]
    committed = admin.committed_offsets(seeded.id, partitions)
    assert (committed[partitions[0]], committed[partitions[1]]) == expected, result.summary()
    if scenario.time_based:
        methods = {c.method for c in result.offsets}
        assert methods <= {"list_offsets", "scan"}, result.summary()
        if "scan" in methods:  # e.g. Tansu: its timestamp lookup was detected as inexact
            assert any("scanning" in w for w in result.warnings), result.warnings
        if broker_kind == "kafka":  # Kafka's time index is exact: used directly, never scanned
            assert methods <= {"list_offsets", "empty"} and not result.warnings, result.summary()


def test_reset_deletes_the_offsets_a_group_repair_saved(seeded: App, admin: KafkaAdmin) -> None:
    """A wedged-group repair keeps the group's offsets in a backup group that workers start
    from where the group has none (runtime/membership/rebalance_wait.py); a reset must not leave them
    behind, or a restarted application would skip back to them instead of the reset's."""
    backup = backup_group(seeded.id)
    admin.alter_committed_offsets(backup, {(seeded.input, 0): 7})
    reset_application(seeded.topology, seeded.config, ResetOptions(scenario=OffsetScenario.to_earliest()))
    assert admin.committed_offsets(backup, [(seeded.input, 0)]) == {(seeded.input, 0): None}


def test_reset_never_resets_output_or_internal_topics(seeded: App, admin: KafkaAdmin) -> None:
    before = snapshot(admin, seeded)
    for topic in (seeded.output, f"{seeded.id}-words-changelog", control_topic_name(seeded.id)):
        with pytest.raises(OperationRefusedError, match="never reset"):
            reset_application(seeded.topology, seeded.config, ResetOptions(input_topics=[topic]))
    assert snapshot(admin, seeded) == before


def test_time_lookup_beyond_the_scan_limit_fails_clearly(seeded: App, admin: KafkaAdmin) -> None:
    options = ResetOptions(
        scenario=OffsetScenario.to_datetime("2020-09-13T12:26:44.500Z"), max_scan_records=2
    )
    before = snapshot(admin, seeded)
    try:
        result = reset_application(seeded.topology, seeded.config, options)
    except UnsupportedBrokerFeatureError as exc:  # an inexact time index (Tansu): never guess around it
        assert "refusing to guess" in str(exc)
        assert snapshot(admin, seeded) == before
    else:  # an exact broker (Kafka) answers without scanning
        assert {c.method for c in result.offsets} == {"list_offsets"}


def test_cli_reset(
    seeded: App, admin: KafkaAdmin, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPS_TEST_INPUT", seeded.input)
    monkeypatch.setenv("OPS_TEST_OUTPUT", seeded.output)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    args = [
        "reset",
        "tests.integration.ops_apps:topology",
        "--set",
        f"application.id={seeded.id}",
        "--set",
        f"bootstrap.servers={seeded.config.bootstrap_servers}",
        "--set",
        f"state.dir={seeded.config.state_dir}",
    ]
    partitions = [(seeded.input, 0), (seeded.input, 1)]
    before = admin.committed_offsets(seeded.id, partitions)

    assert main([*args, "--to-offset", "1", "--dry-run", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["dry_run"] is True and [o["target"] for o in planned["offsets"]] == [1, 1]
    assert main([*args, "--to-offset", "1"]) == 1  # no terminal to confirm on, no --yes
    assert "--yes" in capsys.readouterr().err
    assert admin.committed_offsets(seeded.id, partitions) == before

    assert main([*args, "--to-offset", "1", "--yes"]) == 0
    assert "-> 1" in capsys.readouterr().out
    assert admin.committed_offsets(seeded.id, partitions) == dict.fromkeys(partitions, 1)
    assert main([*args, "--by-duration", "yesterday"]) == 2


_MEMBER = """
import sys
from platform_streams.kafka import create_consumer
bootstrap, group, topic, session, heartbeat, poll = sys.argv[1:7]
consumer = create_consumer({
    "bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": int(session),
    "heartbeat.interval.ms": int(heartbeat), "max.poll.interval.ms": int(poll),
})
consumer.subscribe([topic])
announced = False
while True:
    consumer.poll(0.1)
    if consumer.assignment() and not announced:
        print("joined", flush=True)
        announced = True
"""


@pytest.mark.slow
def test_force_expires_members_of_a_killed_instance(seeded: App, admin: KafkaAdmin, tmp_path: Path) -> None:
    timing = [
        str(GROUP_TIMING[k]) for k in ("session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms")
    ]
    out = tmp_path / "member.out"
    with open(out, "wb") as sink:
        member = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _MEMBER,
                seeded.config.bootstrap_servers,
                seeded.id,
                seeded.input,
                *timing,
            ],
            stdout=sink,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    try:
        wait_until(lambda: "joined" in out.read_text(), "the member joined")
        wait_until(lambda: admin.group_state(seeded.id) == "STABLE", "the group is STABLE")
    finally:
        member.send_signal(signal.SIGKILL)
        member.wait()
    with pytest.raises(OperationRefusedError, match="--force"):
        reset_application(seeded.topology, seeded.config)

    started = time.monotonic()
    result = reset_application(seeded.topology, seeded.config, ResetOptions(force=True, force_timeout_s=30))
    assert result.completed and time.monotonic() - started < 30
    assert any("RemoveMembersFromConsumerGroup" in w for w in result.warnings)
    assert admin.committed_offsets(seeded.id, [(seeded.input, 0)]) == {(seeded.input, 0): 0}


def test_cli_reset_without_the_code_takes_kafkas_flags(
    seeded: App, admin: KafkaAdmin, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's StreamsResetter flags (tools/src/main/java/org/apache/kafka/tools/StreamsResetter.java:
    --application-id, --bootstrap-server, --input-topics, --intermediate-topics, --internal-topics):
    no MODULE:FACTORY, so the internal topics are the existing ones named like the
    application's; an explicit --internal-topics accepts only names like those."""
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    create_internal_topics(seeded.topology, seeded.config)
    through = new_topic(admin, 1, "reset-through")
    produce(seeded.config.bootstrap_servers, through, [(b"k", b"v", 0)] * 3)
    admin.alter_committed_offsets(seeded.id, {(through, 0): 0})
    foreign = f"other-{uuid.uuid4().hex[:10]}-words-changelog"
    admin.create_topics([TopicSpec(foreign, 1)])
    kafka_flags = [
        "reset",
        "--application-id",
        seeded.id,
        "--bootstrap-server",
        seeded.config.bootstrap_servers,
        "--set",
        f"state.dir={seeded.config.state_dir}",
        "--input-topics",
        seeded.input,
        "--yes",
    ]
    inputs = [(seeded.input, 0), (seeded.input, 1)]
    try:
        before = snapshot(admin, seeded)
        # the code-less mode needs the topics to reset: it cannot know the sources
        assert main([*kafka_flags[:5], "--yes"]) == 2
        assert "--input-topics" in capsys.readouterr().err
        # another application's topic (or a typo) named explicitly is refused, nothing changes
        assert main([*kafka_flags, "--internal-topics", f"{seeded.id}-words-changelog,{foreign}"]) == 1
        assert "not named like an internal topic" in capsys.readouterr().err
        assert snapshot(admin, seeded) == before

        # an explicit list deletes only those
        only = f"{seeded.id}-words-changelog"
        assert main([*kafka_flags, "--to-offset", "1", "--internal-topics", only]) == 0
        assert only not in admin.list_topics()
        assert f"{seeded.id}-letters-changelog" in admin.list_topics()
        assert admin.committed_offsets(seeded.id, inputs) == dict.fromkeys(inputs, 1)
        capsys.readouterr()

        # the default deletes every internal topic of the application, and only those;
        # intermediate topics skip to their end
        assert main([*kafka_flags, "--intermediate-topics", through, "--json"]) == 0
        done = json.loads(capsys.readouterr().out)
        assert {t["topic"] for t in done["internal_topics"] if t["status"] == "deleted"} >= (
            seeded.internal_topics - {only}
        )
        remaining = admin.list_topics()
        assert not seeded.internal_topics & set(remaining)
        assert foreign in remaining
        assert admin.committed_offsets(seeded.id, [*inputs, (through, 0)]) == {
            **dict.fromkeys(inputs, 0),
            (through, 0): 3,
        }
    finally:
        admin.delete_topics([through, foreign])


def test_reset_deletes_the_snapshots_of_the_changelogs_it_deletes(
    seeded: App, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """A snapshot describes a changelog the reset deletes: left behind, a restore of the new
    application would ingest the old state and ``snapshot truncate`` would cut the new log
    below the old snapshot's offset. Another application's snapshots stay."""
    location = tmp_path / "snapshots"
    for key in (f"{seeded.id}/words/0/0007-a/manifest.json", "other-app/words/0/0007-a/manifest.json"):
        (location / key).parent.mkdir(parents=True)
        (location / key).write_text("{}")
    config = seeded.config.model_copy(update={"state_snapshot_location": str(location)})
    dry = reset_application(seeded.topology, config, ResetOptions(dry_run=True))
    assert "words" in dry.snapshot_stores and (location / seeded.id / "words").exists()
    reset_application(seeded.topology, config, ResetOptions())
    assert not (location / seeded.id / "words").exists()
    assert (location / "other-app" / "words").exists()
