"""The run's outputs: the one-line summary, ``report.json`` and ``soak.png`` (throughput,
lag and faults over time) in the run directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def summary_line(minutes: float, records: int, faults: int, totals: dict[str, int]) -> str:
    line = (
        f"soak: {minutes:g} min, {records} records, {faults} faults, lost={totals['lost']} "
        f"wrong={totals['wrong']} duplicates={totals['duplicates']} stuck={totals['stuck']}"
    )
    if totals.get("broker_leaked"):
        line += f" broker_leaked={totals['broker_leaked']}"
    return line


def write_json(run_dir: Path, report: dict[str, Any]) -> Path:
    path = run_dir / "report.json"
    path.write_text(json.dumps(report, indent=2, sort_keys=False, default=str) + "\n")
    return path


def plot(
    run_dir: Path, samples: list[dict[str, Any]], faults: list[dict[str, Any]], title: str
) -> Path | None:
    """Throughput (produced and per application) and lag over time, faults as marks."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # the plot is for people; the JSON has the same figures
        return None
    if len(samples) < 2:
        return None
    apps = sorted(samples[-1]["committed"])
    times = [s["t"] / 60 for s in samples]
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(12, 9), sharex=True)
    stamps = [s["t"] for s in samples]

    def rate(series: list[int]) -> list[float]:
        pairs = zip(series, series[1:], stamps, stamps[1:], strict=False)
        return [0.0] + [max(0.0, (b - a) / max(1e-3, tb - ta)) for a, b, ta, tb in pairs]

    top.plot(times, rate([s["produced"] for s in samples]), label="produced", color="black", lw=1)
    for app in apps:
        top.plot(times, rate([s["committed"][app] for s in samples]), label=f"{app} committed", lw=1)
    top.set_ylabel("records/s")
    top.legend(loc="upper right", fontsize=8)
    for app in apps:
        middle.plot(times, [s["lag"][app] for s in samples], label=f"{app} lag", lw=1)
    middle.set_ylabel("input lag (records)")
    middle.legend(loc="upper right", fontsize=8)
    bottom.plot(times, [s["load1"] for s in samples], label="load average (1 min)", color="grey", lw=1)
    bottom.set_ylabel("load")
    bottom.set_xlabel("minutes")
    kinds = sorted({f["kind"] for f in faults})
    colours = dict(zip(kinds, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 3, strict=False))
    for fault in faults:
        for axis in (top, middle, bottom):
            axis.axvline(fault["ran_at_s"] / 60, color=colours[fault["kind"]], alpha=0.35, lw=1)
    for kind in kinds:
        bottom.plot([], [], color=colours[kind], label=kind)
    bottom.legend(loc="upper right", fontsize=7, ncol=3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = run_dir / "soak.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
