"""``platform-streams shadow-replay``: test a candidate topology on a range of the real input.

::

    platform-streams shadow-replay MODULE:FACTORY --candidate MODULE:FACTORY
        [--last PT1H | --start earliest|ISO-TIME|MS --end latest|ISO-TIME|MS]
        [--baseline replay|live] [--shadow-dir PATH] [--show N]
        [--master URL] [--config F] [--set k=v] [--json]

``MODULE:FACTORY`` is the deployed application (its settings: ``--config``/``--set``), the
candidate runs with the same settings. Exit status 0 when the candidate's output equals the
baseline's, 1 when it differs (the differing keys and first records are printed) or the
range held no input. Spark work is in :mod:`platform_streams.ops.spark.shadow_replay`;
nothing here imports pyspark (the CLI must start without it).
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from platform_streams.cli_app_loader import CliError, load_app, load_config
from platform_streams.errors import StreamsConfigError
from platform_streams.ops.offsets import parse_datetime_ms, parse_duration
from platform_streams.ops.spark_commands import _common, _emit

__all__ = ["add_shadow_replay_arguments", "input_range", "run_shadow_replay", "shadow_dir"]


def _position(field: str, text: str, keyword: str) -> Any:
    if text == keyword:
        return text
    if text.isdigit():
        return int(text)
    try:
        return parse_datetime_ms(text)
    except (StreamsConfigError, ValueError) as exc:
        raise StreamsConfigError(f"{field}: {keyword}, an ISO time or epoch ms, not {text!r}") from exc


def input_range(
    start: str | None, end: str | None, last: str | None, *, now_ms: int | None = None
) -> tuple[Any, Any]:
    """The input range as backfill positions: ``last`` (an ISO duration such as ``PT1H``,
    ending now) or ``start``/``end`` (``earliest``/``latest``, an ISO time, epoch ms)."""
    if last is not None:
        if start is not None or end is not None:
            raise StreamsConfigError("last: give either last or start/end, not both")
        try:
            span = parse_duration(last)
        except StreamsConfigError as exc:
            raise StreamsConfigError(f"last: {exc}") from exc
        if span.total_seconds() <= 0:
            raise StreamsConfigError(f"last: must be a positive duration, not {last!r}")
        until = int(time.time() * 1000) if now_ms is None else now_ms
        return until - int(span.total_seconds() * 1000), until
    return (
        _position("start", start or "earliest", "earliest"),
        _position("end", end or "latest", "latest"),
    )


def shadow_dir(root: str | Path, application_id: str) -> Path:
    """A fresh shadow location under ``root``: one directory per run, named by its UTC time."""
    return Path(root) / application_id / datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


def add_shadow_replay_arguments(parser: argparse.ArgumentParser) -> None:
    _common(parser, spark=True)
    parser.add_argument(
        "--candidate", required=True, metavar="MODULE:FACTORY", help="the topology to test"
    )
    parser.add_argument("--last", metavar="DURATION", help="the input of the last DURATION (e.g. PT1H)")
    parser.add_argument("--start", help="earliest (default), an ISO time or epoch ms")
    parser.add_argument("--end", help="latest (default), an ISO time or epoch ms (exclusive)")
    parser.add_argument(
        "--baseline",
        choices=("replay", "live"),
        default="replay",
        help="replay: the deployed topology over the same input in the same Spark job (default); "
        "live: what the running app wrote to its output topics for the input's time window",
    )
    parser.add_argument(
        "--shadow-dir",
        default="shadow-replay",
        metavar="PATH",
        help="where the Parquet output goes, in PATH/<application.id>/<UTC time> (default: ./shadow-replay)",
    )
    parser.add_argument("--show", type=int, default=20, help="how many differing keys and records to list")


def run_shadow_replay(args: argparse.Namespace) -> int:
    try:
        start, end = input_range(args.start, args.end, args.last)
    except StreamsConfigError as exc:
        raise CliError(str(exc)) from exc
    app = load_app(args.app)
    load_app(args.candidate)  # a broken candidate fails here, before Spark starts
    config = load_config(args.config, args.overrides, app.settings)
    from platform_streams.ops.spark import spark_job_session
    from platform_streams.ops.spark.shadow_replay import shadow_replay

    location = shadow_dir(args.shadow_dir, config.application_id)
    with spark_job_session(args.master, f"platform-streams shadow-replay {config.application_id}") as spark:
        try:
            result = shadow_replay(
                spark,
                args.app,
                args.candidate,
                config,
                location,
                start=start,
                end=end,
                baseline=args.baseline,
                show=args.show,
            )
        except ValueError as exc:
            raise CliError(str(exc), exit_code=1) from exc
    _emit(args, result.to_dict(), result.summary() + f"\nshadow output: {location}")
    return 0 if result.passed else 1
