"""Read-only access to a Kafka log directory: a live broker's, a copy or a backup.

Owns: ``LogDirReader`` (the partitions under one or more log directories, their log start
offsets from ``log-start-offset-checkpoint``) and ``PartitionReader`` (one partition
directory: its segments, log start and end offsets, offset -> byte position through the
offset index, timestamp -> offset through the time index, the aborted transactions of
an offset range from the ``.txnindex`` files, and the last stable offset from the newest
``.snapshot`` file and the batch headers after it). The bulk readers (``spark_kafkalog``'s
direct mode) decode the byte ranges it returns; this module decodes no record except in a
timestamp search, one batch at a time.

Nothing here creates, recovers, locks or modifies a file: every file is opened
``O_RDONLY`` (indexes are mapped read-only through ``index.py`` with ``writable=False``),
so the directory may belong to a running broker, sit on a read-only mount, or be a copy
taken while the broker was writing. What that implies, as Kafka's own recovery would
decide it:

- the last segment may end with a torn or zero-filled tail: the log end offset and the
  segment's valid end come from its last offset-index entry followed by a walk of batch
  headers (sizes, offsets increasing, CRC-32C) that stops at the first batch that fails;
- an index may be missing, empty, preallocated or stale: a lookup whose entry does not
  point at a plausible batch header falls back to the start of the segment, a time index
  that fails its sanity check is not used (the timestamp search then walks headers);
- ``log-start-offset-checkpoint`` is written periodically, so it may lag: the log start
  offset is the larger of it and the first segment's base offset;
- retention may delete a segment after it was listed: reads then fail with
  ``FileNotFoundError`` and the caller decides (data loss).

Indexes are read into memory (one ``pread`` each, when first needed; a preallocated index
up to its first hole), never mapped: the broker trims the active segment's preallocated
index when it rolls the segment, and a page of a mapping past the file's new end would
kill the reading process with SIGBUS.

Segment files are ``<20-digit base offset>.log`` (``files.py``); ``.deleted`` and
``.cleaned`` files and ``-delete`` / ``-future`` / ``-stray`` directories are ignored. A
``<base>.log.swap`` file is read as a live segment, as Kafka's recovery completes it: the
log cleaner renames its new segment ``.cleaned`` -> ``.swap``, then the segments it
replaces -> ``.deleted``, then ``.swap`` -> ``.log`` (``LocalLog.replace_segments``), so a
listing taken between the last two steps holds the cleaned offsets only under the
``.swap`` name. The live segments whose base offsets lie in a ``.swap`` segment's range
[base, its next offset) are left out of the listing (either copy of those offsets is a
valid view: cleaning never changes a record, it only removes some); its indexes are read
under their ``.swap`` names too.

A prefix written by the broker's tiered storage (``broker.log.remote``: Kafka's file
names plus one ``<base>.remote-segment.json`` manifest per segment, written last and
deleted first) reads like a log directory; there a segment exists only when its manifest
does, so a ``.log`` without one (a copy or a deletion cut short by a crash) is left out,
and in-progress ``*.tmp-*`` writes never match a segment name.

Where the files are: a ``storage.Storage`` (``storage.py``): the local file system
(``LOCAL``, the default) or an object store (``s3://``, ``gs://``, ``abfs://``,
``hdfs://`` through pyarrow) holding a copy or a backup of a log directory in the same
layout. Every read here is positional: the indexes are read whole (they are small), a
segment only at the positions a lookup or a header walk needs (one ranged request each on
an object store), never whole. ``LogDirReader`` takes paths or URIs and the store's
configuration (``storage.open_location``).

Thread-safety: a ``PartitionReader`` lists its segments once, at construction (a local
directory until two listings name the same files: a live broker renames files while it is
listed, and readdir may miss an entry renamed meanwhile), and caches the tail scan and
opened indexes; use one per thread (they are cheap). ``LogDirReader`` only lists
directories and may be shared once built.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from ..record.batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    CURRENT_MAGIC,
    H_ATTRIBUTES,
    H_BASE_OFFSET,
    H_CRC,
    H_LAST_OFFSET_DELTA,
    H_PRODUCER_ID,
    HEADER,
    LOG_ENTRY_PREFIX,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
    crc32c,
)
from ..record.entries import decode_entry, entry_header
from ..record.errors import DecodeError
from . import files
from .errors import CorruptIndexError, CorruptRecordError, CorruptSnapshotError
from .index import AbstractIndex, LoadedBytes, OffsetIndex, TimeIndex
from .producer_state import decode_snapshot
from .remote.metadata import MANIFEST_SUFFIX
from .storage import LOCAL, SegmentFile, Storage, open_location
from .txn_index import ABORTED_TXN_SIZE, AbortedTxn

__all__ = ["LogDirReader", "PartitionReader", "SegmentInfo", "SegmentRange", "AbortedTxn"]

log = logging.getLogger(__name__)

_SEGMENT_RE = re.compile(r"^(\d{20})\.log(\.swap)?$")
# Bytes read per step of a header walk: a few batches' headers at once when batches are
# small, one pread per header when they are large.
_WALK_CHUNK = 64 * 1024
# Entries of a .txnindex read per step (bounded memory whatever the file's size).
_TXN_ENTRIES_PER_READ = 4096


class SegmentInfo(NamedTuple):
    """A segment as listed: base offset, the ``.log`` path (in its storage) and its size
    at listing time; ``extra`` is ``.swap`` for a segment being swapped in by the cleaner
    (its files all carry that suffix), else empty."""
    base_offset: int
    path: PurePosixPath
    size: int
    extra: str = ""


class SegmentRange(NamedTuple):
    """The bytes of one segment to read for an offset range: ``[start_position,
    end_position)`` of ``path``. The first batch at ``start_position`` may begin before
    the range's start offset (index entries are sparse); the bytes may run past the
    range's end offset (the decoder stops at the first batch at or past it). ``size``:
    the file's size when it was listed."""
    path: PurePosixPath
    base_offset: int
    start_position: int
    end_position: int
    size: int | None = None


