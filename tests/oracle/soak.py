"""A long differential run that keeps going past mismatches and records each one.

    PYTHONPATH=. python -m tests.oracle.soak --cases 10000 --out /tmp/oracle-soak.jsonl

Generates cases with the same hypothesis strategy as test_differential.py (no shrinking:
a mismatch is written out whole, one JSON line per case, for minimising into
test_regressions.py), prints progress and, at the end, the count, time and mismatches per
topology. docs/oracle.md records the runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.oracle import python_side
from tests.oracle.cases import assert_same, cases
from tests.oracle.java_oracle import JavaOracle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--topologies", default="", help="comma-separated catalogue names (default: all)")
    parser.add_argument("--out", default="oracle-soak.jsonl", help="where mismatching cases go")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # skipped-record warnings of the Python side
    names = [n for n in args.topologies.split(",") if n] or None
    oracle = JavaOracle()
    ran: Counter[str] = Counter()
    mismatched: Counter[str] = Counter()
    started = time.monotonic()

    with open(args.out, "w") as out:

        @seed(args.seed)
        @settings(
            max_examples=args.cases,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=cases(names))
        def one(case: dict[str, Any]) -> None:
            ran[case["topology"]] += 1
            try:
                assert_same(case, oracle.run(case), python_side.run(case))
            except AssertionError as mismatch:
                mismatched[case["topology"]] += 1
                out.write(json.dumps({"case": case, "report": str(mismatch)}) + "\n")
                out.flush()
            total = sum(ran.values())
            if total % 250 == 0:
                elapsed = time.monotonic() - started
                print(f"{total} cases, {sum(mismatched.values())} mismatches, {elapsed:.0f}s", flush=True)

        try:
            one()
        finally:
            oracle.close()
    elapsed = time.monotonic() - started
    print(f"ran {sum(ran.values())} cases in {elapsed:.0f}s; {sum(mismatched.values())} mismatches")
    for name in sorted(ran):
        print(f"  {name}: {ran[name]} cases, {mismatched[name]} mismatches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
