"""Reset and topic deletion never touch another application whose id extends ours.

Two applications, ``X`` and ``X-v2``: every internal topic of ``X-v2``
(``X-v2-words-changelog``) is also named like an internal topic of ``X``
(``X`` + ``-v2-words-changelog``). Kafka's reset tool decides by name alone
(tools/src/main/java/org/apache/kafka/tools/StreamsResetter.java, ``isInferredInternalTopic``:
the ``<application.id>-`` prefix and an internal suffix), so resetting ``X`` deletes the
changelogs of ``X-v2``, which then dies. Here a topic is ``X``'s only if no longer
application id on the cluster claims it -- a consumer group ``X-v2`` (live, or only its
committed offsets, as a stopped Kafka Streams application leaves), or the coordination
topics a run of ``X-v2`` creates (``X-v2-control``...): inferred topics of ``X-v2`` are
left alone with a warning naming it, and a request to delete one (``--internal-topics``,
``topics delete --topic``) is refused as a whole, naming it, deleting nothing. ``X``'s own
reset still deletes its own topics.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from platform_streams import KafkaStreams, State
from platform_streams.cli import main
from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaAdmin, TopicSpec
from platform_streams.ops import (
    OperationRefusedError,
    ResetOptions,
    create_internal_topics,
    delete_internal_topics,
    reset_application,
)
from platform_streams.ops.reset import application_without_code
from platform_streams.runtime.membership.control_channel import control_topic_name
from platform_streams.runtime.membership.rebalance_wait import backup_group
from tests.integration.ops_apps import build_topology
from tests.integration.test_ops_reset import App
from tests.support.kafka import GROUP_TIMING, consume_all, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

WORDS = ["a", "bb", "a", "ccc"]


@dataclass
class Pair:
    x: App
    v2: App


def _app(admin: KafkaAdmin, bootstrap: str, app_id: str, state_dir: Path) -> App:
    source, sink = new_topic(admin, 2, "own-in"), new_topic(admin, 2, "own-out")
    config = StreamsConfig(
        application_id=app_id,
        bootstrap_servers=bootstrap,
        state_dir=state_dir,
        commit_interval_ms=100,
        session_timeout_ms=GROUP_TIMING["session.timeout.ms"],
        heartbeat_interval_ms=GROUP_TIMING["heartbeat.interval.ms"],
        max_poll_interval_ms=GROUP_TIMING["max.poll.interval.ms"],
    )
    return App(build_topology(source, sink), config, source, sink)


@pytest.fixture
def pair(admin: KafkaAdmin, bootstrap_servers: str, tmp_path: Path) -> Iterator[Pair]:
    x_id = f"ops-own-{uuid.uuid4().hex[:10]}"
    x = _app(admin, bootstrap_servers, x_id, tmp_path / "x")
    v2 = _app(admin, bootstrap_servers, f"{x_id}-v2", tmp_path / "v2")
    create_internal_topics(x.topology, x.config)
    create_internal_topics(v2.topology, v2.config)
    yield Pair(x, v2)
    admin.delete_topics(
        [t for t in admin.list_topics() if t.startswith(x_id)] + [x.input, x.output, v2.input, v2.output]
    )


def _cli_with_code(pair: Pair, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``MODULE:FACTORY`` and the settings of ``X`` (tests.integration.ops_apps:topology)."""
    monkeypatch.setenv("OPS_TEST_INPUT", pair.x.input)
    monkeypatch.setenv("OPS_TEST_OUTPUT", pair.x.output)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    return [
        "tests.integration.ops_apps:topology",
        "--set",
        f"application.id={pair.x.id}",
        "--set",
        f"bootstrap.servers={pair.x.config.bootstrap_servers}",
        "--set",
        f"state.dir={pair.x.config.state_dir}",
    ]


def _codeless_reset(pair: Pair) -> list[str]:
    """Kafka's StreamsResetter flags for ``X``: no code, so every internal-looking topic is inferred."""
    return [
        "reset",
        "--application-id",
        pair.x.id,
        "--bootstrap-server",
        pair.x.config.bootstrap_servers,
        "--set",
        f"state.dir={pair.x.config.state_dir}",
        "--input-topics",
        pair.x.input,
        "--yes",
    ]


def _topics(admin: KafkaAdmin) -> set[str]:
    return set(admin.list_topics())


def _mine(admin: KafkaAdmin, pair: Pair) -> set[str]:
    """The topics of this test (the broker may be shared with other tests)."""
    own = {pair.x.input, pair.x.output, pair.v2.input, pair.v2.output}
    return {t for t in admin.list_topics() if t.startswith(f"{pair.x.id}-") or t in own}