class _Tail(NamedTuple):
    valid_end: int      # byte position after the last valid batch of the last segment
    next_offset: int    # the log end offset


def _entry_next_offset(buf, pos: int) -> tuple[int, int, int] | None:
    """(size, first offset, next offset) of the entry whose header starts at ``pos`` of
    ``buf`` (at least a v2 header's bytes, or 12 + 5 for a legacy entry), None when the
    header is not a plausible entry."""
    base, length = LOG_ENTRY_PREFIX.unpack_from(buf, pos)
    magic = buf[pos + MAGIC_OFFSET]
    if magic == CURRENT_MAGIC:
        if len(buf) - pos < RECORD_BATCH_OVERHEAD or length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            return None
        h = HEADER.unpack_from(buf, pos)
        delta = h[H_LAST_OFFSET_DELTA]
        if delta < 0:
            return None
        return length + LOG_OVERHEAD, base, base + delta + 1
    if magic in (0, 1):
        # legacy: the offset is the wrapper's (last) offset; 14 bytes is the smallest message
        if length < 14:
            return None
        return length + LOG_OVERHEAD, base, base + 1
    return None


class PartitionReader:
    """One partition directory ``<topic>-<partition>``, read only (see module docstring).

    ``log_start_offset_checkpoint``: the partition's entry of its log directory's
    ``log-start-offset-checkpoint``, if known (``LogDirReader`` passes it); when None the
    file beside the partition directory is read. ``storage``: where ``directory`` is
    (default: the local file system)."""

    def __init__(self, directory: PurePosixPath | str, log_start_offset_checkpoint: int | None = None,
                 *, storage: Storage = LOCAL, _read_checkpoint: bool = True) -> None:
        self.storage = storage
        self.directory = storage.path(str(directory))
        parsed = files.parse_partition_dir_name(self.directory.name)
        if parsed is None:
            raise ValueError(f"{self.directory} is not a partition directory (<topic>-<partition>)")
        self.topic, self.partition = parsed
        if log_start_offset_checkpoint is None and _read_checkpoint:
            log_start_offset_checkpoint = _checkpoint_entry(storage, self.directory.parent, self.topic,
                                                            self.partition)
        self._checkpoint = log_start_offset_checkpoint
        self._listed: dict[str, int] = {}  # file name -> size, as listed
        self.segments: list[SegmentInfo] = _list_segments(storage, self.directory, self._listed)
        self._tail: _Tail | None = None
        self._offset_indexes: dict[int, OffsetIndex | None] = {}
        self._time_indexes: dict[int, TimeIndex | None] = {}

    def __repr__(self) -> str:
        return f"PartitionReader({self.storage.uri(self.directory)!r}, segments={len(self.segments)})"

    # --- boundaries ---

    @property
    def log_end_offset(self) -> int:
        """The offset after the last valid batch (Kafka's LEO as recovery would find it)."""
        if not self.segments:
            return self._checkpoint or 0
        return self._scan_tail().next_offset

    @property
    def log_start_offset(self) -> int:
        """max(first segment's base offset, the checkpointed log start offset), never
        above the log end offset."""
        first = self.segments[0].base_offset if self.segments else 0
        start = max(first, self._checkpoint or 0)
        return min(start, self.log_end_offset)

    def _segment_end_offset(self, i: int) -> int:
        """The offset after segment ``i`` (the next segment's base, or the LEO)."""
        if i + 1 < len(self.segments):
            return self.segments[i + 1].base_offset
        return self.log_end_offset

    def _valid_end(self, i: int) -> int:
        if i == len(self.segments) - 1:
            return self._scan_tail().valid_end
        return self.segments[i].size

    def _scan_tail(self) -> _Tail:
        if self._tail is None:
            self._tail = self._compute_tail()
        return self._tail

    def _compute_tail(self) -> _Tail:
        seg = self.segments[-1]
        start = self._floor_position(len(self.segments) - 1, 1 << 62)
        with self.storage.open(seg.path, seg.size) as f:
            size = f.size
            tail = self._walk_valid(f, start, size, seg.base_offset)
            if tail is None and start:
                tail = self._walk_valid(f, 0, size, seg.base_offset)
        if tail is None:
            tail = _Tail(0, seg.base_offset)
        return tail

    @staticmethod
    def _walk_valid(f: SegmentFile, pos: int, size: int, base_offset: int) -> _Tail | None:
        """Walk whole entries from ``pos`` checking sizes, increasing offsets and (v2) CRCs;
        the position and next offset after the last good one. None when the very first
        entry is not valid (the start position came from a bad index entry)."""
        next_offset = base_offset
        first = True
        while size - pos >= LOG_OVERHEAD + 5:
            head = f.read_at(pos, RECORD_BATCH_OVERHEAD)
            if len(head) < LOG_OVERHEAD + 5:
                break
            parsed = _entry_next_offset(head, 0)
            if parsed is None:
                break
            entry_size, first_offset, nxt = parsed
            if entry_size > size - pos or first_offset < next_offset:
                break
            if head[MAGIC_OFFSET] == CURRENT_MAGIC:
                body = f.read_at(pos, entry_size)
                if len(body) < entry_size or crc32c(memoryview(body)[ATTRIBUTES_OFFSET:]) != \
                        HEADER.unpack_from(body, 0)[H_CRC]:
                    break
            pos += entry_size
            next_offset = nxt
            first = False
        if first and pos != 0 and size - pos >= LOG_OVERHEAD + 5:
            return None
        return _Tail(pos, next_offset)

    # --- indexes ---

    def _offset_index(self, i: int) -> OffsetIndex | None:
        if i not in self._offset_indexes:
            seg = self.segments[i]
            self._offset_indexes[i] = self._open_index(OffsetIndex, files.offset_index_file(
                self.directory, seg.base_offset, seg.extra), seg.base_offset)
        return self._offset_indexes[i]

    def _time_index(self, i: int) -> TimeIndex | None:
        if i not in self._time_indexes:
            seg = self.segments[i]
            self._time_indexes[i] = self._open_index(TimeIndex, files.time_index_file(
                self.directory, seg.base_offset, seg.extra), seg.base_offset)
        return self._time_indexes[i]

    def _listed_size(self, path: PurePosixPath) -> tuple[bool, int | None]:
        """(may exist, size as listed): a file an object store's listing did not show is
        not asked for (no request); a local one is looked for (it may be newer)."""
        size = self._listed.get(path.name)
        return (size is not None or self.storage.is_local), size

    def _open_index(self, cls, path: PurePosixPath, base_offset: int):
        exists, size = self._listed_size(path)
        return _open_index(self.storage, cls, path, base_offset, size) if exists else None

    def _floor_position(self, i: int, offset: int) -> int:
        """A byte position in segment ``i`` at or before the batch holding ``offset``: the
        offset index's floor entry when it points at a plausible batch, else 0."""
        index = self._offset_index(i)
        if index is None:
            return 0
        seg = self.segments[i]
        try:
            entry = index.lookup(offset)
        except (ValueError, IndexError):
            return 0
        pos = entry.position
        if pos <= 0 or pos + RECORD_BATCH_OVERHEAD > seg.size:
            return 0
        with self.storage.open(seg.path, seg.size) as f:
            head = f.read_at(pos, RECORD_BATCH_OVERHEAD)
        if len(head) < LOG_OVERHEAD + 5:
            return 0
        parsed = _entry_next_offset(head, 0)
        if parsed is None or not seg.base_offset <= parsed[1] <= offset:
            return 0
        return pos

    def _ceiling_position(self, i: int, end_offset: int, start_pos: int, valid_end: int) -> int:
        """A byte position in segment ``i`` where a (v2) batch whose first offset is at or
        past ``end_offset`` starts, from the offset index, checked against the batch header
        found there; ``valid_end`` when the index gives none or its entry is not
        plausible. Index entries map an offset of a batch (Kafka: its last) to the batch's
        position, so the entry after the first one at or past ``end_offset - 1`` starts a
        batch whose offsets all lie past it."""
        index = self._offset_index(i)
        if index is None or index.entries < 2:
            return valid_end
        lo, hi = 0, index.entries
        while lo < hi:
            mid = (lo + hi) // 2
            if index.entry(mid).offset >= end_offset - 1:
                hi = mid
            else:
                lo = mid + 1
        if lo + 1 >= index.entries:
            return valid_end
        pos = index.entry(lo + 1).position
        if pos <= start_pos or pos + RECORD_BATCH_OVERHEAD > valid_end:
            return valid_end
        seg = self.segments[i]
        with self.storage.open(seg.path, seg.size) as f:
            head = f.read_at(pos, RECORD_BATCH_OVERHEAD)
        if len(head) < RECORD_BATCH_OVERHEAD or head[MAGIC_OFFSET] != CURRENT_MAGIC:
            return valid_end
        parsed = _entry_next_offset(head, 0)
        if parsed is None or parsed[1] < end_offset or pos + parsed[0] > valid_end:
            return valid_end
        return pos

    def segment_index_for(self, offset: int) -> int:
        """Index in ``segments`` of the segment holding ``offset`` (the floor by base
        offset); -1 when ``offset`` precedes every segment."""
        lo, hi = 0, len(self.segments) - 1
        found = -1
        while lo <= hi:
            mid = (lo + hi) // 2
            if self.segments[mid].base_offset <= offset:
                found, lo = mid, mid + 1
            else:
                hi = mid - 1
        return found

    # --- ranges ---

    def segment_ranges(self, start_offset: int, end_offset: int) -> list[SegmentRange]:
        """The byte ranges, segment by segment, holding offsets [start_offset, end_offset):
        from the offset index's floor position of ``start_offset`` to, in the segment
        holding ``end_offset``, the index's first checked position past it (else the
        segment's valid end), so that a reader of an object store fetches about the range's
        bytes and no more."""
        out: list[SegmentRange] = []
        if start_offset >= end_offset or not self.segments:
            return out
        first = max(self.segment_index_for(start_offset), 0)
        for i in range(first, len(self.segments)):
            seg = self.segments[i]
            if seg.base_offset >= end_offset:
                break
            if i + 1 < len(self.segments) and self.segments[i + 1].base_offset <= start_offset:
                continue
            start_pos = self._floor_position(i, start_offset) if start_offset > seg.base_offset else 0
            end_pos = self._valid_end(i)
            if i + 1 == len(self.segments) or self.segments[i + 1].base_offset >= end_offset:
                end_pos = self._ceiling_position(i, end_offset, start_pos, end_pos)
            if end_pos > start_pos:
                out.append(SegmentRange(seg.path, seg.base_offset, start_pos, end_pos, seg.size))
        return out

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """The aborted transactions with records in [start_offset, end_offset), from the
        ``.txnindex`` of the segment holding ``start_offset`` onwards, stopping once an
        entry's last stable offset reaches ``end_offset`` (Kafka's
        ``collectAbortedTransactions``: no later abort can reach back into the range)."""
        found: list[AbortedTxn] = []
        if start_offset >= end_offset:
            return found
        first = max(self.segment_index_for(start_offset), 0)
        for seg in self.segments[first:]:
            path = files.txn_index_file(self.directory, seg.base_offset, seg.extra)
            exists, size = self._listed_size(path)
            if not exists:
                continue
            for txn in _iter_txn_index(self.storage, path, size):
                if txn.last_offset >= start_offset and txn.first_offset < end_offset:
                    found.append(txn)
                if txn.last_stable_offset >= end_offset:
                    return found
        return found

    def last_stable_offset(self) -> int:
        """The first offset of the oldest transaction still open at the log end offset
        (transactional data of a producer with no COMMIT/ABORT marker after it), else the
        log end offset: what a read_committed ListOffsets(latest) answers. Found from the
        newest readable producer snapshot at or below the log end offset (the broker
        writes ``<offset>.snapshot`` at every roll: each open transaction's first offset,
        as of that offset), then a walk of the batch headers after it; with no snapshot,
        from the first segment. Never below the log start offset."""
        leo = self.log_end_offset
        if not self.segments:
            return leo
        open_txns: dict[int, int] = {}
        start = self.segments[0].base_offset
        snapshots = sorted((int(name[:20]), name) for name in self._listed
                           if name.endswith(files.PRODUCER_SNAPSHOT_FILE_SUFFIX) and name[:20].isdigit()
                           and len(name) == 20 + len(files.PRODUCER_SNAPSHOT_FILE_SUFFIX))
        for offset, name in reversed(snapshots):
            if not start <= offset <= leo:
                continue
            path = self.directory / name
            try:
                entries = decode_snapshot(self.storage.read_file(path, self._listed.get(name)))
            except (CorruptSnapshotError, OSError) as exc:
                log.warning("not using %s: %s", self.storage.uri(path), exc)
                continue
            open_txns = {e.producer_id: e.current_txn_first_offset for e in entries
                         if e.current_txn_first_offset is not None}
            start = offset
            break
        if start < leo:
            walked = len(self.segments) - max(self.segment_index_for(start), 0)
            if walked > 2:
                log.warning("%s: no usable producer snapshot near the log end; reading the batch headers of %d "
                            "segments for the last stable offset", self.storage.uri(self.directory), walked)
            self._walk_transactions(start, leo, open_txns)
        lso = min(open_txns.values(), default=leo)
        return max(min(lso, leo), self.log_start_offset)

    def _walk_transactions(self, start: int, end: int, open_txns: dict[int, int]) -> None:
        """Apply the batches of [start, end) to ``open_txns`` (producer id -> first offset
        of its open transaction): transactional data opens one, a control batch (marker)
        closes it."""
        first = max(self.segment_index_for(start), 0)
        for i in range(first, len(self.segments)):
            seg = self.segments[i]
            if seg.base_offset >= end:
                return
            pos = self._floor_position(i, start) if start > seg.base_offset else 0
            with self.storage.open(seg.path, seg.size) as f:
                for _, _, magic, head in _walk_headers(f, pos, self._valid_end(i)):
                    if magic != CURRENT_MAGIC or len(head) < RECORD_BATCH_OVERHEAD:
                        continue
                    h = HEADER.unpack_from(head, 0)
                    base = h[H_BASE_OFFSET]
                    if base >= end:
                        return
                    if base + h[H_LAST_OFFSET_DELTA] < start:
                        continue
                    attributes, pid = h[H_ATTRIBUTES], h[H_PRODUCER_ID]
                    if pid < 0 or not attributes & TRANSACTIONAL_FLAG_MASK:
                        continue
                    if attributes & CONTROL_FLAG_MASK:
                        open_txns.pop(pid, None)
                    else:
                        open_txns.setdefault(pid, base)

    # --- timestamps ---

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first offset >= the log start offset whose record timestamp is >=
        ``timestamp`` (ListOffsets), or None when no record qualifies. Uses the time and
        offset indexes when they are sane, else walks batch headers; only batches whose
        max timestamp reaches the target are decoded."""
        start = self.log_start_offset
        last = len(self.segments) - 1
        for i, seg in enumerate(self.segments):
            if self._segment_end_offset(i) <= start:
                continue
            time_index = self._time_index(i)
            if time_index is not None and i < last and time_index.entries:
                if time_index.last_entry.timestamp < timestamp:
                    continue  # a rolled segment's last entry carries its max timestamp
            pos_offset = start
            if time_index is not None and time_index.entries:
                entry_offset = time_index.lookup(timestamp).offset
                if seg.base_offset <= entry_offset < self._segment_end_offset(i):  # else: stale
                    pos_offset = max(entry_offset, start)
            position = self._floor_position(i, pos_offset) if pos_offset > seg.base_offset else 0
            found = self._search_timestamp(i, position, timestamp, start)
            if found is not None:
                return found
        return None

    def _search_timestamp(self, i: int, position: int, timestamp: int, min_offset: int) -> int | None:
        end = self._valid_end(i)
        seg = self.segments[i]
        path = seg.path
        with self.storage.open(path, seg.size) as f:
            for pos, size, _magic, head in _walk_headers(f, position, end):
                try:
                    header = entry_header(head)  # v2, or a legacy entry's (magic 1: its timestamp)
                except DecodeError:
                    header = None
                if header is None or header.max_timestamp < timestamp or header.last_offset < min_offset:
                    continue
                data = f.read_at(pos, size)
                try:
                    records = decode_entry(data, 0, header, verify_crc=False)
                except DecodeError as exc:
                    raise CorruptRecordError(f"{self.storage.uri(path)}: batch at position {pos}: "
                                             f"{exc}") from exc
                for record in records:
                    if record.timestamp >= timestamp and record.offset >= min_offset:
                        return record.offset
        return None

    def topic_id(self) -> uuid.UUID | None:
        """The topic id the partition's files name: a tiered prefix's first manifest's
        ``topic_id``, else ``partition.metadata``'s; None when neither says (or cannot be
        read): stitched reads check it against the cluster's."""
        manifests = sorted(n for n in self._listed if n.endswith(MANIFEST_SUFFIX))
        try:
            if manifests:
                text = json.loads(self.storage.read_file(self.directory / manifests[0])).get("topic_id")
            elif files.PARTITION_METADATA_FILE in self._listed:
                body = self.storage.read_file(self.directory / files.PARTITION_METADATA_FILE).decode("ascii")
                fields = dict(line.split(": ", 1) for line in body.splitlines() if ": " in line)
                text = fields.get("topic_id", "").strip()
            else:
                return None
            return files.decode_topic_id(text) if text else None
        except (OSError, ValueError, AttributeError):
            return None

    def close(self) -> None:
        """Unmap the indexes opened so far (the reader may still be used: they reopen)."""
        for cache in (self._offset_indexes, self._time_indexes):
            for index in cache.values():
                if index is not None:
                    index.close_handler()
            cache.clear()


