"""End to end, as a person uses it: ``dagster-webserver`` on the code location, a
materialization launched through its GraphQL API, and the asset graph in headless Chromium.

The code location is the real ``dagster_defs`` module; ``PLATFORM_STREAMS_DAGSTER_APPS``
points it at one app YAML with fresh topics and application id. The run executes in its
own process (Dagster's default run launcher), which starts the workers; the test stops
them. The screenshot is saved under the test's tmp dir (``asset_graph.png``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from dagster_defs.deploy.local import LocalProcessLauncher
from platform_streams.dev.brokers import find_free_port
from platform_streams.dev.servers.processes import kill_marked, marked_env, new_mark
from platform_streams.kafka import KafkaAdmin
from tests.dagster.support import orders_spec
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.dagster, pytest.mark.broker]

REPO = Path(__file__).resolve().parents[2]
APP = "orders_e2e"
LOCATION = "dagster_defs"

LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchPipelineExecution(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on PipelineNotFoundError { message }
    ... on InvalidSubsetError { message }
  }
}
"""
RUN_STATUS = "query Run($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status } } }"
ASSET_KEYS = "{ assetNodes { assetKey { path } groupName } }"


def _graphql(base: str, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(f"{base}/graphql", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        document = json.loads(answer.read())
    assert "errors" not in document, document
    return document["data"]


def _wait(condition: Any, what: str, timeout_s: float, proc: subprocess.Popen[bytes], log: Path) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = condition()
        except OSError:
            value = None
        if value:
            return value
        assert proc.poll() is None, f"dagster-webserver exited before {what}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {what} after {timeout_s}s:\n{log.read_text()[-3000:]}"
        time.sleep(0.25)


@pytest.fixture
def webserver(
    tmp_path: Path, bootstrap_servers: str, admin: KafkaAdmin, app_id: str
) -> Iterator[tuple[str, subprocess.Popen[bytes], Path, dict[str, str]]]:
    binary = Path(sys.executable).with_name("dagster-webserver")
    if not binary.exists():
        pytest.skip("dagster-webserver is not installed (pip install -e '.[dagster]')")
    topics = {
        "orders_topic": new_topic(admin, 2, "orders"),
        "big_orders_topic": new_topic(admin, 2, "big"),
        "by_customer_topic": new_topic(admin, 2, "bycust"),
        "counts_topic": new_topic(admin, 2, "counts"),
    }
    apps = tmp_path / "apps"
    apps.mkdir()
    spec = {**orders_spec(topics, app_id), "name": APP}
    document = {"type": "dagster_defs.component.StreamAppComponent", "attributes": spec}
    (apps / f"{APP}.yaml").write_text(yaml.safe_dump(document))
    home = tmp_path / "dagster_home"
    home.mkdir()
    # Runs launch at once (no daemon needed to dequeue them); no telemetry on a closed network.
    (home / "dagster.yaml").write_text(
        "run_coordinator:\n  module: dagster._core.run_coordinator\n  class: DefaultRunCoordinator\n"
        "telemetry:\n  enabled: false\n"
    )
    deploy = tmp_path / "deploy"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "PLATFORM_STREAMS_DAGSTER_APPS": str(apps),
        "PLATFORM_STREAMS_BOOTSTRAP_SERVERS": bootstrap_servers,
        "PLATFORM_STREAMS_DEPLOY_DIR": str(deploy),
        "PYTHONPATH": str(REPO),
    }
    port = find_free_port()
    log = tmp_path / "webserver.log"
    mark = new_mark()  # the webserver, its code server, the run and the workers all carry it
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(binary), "-m", LOCATION, "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO,
            env=marked_env(env, mark),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        yield f"http://127.0.0.1:{port}", proc, log, topics
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if deploy.exists():
            LocalProcessLauncher(deploy).stop(APP)
        kill_marked(mark)  # whatever is left: the code server, a run still going


def _screenshot(
    url: str, png: Path, expected: list[str], tmp_path: Path, css: str = "", click: str = ""
) -> tuple[str, int]:
    """Open ``url`` in headless Chromium (pressing the button labelled ``click`` once it shows),
    wait for ``expected`` texts and an element matching ``css``, save a PNG; returns the page
    text and how many elements match ``css``."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.skip(
            "Debian chromium and chromium-driver are needed (apt-get install chromium chromium-driver)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--window-size=1700,1250",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.set_page_load_timeout(60)
        driver.get(url)
        deadline = time.monotonic() + 60
        text = ""
        while time.monotonic() < deadline:
            if click:
                pressed = driver.find_elements(By.XPATH, f"//button[normalize-space(.)='{click}']")
                if pressed:
                    driver.execute_script("arguments[0].click()", pressed[0])
                    click = ""
            text = driver.execute_script("return document.body ? document.body.innerText : ''") or ""
            found = not css or driver.find_elements(By.CSS_SELECTOR, css)
            if not click and all(e in text for e in expected) and found:
                break
            time.sleep(0.5)
        # First visit: a newsletter dialog covers the graph; dismiss it like a person would.
        dialog_deadline = time.monotonic() + 8
        while time.monotonic() < dialog_deadline:
            buttons = driver.find_elements(By.XPATH, "//button[contains(normalize-space(.), 'Skip')]")
            if buttons:
                buttons[0].click()
                break
            time.sleep(0.25)
        matches = driver.find_elements(By.CSS_SELECTOR, css) if css else []
        if matches:  # bring the first match (e.g. the first chart) into the picture
            driver.execute_script("arguments[0].scrollIntoView()", matches[0])
        time.sleep(1.5)  # let the graph finish its layout animation before the picture
        driver.save_screenshot(str(png))
        found = len(driver.find_elements(By.CSS_SELECTOR, css)) if css else 0
        return str(driver.execute_script("return document.body.innerText")), found
    finally:
        driver.quit()


@pytest.mark.timeout(900)  # a run in its own processes, then three sensor ticks: slow on 2 loaded cores
def test_webserver_materializes_and_shows_the_asset_graph(
    webserver: tuple[str, subprocess.Popen[bytes], Path, dict[str, str]],
    tmp_path: Path,
    bootstrap_servers: str,
) -> None:
    base, proc, log, topics = webserver
    _wait(
        lambda: urllib.request.urlopen(f"{base}/server_info", timeout=2).status == 200,
        "webserver",
        90,
        proc,
        log,
    )

    keys = {tuple(n["assetKey"]["path"]) for n in _graphql(base, ASSET_KEYS)["assetNodes"]}
    store_key = (APP, "stores", "orders_per_customer")
    topic_keys = {("kafka", t.replace("-", "_")) for t in topics.values()}
    assert {(APP,), store_key} | topic_keys <= keys

    launched = _graphql(
        base,
        LAUNCH,
        {
            "params": {
                "selector": {
                    "repositoryLocationName": LOCATION,
                    "repositoryName": "__repository__",
                    "pipelineName": "__ASSET_JOB",
                    "assetSelection": [{"path": [APP]}],
                },
                "runConfigData": {},
            }
        },
    )["launchPipelineExecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]

    def finished() -> str | None:
        status = _graphql(base, RUN_STATUS, {"id": run_id})["runOrError"]["status"]
        return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None

    assert _wait(finished, "finished run", 300, proc, log) == "SUCCESS", log.read_text()[-3000:]
    launcher = LocalProcessLauncher(tmp_path / "deploy")
    assert launcher.status(APP).healthy  # the run's process is gone, its workers run on

    png = tmp_path / "asset_graph.png"
    group = f"{base}/locations/{LOCATION}/asset-groups/{APP}"
    expected = [APP, "orders_per_customer", topics["orders_topic"].replace("-", "_")]
    text, _ = _screenshot(group, png, expected, tmp_path)
    for name in expected + [t.replace("-", "_") for t in topics.values()]:
        assert name in text, f"{name} not on the asset graph page; it shows:\n{text[:2000]}"
    assert png.stat().st_size > 10_000

    # The health sensor's numbers on the app asset's Events page: three ticks recorded into the
    # webserver's instance (what the daemon does every 30 s), records flowing between; the
    # latest observation shows them, with the worker's endpoint as a link.
    _record_sensor_ticks(bootstrap_servers, tmp_path, topics)
    plots = tmp_path / "asset_plots.png"
    numbers = [
        "records_in_per_s",
        "records_out_per_s",
        "consumer_lag",
        "e2e_latency_p99_ms",
        "restored_records",
    ]
    page = f"{base}/assets/{APP}?view=events"
    link = "a[href^='http://127.0.0.1']"
    text, links = _screenshot(page, plots, numbers, tmp_path, css=link)
    for name in numbers:
        assert name in text, f"{name} not on the asset's events page; it shows:\n{text[:2000]}"
    assert links >= 1, "no link to the worker's endpoint"
    assert plots.stat().st_size > 10_000

    # The same numbers charted over time: the Overview page's Metadata section has a "Plots"
    # button (beside "Table") that draws one chart per numeric metadata key over the observations.
    for key, charted in ((APP, numbers), (f"{APP}/stores/orders_per_customer", ["entries"])):
        chart_png = tmp_path / f"plots_{key.replace('/', '_')}.png"
        page = f"{base}/assets/{key}"
        text, charts = _screenshot(page, chart_png, charted, tmp_path, css="canvas", click="Plots")
        print(f"plots of {key}: {chart_png}")
        for name in charted:
            assert name in text, f"{name} not charted on {key}'s plots; it shows:\n{text[:2000]}"
        assert charts >= len(charted), f"{charts} charts drawn on {key}'s plots, want {len(charted)}"
        assert chart_png.stat().st_size > 10_000


def _record_sensor_ticks(bootstrap: str, tmp_path: Path, topics: dict[str, str]) -> None:
    import dagster as dg

    from dagster_defs.definitions import build_defs
    from dagster_defs.resources import KafkaResource, StreamsDeploymentResource

    sensor = build_defs(tmp_path / "apps").resolve_sensor_def(f"{APP}_health")
    resources = {
        "kafka": KafkaResource(bootstrap_servers=bootstrap),
        "streams_deployment": StreamsDeploymentResource(root_dir=str(tmp_path / "deploy")),
    }
    cursor = None
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        for tick in range(3):
            orders = [
                (f"o-{tick}-{i}", orjson.dumps({"order_id": f"{tick}-{i}", "customer": "c", "amount": 150.0}))
                for i in range(10)
            ]
            produce(bootstrap, topics["orders_topic"], orders)
            consume_all(bootstrap, topics["big_orders_topic"], 10 * (tick + 1), timeout_s=60)
            result = sensor(dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor))
            assert isinstance(result, dg.SensorResult), result
            cursor = result.cursor
            for event in result.asset_events or []:
                if isinstance(event, dg.AssetObservation):
                    instance.report_runless_asset_event(event)
