"""The ``.checkpoint`` file: changelog offsets that a task's persistent stores reflect.

Kafka Streams' ``OffsetCheckpoint`` text format, so a state directory can be inspected
with the same habits (and tools)::

    0                       <- format version
    2                       <- number of entries
    app-counts-changelog 3 1041
    app-sums-changelog 3 77

Offset meaning (as in Kafka Streams since 2.6): the offset of the *last changelog record
reflected in the store*; restoration resumes at ``offset + 1``. Offsets are not dense
(transaction markers), so ``offset + 1`` may be a marker: the consumer skips it.

Writes are atomic (temp file, fsync, rename, fsync of the directory): a crash leaves the
old file or the new one, never half of one. A file that does not parse raises
:class:`CheckpointFormatError`; the state manager then distrusts the local state.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from platform_streams.state.private_files import make_private_dirs, write_private

__all__ = ["CHECKPOINT_FILE_NAME", "CheckpointFormatError", "OffsetCheckpoint"]

log = logging.getLogger(__name__)

CHECKPOINT_FILE_NAME = ".checkpoint"
_VERSION = 0


class CheckpointFormatError(ValueError):
    """The checkpoint file exists but is not a valid checkpoint."""


class OffsetCheckpoint:
    """Reads and atomically writes one checkpoint file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[tuple[str, int], int]:
        """The offsets in the file; empty if there is no file. Raises on a malformed file."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except UnicodeDecodeError as exc:
            raise CheckpointFormatError(f"{self.path}: not text ({exc})") from None
        lines = text.splitlines()
        if len(lines) < 2:
            raise CheckpointFormatError(f"{self.path}: truncated (no version/count lines)")
        try:
            version = int(lines[0].strip())
            count = int(lines[1].strip())
        except ValueError:
            raise CheckpointFormatError(f"{self.path}: bad header {lines[:2]!r}") from None
        if version != _VERSION:
            raise CheckpointFormatError(f"{self.path}: unknown version {version}")
        entries = [line for line in lines[2:] if line.strip()]
        if len(entries) != count:
            raise CheckpointFormatError(f"{self.path}: header says {count} entries, found {len(entries)}")
        offsets: dict[tuple[str, int], int] = {}
        for line in entries:
            parts = line.split()
            if len(parts) != 3:
                raise CheckpointFormatError(f"{self.path}: malformed entry {line!r}")
            topic, partition_text, offset_text = parts
            try:
                partition, offset = int(partition_text), int(offset_text)
            except ValueError:
                raise CheckpointFormatError(f"{self.path}: malformed entry {line!r}") from None
            if offset < 0:
                # Kafka Streams ignores negative offsets (an unknown position) the same way.
                log.warning("%s: ignoring negative offset for %s-%d", self.path, topic, partition)
                continue
            offsets[(topic, partition)] = offset
        return offsets

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Replace the file with ``offsets`` atomically."""
        lines = [str(_VERSION), str(len(offsets))]
        for (topic, partition), offset in sorted(offsets.items()):
            if not topic or any(c.isspace() for c in topic):
                raise ValueError(f"invalid topic name in checkpoint: {topic!r}")
            lines.append(f"{topic} {partition} {offset}")
        data = ("\n".join(lines) + "\n").encode("utf-8")
        make_private_dirs(self.path.parent)
        write_private(self.path, data, fsync=True)
        _fsync_dir(self.path.parent)

    def delete(self) -> None:
        """Remove the file (no error if it is missing)."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        else:
            _fsync_dir(self.path.parent)

    def exists(self) -> bool:
        return self.path.exists()


def _fsync_dir(directory: Path) -> None:
    """Persist a rename/unlink in ``directory`` (best effort where directories can't be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
