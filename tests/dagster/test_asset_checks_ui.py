"""The asset checks in the Dagster UI: the example app's checks (the deploy gate's among them)
and the shadow replay's, as ``dagster-webserver`` shows them in headless Chromium.

The checks run in process against the webserver's instance (as the daemon's runs would
record them): the app asset's checks, then the shadow replay job with a candidate whose
big-order filter has another threshold, so its check fails naming the differing orders. The
screenshots (``checks_app.png``, ``checks_shadow_replay.png`` in the test's tmp dir) are the
README's pictures in docs/.
"""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from dagster_defs.definitions import build_defs
from tests.dagster import test_webserver_ui as ui
from tests.dagster.test_shadow_replay_job import ORDERS
from tests.support.kafka import produce

# kafka_side: Spark is a JVM of its own (run in the Kafka-side process)
pytestmark = [pytest.mark.dagster, pytest.mark.broker, pytest.mark.spark, pytest.mark.kafka_side]

APP = ui.APP
webserver = ui.webserver  # the UI test's fixture: dagster-webserver on the example app's YAML


def _record_checks(tmp_path: Path) -> None:
    """The app asset's checks, then a shadow replay of a changed candidate, into the instance."""
    defs = build_defs(tmp_path / "apps")
    app_checks = dg.define_asset_job("ui_app_checks", selection=dg.AssetSelection.checks_for_assets(APP))
    defs = dg.Definitions.merge(defs, dg.Definitions(jobs=[app_checks]))
    candidate = {"candidate_app_config": {"big_order_amount": 150.0}}
    shadow = {"ops": {f"{APP}_shadow_replay_asset": {"config": candidate}}}
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        checks = defs.resolve_job_def("ui_app_checks")
        checked = checks.execute_in_process(instance=instance, raise_on_error=False)
        names = {e.check_name for e in checked.get_asset_check_evaluations()}
        assert names >= {"deploy_gate", "consumer_lag"}
        replayed = defs.resolve_job_def(f"{APP}_shadow_replay").execute_in_process(
            run_config=shadow, instance=instance
        )
        (evaluation,) = replayed.get_asset_check_evaluations()
        assert not evaluation.passed


@pytest.mark.timeout(900)  # two Spark backfills and a browser on two loaded cores
@pytest.mark.usefixtures("spark_job_session")
def test_asset_checks_pages_show_the_deploy_gate_and_the_shadow_replay(
    webserver: tuple[str, subprocess.Popen[bytes], Path, dict[str, str]],
    tmp_path: Path,
    bootstrap_servers: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base, proc, log, topics = webserver
    for name, value in {
        "PLATFORM_STREAMS_BOOTSTRAP_SERVERS": bootstrap_servers,
        "PLATFORM_STREAMS_DEPLOY_DIR": str(tmp_path / "deploy"),
        "PLATFORM_STREAMS_SPARK_MASTER": "local[1]",
    }.items():  # the code location's resources, as the webserver's environment has them
        monkeypatch.setenv(name, value)
    produce(bootstrap_servers, topics["orders_topic"], ORDERS)  # the shadow replay's last hour
    _record_checks(tmp_path)
    up = lambda: urllib.request.urlopen(f"{base}/server_info", timeout=2).status == 200  # noqa: E731
    ui._wait(up, "webserver", 90, proc, log)

    pages: list[tuple[str, list[str]]] = [
        (f"{APP}?view=checks", ["deploy_gate", "consumer_lag", "workers_running", "internal_topics_valid"]),
        (f"{APP}/shadow_replay?view=checks", ["shadow_replay_matches"]),
    ]
    for page, expected in pages:
        png = tmp_path / f"checks_{page.split('?')[0].replace(f'{APP}/', '').replace(APP, 'app')}.png"
        text, _ = ui._screenshot(f"{base}/assets/{page}", png, expected, tmp_path)
        print(f"asset checks of {page}: {png}")
        for name in expected:
            assert name in text, f"{name} not on {page}; it shows:\n{text[:2000]}"
        assert png.stat().st_size > 10_000
    shadow_text: Any = text
    assert "Failed" in shadow_text or "FAIL" in shadow_text
