"""The Python side of the differential harness: the same request, run through
platform_streams' TopologyTestDriver, answered in the Java oracle's shape."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from platform_streams.serde import Bytes
from platform_streams.state.windowed import Windowed
from platform_streams.testing import TopologyTestDriver
from tests.oracle.catalogue import CATALOGUE, KEYS, S

B = Bytes()  # the output is compared byte for byte with Java's
#: RocksDB on tmpfs when there is one: the driver commits (flushes every store) after each
#: record, as Kafka's does, and a memtable flush to disk costs ~5 ms a store
_SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None
_FOREVER = 2**63 - 1
CONFIG = {"default_key_serde": "string", "default_value_serde": "string"}


def run(request: dict[str, Any]) -> dict[str, Any]:
    """Build, pipe, read ``out`` and the store; errors become ``{"ok": False}`` like Java's."""
    try:
        return _run(request)
    except Exception as error:
        return {"ok": False, "error": f"{type(error).__name__}: {error}"}


def _run(request: dict[str, Any]) -> dict[str, Any]:
    name = request["topology"]
    entry = CATALOGUE[name]
    topology = entry.build(name, request["params"])
    answer: dict[str, Any] = {"ok": True}
    if request.get("describe"):
        answer["describe"] = str(topology.describe())
    records: list[list[Any]] = []
    state_dir = Path(tempfile.mkdtemp(prefix="ps-oracle-", dir=_SCRATCH))
    config = {**CONFIG, **request.get("props", {}), "state_dir": state_dir}
    with TopologyTestDriver(topology, config, initial_wall_clock_ms=0) as driver:
        inputs = {topic: driver.create_input_topic(topic, S, S) for topic in entry.inputs}
        output = driver.create_output_topic("out", B, B)
        for index, step in enumerate(request["steps"]):
            if step[0] == "a":
                driver.advance_wall_clock_time(step[1])
            else:
                _, topic, key, value, timestamp = step
                inputs[topic].pipe_input(key, value, timestamp)
            records.extend(
                [_hex(r.key), _hex(r.value), r.timestamp, index] for r in output.read_records_to_list()
            )
        answer["out"] = records
        store = request.get("store")
        if store:
            answer["store"] = _read_store(driver, store["name"], store["kind"], store.get("as_of", []))
    shutil.rmtree(state_dir, ignore_errors=True)
    return answer


def _hex(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


def _read_store(driver: TopologyTestDriver, name: str, kind: str, as_of: list[int]) -> list[list[Any]]:
    if kind == "versioned":  # each key's version as of each probe time (Oracle.java's readStore)
        versioned = driver.get_versioned_key_value_store(name)
        rows_at: list[list[Any]] = []
        for key in KEYS:
            for time in as_of:
                version = versioned.get(key, time)
                if version is None:
                    rows_at.append([key, time, None, None, None])
                else:
                    rows_at.append([key, time, version.value, version.timestamp, version.valid_to])
        return rows_at
    store = driver.get_state_store(name)
    if kind == "kv":
        return [[key, value] for key, value in store.all()]
    rows: list[list[Any]] = []
    if kind == "window":  # a window fetch applies the store's retention, as an IQ does
        return [[key, start, value] for key in KEYS for start, value in store.fetch(key, 0, _FOREVER)]
    # a session store has no all() (neither has Kafka's ReadOnlySessionStore): fetch each key
    for key in KEYS:
        for windowed, value in store.fetch(key):
            assert isinstance(windowed, Windowed)
            rows.append([windowed.key, windowed.window.start_ms, windowed.window.end_ms, value])
    return rows
