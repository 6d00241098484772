"""``platform-streams``: the command line of platform_streams.

::

    platform-streams run MODULE:FACTORY [--config FILE] [--set KEY=VALUE ...] [--workers N]
    platform-streams describe MODULE:FACTORY
    platform-streams topics plan|create|validate|delete|create-io MODULE:FACTORY ... (ops/cli_commands.py)
    platform-streams reset MODULE:FACTORY ...                               (ops/cli_commands.py)
    platform-streams groups describe [MODULE:FACTORY] [--application-id ID]  (ops/group_commands.py)
    platform-streams dlq replay MODULE:FACTORY ...                          (ops/dlq_commands.py)
    platform-streams diff MODULE:FACTORY --against deployed ...             (ops/gate_commands.py)
    platform-streams acls MODULE:FACTORY [--check] ...                      (ops/acl_commands.py)
    platform-streams snapshot create|list MODULE:FACTORY ...                (ops/spark_commands.py)
    platform-streams backfill MODULE:FACTORY ...                            (ops/spark_commands.py)
    platform-streams shadow-replay MODULE:FACTORY --candidate M:F ...       (ops/shadow_commands.py)
    platform-streams apps list|describe|validate NAME [CONFIG]             (cli_apps.py)
    platform-streams produce|consume TOPIC [--bootstrap-server HOST:PORT] ...  (cli_records.py)
    platform-streams broker [--broker KIND] [--port 9092] [--host 127.0.0.1]

Subcommands are entries of :data:`COMMANDS` (name, help, arguments, handler), so a new
one (``topics``, ``reset``, ``apps``...) is a module with a :class:`Command` and one line
here. Handlers return an exit status; expected failures raise
:class:`~platform_streams.cli_app_loader.CliError` or a :class:`StreamsError`, which :func:`main`
prints as one line (with the traceback only under ``-v``/``--log-level DEBUG``).
Exit status (the README's table): 0 done; 1 the application's code, the application, the
broker or an operation failed or refused; 2 what the command was given is wrong -- its
arguments, a missing app module, a setting (``StreamsConfigError``), the state directory;
3 no bootstrap address accepts a connection (``BrokerUnreachableError``).
Logs go to stderr; what a command *prints* (a description, the broker address) goes to
stdout, so scripts can read it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import platform_streams
from platform_streams.cli_app_loader import (
    APP_CODE_FAILED,
    BROKER_UNREACHABLE,
    USAGE_OR_CONFIG,
    CliError,
    add_app_argument,
    load_app,
)
from platform_streams.cli_apps import add_apps_arguments, run_apps
from platform_streams.cli_records import (
    add_consume_arguments,
    add_produce_arguments,
    run_consume,
    run_produce,
)
from platform_streams.cli_run import add_run_arguments, run_command
from platform_streams.config.secret_keys import redact
from platform_streams.errors import BrokerUnreachableError, StreamsConfigError, StreamsError
from platform_streams.ops.acl_commands import add_acls_arguments, run_acls
from platform_streams.ops.cli_commands import add_reset_arguments, add_topics_arguments, run_reset, run_topics
from platform_streams.ops.dlq_commands import add_dlq_arguments, run_dlq
from platform_streams.ops.gate_commands import add_diff_arguments, run_diff
from platform_streams.ops.group_commands import add_groups_arguments, run_groups
from platform_streams.ops.shadow_commands import add_shadow_replay_arguments, run_shadow_replay
from platform_streams.ops.spark_commands import (
    add_backfill_arguments,
    add_snapshot_arguments,
    run_backfill,
    run_snapshot,
)

__all__ = ["COMMANDS", "Command", "build_parser", "main"]

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_LOG_FORMAT = "%(asctime)s %(levelname)s [pid %(process)d] %(name)s: %(message)s"


@dataclass(frozen=True)
class Command:
    """One subcommand: ``add_arguments(parser)`` declares it, ``run(args)`` returns the exit status."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _describe(args: argparse.Namespace) -> int:
    print(load_app(args.app).topology.describe(), end="", flush=True)
    return 0


