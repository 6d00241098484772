"""The soak harness's own logic, without a broker: the schedule is a function of the seed,
the history knows which windows must have closed, first writers are remembered per update."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from soak.app import GRACE_MS, WINDOW_MS, amount, group_of, parse
from soak.checker import AppChecker
from soak.output import Writers
from soak.producer import History
from soak.report import summary_line
from soak.schedule import make_schedule


def test_the_same_seed_gives_the_same_schedule_and_scaling_ends_at_two() -> None:
    first, again, other = make_schedule(7, 60), make_schedule(7, 60), make_schedule(8, 60)
    assert first == again and first != other
    assert all(45 < f.at_s <= 60 * 60 - 30 for f in first)
    scaling = [f.kind for f in first if f.kind.startswith("scale")]
    assert scaling == ["scale_up", "scale_down"] * (len(scaling) // 2)
    assert not any(f.kind == "broker_pause" for f in make_schedule(7, 60, broker_faults=False))


def test_closed_windows_are_those_stream_time_passed_by_end_plus_grace() -> None:
    history = History()
    history.partition_of = {"k1": 0, "k2": 1}
    history.windows[("k1", 0)] = [3, 1]
    history.windows[("k1", WINDOW_MS)] = [5, 2]
    history.windows[("k2", 0)] = [1, 1]
    history.stream_time = {0: WINDOW_MS + GRACE_MS + 1000, 1: WINDOW_MS}
    assert history.closed_windows() == {("k1", 0): [3, 1]}


def test_writers_remember_the_first_pid_of_each_update() -> None:
    writers = Writers()
    writers.mark("k1", 1, 100)
    writers.mark("k1", 3, 200)
    assert writers.seen("k1", 1) == 100 and writers.seen("k1", 3) == 200
    assert writers.seen("k1", 2) is None and writers.seen("k9", 1) is None
    assert writers.missing("k1", 3) == 1 and writers.missing("k9", 2) == 2
    # a lost update is named, so that its trace can follow it through the repartition topic
    assert writers.missing_updates("k1", 6, limit=2) == [2, 4]
    assert writers.missing_updates("k9", 2, limit=5) == [1, 2]


def test_the_app_functions_and_the_summary_line() -> None:
    assert amount(6) == 7 and amount(7) == 1
    assert group_of("k17") == "g1"
    with pytest.raises(ValueError, match="poison"):
        parse("poison-3")
    zeros = {"lost": 0, "wrong": 0, "duplicates": 0, "stuck": 0, "broker_leaked": 0}
    assert (
        summary_line(5, 10, 2, zeros)
        == "soak: 5 min, 10 records, 2 faults, lost=0 wrong=0 duplicates=0 stuck=0"
    )
    assert summary_line(5, 10, 2, {**zeros, "broker_leaked": 4}).endswith(" broker_leaked=4")


def test_a_join_repeated_upstream_by_a_killed_process_is_the_brokers() -> None:
    """Finding 7b of the 60-minute run: 36 join results written twice by one healthy process
    (pid 15656). Their repartition records had been written twice: by a worker killed with
    its transaction open (Tansu commits it at the next init_transactions) and by its
    replacement. The repeat is traced through the repartition hop; a repeat whose writers
    were all alive is still a duplicate."""
    app = SimpleNamespace(spec=SimpleNamespace(guarantee="exactly_once_v2"))
    checker = AppChecker(app, History(), 4, leaky={19499: 1.0})  # type: ignore[arg-type]
    writers, upstream = Writers(), Writers()
    g = group_of("k4")
    for value in (f"k4|7|19499|tv-{g}|15656", f"k4|7|30001|tv-{g}|15656"):
        checker.on_joined(writers, upstream, g, value)
    assert (checker.tally.broker_leaked, checker.tally.duplicates) == (1, 0)
    for value in (f"k4|8|30001|tv-{g}|15656", f"k4|8|30001|tv-{g}|15656"):
        checker.on_joined(writers, upstream, g, value)
    assert (checker.tally.broker_leaked, checker.tally.duplicates) == (1, 1)
    assert checker.tally.wrong == 0
    checker.on_joined(writers, upstream, g, "k4|9|30001|tv-g9|15656")
    assert checker.tally.wrong == 1


def test_every_harness_client_gets_the_security_settings_of_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from soak.connection import CLIENT_CONFIG_ENV, client_conf

    monkeypatch.delenv(CLIENT_CONFIG_ENV, raising=False)
    assert client_conf("h:1") == {"bootstrap.servers": "h:1"}
    secured = {"security.protocol": "SASL_SSL", "sasl.password": "s3cret-pw", "bootstrap.servers": "x:2"}
    monkeypatch.setenv(CLIENT_CONFIG_ENV, json.dumps(secured))
    assert client_conf("h:1") == {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL",
                                  "sasl.password": "s3cret-pw"}  # fmt: skip
    monkeypatch.setenv(CLIENT_CONFIG_ENV, '{"sasl.password": "s3cret-pw",')
    with pytest.raises(SystemExit) as refused:
        client_conf("h:1")
    assert CLIENT_CONFIG_ENV in str(refused.value) and "s3cret-pw" not in str(refused.value)
