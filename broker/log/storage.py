"""Where a log directory's files live, for readers: local disk or an object store.

Owns: ``Storage`` (what ``reader.py`` and the bulk readers ask of the files of a log
directory: list a directory, tell a directory from a missing path, open a file for
positional reads, read a whole small file), its two implementations, ``LocalStorage``
(the local file system; windows of segments are memory-mapped) and ``ArrowStorage`` (any
``pyarrow.fs.FileSystem``: S3 and S3-compatible stores, GCS, Azure, HDFS; every read is a
ranged read of the bytes asked for), ``open_location`` (a path or URI plus
configuration -> a storage and the root path in it) and ``s3_options`` (Hadoop's
``fs.s3a.*`` keys, as Spark users know them, -> ``pyarrow.fs.S3FileSystem`` arguments).

Paths: ``LocalStorage`` paths are ``pathlib.Path``\\ s (``PosixPath``); ``ArrowStorage`` paths are
``PurePosixPath``\\ s inside the file system (``bucket/prefix/topic-0/...log`` for S3, as
pyarrow names them); both are ``PurePosixPath``\\ s, so ``.name``, ``.parent`` and ``/``
work the same for the readers. ``Storage.uri(path)`` gives the user-facing name
(``s3://bucket/prefix/...``) for messages.

What a read costs: on ``ArrowStorage`` each ``SegmentFile.read_at`` / ``window`` is one
ranged request (an HTTP ``GET`` with ``Range: bytes=a-b`` on S3) of exactly the bytes
asked for; ``open`` sends one ``HEAD`` (pyarrow asks for the size); ``read_file`` reads
a whole (small) file. Nothing here ever reads a file it was not asked to. On
``LocalStorage``, ``window`` maps the bytes (``mmap``, read-ahead advised) and
``read_at`` is ``os.pread``.

Configuration keys accepted by ``open_location`` for ``s3://`` (``s3a://``, ``s3n://``
are the same store, as Hadoop names it): ``fs.s3a.endpoint`` (host[:port] or a URL with
its scheme), ``fs.s3a.endpoint.region`` (also ``fs.s3a.region``), ``fs.s3a.access.key``,
``fs.s3a.secret.key``, ``fs.s3a.session.token``, ``fs.s3a.path.style.access``
(``true``: path-style requests; ``false``: virtual-hosted; unset: pyarrow's default,
path-style with a custom endpoint), ``fs.s3a.connection.ssl.enabled`` (``false``: http
when the endpoint gives no scheme) and ``fs.s3a.aws.credentials.provider`` (Hadoop's
``AnonymousAWSCredentialsProvider``: unsigned requests). Keys not given fall back to the
AWS SDK's usual chain (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` /
``AWS_SESSION_TOKEN`` / ``AWS_REGION`` / ``AWS_ENDPOINT_URL``, ``~/.aws/credentials`` and
``config``, instance roles). Other schemes (``gs://``, ``abfs://``, ``abfss://``,
``hdfs://``, ``viewfs://``) go to ``pyarrow.fs.FileSystem.from_uri`` with their own
environment (``GOOGLE_APPLICATION_CREDENTIALS``, ``AZURE_STORAGE_ACCOUNT_KEY``, Hadoop's
``CLASSPATH`` / ``HADOOP_HOME``); a URI's query string passes pyarrow's own options
(``s3://b/p?endpoint_override=host:9000&scheme=http``).

Errors: a missing bucket, bad credentials or an unreachable endpoint surface as
``OSError`` (pyarrow's, naming the AWS error) wrapped by ``LogDirReader`` with the URI; a
missing object as ``FileNotFoundError``, as on local disk, so retention's races read the
same.

Thread-safety: a storage is immutable once built and may be shared (pyarrow file systems
are thread-safe); a ``SegmentFile`` belongs to one thread. Nothing here imports pyarrow
until an object store is opened.
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Mapping
from pathlib import Path, PosixPath, PurePosixPath
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # pragma: no cover - imported lazily by _ArrowFile
    from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["Storage", "LocalStorage", "ArrowStorage", "SegmentFile", "Entry", "open_location",
           "s3_options", "S3A_KEYS", "is_uri", "LOCAL"]

_GRANULARITY = mmap.ALLOCATIONGRANULARITY
_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

# Hadoop's fs.s3a.* keys this module maps onto pyarrow's S3FileSystem (module docstring).
S3A_KEYS = (
    "fs.s3a.endpoint", "fs.s3a.endpoint.region", "fs.s3a.region", "fs.s3a.access.key",
    "fs.s3a.secret.key", "fs.s3a.session.token", "fs.s3a.path.style.access",
    "fs.s3a.connection.ssl.enabled", "fs.s3a.aws.credentials.provider",
)


class Entry(NamedTuple):
    """One name in a directory listing."""
    name: str
    path: PurePosixPath
    is_dir: bool
    size: int


class Window:
    """Bytes [pos, pos + length) of a file as one buffer: ``view`` (a memoryview) until
    ``close``."""

    def __init__(self, view: memoryview, owner=None) -> None:
        self.view = view
        self._owner = owner

    def close(self) -> None:
        self.view.release()
        if self._owner is not None:
            try:
                self._owner.close()
            except BufferError:  # an export still alive: the GC unmaps it
                pass


class SegmentFile:
    """A file opened for positional reads (one thread)."""

    size: int

    def read_at(self, position: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``position`` (fewer at the end of the file)."""
        raise NotImplementedError

    def window(self, position: int, length: int, limit: int | None = None) -> Window:
        """``length`` bytes at ``position`` (within the file) as one buffer. ``limit``:
        the end of the bytes the caller will want (a range's end): an implementation may
        read ahead up to it, never past it."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> SegmentFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Storage:
    """The files of one log directory tree (see the module docstring). ``is_local``: a
    listing may be stale the moment it is taken (a live broker's directory), so a file
    missing from it is still looked for; an object store's copy is taken as listed."""

    is_local = False

    def path(self, text: str) -> PurePosixPath:
        """The storage's path for ``text`` (a path inside the storage)."""
        raise NotImplementedError

    def uri(self, path: PurePosixPath) -> str:
        """The user-facing name of ``path``."""
        raise NotImplementedError

    def is_dir(self, path: PurePosixPath) -> bool:
        raise NotImplementedError

    def list_dir(self, path: PurePosixPath) -> list[Entry]:
        """The entries directly in ``path``; ``FileNotFoundError`` when it is missing."""
        raise NotImplementedError

    def open(self, path: PurePosixPath, size: int | None = None) -> SegmentFile:
        """``path`` for positional reads (``size``: as listed, for implementations that can
        save a request with it); ``FileNotFoundError`` when it is missing."""
        raise NotImplementedError

    def read_file(self, path: PurePosixPath, size: int | None = None) -> bytes:
        """The whole of a small file; ``FileNotFoundError`` when it is missing."""
        raise NotImplementedError

    def read_index(self, path: PurePosixPath, entry_size: int, size: int | None = None) -> bytes:
        """An index file's entries: the whole file, or locally only up to the first hole
        of a preallocated (sparse) index."""
        return self.read_file(path, size)


# --- local disk ---

class _LocalFile(SegmentFile):
    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self.size = os.fstat(self._fd).st_size

    def fileno(self) -> int:
        return self._fd

    def read_at(self, position: int, length: int) -> bytes:
        return os.pread(self._fd, length, position)

    def window(self, position: int, length: int, limit: int | None = None) -> Window:
        aligned = position - position % _GRANULARITY
        mm = mmap.mmap(self._fd, length + (position - aligned), access=mmap.ACCESS_READ, offset=aligned)
        try:
            mm.madvise(mmap.MADV_SEQUENTIAL)  # read-ahead: the window is read once, in order
        except (AttributeError, OSError):
            pass
        return Window(memoryview(mm)[position - aligned:], mm)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class LocalStorage(Storage):
    """The local file system (paths are ``pathlib.Path``)."""

    is_local = True

    def __repr__(self) -> str:
        return "LocalStorage()"

    def __eq__(self, other) -> bool:
        return isinstance(other, LocalStorage)

    def __hash__(self) -> int:
        return hash(LocalStorage)

    def path(self, text: str) -> PosixPath:
        return PosixPath(text)

    def uri(self, path: PurePosixPath) -> str:
        return str(path)

    def is_dir(self, path: PurePosixPath) -> bool:
        return os.path.isdir(path)

    def list_dir(self, path: PurePosixPath) -> list[Entry]:
        out = []
        with os.scandir(path) as it:
            for entry in it:
                try:
                    is_dir = entry.is_dir()
                    size = 0 if is_dir else entry.stat().st_size
                    if not is_dir and not entry.is_file():
                        continue
                except FileNotFoundError:  # renamed or deleted since the scan saw it
                    continue
                out.append(Entry(entry.name, PosixPath(entry.path), is_dir, size))
        return out

    def open(self, path: PurePosixPath, size: int | None = None) -> SegmentFile:
        return _LocalFile(Path(path))

    def read_file(self, path: PurePosixPath, size: int | None = None) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def read_index(self, path: PurePosixPath, entry_size: int, size: int | None = None) -> bytes:
        fd = os.open(path, os.O_RDONLY)
        try:
            length = os.fstat(fd).st_size
            if length == 0:
                return b""
            # The active segment's index is preallocated (segment.index.bytes, sparse): read
            # up to its first hole only, the entries' end (the rest reads as zeros anyway).
            try:
                hole = os.lseek(fd, 0, os.SEEK_HOLE)
            except (OSError, AttributeError):  # no hole support: the whole file
                hole = length
            return os.pread(fd, min(length, hole + (-hole % entry_size)), 0)
        finally:
            os.close(fd)


LOCAL = LocalStorage()


# --- object stores (pyarrow.fs) ---

class _ArrowFile(SegmentFile):
    """Windows read ahead: once a window [p, p + n) is served with a ``limit``, the next
    bytes [p + n, min(p + 2n, limit)) are read by a background thread while the caller
    decodes (pyarrow releases the GIL), and the next window is assembled from the tail of
    the last one (a batch cut by its end), the prefetched bytes and, if still short, one
    more read. At most three windows' bytes are held at once (the last, the one being
    assembled, the prefetch); nothing past ``limit`` is ever read."""

    def __init__(self, handle) -> None:
        self._handle = handle
        self.size = handle.size()
        self._last: tuple[int, bytes] | None = None      # (position, bytes) of the last window
        self._ahead: tuple[int, Future[bytes]] | None = None    # (position, bytes) read ahead
        self._pool: ThreadPoolExecutor | None = None

    def read_at(self, position: int, length: int) -> bytes:
        length = max(0, min(length, self.size - position))
        if length == 0:
            return b""
        return self._handle.read_at(length, position)

    def window(self, position: int, length: int, limit: int | None = None) -> Window:
        end = min(position + length, self.size)
        parts: list = []
        at = position
        if self._last is not None:
            start, data = self._last
            if start <= at < start + len(data):
                piece = memoryview(data)[at - start:end - start]
                parts.append(piece)
                at += len(piece)
        if self._ahead is not None:
            start, future = self._ahead
            self._ahead = None
            if start == at and at < end:
                data = future.result()
                piece = memoryview(data)[:end - at]
                parts.append(piece)
                at += len(piece)
            else:
                future.cancel()
        if at < end:
            parts.append(self.read_at(at, end - at))
        data = bytes(parts[0]) if len(parts) == 1 and isinstance(parts[0], memoryview) else \
            parts[0] if len(parts) == 1 else b"".join(parts)
        parts.clear()
        self._last = (position, data)
        if limit is not None and end < min(limit, self.size):
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="kafkalog-read-ahead")
            self._ahead = (end, self._pool.submit(self.read_at, end, min(length, limit - end)))
        return Window(memoryview(data))

    def close(self) -> None:
        self._last = None
        if self._ahead is not None:
            self._ahead[1].cancel()
            self._ahead = None
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)  # no read outlives the handle
            self._pool = None
        self._handle.close()


