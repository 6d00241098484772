#!/usr/bin/env python3
"""Does a consumer group rebalance again after one member crashes (or stops) and comes back?

Plain confluent-kafka, no platform_streams code in the members: each member is its own
process (so SIGKILL is real), subscribes to one topic with the range assignor and the
group timings the tests use (6 s session, 500 ms heartbeat), and prints one line per
rebalance callback. One round, on a fresh topic and group:

1. start members A and B, wait until both hold partitions (the group is stable);
2. ``--mode kill``: SIGKILL B; ``--mode stop``: B closes cleanly (LeaveGroup);
   ``kill-all``/``stop-all``: the same, then A closes cleanly too (the whole application);
3. ``--restart-after`` seconds later start B (and A) again (same group, new member ids);
4. wait ``--wait`` seconds for their first assignment: a round where one never comes is WEDGED.

    python tools/group_rejoin_probe.py --rounds 10 --mode kill      # own embedded Tansu
    python tools/group_rejoin_probe.py --bootstrap HOST:PORT --rounds 10 --mode stop
    python tools/group_rejoin_probe.py --rounds 3 --debug /tmp/cgrp  # librdkafka debug=cgrp logs

Reproduces the broker behaviour "consumer groups that never finish a rebalance"
described in docs/brokers.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

GROUP_TIMING = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "max.poll.interval.ms": 10000}


# ---------------------------------------------------------------------------- member


def member_main(bootstrap: str, topic: str, group: str, name: str, debug_log: str | None) -> None:
    """One group member: poll forever, print every rebalance callback as a JSON line."""
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "allow.auto.create.topics": False,
        "partition.assignment.strategy": "range",
        **GROUP_TIMING,
    }
    if debug_log:
        conf["debug"] = "cgrp"
        conf["log_level"] = 7
    consumer = Consumer(conf)

    def say(event: str, parts: list[Any]) -> None:
        line = {
            "t": round(time.time(), 3),
            "member": name,
            "event": event,
            "parts": [p.partition for p in parts],
        }
        print(json.dumps(line), flush=True)

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    consumer.subscribe(
        [topic],
        on_assign=lambda c, p: say("assign", p),
        on_revoke=lambda c, p: say("revoke", p),
        on_lost=lambda c, p: say("lost", p),
    )
    say("subscribed", [])
    while not stop:
        consumer.poll(0.2)
    consumer.close()  # LeaveGroup
    say("closed", [])


# ---------------------------------------------------------------------------- driver


class Member:
    def __init__(self, args: argparse.Namespace, topic: str, group: str, name: str, out_dir: Path) -> None:
        self.name = name
        self.out = out_dir / f"{name}.jsonl"
        self.err = out_dir / f"{name}.log"
        cmd = [sys.executable, __file__, "--member", args.bootstrap, topic, group, name]
        if args.debug:
            cmd.append("--debug-member")
        with open(self.out, "ab") as out, open(self.err, "ab") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def events(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        return [json.loads(line) for line in self.out.read_text().splitlines() if line.strip()]

    def assigned(self) -> list[int] | None:
        """The partitions of the last assign callback (None: never assigned)."""
        assigns = [e for e in self.events() if e["event"] == "assign"]
        return assigns[-1]["parts"] if assigns else None

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_for(condition: Any, timeout: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():
            return time.monotonic() - started
        time.sleep(0.1)
    return None


def one_round(args: argparse.Namespace, index: int, out_root: Path) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"rejoin-{uuid.uuid4().hex[:8]}", f"rejoin-g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(15)
    out_dir = out_root / f"round{index:02d}"
    out_dir.mkdir(parents=True, exist_ok=True)
    a = Member(args, topic, group, "A", out_dir)
    b = Member(args, topic, group, "B", out_dir)
    members = [a, b]
    result: dict[str, Any] = {"round": index, "group": group}
    try:
        stable = wait_for(lambda: bool(a.assigned()) and bool(b.assigned()), 60)
        result["stable_s"] = stable
        if stable is None:
            result["outcome"] = "NEVER_STABLE"
            return result
        if args.mode.startswith("kill"):
            b.proc.kill()
        else:
            b.proc.send_signal(signal.SIGTERM)
        b.proc.wait(30)
        restarted = []
        if args.mode.endswith("-all"):  # the whole application stops (A cleanly) and restarts
            a.proc.send_signal(signal.SIGTERM)
            a.proc.wait(30)
            time.sleep(args.restart_after)
            restarted.append(Member(args, topic, group, "A2", out_dir))
        else:
            time.sleep(args.restart_after)
        restarted.append(Member(args, topic, group, "B2", out_dir))
        members += restarted
        waited = wait_for(lambda: all(m.assigned() is not None for m in restarted), args.wait)
        result["rejoin_s"] = None if waited is None else round(waited, 1)
        result["outcome"] = "OK" if waited is not None else "WEDGED"
        result["A_events"] = [(e["event"], e["parts"]) for e in a.events()]
        return result
    finally:
        for member in members:
            member.end()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--member":
        member_main(*sys.argv[2:6], debug_log="x" if "--debug-member" in sys.argv else None)
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", help="an existing broker (default: start an embedded Tansu)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--mode",
        choices=["kill", "stop", "kill-all", "stop-all"],
        default="kill",
        help="kill/stop member B and restart it; *-all: then stop A too and restart both",
    )
    parser.add_argument("--restart-after", type=float, default=1.0, metavar="SECONDS")
    parser.add_argument(
        "--wait", type=float, default=60.0, metavar="SECONDS", help="for the restarted member"
    )
    parser.add_argument("--debug", metavar="DIR", help="keep members' output (librdkafka debug=cgrp) here")
    args = parser.parse_args()
    out_root = Path(args.debug or f"/tmp/group-rejoin-{os.getpid()}")
    out_root.mkdir(parents=True, exist_ok=True)
    broker = None
    if not args.bootstrap:
        from platform_streams.dev.brokers import EmbeddedBroker

        broker = EmbeddedBroker(log_path=out_root / "tansu.log")
        broker.start()
        args.bootstrap = broker.bootstrap_servers
    try:
        results = []
        for index in range(args.rounds):
            result = one_round(args, index, out_root)
            results.append(result)
            print(json.dumps({k: v for k, v in result.items() if k != "A_events"}), flush=True)
        wedged = sum(1 for r in results if r["outcome"] != "OK")
        print(
            f"{wedged} of {len(results)} rounds: the restarted member got no assignment in {args.wait:.0f}s"
        )
        print(f"member output: {out_root}")
        return 1 if wedged else 0
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    raise SystemExit(main())
