"""Test support: a REAL S3-protocol server (moto in server mode) in a subprocess.

* ``MotoServer``: runs ``python -m moto.server`` on a free port of 127.0.0.1 (a separate
  process speaking S3 over HTTP, so that pyarrow's AWS SDK client sends exactly the
  requests it sends to a cloud bucket: signed ``ListObjectsV2``, ``HEAD``, ranged
  ``GET``); ``auth=True`` starts it with IAM authentication on (moto's
  ``INITIAL_NO_AUTH_ACTION_COUNT=0``), where unknown credentials are refused.
  ``options`` are the Spark options (Hadoop's ``fs.s3a.*`` keys) that reach it;
  ``filesystem()`` a pyarrow ``S3FileSystem`` on it; ``upload(local_dir, "bucket/prefix")``
  copies a directory tree there; ``recording()`` records the requests the server gets
  (moto's recorder API: method, path, ``Range`` header), from any process (the Spark
  executors' Python workers included).
* ``moto_s3`` (session scope): one server for the tests, stopped at the end.

Thread-safety: test-process only; recordings are global to the server (tests run one at
a time).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import NamedTuple

import pytest

ACCESS_KEY = "testing-access-key"
SECRET_KEY = "testing-secret-key"
REGION = "us-east-1"


class Request(NamedTuple):
    """One request the server got: method, path (``/bucket/key``) and Range header."""
    method: str
    path: str
    range: str | None

    @property
    def range_bytes(self) -> int | None:
        """The number of bytes a ``Range: bytes=a-b`` asks for (None: no Range)."""
        if not self.range:
            return None
        a, b = self.range.split("=", 1)[1].split("-")
        return int(b) - int(a) + 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoServer:
    def __init__(self, workdir: Path, *, auth: bool = False) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.auth = auth
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def options(self) -> dict[str, str]:
        """The Spark options (fs.s3a.*) that reach this server."""
        return {"fs.s3a.endpoint": self.endpoint, "fs.s3a.access.key": ACCESS_KEY,
                "fs.s3a.secret.key": SECRET_KEY, "fs.s3a.endpoint.region": REGION,
                "fs.s3a.path.style.access": "true"}

    def start(self, timeout: float = 60.0) -> MotoServer:
        env = dict(os.environ)
        if self.auth:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
        else:
            env.pop("INITIAL_NO_AUTH_ACTION_COUNT", None)
        self.log_path = self.workdir / f"moto-{self.port}.log"
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                          "-p", str(self.port)], stdout=out, stderr=subprocess.STDOUT,
                                         env=env, cwd=self.workdir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto server exited: {self.log_path.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2).read()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto server not ready after {timeout}s: {self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def filesystem(self, **overrides):
        import pyarrow.fs as pafs
        kwargs = dict(access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION,
                      endpoint_override=f"127.0.0.1:{self.port}", scheme="http", allow_bucket_creation=True)
        kwargs.update(overrides)
        return pafs.S3FileSystem(**kwargs)

    def upload(self, local_dir: Path, target: str) -> str:
        """Copy ``local_dir``'s tree to ``bucket/prefix`` (the bucket is created); returns
        the ``s3://`` URI."""
        import pyarrow.fs as pafs
        fs = self.filesystem()
        bucket = target.split("/", 1)[0]
        fs.create_dir(bucket)
        pafs.copy_files(str(local_dir), target, source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=fs)
        return f"s3://{target}"

    def _api(self, action: str, method: str = "POST") -> bytes:
        req = urllib.request.Request(f"{self.endpoint}/moto-api/recorder/{action}", method=method)
        return urllib.request.urlopen(req, timeout=30).read()

    @contextlib.contextmanager
    def recording(self):
        """Yields a list filled, when the block ends, with the ``Request``\\ s the server got
        during it."""
        self._api("reset-recording")
        self._api("start-recording")
        requests: list[Request] = []
        try:
            yield requests
        finally:
            self._api("stop-recording")
            raw = self._api("download-recording", method="GET").decode()
            for line in raw.splitlines():
                if not line.strip():
                    continue
                entry = json.loads(line)
                url = entry["url"].split("://", 1)[-1]
                path = "/" + url.split("/", 1)[1] if "/" in url else "/"
                headers = {k.lower(): v for k, v in entry.get("headers", {}).items()}
                if path.startswith("/moto-api"):
                    continue
                requests.append(Request(entry["method"], path.split("?", 1)[0], headers.get("range")))


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory) -> MotoServer:
    server = MotoServer(tmp_path_factory.mktemp("moto")).start()
    yield server
    server.stop()
