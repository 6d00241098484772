"""The deploy gate on a real broker: a running application records what it runs, and
``platform-streams diff --against deployed`` refuses a candidate that orphans its state.

The deployed application (tests/integration/gate_apps.py ``counts``) runs and counts a few
orders, so its generated store's changelog holds state on the broker. The candidates are
judged by the command itself, run as a separate process the way the Helm hook runs it:

* ``counts_filtered`` adds an operator upstream: the generated store (and its changelog and
  repartition topic) is renumbered -- refused (exit 1), naming the deployed store and its
  changelog topic; ``--allow-incompatible`` lets it through;
* ``counts_as_text`` changes only what follows the store: compatible (exit 0).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin
from platform_streams.topology.manifest import TOPOLOGY_KEY
from tests.support.deploy_gate import Deployed, running_counts_app
from tests.support.kafka import produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def deployed(
    admin: KafkaAdmin, bootstrap_servers: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Deployed]:
    with running_counts_app(admin, bootstrap_servers, tmp_path / "state", monkeypatch) as app:
        yield app


def gate(deployed: Deployed, factory: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """``platform-streams diff`` as its own process, as the chart's pre-upgrade hook runs it."""
    settings = [
        f"application.id={deployed.config.application_id}",
        f"bootstrap.servers={deployed.config.bootstrap_servers}",
    ]
    command = [sys.executable, "-m", "platform_streams.cli", "--log-level", "WARNING", "diff"]
    command += [f"tests.integration.gate_apps:{factory}", "--against", "deployed", *extra]
    command += [arg for s in settings for arg in ("--set", s)]
    return subprocess.run(
        command, cwd=REPO, env={**os.environ, **deployed.env}, capture_output=True, text=True, timeout=120
    )


def test_a_renamed_changelog_is_refused_naming_the_store_a_compatible_change_passes(
    deployed: Deployed, admin: KafkaAdmin
) -> None:
    assert deployed.changelog in admin.list_topics()  # the state the deployed app keeps there

    refused = gate(deployed, "counts_filtered")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "REFUSED" in refused.stdout and "incompatible" in refused.stdout
    assert deployed.store in refused.stdout and deployed.changelog in refused.stdout
    assert "Materialized.as_" in refused.stdout and "reset" in refused.stdout
    assert f"{deployed.config.application_id}-control" in refused.stdout  # where "deployed" was read

    allowed = gate(deployed, "counts_filtered", "--allow-incompatible")
    assert allowed.returncode == 0 and "ALLOWED" in allowed.stdout, allowed.stdout + allowed.stderr

    compatible = gate(deployed, "counts_as_text")
    assert compatible.returncode == 0, compatible.stdout + compatible.stderr
    assert "compatible" in compatible.stdout and "REFUSED" not in compatible.stdout


def test_without_a_recorded_topology_the_gate_judges_by_the_changelogs_on_the_broker(
    deployed: Deployed,
) -> None:
    # clients that predate the record: none on the control topic, the state still there
    control = f"{deployed.config.application_id}-control"
    produce(deployed.config.bootstrap_servers, control, [(TOPOLOGY_KEY, None, 0)])
    refused = gate(deployed, "counts_filtered")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "no topology recorded" in refused.stdout and deployed.changelog in refused.stdout
    same = gate(deployed, "counts")
    assert same.returncode == 0 and "REFUSED" not in same.stdout, same.stdout + same.stderr
