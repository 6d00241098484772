"""The application of the scale-out tests, importable by worker processes.

``topology()`` is a ``MODULE:FACTORY`` for ``platform-streams run`` and for
``run_workers``: it counts records per key from ``$SCALE_OUT_INPUT`` to ``$SCALE_OUT_OUTPUT``.
Run as a script it starts ``run_workers(topology, config, N)`` (the Python API).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from platform_streams import StreamsBuilder, StreamsConfig
from platform_streams.dsl import Consumed, Produced
from platform_streams.process_supervisor import run_workers
from platform_streams.serde import Long, String

TIMING = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500, "max_poll_interval_ms": 10000}


def topology() -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream(os.environ["SCALE_OUT_INPUT"], Consumed(key_serde=String(), value_serde=String()))
        .group_by_key()
        .count()
        .to_stream()
        .to(os.environ["SCALE_OUT_OUTPUT"], Produced(key_serde=String(), value_serde=Long()))
    )
    return builder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s [%(process)d] %(name)s %(message)s"
    )
    config = StreamsConfig(
        application_id=args.app_id,
        bootstrap_servers=args.bootstrap,
        state_dir=args.state_dir,
        commit_interval_ms=200,
        **TIMING,
    )
    return run_workers(topology, config, args.workers, close_timeout_s=30)


if __name__ == "__main__":
    sys.exit(main())
