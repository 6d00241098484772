"""A burst of concurrent requests on the worker HTTP endpoint: latency and listen overflows.

    python bench/http_burst.py                    # 1,000 requests at once on /health/live
    python bench/http_burst.py --requests 2000 --path /metrics

Why: the endpoint is scraped by Prometheus, probed by the kubelet and asked by dashboards
and other instances at the same moments (a rollout, a dashboard refresh). A burst must be
queued by the kernel and served, not dropped: a full listen backlog drops SYNs and the
client retries a second later (the p99 jumps by a second). The endpoint under test is a
real :class:`~platform_streams.server.WorkerHttpServer` for a client that is not started
(``/health/live`` and ``/metrics`` need no broker). ``ListenOverflows`` is the kernel's
count (``/proc/net/netstat``, TcpExt) for the whole network namespace: other processes on
the machine may add to it, so it is reported as a delta and read as an upper bound.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from platform_streams import KafkaStreams, StreamsBuilder, StreamsConfig  # noqa: E402
from platform_streams.server import WorkerHttpServer  # noqa: E402


def listen_overflows() -> int | None:
    """TcpExt ListenOverflows of this network namespace (None where not visible)."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            row = dict(zip(names.split()[1:], values.split()[1:], strict=False))
            return int(row["ListenOverflows"]) if "ListenOverflows" in row else None
    return None


async def _one(host: str, port: int, path: str) -> float | None:
    """Seconds to a 200 answer (connection included); None when refused, reset or not 200."""
    started = time.perf_counter()
    try:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        reply = await reader.read()
        writer.close()
    except OSError:
        return None
    return time.perf_counter() - started if reply.startswith(b"HTTP/1.1 200") else None


async def burst(host: str, port: int, path: str, requests: int) -> list[float | None]:
    return list(await asyncio.gather(*(_one(host, port, path) for _ in range(requests))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--path", default="/health/live")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    builder = StreamsBuilder()
    builder.stream("in").to("out")
    with tempfile.TemporaryDirectory() as state_dir:
        config = StreamsConfig(
            application_id="http-burst", bootstrap_servers="127.0.0.1:9", state_dir=state_dir, http_port=0
        )
        server = WorkerHttpServer(KafkaStreams(builder, config))
        server.start()
        try:
            for repeat in range(args.repeats):
                before = listen_overflows()
                started = time.perf_counter()
                answers = asyncio.run(burst("127.0.0.1", server.address.port, args.path, args.requests))
                latencies = sorted(a for a in answers if a is not None)
                failed = len(answers) - len(latencies)
                wall = time.perf_counter() - started
                after = listen_overflows()
                p50 = statistics.median(latencies)
                p99 = latencies[int(len(latencies) * 0.99) - 1]
                overflows = "n/a" if before is None or after is None else str(after - before)
                print(
                    f"run {repeat + 1}: {args.requests} x GET {args.path}: wall {wall:.2f}s, "
                    f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms, "
                    f"failed {failed}, ListenOverflows +{overflows}"
                )
        finally:
            server.close()


if __name__ == "__main__":
    main()
