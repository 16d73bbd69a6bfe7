"""Remote storage managers (Kafka's ``RemoteStorageManager``): the bytes of copied segments.

Owns: ``RemoteStorageManager`` (the interface the remote log manager uses), its one
implementation ``FileSystemRemoteStorageManager`` over pyarrow's file systems (a local
directory, ``file:``, ``s3://`` and S3-compatible stores, ``gs://``, ``abfs://``,
``hdfs://``), ``LogSegmentData`` (the local files of one closed segment to copy) and
``IndexType``. Built from the broker's ``rsm.config.*`` keys by ``from_config``; the name
in ``remote.log.storage.manager.class.name`` is ``kafkalog.remote.FileSystemRemoteStorageManager``;
Kafka's ``org.apache.kafka.server.log.remote.storage.LocalTieredStorage`` with its
``rsm.config.dir`` (Kafka's tiered-storage quick start) is taken as the same manager, the
directory as the root: the configuration works unchanged, the layout written is this one.

Remote layout (other tools, e.g. our Spark reader, read it; the format of a manifest is in
``metadata.py``)::

    <root>/<topic>-<partition>/<20-digit base>.log             the segment's batches, as is
                               <20-digit base>.index           offset index (8-byte entries)
                               <20-digit base>.timeindex       time index (12-byte entries)
                               <20-digit base>.txnindex        aborted transactions, if any
                               <20-digit next>.snapshot        producer snapshot, if any
                               <20-digit base>.leader-epoch-checkpoint
                               <20-digit base>.remote-segment.json   the manifest, LAST

So a tiered prefix reads like a Kafka log directory: the same file names and contents.
Objects of one segment never overwrite another segment's (distinct base offsets).
For readers of the prefix (e.g. Spark's direct mode): a segment is live iff its manifest
exists; a ``.log`` without a manifest is a copy in progress or a deletion cut short and
must be ignored; ``*.tmp-*`` names are writes in progress.

Crash safety, the three rules:
- each object is written atomically: on a local file system to ``<name>.tmp-<uuid>``,
  fsynced, then renamed (and the directory fsynced); on an object store the object appears
  only when its upload completes (S3's PUT / multipart completion at close);
- a copy writes every data object first and the manifest last; a deletion removes the
  manifest first and the data objects after it. A segment exists remotely iff its manifest
  exists, so no manifest ever names a missing object;
- objects no manifest names (a copy or delete cut short by a crash) are garbage:
  ``sweep_garbage`` removes them (the remote log manager runs it before copying). Copies
  are idempotent: a repeated copy writes the same names with the same bytes.

Topic ids: given the live topic's id, ``list_segments`` leaves out, and ``sweep_garbage``
deletes (manifest first, then the objects no live manifest names), manifests whose
``topic_id`` is another one: those of an older incarnation of a topic deleted and
re-created with the same name whose deletion was cut short. A manifest without a topic id
(none was known at the copy) is kept.

Test hook: the environment variable ``KAFKALOG_TEST_RSM_CRASH`` set to ``copy`` makes the
process SIGKILL itself after a copy's data objects are written and before its manifest; set
to ``delete``, after a deletion removed a manifest and before the data objects. Used by the
crash tests only.

Credentials: for ``s3://`` the ``fs.s3a.*`` keys under the prefix (``rsm.config.fs.s3a.endpoint``,
``.access.key``, ``.secret.key``, ``.session.token``, ``.endpoint.region``,
``.connection.ssl.enabled``, ``.path.style.access``), else the AWS SDK's usual chain
(environment, ``~/.aws``, instance roles); other schemes use pyarrow's ``FileSystem.from_uri``
and their usual environment.

Thread-safety: a manager holds only its immutable file system and root; pyarrow file
systems are thread-safe. The remote log manager serialises copies and deletions of one
partition; reads may run concurrently with them (a read of an object deleted meanwhile
raises ``RemoteStorageError``).
"""

from __future__ import annotations

import os
import re
import signal
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from .. import files
from ..storage import s3_options
from .errors import RemoteStorageError
from .metadata import MANIFEST_SUFFIX, RemoteLogSegmentMetadata, manifest_name

if TYPE_CHECKING:  # pragma: no cover - pyarrow.fs is imported where it is used
    from pyarrow.fs import FileInfo

__all__ = ["RemoteStorageManager", "FileSystemRemoteStorageManager", "LogSegmentData", "IndexType",
           "CRASH_ENV"]

CRASH_ENV = "KAFKALOG_TEST_RSM_CRASH"
_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_CHUNK = 1 << 20


class IndexType(Enum):
    """Kafka's ``RemoteStorageManager.IndexType``: the suffix of each index object."""
    OFFSET = files.INDEX_FILE_SUFFIX
    TIMESTAMP = files.TIME_INDEX_FILE_SUFFIX
    TRANSACTION = files.TXN_INDEX_FILE_SUFFIX
    PRODUCER_SNAPSHOT = files.PRODUCER_SNAPSHOT_FILE_SUFFIX
    LEADER_EPOCH = ".leader-epoch-checkpoint"


