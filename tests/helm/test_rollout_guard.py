"""Safe rollouts with plain ``helm upgrade``: a changed topology fingerprint stops every old
pod before the new ones start; an unchanged one rolls pod by pod.

The chart is rendered by the real Helm engine and every object validated against the
Kubernetes schemas; the pre-upgrade hook's own script (taken from the rendered Job) then runs
under ``sh`` against a stand-in ``kubectl`` that answers the running StatefulSet's
fingerprint and records what the hook asked of the cluster.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.helm.chart_support import RELEASE, lint, manifests, one, render, validate
from tests.helm.test_chart_kubernetes import KEDA

pytestmark = pytest.mark.helm

GUARD = f"{RELEASE}-platform-streams-rollout-guard"
FAKE_KUBECTL = """#!/bin/sh
echo "$*" >> "$KUBECTL_LOG"
case "$1 $2" in
  "get statefulset") printf '%s' "$RUNNING_FINGERPRINT" ;;
esac
"""


def _guard(values: dict[str, object], name: str = GUARD) -> dict[str, object]:
    rendered = render(values)
    for doc in manifests(rendered):
        validate(doc)
    return one(rendered, "Job", name)


def _run_hook(job: dict[str, object], running: str, tmp_path: Path) -> tuple[int, str, list[str]]:
    container = job["spec"]["template"]["spec"]["containers"][0]  # type: ignore[index]
    kubectl = tmp_path / "bin" / "kubectl"
    kubectl.parent.mkdir(exist_ok=True)
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / f"kubectl-{running or 'none'}.log"
    env = {e["name"]: e["value"] for e in container["env"]}
    env |= {"PATH": f"{kubectl.parent}{os.pathsep}{os.environ['PATH']}", "KUBECTL_LOG": str(log)}
    env["RUNNING_FINGERPRINT"] = running
    done = subprocess.run(
        [*container["command"], *container["args"]], env=env, capture_output=True, text=True, timeout=60
    )
    calls = log.read_text().splitlines() if log.exists() else []
    return done.returncode, done.stdout + done.stderr, calls


def test_a_changed_fingerprint_stops_all_before_the_upgrade_an_unchanged_one_rolls(tmp_path: Path) -> None:
    values = {"rollout": {"fingerprint": "f00d"}, "replicaCount": 3}
    job = _guard(values)
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-upgrade"  # type: ignore[index]
    report = lint(values)
    assert not report["errors"] and not [m for m in report["messages"] if m["severity"] >= 2], report
    sts = one(render(values), "StatefulSet")
    assert sts["spec"]["template"]["metadata"]["annotations"]["platform-streams.io/fingerprint"] == "f00d"
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate"}

    code, out, calls = _run_hook(job, "f00d", tmp_path)  # same topology: no stop, the rolling update
    assert code == 0 and "unchanged" in out and not any(c.startswith(("scale", "wait")) for c in calls), out

    code, out, calls = _run_hook(job, "beef", tmp_path)  # changed: scale to 0, wait for every pod
    assert code == 0, out
    assert "scale statefulset orders-platform-streams -n streams --replicas=0" in calls
    [wait] = [c for c in calls if c.startswith("wait")]
    assert "--for=delete" in wait and "app.kubernetes.io/instance=orders" in wait
    assert calls.index("scale statefulset orders-platform-streams -n streams --replicas=0") < calls.index(
        wait
    )

    code, out, calls = _run_hook(job, "", tmp_path)  # no fingerprint recorded yet: nothing to stop
    assert code == 0 and not any(c.startswith("scale") for c in calls), out


def test_under_keda_the_hook_pauses_the_scaler_and_dagster_values_are_guarded_too(tmp_path: Path) -> None:
    job = _guard({"rollout": {"fingerprint": "f00d"}, **KEDA})
    code, out, calls = _run_hook(job, "beef", tmp_path)
    assert code == 0, out
    paused = next(i for i, c in enumerate(calls) if c.startswith("annotate scaledobject"))
    assert "autoscaling.keda.sh/paused-replicas=0" in calls[paused]
    assert paused < next(i for i, c in enumerate(calls) if c.startswith("scale"))
    # Helm's three-way merge keeps an annotation kubectl added: a post-upgrade hook removes it.
    resume = _guard({"rollout": {"fingerprint": "f00d"}, **KEDA}, f"{GUARD}-resume")
    assert resume["metadata"]["annotations"]["helm.sh/hook"] == "post-upgrade"  # type: ignore[index]
    code, out, calls = _run_hook(resume, "beef", tmp_path)
    assert code == 0 and calls[-1].endswith("autoscaling.keda.sh/paused-replicas-"), (out, calls)

    # The Dagster Kubernetes launcher sets the fingerprint as a pod annotation: guarded alike.
    dagster = _guard({"podAnnotations": {"platform-streams.io/fingerprint": "f00d"}})
    env = {e["name"]: e["value"] for e in dagster["spec"]["template"]["spec"]["containers"][0]["env"]}  # type: ignore[index]
    assert env["NEW_FINGERPRINT"] == "f00d"


def test_without_a_fingerprint_there_is_no_hook() -> None:
    assert not [d for d in manifests(render({})) if d["metadata"]["name"] == GUARD]