def _broker_arguments(parser: argparse.ArgumentParser) -> None:
    from platform_streams.dev.brokers import DEFAULT_LOCAL_BROKER, LOCAL_BROKER_KINDS

    parser.add_argument(
        "--broker",
        choices=tuple(LOCAL_BROKER_KINDS),
        default=DEFAULT_LOCAL_BROKER,
        help="; ".join(f"{kind}: {what}" for kind, what in LOCAL_BROKER_KINDS.items()),
    )
    parser.add_argument(
        "--port", type=int, default=9092, help="listening port (default 9092; 0 picks a free one)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="listening address (default 127.0.0.1)")
    parser.add_argument(
        "--log-file", default=None, help="where the broker's own output goes (default: a temp file)"
    )


def _broker(args: argparse.Namespace) -> int:
    from platform_streams.dev.brokers import run_local_broker_forever

    run_local_broker_forever(args.broker, args.port or None, args.host, args.log_file)
    return 0


COMMANDS: tuple[Command, ...] = (
    Command("run", "run an application until SIGTERM/Ctrl-C", add_run_arguments, run_command),
    Command("describe", "print an application's topology description", add_app_argument, _describe),
    Command(
        "topics",
        "plan, create, validate or delete an application's internal topics",
        add_topics_arguments,
        run_topics,
    ),
    Command(
        "reset",
        "reset an application to reprocess its input (stopped applications only)",
        add_reset_arguments,
        run_reset,
    ),
    Command(
        "groups",
        "describe an application's group (streams groups too): state, epochs, members, tasks, offsets",
        add_groups_arguments,
        run_groups,
    ),
    Command("dlq", "replay dead-lettered records after a fix (exactly once)", add_dlq_arguments, run_dlq),
    Command(
        "diff",
        "the deploy gate: classify a topology change against the deployed one (exit 1: incompatible)",
        add_diff_arguments,
        run_diff,
    ),
    Command(
        "acls",
        "print the ACLs an application and its tools need (kafka-acls terms), or --check a cluster's",
        add_acls_arguments,
        run_acls,
    ),
    Command(
        "apps",
        "list installed app plugins, describe one, validate a config against its model",
        add_apps_arguments,
        run_apps,
    ),
    Command(
        "snapshot",
        "create (on Spark) or list state snapshots that workers restore from",
        add_snapshot_arguments,
        run_snapshot,
    ),
    Command(
        "backfill",
        "run an application's topology over historical input on Spark",
        add_backfill_arguments,
        run_backfill,
    ),
    Command(
        "shadow-replay",
        "run a candidate topology over a range of the real input on Spark and diff its output",
        add_shadow_replay_arguments,
        run_shadow_replay,
    ),
    Command(
        "produce",
        "send stdin's key<TAB>value lines to a topic (partitioned as Kafka Streams expects)",
        add_produce_arguments,
        run_produce,
    ),
    Command(
        "consume",
        "print a topic's records as key<TAB>value lines (committed records; no group)",
        add_consume_arguments,
        run_consume,
    ),
    Command(
        "broker",
        "run a local broker (the embedded one, or another with --broker) until SIGTERM/Ctrl-C",
        _broker_arguments,
        _broker,
    ),
)


def _add_logging_options(parser: argparse.ArgumentParser, *, top_level: bool) -> None:
    # The same options on the main parser and on every subcommand, so they may come before
    # or after the subcommand name; subcommands only set them when given (SUPPRESS), so a
    # subcommand's unset option does not hide the main parser's.
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=False if top_level else argparse.SUPPRESS,
        help="debug logging and tracebacks on errors",
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=_LOG_LEVELS,
        default=None if top_level else argparse.SUPPRESS,
        help="log level on stderr (default INFO; DEBUG with -v)",
    )


def _installed_version() -> str:
    """The installed distribution's version (what pip reports), else the package's own."""
    try:
        return importlib.metadata.version("platform-streams")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
        return platform_streams.__version__


def build_parser(commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="platform-streams", description="Kafka Streams, rebuilt in Python: run and inspect applications."
    )
    _add_logging_options(parser, top_level=True)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_installed_version()}")
    subparsers = parser.add_subparsers(dest="command_name", metavar="COMMAND", required=True)
    for command in commands:
        sub = subparsers.add_parser(command.name, help=command.help, description=command.help)
        command.add_arguments(sub)
        _add_logging_options(sub, top_level=False)
        sub.set_defaults(command=command)
    return parser


def _without_traceback(record: logging.LogRecord) -> bool:
    """Log filter: keep the message, drop the traceback (shown only at DEBUG)."""
    record.exc_info, record.exc_text = None, None
    return True


class _RedactingFormatter(logging.Formatter):
    """Every log line, traceback included, with the credentials the settings held masked: with
    the error line in :func:`main`, the only ways this command writes text to stderr, so no
    error path -- present or future -- can print a secret's value (see config/secret_keys.py)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def configure_logging(level: str) -> None:
    """Logs to stderr at ``level``; tracebacks in log records only at DEBUG."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter(_LOG_FORMAT))
    if level != "DEBUG":
        handler.addFilter(_without_traceback)
    logging.basicConfig(level=level, handlers=[handler])  # no-op if the host configured logging


def _exit_code(exc: StreamsError) -> int:
    """2 for a configuration error (a setting, the state directory), 3 for an unreachable
    broker, 1 for any other failure."""
    if isinstance(exc, BrokerUnreachableError):
        return BROKER_UNREACHABLE
    return USAGE_OR_CONFIG if isinstance(exc, StreamsConfigError) else APP_CODE_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``platform-streams`` script; returns the exit status."""
    args = build_parser().parse_args(argv)
    args.log_level = args.log_level or ("DEBUG" if args.verbose else "INFO")
    debug = args.log_level == "DEBUG"
    configure_logging(args.log_level)
    command: Command = args.command
    try:
        return command.run(args)
    except (CliError, StreamsError) as exc:
        code = exc.exit_code if isinstance(exc, CliError) else _exit_code(exc)
        if debug:
            logging.getLogger("platform_streams.cli").exception("%s failed", command.name)
        print(redact(f"platform-streams {command.name}: error: {exc}"), file=sys.stderr, flush=True)
        return code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
