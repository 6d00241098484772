"""A flushed RocksDB store survives a crash in every column family (segments included).

The soak run (docs/soak/README.md) found windowed aggregates that, after a worker was
killed with -9, emitted only the records read after the restart: ``RocksDBBackend.flush``
flushed the default column family only (``Rdict.flush`` flushes "the current column
family"), the WAL is off (the changelog is the log), so the window segments' memtables were
lost while the checkpoint written after the flush said they were on disk. The crash is a
real one: a child process writes, flushes and leaves with ``os._exit`` (no close, no
destructor flush), as kill -9 would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from platform_streams.state.rocksdb import RocksDBBackend

WRITER = """
import os, sys
from platform_streams.state.rocksdb import RocksDBBackend
backend = RocksDBBackend("store")
backend.open(__import__("pathlib").Path(sys.argv[1]))
backend.default.put(b"stream-time", b"1")
backend.column("segment-1").put(b"window", b"aggregate")
backend.column("segment-2").put(b"other", b"value")
backend.flush()
os._exit(0)
"""


def test_a_flush_persists_every_column_family_through_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "db"
    subprocess.run([sys.executable, "-c", WRITER, str(path)], check=True, timeout=60)
    backend = RocksDBBackend("store")
    backend.open(path)
    try:
        assert backend.default.get(b"stream-time") == b"1"
        assert sorted(backend.column_names()) == ["segment-1", "segment-2"]
        assert backend.column("segment-1").get(b"window") == b"aggregate"
        assert backend.column("segment-2").get(b"other") == b"value"
    finally:
        backend.close()
