"""The tables bench/run.py prints: one per broker, and the brokers side by side.

Results are keyed ``(broker, workload, engine)`` -> the runs of that case. A run whose
answer was wrong *because of the broker* (``RunResult.wrong``: an engine that trusts
ListOffsets restoring on Tansu) is shown as that, never as a rate: its speed means
nothing. Every other wrong answer has already stopped the bench (bench/verify.py).
"""

from __future__ import annotations

import statistics

from bench.common import RunResult

Results = dict[tuple[str, str, str], list[RunResult]]

#: the engines each engine's rate is compared with, and their column names
BASES = {"raw_confluent": "vs raw", "quixstreams": "vs quix", "kafka_streams": "vs java"}


def good(runs: list[RunResult]) -> list[RunResult]:
    return [r for r in runs if not r.wrong]


def median_rate(runs: list[RunResult]) -> float | None:
    ok = good(runs)
    return statistics.median(r.records_per_s for r in ok) if ok else None


def median_run(runs: list[RunResult]) -> RunResult | None:
    """The run whose rate is the median (the figures of one real run, not a mix)."""
    median = median_rate(runs)
    if median is None:
        return None
    return min(good(runs), key=lambda r: abs(r.records_per_s - median))


def cpu_us_per_record(run: RunResult) -> float:
    return run.cpu_s / run.records * 1e6 if run.records else 0.0


def _outputs(workload: str, run: RunResult) -> str:
    return f"{run.restored_entries:,} entries" if workload.endswith("/restore") else f"{run.outputs:,}"


def _wrong(runs: list[RunResult]) -> str:
    return "; ".join(dict.fromkeys(r.wrong for r in runs if r.wrong))


def table(results: Results, broker: str) -> str:
    """One broker's runs: medians, every run's rate, cost, and the ratios of medians."""
    lines = [
        "| workload | engine | records/s (median) | runs (records/s) | wall s | CPU s | CPU us/record "
        "| peak RSS MB | outputs | load | " + " | ".join(BASES.values()) + " |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(BASES),
    ]
    for (where, workload, engine), runs in results.items():
        if where != broker:
            continue
        mid, median = median_run(runs), median_rate(runs)
        if mid is None or median is None:
            lines.append(f"| {workload} | {engine} | **{_wrong(runs)}** |" + " |" * (8 + len(BASES)))
            continue
        ratios = []
        for base in BASES:
            other = median_rate(results.get((broker, workload, base), []))
            ratios.append(f"{median / other:.2f}" if other else "-")
        each = ", ".join(f"{r.records_per_s:,.0f}" if not r.wrong else "wrong" for r in runs)
        lines.append(
            f"| {workload} | {engine} | {median:,.0f} | {each} | {mid.wall_s:.2f} | {mid.cpu_s:.2f} "
            f"| {cpu_us_per_record(mid):.1f} | {mid.peak_rss_mb:.0f} | {_outputs(workload, mid)} "
            f"| {mid.note} | " + " | ".join(ratios) + " |"
        )
    return "\n".join(lines)


def side_by_side(results: Results, brokers: list[str]) -> str:
    """The same case on each broker: rate, CPU per record, outputs, and last/first ratios."""
    first, last = brokers[0], brokers[-1]
    cases = list(dict.fromkeys((w, e) for (_, w, e) in results))
    head = "| workload | engine | " + " | ".join(
        f"{b} records/s | {b} CPU us/rec | {b} outputs" for b in brokers
    )
    lines = [
        head + f" | {last}/{first} records/s | {last}/{first} CPU |",
        "|---|---|" + "---:|---:|---:|" * len(brokers) + "---:|---:|",
    ]
    for workload, engine in cases:
        cells: list[str] = []
        rates: list[float | None] = []
        cpus: list[float | None] = []
        for broker in brokers:
            runs = results.get((broker, workload, engine), [])
            mid, median = median_run(runs), median_rate(runs)
            if mid is None or median is None:
                cells.append(f"{_wrong(runs) or 'not run'} | - | -")
                rates.append(None)
                cpus.append(None)
                continue
            cpu = cpu_us_per_record(mid)
            cpus.append(cpu)
            rates.append(median)
            cells.append(f"{median:,.0f} | {cpu:.1f} | {_outputs(workload, mid)}")
        rate_ratio = f"{rates[-1] / rates[0]:.2f}" if rates[0] and rates[-1] else "-"
        cpu_ratio = f"{cpus[-1] / cpus[0]:.2f}" if cpus[0] and cpus[-1] else "-"
        lines.append(f"| {workload} | {engine} | " + " | ".join(cells) + f" | {rate_ratio} | {cpu_ratio} |")
    return "\n".join(lines)


#: the marginal table's engine columns, in this order (those that ran), and its ratio columns
MARGINAL_ENGINES = ("raw_confluent", "platform_streams", "kafka_streams", "quixstreams")
MARGINAL_RATIOS = (("raw_confluent", "raw/ps"), ("kafka_streams", "Java/ps"))


def marginal_us(runs_by_size: dict[int, list[RunResult]]) -> float | None:
    """(CPU(largest) - CPU(smallest)) / (records(largest) - records(smallest)) in us, from the
    median CPU and median record count of each size (a restore's records are changelog
    records): the cost of one more record once the engine runs, start-up cancelled."""
    sizes = sorted(s for s, runs in runs_by_size.items() if good(runs))
    if len(sizes) < 2:
        return None
    small, big = (good(runs_by_size[s]) for s in (sizes[0], sizes[-1]))
    cpu = statistics.median(r.cpu_s for r in big) - statistics.median(r.cpu_s for r in small)
    records = statistics.median(r.records for r in big) - statistics.median(r.records for r in small)
    return cpu / records * 1e6 if records > 0 else None


def marginal_table(results: Results, broker: str) -> str:
    """Workloads x engines: the marginal CPU per record between the smallest and the largest
    size (results labelled ``workload@records``), and the ratios of the raw loop's and Java's
    marginal to platform_streams' (above 1: platform_streams costs less)."""
    grouped: dict[str, dict[str, dict[int, list[RunResult]]]] = {}
    for (where, label, engine), runs in results.items():
        if where != broker or "@" not in label:
            continue
        workload, size = label.rsplit("@", 1)
        grouped.setdefault(workload, {}).setdefault(engine, {})[int(size)] = runs
    engines = [e for e in MARGINAL_ENGINES if any(e in by_engine for by_engine in grouped.values())]
    lines = [
        "| workload | "
        + " | ".join(f"{e} us/rec" for e in engines)
        + " | "
        + " | ".join(name for _, name in MARGINAL_RATIOS)
        + " | sizes |",
        "|---|" + "---:|" * (len(engines) + len(MARGINAL_RATIOS)) + "---|",
    ]
    for workload, by_engine in grouped.items():
        marginal = {e: marginal_us(by_engine[e]) if e in by_engine else None for e in engines}
        cells = [f"{marginal[e]:.2f}" if marginal[e] is not None else "-" for e in engines]
        ours = marginal.get("platform_streams")
        for base, _ in MARGINAL_RATIOS:
            other = marginal.get(base)
            cells.append(f"{other / ours:.2f}" if other is not None and ours else "-")
        sizes = sorted({s for by in by_engine.values() for s in by})
        shown = ", ".join(f"{s:,}" for s in sizes)
        lines.append(f"| {workload} | " + " | ".join(cells) + f" | {shown} |")
    return "\n".join(lines)
