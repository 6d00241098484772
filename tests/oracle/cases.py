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

from tests.oracle.catalogue import CATALOGUE, KEYS, Entry

VALUES = [str(i) for i in range(10)]
_PARAM_RANGES = {
    "size": (1, 30),
    "grace": (0, 20),
    "gap": (1, 20),
    "diff": (0, 20),
    "after": (0, 20),
}


def request(name: str, params: dict[str, int], steps: list[list[Any]], describe: bool = False) -> dict[str, Any]:
    """The request both sides answer for one case."""
    entry = CATALOGUE[name]
    store = {"name": entry.store[0], "kind": entry.store[1], "keys": KEYS} if entry.store else None
    return {"topology": name, "params": params, "steps": steps, "store": store, "describe": describe}


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
    name = draw(st.sampled_from(sorted(names or CATALOGUE)))
    entry = CATALOGUE[name]
    return request(name, draw(_params(entry)), draw(_steps(entry)))


def _normal(answer: dict[str, Any]) -> dict[str, Any]:
    """What is compared: success, the output records in order, the store contents as a set."""
    if not answer.get("ok"):
        return {"ok": False}
    normal = {"ok": True, "out": answer["out"]}
    if "store" in answer:
        normal["store"] = sorted(answer["store"], key=json.dumps)
    if "describe" in answer:
        normal["describe"] = answer["describe"]
    return normal


def _decoded(case: dict[str, Any], answer: dict[str, Any]) -> Any:
    """The output records deserialized, for a readable mismatch report."""
    if not answer.get("ok"):
        return answer.get("error")
    entry = CATALOGUE[case["topology"]]
    key_serde = entry.key_serde(case["params"])

    def decode(serde: Any, data: str | None) -> Any:
        return None if data is None else serde.deserialize(bytes.fromhex(data))

    out = [(decode(key_serde, k), decode(entry.value_serde, v), ts) for k, v, ts in answer["out"]]
    return {"out": out, "store": answer.get("store")}


def assert_same(case: dict[str, Any], java: dict[str, Any], python: dict[str, Any]) -> None:
    """Fail with both sides decoded when Python differs from Kafka Streams."""
    if _normal(java) == _normal(python):
        return
    steps = "\n".join(f"    {json.dumps(step)}," for step in case["steps"])
    raise AssertionError(
        f"platform_streams differs from Kafka Streams on {case['topology']} {case['params']}\n"
        f"  steps:\n{steps}\n"
        f"  java:   {_decoded(case, java)}\n"
        f"  python: {_decoded(case, python)}"
    )
