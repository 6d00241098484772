"""The counting app of ``eos_runner.py`` with an async step: records wait on I/O before they count.

``input -> map_values_async(await sleep(--async-ms)) -> group_by_key().count() -> output``,
with up to ``--max-in-flight`` records in flight per task, in order per key; ``--in-flight-file``
tells how many the process holds. Everything else
(arguments, events printed, guarantees) is ``eos_runner.py``'s; the checks of
``eos_support.py`` apply unchanged: each key's output is its counts ``1..n``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Materialized, Produced
from platform_streams.processor import AsyncOptions
from platform_streams.processor.async_runtime import AsyncRuntime
from platform_streams.serde import String
from tests.integration import eos_runner

S = String()


def build_async(source: str, sink: str, wait_s: float, max_in_flight: int) -> StreamsBuilder:
    async def lookup(value: str) -> str:
        await asyncio.sleep(wait_s)
        return value

    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed(key_serde=S, value_serde=S))
        .map_values_async(lookup, AsyncOptions(max_in_flight=max_in_flight))
        .group_by_key()
        .count(materialized=Materialized.as_("counts").with_caching_disabled())
        .to_stream()
        .map_values(str)
        .to(sink, Produced(key_serde=S, value_serde=S))
    )
    return builder


def main() -> int:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--async-ms", type=float, default=20.0)
    own.add_argument("--max-in-flight", type=int, default=256)
    own.add_argument("--in-flight-file", type=Path, default=None)
    mine, rest = own.parse_known_args()

    def build(args: argparse.Namespace) -> StreamsBuilder:
        return build_async(args.input, args.output, mine.async_ms / 1000, mine.max_in_flight)

    eos_runner.build = build  # the runner's app, with the async step
    if mine.in_flight_file is not None:
        threading.Thread(target=report_in_flight, args=(mine.in_flight_file,), daemon=True).start()
    return eos_runner.main(rest)


def report_in_flight(path: Path) -> None:
    """Every 50 ms, ``<now> <most>`` into ``path``: the records the process's async calls hold,
    now and at most so far (a file, not stdout: the runner's event lines stay whole)."""
    runtime = AsyncRuntime.shared()
    most = 0
    while True:
        time.sleep(0.05)
        now = runtime.in_flight
        most = max(most, now)
        path.write_text(f"{now} {most}\n")


if __name__ == "__main__":
    sys.exit(main())
