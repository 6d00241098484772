"""A counting app in its own process, for the crash, fencing, standby and graceful-failure tests.

``input -> [fail once on a marked value] -> group_by_key().count(cache off) -> output``:
every input record produces one output record, the key's new count (``str``), so a
read_committed consumer of the output can check that each per-key value appears exactly
once. The process prints events on stdout, one per line, for the test to wait on:

* ``RUNNING`` whenever the client (re)enters RUNNING;
* ``RESTORED <json>``: per active task, the changelog records its restore replayed;
* ``ACTIVE <json>``: the active tasks, when they change;
* ``STANDBY <json>``: the standby tasks this client keeps and their changelog positions;
* ``FENCED <n>``: the workers' count of migrations (failed membership check, fenced producer);
* ``CLOSED`` / ``CLOSE-TIMEOUT`` after SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from platform_streams import (
    KafkaStreams,
    State,
    StreamsBuilder,
    StreamsConfig,
    StreamsUncaughtExceptionResponse,
)
from platform_streams.dsl import Consumed, Materialized, Produced
from platform_streams.serde import String
from platform_streams.stop_request import StopRequest
from tests.integration.support_apps import APP_TIMING, close_and_report, runner_parser

S = String()


def build(args: argparse.Namespace) -> StreamsBuilder:
    delay_s = args.delay_us / 1_000_000
    marker = Path(args.fail_marker) if args.fail_marker else None

    def check(key: str, value: str) -> str:
        if delay_s:
            time.sleep(delay_s)
        if marker is not None and value == args.fail_on and not marker.exists():
            marker.write_text("failed once\n")
            raise RuntimeError(f"injected processing failure on {value!r}")
        return value

    builder = StreamsBuilder()
    (
        builder.stream(args.input, Consumed(key_serde=S, value_serde=S))
        .map_values(check)
        .group_by_key()
        .count(materialized=Materialized.as_("counts").with_caching_disabled())
        .to_stream()
        .map_values(str)
        .to(args.output, Produced(key_serde=S, value_serde=S))
    )
    return builder


def main(argv: list[str] | None = None) -> int:
    parser = runner_parser(__doc__)
    parser.add_argument("--guarantee", default="exactly_once_v2")
    parser.add_argument("--instance-id", default=None, help="group_instance_id (static membership)")
    parser.add_argument("--commit-interval-ms", type=int, default=None)
    parser.add_argument("--standbys", type=int, default=0)
    parser.add_argument("--fail-on", default=None, help="input value whose first processing raises")
    parser.add_argument("--fail-marker", default=None, help="file marking that the failure happened")
    parser.add_argument(
        "--task-assignor", default=None, help="'state_aware' or 'range' (the config's default)"
    )
    parser.add_argument(
        "--rebalance-protocol", default=None, help="'eager' or 'cooperative' (the config's default)"
    )
    parser.add_argument("--probing-ms", type=int, default=None, help="probing_rebalance_interval_ms")
    parser.add_argument("--rack", default=None, help="client.rack of this instance")
    parser.add_argument("--acceptable-lag", type=int, default=None, help="acceptable_recovery_lag")
    parser.add_argument("--group-protocol", default="classic", help="'classic' or 'streams' (KIP-1071)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s [%(process)d] %(name)s %(message)s"
    )
    settings: dict[str, object] = {
        "application_id": args.app_id,
        "bootstrap_servers": args.bootstrap,
        "state_dir": args.state_dir,
        "processing_guarantee": args.guarantee,
        "num_standby_replicas": args.standbys,
        "group_protocol": args.group_protocol,
        **APP_TIMING,
    }
    if args.commit_interval_ms is not None:
        settings["commit_interval_ms"] = args.commit_interval_ms
    if args.instance_id:
        settings["group_instance_id"] = args.instance_id
    if args.task_assignor:
        settings["task_assignor"] = args.task_assignor
    if args.rebalance_protocol:
        settings["rebalance_protocol"] = args.rebalance_protocol
    if args.probing_ms is not None:
        settings["probing_rebalance_interval_ms"] = args.probing_ms
    if args.acceptable_lag is not None:
        settings["acceptable_recovery_lag"] = args.acceptable_lag
    if args.rack:
        settings["client_config"] = {"client.rack": args.rack}
    streams = KafkaStreams(build(args), StreamsConfig(**settings))  # type: ignore[arg-type]
    streams.set_uncaught_exception_handler(lambda exc: StreamsUncaughtExceptionResponse.REPLACE_WORKER)
    running = threading.Event()
    streams.set_state_listener(lambda new, old: running.set() if new is State.RUNNING else None)
    stop = StopRequest()
    with stop.on_signals():  # the handler takes no lock (platform_streams/stop_request.py)
        streams.start()
        reported: dict[str, object] = {}

        def report(kind: str, value: object) -> None:
            if reported.get(kind) != value:
                reported[kind] = value
                print(f"{kind} {json.dumps(value)}", flush=True)

        while not stop.wait(0.05):
            state = streams.state()
            if state in (State.ERROR, State.NOT_RUNNING):
                print(f"FAILED {state.value}", flush=True)
                return 2
            if running.is_set() and state is State.RUNNING:
                running.clear()
                restored = {
                    str(task): sum(counts.values())
                    for worker in streams.workers
                    for task, counts in worker.state_lifecycle.last_restore.items()
                    if task in worker.tasks
                }
                reported.pop("RESTORED", None)
                report("RESTORED", restored)
                print("RUNNING", flush=True)
            report("ACTIVE", sorted(str(t) for w in streams.workers for t in list(w.tasks)))
            standbys = streams.membership.standbys
            positions = standbys.positions() if standbys is not None else {}
            standby = {str(t): {f"{tp[0]}:{tp[1]}": o for tp, o in p.items()} for t, p in positions.items()}
            report("STANDBY", standby)
            report("FENCED", sum(w.migrations for w in streams.workers))
            coordinator = streams.membership.coordinator
            if coordinator is not None:
                roles = coordinator.roles().items()
                report("ROLES", {role: sorted(str(t) for t in ts) for role, ts in roles})
        return close_and_report(streams)


if __name__ == "__main__":
    sys.exit(main())