@dataclass(frozen=True)
class LogSegmentData:
    """Kafka's ``LogSegmentData``: the local files of a closed segment, and its epochs."""
    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    producer_snapshot_index: Path | None
    leader_epoch_index: bytes


class RemoteStorageManager:
    """The operations the remote log manager needs (Kafka's interface, in Python)."""

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> None:
        raise NotImplementedError

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        raise NotImplementedError

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        raise NotImplementedError

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        raise NotImplementedError

    def list_segments(self, topic: str, partition: int, topic_id: str | None = None
                      ) -> list[RemoteLogSegmentMetadata]:
        raise NotImplementedError

    def sweep_garbage(self, topic: str, partition: int, topic_id: str | None = None) -> list[str]:
        raise NotImplementedError

    def delete_partition(self, topic: str, partition: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _same_topic(meta: RemoteLogSegmentMetadata, topic_id: str | None) -> bool:
    """False for a manifest of another incarnation of the topic (both ids known, different)."""
    return topic_id is None or meta.topic_id is None or meta.topic_id == topic_id


def _crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _s3_filesystem(bucket_path: str, options: Mapping[str, str]):
    """An ``S3FileSystem`` from Hadoop's fs.s3a.* keys (``broker.log.storage.s3_options``,
    the mapping Spark's object-store reads use; keys not given: the SDK's chain)."""
    from pyarrow import fs as pafs
    return pafs.S3FileSystem(**s3_options(options)), bucket_path


class FileSystemRemoteStorageManager(RemoteStorageManager):
    """Segments as objects under ``<root>/<topic>-<partition>/`` (layout in the module docstring)."""

    def __init__(self, storage_uri: str, options: Mapping[str, str] | None = None) -> None:
        from pyarrow import fs as pafs
        options = dict(options or {})
        if not storage_uri:
            raise ValueError("the remote storage manager needs rsm.config.storage.uri")
        self.storage_uri = storage_uri
        if not _URI_RE.match(storage_uri) and not storage_uri.startswith("file:"):
            self.local = True
            self.fs = pafs.LocalFileSystem()
            self.root = str(Path(storage_uri).absolute())
        elif storage_uri.startswith("file:"):
            self.local = True
            self.fs, self.root = pafs.FileSystem.from_uri(storage_uri)
        else:
            scheme = storage_uri.split("://", 1)[0].lower()
            self.local = False
            if scheme in ("s3", "s3a", "s3n") and any(k.startswith("fs.s3a.") for k in options):
                bucket_path = storage_uri.split("://", 1)[1].split("?", 1)[0]
                self.fs, self.root = _s3_filesystem(bucket_path, options)
            else:
                uri = "s3://" + storage_uri.split("://", 1)[1] if scheme in ("s3a", "s3n") else storage_uri
                self.fs, self.root = pafs.FileSystem.from_uri(uri)
        self.root = self.root.rstrip("/")
        if self.local:
            os.makedirs(self.root, exist_ok=True)

    @classmethod
    def from_config(cls, options: Mapping[str, str]) -> FileSystemRemoteStorageManager:
        """From the broker's keys under the prefix, the prefix removed (``storage.uri``, or
        ``dir`` as Kafka's LocalTieredStorage names its directory; ``fs.s3a.*``)."""
        return cls(options.get("storage.uri") or options.get("dir") or "", options)

    # --- names ---

    def partition_path(self, topic: str, partition: int) -> str:
        return f"{self.root}/{files.partition_dir_name(topic, partition)}"

    def _path(self, metadata: RemoteLogSegmentMetadata, name: str) -> str:
        return f"{self.partition_path(metadata.topic, metadata.partition)}/{name}"

    def uri(self, path: str) -> str:
        return path if self.local else f"{self.storage_uri.split('://', 1)[0]}://{path}"

    # --- writes ---

    def _put(self, path: str, source: Path | bytes) -> None:
        """Write one object atomically (module docstring)."""
        if self.local:
            tmp = Path(f"{path}.tmp-{uuid.uuid4().hex}")
            tmp.parent.mkdir(parents=True, exist_ok=True)
            try:
                with open(tmp, "wb") as out:
                    if isinstance(source, bytes):
                        out.write(source)
                    else:
                        with open(source, "rb") as src:
                            while chunk := src.read(_CHUNK):
                                out.write(chunk)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
            files.fsync_dir(tmp.parent)
            return
        with self.fs.open_output_stream(path) as out:
            if isinstance(source, bytes):
                out.write(source)
            else:
                with open(source, "rb") as src:
                    while chunk := src.read(_CHUNK):
                        out.write(chunk)

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> None:
        """Copy the segment's objects, then its manifest (idempotent: same names, same bytes)."""
        sources: dict[str, Path | bytes] = {
            metadata.log_object: data.log_segment,
        }
        for path in (data.offset_index, data.time_index, data.transaction_index, data.producer_snapshot_index):
            if path is not None:
                sources[path.name] = path
        epoch_name = metadata.object_with_suffix(IndexType.LEADER_EPOCH.value)
        if epoch_name is not None:
            sources[epoch_name] = data.leader_epoch_index
        missing = set(metadata.objects) ^ set(sources)
        if missing:
            raise ValueError(f"the manifest's objects and the copied files differ: {sorted(missing)}")
        try:
            if not self.local:
                self.fs.create_dir(self.partition_path(metadata.topic, metadata.partition), recursive=True)
            for name, source in sources.items():
                self._put(self._path(metadata, name), source)
            _crash_point("copy")
            self._put(self._path(metadata, manifest_name(metadata.base_offset)), metadata.to_json())
        except OSError as exc:
            raise RemoteStorageError(f"copy of {metadata.topic}-{metadata.partition} segment "
                                     f"{metadata.base_offset} to {self.storage_uri} failed: {exc}") from exc

    def _delete(self, path: str) -> None:
        try:
            self.fs.delete_file(path)
        except FileNotFoundError:
            pass

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Remove the manifest first, then the data objects (a crash in between leaves garbage)."""
        try:
            self._delete(self._path(metadata, manifest_name(metadata.base_offset)))
            _crash_point("delete")
            for name in metadata.objects:
                self._delete(self._path(metadata, name))
        except OSError as exc:
            raise RemoteStorageError(f"deletion of {metadata.topic}-{metadata.partition} segment "
                                     f"{metadata.base_offset} in {self.storage_uri} failed: {exc}") from exc

    # --- reads ---

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        """The log bytes [start_position, end_position] (inclusive, as Kafka's; None: to the
        end), one ranged read."""
        end = metadata.segment_size_in_bytes - 1 if end_position is None else end_position
        end = min(end, metadata.segment_size_in_bytes - 1)
        if end < start_position:
            return b""
        path = self._path(metadata, metadata.log_object)
        try:
            with self.fs.open_input_file(path) as f:
                return f.read_at(end - start_position + 1, start_position)
        except OSError as exc:
            raise RemoteStorageError(f"read of {self.uri(path)} failed: {exc}") from exc

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        """A whole index object; b"" when the segment has none of that type."""
        name = metadata.object_with_suffix(index_type.value)
        if name is None:
            return b""
        path = self._path(metadata, name)
        try:
            with self.fs.open_input_file(path) as f:
                return f.read()
        except OSError as exc:
            raise RemoteStorageError(f"read of {self.uri(path)} failed: {exc}") from exc

    def _list(self, topic: str, partition: int) -> list[FileInfo]:
        from pyarrow import fs as pafs
        selector = pafs.FileSelector(self.partition_path(topic, partition), allow_not_found=True)
        try:
            return [i for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File]
        except OSError as exc:
            raise RemoteStorageError(f"listing of {self.uri(self.partition_path(topic, partition))} "
                                     f"failed: {exc}") from exc

    def _manifests(self, infos: list[FileInfo]) -> list[tuple[FileInfo, RemoteLogSegmentMetadata]]:
        out = []
        for info in infos:
            if info.base_name.endswith(MANIFEST_SUFFIX):
                try:
                    with self.fs.open_input_file(info.path) as f:
                        out.append((info, RemoteLogSegmentMetadata.from_json(f.read())))
                except (OSError, ValueError) as exc:
                    raise RemoteStorageError(f"unreadable manifest {self.uri(info.path)}: {exc}") from exc
        return out

    def list_segments(self, topic: str, partition: int, topic_id: str | None = None
                      ) -> list[RemoteLogSegmentMetadata]:
        """The partition's remote segments (its manifests), by base offset; with
        ``topic_id`` only those of that topic id (module docstring)."""
        out = [meta for _, meta in self._manifests(self._list(topic, partition)) if _same_topic(meta, topic_id)]
        return sorted(out, key=lambda m: m.base_offset)

    def sweep_garbage(self, topic: str, partition: int, topic_id: str | None = None) -> list[str]:
        """Delete the objects no manifest names and, with ``topic_id``, the manifests of
        another topic id, first (module docstring); returns their names. Must not run
        concurrently with a copy into the same partition."""
        infos = self._list(topic, partition)
        referenced: set[str] = set()
        swept = []
        for info, meta in self._manifests(infos):
            if _same_topic(meta, topic_id):
                referenced.update(meta.objects)
                referenced.add(info.base_name)
            else:
                self._delete(info.path)
                swept.append(info.base_name)
        for info in infos:
            name = info.base_name
            if name in referenced or name in swept:
                continue
            self._delete(info.path)
            swept.append(name)
        return swept

    def delete_partition(self, topic: str, partition: int) -> None:
        """Topic deletion (and remote storage turned off): every manifest first, one by
        one (no manifest outlives an object it names), then the rest of the prefix at once
        (``delete_dir``: on S3, DeleteObjects requests of up to 1,000 keys rather than a
        request per object), then, should anything be left, object by object."""
        prefix = self.partition_path(topic, partition)
        for info in self._list(topic, partition):
            if info.base_name.endswith(MANIFEST_SUFFIX):
                self._delete(info.path)
        try:
            self.fs.delete_dir(prefix)
        except (FileNotFoundError, OSError):
            pass  # nothing there, or a store that refused the bulk delete: checked below
        for info in self._list(topic, partition):
            self._delete(info.path)
