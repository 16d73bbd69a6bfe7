"""The sparse, memory-mapped segment indexes: ``OffsetIndex`` (.index) and ``TimeIndex``
(.timeindex), with their shared base ``AbstractIndex`` and ``LazyIndex``.

Owns: the byte layout of Kafka's index files, the lookup algorithm (binary search with
Kafka's "warm section", ``AbstractIndex.indexSlotRangeFor``; a probe is one
``unpack_from`` of the searched field), appends, truncation, and the
file lifecycle (preallocate while active, trim when the segment rolls or closes, rename,
delete). The segment (``segment.py``) decides *when* to add an entry.

On-disk format, big-endian, no header, no checksum (an index is rebuilt from the log
whenever it is in doubt)::

    .index      entry = 8 bytes, sorted by offset, strictly increasing
        offset  size  field
        0       4     relativeOffset    int32  = offset - segment base offset
        4       4     physicalPosition  int32  byte position of the batch in the .log

    .timeindex  entry = 12 bytes; timestamps and offsets never decrease
        0       8     timestamp         int64  the largest timestamp at or before ...
        8       4     relativeOffset    int32  ... this offset (KIP-33)

While a segment is active its index files are preallocated to ``max_index_size``
(segment.index.bytes, rounded down to a multiple of the entry size) and the tail is
zeros; ``trim_to_valid_size()`` shrinks a file to ``entries * entry_size`` when the segment
rolls or closes, so that a cleanly closed index is exactly its entries.

Opening an existing file: Kafka counts ``file size / entry size`` entries, so after an
unclean shutdown the preallocated zero tail counts as entries (Kafka relies on recovery
rebuilding the index). Here the count is the number of entries up to the last non-zero
one, then shortened while the last entry is not a valid successor of the one before
(negative, or not increasing): same result as Kafka for every trimmed file, and a usable
index for a preallocated one. ``sanity_check()`` raises ``CorruptIndexError`` on Kafka's
conditions (size not a multiple of the entry size, last offset below the base offset, a
time index whose last timestamp is below its first).

Invariants:
- every stored relative offset is in [0, 2**31 - 1]; an offset outside raises
  ``OffsetOverflowError`` (R16), never a wrapped value;
- ``OffsetIndex.append`` requires a strictly larger offset than the last entry,
  ``TimeIndex.maybe_append`` never lets timestamps or offsets decrease and appends only a
  timestamp larger than the last one;
- ``TimeIndex.is_full()`` keeps one slot free for the final entry written with
  ``skip_full_check=True`` when the segment rolls or closes (Kafka's reservation).

Thread-safety (Kafka's ``AbstractIndex`` model): one writer (the caller holds the log's
lock) and any number of readers.
- ``_lock`` serialises mutations (append, truncate, resize, flush, close).
- Readers (``lookup``, ``entry``, ``fetch_upper_bound_offset``, ``last_entry``) never take
  ``_lock``; an append does not block them. An append writes the entry's bytes into the
  file first and only then publishes the new entry count with a single attribute store;
  a reader loads the count once and reads only slots below it. The bytes are written
  with ``pwrite`` on a descriptor the index opens at its first append, not through the
  mapping, which is read-only (``_write_entry``: a mapped write to a file turned read-only
  is a SIGBUS); ``flush`` fsyncs the file. Under the GIL both
  threads' accesses are sequentially consistent (a thread switch is a full barrier and the
  store of the count is one atomic bytecode), so a reader that sees the count sees the
  bytes. Readers may see a stale count: they then miss the newest entry, which only makes
  the forward scan of the log a little longer.
- ``_remap_lock`` is taken by readers around their (short) use of the mmap and by the
  operations that replace or unmap it (resize, trim, close, delete). A reader therefore
  never touches an unmapped buffer, nor a page past a shrunk file's end (SIGBUS). This is
  Kafka's ``remapLock`` as a plain mutex: readers can only wait on a remap, which happens
  when a segment rolls, is truncated or closes, never on the append path.
- As in Kafka, a reader racing a truncation followed by new appends may read an entry of
  either generation; callers only read below the high watermark, and the log scan that
  follows every lookup re-validates batch headers.

``LazyIndex`` defers creating/mapping an index file to its first use (KIP-263), which
keeps restart fast and, because CPython's mmap holds a duplicated descriptor, keeps the
number of open files proportional to the segments actually used.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from ..record.limits import INT32_MAX
from .errors import CorruptIndexError, IndexFullError, InvalidOffsetError, OffsetOverflowError

__all__ = [
    "AbstractIndex", "OffsetIndex", "TimeIndex", "LazyIndex", "OffsetPosition",
    "TimestampOffset", "InvalidOffsetError", "IndexFullError", "DEFAULT_MAX_INDEX_SIZE",
    "NO_TIMESTAMP",
]

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # segment.index.bytes
NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP
# Kafka's warm section: the last 8 KiB of entries, touched by every near-the-end lookup so
# that they stay in the page cache (AbstractIndex.warmEntries).
WARM_SECTION_BYTES = 8192
# Bytes read per step when scanning an existing file backwards for its last non-zero byte.
_ZERO_SCAN_CHUNK = 64 * 1024
_ZERO_CHUNK = bytes(_ZERO_SCAN_CHUNK)

# .index entry: relativeOffset int32 @0 | physicalPosition int32 @4
OFFSET_ENTRY = struct.Struct(">ii")
# .timeindex entry: timestamp int64 @0 | relativeOffset int32 @8
TIME_ENTRY = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_new_tuple = tuple.__new__  # builds a NamedTuple from its values without the generated __new__


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class LoadedBytes(bytes):
    """An index file's bytes as read once, held in place of a mapping (the object-store
    reader's indexes, broker/log/reader.py); ``close`` stands for an mmap's."""

    def close(self) -> None:
        pass


def _round_down(number: int, factor: int) -> int:
    return factor * (number // factor)


class AbstractIndex:
    """The entry-format agnostic part: file, mmap, search, resize. Subclasses define the
    entry layout (``entry_size``, ``_key_at``, ``_value_at``, ``_parse``, and for the
    search ``_key_field`` / ``_value_field``: (unpack_from, offset in the entry, value
    added))."""

    entry_size: int = 0
    _key_field: tuple[Callable, int, int]
    _value_field: tuple[Callable, int, int]

    def __init__(self, file: Path | str, base_offset: int, max_index_size: int = -1,
                 writable: bool = True) -> None:
        self._lock = threading.RLock()
        self._remap_lock = threading.Lock()
        self._file = Path(file)
        self._base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._mmap: mmap.mmap | LoadedBytes | None = None
        self._write_fd: int | None = None  # opened by the first append (_write_entry)
        self._length = 0
        self._closed = False
        newly_created = self._create_and_map()
        self._max_entries = self._length // self.entry_size
        self._entries = 0 if newly_created else self._count_existing_entries()

    # --- file and mapping ---

    def _create_and_map(self) -> bool:
        newly_created = False
        if self._writable:
            try:
                fd = os.open(self._file, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                newly_created = True
            except FileExistsError:
                fd = os.open(self._file, os.O_RDWR)
        else:
            fd = os.open(self._file, os.O_RDONLY)
        try:
            if newly_created:
                if self._max_index_size < self.entry_size:
                    os.close(fd)
                    fd = -1
                    self._file.unlink(missing_ok=True)
                    raise ValueError(f"invalid max index size {self._max_index_size}")
                os.ftruncate(fd, _round_down(self._max_index_size, self.entry_size))
            self._length = os.fstat(fd).st_size
            self._mmap = self._map(fd, self._length)
        finally:
            if fd >= 0:
                os.close(fd)
        return newly_created

    def _map(self, fd: int, length: int) -> mmap.mmap | None:
        if length == 0:
            return None  # an empty file cannot be mapped; it holds no entries
        # read-only even in a writable index: entries are written with pwrite (_write_entry)
        return mmap.mmap(fd, length, access=mmap.ACCESS_READ)

    def _count_existing_entries(self) -> int:
        mm = self._mmap
        if mm is None:
            return 0
        size = self.entry_size
        end = _round_down(self._length, size)
        # Last non-zero byte, scanning backwards in chunks (bounded memory).
        pos = end
        last_nonzero = -1
        while pos > 0:
            start = max(0, pos - _ZERO_SCAN_CHUNK)
            chunk = mm[start:pos]
            if len(chunk) == _ZERO_SCAN_CHUNK and chunk == _ZERO_CHUNK:
                pos = start  # a memcmp: much faster than rstrip over a preallocated tail
                continue
            stripped = len(chunk.rstrip(b"\x00"))
            if stripped:
                last_nonzero = start + stripped - 1
                break
            pos = start
        n = (last_nonzero // size) + 1 if last_nonzero >= 0 else 0
        while n > 0 and not self._valid_tail(mm, n):
            n -= 1
        return n

    def _valid_tail(self, mm, n: int) -> bool:
        """Whether entry n-1 is a plausible successor of entry n-2 (subclass rules)."""
        raise NotImplementedError

    # --- properties ---

    @property
    def file(self) -> Path:
        return self._file

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def max_index_size(self) -> int:
        return self._max_index_size

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def length(self) -> int:
        """The file's length in bytes (preallocated or trimmed)."""
        return self._length

    def size_in_bytes(self) -> int:
        """Bytes actually used by entries."""
        return self.entry_size * self._entries

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    def update_parent_dir(self, parent_dir: Path | str) -> None:
        self._file = Path(parent_dir) / self._file.name

    # --- relative offsets (R16) ---

    def _to_relative(self, offset: int) -> int | None:
        rel = offset - self._base_offset
        if rel < 0 or rel > INT32_MAX:
            return None
        return rel

    def relative_offset(self, offset: int) -> int:
        rel = self._to_relative(offset)
        if rel is None:
            raise OffsetOverflowError(
                f"offset {offset} does not fit in an int32 relative to base offset "
                f"{self._base_offset} ({self._file})")
        return rel

    def can_append_offset(self, offset: int) -> bool:
        return self._to_relative(offset) is not None

    # --- search (AbstractIndex.indexSlotRangeFor) ---

    def _key_at(self, mm, n: int) -> int:
        raise NotImplementedError

    def _value_at(self, mm, n: int) -> int:
        raise NotImplementedError

    def _parse(self, mm, n: int):
        raise NotImplementedError

    def _slot_for(self, mm, n: int, target: int, by_value: bool, smallest_upper: bool) -> int:
        """Largest slot whose key (or value) is <= target, or with ``smallest_upper`` the
        smallest slot whose key/value is >= target; -1 when there is none.

        Searches the raw field (``_key_field`` / ``_value_field``: a struct, its offset in
        the entry, the base added to it) against ``target`` less that base, so that a probe
        is one ``unpack_from``, not a method call."""
        if n == 0 or mm is None:
            return -1
        unpack, field_offset, adjust = self._value_field if by_value else self._key_field
        target -= adjust
        stride = self.entry_size
        first_hot = max(0, n - 1 - WARM_SECTION_BYTES // stride)
        if unpack(mm, first_hot * stride + field_offset)[0] < target:
            lo, hi = first_hot, n - 1
        elif unpack(mm, field_offset)[0] > target:
            return 0 if smallest_upper else -1
        else:
            lo, hi = 0, first_hot
        while lo < hi:  # AbstractIndex.binarySearch
            mid = (lo + hi + 1) >> 1
            found = unpack(mm, mid * stride + field_offset)[0]
            if found > target:
                hi = mid - 1
            elif found < target:
                lo = mid
            else:
                return mid
        if not smallest_upper:
            return lo
        return -1 if lo == n - 1 else lo + 1

    def _readable(self):
        """(mmap, entry count) as a reader may use them; call under ``_remap_lock``."""
        mm = self._mmap
        if mm is None:
            return None, 0
        return mm, min(self._entries, self._max_entries)

    def entry(self, n: int):
        """The n-th entry (absolute offsets)."""
        with self._remap_lock:
            mm, count = self._readable()
            if n < 0 or n >= count:
                raise IndexError(f"entry {n} of index {self._file} which has {count} entries")
            return self._parse(mm, n)

    # --- mutation ---

    def _require_open(self) -> mmap.mmap | LoadedBytes:
        mm = self._mmap
        if mm is None:
            if self._closed:
                raise ValueError(f"index {self._file} is closed")
            raise IndexFullError(f"index {self._file} has no space (size 0)")
        return mm

    def _write_entry(self, data: bytes, pos: int) -> None:
        """Write an entry's bytes with ``pwrite``, not through the mapping: a write fault on
        a mapped page of a file that became read-only (the immutable attribute, a file
        system remounted read-only or shut down after an I/O error) kills the process with
        SIGBUS, where ``pwrite`` raises an OSError that takes the log dir offline (E6).
        The mapping sees the bytes at once (one page cache)."""
        self._require_open()
        fd = self._write_fd
        if fd is None:
            fd = self._write_fd = os.open(self._file, os.O_WRONLY)
        os.pwrite(fd, data, pos)

    def _truncate_to_entries(self, entries: int) -> None:
        with self._lock:
            self._entries = entries
            self._on_entries_changed()

    def _on_entries_changed(self) -> None:
        """Refresh cached last-entry fields after a truncation or resize."""

    def truncate(self) -> None:
        """Remove every entry (the file keeps its size)."""
        self._truncate_to_entries(0)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        raise NotImplementedError

    def resize(self, new_size: int) -> bool:
        """Set the file (and mapping) to ``new_size`` rounded down to whole entries. Used
        to trim (roll/close) and to grow back to ``max_index_size`` (reset, truncation,
        reopening the active segment). Returns whether anything changed."""
        with self._lock:
            rounded = _round_down(max(new_size, 0), self.entry_size)
            if self._closed:
                raise ValueError(f"index {self._file} is closed")
            if self._length == rounded:
                return False
            with self._remap_lock:
                old, self._mmap = self._mmap, None
                if old is not None:
                    old.close()
                fd = os.open(self._file, os.O_RDWR)
                try:
                    os.ftruncate(fd, rounded)
                    self._length = rounded
                    self._mmap = self._map(fd, rounded)
                finally:
                    os.close(fd)
                self._max_entries = rounded // self.entry_size
                if self._entries > self._max_entries:
                    self._entries = self._max_entries
            self._on_entries_changed()
            return True

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its entries (roll, close)."""
        with self._lock:
            if not self._closed and self._writable:
                self.resize(self.entry_size * self._entries)

    def reset(self) -> None:
        """Remove every entry and grow the file back to ``max_index_size``."""
        with self._lock:
            self.truncate()
            self.resize(self._max_index_size)

    def flush(self) -> None:
        """fsync the file: the entries ``pwrite`` put in the page cache reach the disk."""
        with self._lock:
            if self._closed or not self._writable:
                return
            fd = self._write_fd
            if fd is not None:
                os.fsync(fd)
                return
            try:  # entries an earlier instance of this file may have written
                fd = os.open(self._file, os.O_RDONLY)
            except FileNotFoundError:
                return  # renamed or deleted under us (a segment being deleted or swapped)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename_to(self, path: Path | str) -> None:
        path = Path(path)
        try:
            os.replace(self._file, path)
        finally:
            self._file = path

    def close(self) -> None:
        """Trim to the valid size and unmap."""
        with self._lock:
            if self._closed:
                return
            self.trim_to_valid_size()
            self.close_handler()

    def close_handler(self) -> None:
        """Unmap without touching the file (also used when the disk may have failed)."""
        with self._lock:
            with self._remap_lock:
                old, self._mmap = self._mmap, None
                self._closed = True
                if old is not None:
                    old.close()
            fd, self._write_fd = self._write_fd, None
            if fd is not None:
                os.close(fd)

    def delete_if_exists(self) -> bool:
        self.close_handler()
        try:
            self._file.unlink()
            return True
        except FileNotFoundError:
            return False

    def sanity_check(self) -> None:
        raise NotImplementedError

    def _check_length(self) -> None:
        if self._length % self.entry_size != 0:
            raise CorruptIndexError(
                f"index file {self._file} is corrupt, found {self._length} bytes which is not "
                f"a multiple of {self.entry_size}")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(file={str(self._file)!r}, base_offset={self._base_offset}, "
                f"entries={self._entries}, max_entries={self._max_entries})")


class OffsetIndex(AbstractIndex):
    """Offset -> position of the batch in the .log; sparse (one entry per
    index.interval.bytes of log)."""

    entry_size = OFFSET_ENTRY.size

    def __init__(self, file: Path | str, base_offset: int, max_index_size: int = -1,
                 writable: bool = True) -> None:
        self._key_field = (_INT32.unpack_from, 0, base_offset)  # offset = base + relativeOffset
        self._value_field = (_INT32.unpack_from, 4, 0)  # physicalPosition
        super().__init__(file, base_offset, max_index_size, writable)
        self._last_offset = self._last_entry().offset

    def _key_at(self, mm, n: int) -> int:
        return self._base_offset + _INT32.unpack_from(mm, n * 8)[0]

    def _value_at(self, mm, n: int) -> int:
        return _INT32.unpack_from(mm, n * 8 + 4)[0]

    def _parse(self, mm, n: int) -> OffsetPosition:
        rel, pos = OFFSET_ENTRY.unpack_from(mm, n * 8)
        return OffsetPosition(self._base_offset + rel, pos)

    def _valid_tail(self, mm, n: int) -> bool:
        rel, pos = OFFSET_ENTRY.unpack_from(mm, (n - 1) * 8)
        if rel < 0 or pos < 0:
            return False
        if n == 1:
            return True
        prev_rel, prev_pos = OFFSET_ENTRY.unpack_from(mm, (n - 2) * 8)
        return rel > prev_rel and pos > prev_pos

    def _last_entry(self) -> OffsetPosition:
        with self._remap_lock:
            mm, n = self._readable()
            if n == 0:
                return OffsetPosition(self._base_offset, 0)
            return self._parse(mm, n - 1)

    def _on_entries_changed(self) -> None:
        self._last_offset = self._last_entry().offset

    @property
    def last_offset(self) -> int:
        """The last indexed offset, or the base offset when the index is empty."""
        return self._last_offset

    def sanity_check(self) -> None:
        if self._entries != 0 and self._last_offset < self._base_offset:
            raise CorruptIndexError(
                f"corrupt index found, index file {self._file} has non-zero size but the last "
                f"offset is {self._last_offset} which is less than the base offset {self._base_offset}")
        self._check_length()

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the greatest offset <= ``target_offset``, or (base offset, 0)."""
        with self._remap_lock:
            mm, n = self._readable()
            slot = self._slot_for(mm, n, target_offset, False, False)
            if slot == -1:
                return OffsetPosition(self._base_offset, 0)
            return self._parse(mm, slot)

    def fetch_upper_bound_offset(self, fetch_offset: OffsetPosition, fetch_size: int) -> OffsetPosition | None:
        """An entry guaranteed to lie past ``fetch_offset.position + fetch_size`` (not
        necessarily the first such), or None."""
        with self._remap_lock:
            mm, n = self._readable()
            slot = self._slot_for(mm, n, fetch_offset.position + fetch_size, True, True)
            if slot == -1:
                return None
            return self._parse(mm, slot)

    def append(self, offset: int, position: int) -> None:
        """Add (offset -> position); ``offset`` must exceed the last entry's."""
        with self._lock:  # checks inlined: this runs for most appended batches
            n = self._entries
            if n >= self._max_entries:
                raise IndexFullError(
                    f"attempt to append to a full index {self._file} (entries = {self._entries})")
            if n != 0 and offset <= self._last_offset:
                raise InvalidOffsetError(
                    f"attempt to append an offset {offset} to position {n} no larger than the "
                    f"last offset appended ({self._last_offset}) to {self._file}")
            if not 0 <= position <= INT32_MAX:
                raise ValueError(f"position {position} does not fit in an int32")
            rel = offset - self._base_offset
            if rel < 0 or rel > INT32_MAX:
                self.relative_offset(offset)  # raises OffsetOverflowError
            self._write_entry(OFFSET_ENTRY.pack(rel, position), n * 8)
            self._last_offset = offset
            self._entries = n + 1  # publish after the bytes (see module docstring)

    def append_many(self, entries: list[tuple[int, int]]) -> None:
        """``append`` of each (offset, position) in order, checked first and written with
        one ``pwrite``: all of them, or none and the error the first bad one raises."""
        with self._lock:
            n = self._entries
            if n + len(entries) > self._max_entries:
                raise IndexFullError(f"attempt to append {len(entries)} entries to {self._file}, which has room "
                                     f"for {self._max_entries - n} (entries = {n})")
            last = self._last_offset
            base = self._base_offset
            parts = []
            pack = OFFSET_ENTRY.pack
            for i, (offset, position) in enumerate(entries):
                if (n != 0 or i != 0) and offset <= last:
                    raise InvalidOffsetError(
                        f"attempt to append an offset {offset} to position {n + i} no larger than the "
                        f"last offset appended ({last}) to {self._file}")
                if not 0 <= position <= INT32_MAX:
                    raise ValueError(f"position {position} does not fit in an int32")
                rel = offset - base
                if rel < 0 or rel > INT32_MAX:
                    self.relative_offset(offset)  # raises OffsetOverflowError
                parts.append(pack(rel, position))
                last = offset
            if parts:
                self._write_entry(b"".join(parts), n * 8)
                self._last_offset = last
                self._entries = n + len(parts)  # publish after the bytes

    def truncate_to(self, offset: int) -> None:
        with self._lock:  # excludes remaps, so the mapping stays valid here
            mm, n = self._readable()
            slot = self._slot_for(mm, n, offset, False, False)
            # no entry <= offset: drop all; an entry for exactly offset: drop it and the
            # rest; otherwise drop everything after the next smaller entry
            if slot < 0:
                new_entries = 0
            elif self._key_at(mm, slot) == offset:
                new_entries = slot
            else:
                new_entries = slot + 1
            self._truncate_to_entries(new_entries)


class TimeIndex(AbstractIndex):
    """Timestamp -> offset: an entry (T, O) says the largest timestamp in the segment at or
    before offset O is T (KIP-33)."""

    entry_size = TIME_ENTRY.size

    def __init__(self, file: Path | str, base_offset: int, max_index_size: int = -1,
                 writable: bool = True) -> None:
        self._key_field = (_INT64.unpack_from, 0, 0)  # timestamp
        self._value_field = (_INT32.unpack_from, 8, base_offset)  # offset = base + relativeOffset
        super().__init__(file, base_offset, max_index_size, writable)
        self._last = self._last_entry_from_file()

    def _key_at(self, mm, n: int) -> int:
        return _INT64.unpack_from(mm, n * 12)[0]

    def _value_at(self, mm, n: int) -> int:
        return self._base_offset + _INT32.unpack_from(mm, n * 12 + 8)[0]

    def _parse(self, mm, n: int) -> TimestampOffset:
        ts, rel = TIME_ENTRY.unpack_from(mm, n * 12)
        return TimestampOffset(ts, self._base_offset + rel)

    def _valid_tail(self, mm, n: int) -> bool:
        ts, rel = TIME_ENTRY.unpack_from(mm, (n - 1) * 12)
        if rel < 0:
            return False
        if n == 1:
            return True
        prev_ts, prev_rel = TIME_ENTRY.unpack_from(mm, (n - 2) * 12)
        return ts > prev_ts and rel >= prev_rel

    def _last_entry_from_file(self) -> TimestampOffset:
        with self._remap_lock:
            mm, n = self._readable()
            if n == 0:
                return TimestampOffset(NO_TIMESTAMP, self._base_offset)
            return self._parse(mm, n - 1)

    def _on_entries_changed(self) -> None:
        self._last = self._last_entry_from_file()

    def is_full(self) -> bool:
        # one slot is kept for the entry written when the segment rolls or closes
        return self._entries >= self._max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (NO_TIMESTAMP, base offset) when empty."""
        return self._last

    def sanity_check(self) -> None:
        last_ts, last_offset = self._last
        with self._remap_lock:
            mm, n = self._readable()
            first_ts = self._key_at(mm, 0) if n else None
        if first_ts is not None and last_ts < first_ts:  # first_ts is None when empty
            raise CorruptIndexError(
                f"corrupt time index found, time index file {self._file} has non-zero size but "
                f"the last timestamp is {last_ts} which is less than the first timestamp {first_ts}")
        if n != 0 and last_offset < self._base_offset:
            raise CorruptIndexError(
                f"corrupt time index found, time index file {self._file} has non-zero size but "
                f"the last offset is {last_offset} which is less than the first offset {self._base_offset}")
        self._check_length()

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the greatest timestamp <= ``target_timestamp``, or
        (NO_TIMESTAMP, base offset) when the target precedes every entry."""
        with self._remap_lock:
            mm, n = self._readable()
            slot = self._slot_for(mm, n, target_timestamp, False, False)
            if slot == -1:
                return TimestampOffset(NO_TIMESTAMP, self._base_offset)
            return self._parse(mm, slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if ``timestamp`` exceeds the last entry's. Equal
        entries are ignored (a segment closed or rolled twice); a smaller offset or
        timestamp is an error. ``skip_full_check`` may use the reserved last slot."""
        with self._lock:  # checks inlined: this runs for most appended batches
            n = self._entries
            if not skip_full_check and n >= self._max_entries - 1:  # is_full()
                raise IndexFullError(
                    f"attempt to append to a full time index {self._file} (entries = {n})")
            last_ts, last_offset = self._last
            if n != 0 and offset < last_offset:
                raise InvalidOffsetError(
                    f"attempt to append an offset ({offset}) to slot {n} no larger than the last "
                    f"offset appended ({last_offset}) to {self._file}")
            if n != 0 and timestamp < last_ts:
                raise InvalidOffsetError(
                    f"attempt to append a timestamp ({timestamp}) to slot {n} no larger than the "
                    f"last timestamp appended ({last_ts}) to {self._file}")
            if timestamp > last_ts:
                if n >= self._max_entries:  # even the reserved slot is used
                    raise IndexFullError(
                        f"attempt to append to a full time index {self._file} (entries = {n})")
                rel = offset - self._base_offset
                if rel < 0 or rel > INT32_MAX:
                    self.relative_offset(offset)  # raises OffsetOverflowError
                self._write_entry(TIME_ENTRY.pack(timestamp, rel), n * 12)
                self._last = _new_tuple(TimestampOffset, (timestamp, offset))
                self._entries = n + 1  # publish after the bytes

    def append_many(self, entries: list[tuple[int, int]]) -> None:
        """``maybe_append`` of each (timestamp, offset) in order, for entries of strictly
        increasing timestamps above the last entry's, checked first and written with one
        ``pwrite``: all of them, or none and the error the first bad one raises."""
        with self._lock:
            n = self._entries
            if n + len(entries) > self._max_entries - 1:  # is_full() before each
                raise IndexFullError(f"attempt to append {len(entries)} entries to a time index {self._file} "
                                     f"with room for {max(self._max_entries - 1 - n, 0)} (entries = {n})")
            last_ts, last_offset = self._last
            base = self._base_offset
            parts = []
            pack = TIME_ENTRY.pack
            for i, (timestamp, offset) in enumerate(entries):
                if (n != 0 or i != 0) and offset < last_offset:
                    raise InvalidOffsetError(
                        f"attempt to append an offset ({offset}) to slot {n + i} no larger than the last "
                        f"offset appended ({last_offset}) to {self._file}")
                if timestamp <= last_ts:
                    raise InvalidOffsetError(
                        f"attempt to append a timestamp ({timestamp}) to slot {n + i} no larger than the "
                        f"last timestamp appended ({last_ts}) to {self._file}")
                rel = offset - base
                if rel < 0 or rel > INT32_MAX:
                    self.relative_offset(offset)  # raises OffsetOverflowError
                parts.append(pack(timestamp, rel))
                last_ts, last_offset = timestamp, offset
            if parts:
                self._write_entry(b"".join(parts), n * 12)
                self._last = _new_tuple(TimestampOffset, (last_ts, last_offset))
                self._entries = n + len(parts)  # publish after the bytes

    def truncate_to(self, offset: int) -> None:
        with self._lock:  # excludes remaps
            mm, n = self._readable()
            slot = self._slot_for(mm, n, offset, True, False)
            if slot < 0:
                new_entries = 0
            elif self._value_at(mm, slot) == offset:
                new_entries = slot
            else:
                new_entries = slot + 1
            self._truncate_to_entries(new_entries)


class LazyIndex:
    """An index opened (file created and mapped) on first ``get()`` (Kafka's LazyIndex)."""

    def __init__(self, file: Path | str, factory: Callable[[Path], AbstractIndex]) -> None:
        self._lock = threading.Lock()
        self._file = Path(file)
        self._factory = factory
        self._index: AbstractIndex | None = None

    @classmethod
    def for_offset(cls, file: Path | str, base_offset: int,
                   max_index_size: int = DEFAULT_MAX_INDEX_SIZE, writable: bool = True) -> LazyIndex:
        return cls(file, lambda f: OffsetIndex(f, base_offset, max_index_size, writable))

    @classmethod
    def for_time(cls, file: Path | str, base_offset: int,
                 max_index_size: int = DEFAULT_MAX_INDEX_SIZE, writable: bool = True) -> LazyIndex:
        return cls(file, lambda f: TimeIndex(f, base_offset, max_index_size, writable))

    @property
    def file(self) -> Path:
        index = self._index
        return index.file if index is not None else self._file

    @property
    def is_loaded(self) -> bool:
        return self._index is not None

    def get(self):
        index = self._index
        if index is None:
            with self._lock:
                if self._index is None:
                    self._index = self._factory(self._file)
                index = self._index
        return index

    def update_parent_dir(self, parent_dir: Path | str) -> None:
        with self._lock:
            self._file = Path(parent_dir) / self._file.name
            if self._index is not None:
                self._index.update_parent_dir(parent_dir)

    def rename_to(self, path: Path | str) -> None:
        path = Path(path)
        with self._lock:
            try:
                if self._index is not None:
                    self._index.rename_to(path)
                elif self._file.exists():
                    os.replace(self._file, path)
            finally:
                self._file = path

    def delete_if_exists(self) -> bool:
        with self._lock:
            if self._index is not None:
                return self._index.delete_if_exists()
            try:
                self._file.unlink()
                return True
            except FileNotFoundError:
                return False

    def close(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.close()

    def close_handler(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.close_handler()
