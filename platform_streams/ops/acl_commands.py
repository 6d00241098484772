"""``platform-streams acls APP``: print the ACLs an application needs, or check a cluster's.

::

    platform-streams acls MODULE:FACTORY [--config F] [--set k=v] [--principal User:NAME]
        [--sets application,reset,topics,spark,dagster] [--isolate-from APP_ID ...] [--check]

Without ``--check`` nothing is contacted: the ACLs are printed as ``kafka-acls.sh --add``
lines. With ``--check`` the cluster's ACLs of the principal are listed (the settings'
principal needs DESCRIBE on the cluster) and every missing one is printed; exit 1 if any.
"""

from __future__ import annotations

import argparse

from platform_streams.cli_app_loader import (
    CliError,
    add_app_argument,
    add_config_arguments,
    load_app,
    load_config,
)
from platform_streams.kafka.acl_admin import SecurityAdmin
from platform_streams.ops.acls import SETS, AclSet, acl_sets, check_acls, isolation_acls, render

__all__ = ["add_acls_arguments", "run_acls"]


def add_acls_arguments(parser: argparse.ArgumentParser) -> None:
    add_app_argument(parser)
    add_config_arguments(parser)
    parser.add_argument(
        "--principal", help="the principal the ACLs are for (default User:<application.id>)"
    )
    parser.add_argument(
        "--sets",
        default=",".join(SETS),
        help=f"comma-separated sets to print or check (default all: {','.join(SETS)})",
    )
    parser.add_argument(
        "--isolate-from",
        dest="isolate_from",
        action="append",
        default=[],
        metavar="APP_ID",
        help="another application id starting with this one's followed by '-': add DENY rules for it",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare with the cluster's ACLs of the principal (exit 1 if any is missing)",
    )


def _selected(args: argparse.Namespace) -> list[AclSet]:
    app = load_app(args.app)
    config = load_config(args.config, args.overrides, app.settings)
    names = [n.strip() for n in args.sets.split(",") if n.strip()]
    unknown = sorted(set(names) - set(SETS))
    if unknown:
        raise CliError(f"--sets: unknown set(s) {', '.join(unknown)}; known: {', '.join(SETS)}")
    sets = acl_sets(app.topology, config, args.principal)
    chosen = [sets[n] for n in names]
    if args.isolate_from:
        chosen.append(isolation_acls(config.application_id, args.isolate_from, args.principal))
    args.bootstrap = config.bootstrap_servers
    args.admin_conf = config.admin_configs()
    return chosen


def run_acls(args: argparse.Namespace) -> int:
    chosen = _selected(args)
    if not args.check:
        print(render(chosen, args.bootstrap), end="", flush=True)
        return 0
    required = [acl for acl_set in chosen for acl in acl_set.acls]
    principals = sorted({acl.principal for acl in required})
    admin = SecurityAdmin(args.admin_conf)
    present = [acl for principal in principals for acl in admin.describe_acls(principal)]
    result = check_acls(required, present)
    print(result.summary(), end="", flush=True)
    return 0 if result.ok else 1