class ArrowStorage(Storage):
    """A ``pyarrow.fs.FileSystem`` (paths are ``PurePosixPath``\\ s inside it).
    ``base_uri`` and ``base_path`` are the location as the user gave it and its path in
    the file system: ``uri`` names paths under it in the user's spelling."""

    def __init__(self, filesystem, base_uri: str, base_path: str) -> None:
        self.filesystem = filesystem
        self.base_uri = base_uri.split("?", 1)[0].rstrip("/")
        self.base_path = base_path.rstrip("/")

    def __repr__(self) -> str:
        return f"ArrowStorage({type(self.filesystem).__name__}, {self.base_uri!r})"

    def path(self, text: str) -> PurePosixPath:
        return PurePosixPath(text)

    def uri(self, path: PurePosixPath) -> str:
        text = str(path)
        if text == self.base_path or text.startswith(self.base_path + "/"):
            return self.base_uri + text[len(self.base_path):]
        return f"{self.base_uri.split('://', 1)[0]}://{text}"

    def is_dir(self, path: PurePosixPath) -> bool:
        from pyarrow.fs import FileType
        return self.filesystem.get_file_info(str(path)).type == FileType.Directory

    def list_dir(self, path: PurePosixPath) -> list[Entry]:
        from pyarrow.fs import FileSelector, FileType
        infos = self.filesystem.get_file_info(FileSelector(str(path), allow_not_found=False))
        out = []
        for info in infos:
            if info.type not in (FileType.File, FileType.Directory):
                continue
            is_dir = info.type == FileType.Directory
            out.append(Entry(info.base_name, PurePosixPath(info.path), is_dir, 0 if is_dir else info.size))
        return out

    def open(self, path: PurePosixPath, size: int | None = None) -> SegmentFile:
        # pyarrow's open_input_file takes a path only: one HEAD (the size), even when the
        # listing gave it
        return _ArrowFile(self.filesystem.open_input_file(str(path)))

    def read_file(self, path: PurePosixPath, size: int | None = None) -> bytes:
        with self.open(path, size) as f:
            return f.read_at(0, f.size)


