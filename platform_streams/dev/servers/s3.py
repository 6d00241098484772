"""A real S3-compatible server for the tests: versitygw (Apache-2.0) on its POSIX backend.

The binary is built once with ``go install`` from the Go module proxy into
``~/.cache/platform-streams/versitygw/<version>/`` (about six minutes on two cores the first
time, then reused); ``make s3-server`` does the same ahead of a test run. The server keeps
each bucket as a directory under a temporary root, so it needs no cloud and no disk image.

Command line (installs, then prints the binary's path): ``python -m platform_streams.dev.servers.s3``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from platform_streams.dev.servers.processes import stop_process

VERSITYGW_VERSION = "v1.8.0"
VERSITYGW_MODULE = "github.com/versity/versitygw/cmd/versitygw"
REGION = "us-east-1"


def versitygw_binary() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "platform-streams" / "versitygw" / VERSITYGW_VERSION / "versitygw"


def install_versitygw(timeout_s: float = 900.0) -> Path:
    """The cached binary, built with ``go install`` first if it is not there yet."""
    binary = versitygw_binary()
    if binary.is_file():
        return binary
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("versitygw is not cached and Go is not installed: cannot build the S3 server")
    binary.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOBIN": str(binary.parent), "CGO_ENABLED": os.environ.get("CGO_ENABLED", "0")}
    started = time.monotonic()
    done = subprocess.run(
        [go, "install", f"{VERSITYGW_MODULE}@{VERSITYGW_VERSION}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0 or not binary.is_file():
        raise RuntimeError(f"go install {VERSITYGW_MODULE}@{VERSITYGW_VERSION} failed: {done.stderr[-2000:]}")
    print(f"built versitygw {VERSITYGW_VERSION} in {time.monotonic() - started:.0f}s", file=sys.stderr)
    return binary


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class S3Server:
    """A running gateway: its endpoint, credentials and the directory behind its buckets."""

    endpoint: str
    access_key: str
    secret_key: str
    root: Path
    process: subprocess.Popen[bytes]

    def create_bucket(self, name: str) -> None:
        # The POSIX backend serves every top-level directory as a bucket.
        (self.root / name).mkdir(exist_ok=True)

    def env(self) -> dict[str, str]:
        """The usual AWS settings a client reads to reach this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": REGION,
        }

    def stop(self) -> None:
        stop_process(self.process)


def start_s3_server(root: Path, log_path: Path, timeout_s: float = 30.0) -> S3Server:
    binary = install_versitygw()
    root.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    access, secret = f"ps{secrets.token_hex(4)}", secrets.token_hex(16)
    env = {**os.environ, "ROOT_ACCESS_KEY_ID": access, "ROOT_SECRET_ACCESS_KEY": secret}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(binary), "--port", f"127.0.0.1:{port}", "--region", REGION, "--quiet", "posix", str(root)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"versitygw exited with {process.returncode}: {log_path.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return S3Server(f"http://127.0.0.1:{port}", access, secret, root, process)
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"versitygw did not listen on port {port} within {timeout_s:.0f}s")


if __name__ == "__main__":
    print(install_versitygw())