def _one_line_naming(err: str, other: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and other in lines[0], err


INVOCATIONS = [
    "reset --include-orphans",
    "reset without the code",
    "reset --internal-topics",
    "topics delete --include-orphans",
    "topics delete --topic",
]


@pytest.mark.parametrize("invocation", INVOCATIONS)
def test_x_leaves_a_running_x_v2_alone(
    pair: Pair,
    admin: KafkaAdmin,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    invocation: str,
) -> None:
    x, v2 = pair.x, pair.v2
    bootstrap = v2.config.bootstrap_servers
    produce(bootstrap, v2.input, [(None, w) for w in WORDS])
    with KafkaStreams(v2.topology, v2.config) as streams:
        streams.start()
        assert len(consume_all(bootstrap, v2.output, len(WORDS))) == len(WORDS)
        v2_topics = {t for t in _topics(admin) if t.startswith(f"{v2.id}-")}
        assert v2.internal_topics | {control_topic_name(v2.id)} <= v2_topics
        with_code = _cli_with_code(pair, monkeypatch)
        topics_delete = ["topics", "delete", *with_code[:5], "--yes"]
        before = _mine(admin, pair)
        capsys.readouterr()

        if invocation.endswith(("--internal-topics", "--topic")):
            # naming X-v2's topic is refused as a whole: one line naming X-v2, nothing deleted
            changelog = f"{v2.id}-words-changelog"
            if invocation == "reset --internal-topics":
                chosen = f"{x.id}-words-changelog,{changelog}"
                assert main([*_codeless_reset(pair), "--internal-topics", chosen]) == 1
            else:
                assert main([*topics_delete, "--topic", changelog]) == 1
            _one_line_naming(capsys.readouterr().err, repr(v2.id))
            assert _mine(admin, pair) == before
        else:
            # inferred topics: X's go, X-v2's are X-v2's (not X's orphans) and stay, with a warning
            args = {
                "reset --include-orphans": ["reset", *with_code, "--include-orphans", "--yes"],
                "reset without the code": _codeless_reset(pair),
                "topics delete --include-orphans": [*topics_delete, "--include-orphans"],
            }[invocation]
            assert main(args) == 0
            assert v2_topics <= _topics(admin), f"{invocation} of X deleted X-v2's topics"
            assert not x.internal_topics & _topics(admin)
            assert v2.id in capsys.readouterr().out

        # X-v2 never noticed: it still runs and counts on from its state
        produce(bootstrap, v2.input, [(None, w) for w in WORDS])
        records = consume_all(bootstrap, v2.output, 2 * len(WORDS))
        assert streams.state() is State.RUNNING
        assert len(records) == 2 * len(WORDS) and (b"a", b"4:4") in {(r.key, r.value) for r in records}


@pytest.mark.parametrize("evidence", ["group", "coordination-topic"])
def test_a_stopped_x_v2_is_recognized_by_its_group_or_its_coordination_topic(
    pair: Pair, admin: KafkaAdmin, evidence: str
) -> None:
    """A stopped Kafka Streams application leaves its group's committed offsets and no
    coordination topics; a run of this runtime leaves ``<id>-control`` even when the group's
    offsets have expired. Either says ``X-v2`` exists."""
    x, v2 = pair.x, pair.v2
    if evidence == "group":
        admin.alter_committed_offsets(v2.id, {(v2.input, 0): 0})
    else:
        admin.create_topics([TopicSpec(control_topic_name(v2.id), 1, config={"cleanup.policy": "compact"})])
    v2_topics = {t for t in _topics(admin) if t.startswith(f"{v2.id}-")}
    codeless = ResetOptions(input_topics=[x.input], include_orphans=True)

    result = reset_application(application_without_code(), x.config, codeless)
    assert result.completed and v2_topics <= _topics(admin)
    assert not x.internal_topics & _topics(admin)
    assert any(v2.id in w for w in result.warnings), result.warnings

    create_internal_topics(x.topology, x.config)
    before = _mine(admin, pair)
    chosen = ResetOptions(input_topics=[x.input], internal_topics=[f"{v2.id}-letters-changelog"])
    with pytest.raises(OperationRefusedError, match=f"'{v2.id}'"):
        reset_application(application_without_code(), x.config, chosen)
    with pytest.raises(OperationRefusedError, match=f"'{v2.id}'"):
        delete_internal_topics(x.topology, x.config, topics=[f"{v2.id}-rekey-repartition"])
    assert _mine(admin, pair) == before
    delete_internal_topics(x.topology, x.config, include_orphans=True)
    assert v2_topics <= _topics(admin) and not x.internal_topics & _topics(admin)


def test_internal_topics_must_be_named_like_internal_topics(pair: Pair, admin: KafkaAdmin) -> None:
    """``--internal-topics`` takes only names that parse as ``<application.id>-<internal suffix>``
    (Kafka: a subset of the inferred internal topics), not any topic with the prefix."""
    x = pair.x
    user_topic = f"{x.id}-orders"
    admin.create_topics([TopicSpec(user_topic, 1)])
    before = _mine(admin, pair)
    chosen = ResetOptions(input_topics=[x.input], internal_topics=[user_topic])
    with pytest.raises(OperationRefusedError, match=user_topic):
        reset_application(application_without_code(), x.config, chosen)
    assert _mine(admin, pair) == before


def test_an_input_topic_named_like_an_internal_topic_is_not_deleted(pair: Pair, admin: KafkaAdmin) -> None:
    """Kafka's StreamsResetter.isInferredInternalTopic (KAFKA-7930): the reset's input and
    intermediate topics are never inferred internal topics, whatever their names."""
    x = pair.x
    named_like_internal = f"{x.id}-events-changelog"
    admin.create_topics([TopicSpec(named_like_internal, 1)])
    codeless = ResetOptions(input_topics=[named_like_internal], include_orphans=True)
    result = reset_application(application_without_code(), x.config, codeless)
    assert result.completed and named_like_internal in _topics(admin)
    assert not x.internal_topics & _topics(admin)


def test_reset_keeps_the_group_of_an_application_named_like_its_backup_group(
    pair: Pair, admin: KafkaAdmin
) -> None:
    """The reset deletes ``<id>-offsets-backup``, the group a group repair saved offsets in;
    an application with that id (its coordination topic exists) keeps its group."""
    x = pair.x
    other = backup_group(x.id)
    admin.create_topics([TopicSpec(control_topic_name(other), 1, config={"cleanup.policy": "compact"})])
    admin.alter_committed_offsets(other, {(x.input, 0): 0})

    result = reset_application(x.topology, x.config)

    assert result.completed
    assert admin.committed_offsets(other, [(x.input, 0)]) == {(x.input, 0): 0}
    assert any(repr(other) in w for w in result.warnings), result.warnings