# --- locations ---

def is_uri(text: str) -> bool:
    """Whether ``text`` is a URI with a scheme (``s3://...``) rather than a local path."""
    return bool(_URI_RE.match(text))


def _truthy(value: str, key: str) -> bool:
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"invalid value {value!r} for {key}: expected 'true' or 'false'")
    return text == "true"


def s3_options(config: Mapping[str, str]) -> dict:
    """``pyarrow.fs.S3FileSystem`` keyword arguments from Hadoop's ``fs.s3a.*`` keys in
    ``config`` (keys compared lower-case; see the module docstring). Keys not given are
    left to the AWS SDK's default chain."""
    conf = {str(k).lower(): str(v) for k, v in config.items()}
    kwargs: dict = {}
    endpoint = conf.get("fs.s3a.endpoint", "").strip()
    if "fs.s3a.connection.ssl.enabled" in conf:
        ssl = _truthy(conf["fs.s3a.connection.ssl.enabled"], "fs.s3a.connection.ssl.enabled")
        kwargs["scheme"] = "https" if ssl else "http"
    if endpoint:
        m = re.match(r"^(https?)://(.*?)/?$", endpoint)
        if m:
            kwargs["scheme"], endpoint = m.group(1), m.group(2)
        kwargs["endpoint_override"] = endpoint
    region = conf.get("fs.s3a.endpoint.region") or conf.get("fs.s3a.region")
    if region:
        kwargs["region"] = region.strip()
    access, secret = conf.get("fs.s3a.access.key"), conf.get("fs.s3a.secret.key")
    if (access is None) != (secret is None):
        raise ValueError("give both fs.s3a.access.key and fs.s3a.secret.key, or neither (the AWS "
                         "SDK's default credentials are then used)")
    if access is not None:
        kwargs["access_key"], kwargs["secret_key"] = access, secret
        if conf.get("fs.s3a.session.token"):
            kwargs["session_token"] = conf["fs.s3a.session.token"]
    elif conf.get("fs.s3a.session.token"):
        raise ValueError("fs.s3a.session.token needs fs.s3a.access.key and fs.s3a.secret.key")
    if "fs.s3a.path.style.access" in conf:
        # Hadoop: true = path-style; false (its default) = virtual-hosted buckets
        kwargs["force_virtual_addressing"] = not _truthy(conf["fs.s3a.path.style.access"],
                                                         "fs.s3a.path.style.access")
    provider = conf.get("fs.s3a.aws.credentials.provider", "")
    if "Anonymous" in provider:
        kwargs["anonymous"] = True
    return kwargs


