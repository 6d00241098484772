"""Generated differential cases (hypothesis) and their comparison.

A case is the JSON request both sides run: a catalogue topology, its parameters and steps
(``["p", topic, key, value, timestamp]`` pipes a record, ``["a", ms]`` advances the wall
clock). Timestamps are a random walk with out-of-order steps back and jumps forward that
close windows; values are small decimal strings or None (tombstones / null values); keys
come from a small set (so windows, sessions and joins meet) and are sometimes None.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from platform_streams.state.windowed import Windowed
from tests.oracle.catalogue import CATALOGUE, KEYS, Entry

VALUES = [str(i) for i in range(10)]
_PARAM_RANGES = {
    "size": (1, 30),
    "grace": (0, 20),
    "gap": (1, 20),
    "diff": (0, 20),
    "after": (0, 20),
}


def request(
    name: str, params: dict[str, int], steps: list[list[Any]], describe: bool = False
) -> dict[str, Any]:
    """The request both sides answer for one case."""
    entry = CATALOGUE[name]
    store: dict[str, Any] | None = None
    if entry.store:
        store = {"name": entry.store[0], "kind": entry.store[1], "keys": KEYS}
        if entry.store[1] == "versioned":  # probe times: every record's time, and the end of time
            store["as_of"] = sorted({step[4] for step in steps if step[0] == "p"} | {2**62})
    answer: dict[str, Any] = {
        "topology": name, "params": params, "steps": steps, "store": store, "describe": describe
    }
    if name in ROCKSDB_ONLY:
        answer["in_memory"] = False
    return answer


#: Topologies whose Java side runs on Kafka's RocksDB stores (as platform_streams does), not
#: the in-memory ones the oracle uses for speed: there Kafka's two stores give different output
#: (docs/oracle.md #7: emit-final sessions ending at the same time come out by start time
#: from the RocksDB time-ordered store, by key from the in-memory one).
ROCKSDB_ONLY = {"session_final"}


@st.composite
def _params(draw: st.DrawFn, entry: Entry) -> dict[str, int]:
    params: dict[str, int] = {}
    for name in entry.params:
        if name == "advance":
            params[name] = draw(st.integers(1, params["size"]))
        else:
            low, high = _PARAM_RANGES[name]
            params[name] = draw(st.integers(low, high))
    return params


@st.composite
def _steps(draw: st.DrawFn, entry: Entry) -> list[list[Any]]:
    steps: list[list[Any]] = []
    timestamp = draw(st.integers(0, 20))
    for _ in range(draw(st.integers(0, 25))):
        if draw(st.integers(0, 9)) == 0:
            steps.append(["a", draw(st.sampled_from([100, 1000, 10_000]))])
            continue
        timestamp = max(0, timestamp + draw(st.one_of(st.integers(-15, 25), st.just(100))))
        key = None if draw(st.integers(0, 14)) == 0 else draw(st.sampled_from(KEYS))
        value = None if draw(st.integers(0, 6)) == 0 else draw(st.sampled_from(VALUES))
        steps.append(["p", draw(st.sampled_from(entry.inputs)), key, value, timestamp])
    return steps


@st.composite
def cases(draw: st.DrawFn, names: list[str] | None = None) -> dict[str, Any]:
    name = draw(st.sampled_from(sorted(names or set(CATALOGUE) - set(NOT_GENERATED))))
    entry = CATALOGUE[name]
    return request(name, draw(_params(entry)), draw(_steps(entry)))


#: Known differences (docs/oracle.md; each has an xfail(strict) case in test_regressions.py).
#: Topologies whose outputs for ONE input record come in another order than Kafka's: their
#: records are compared per input record as a sorted list (values and timestamps still exact).
ORDER_WITHIN_RECORD_DIFFERS: dict[str, str] = {}
#: Topologies left out of generated cases: their difference is not one a comparison can allow for.
NOT_GENERATED = {
    "sliding_suppress": "suppress(until_window_closes) closes a sliding window at end + grace in "
    "Kafka, end + 1 + grace in platform_streams (deliberate, docs/oracle.md #3: Kafka emits a "
    "second 'final' result when a record at exactly end + grace updates the emitted window)",
}


def _normal(answer: dict[str, Any], topology: str) -> dict[str, Any]:
    """What is compared: success, the output records in order, the store contents as a set."""
    if not answer.get("ok"):
        return {"ok": False}
    out = answer["out"]
    if topology in ORDER_WITHIN_RECORD_DIFFERS:
        out = sorted(out, key=lambda row: (row[3], json.dumps(row)))
    normal = {"ok": True, "out": out}
    if "store" in answer:
        normal["store"] = sorted(answer["store"], key=json.dumps)
    if "describe" in answer:
        normal["describe"] = answer["describe"]
    return normal


def plain(case: dict[str, Any], answer: dict[str, Any]) -> Any:
    """An answer deserialized to plain values: ``{"out": [(key, value, ts)], "store": [...]}``
    (a windowed key reads ``(key, start, end)``), or the error text; for reports and for
    the expected values of test_regressions.py."""
    if not answer.get("ok"):
        return answer.get("error")
    entry = CATALOGUE[case["topology"]]
    key_serde = entry.key_serde(case["params"])

    def decode(serde: Any, data: str | None) -> Any:
        value = None if data is None else serde.deserialize(bytes.fromhex(data))
        if isinstance(value, Windowed):
            return (value.key, value.window.start_ms, value.window.end_ms)
        return value

    out = [(decode(key_serde, k), decode(entry.value_serde, v), ts) for k, v, ts, _ in answer["out"]]
    store = sorted(answer["store"], key=json.dumps) if "store" in answer else None
    return {"out": out, "store": store}


def assert_same(case: dict[str, Any], java: dict[str, Any], python: dict[str, Any]) -> None:
    """Fail with both sides decoded when Python differs from Kafka Streams."""
    if _normal(java, case["topology"]) == _normal(python, case["topology"]):
        return
    steps = "\n".join(f"    {json.dumps(step)}," for step in case["steps"])
    raise AssertionError(
        f"platform_streams differs from Kafka Streams on {case['topology']} {case['params']}\n"
        f"  steps:\n{steps}\n"
        f"  java:   {plain(case, java)}\n"
        f"  python: {plain(case, python)}"
    )
