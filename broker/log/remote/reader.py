"""Reads of remote segments: offset and time index lookups on fetched index bytes, the
batches of a Fetch, the timestamp search of ListOffsets, aborted transactions
(Kafka's ``RemoteLogManager.read`` / ``findOffsetByTimestamp`` / ``collectAbortedTransactions``).

Owns ``RemoteSegmentReader``: given a ``RemoteStorageManager`` it answers, for one remote
segment's ``RemoteLogSegmentMetadata``:

- ``read(meta, offset, max_bytes, min_one_message)``: whole batches from the one holding
  ``offset`` (found by the offset index: the last entry at or below it, then a walk of
  batch headers), at most ``max_bytes`` bytes, but the first batch whole when
  ``min_one_message``; ranged reads of the ``.log`` object only (one read of
  ``max(max_bytes, 64 KiB)`` bytes usually covers the skipped bytes and the answer);
- ``find_offset_by_timestamp(meta, timestamp, start_offset)``: the time index (last entry
  at or below the timestamp), the offset index (its position), then the batches from
  there: the first record with timestamp >= the target and offset >= ``start_offset``;
- ``aborted_transactions(meta, start, upper)``: the ``.txnindex`` entries overlapping
  [start, upper).

Index formats (Kafka's, big-endian): offset index entries (int32 relative offset, int32
position); time index entries (int64 timestamp, int32 relative offset); txn index entries
(int16 version, int64 producer id, int64 first offset, int64 last offset, int64 last stable
offset). Trailing zero entries (an index not trimmed before the copy) end the index.

Caching: fetched index objects are kept in a small LRU keyed by (segment id, type)
(segments are immutable, ids unique), ``INDEX_CACHE_ENTRIES`` of them.

Thread-safety: the LRU is guarded by a lock; everything else is per call.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ...record.batch import LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH, RECORD_BATCH_OVERHEAD
from ...record.entries import ENTRY_HEADER_PREFIX, decode_entry, entry_header
from ..index import OFFSET_ENTRY, TIME_ENTRY
from ..list_offsets import OffsetAndTimestamp
from ..txn_index import ABORTED_TXN_SIZE, AbortedTxn
from .metadata import RemoteLogSegmentMetadata
from .storage_manager import IndexType, RemoteStorageManager

__all__ = ["RemoteSegmentReader", "INDEX_CACHE_ENTRIES"]

INDEX_CACHE_ENTRIES = 256
_MIN_READ = 64 * 1024


def _offset_entries(data: bytes) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i in range(0, len(data) - len(data) % 8, 8):
        rel, pos = OFFSET_ENTRY.unpack_from(data, i)
        if out and (rel <= out[-1][0] or pos <= out[-1][1]):
            break  # preallocated zeros
        out.append((rel, pos))
    return out


def _time_entries(data: bytes) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i in range(0, len(data) - len(data) % 12, 12):
        ts, rel = TIME_ENTRY.unpack_from(data, i)
        if (ts, rel) == (0, 0) or (out and (ts < out[-1][0] or rel < out[-1][1])):
            break
        out.append((ts, rel))
    return out


class RemoteSegmentReader:
    """Fetch, ListOffsets and read_committed reads of remote segments (module docstring)."""

    def __init__(self, rsm: RemoteStorageManager) -> None:
        self.rsm = rsm
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, IndexType], object] = OrderedDict()

    def _index(self, meta: RemoteLogSegmentMetadata, index_type: IndexType):
        key = (meta.segment_id, index_type)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        data = self.rsm.fetch_index(meta, index_type)
        value: list[tuple[int, int]] | list[AbortedTxn] | bytes
        if index_type is IndexType.OFFSET:
            value = _offset_entries(data)
        elif index_type is IndexType.TIMESTAMP:
            value = _time_entries(data)
        elif index_type is IndexType.TRANSACTION:
            value = [AbortedTxn.decode(data, i)
                     for i in range(0, len(data) - len(data) % ABORTED_TXN_SIZE, ABORTED_TXN_SIZE)]
        else:
            value = data
        with self._lock:
            self._cache[key] = value
            while len(self._cache) > INDEX_CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return value

    def position_of(self, meta: RemoteLogSegmentMetadata, offset: int) -> int:
        """The position of the last offset index entry at or below ``offset`` (0: none)."""
        position = 0
        rel_target = offset - meta.base_offset
        for rel, pos in self._index(meta, IndexType.OFFSET):
            if rel > rel_target:
                break
            position = pos
        return position

    def read(self, meta: RemoteLogSegmentMetadata, offset: int, max_bytes: int,
             min_one_message: bool) -> bytes:
        """Whole batches from the one holding ``offset`` (module docstring)."""
        size = meta.segment_size_in_bytes
        chunk = max(max_bytes, _MIN_READ)
        buf, buf_pos = b"", 0

        def header_at(pos: int):
            nonlocal buf, buf_pos
            need = pos + min(RECORD_BATCH_OVERHEAD, size - pos)  # a legacy entry may be smaller
            if pos < buf_pos or need > buf_pos + len(buf):
                buf, buf_pos = self.rsm.fetch_log_segment(meta, pos, min(pos + chunk, size) - 1), pos
            if need > buf_pos + len(buf):
                return None
            return entry_header(buf, pos - buf_pos)

        cur = self.position_of(meta, offset)
        while True:  # skip the batches of the index interval that end before the offset
            header = header_at(cur)
            if header is None:
                return b""
            if header.last_offset >= offset:
                break
            cur += header.size_in_bytes
        start = end = cur
        while end + ENTRY_HEADER_PREFIX <= size:
            header = header_at(end)
            if header is None:
                break
            batch_size = header.size_in_bytes
            if end + batch_size - start > max_bytes and not (min_one_message and end == start):
                break
            end += batch_size
        if end == start:
            return b""
        if start >= buf_pos and end <= buf_pos + len(buf):
            return bytes(buf[start - buf_pos:end - buf_pos])
        return self.rsm.fetch_log_segment(meta, start, end - 1)

    def find_offset_by_timestamp(self, meta: RemoteLogSegmentMetadata, timestamp: int,
                                 start_offset: int) -> OffsetAndTimestamp | None:
        """The first record of the segment with timestamp >= ``timestamp`` and offset >=
        ``start_offset`` (module docstring), or None."""
        rel = 0
        for ts, r in self._index(meta, IndexType.TIMESTAMP):
            if ts > timestamp:
                break
            rel = r
        pos = self.position_of(meta, max(meta.base_offset + rel, start_offset))
        size = meta.segment_size_in_bytes
        while pos + LOG_OVERHEAD <= size:
            buf = self.rsm.fetch_log_segment(meta, pos, min(pos + _MIN_READ, size) - 1)
            i = 0
            while len(buf) - i >= ENTRY_HEADER_PREFIX:
                header = entry_header(buf, i)
                if header is None:  # a v2 header cut by the read
                    break
                batch_size = header.size_in_bytes
                if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
                    data = buf[i:i + batch_size] if i + batch_size <= len(buf) else \
                        self.rsm.fetch_log_segment(meta, pos + i, pos + i + batch_size - 1)
                    records = decode_entry(data, 0, header, verify_crc=False)
                    for record in records:
                        if record.timestamp >= timestamp and record.offset >= start_offset:
                            epoch = header.partition_leader_epoch
                            return OffsetAndTimestamp(record.offset, record.timestamp,
                                                      None if epoch == NO_PARTITION_LEADER_EPOCH else epoch)
                if i + batch_size > len(buf) and i > 0:
                    break  # refetch from this batch
                i += batch_size
            if i == 0:
                return None
            pos += i
        return None

    def aborted_transactions(self, meta: RemoteLogSegmentMetadata, start: int, upper: int) -> list[AbortedTxn]:
        return [t for t in self._index(meta, IndexType.TRANSACTION)
                if t.last_offset >= start and t.first_offset < upper]
