"""A stateless app in its own process, for the kill -9 / SIGTERM restart tests.

``input -> map_values(tag, optionally slowed down) -> output`` with String serdes and the
test group timings. Prints ``RUNNING`` once its partitions are assigned; SIGTERM closes
the client gracefully (final commit) and the exit code says whether that was clean.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from platform_streams import KafkaStreams, State, StreamsBuilder, StreamsConfig
from platform_streams.dsl import Consumed, Produced
from platform_streams.serde import String
from platform_streams.stop_request import StopRequest
from tests.integration.support_apps import APP_TIMING, close_and_report, runner_parser


def main(argv: list[str] | None = None) -> int:
    parser = runner_parser(__doc__)
    parser.add_argument("--commit-interval-ms", type=int, default=200)
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
        **APP_TIMING,
    )
    streams = KafkaStreams(builder, config)
    stop = StopRequest()
    with stop.on_signals():  # the handler takes no lock (platform_streams/stop_request.py)
        streams.start()
        streams.wait_for_state(State.RUNNING, timeout_s=60)
        print("RUNNING", flush=True)
        while not stop.wait(0.05):
            if streams.state() in (State.ERROR, State.NOT_RUNNING):
                print(f"FAILED {streams.state().value}", flush=True)
                return 2
        return close_and_report(streams)


if __name__ == "__main__":
    sys.exit(main())
