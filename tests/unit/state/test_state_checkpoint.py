"""The ``.checkpoint`` file: Kafka Streams' format, atomic writes, malformed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_streams.state import CheckpointFormatError, OffsetCheckpoint


def test_round_trip_in_kafka_streams_format(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpoint(tmp_path / ".checkpoint")
    assert checkpoint.read() == {}
    checkpoint.write({("app-b-changelog", 3): 77, ("app-a-changelog", 3): 1041})
    assert (tmp_path / ".checkpoint").read_text() == "0\n2\napp-a-changelog 3 1041\napp-b-changelog 3 77\n"
    assert checkpoint.read() == {("app-a-changelog", 3): 1041, ("app-b-changelog", 3): 77}
    assert not (tmp_path / ".checkpoint.tmp").exists()
    checkpoint.write({})
    assert checkpoint.read() == {}
    checkpoint.delete()
    checkpoint.delete()
    assert not checkpoint.exists()


@pytest.mark.parametrize(
    "content",
    [
        "",
        "0\n",
        "1\n0\n",
        "x\n1\nt 0 1\n",
        "0\n2\nt 0 1\n",
        "0\n1\nt 0\n",
        "0\n1\nt zero 1\n",
    ],
)
def test_malformed_files_raise(tmp_path: Path, content: str) -> None:
    (tmp_path / ".checkpoint").write_text(content)
    with pytest.raises(CheckpointFormatError):
        OffsetCheckpoint(tmp_path / ".checkpoint").read()


def test_binary_garbage_raises(tmp_path: Path) -> None:
    (tmp_path / ".checkpoint").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CheckpointFormatError):
        OffsetCheckpoint(tmp_path / ".checkpoint").read()


def test_negative_offsets_are_ignored(tmp_path: Path) -> None:
    (tmp_path / ".checkpoint").write_text("0\n2\nt 0 -1\nt 1 5\n")
    assert OffsetCheckpoint(tmp_path / ".checkpoint").read() == {("t", 1): 5}


def test_topic_names_with_spaces_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        OffsetCheckpoint(tmp_path / ".checkpoint").write({("bad topic", 0): 1})
