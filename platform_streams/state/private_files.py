"""State directories and files that only their owner can read: directories 0700, files 0600.

Why: local state holds the application's data (store contents, changelog positions, the
process id that fences zombies). On a shared host nobody else should read it or, worse,
write into it. Modes are given explicitly instead of relying on the umask: a process
started with ``umask 022`` (the usual default) must not produce world-readable state.

What is tightened: directories this module creates are 0700. An existing application
directory (``<state_dir>/<application_id>``) with a wider mode is tightened to 0700 with
a warning (it is ours: we created it, or an older version did). The ``state_dir`` itself
is only created 0700 when missing, never changed when it exists: it may be a volume mount
or a directory the operator manages (``/var/lib/...``), whose mode is theirs.
RocksDB creates its own files with the process umask; they sit in 0700 directories that
nobody else can enter.

Failures (``state_dir`` is a file, not writable, on a read-only volume) raise
:class:`StreamsConfigError` naming the ``state_dir`` setting, so the CLI reports one line
and exits 2 instead of a traceback from deep inside the runtime.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from platform_streams.errors import StreamsConfigError

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "app_state_dir",
    "ensure_app_dir",
    "make_private_dirs",
    "open_private",
    "unusable_state_dir",
    "write_private",
]

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600


def unusable_state_dir(path: Path, exc: OSError) -> StreamsConfigError:
    """The one-line error for local state at ``path`` that cannot be created, read or written."""
    reason = exc.strerror or str(exc)
    return StreamsConfigError(f"state_dir: cannot use {str(path)!r} for local state: {reason}")


_unusable = unusable_state_dir


def app_state_dir(state_dir: Path, application_id: str) -> Path:
    """``<state_dir>/<application_id>``: the application's directory, refused unless it is a
    directory *inside* ``state_dir``.

    The model validates application ids, but this is the path that gets locked, chmod-ed and,
    on reset or ``cleanup()``, deleted: an id of ``.`` or ``..`` (or one with a separator)
    would make it ``state_dir`` itself, its parent or another application's directory, so the
    check is repeated where the path is made, whatever built the config.
    """
    base = Path(os.path.normpath(state_dir))
    path = Path(state_dir) / application_id
    separators = {os.sep, os.altsep or os.sep, "\0"}
    if (
        application_id in ("", ".", "..")
        or any(sep in application_id for sep in separators)
        or Path(os.path.normpath(path)).parent != base
    ):
        raise StreamsConfigError(
            f"application_id: {application_id!r} would put local state outside state_dir {str(state_dir)!r}"
        )
    return path


def make_private_dirs(path: Path) -> Path:
    """Create ``path`` and its missing parents with mode 0700; existing ones are left alone."""
    missing: list[Path] = []
    current = path
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    try:
        for directory in reversed(missing):
            try:
                directory.mkdir(mode=DIR_MODE)
            except FileExistsError:
                if not directory.is_dir():
                    raise
                continue  # made concurrently (another worker): keep its mode
            os.chmod(directory, DIR_MODE)  # mkdir's mode is filtered by the umask
        if not path.is_dir():
            raise NotADirectoryError(20, "not a directory", str(path))
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "not writable", str(path))
    except OSError as exc:
        raise _unusable(path, exc) from exc
    return path


def ensure_app_dir(path: Path) -> Path:
    """Create ``<state_dir>/<application_id>`` 0700 (parents too); tighten it if it is wider."""
    make_private_dirs(path)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        try:
            os.chmod(path, DIR_MODE)
        except OSError as exc:
            log.warning("state directory %s has mode %o and cannot be made 0700: %s", path, mode, exc)
        else:
            log.warning(
                "state directory %s had mode %o: tightened to 0700 (local state is private)", path, mode
            )
    return path


def open_private(path: Path, flags: int) -> int:
    """``os.open`` a file that is created 0600 (the umask cannot widen it); returns the fd."""
    fd = os.open(path, flags | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def write_private(path: Path, data: bytes, *, fsync: bool = False) -> None:
    """Replace ``path`` atomically (temporary file + rename) with a 0600 file holding ``data``."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        if fsync:
            handle.flush()
            os.fsync(handle.fileno())
    os.replace(tmp, path)
