"""Snapshots in an S3-compatible object store (``s3://bucket/prefix``), through obstore.

Why obstore (the Python binding of the Rust ``object_store`` crate, maintained by the
Apache Arrow project) rather than fsspec + s3fs or boto3:

* its ``put`` is atomic by contract (a single PUT, or a multipart upload that becomes
  visible only when completed), which is the one property the snapshot layout relies on
  (the manifest is written last, so an object is never seen half-written);
* one self-contained wheel with no Python dependencies: s3fs pins aiobotocore, which pins
  botocore exactly, and that conflicts with anything else in a worker image using boto3;
* large SST files are uploaded in parallel parts and downloaded as a stream, without
  writing that code ourselves.

Settings come from the usual AWS environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``/``AWS_DEFAULT_REGION``,
``AWS_ENDPOINT_URL`` for a store other than AWS) or from ``options`` (obstore's S3 config
keys). Plain ``http://`` endpoints (an in-cluster gateway) are allowed when the endpoint
says so. Requests use path-style addressing unless ``virtual_hosted_style_request`` is set,
which every S3-compatible server understands.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import obstore
from obstore.store import S3Store

from platform_streams.state.snapshots import SnapshotStore

__all__ = ["S3SnapshotStore"]

_DELETE_BATCH = 500
#: environment variables naming the endpoint, in the order the AWS SDKs read them
_ENDPOINT_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT")


class S3SnapshotStore(SnapshotStore):
    """Objects under ``s3://bucket/prefix``; keys are relative to the prefix."""

    def __init__(self, url: str, options: Mapping[str, Any] | None = None) -> None:
        parsed = urlparse(url)
        if parsed.scheme not in ("s3", "s3a") or not parsed.netloc:
            raise ValueError(f"snapshot location {url!r}: expected s3://bucket[/prefix]")
        self.bucket = parsed.netloc
        self._url, self._options = url, dict(options or {})
        self.prefix = parsed.path.strip("/")
        config: dict[str, Any] = dict(options or {})
        endpoint = config.get("endpoint") or next(
            (os.environ[name] for name in _ENDPOINT_ENV if os.environ.get(name)), None
        )
        if endpoint:
            config["endpoint"] = endpoint
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region and "region" not in config:
            config["region"] = region
        client: dict[str, Any] = {}
        if endpoint and str(endpoint).startswith("http://"):
            client["allow_http"] = True
        self._store = S3Store(
            self.bucket,
            prefix=self.prefix or None,
            config=config,  # type: ignore[arg-type]  # keys checked by obstore at runtime
            client_options=client or None,  # type: ignore[arg-type]
        )
        #: the endpoint, region and path style, for Spark's s3a writer (never credentials)
        self.endpoint: str | None = str(endpoint) if endpoint else None
        self.region: str | None = str(config["region"]) if config.get("region") else None
        # obstore (object_store) addresses buckets path-style unless told otherwise; s3a follows it
        virtual = config.get("virtual_hosted_style_request")
        virtual = virtual or os.environ.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST")
        self.path_style: bool = str(virtual or "false").lower() not in ("true", "1", "yes")

    def __repr__(self) -> str:
        return f"S3SnapshotStore('s3://{self.bucket}/{self.prefix}')"

    def __reduce__(self) -> tuple[Any, ...]:
        # Shipped to Spark executors as its URL and explicit options: each executor reads
        # credentials from its own environment (an instance role, the pod's secret), so they
        # never travel inside a job's closures.
        return (S3SnapshotStore, (self._url, self._options))

    def put_file(self, key: str, source: Path) -> None:
        obstore.put(self._store, key, Path(source))

    def get_file(self, key: str, destination: Path) -> None:
        destination.parent.mkdir(parents=True, exist_ok=True)
        result = obstore.get(self._store, key)  # FileNotFoundError when absent
        with open(destination, "wb") as handle:
            for chunk in result.stream(min_chunk_size=8 * 1024 * 1024):
                handle.write(chunk)

    def put_bytes(self, key: str, data: bytes) -> None:
        obstore.put(self._store, key, data)

    def get_bytes(self, key: str) -> bytes:
        return bytes(obstore.get(self._store, key).bytes())

    def list_keys(self, prefix: str) -> list[str]:
        keys: list[str] = []
        for batch in obstore.list(self._store, prefix.rstrip("/") or None):
            keys.extend(str(meta["path"]) for meta in batch)
        wanted = prefix.rstrip("/")
        return sorted(k for k in keys if not wanted or k == wanted or k.startswith(wanted + "/"))

    def list_modified(self, prefix: str) -> dict[str, float]:
        wanted = prefix.rstrip("/")
        out: dict[str, float] = {}
        for batch in obstore.list(self._store, wanted or None):
            for meta in batch:
                key = str(meta["path"])
                if not wanted or key == wanted or key.startswith(wanted + "/"):
                    out[key] = meta["last_modified"].timestamp()
        return out

    def list_sizes(self, prefix: str) -> dict[str, int | None]:
        wanted = prefix.rstrip("/")
        out: dict[str, int | None] = {}
        for batch in obstore.list(self._store, wanted or None):
            for meta in batch:
                key = str(meta["path"])
                if not wanted or key == wanted or key.startswith(wanted + "/"):
                    out[key] = int(meta["size"])
        return out

    def delete_prefix(self, prefix: str) -> None:
        if not prefix.strip("/"):
            raise ValueError("refusing to delete the whole snapshot store")
        keys = self.list_keys(prefix)
        for start in range(0, len(keys), _DELETE_BATCH):
            obstore.delete(self._store, keys[start : start + _DELETE_BATCH])

    def uri(self, key: str) -> str:
        # s3a: the scheme Hadoop's S3 connector (Spark's writers) registers.
        path = "/".join(p for p in (self.prefix, key.strip("/")) if p)
        return f"s3a://{self.bucket}/{path}"