_S3_SCHEMES = {"s3", "s3a", "s3n"}


def open_location(location: str, config: Mapping[str, str] | None = None
                  ) -> tuple[Storage, PurePosixPath]:
    """The storage holding ``location`` (a local path, a ``file:`` URI, or an object-store
    URI) and ``location``'s path in it. ``config``: Hadoop's ``fs.s3a.*`` keys for S3."""
    config = config or {}
    text = str(location)
    if text.startswith("file:"):
        from urllib.parse import unquote, urlparse
        parsed = urlparse(text)
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"{location}: a file: URI names a local path (file:///dir)")
        return LOCAL, PosixPath(unquote(parsed.path))
    if not is_uri(text):
        return LOCAL, PosixPath(text)
    scheme = text.split("://", 1)[0].lower()
    import pyarrow.fs as pafs
    if scheme in _S3_SCHEMES:
        rest = text.split("://", 1)[1]
        query = ""
        if "?" in rest:
            rest, query = rest.split("?", 1)
        kwargs = s3_options(config)
        if query or not kwargs:
            # pyarrow's own URI options (and the SDK's environment) when no fs.s3a.* key
            filesystem, path = pafs.FileSystem.from_uri("s3://" + rest + ("?" + query if query else ""))
            if kwargs:
                raise ValueError(f"{location}: give the S3 settings either as fs.s3a.* options or in "
                                 "the URI's query string, not both")
        else:
            filesystem, path = pafs.S3FileSystem(**kwargs), rest
        path = path.strip("/")
        return ArrowStorage(filesystem, text, path), PurePosixPath(path)
    filesystem, path = pafs.FileSystem.from_uri(text)
    if isinstance(filesystem, pafs.LocalFileSystem):
        return LOCAL, PosixPath(path)
    path = path.rstrip("/") or "/"
    return ArrowStorage(filesystem, text, path), PurePosixPath(path)
