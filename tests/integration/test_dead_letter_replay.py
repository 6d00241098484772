"""Dead-letter replay on the real broker: poison records dead-lettered by a broken app, the app
fixed, the dead letters replayed into the source topic exactly once -- across a replay killed
with SIGKILL and run again -- and the fixed app's output then complete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsBuilder
from platform_streams.cli import main
from platform_streams.config import StreamsConfig
from platform_streams.dsl import Consumed, Produced
from platform_streams.kafka import KafkaAdmin
from platform_streams.ops.dead_letter_replay import (
    HEADER_REPLAY_SOURCE,
    ReplayFilter,
    ReplayOptions,
    replay_dead_letters,
    replay_group_id,
)
from platform_streams.processor.dead_letters import HEADER_PAYLOAD_TRUNCATED
from platform_streams.processor.exception_handlers import (
    HEADER_EXCEPTION,
    HEADER_OFFSET,
    HEADER_OUTPUT_TOPIC,
    HEADER_PARTITION,
    HEADER_TOPIC,
)
from platform_streams.serde import Json, String
from tests.integration.support_apps import app_config, read_to_end, running_app
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = pytest.mark.broker

S, J = String(), Json()
_REPO = Path(__file__).resolve().parents[2]


def _app(source: str, sink: str, *, fixed: bool) -> StreamsBuilder:
    """The broken app reads ``id`` only (a record with ``legacy_id`` raises KeyError); the
    fixed one also reads ``legacy_id``."""

    def parse(v: dict[str, Any]) -> dict[str, Any]:
        return {"id": v.get("id", v.get("legacy_id")) if fixed else v["id"]}

    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=S, value_serde=J)).map_values(parse).to(
        sink, Produced(key_serde=S, value_serde=J)
    )
    return builder


def _config(
    bootstrap: str, tmp_path: Path, app_id: str, dlq: str, guarantee: str = "exactly_once_v2"
) -> StreamsConfig:
    # exactly-once: the app reads read_committed, so it never sees a killed replay's aborted records
    return app_config(
        bootstrap,
        tmp_path,
        app_id,
        processing_guarantee=guarantee,
        deserialization_exception_handler="log_and_continue",
        processing_exception_handler="log_and_continue",
        errors_dead_letter_queue_topic_name=dlq,
    )


def _replay_child() -> None:
    """Run in a subprocess: replay, and SIGKILL itself at a point given on the command line."""
    args = json.loads(sys.argv[1])
    config = _config(args["bootstrap"], Path(args["state_dir"]), args["app_id"], args["dlq"])

    def on_progress(event: str, count: int) -> None:
        if event == args["kill_on"] and count >= args["kill_at"]:
            time.sleep(1.0)  # the open transaction's records reach the broker first
            os.kill(os.getpid(), signal.SIGKILL)

    options = ReplayOptions(
        filter=ReplayFilter(error_classes=("KeyError",)), transaction_records=3, on_progress=on_progress
    )
    replay_dead_letters(_app(args["source"], args["sink"], fixed=True), config, options)


def _replayed_sources(bootstrap: str, topic: str, expected: int) -> Counter[str]:
    records = consume_all(bootstrap, topic, expected, timeout_s=30, isolation="read_committed")
    return Counter(
        (dict(r.headers).get(HEADER_REPLAY_SOURCE) or b"").decode()
        for r in records
        if HEADER_REPLAY_SOURCE in dict(r.headers)
    )


@pytest.mark.apache_kafka
def test_a_replay_killed_halfway_and_run_again_reinjects_each_dead_letter_once(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink, dlq = (
        new_topic(admin, 2, "rp-in"),
        new_topic(admin, 2, "rp-out"),
        new_topic(admin, 2, "rp-dlq"),
    )
    good = [(f"g{i}", json.dumps({"id": i})) for i in range(30)]
    legacy = [(f"l{i}", json.dumps({"legacy_id": 100 + i})) for i in range(12)]
    bad_json = [(f"b{i}", "{oops") for i in range(3)]
    produce(bootstrap_servers, source, [*good[:10], *legacy[:6], *bad_json, *good[10:], *legacy[6:]])
    total_in = len(good) + len(legacy) + len(bad_json)
    config = _config(bootstrap_servers, tmp_path / "app", f"rp-app-{os.urandom(4).hex()}", dlq)
    with running_app(_app(source, sink, fixed=False), config):
        assert len(consume_all(bootstrap_servers, sink, 30, timeout_s=60, isolation="read_committed")) == 30
        dead = consume_all(bootstrap_servers, dlq, 15, timeout_s=60, isolation="read_committed")
    assert len(dead) == 15
    by_class: dict[str, set[str]] = {}
    for r in dead:
        h = {n: (v or b"").decode() for n, v in r.headers}
        where = f"{h[HEADER_TOPIC]}:{h[HEADER_PARTITION]}:{h[HEADER_OFFSET]}"
        by_class.setdefault(h[HEADER_EXCEPTION], set()).add(where)
    assert {k: len(v) for k, v in by_class.items()} == {"KeyError": 12, "DeserializationError": 3}

    options = ReplayOptions(filter=ReplayFilter(error_classes=("KeyError",)), transaction_records=3)
    group = replay_group_id(config.application_id, dlq, options)
    fixed = _app(source, sink, fixed=True)

    # a dry run reports what would be sent, sends and commits nothing
    dry = replay_dead_letters(fixed, config, ReplayOptions(filter=options.filter, dry_run=True, show=5))
    assert (dry.read, dry.replayed, dry.sent) == (15, 12, {"KeyError": {source: 12}})
    assert dry.skipped == {"filtered": 3} and len(dry.first) == 5
    assert len(read_to_end(bootstrap_servers, source, 2)) == total_in
    assert not any((o or -1) >= 0 for o in admin.committed_offsets(group, [(dlq, 0), (dlq, 1)]).values())

    # killed inside a transaction, with records sent: Apache Kafka aborts them when the next run
    # registers; Tansu commits them (BROKER.md), and the next run finds them in its targets
    aborts = admin.supports("aborts_fenced_transactions")
    child = {
        "bootstrap": bootstrap_servers, "state_dir": str(tmp_path / "child"), "app_id": config.application_id,
        "dlq": dlq, "source": source, "sink": sink, "kill_on": "sent", "kill_at": 5,
    }  # fmt: skip
    code = "from tests.integration.test_dead_letter_replay import _replay_child; _replay_child()"
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(child)],
        cwd=_REPO,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    position = admin.committed_offsets(group, [(dlq, 0), (dlq, 1)])
    done = sum(max(o or 0, 0) for o in position.values())
    assert 0 < done < 15, position  # killed halfway: some committed, some not

    again = replay_dead_letters(fixed, config, options)
    assert 0 < again.replayed < 12
    assert (again.skipped.get("already-replayed", 0) > 0) is not aborts, again.skipped
    replayed = _replayed_sources(bootstrap_servers, source, total_in + 12)
    assert replayed == Counter(dict.fromkeys(by_class["KeyError"], 1))
    # run once more: nothing left to send
    assert replay_dead_letters(fixed, config, options).replayed == 0

    with running_app(fixed, config):
        out = consume_all(bootstrap_servers, sink, 42, timeout_s=60, isolation="read_committed")
    ids = Counter(json.loads(r.value or b"{}")["id"] for r in out)
    assert ids == Counter([*range(30), *range(100, 112)])


def _dead_letter(topic: str | None, partition: int, offset: int, cls: str, **extra: bytes) -> list[Any]:
    return [
        ("own", b"kept"),
        (HEADER_EXCEPTION, cls.encode()),
        (HEADER_TOPIC, None if topic is None else topic.encode()),
        (HEADER_PARTITION, str(partition).encode()),
        (HEADER_OFFSET, str(offset).encode()),
        *extra.items(),
    ]


def _cli_app() -> StreamsBuilder:
    """``MODULE:FACTORY`` for the CLI test: topics from the environment."""
    return _app(os.environ["REPLAY_TEST_SOURCE"], os.environ["REPLAY_TEST_SINK"], fixed=True)


def test_truncated_sourceless_and_foreign_dead_letters_are_reported_not_replayed(
    bootstrap_servers: str,
    admin: KafkaAdmin,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, sink, dlq, other = (new_topic(admin, 1, n) for n in ("rq-in", "rq-out", "rq-dlq", "rq-other"))
    letters = [
        ("ok", _dead_letter(source, 0, 7, "KeyError")),
        ("cut", _dead_letter(source, 0, 8, "KeyError", **{HEADER_PAYLOAD_TRUNCATED: b"value=999000"})),
        ("prod", _dead_letter(source, 0, 9, "KafkaException", **{HEADER_OUTPUT_TOPIC: sink.encode()})),
        ("punct", _dead_letter(None, -1, -1, "ValueError")),
        ("flush", _dead_letter(None, -1, -1, "KafkaException", **{HEADER_OUTPUT_TOPIC: sink.encode()})),
        ("foreign", _dead_letter(other, 0, 3, "KeyError")),
    ]
    for key, headers in letters:
        produce(bootstrap_servers, dlq, [(key, None if key == "cut" else b'{"id": 1}')], headers=headers)
    config = _config(bootstrap_servers, tmp_path, f"rq-app-{os.urandom(4).hex()}", dlq, "at_least_once")
    monkeypatch.setenv("REPLAY_TEST_SOURCE", source)
    monkeypatch.setenv("REPLAY_TEST_SINK", sink)
    settings = {"application.id": config.application_id, "bootstrap.servers": bootstrap_servers,
                "errors.dead.letter.queue.topic.name": dlq, "state.dir": str(tmp_path)}  # fmt: skip
    cli = ["dlq", "replay", "tests.integration.test_dead_letter_replay:_cli_app", "--dry-run", "--json"]
    assert main([*cli, *(a for k, v in settings.items() for a in ("--set", f"{k}={v}"))]) == 0
    dry = json.loads(capsys.readouterr().out)
    sent = {"KeyError": {source: 1}, "KafkaException": {source: 1}}
    assert (dry["dry_run"], dry["replayed"], dry["sent"]) == (True, 2, sent)
    result = replay_dead_letters(_app(source, sink, fixed=True), config, ReplayOptions())
    assert any("read_uncommitted" in w for w in result.warnings)
    # a production error's dead letter with a source holds the input record: replayed
    assert result.replayed == 2 and result.sent == sent
    assert result.skipped == {"truncated": 1, "no-source": 2, "foreign-topic": 1}
    assert {i["reason"] for i in result.not_replayed} == set(result.skipped)
    assert "value=999000" in result.summary()
    replayed = consume_all(bootstrap_servers, source, 2, timeout_s=20, isolation="read_committed")
    assert sorted((r.key, r.value, r.timestamp > 0) for r in replayed) == [
        (b"ok", b'{"id": 1}', True),
        (b"prod", b'{"id": 1}', True),
    ]
    assert dict(replayed[0].headers)["own"] == b"kept"
    assert not any(n.startswith("__streams.errors.") for n, _ in replayed[0].headers)
    assert consume_all(bootstrap_servers, other, 1, timeout_s=2) == []
