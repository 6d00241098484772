"""The count app of ``iq_apps.py`` in its own process, with its HTTP endpoint on a free port.

Prints ``HTTP <host:port>`` once the endpoint listens and ``RUNNING`` once partitions are
assigned; SIGTERM closes the client (final commit, tombstone in the metadata topic).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from platform_streams import KafkaStreams, State, StreamsConfig
from platform_streams.stop_request import StopRequest
from tests.integration.iq_apps import count_app
from tests.integration.support_apps import APP_TIMING


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--token", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    config = StreamsConfig(
        application_id=args.app_id,
        bootstrap_servers=args.bootstrap,
        state_dir=args.state_dir,
        commit_interval_ms=200,
        http_port=0,
        http_auth_token=args.token,
        **APP_TIMING,
    )
    streams = KafkaStreams(count_app(args.input), config)
    stop = StopRequest()
    with stop.on_signals():  # the handler takes no lock (platform_streams/stop_request.py)
        streams.start()
        assert streams.http_server is not None
        print(f"HTTP {streams.http_server.address}", flush=True)
        streams.wait_for_state(State.RUNNING, timeout_s=60)
        print("RUNNING", flush=True)
        stop.wait()
        return 0 if streams.close(timeout_s=30) else 1


if __name__ == "__main__":
    sys.exit(main())
