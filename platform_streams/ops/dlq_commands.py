"""``platform-streams dlq replay``: re-inject dead letters after a fix (ops/dead_letter_replay.py).

::

    platform-streams dlq replay MODULE:FACTORY [--config F] [--set k=v] [--error-class NAME ...]
        [--since ISO] [--until ISO] [--replay-topic TOPIC] [--dry-run] [--show N]
        [--transaction-records N] [--group ID] [--json]

Exit status: 0 done (skipped dead letters are reported, not an error), 1 refused (a topic is
missing) or a broker failure, 2 usage errors.
"""

from __future__ import annotations

import argparse
import json

from platform_streams.cli_app_loader import (
    CliError,
    add_app_argument,
    add_config_arguments,
    load_app,
    load_config,
)
from platform_streams.errors import StreamsConfigError
from platform_streams.ops.dead_letter_replay import ReplayFilter, ReplayOptions, replay_dead_letters
from platform_streams.ops.results import OperationRefusedError

__all__ = ["add_dlq_arguments", "run_dlq"]

_REPLAY_HELP = (
    "re-inject the dead-letter topic's records into their source topics (KIP-1034 headers) or "
    "--replay-topic, exactly once per record: an interrupted replay run again re-sends nothing"
)


def add_dlq_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="dlq_action", metavar="ACTION", required=True)
    sub = actions.add_parser("replay", help=_REPLAY_HELP, description=_REPLAY_HELP)
    add_app_argument(sub)
    add_config_arguments(sub)
    sub.add_argument("--json", action="store_true", help="print the result as JSON")
    sub.add_argument(
        "--error-class",
        dest="error_classes",
        action="append",
        default=[],
        metavar="NAME",
        help="only dead letters whose __streams.errors.exception is NAME (repeatable)",
    )
    sub.add_argument("--since", metavar="ISO", help="only records with a timestamp at or after this")
    sub.add_argument("--until", metavar="ISO", help="only records with a timestamp before this")
    sub.add_argument(
        "--replay-topic",
        metavar="TOPIC",
        help="send every replayed record here (partitioned by key) instead of its source topic",
    )
    sub.add_argument(
        "--dry-run", action="store_true", help="show what would be sent; send and commit nothing"
    )
    sub.add_argument(
        "--show", type=int, default=20, metavar="N", help="list the first N records (default 20)"
    )
    sub.add_argument(
        "--transaction-records",
        type=int,
        default=500,
        metavar="N",
        help="dead letters per transaction (default 500)",
    )
    sub.add_argument(
        "--group",
        metavar="ID",
        help="the replay group and transactional.id (default <application.id>-dlq-replay-<filter hash>)",
    )


def run_dlq(args: argparse.Namespace) -> int:
    app = load_app(args.app)
    config = load_config(args.config, args.overrides, app.settings)
    try:
        options = ReplayOptions(
            filter=ReplayFilter.parse(args.error_classes, args.since, args.until),
            replay_topic=args.replay_topic,
            dry_run=args.dry_run,
            show=args.show,
            transaction_records=args.transaction_records,
            group_id=args.group,
        )
    except StreamsConfigError as exc:
        raise CliError(str(exc)) from exc
    try:
        result = replay_dead_letters(app.topology, config, options)
    except OperationRefusedError as exc:
        print(json.dumps(exc.result.to_dict(), indent=2) if args.json else exc.result.summary(), flush=True)
        raise
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.summary(), flush=True)
    return 0
