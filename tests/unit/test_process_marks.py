"""platform_streams/dev/servers/processes.py finds what a test started even after it left the test's process
tree (own session, parent gone), as the demo's Dagster processes and workers do, and stops it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from platform_streams.dev.servers.processes import kill_marked, marked_env, marked_pids, new_mark

# a parent that starts a grandchild in its own session, prints its pid and exits: the
# grandchild is re-parented to init, out of reach of the test's Popen and process group
_ORPHAN = (
    "import subprocess, sys; "
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
    "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True); "
    "print(p.pid, flush=True)"
)


def test_a_marked_orphan_in_its_own_session_is_found_and_stopped() -> None:
    mark = new_mark()
    done = subprocess.run(
        [sys.executable, "-c", _ORPHAN], env=marked_env(os.environ, mark), capture_output=True, text=True
    )
    orphan = int(done.stdout.strip())
    try:
        assert marked_pids(mark) == [orphan]
        assert marked_pids(new_mark()) == []  # another test's mark finds nothing of this one
        assert kill_marked(mark, grace_s=30) == [orphan]
        assert marked_pids(mark) == []
    finally:
        deadline = time.monotonic() + 10
        while marked_pids(mark) and time.monotonic() < deadline:
            os.kill(orphan, 9)
            time.sleep(0.1)