class LogDirReader:
    """The partitions under one or more Kafka log directories (``log.dirs``), read only.

    ``paths``: local paths, ``file:`` URIs or object-store URIs (``s3://bucket/prefix``...:
    a log directory copied or backed up there, same layout); ``config``: the object
    store's settings (``storage.open_location``: Hadoop's ``fs.s3a.*`` keys). A missing
    directory, a missing bucket or refused credentials raise ``FileNotFoundError`` /
    ``OSError`` naming the location.

    Topics are the names of the partition directories (``<topic>-<partition>``); a
    partition found in two directories is an error (a broker never does that outside a
    ``-future`` move, which is ignored)."""

    def __init__(self, paths: str | Path | Sequence[str | Path],
                 config: Mapping[str, str] | None = None) -> None:
        if isinstance(paths, (str, Path)):
            paths = [paths]
        self.locations = [str(p) for p in paths]
        self._roots: list[tuple[Storage, PurePosixPath]] = [open_location(p, config) for p in self.locations]
        self.paths = [root for _, root in self._roots]
        self._dirs: dict[tuple[str, int], tuple[Storage, PurePosixPath]] = {}
        self._checkpoints: dict[tuple[str, int], int] = {}
        for (storage, root), location in zip(self._roots, self.locations):
            entries = list_log_dir(storage, root, location)
            self._checkpoints.update(_read_checkpoint(storage, root))
            for entry in entries:
                if not entry.is_dir:
                    continue
                parsed = files.parse_partition_dir_name(entry.name)
                if parsed is None:
                    continue
                if parsed in self._dirs:
                    other_storage, other = self._dirs[parsed]
                    raise ValueError(f"partition {parsed[0]}-{parsed[1]} is in both "
                                     f"{other_storage.uri(other)} and {storage.uri(entry.path)}")
                self._dirs[parsed] = (storage, entry.path)

    def __repr__(self) -> str:
        return f"LogDirReader({self.locations}, partitions={len(self._dirs)})"

    def topic_partitions(self) -> list[tuple[str, int]]:
        """Every (topic, partition), sorted."""
        return sorted(self._dirs)

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self._dirs})

    def partitions_of(self, topic: str) -> list[int]:
        return sorted(p for t, p in self._dirs if t == topic)

    def has_partition(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._dirs

    def directory_of(self, topic: str, partition: int) -> PurePosixPath:
        return self._location_of(topic, partition)[1]

    def _location_of(self, topic: str, partition: int) -> tuple[Storage, PurePosixPath]:
        try:
            return self._dirs[(topic, partition)]
        except KeyError:
            raise KeyError(f"partition {topic}-{partition} is not under "
                           f"{', '.join(self.locations)}") from None

    def partition(self, topic: str, partition: int) -> PartitionReader:
        """A fresh ``PartitionReader`` (segments listed now)."""
        storage, directory = self._location_of(topic, partition)
        return PartitionReader(directory, self._checkpoints.get((topic, partition)),
                               storage=storage, _read_checkpoint=False)


def list_log_dir(storage: Storage, root: PurePosixPath, location: str | None = None) -> list:
    """The entries of the log directory ``root`` (``storage.Entry``); an error naming
    ``location`` (the user's spelling) when it is missing or cannot be listed."""
    location = location or storage.uri(root)
    try:
        entries = storage.list_dir(root)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"log directory {location} does not exist or is not a directory") from None
    except OSError as exc:
        raise OSError(f"log directory {location} cannot be listed: {exc}") from exc
    if not entries and not storage.is_dir(root):
        # an object store lists a missing prefix as empty
        raise FileNotFoundError(f"log directory {location} does not exist or is not a directory")
    return entries


