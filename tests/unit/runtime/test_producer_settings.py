"""Which producers a worker runs and which delivery reports they send
(runtime/producing/producer_settings.py).

Pure logic over ``StreamsConfig``: the broker side of each case is in
tests/integration/test_split_producers.py. Kafka Streams runs one producer per stream thread
(streams/src/main/java/org/apache/kafka/streams/processor/internals/StreamsProducer.java)
and reads every acknowledgement in ``RecordCollectorImpl``; the split and the sparse reports
are ours, so these pin when each applies.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsConfig
from platform_streams.runtime.producing.producer_settings import producer_settings


def _settings(tmp_path: Path, changelogs: set[str], txn: str | None = None, **overrides: Any) -> Any:
    config = StreamsConfig(
        application_id="app",
        bootstrap_servers="localhost:9092",
        state_dir=tmp_path,
        processing_guarantee="exactly_once_v2" if txn else "at_least_once",
        **overrides,
    )
    routed: list[str] = []
    settings = producer_settings(config, 0, txn, changelogs, lambda conf, client: routed.append(client))
    return settings, routed


def test_without_changelogs_one_producer_reports_failures_only(tmp_path: Path) -> None:
    settings, routed = _settings(tmp_path, set())
    assert settings.conf["delivery.report.only.error"] is True and settings.changelog_conf is None
    assert routed == ["producer"]


def test_changelogs_get_a_producer_of_their_own_that_reports_every_delivery(tmp_path: Path) -> None:
    settings, routed = _settings(tmp_path, {"app-counts-changelog"})
    assert settings.conf["delivery.report.only.error"] is True
    assert settings.changelog_conf["delivery.report.only.error"] is False
    assert settings.changelog_conf["client.id"] == settings.conf["client.id"] + "-changelog"
    assert routed == ["changelog-producer", "producer"]


def test_exactly_once_keeps_one_producer_reporting_changelog_records_only(tmp_path: Path) -> None:
    settings, _ = _settings(tmp_path, {"app-counts-changelog"}, txn="app-0_0")
    assert settings.changelog_conf is None and settings.changelog_reports_only
    assert settings.conf["delivery.report.only.error"] is False
    assert settings.conf["transaction.timeout.ms"] == 10_000


def test_debug_recording_keeps_one_producer_reporting_everything(tmp_path: Path) -> None:
    settings, _ = _settings(tmp_path, {"app-counts-changelog"}, metrics_recording_level="DEBUG")
    assert settings.changelog_conf is None and not settings.changelog_reports_only
    assert settings.conf["delivery.report.only.error"] is False and settings.count_bytes


def test_a_user_setting_that_would_lose_checkpoint_offsets_is_overridden_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        settings, _ = _settings(
            tmp_path, {"app-counts-changelog"}, producer_config={"delivery.report.only.error": True}
        )
    assert settings.changelog_conf["delivery.report.only.error"] is False
    assert "delivery.report.only.error=true is ignored" in caplog.text


def test_cache_flushes_send_changelog_records_quietly_only_from_an_idempotent_producer(
    tmp_path: Path,
) -> None:
    """runtime/producing/quiet_changelogs.py needs a producer that neither duplicates nor reorders:
    the changelog producer is made idempotent unless ``producer_config`` rules it out --
    turned off, or a setting librdkafka refuses to combine with it (then nothing changes
    and every changelog record is reported, as before)."""
    settings, _ = _settings(tmp_path, {"app-counts-changelog"})
    assert settings.quiet_changelogs and settings.changelog_conf["enable.idempotence"] is True
    assert "enable.idempotence" not in settings.conf, "the sinks' producer is left as it was"
    for overrides in (
        {"enable.idempotence": "false"},
        {"acks": 1},
        {"request.required.acks": "1"},
        {"retries": 0},
        {"max.in.flight.requests.per.connection": 10},
    ):
        settings, _ = _settings(tmp_path, {"app-counts-changelog"}, producer_config=overrides)
        assert not settings.quiet_changelogs, overrides
        assert str(settings.changelog_conf.get("enable.idempotence", "false")).lower() == "false", overrides
    settings, _ = _settings(tmp_path, {"app-counts-changelog"}, producer_config={"acks": "all", "retries": 5})
    assert settings.quiet_changelogs
    for other in (
        _settings(tmp_path, {"app-counts-changelog"}, txn="app-0_0")[0],
        _settings(tmp_path, {"app-counts-changelog"}, metrics_recording_level="DEBUG")[0],
        _settings(tmp_path, set())[0],
    ):
        assert not other.quiet_changelogs
