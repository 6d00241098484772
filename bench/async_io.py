"""Async processors against a 20 ms HTTP service: throughput vs the synchronous processor.

    PLATFORM_STREAMS_BOOTSTRAP=host:9092 python bench/async_io.py                  # 100,000 records
    python bench/async_io.py --bootstrap host:9092 --records 20000 --max-in-flight 200

The bench starts an HTTP/1.1 server on 127.0.0.1 (its own process) that answers every
request after 20 ms, with the request's value. One application process (one stream thread,
4 input partitions) runs ``map_values(call)`` through it:

* ``sync``: a blocking ``http.client`` call on the stream thread, one record at a time, over
  ``--sync-records`` records (at ~50 records/s the full input would take half an hour);
* ``async``: ``map_values_async`` with an ``async def`` on the process's event loop over
  keep-alive connections, ``--max-in-flight`` records in flight in the process (split evenly
  over the 4 tasks), over ``--records`` records of ``--keys`` keys.

Throughput runs from the first output record to the last (the group join is left out); CPU
is the application process's (the service is another process) over the same window. The
ideal is ``max_in_flight / 20 ms``. Every key's output is read back and must be its inputs'
values in input order (per-key order).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from platform_streams import KafkaStreams, StreamsBuilder, StreamsConfig  # noqa: E402
from platform_streams.dsl import Consumed, Produced  # noqa: E402
from platform_streams.kafka import KafkaAdmin  # noqa: E402
from platform_streams.processor import AsyncOptions  # noqa: E402
from platform_streams.serde import String  # noqa: E402
from tests.integration.eos_support import read_output  # noqa: E402
from tests.support.kafka import new_topic, produce  # noqa: E402

S = String()
PARTITIONS = 4
DELAY_S = 0.020

# -- the service ----------------------------------------------------------------------------


async def _serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1]
            await asyncio.sleep(DELAY_S)
            body = path.rsplit(b"/", 1)[-1]
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


def serve(port_file: Path) -> None:
    """The 20 ms service (``--serve``): writes its port to ``port_file`` and serves forever."""

    async def main() -> None:
        server = await asyncio.start_server(_serve_connection, "127.0.0.1", 0, backlog=4096)
        port_file.write_text(str(server.sockets[0].getsockname()[1]))
        await server.serve_forever()

    asyncio.run(main())


def start_service(tmp: Path) -> tuple[subprocess.Popen[bytes], int]:
    port_file = tmp / "port"
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port_file)])
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text():
        if time.monotonic() > deadline:
            raise RuntimeError("the HTTP service did not start")
        time.sleep(0.05)
    return proc, int(port_file.read_text())


# -- the clients ------------------------------------------------------------------------------


class AsyncHttp:
    """A keep-alive connection pool on the event loop: one request per connection at a time."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def get(self, path: str) -> bytes:
        conn = self._idle.pop() if self._idle else await asyncio.open_connection("127.0.0.1", self.port)
        reader, writer = conn
        writer.write(f"GET {path} HTTP/1.1\r\nHost: svc\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.split(b"Content-Length: ", 1)[1].split(b"\r\n", 1)[0])
        body = await reader.readexactly(length)
        self._idle.append(conn)
        return body


def sync_caller(port: int) -> Any:
    """A blocking call over one keep-alive ``http.client`` connection (the stream thread's)."""
    local = threading.local()

    def call(key: str, value: str) -> str:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection("127.0.0.1", port)
        conn.request("GET", f"/{key}/{value}")
        return conn.getresponse().read().decode()

    return call


# -- one run ------------------------------------------------------------------------------


def run(
    bootstrap: str, admin: KafkaAdmin, port: int, mode: str, records: int, keys: int, flight: int
) -> dict[str, Any]:
    source, sink = new_topic(admin, PARTITIONS, "async-in"), new_topic(admin, PARTITIONS, "async-out")
    per_key: dict[str, int] = defaultdict(int)
    batch = []
    for i in range(records):
        key = f"k{i % keys}"
        batch.append((key, str(per_key[key])))
        per_key[key] += 1
    produce(bootstrap, source, batch)
    builder = StreamsBuilder()
    stream = builder.stream(source, Consumed(key_serde=S, value_serde=S))
    if mode == "sync":
        stream = stream.map_values(sync_caller(port))
    else:
        client = AsyncHttp(port)

        async def call(key: str, value: str) -> str:
            return (await client.get(f"/{key}/{value}")).decode()

        per_task = max(1, flight // PARTITIONS)
        options = AsyncOptions(max_in_flight=per_task, process_max_in_flight=flight)
        stream = stream.map_values_async(call, options)
    stream.to(sink, Produced(key_serde=S, value_serde=S))
    app_id = f"async-io-{mode}-{uuid.uuid4().hex[:6]}"
    config = StreamsConfig(
        application_id=app_id,
        bootstrap_servers=bootstrap,
        state_dir=Path(os.environ.get("TMPDIR", "/tmp")) / app_id,
        commit_interval_ms=1000,
    )
    streams = KafkaStreams(builder.build(), config)
    outputs = [(sink, p) for p in range(PARTITIONS)]

    def produced() -> int:  # the output's log end offsets ("latest" is exact on Apache Kafka)
        return sum(offset for offset, _ in admin.list_offsets(outputs, "latest").values())

    streams.start()
    try:
        deadline = time.monotonic() + 1800
        while (first := produced()) == 0:
            if time.monotonic() > deadline:
                raise RuntimeError("no output in 30 minutes")
            time.sleep(0.02)
        started, cpu = time.monotonic(), time.process_time()
        while (done := produced()) < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{done} of {records} outputs in 30 minutes")
            time.sleep(0.02)
        elapsed, cpu = time.monotonic() - started, time.process_time() - cpu
    finally:
        streams.close(timeout_s=60)
    out = read_output(bootstrap, sink, PARTITIONS, committed_only=False)
    seen: dict[str, list[int]] = defaultdict(list)
    for record in out:
        assert record.key is not None and record.value is not None
        seen[record.key.decode()].append(int(record.value))
    disordered = [key for key, values in seen.items() if values != list(range(per_key[key]))]
    return {
        "mode": mode,
        "records": records,
        "rate": (records - first) / elapsed,
        "cpu_us_per_record": cpu / (records - first) * 1e6,
        "outputs": len(out),
        "keys_out_of_order": len(disordered),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", default=os.environ.get("PLATFORM_STREAMS_BOOTSTRAP"))
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--sync-records", type=int, default=500)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--max-in-flight", type=int, default=400)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return 0
    if not args.bootstrap:
        parser.error("--bootstrap (or PLATFORM_STREAMS_BOOTSTRAP) names the broker")
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"async-io-{uuid.uuid4().hex[:6]}"
    tmp.mkdir(parents=True)
    service, port = start_service(tmp)
    try:
        with KafkaAdmin({"bootstrap.servers": args.bootstrap}) as admin:
            sync = run(args.bootstrap, admin, port, "sync", args.sync_records, args.keys, 1)
            print(sync, flush=True)
            flight = args.max_in_flight
            asynchronous = run(args.bootstrap, admin, port, "async", args.records, args.keys, flight)
            print(asynchronous, flush=True)
    finally:
        service.terminate()
    ideal = args.max_in_flight / DELAY_S
    print(f"load average: {os.getloadavg()}")
    for result in (sync, asynchronous):
        print(
            f"{result['mode']} {result['rate']:.0f} records/s over {result['records']:,} records, "
            f"{result['cpu_us_per_record']:.0f} us CPU a record"
        )
    print(f"max_in_flight {args.max_in_flight}")
    rate = asynchronous["rate"]
    print(f"async/sync {rate / sync['rate']:.0f}x; async/ideal ({ideal:.0f}/s) {rate / ideal:.2f}")
    print(f"keys out of order: sync {sync['keys_out_of_order']}, async {asynchronous['keys_out_of_order']}")
    return 0 if not (sync["keys_out_of_order"] or asynchronous["keys_out_of_order"]) else 1


if __name__ == "__main__":
    sys.exit(main())
