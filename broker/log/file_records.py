"""The ``.log`` file of a segment and the byte ranges read from it.

Owns: ``FileRecords`` (Kafka's ``FileRecords``: appends at the published end, positional
reads, chunked walks over batch headers, offset and timestamp searches, truncation,
rename, close) and the record containers a read returns: ``FileSlice`` (a range of a
``.log``, sent to the network as is) and ``MemoryRecords`` (bytes in memory), both
``Records``. ``segment.py`` builds on it.

On-disk format: back-to-back RecordBatch v2 (``broker/record/batch.py``), which this
broker writes, and the legacy magic 0/1 message set entries a Kafka log directory may
still hold (``broker/record/legacy.py``): every walk here takes both, through
``broker/record/entries.py`` (a legacy entry is one shallow "batch" whose last offset is
its own offset). This module never decodes records except in ``search_for_timestamp``,
one batch at a time. ``search_for_offset_with_size`` (the scan after every offset-index
lookup) reads the four header fields it needs in place for v2 batches rather than walking
``iter_batches``, and hands the walk to ``iter_batches`` at the first legacy entry, with
the same results and errors.

Invariants: the file size seen by readers (``size_in_bytes``) is published only after the
bytes are written and is lowered before the file is truncated; walks read
``READ_CHUNK``-sized pieces (or one batch when a batch is larger), never the whole file;
a header that cannot be an entry raises ``broker.log.errors.CorruptRecordError``.

Thread-safety: one writer (the log's lock) and any number of readers. Reads use
``os.pread`` (no shared file position) and look no further than the size they loaded
(one attribute load, atomic under the GIL). A slice stays readable while the file is
renamed; it fails with ``OSError`` once the ``FileRecords`` is closed, which is why the
log deletes segments after a delay (file.delete.delay.ms), as Kafka does.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, NamedTuple, overload

from ..record.batch import (
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
)
from ..record.entries import ENTRY_HEADER_PREFIX, decode_entry, entry_header, iter_entry_headers
from ..record.errors import DecodeError
from ..record.limits import INT32_MAX
from .errors import CorruptRecordError
from .index import NO_TIMESTAMP

__all__ = [
    "FileRecords", "FileSlice", "MemoryRecords", "Records", "EMPTY_RECORDS",
    "LogOffsetPosition", "TimestampAndOffset", "READ_CHUNK",
]

# baseOffset int64 @0, batchLength int32 @8, (partitionLeaderEpoch @12), magic int8 @16,
# (crc @17, attributes @21), lastOffsetDelta int32 @23: what an offset scan reads per batch.
_SCAN_HEADER = struct.Struct(">qi4xb6xi")
_MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
# Bytes read per step by header walks (translate_offset, timestamp scans): a forward scan
# after an index lookup covers about index.interval.bytes plus one batch.
READ_CHUNK = 16 * 1024


class LogOffsetPosition(NamedTuple):
    """A batch found by a log scan: its last offset, position and size."""
    offset: int
    position: int
    size: int


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int | None = None


# --- records returned by reads ---

class Records:
    """Bytes of whole batches, either in memory or a slice of a ``.log`` file."""

    @property
    def size_in_bytes(self) -> int:
        raise NotImplementedError

    def __len__(self) -> int:
        return self.size_in_bytes

    def read_bytes(self) -> bytes:
        raise NotImplementedError

    def memoryview(self) -> memoryview:
        return memoryview(self.read_bytes())

    def batches(self) -> Iterator[tuple[int, BatchHeader]]:
        """(position within these records, header) of each whole batch."""
        raise NotImplementedError

    def last_batch(self) -> BatchHeader | None:
        last = None
        for _, header in self.batches():
            last = header
        return last


class MemoryRecords(Records):
    def __init__(self, data: bytes | bytearray | memoryview = b"") -> None:
        self._data = data

    @property
    def size_in_bytes(self) -> int:
        return len(self._data)

    def read_bytes(self) -> bytes:
        return bytes(self._data)

    def memoryview(self) -> memoryview:
        return memoryview(self._data)

    def batches(self) -> Iterator[tuple[int, BatchHeader]]:
        return iter_entry_headers(self._data)

    def __repr__(self) -> str:
        return f"MemoryRecords(size={len(self._data)})"


EMPTY_RECORDS = MemoryRecords(b"")


class FileSlice(Records):
    """``size`` bytes at ``position`` of a ``.log`` (Kafka's FileRecords.slice). Send it
    with ``os.sendfile(sock, slice.fileno(), slice.position, slice.size_in_bytes)`` or
    read it with ``read_bytes()``; the last batch may be cut when the slice is bounded by
    a fetch size, as in Kafka."""

    __slots__ = ("_records", "position", "_size")

    def __init__(self, records: FileRecords, position: int, size: int) -> None:
        self._records = records
        self.position = position
        self._size = size

    @property
    def size_in_bytes(self) -> int:
        return self._size

    @property
    def path(self) -> Path:
        return self._records.path

    def fileno(self) -> int:
        return self._records.fileno()

    def read_bytes(self) -> bytes:
        return self._records.pread(self.position, self._size)

    def batches(self) -> Iterator[tuple[int, BatchHeader]]:
        for pos, header, _ in self._records.iter_batches(self.position, self.position + self._size):
            yield pos - self.position, header

    def __repr__(self) -> str:
        return f"FileSlice({str(self.path)!r}, position={self.position}, size={self._size})"


# --- the .log file ---

class FileRecords:
    """A ``.log`` file: appends at the published end, positional reads, chunked batch walks."""

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self._path = Path(path)
        self._fd = fd
        self._size = size  # published after each write; readers never look past it

    @classmethod
    def open(cls, path: Path | str, file_already_exists: bool = False, init_file_size: int = 0,
             preallocate: bool = False) -> FileRecords:
        path = Path(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not file_already_exists and preallocate and init_file_size > 0:
                os.ftruncate(fd, init_file_size)
                size = 0
            else:
                size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, min(size, INT32_MAX))

    @property
    def path(self) -> Path:
        return self._path

    file = path

    @property
    def size_in_bytes(self) -> int:
        return self._size

    def fileno(self) -> int:
        return self._fd

    def append(self, data) -> int:
        """Write ``data`` at the published end (one ``pwrite`` unless the kernel writes
        short), then publish the new size; returns the bytes written."""
        if type(data) is not bytearray and type(data) is not bytes:
            data = memoryview(data).cast("B")
        n = len(data)
        position = self._size
        if n > INT32_MAX - position:
            raise ValueError(f"appending {n} bytes to {self._path} of {position} bytes "
                             f"would exceed {INT32_MAX} bytes")
        written = os.pwrite(self._fd, data, position) if n else 0
        if written < n:
            mv = memoryview(data)
            while written < n:
                written += os.pwrite(self._fd, mv[written:], position + written)
        self._size = position + n  # publish after the bytes are in the file
        return n

    def pread(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``position`` (fewer at the end of the file)."""
        if size <= 0:
            return b""
        data = os.pread(self._fd, size, position)
        if len(data) == size or not data:
            return data
        parts = [data]
        got = len(data)
        while got < size:
            more = os.pread(self._fd, size - got, position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def slice(self, position: int, size: int) -> FileSlice:
        end = self._size
        if position < 0 or size < 0:
            raise ValueError(f"invalid slice position {position} / size {size} of {self._path}")
        position = min(position, end)
        return FileSlice(self, position, min(size, end - position))

    @overload
    def iter_batches(self, start: int = 0, end: int | None = None, *, with_bytes: Literal[False] = False,
                     chunk_size: int = READ_CHUNK) -> Iterator[tuple[int, BatchHeader, None]]: ...

    @overload
    def iter_batches(self, start: int = 0, end: int | None = None, *, with_bytes: Literal[True],
                     chunk_size: int = READ_CHUNK) -> Iterator[tuple[int, BatchHeader, memoryview]]: ...

    def iter_batches(self, start: int = 0, end: int | None = None, *, with_bytes: bool = False,
                     chunk_size: int = READ_CHUNK
                     ) -> Iterator[tuple[int, BatchHeader, memoryview | None]]:
        """Walk whole batches (v2, and legacy entries as shallow batches) in [start, end)
        (default end: the published size), yielding (position, header, the batch's bytes if
        ``with_bytes`` else None). Stops quietly at a trailing partial batch; a header that
        cannot be an entry of any magic raises ``CorruptRecordError``. Reads ``chunk_size``
        bytes at a time (or one batch when it is larger), so memory stays bounded."""
        if end is None:
            end = self._size
        pos = start
        while end - pos >= ENTRY_HEADER_PREFIX:
            buf = self.pread(pos, min(chunk_size, end - pos))
            if len(buf) < ENTRY_HEADER_PREFIX:
                return  # the file shrank under a reader
            consumed = 0
            view = memoryview(buf) if with_bytes else None
            try:
                for rel, header in iter_entry_headers(buf, 0, len(buf)):
                    size = header.batch_length + LOG_OVERHEAD
                    yield pos + rel, header, view[rel:rel + size] if view is not None else None
                    consumed = rel + size
                if consumed == 0:
                    first = entry_header(buf, 0)
            except DecodeError as exc:
                raise CorruptRecordError(
                    f"{self._path}: invalid batch after position {pos + consumed}: {exc}") from exc
            if consumed:
                pos += consumed
                continue
            if first is None:
                return  # a trailing partial header
            # the first batch is larger than the chunk
            size = first.size_in_bytes
            if size > end - pos:
                return
            if with_bytes:
                data = self.pread(pos, size)
                if len(data) < size:
                    return
                yield pos, first, memoryview(data)
            else:
                yield pos, first, None
            pos += size

    def search_for_offset_with_size(self, target_offset: int, starting_position: int) -> LogOffsetPosition | None:
        """The first batch from ``starting_position`` whose last offset >= target.

        The forward scan after every index lookup (each fetch and ListOffsets): the walk of
        ``iter_batches`` with the header fields it needs unpacked in place, no generator and
        no ``BatchHeader`` per batch. A header ``iter_batches`` would reject sends the scan
        to it from the start of that chunk, so that it raises its own error."""
        end = self._size
        pos = starting_position
        unpack = _SCAN_HEADER.unpack_from
        while end - pos >= ENTRY_HEADER_PREFIX:
            if end - pos < RECORD_BATCH_OVERHEAD:  # a legacy entry smaller than a v2 header, or a torn tail
                return self._search_for_offset_with_headers(target_offset, pos)
            buf = self.pread(pos, min(READ_CHUNK, end - pos))
            available = len(buf)
            if available < RECORD_BATCH_OVERHEAD:
                return None  # the file shrank under a reader
            rel = 0
            while available - rel >= RECORD_BATCH_OVERHEAD:
                base_offset, batch_length, magic, last_offset_delta = unpack(buf, rel)
                if magic != CURRENT_MAGIC or batch_length < _MIN_BATCH_LENGTH:
                    # a legacy entry (or a bad header, which the walk raises for)
                    return self._search_for_offset_with_headers(target_offset, pos + rel)
                size = batch_length + LOG_OVERHEAD
                if size > available - rel:
                    if rel == 0 and size > end - pos:
                        return None  # a trailing partial batch
                    if rel == 0:  # one batch larger than the chunk
                        last_offset = base_offset + last_offset_delta
                        if last_offset >= target_offset:
                            return LogOffsetPosition(last_offset, pos, size)
                        rel = size
                    break
                last_offset = base_offset + last_offset_delta
                if last_offset >= target_offset:
                    return LogOffsetPosition(last_offset, pos + rel, size)
                rel += size
            pos += rel
        return None

    def _search_for_offset_with_headers(self, target_offset: int,
                                        starting_position: int) -> LogOffsetPosition | None:
        for pos, header, _ in self.iter_batches(starting_position):
            if header.last_offset >= target_offset:
                return LogOffsetPosition(header.last_offset, pos, header.size_in_bytes)
        return None

    def search_for_timestamp(self, target_timestamp: int, starting_position: int,
                             starting_offset: int) -> TimestampAndOffset | None:
        """The first record from ``starting_position`` with timestamp >= target and offset
        >= ``starting_offset`` (only batches whose max timestamp reaches the target are
        decoded, one at a time)."""
        for pos, header, _ in self.iter_batches(starting_position):
            if header.max_timestamp >= target_timestamp and header.last_offset >= starting_offset:
                data = self.pread(pos, header.size_in_bytes)
                try:
                    records = decode_entry(data, 0, header, verify_crc=False)
                except DecodeError as exc:
                    raise CorruptRecordError(f"{self._path}: batch at position {pos}: {exc}") from exc
                for record in records:
                    if record.timestamp >= target_timestamp and record.offset >= starting_offset:
                        epoch = header.partition_leader_epoch
                        return TimestampAndOffset(
                            record.timestamp, record.offset,
                            None if epoch == NO_PARTITION_LEADER_EPOCH else epoch)
        return None

    def largest_timestamp_after(self, starting_position: int) -> TimestampAndOffset:
        max_ts, offset, epoch = NO_TIMESTAMP, -1, NO_PARTITION_LEADER_EPOCH
        for _, header, _ in self.iter_batches(starting_position):
            if header.max_timestamp > max_ts:
                max_ts, offset, epoch = header.max_timestamp, header.last_offset, header.partition_leader_epoch
        return TimestampAndOffset(max_ts, offset, None if epoch == NO_PARTITION_LEADER_EPOCH else epoch)

    def truncate_to(self, target_size: int) -> int:
        """Cut the file to ``target_size`` bytes; returns the bytes removed."""
        original = self._size
        if target_size > original or target_size < 0:
            raise ValueError(f"attempt to truncate log segment {self._path} to {target_size} "
                             f"bytes failed, size of this log segment is {original} bytes")
        if target_size < os.fstat(self._fd).st_size:
            self._size = target_size  # readers stop looking past the new end first
            os.ftruncate(self._fd, target_size)
        return original - target_size

    def trim(self) -> None:
        """Drop a preallocated tail past the written bytes."""
        self.truncate_to(self._size)

    def flush(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            self.trim()
            self.close_handlers()

    def close_handlers(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def delete_if_exists(self) -> bool:
        self.close_handlers()
        try:
            self._path.unlink()
            return True
        except FileNotFoundError:
            return False

    def rename_to(self, path: Path | str) -> None:
        path = Path(path)
        try:
            os.replace(self._path, path)
        finally:
            self._path = path

    def update_parent_dir(self, parent_dir: Path | str) -> None:
        self._path = Path(parent_dir) / self._path.name

    def __repr__(self) -> str:
        return f"FileRecords({str(self._path)!r}, size={self._size})"