# --- helpers ---

# A live broker renames files while a directory is listed (the cleaner's
# ``.swap`` -> ``.log``, a deletion's ``.log`` -> ``.deleted``), and readdir may miss an
# entry renamed during the listing: a local directory is listed until two listings name
# the same files (sizes change with every append and are not compared).
_MAX_LISTINGS = 8


def _stable_listing(storage: Storage, directory: PurePosixPath) -> list:
    entries = storage.list_dir(directory)
    if not storage.is_local:
        return entries  # an object store lists a consistent snapshot; nothing renames there
    for _ in range(_MAX_LISTINGS):
        again = storage.list_dir(directory)
        if sorted(e.name for e in again) == sorted(e.name for e in entries):
            return again
        entries = again
    return entries


def _list_segments(storage: Storage, directory: PurePosixPath,
                   listed: dict[str, int] | None = None) -> list[SegmentInfo]:
    """The live segments of ``directory``; ``listed`` gets every file's name and size."""
    live: list[SegmentInfo] = []
    swaps: list[SegmentInfo] = []
    manifests: set[int] = set()
    for entry in _stable_listing(storage, directory):
        if listed is not None and not entry.is_dir:
            listed[entry.name] = entry.size
        if entry.name.endswith(MANIFEST_SUFFIX) and entry.name[:20].isdigit():
            manifests.add(int(entry.name[:20]))
        m = _SEGMENT_RE.match(entry.name)
        if m is None or entry.is_dir:
            continue
        info = SegmentInfo(int(m.group(1)), entry.path, entry.size, m.group(2) or "")
        (swaps if info.extra else live).append(info)
    if swaps:
        covered = []
        for swap in swaps:
            try:
                with storage.open(swap.path, swap.size) as f:
                    tail = PartitionReader._walk_valid(f, 0, swap.size, swap.base_offset)
            except FileNotFoundError:  # renamed to its live name meanwhile: list again
                if listed is not None:
                    listed.clear()
                return _list_segments(storage, directory, listed)
            covered.append((swap.base_offset, max(tail.next_offset if tail else 0, swap.base_offset + 1)))
        live = [s for s in live if not any(lo <= s.base_offset < hi for lo, hi in covered)]
        live += swaps
    if manifests:  # a tiered storage prefix: a segment exists iff its manifest does
        live = [s for s in live if s.base_offset in manifests]
    live.sort()
    return live


