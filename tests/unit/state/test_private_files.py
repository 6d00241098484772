"""Local state is private: directories 0700, files 0600, whatever the umask."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from platform_streams.errors import StreamsConfigError
from platform_streams.state.checkpoint import OffsetCheckpoint
from platform_streams.state.private_files import ensure_app_dir, make_private_dirs, write_private


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """The usual 022 umask would leave new files 0644 and directories 0755."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_created_directories_are_0700_parents_included(tmp_path: Path) -> None:
    leaf = make_private_dirs(tmp_path / "state" / "app" / "0_1")
    assert [mode(p) for p in (tmp_path / "state", tmp_path / "state" / "app", leaf)] == [0o700] * 3


def test_an_existing_state_dir_keeps_its_mode_but_the_app_dir_is_tightened(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o755)
    os.chmod(state_dir, 0o755)
    (state_dir / "app").mkdir()
    os.chmod(state_dir / "app", 0o755)
    with caplog.at_level(logging.WARNING):
        ensure_app_dir(state_dir / "app")
    assert mode(state_dir) == 0o755  # may be a volume mount: the operator's
    assert mode(state_dir / "app") == 0o700
    assert "tightened to 0700" in caplog.text


def test_files_are_0600_new_or_replaced(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_text("old")
    os.chmod(target, 0o644)
    write_private(target, b"new")
    assert target.read_bytes() == b"new" and mode(target) == 0o600
    checkpoint = OffsetCheckpoint(tmp_path / "task" / ".checkpoint")
    checkpoint.write({("t", 0): 5})
    assert mode(checkpoint.path) == 0o600 and mode(checkpoint.path.parent) == 0o700
    assert not [p for p in tmp_path.rglob("*.tmp")]


@pytest.mark.parametrize("kind", ["a file", "cannot be created"])
def test_an_unusable_state_dir_names_the_setting(tmp_path: Path, kind: str) -> None:
    if kind == "a file":
        state_dir = tmp_path / "state"
        state_dir.write_text("not a directory")
    else:
        state_dir = Path("/proc/self/no-such-dir")
    with pytest.raises(StreamsConfigError, match=r"^state_dir: cannot use .* for local state: "):
        make_private_dirs(state_dir / "app")


@pytest.mark.parametrize("application_id", [".", "..", "", "a/b", "../x"])
def test_the_application_directory_is_never_outside_state_dir(tmp_path: Path, application_id: str) -> None:
    # a config built without validation (model_construct, an older caller) must still not make
    # state_dir itself, its parent or a sibling "the application's directory"
    from platform_streams.state.private_files import app_state_dir

    with pytest.raises(StreamsConfigError, match=r"^application_id: .* outside state_dir"):
        app_state_dir(tmp_path / "state", application_id)
    assert app_state_dir(tmp_path / "state", "orders-1.v2") == tmp_path / "state" / "orders-1.v2"
