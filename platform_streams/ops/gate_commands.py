"""``platform-streams diff MODULE:FACTORY --against deployed``: the deploy gate on the command line.

::

    platform-streams diff MODULE:FACTORY [--config FILE] [--set KEY=VALUE ...]
        [--against deployed|MANIFEST.json] [--allow-incompatible] [--json]

Compares the candidate topology (the factory's, with these settings' application id) with
the deployed one -- the manifest the running application recorded on its control topic
(:mod:`platform_streams.ops.deployed_topology`), or a manifest file -- and prints the
classification, one line per affected store or topic with its fix. Exit status: 0 when the
change is compatible or needs a reset of named stores (printed), or is incompatible but
``--allow-incompatible`` was given; 1 when it is incompatible (the deploy must stop). The
Helm chart's pre-upgrade hook runs exactly this command.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from platform_streams.cli_app_loader import (
    APP_CODE_FAILED,
    CliError,
    add_app_argument,
    add_config_arguments,
    load_app,
    load_config,
)
from platform_streams.ops.deployed_topology import DeployedTopology, gate_topology
from platform_streams.ops.topology_diff import Change
from platform_streams.topology.manifest import topology_manifest

__all__ = ["add_diff_arguments", "run_diff"]

DEPLOYED = "deployed"


def add_diff_arguments(parser: argparse.ArgumentParser) -> None:
    add_app_argument(parser)
    add_config_arguments(parser)
    parser.add_argument(
        "--against",
        default=DEPLOYED,
        metavar="deployed|FILE",
        help="'deployed' (default): the topology the running application recorded on its control "
        "topic; or a manifest JSON file (what --json printed as 'candidate_manifest')",
    )
    parser.add_argument(
        "--allow-incompatible",
        action="store_true",
        help="exit 0 on an incompatible change (state is orphaned or misread: you accept it)",
    )
    parser.add_argument("--json", action="store_true", help="print the classification as JSON")


def _manifest_file(path: str) -> DeployedTopology:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CliError(f"--against: cannot read a manifest from {path!r}: {exc}") from exc
    if not isinstance(data, dict) or "fingerprint" not in data:
        raise CliError(f"--against: {path!r} holds no topology manifest (no 'fingerprint')")
    return DeployedTopology(data, f"the manifest file {path}")


def run_diff(args: argparse.Namespace) -> int:
    app = load_app(args.app)
    config = load_config(args.config, args.overrides, app.settings)
    given = None if args.against == DEPLOYED else _manifest_file(args.against)
    diff, deployed = gate_topology(app.topology, config, deployed=given)
    refused = diff.change is Change.INCOMPATIBLE and not args.allow_incompatible
    if args.json:
        out = {**diff.to_json(), "deployed_source": deployed.source, "refused": refused}
        out["candidate_manifest"] = topology_manifest(app.topology)
        print(json.dumps(out, indent=2))
    else:
        print(f"application {config.application_id}: deployed = {deployed.source}")
        print(*diff.lines(), sep="\n")
        if diff.change is Change.INCOMPATIBLE:
            print(
                "ALLOWED by --allow-incompatible: the affected state is given up"
                if args.allow_incompatible
                else "REFUSED: deploy only after a fix above, or with --allow-incompatible"
            )
    return APP_CODE_FAILED if refused else 0