def _read_checkpoint(storage: Storage, root: PurePosixPath) -> dict[tuple[str, int], int]:
    path = root / files.LOG_START_OFFSET_CHECKPOINT_FILE
    try:
        text = storage.read_file(path).decode("utf-8")
    except FileNotFoundError:
        return {}
    except (ValueError, OSError) as exc:
        log.warning("ignoring unreadable %s: %s", storage.uri(path), exc)
        return {}
    try:
        return files.parse_offset_checkpoint(text, storage.uri(path))
    except ValueError as exc:
        # a torn checkpoint is a stale hint, not data: the segments still bound the log
        log.warning("ignoring unreadable %s: %s", storage.uri(path), exc)
        return {}


def _checkpoint_entry(storage: Storage, root: PurePosixPath, topic: str, partition: int) -> int | None:
    return _read_checkpoint(storage, root).get((topic, partition))


class _LoadedIndex(AbstractIndex):
    """Mixin (before OffsetIndex or TimeIndex in the bases; the same method order as
    without ``AbstractIndex`` here): the index's entries come from one read of the file through its storage
    (``Storage.read_index``: locally up to the first hole of a preallocated index)
    instead of a mapping (see the module docstring); a file cut short meanwhile gives
    fewer entries."""

    def __init__(self, storage: Storage, path: PurePosixPath, base_offset: int, size: int | None) -> None:
        self._storage = storage
        self._source = path
        self._listed_size = size
        super().__init__(Path(str(path)), base_offset, -1, writable=False)

    def _create_and_map(self) -> bool:
        data = LoadedBytes(self._storage.read_index(self._source, self.entry_size, self._listed_size))
        self._length = len(data)
        self._mmap = data if data else None
        return False


