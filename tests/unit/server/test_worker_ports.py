"""``platform-streams run --workers N``: every worker process gets its own HTTP port and address."""

from __future__ import annotations

from platform_streams import StreamsConfig
from platform_streams.cli_run import worker_overrides


def _config(**values: object) -> StreamsConfig:
    return StreamsConfig(application_id="app", bootstrap_servers="k:9092", client_id="c", **values)  # type: ignore[arg-type]


def test_fixed_ports_and_application_servers_are_offset_per_worker() -> None:
    config = _config(http_port=9400, application_server="pod-0.svc:9400")
    assert "http_port=9402" in worker_overrides(config, 2)
    assert "application_server=pod-0.svc:9402" in worker_overrides(config, 2)
    assert "http_port=9400" in worker_overrides(config, 0)
    items = [item.split("=", 1) for item in worker_overrides(config, 1)]
    overridden = config.with_overrides(**{k: v for k, v in items if k in ("http_port", "application_server")})
    assert overridden.http_port == 9401 and overridden.application_server == "pod-0.svc:9401"


def test_ephemeral_or_disabled_endpoints_need_no_offset() -> None:
    assert not any(i.startswith("http_port") for i in worker_overrides(_config(http_port=0), 3))
    assert not any(i.startswith(("http_port", "application_server")) for i in worker_overrides(_config(), 3))
