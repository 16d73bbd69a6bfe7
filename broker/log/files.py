"""File names, suffixes, atomic writes and checkpoint files of a log directory.

Owns: every name the storage engine gives a file (one place, as Kafka's ``LogFileUtils``),
the atomic-replace write used for every small metadata file, and the text formats of
Kafka's checkpoint files. Byte for byte Kafka's, so a Kafka broker or tool reads them:

- segment files ``<20-digit base offset>.log|.index|.timeindex|.txnindex`` and producer
  snapshots ``<20-digit offset>.snapshot``; ``.deleted``, ``.cleaned`` and ``.swap``
  suffixes for files on their way out or in;
- a partition directory ``<topic>-<partition>`` (topic names never end in ``-<digits>``
  ambiguity here: the partition is the text after the LAST dash);
- offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint``)::

      0                 <- version
      2                 <- number of entries
      topic-a 0 1234    <- topic partition offset
      topic-b 3 99

- ``leader-epoch-checkpoint``: the same shape with ``epoch startOffset`` lines;
- ``partition.metadata``: ``version: 0`` and ``topic_id: <base64url uuid>`` lines;
- ``meta.properties``: Java properties (``version``, ``node.id``, ``cluster.id``,
  ``directory.id``);
- the clean-shutdown marker ``.kafka_cleanshutdown`` (KRaft writes a small JSON body).

Invariants: ``atomic_write`` leaves either the old file or the new one, never a mix: it
writes ``<name>.tmp``, fsyncs it, ``os.replace``s it over the target and fsyncs the
directory. A checkpoint that cannot be parsed raises ``ValueError`` naming the file.

Thread-safety: functions only; callers serialise writes to the same file.
"""

from __future__ import annotations

import base64
import os
import re
import uuid
from pathlib import Path, PosixPath, PurePath

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
TMP_FILE_SUFFIX = ".tmp"

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
META_PROPERTIES_FILE = "meta.properties"

CHECKPOINT_VERSION = 0
_OFFSET_DIGITS = 20
_DIR_RE = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def filename_prefix_from_offset(offset: int) -> str:
    """The 20-digit zero-padded base offset that names segment files."""
    return f"{offset:0{_OFFSET_DIGITS}d}"


def offset_from_file_name(name: str) -> int:
    """The base offset encoded in a segment or snapshot file name."""
    return int(Path(name).name.split(".", 1)[0])


def segment_file(directory: str | PurePath, base_offset: int, suffix: str, extra: str = "") -> PosixPath:
    """The file of a segment in ``directory``: a local ``Path`` (``PosixPath``, also a
    ``PurePosixPath``, so the object-store reader names its files with the same helpers)."""
    return PosixPath(directory) / (filename_prefix_from_offset(base_offset) + suffix + extra)


def log_file(directory: str | PurePath, base_offset: int, extra: str = "") -> PosixPath:
    return segment_file(directory, base_offset, LOG_FILE_SUFFIX, extra)


def offset_index_file(directory: str | PurePath, base_offset: int, extra: str = "") -> PosixPath:
    return segment_file(directory, base_offset, INDEX_FILE_SUFFIX, extra)


def time_index_file(directory: str | PurePath, base_offset: int, extra: str = "") -> PosixPath:
    return segment_file(directory, base_offset, TIME_INDEX_FILE_SUFFIX, extra)


def txn_index_file(directory: str | PurePath, base_offset: int, extra: str = "") -> PosixPath:
    return segment_file(directory, base_offset, TXN_INDEX_FILE_SUFFIX, extra)


def producer_snapshot_file(directory: str | PurePath, offset: int) -> PosixPath:
    return segment_file(directory, offset, PRODUCER_SNAPSHOT_FILE_SUFFIX)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition directory name, or None for anything else
    (including ``-delete`` / ``-future`` / ``-stray`` directories)."""
    m = _DIR_RE.match(name)
    if not m:
        return None
    return m.group("topic"), int(m.group("partition"))


def fsync_dir(directory: Path) -> None:
    """fsync a directory so that a rename or create in it survives a crash."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file."""
    path = Path(path)
    tmp = path.with_name(path.name + TMP_FILE_SUFFIX)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # never leave a half-written .tmp behind (R11)
        raise
    if fsync:
        fsync_dir(path.parent)


def _read_checkpoint_lines(path: Path, fields: int) -> list[list[str]]:
    return _checkpoint_lines(Path(path).read_text(encoding="utf-8"), path, fields)


def _checkpoint_lines(text: str, path, fields: int) -> list[list[str]]:
    lines = text.splitlines()
    try:
        version = int(lines[0].strip())
        count = int(lines[1].strip())
    except (IndexError, ValueError):
        raise ValueError(f"{path}: malformed checkpoint header") from None
    if version != CHECKPOINT_VERSION:
        raise ValueError(f"{path}: unknown checkpoint version {version}")
    body = [line.split() for line in lines[2:] if line.strip()]
    if len(body) != count or any(len(parts) != fields for parts in body):
        raise ValueError(f"{path}: expected {count} entries of {fields} fields")
    return body


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Entries of an offset checkpoint file; {} when it does not exist."""
    if not Path(path).exists():
        return {}
    return parse_offset_checkpoint(Path(path).read_text(encoding="utf-8"), path)


def parse_offset_checkpoint(text: str, path) -> dict[tuple[str, int], int]:
    """Entries of an offset checkpoint's ``text`` (read from ``path``, named in errors;
    readers of remote copies read the bytes themselves)."""
    out = {}
    for topic, partition, offset in _checkpoint_lines(text, path, 3):
        try:
            out[(topic, int(partition))] = int(offset)
        except ValueError:
            raise ValueError(f"{path}: malformed entry {topic} {partition} {offset}") from None
    return out


def write_offset_checkpoint(path: Path, entries: dict[tuple[str, int], int], *, fsync: bool = True) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(entries.items())]
    atomic_write(path, ("\n".join(lines) + "\n").encode("utf-8"), fsync=fsync)


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    """(epoch, start offset) entries of a leader-epoch-checkpoint; [] when absent."""
    if not Path(path).exists():
        return []
    try:
        return [(int(e), int(o)) for e, o in _read_checkpoint_lines(path, 2)]
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def write_epoch_checkpoint(path: Path, entries: list[tuple[int, int]], *, fsync: bool = True) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))] + [f"{e} {o}" for e, o in entries]
    atomic_write(path, ("\n".join(lines) + "\n").encode("utf-8"), fsync=fsync)


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def decode_topic_id(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"topic id {text!r} is not 16 bytes")
    return uuid.UUID(bytes=raw)


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    body = f"version: 0\ntopic_id: {encode_topic_id(topic_id)}\n"
    atomic_write(Path(directory) / PARTITION_METADATA_FILE, body.encode("ascii"))


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    path = Path(directory) / PARTITION_METADATA_FILE
    if not path.exists():
        return None
    fields = dict(line.split(": ", 1) for line in path.read_text().splitlines() if ": " in line)
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise ValueError(f"{path}: malformed partition metadata")
    return decode_topic_id(fields["topic_id"].strip())


def write_properties(path: Path, props: dict[str, str], header: str = "") -> None:
    """Write a Java-properties file (``meta.properties``) atomically; read it back with
    ``broker.config.load_properties``."""
    lines = [f"#{header}"] if header else []
    lines += [f"{k}={v}" for k, v in props.items()]
    atomic_write(path, ("\n".join(lines) + "\n").encode("utf-8"))