class _LoadedOffsetIndex(_LoadedIndex, OffsetIndex):
    pass


class _LoadedTimeIndex(_LoadedIndex, TimeIndex):
    pass


_LOADED = {OffsetIndex: _LoadedOffsetIndex, TimeIndex: _LoadedTimeIndex}


def _open_index(storage: Storage, cls, path: PurePosixPath, base_offset: int, size: int | None = None):
    """A read-only index read into memory, or None when the file is missing, empty or
    fails its checks."""
    try:
        index = _LOADED[cls](storage, path, base_offset, size)
    except (FileNotFoundError, ValueError, OSError):
        return None
    try:
        index.sanity_check()
    except CorruptIndexError as exc:
        log.warning("not using %s: %s", storage.uri(path), exc)
        index.close_handler()
        return None
    return index


def _walk_headers(f: SegmentFile, pos: int, end: int) -> Iterator[tuple[int, int, int, bytes]]:
    """(position, size, magic, header bytes) of each whole entry in [pos, end) of ``f``,
    stopping at the first implausible header or partial entry."""
    while end - pos >= LOG_OVERHEAD + 5:
        buf = f.read_at(pos, min(_WALK_CHUNK, end - pos))
        rel = 0
        while len(buf) - rel >= LOG_OVERHEAD + 5:
            head_len = min(RECORD_BATCH_OVERHEAD, len(buf) - rel)
            parsed = _entry_next_offset(buf, rel) if head_len >= LOG_OVERHEAD + 5 else None
            if parsed is None:
                if len(buf) - rel < RECORD_BATCH_OVERHEAD and end - (pos + rel) >= RECORD_BATCH_OVERHEAD:
                    break  # header cut by the chunk: re-read from here
                return
            size = parsed[0]
            if size > end - (pos + rel):
                return
            yield pos + rel, size, buf[rel + MAGIC_OFFSET], bytes(buf[rel:rel + RECORD_BATCH_OVERHEAD])
            rel += size
        if rel == 0:
            # one entry larger than the chunk: read its header alone and jump over it
            head = f.read_at(pos, RECORD_BATCH_OVERHEAD)
            parsed = _entry_next_offset(head, 0) if len(head) >= LOG_OVERHEAD + 5 else None
            if parsed is None or parsed[0] > end - pos:
                return
            yield pos, parsed[0], head[MAGIC_OFFSET], head
            rel = parsed[0]
        pos += rel


def _iter_txn_index(storage: Storage, path: PurePosixPath, size: int | None = None) -> Iterable[AbortedTxn]:
    try:
        f = storage.open(path, size)
    except FileNotFoundError:
        return
    try:
        position = 0
        step = ABORTED_TXN_SIZE * _TXN_ENTRIES_PER_READ
        while True:
            buf = f.read_at(position, step)
            whole = len(buf) - len(buf) % ABORTED_TXN_SIZE
            for p in range(0, whole, ABORTED_TXN_SIZE):
                yield AbortedTxn.decode(buf, p)
            if len(buf) < step:
                return  # a torn last entry (fewer than 34 bytes) is ignored, as recovery cuts it
            position += step
    finally:
        f.close()
