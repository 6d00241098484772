"""The session's Schema Registry (Apicurio, tests/support/schema_registry.py), started once."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.support.schema_registry import running_registry


@pytest.fixture(scope="session")
def registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    started = time.monotonic()
    with running_registry(tmp_path_factory.mktemp("schema-registry") / "registry.log") as url:
        yield url
    print(f"\nschema registry session: {time.monotonic() - started:.1f}s")
