"""A stateless app in its own process, for the kill -9 / SIGTERM restart tests.

``input -> map_values(tag, optionally slowed down) -> output`` with String serdes and the
test group timings. Prints ``RUNNING`` once its partitions are assigned; SIGTERM closes
the client gracefully (final commit) and the exit code says whether that was clean.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from platform_streams import KafkaStreams, State, StreamsBuilder, StreamsConfig
from platform_streams.dsl import Consumed, Produced
from platform_streams.serde import String

TIMING: dict[str, Any] = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 500,
    "max_poll_interval_ms": 10000,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--commit-interval-ms", type=int, default=200)
    parser.add_argument("--delay-us", type=int, default=0, help="sleep per record, to stretch processing")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")

    delay_s = args.delay_us / 1_000_000

    def tag(value: str) -> str:
        if delay_s:
            time.sleep(delay_s)
        return f"{value}|done"

    builder = StreamsBuilder()
    builder.stream(args.input, Consumed(key_serde=String(), value_serde=String())).map_values(tag).to(
        args.output, Produced(key_serde=String(), value_serde=String())
    )
    config = StreamsConfig(
        application_id=args.app_id,
        bootstrap_servers=args.bootstrap,
        state_dir=args.state_dir,
        commit_interval_ms=args.commit_interval_ms,
        **TIMING,
    )
    streams = KafkaStreams(builder, config)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    streams.start()
    streams.wait_for_state(State.RUNNING, timeout_s=60)
    print("RUNNING", flush=True)
    while not stop.wait(0.05):
        if streams.state() in (State.ERROR, State.NOT_RUNNING):
            print(f"FAILED {streams.state().value}", flush=True)
            return 2
    clean = streams.close(timeout_s=30)
    print("CLOSED" if clean else "CLOSE-TIMEOUT", flush=True)
    return 0 if clean and streams.state() is State.NOT_RUNNING else 1


if __name__ == "__main__":
    sys.exit(main())
