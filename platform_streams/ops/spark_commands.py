"""``platform-streams snapshot ...`` and ``platform-streams backfill``: the Spark jobs as commands.

::

    platform-streams snapshot create MODULE:FACTORY [--store S ...] [--location PATH]
        [--partition N ...] [--keep N] [--no-parquet] [--incremental] [--master URL] [--config F]
        [--set k=v] [--json]
    platform-streams snapshot list MODULE:FACTORY [--store S ...] [--location PATH] [--json]
    platform-streams snapshot prune MODULE:FACTORY --keep K [--orphan-grace SECONDS] [--store S ...]
        [--location PATH] [--json]
    platform-streams snapshot truncate MODULE:FACTORY [--store S ...] [--partition N ...] [--location PATH]
        [--dry-run] [--json]
    platform-streams backfill MODULE:FACTORY
        (--from-kafka [--start earliest|ISO-TIME|MS] [--end latest|ISO-TIME|MS]
         | --from-parquet PATH --topic T --partitions N)
        (--to-parquet PATH | --to-kafka | --count-only) [--final-state LOCATION [--commit-offsets]]
        [--master URL] [--config F] [--set k=v] [--json]

The location defaults to the ``state.snapshot.location`` setting, the Spark master to
``$PLATFORM_STREAMS_SPARK_MASTER``, else ``local[*]``. Arguments are declared here without
importing pyspark (the CLI must start without it); the jobs import it when they run.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from platform_streams.cli_app_loader import (
    CliError,
    add_app_argument,
    add_config_arguments,
    load_app,
    load_config,
)
from platform_streams.config import StreamsConfig
from platform_streams.errors import StreamsError
from platform_streams.ops.offsets import parse_datetime_ms
from platform_streams.state.snapshots import ORPHAN_GRACE_S, SnapshotCatalog, open_snapshot_store

__all__ = ["add_backfill_arguments", "add_snapshot_arguments", "run_backfill", "run_snapshot"]


def _common(parser: argparse.ArgumentParser, *, spark: bool) -> None:
    add_app_argument(parser)
    add_config_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    if spark:
        parser.add_argument(
            "--master", help="Spark master URL (default $PLATFORM_STREAMS_SPARK_MASTER or local[*])"
        )


def _stores_and_location(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", dest="stores", action="append", metavar="STORE", help="only this store (repeatable)"
    )
    parser.add_argument("--location", help="snapshot location (default: the state.snapshot.location setting)")


def add_snapshot_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="snapshot_action", metavar="ACTION", required=True)
    create = actions.add_parser(
        "create",
        help="compact stores' changelogs on Spark into snapshots workers restore from",
        description="compact stores' changelogs on Spark into snapshots workers restore from",
    )
    _common(create, spark=True)
    _stores_and_location(create)
    create.add_argument(
        "--partition", dest="partitions", type=int, action="append", help="only this partition"
    )
    create.add_argument(
        "--keep", type=int, help="then delete all but the KEEP newest snapshots per partition"
    )
    create.add_argument("--no-parquet", action="store_true", help="skip the Parquet copy for analysts")
    create.add_argument(
        "--incremental",
        action="store_true",
        help="build on each partition's newest snapshot: read only the changelog after it (no Parquet copy)",
    )
    listing = actions.add_parser(
        "list", help="list published snapshots", description="list published snapshots"
    )
    _common(listing, spark=False)
    _stores_and_location(listing)
    prune = actions.add_parser(
        "prune",
        help="delete all but the KEEP newest snapshots of every store partition",
        description="delete all but the KEEP newest snapshots of every store partition (no Spark)",
    )
    _common(prune, spark=False)
    _stores_and_location(prune)
    prune.add_argument("--keep", type=int, required=True, help="snapshots kept per store partition (>= 1)")
    prune.add_argument(
        "--orphan-grace",
        type=float,
        default=ORPHAN_GRACE_S,
        metavar="SECONDS",
        help="also delete uploads no manifest publishes (killed jobs) once older than this "
        f"(default {ORPHAN_GRACE_S:.0f}; longer than any compaction run)",
    )
    truncate = actions.add_parser(
        "truncate",
        help="delete changelog records below each partition's newest snapshot (DeleteRecords)",
        description="delete changelog records below each partition's newest usable snapshot, never "
        "past what a live standby still needs (needs state.snapshot.truncate.changelogs; no Spark)",
    )
    _common(truncate, spark=False)
    _stores_and_location(truncate)
    truncate.add_argument(
        "--partition", dest="partitions", type=int, action="append", help="only this partition"
    )
    truncate.add_argument("--dry-run", action="store_true", help="say what would be deleted, delete nothing")


def add_backfill_arguments(parser: argparse.ArgumentParser) -> None:
    _common(parser, spark=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-kafka", action="store_true", help="read the source topics from Kafka")
    source.add_argument(
        "--from-parquet", metavar="PATH", help="read (key, value, timestamp) rows from Parquet"
    )
    parser.add_argument("--topic", help="with --from-parquet: the source topic the rows belong to")
    parser.add_argument("--partitions", type=int, help="with --from-parquet: that topic's partition count")
    parser.add_argument(
        "--partitioner",
        choices=("murmur2", "consistent"),
        default="murmur2",
        help="with --from-parquet: how the topic's producers place keys (murmur2: Java, librdkafka "
        "murmur2_random; consistent: librdkafka's default consistent_random, CRC32)",
    )
    parser.add_argument(
        "--start", default="earliest", help="with --from-kafka: earliest, an ISO time or epoch ms"
    )
    parser.add_argument("--end", default="latest", help="with --from-kafka: latest, an ISO time or epoch ms")
    sink = parser.add_mutually_exclusive_group(required=True)
    sink.add_argument("--to-parquet", metavar="PATH", help="write output records as Parquet")
    sink.add_argument("--to-kafka", action="store_true", help="produce output records to their topics")
    sink.add_argument("--count-only", action="store_true", help="run, count the output, write nothing")
    parser.add_argument(
        "--final-state",
        metavar="LOCATION",
        help="seed the (empty) changelogs with the final state and publish snapshots there, so the "
        "application starts from it",
    )
    parser.add_argument(
        "--commit-offsets",
        action="store_true",
        help="with --from-kafka: commit the application's group at the offsets the backfill read up to",
    )


def _position(text: str, keyword: str) -> Any:
    if text == keyword:
        return text
    if text.isdigit():
        return int(text)
    return parse_datetime_ms(text)


def _location(args: argparse.Namespace, config: StreamsConfig) -> str:
    location = args.location or config.state_snapshot_location
    if not location:
        raise CliError("no snapshot location: pass --location or set state.snapshot.location")
    return str(location)


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else text, flush=True)


def run_snapshot(args: argparse.Namespace) -> int:
    app = load_app(args.app)
    config = load_config(args.config, args.overrides, app.settings)
    location = _location(args, config)
    if args.snapshot_action == "prune":
        if args.keep < 1:
            raise CliError(f"--keep: must be at least 1, got {args.keep}")
        if args.orphan_grace < 0:
            raise CliError(f"--orphan-grace: must be at least 0 seconds, got {args.orphan_grace}")
        catalog = SnapshotCatalog(open_snapshot_store(location))
        stores = args.stores or sorted(app.topology.stores)
        deleted = {s: catalog.prune_store(config.application_id, s, args.keep) for s in stores}
        grace = args.orphan_grace
        orphans = [p for s in stores for p in catalog.prune_orphans(config.application_id, s, grace)]
        total = sum(n for per in deleted.values() for n in per.values())
        text = (
            f"deleted {total} snapshots, kept the newest {args.keep} per partition; "
            f"deleted {len(orphans)} unpublished uploads older than {args.orphan_grace:.0f}s"
        )
        _emit(args, {"snapshots": deleted, "orphans": orphans}, text)
        return 0
    if args.snapshot_action == "truncate":
        from platform_streams.ops.changelog_truncation import logged_stores, truncate_changelogs

        catalog = SnapshotCatalog(open_snapshot_store(location))
        try:
            stores = logged_stores(app.topology, config, args.stores)
            cuts = truncate_changelogs(config, catalog, stores, args.partitions, dry_run=args.dry_run)
        except StreamsError as exc:
            raise CliError(str(exc)) from exc
        verb = "would delete" if args.dry_run else "deleted"
        lines = [
            f"{c.topic}-{c.partition}: {verb} records below {c.truncate_before} ({c.reason})"
            if c.truncate_before is not None
            else f"{c.topic}-{c.partition}: kept from {c.log_start} ({c.reason})"
            for c in cuts
        ]
        _emit(args, [c.to_json() for c in cuts], "\n".join(lines) or "no snapshots: nothing to truncate")
        return 0
    if args.snapshot_action == "list":
        catalog = SnapshotCatalog(open_snapshot_store(location))
        stores = args.stores or sorted(app.topology.stores)
        found = [m for s in stores for m in catalog.manifests(config.application_id, s)]
        lines = [
            f"{m.store} p{m.partition} offset={m.offset} keys={m.record_count} {m.source} id={m.snapshot_id}"
            for m in sorted(found, key=lambda m: (m.store, m.partition, -m.offset))
        ]
        _emit(args, [m.model_dump() for m in found], "\n".join(lines) or "no snapshots")
        return 0
    from platform_streams.ops.spark import compact_application, spark_job_session

    with spark_job_session(args.master, f"platform-streams snapshot {config.application_id}") as spark:
        try:
            results = compact_application(
                spark,
                app.topology,
                config,
                location,
                stores=args.stores,
                partitions=args.partitions,
                keep=args.keep,
                parquet=not args.no_parquet,
                incremental=args.incremental,
            )
        except ValueError as exc:
            raise CliError(str(exc), exit_code=1) from exc
    data = {name: [m.model_dump() for m in r.manifests] for name, r in results.items()}
    _emit(args, data, "\n".join(r.summary() for r in results.values()) or "no store to snapshot")
    return 0


def run_backfill(args: argparse.Namespace) -> int:
    app = load_app(args.app)
    config = load_config(args.config, args.overrides, app.settings)
    from platform_streams.ops.spark import (
        KafkaInput,
        KafkaOutput,
        ParquetInput,
        ParquetOutput,
        backfill,
        spark_job_session,
    )

    inputs: Sequence[Any]
    if args.from_parquet:
        if not args.topic or not args.partitions:
            raise CliError("--from-parquet needs --topic and --partitions")
        inputs = [ParquetInput(args.from_parquet, args.topic, args.partitions, partitioner=args.partitioner)]
    else:
        inputs = [KafkaInput(start=_position(args.start, "earliest"), end=_position(args.end, "latest"))]
    output: Any = None
    if args.to_parquet:
        output = ParquetOutput(args.to_parquet)
    elif args.to_kafka:
        output = KafkaOutput()
    with spark_job_session(args.master, f"platform-streams backfill {config.application_id}") as spark:
        try:
            result = backfill(
                spark,
                args.app,
                config,
                inputs,
                output,
                final_state=args.final_state,
                commit_offsets=args.commit_offsets,
            )
        except ValueError as exc:
            raise CliError(str(exc), exit_code=1) from exc
    data = {
        "stages": result.stages,
        "records_out": result.records_out,
        "output": result.output,
        "snapshots": [m.model_dump() for m in result.snapshots],
        "end_offsets": {f"{t}-{p}": o for (t, p), o in sorted(result.end_offsets.items())},
        "seconds": round(result.seconds, 3),
    }
    _emit(args, data, result.summary())
    return 0
