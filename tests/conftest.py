"""Suite-wide fixtures: the broker every ``@pytest.mark.broker`` test talks to.

``bootstrap_servers`` is a real cluster when ``PLATFORM_STREAMS_BOOTSTRAP_SERVERS`` is set, and
otherwise one embedded Tansu broker started on a free port for the whole session (it
starts in ~0.2 s; tests isolate themselves with fresh topic and group names rather than
fresh brokers). The broker is started lazily, so unit-only runs never start it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Make ``tests.support`` importable however pytest is started (``pytest`` does not put
# the repository root on sys.path, ``python -m pytest`` does).
_REPO_ROOT = str(Path(__file__).resolve().parent.parent)
if _REPO_ROOT not in sys.path:
    sys.path.insert(0, _REPO_ROOT)

from platform_streams.config_sources import BOOTSTRAP_ENV, check_renamed_env  # noqa: E402
from platform_streams.kafka import EmbeddedBroker, KafkaAdmin  # noqa: E402

check_renamed_env(os.environ)  # the former name would silently test on the embedded broker


@pytest.fixture(scope="session")
def bootstrap_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``bootstrap.servers`` of the test broker (external, or embedded for the session)."""
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if external:
        yield external
        return
    log_path = tmp_path_factory.mktemp("broker") / "tansu.log"
    # kill_with_parent: a test run killed with -9 must not leave a broker behind.
    with EmbeddedBroker(log_path=log_path, kill_with_parent=True) as broker:
        yield broker.bootstrap_servers


@pytest.fixture(scope="session")
def admin(bootstrap_servers: str) -> Iterator[KafkaAdmin]:
    """A session-wide :class:`KafkaAdmin` on the test broker."""
    with KafkaAdmin({"bootstrap.servers": bootstrap_servers}) as kafka_admin:
        yield kafka_admin
