"""The workers job on real worker processes: the app asset deploys the example app with the
local launcher, then each action of ``<app>_workers`` runs in process and the test checks
what it did to the processes and to the records they process, not only the run's success."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import dagster as dg
import orjson
import pytest

from dagster_defs import build_stream_app_defs
from dagster_defs.deploy.worker_client import WorkerClient, WorkerUnreachableError
from tests.dagster.support import orders_spec
from tests.integration.support_apps import wait_until
from tests.support.kafka import consume_all, produce

pytestmark = [pytest.mark.dagster, pytest.mark.broker]

APP = "orders_test"
#: how long records produced to a paused worker are given to (wrongly) come out
PAUSED_WINDOW_S = 3.0


def _orders(start: int, count: int) -> list[tuple[str, bytes]]:
    return [
        (f"o-{i}", orjson.dumps({"order_id": f"o-{i}", "customer": f"c-{i % 5}", "amount": 10.0}))
        for i in range(start, start + count)
    ]


class Workers:
    """The app's deployment, its workers job and the records its workers process."""

    def __init__(self, topics: dict[str, str], app_id: str, resources: dict[str, Any], bootstrap: str):
        self.defs = dg.Definitions.merge(
            build_stream_app_defs(orders_spec(topics, app_id)), dg.Definitions(resources=resources)
        )
        self.resources = resources
        self.launcher = resources["streams_deployment"].launcher()
        self.bootstrap = bootstrap
        self.topics = topics
        self.produced = 0

    def deploy(self) -> None:
        """Materialize the app asset: real worker processes, ready when this returns."""
        assets = [a for a in self.defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
        result = dg.materialize(assets, resources=self.resources, selection=[dg.AssetKey([APP])])
        assert result.success

    def run(self, action: str, **config: Any) -> dict[str, Any]:
        """Execute the workers job; returns the op's output (alive/dead client ids, answers)."""
        op = f"{APP}_workers_op"
        result = self.defs.resolve_job_def(f"{APP}_workers").execute_in_process(
            run_config={"ops": {op: {"config": {"action": action, **config}}}}
        )
        assert result.success
        data: dict[str, Any] = result.output_for_node(op)
        assert data["action"] == action
        return data

    def clients(self) -> list[WorkerClient]:
        return [WorkerClient(endpoint) for endpoint in self.launcher.status(APP).endpoints]

    def produce(self, count: int) -> None:
        produce(self.bootstrap, self.topics["orders_topic"], _orders(self.produced, count))
        self.produced += count

    def processed(self, expected: int, timeout_s: float) -> int:
        """Orders that came out re-keyed by customer (every order does, once processed)."""
        return len(consume_all(self.bootstrap, self.topics["by_customer_topic"], expected, timeout_s))

    def wait_all_processed(self) -> None:
        assert self.processed(self.produced, 60) == self.produced


def _running(client: WorkerClient) -> dict[str, Any] | None:
    """``/control/status`` once the client and every stream worker of it run, else None."""
    status = client.control("status")[1]
    states = {w["state"] for w in status["workers"]}
    return status if status["state"] == "RUNNING" and states == {"RUNNING"} else None


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def test_workers_job_pauses_resumes_restarts_scales_and_stops(
    orders_topics: dict[str, str], app_id: str, resources: dict[str, Any], bootstrap_servers: str
) -> None:
    workers = Workers(orders_topics, app_id, resources, bootstrap_servers)
    workers.deploy()
    [client] = workers.clients()
    workers.produce(10)
    workers.wait_all_processed()

    status = workers.run("status")
    [client_id] = status["alive"]
    assert status["workers"][client_id]["state"] == "RUNNING"
    assert status["workers"][client_id]["paused"] is False

    # pause: the worker says so, and what is produced meanwhile stays unprocessed
    paused = workers.run("pause")
    assert paused["workers"][client_id]["paused"] is True
    assert client.control("status")[1]["paused"] is True
    time.sleep(0.5)  # a loop iteration that began before the pause may still finish
    workers.produce(10)
    assert workers.processed(20, timeout_s=PAUSED_WINDOW_S) == 10
    assert client.control("status")[1]["paused"] is True

    # resume: the records produced during the pause are processed
    resumed = workers.run("resume")
    assert resumed["workers"][client_id]["paused"] is False
    workers.wait_all_processed()

    # restart: new stream workers (thread ids) come back RUNNING in the same process, and process
    before = {w["thread_id"] for w in client.control("status")[1]["workers"]}
    restarted = workers.run("restart")
    assert restarted["workers"][client_id]["restarting"] is True

    def replaced() -> bool:
        status = _running(client)
        return status is not None and {w["thread_id"] for w in status["workers"]}.isdisjoint(before)

    wait_until(replaced, 30, "new stream workers of the restarted client are RUNNING")
    assert workers.run("status")["alive"] == [client_id]
    workers.produce(10)
    workers.wait_all_processed()

    # scale to 2: the deployment records two workers, both processes run and share the tasks
    first_pid = workers.launcher.status(APP).alive[0].pid
    scaled = workers.run("scale", workers=2)
    assert len(scaled["alive"]) == 2 and client_id in scaled["alive"] and not scaled["dead"]
    record = workers.launcher.read_record(APP)
    assert record is not None and record.desired_workers == 2 and record.scaled_by_operator
    clients = workers.clients()
    assert len(clients) == 2
    [added_pid] = [w.pid for w in workers.launcher.status(APP).alive if w.pid != first_pid]

    def balanced() -> bool:
        statuses = [_running(c) for c in clients]
        tasks = [[t for w in s["workers"] for t in w["active_tasks"]] if s else [] for s in statuses]
        return all(tasks) and len({t for ts in tasks for t in ts}) == sum(len(ts) for ts in tasks)

    wait_until(balanced, 45, "both workers RUNNING with tasks of their own")
    workers.produce(20)
    workers.wait_all_processed()

    # and back to 1: the added process is stopped, the first one goes on
    one = workers.run("scale", workers=1)
    assert one["alive"] == [client_id] and not one["dead"]
    record = workers.launcher.read_record(APP)
    assert record is not None and record.desired_workers == 1
    assert added_pid is not None and _gone(added_pid)
    wait_until(lambda: _running(client), 45, "the remaining worker is RUNNING")
    workers.produce(10)
    workers.wait_all_processed()

    # stop: the processes are gone and the deployment is marked stopped
    stopped = workers.run("stop")
    assert stopped["alive"] == [] and stopped["dead"] == [client_id]
    assert first_pid is not None and _gone(first_pid)
    record = workers.launcher.read_record(APP)
    assert record is not None and record.status == "stopped"
    with pytest.raises(WorkerUnreachableError):
        client.control("status")
