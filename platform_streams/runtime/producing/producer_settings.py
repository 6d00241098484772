"""Which librdkafka producers a worker runs, and which delivery reports each one sends.

A success report is a Python callback per record (about 1 us with librdkafka's own work);
only two things read them: the changelogs' checkpoint offsets and, at DEBUG recording, the
sink byte counts. So (details in :mod:`platform_streams.runtime.producing.streams_producer`):

* at-least-once without changelogs: one producer reporting failures only;
* at-least-once with changelogs: the sinks' producer reports failures only, the changelogs'
  (a second producer, idempotent) every delivery but those of a cache flush, which report
  their last record only (the collector proves the others written by their offsets);
* exactly-once: one transactional producer; records held for the commit ask for a report on
  the last record of each changelog partition only;
* DEBUG recording: one producer reporting every delivery, as before any of this.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from platform_streams.config import StreamsConfig

__all__ = ["ProducerSettings", "producer_settings"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProducerSettings:
    """The keyword arguments of :class:`StreamsProducer` that say how it reports deliveries."""

    conf: dict[str, Any]
    #: at-least-once with changelogs: the changelog producer's settings (None: one producer)
    changelog_conf: dict[str, Any] | None
    #: exactly-once: reports for changelog records only
    changelog_reports_only: bool
    #: DEBUG recording: the collector counts sink bytes from the reports (all are reported)
    count_bytes: bool
    #: at-least-once with changelogs: cache flushes send changelog records without a report
    #: but the last (the changelog producer is idempotent; the collector checks the count)
    quiet_changelogs: bool = False


def producer_settings(
    config: StreamsConfig,
    worker_index: int,
    transactional_id: str | None,
    changelogs: Collection[str],
    route_statistics: Callable[[dict[str, Any], str], None],
) -> ProducerSettings:
    """The settings of worker ``worker_index``'s producer(s); ``route_statistics(conf, client)``
    adds the statistics callback of one client."""
    conf = config.producer_configs(worker_index, transactional_id)
    count_bytes = config.metrics_recording_level != "INFO"
    if changelogs or count_bytes:
        _report_successes(conf)  # the changelogs' copy below inherits it
    changelog_conf: dict[str, Any] | None = None
    quiet = False
    if transactional_id is not None:
        conf.setdefault("transaction.timeout.ms", 10_000)  # as Kafka Streams under EOS
    elif not count_bytes:
        if changelogs:
            changelog_conf = {**conf, "client.id": f"{conf['client.id']}-changelog"}
            route_statistics(changelog_conf, "changelog-producer")
            quiet = _idempotent(changelog_conf)
        conf["delivery.report.only.error"] = True
    route_statistics(conf, "producer")
    return ProducerSettings(
        conf,
        changelog_conf,
        changelog_reports_only=not count_bytes,
        count_bytes=count_bytes,
        quiet_changelogs=quiet,
    )


def _idempotent(changelog_conf: dict[str, Any]) -> bool:
    """Make the changelog producer idempotent (as Kafka's producers are by default) unless
    ``producer_config`` turned that off; returns whether it is. Why: a cache flush then asks
    for a delivery report on its last changelog record only, and the collector proves the
    others written by counting offsets (``KafkaRecordCollector.quiet_sender``); that needs
    a producer that neither duplicates nor reorders records. Without idempotence every
    changelog record is reported, as before."""
    setting = str(changelog_conf.get("enable.idempotence", True)).lower()
    if setting != "true":
        log.info("enable.idempotence=%s: every changelog record gets a delivery report", setting)
        return False
    # what librdkafka refuses to combine with idempotence: then keep the producer as it was
    conflict = _conflict(changelog_conf, ("acks", "request.required.acks"), lambda v: v not in ("all", "-1"))
    conflict = conflict or _conflict(
        changelog_conf, ("retries", "message.send.max.retries"), lambda v: v == "0"
    )
    conflict = conflict or _conflict(
        changelog_conf,
        ("max.in.flight.requests.per.connection", "max.in.flight"),
        lambda v: not v.isdigit() or int(v) > 5,
    )
    if conflict:
        log.info(
            "%s: the changelog producer is not idempotent, every record gets a delivery report", conflict
        )
        return False
    changelog_conf["enable.idempotence"] = True
    return True


def _conflict(conf: dict[str, Any], names: tuple[str, ...], conflicts: Callable[[str], bool]) -> str | None:
    """``name=value`` of the first of ``names`` set in ``conf`` to a value idempotence refuses."""
    for name in names:
        if name in conf and conflicts(str(conf[name]).strip().lower()):
            return f"{name}={conf[name]}"
    return None


def _report_successes(conf: dict[str, Any]) -> None:
    """A ``delivery.report.only.error`` in ``producer_config`` would silently lose the
    checkpoint offsets (and the DEBUG byte counts): it is overridden, with a warning."""
    if str(conf.get("delivery.report.only.error", False)).lower() == "true":
        log.warning(
            "producer_config delivery.report.only.error=true is ignored: the changelogs' "
            "checkpoint offsets come from delivery reports"
        )
    conf["delivery.report.only.error"] = False
