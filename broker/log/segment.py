"""One log segment: a ``.log`` file of record batches and its three indexes.

Owns: ``LogSegment`` (Kafka's ``LogSegment``: append with sparse indexing, offset and
timestamp translation, reads that return a file slice, recovery, truncation, rolling
decisions, file lifecycle) and the small types of its interface: ``FetchDataInfo`` (a
read's result: offset metadata + a ``FileSlice`` sent as is), ``LogOffsetMetadata``,
``RollParams``. The ``.log`` file itself is ``file_records.FileRecords``.

On-disk format: ``<base>.log`` is back-to-back RecordBatch v2 (layout in
``broker/record/batch.py``), offsets strictly increasing: byte for byte a Kafka segment,
readable by any Kafka tool. A segment of a Kafka log directory written before Kafka 0.11
may also hold legacy message set entries (magic 0/1, ``broker/record/legacy.py``): they
are recovered, indexed and served as they are (KIP-724), never written by this broker
(the log cleaner rewrites them as v2). ``<base>.index`` / ``<base>.timeindex`` are
described in ``index.py``, ``<base>.txnindex`` in ``txn_index.py``. File names come from
``files.py``; ``file_suffix`` ("", ".cleaned", ".swap", ".deleted") is appended to each.

``append_batch`` and ``should_roll_for`` are the leader's per-produce forms of ``append``
and ``should_roll`` for one batch whose header values the caller already holds: the same
checks, bytes, entries and decisions, without walking the batch or building tuples;
``append_batch_unless_roll`` is the two in one call (None when the segment must roll).

Sparse indexing (Kafka 4.x, per batch): while appending, a batch whose start is more than
``index_interval_bytes`` after the last indexed batch gets an offset-index entry
(batch last offset -> batch position) and a time-index entry (largest timestamp so far ->
its batch's last offset, appended only when the timestamp grew). ``recover()`` rebuilds
both with the same rule, so a recovered index equals the one built by appends.

Invariants:
- every byte of the ``.log`` below ``size`` belongs to a whole batch that passed the
  caller's validation (append) or CRC + size + offset checks (recover). Recovery does not
  decode v2 records (Kafka's ``LogSegment.recover`` neither): a CRC-valid batch whose
  records are bad (written before validation, or elsewhere) is kept, with the good data
  after it; readers report it (``CorruptBatchError``). A legacy entry is checked whole
  (its CRC-32 and sizes, and a compressed wrapper's inner messages, their CRC-32s and
  offsets): its last offset is its own, its first the first inner message's. Recovery
  cuts only at the first invalid byte (a torn or corrupt tail); what it cuts is logged
  (warning) with the segment's path (its topic-partition directory), the byte position,
  the offset the segment now ends after, the reason, and the whole batches and records
  (by their headers) and the bytes of no whole batch it removed;
- no offset is stored relative to the base unless it fits in [0, 2**31 - 1]:
  ``append`` raises ``OffsetOverflowError`` before writing anything and ``should_roll`` is
  true for a batch that would not fit (R16);
- index entries always point at batches already written: the ``.log`` bytes are written
  (and the size published) before the entries that point at them;
- memory never grows with the segment: reads return a slice (offsets + a way to read the
  bytes), recovery and scans walk the file in bounded chunks (a chunk, or one batch when a
  batch is larger than a chunk).

``recover(on_batch, leader_epoch_cache)`` hooks, kept to one callable so that the producer
state (``producer_state.py``) stays decoupled: ``on_batch(header, batch) -> AbortedTxn |
None`` is called for every valid batch in order (``batch`` is a memoryview of the whole
batch, valid only during the call); the callee updates producer state and, when the batch
is an ABORT marker that completes a transaction, returns the ``AbortedTxn`` (with its last
stable offset) to record in this segment's ``.txnindex``. Epochs are assigned to the cache
for every batch whose partition leader epoch is newer than the cache's latest.

Thread-safety (Kafka's): mutations (``append``, ``recover``, ``truncate_to``,
``on_become_inactive_segment``, renames, ``close``) are made by one writer holding the
log's lock. ``read``, ``translate_offset``, ``read_next_offset``,
``find_offset_by_timestamp`` and ``fetch_upper_bound_offset`` may run concurrently with it:
the ``.log`` publishes its size only after the bytes are written (``file_records.py``),
index entries are published after the batches they point at, and the indexes follow the
protocol described in ``index.py``. Lazily opened indexes are created under a lock.
"""

from __future__ import annotations

import logging
import os
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ..record.batch import (
    ATTRIBUTES_OFFSET,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    BatchHeader,
    crc32c,
    ensure_valid,
    iter_batch_headers,
)
from ..record.errors import DecodeError
from ..record.legacy import legacy_entry_info
from ..record.limits import INT32_MAX
from . import files
from .clock import SYSTEM_TIME, Time
from .errors import CorruptRecordError, InvalidRecordError, OffsetOverflowError
from .file_records import (
    EMPTY_RECORDS,
    FileRecords,
    FileSlice,
    LogOffsetPosition,
    MemoryRecords,
    Records,
    TimestampAndOffset,
)
from .index import (
    DEFAULT_MAX_INDEX_SIZE,
    NO_TIMESTAMP,
    LazyIndex,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)
from .txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

__all__ = [
    "LogSegment", "FileRecords", "FileSlice", "MemoryRecords", "Records", "EMPTY_RECORDS",
    "FetchDataInfo", "LogOffsetMetadata", "LogOffsetPosition", "TimestampAndOffset",
    "RollParams", "RecoveryHook", "DEFAULT_INDEX_INTERVAL_BYTES",
]

log = logging.getLogger(__name__)

DEFAULT_INDEX_INTERVAL_BYTES = 4096  # index.interval.bytes
UNKNOWN_OFFSET = -1
UNKNOWN_FILE_POSITION = -1
# Bytes read per step by recovery, which needs every byte for the CRC.
RECOVERY_CHUNK = 1024 * 1024
# Recovery decompresses a legacy wrapper to check its inner messages; a wrapper was at most
# message.max.bytes (1 MiB by default) compressed, and gzip inflates ~1000:1 at most.
LEGACY_MAX_DECOMPRESSED = 1 << 30

_new_tuple = tuple.__new__  # builds a NamedTuple from its values without the generated __new__

RecoveryHook = Callable[[BatchHeader, memoryview], "AbortedTxn | None"]


class LogOffsetMetadata(NamedTuple):
    """An offset with (when known) the segment and byte position holding it."""
    message_offset: int
    segment_base_offset: int = UNKNOWN_OFFSET
    relative_position_in_segment: int = UNKNOWN_FILE_POSITION

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == UNKNOWN_OFFSET


class RollParams(NamedTuple):
    """What ``LogSegment.should_roll`` needs about the segment config and the next append."""
    max_segment_ms: int
    max_segment_bytes: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now: int


@dataclass(frozen=True)
class FetchDataInfo:
    """A read's result. ``records`` is a ``FileSlice`` (or ``EMPTY_RECORDS``); the last
    batch may be cut when the read was bounded by ``max_size``."""
    fetch_offset_metadata: LogOffsetMetadata
    records: Records
    first_entry_incomplete: bool = False
    aborted_transactions: list | None = None

    @staticmethod
    def empty(fetch_offset: int) -> FetchDataInfo:
        return FetchDataInfo(LogOffsetMetadata(fetch_offset), EMPTY_RECORDS)


def random_segment_jitter(config) -> int:
    """A random jitter in [0, min(segment.jitter.ms, segment.ms)) (0 without jitter)."""
    jitter = config.segment_jitter_ms
    if jitter <= 0:
        return 0
    return random.randrange(min(jitter, config.segment_ms))


def _replace_suffix(path: Path, old: str, new: str) -> Path:
    name = path.name
    if not name.endswith(old):
        raise ValueError(f"expected {path} to end with {old!r}")
    return path.with_name(name[:len(name) - len(old)] + new)


# --- the segment ---

class LogSegment:
    """One segment. Not thread-safe for mutation (the caller holds the log's lock);
    reads are safe concurrently (see the module docstring)."""

    def __init__(self, log_records: FileRecords, lazy_offset_index: LazyIndex,
                 lazy_time_index: LazyIndex, txn_index: TransactionIndex, base_offset: int,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES, roll_jitter_ms: int = 0,
                 time: Time = SYSTEM_TIME, max_index_size: int = DEFAULT_MAX_INDEX_SIZE) -> None:
        self._log = log_records
        self._lazy_offset_index = lazy_offset_index
        self._lazy_time_index = lazy_time_index
        # (offset index, time index) once the append path has loaded both: a LazyIndex
        # keeps the index it made for good, so this saves two calls per append
        self._loaded_indexes: tuple[OffsetIndex, TimeIndex] | None = None
        self._txn_index = txn_index
        self._base_offset = base_offset
        self._index_interval_bytes = index_interval_bytes
        self._roll_jitter_ms = roll_jitter_ms
        self._time = time
        self._max_index_size = max_index_size
        # timestamp used for time-based rolling: the first batch's (None = not loaded yet)
        self._rolling_based_timestamp: int | None = None
        # largest timestamp so far and the offset of its batch (None = not loaded yet)
        self._max_timestamp_and_offset: TimestampOffset | None = None
        self.created = time.milliseconds()
        self._bytes_since_last_index_entry = 0

    @classmethod
    def open(cls, directory: Path | str, base_offset: int, config=None, *,
             index_interval_bytes: int | None = None, max_index_size: int | None = None,
             roll_jitter_ms: int | None = None, time: Time = SYSTEM_TIME,
             file_already_exists: bool = False, init_file_size: int = 0,
             preallocate: bool = False, file_suffix: str = "") -> LogSegment:
        """Open (or create) the segment files of ``base_offset`` in ``directory``. Index
        files are created and mapped on first use; a new active segment's indexes are
        preallocated to ``max_index_size``. ``config`` (a ``LogConfig``, or anything with
        ``index_interval_bytes``, ``max_index_size``, ``segment_jitter_ms``, ``segment_ms``)
        supplies the values not given as keywords; the roll jitter is then drawn at random
        as Kafka's ``LogConfig.randomSegmentJitter``."""
        if index_interval_bytes is None:
            index_interval_bytes = config.index_interval_bytes if config is not None else DEFAULT_INDEX_INTERVAL_BYTES
        if max_index_size is None:
            max_index_size = config.max_index_size if config is not None else DEFAULT_MAX_INDEX_SIZE
        if roll_jitter_ms is None:
            roll_jitter_ms = random_segment_jitter(config) if config is not None else 0
        directory = Path(directory)
        return cls(
            FileRecords.open(files.log_file(directory, base_offset, file_suffix), file_already_exists,
                             init_file_size, preallocate),
            LazyIndex.for_offset(files.offset_index_file(directory, base_offset, file_suffix),
                                 base_offset, max_index_size),
            LazyIndex.for_time(files.time_index_file(directory, base_offset, file_suffix),
                               base_offset, max_index_size),
            TransactionIndex(base_offset, files.txn_index_file(directory, base_offset, file_suffix)),
            base_offset, index_interval_bytes, roll_jitter_ms, time, max_index_size)

    @staticmethod
    def delete_files(directory: Path | str, base_offset: int, file_suffix: str = "") -> None:
        """Delete a segment's files without opening it."""
        directory = Path(directory)
        for make in (files.offset_index_file, files.time_index_file, files.txn_index_file, files.log_file):
            make(directory, base_offset, file_suffix).unlink(missing_ok=True)

    # --- parts ---

    @property
    def log(self) -> FileRecords:
        return self._log

    @property
    def offset_index(self) -> OffsetIndex:
        return self._lazy_offset_index.get()

    @property
    def time_index(self) -> TimeIndex:
        return self._lazy_time_index.get()

    @property
    def txn_index(self) -> TransactionIndex:
        return self._txn_index

    @property
    def offset_index_file(self) -> Path:
        return self._lazy_offset_index.file

    @property
    def time_index_file(self) -> Path:
        return self._lazy_time_index.file

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def index_interval_bytes(self) -> int:
        return self._index_interval_bytes

    @property
    def roll_jitter_ms(self) -> int:
        return self._roll_jitter_ms

    @property
    def size(self) -> int:
        """Bytes of the .log."""
        return self._log.size_in_bytes

    # --- timestamps ---

    def read_max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        if self._max_timestamp_and_offset is None:
            self._max_timestamp_and_offset = self.time_index.last_entry
        return self._max_timestamp_and_offset

    def max_timestamp_so_far(self) -> int:
        return self.read_max_timestamp_and_offset_so_far().timestamp

    def offset_of_max_timestamp_so_far(self) -> int:
        return self.read_max_timestamp_and_offset_so_far().offset

    def largest_record_timestamp(self) -> int | None:
        ts = self.max_timestamp_so_far()
        return ts if ts >= 0 else None

    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the .log's mtime when there is none (retention)."""
        ts = self.max_timestamp_so_far()
        return ts if ts >= 0 else self.last_modified

    @property
    def last_modified(self) -> int:
        """The .log's modification time, epoch milliseconds."""
        return os.stat(self._log.path).st_mtime_ns // 1_000_000

    def set_last_modified(self, ms: int) -> None:
        ns = ms * 1_000_000
        for path in (self._log.path, self.offset_index_file, self.time_index_file):
            if path.exists():
                os.utime(path, ns=(ns, ns))

    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None:
            for _, header, _ in self._log.iter_batches(0):
                self._rolling_based_timestamp = header.max_timestamp
                break

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        """From the first batch's timestamp to ``message_timestamp`` when the first batch
        has one, else from the segment's creation to ``now``."""
        self._load_first_batch_timestamp()
        ts = self._rolling_based_timestamp if self._rolling_based_timestamp is not None else -1
        if ts >= 0:
            return message_timestamp - ts
        return now - self.created

    def get_first_batch_timestamp(self) -> int:
        self._load_first_batch_timestamp()
        ts = self._rolling_based_timestamp
        return ts if ts is not None and ts >= 0 else sys.maxsize

    # --- rolling ---

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self._base_offset <= INT32_MAX

    def _ensure_offset_in_range(self, offset: int) -> None:
        if not self.can_convert_to_relative_offset(offset):
            raise OffsetOverflowError(
                f"offset {offset} cannot be stored relative to base offset {self._base_offset} "
                f"of segment {self._log.path}")

    def should_roll(self, params: RollParams) -> bool:
        """Roll before an append when it would pass segment.bytes, when a non-empty segment
        has waited segment.ms (less jitter), when an index is full, or when the append's
        last offset cannot be relative to this base (R16)."""
        return self.should_roll_for(*params)

    def should_roll_for(self, max_segment_ms: int, max_segment_bytes: int, max_timestamp_in_messages: int,
                        max_offset_in_messages: int, messages_size: int, now: int) -> bool:
        """``should_roll`` with the ``RollParams`` fields as arguments (the append path's
        form: no tuple built per append). The common case is a few integer comparisons."""
        if self._rolling_based_timestamp is None:
            self._load_first_batch_timestamp()
        ts = self._rolling_based_timestamp
        if ts is not None and ts >= 0:
            waited = max_timestamp_in_messages - ts
        else:
            waited = now - self.created
        size = self._log.size_in_bytes
        if (size > max_segment_bytes - messages_size
                or (size > 0 and waited > max_segment_ms - self._roll_jitter_ms)):
            return True
        indexes = self._loaded_indexes or self._load_indexes()
        return (indexes[0].is_full() or indexes[1].is_full()
                or not 0 <= max_offset_in_messages - self._base_offset <= INT32_MAX)

    def _load_indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        indexes = self._loaded_indexes = (self._lazy_offset_index.get(), self._lazy_time_index.get())
        return indexes

    def has_overflow(self) -> bool:
        next_offset = self.read_next_offset()
        return next_offset > self._base_offset and not self.can_convert_to_relative_offset(next_offset - 1)

    def resize_indexes(self, size: int | None = None) -> None:
        """Resize both index files (default: back to ``max_index_size``, which the log
        layer does for the active segment after loading it)."""
        size = self._max_index_size if size is None else size
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def sanity_check(self, time_index_file_newly_created: bool = False, check_indexes: bool = False) -> None:
        """Kafka's check at load: the offset index must exist, a newly created time index
        is emptied, the txn index is checked. ``check_indexes`` also runs the offset and
        time index checks (Kafka skips them because segments above the recovery point are
        recovered anyway). Raises FileNotFoundError / CorruptIndexError."""
        if not self.offset_index_file.exists():
            raise FileNotFoundError(f"offset index file {self.offset_index_file} does not exist")
        if time_index_file_newly_created:
            self.time_index.resize(0)
        if check_indexes:
            self.offset_index.sanity_check()
            self.time_index.sanity_check()
        self._txn_index.sanity_check()

    # --- append ---

    def append(self, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int,
               records, batches=None) -> None:
        """Write already-validated whole v2 batches (offsets assigned) at the end of the
        .log, then add sparse index entries. ``largest_timestamp`` seeds time-based rolling
        when the segment is empty; the per-batch headers drive the indexes and the
        largest-timestamp tracking (``offset_of_max_timestamp`` is accepted for Kafka's
        signature; the batch's last offset is what the time index stores).
        Raises ``OffsetOverflowError`` (nothing written) when an offset does not fit.
        ``batches``: the (position, header) pairs of ``records`` when the caller already
        walked them (the validator did), to skip a second walk."""
        data = records.memoryview() if isinstance(records, Records) else memoryview(records).cast("B")
        if len(data) == 0:
            return
        if batches is not None:
            headers = batches
        else:
            try:
                headers = list(iter_batch_headers(data))
            except DecodeError as exc:
                raise InvalidRecordError(f"append to {self._log.path}: {exc}") from exc
        if not headers or headers[-1][0] + headers[-1][1].size_in_bytes != len(data):
            raise InvalidRecordError(f"append to {self._log.path}: the records are not whole v2 batches")
        self._ensure_offset_in_range(headers[0][1].base_offset)
        self._ensure_offset_in_range(max(largest_offset, headers[-1][1].last_offset))
        physical_position = self._log.size_in_bytes
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        self._log.append(data)
        offset_index = self.offset_index
        time_index = self.time_index
        max_ts, max_ts_offset = self.read_max_timestamp_and_offset_so_far()
        since_last_entry = self._bytes_since_last_index_entry
        interval = self._index_interval_bytes
        offset_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        last_indexed_ts = time_index.last_entry.timestamp
        for _, header in headers:  # locals only: this loop runs for every appended batch
            last_offset = header.base_offset + header.last_offset_delta
            if header.max_timestamp > max_ts:
                max_ts, max_ts_offset = header.max_timestamp, last_offset
                self._max_timestamp_and_offset = TimestampOffset(max_ts, max_ts_offset)
            if since_last_entry > interval:
                offset_entries.append((last_offset, physical_position))
                if max_ts > last_indexed_ts:  # else maybe_append would not append
                    time_entries.append((max_ts, max_ts_offset))
                    last_indexed_ts = max_ts
                since_last_entry = 0
            size = header.batch_length + LOG_OVERHEAD
            physical_position += size
            since_last_entry += size
        # the entries of a many-batch append (a cleaned segment, a recovery) in one write each
        if len(offset_entries) == 1:
            offset_index.append(*offset_entries[0])
        elif offset_entries:
            offset_index.append_many(offset_entries)
        if len(time_entries) == 1:
            time_index.maybe_append(*time_entries[0])
        elif time_entries:
            time_index.append_many(time_entries)
        self._bytes_since_last_index_entry = since_last_entry

    def append_batch(self, buf, first_offset: int, last_offset: int, batch_max_timestamp: int,
                     largest_timestamp: int) -> LogOffsetMetadata:
        """``append`` of exactly one validated v2 batch (``buf``, a bytearray or a byte
        memoryview, offsets assigned) whose header values the caller already has: the same
        checks, bytes, index entries and timestamp tracking, without walking the batch.
        ``batch_max_timestamp`` is the header's maxTimestamp, ``largest_timestamp`` the
        append's (``LogAppendInfo.max_timestamp``). Returns the offset metadata of the new
        end (the next offset, this segment, the .log's new size), for the log to publish."""
        base = self._base_offset
        if first_offset < base or last_offset - base > INT32_MAX:
            self._ensure_offset_in_range(first_offset)
            self._ensure_offset_in_range(last_offset)
        records = self._log
        position = records.size_in_bytes
        if position == 0:
            self._rolling_based_timestamp = largest_timestamp
        size = records.append(buf)
        offset_index, time_index = self._loaded_indexes or self._load_indexes()
        max_ts_and_offset = self._max_timestamp_and_offset
        if max_ts_and_offset is None:
            max_ts_and_offset = self.read_max_timestamp_and_offset_so_far()
        max_ts, max_ts_offset = max_ts_and_offset
        if batch_max_timestamp > max_ts:
            max_ts, max_ts_offset = batch_max_timestamp, last_offset
            self._max_timestamp_and_offset = _new_tuple(TimestampOffset, (max_ts, max_ts_offset))
        since_last_entry = self._bytes_since_last_index_entry
        if since_last_entry > self._index_interval_bytes:
            offset_index.append(last_offset, position)
            last_indexed_ts, _ = time_index.last_entry
            if max_ts > last_indexed_ts:  # else maybe_append would not append
                time_index.maybe_append(max_ts, max_ts_offset)
            since_last_entry = 0
        self._bytes_since_last_index_entry = since_last_entry + size
        return _new_tuple(LogOffsetMetadata, (last_offset + 1, base, position + size))

    def append_batch_unless_roll(self, buf, first_offset: int, last_offset: int, batch_max_timestamp: int,
                                 largest_timestamp: int, max_segment_ms: int, max_segment_bytes: int,
                                 now: int) -> LogOffsetMetadata | None:
        """``should_roll_for`` then ``append_batch`` in one call, for an append with nothing
        to decide between the two (a batch without a producer id): None, with nothing
        written, when ``should_roll_for(max_segment_ms, max_segment_bytes,
        largest_timestamp, last_offset, len(buf), now)`` is true; else ``append_batch``'s
        result: the same decision and the same bytes (``tests/test_log_append_fused.py``
        checks the two against the general path)."""
        records = self._log
        position = records.size_in_bytes
        if position > max_segment_bytes - len(buf):
            return None
        if position > 0:  # (should_roll_for's waited time only counts for a non-empty segment)
            ts = self._rolling_based_timestamp
            if ts is None:
                self._load_first_batch_timestamp()
                ts = self._rolling_based_timestamp
            waited = largest_timestamp - ts if ts is not None and ts >= 0 else now - self.created
            if waited > max_segment_ms - self._roll_jitter_ms:
                return None
        offset_index, time_index = self._loaded_indexes or self._load_indexes()
        base = self._base_offset
        if offset_index.is_full() or time_index.is_full() or not 0 <= last_offset - base <= INT32_MAX:
            return None
        return self.append_batch(buf, first_offset, last_offset, batch_max_timestamp, largest_timestamp)

    def update_txn_index(self, completed_txn, last_stable_offset: int) -> None:
        """Record a completed transaction if it aborted (duck-typed: ``is_aborted``,
        ``producer_id``, ``first_offset``, ``last_offset``)."""
        if completed_txn.is_aborted:
            self._txn_index.append(AbortedTxn(completed_txn.producer_id, completed_txn.first_offset,
                                              completed_txn.last_offset, last_stable_offset))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        return self._txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    # --- reads ---

    def translate_offset(self, offset: int, starting_file_position: int = 0) -> LogOffsetPosition | None:
        """The first batch whose last offset >= ``offset``: an index lookup, then a forward
        scan of batch headers. None when the offset is past the end."""
        mapping = self.offset_index.lookup(offset)
        return self._log.search_for_offset_with_size(offset, max(mapping.position, starting_file_position))

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = True) -> FetchDataInfo | None:
        """Up to ``max_size`` bytes starting with the batch holding ``start_offset``, not
        past ``max_position`` (default: the end of the .log). With ``min_one_message`` the
        first batch is returned whole even when larger than ``max_size``. None when
        ``start_offset`` is past the end of this segment."""
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for log read from segment {self._log.path}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        if max_position is None:
            max_position = self.size  # loaded after the scan: covers the batch it found
        start_position = found.position
        offset_metadata = LogOffsetMetadata(start_offset, self._base_offset, start_position)
        adjusted_max_size = max(max_size, found.size) if min_one_message else max_size
        if adjusted_max_size == 0:
            return FetchDataInfo(offset_metadata, EMPTY_RECORDS)
        fetch_size = min(max_position - start_position, adjusted_max_size)
        return FetchDataInfo(offset_metadata, self._log.slice(start_position, max(fetch_size, 0)),
                             adjusted_max_size < found.size)

    def fetch_upper_bound_offset(self, start_offset_position: OffsetPosition, fetch_size: int) -> int | None:
        found = self.offset_index.fetch_upper_bound_offset(start_offset_position, fetch_size)
        return found.offset if found is not None else None

    def read_next_offset(self) -> int:
        """The offset the next append gets: the last batch's last offset + 1, found by a
        scan from the last index entry (or the base offset when empty)."""
        fetch = self.read(self.offset_index.last_offset, self._log.size_in_bytes, min_one_message=False)
        if fetch is None:
            return self._base_offset
        last = fetch.records.last_batch()
        return last.next_offset if last is not None else self._base_offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None
                                 ) -> TimestampAndOffset | None:
        """The first record with timestamp >= ``timestamp`` and offset >= ``starting_offset``
        (default: the base offset): time index lookup, offset index lookup, then a scan.
        None when no record qualifies."""
        if starting_offset is None:
            starting_offset = self._base_offset
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        return self._log.search_for_timestamp(timestamp, position, starting_offset)

    # --- recovery and truncation ---

    def recover(self, on_batch: RecoveryHook | None = None, leader_epoch_cache=None) -> int:
        """Rebuild the offset, time and transaction indexes from the .log, re-validating
        every batch (sizes, magic, CRC, offsets increasing and within this segment), and cut
        the .log at the first invalid byte. Returns the number of bytes cut. Feeds each
        valid batch to ``on_batch`` and newer leader epochs to ``leader_epoch_cache``
        (``assign(epoch, start_offset)`` / ``latest_epoch``). Raises
        ``OffsetOverflowError`` for a valid batch whose offsets do not fit this segment.

        The indexes are left trimmed; the log layer resizes the active segment's indexes
        (``resize_indexes(max_index_size)``) after loading, as Kafka's LogLoader does."""
        offset_index = self.offset_index
        time_index = self.time_index
        offset_index.reset()
        time_index.reset()
        self._txn_index.reset()
        valid_bytes = 0
        last_index_entry = 0
        base = self._base_offset
        interval = self._index_interval_bytes
        max_ts, max_ts_offset = NO_TIMESTAMP, base
        self._max_timestamp_and_offset = TimestampOffset(max_ts, max_ts_offset)
        previous_last_offset = base - 1
        latest_epoch = leader_epoch_cache.latest_epoch if leader_epoch_cache is not None else None
        time_index_ts = time_index.last_entry.timestamp
        try:
            # locals only in this loop: it runs for every batch of every recovered segment
            for _, header, batch in self._log.iter_batches(with_bytes=True, chunk_size=RECOVERY_CHUNK):
                if header.magic == CURRENT_MAGIC:
                    # ensure_valid(batch, 0, header), inlined (the batch is whole: iter_batches)
                    if crc32c(batch[ATTRIBUTES_OFFSET:]) != header.crc:
                        ensure_valid(batch, 0, header)  # raises CorruptRecordError with the details
                    if header.records_count < 0:
                        raise InvalidRecordError(f"negative records count {header.records_count}")
                    first = header.base_offset
                    last = first + header.last_offset_delta
                    batch_max_ts = header.max_timestamp
                else:
                    # a legacy (magic 0/1) entry: its CRC-32, sizes and, in a wrapper, every
                    # inner message; its last offset is its own (legacy.legacy_entry_info)
                    entry = legacy_entry_info(batch, LEGACY_MAX_DECOMPRESSED)
                    first, last, batch_max_ts = entry.first_offset, entry.last_offset, entry.max_timestamp
                if first <= previous_last_offset or last < first:
                    raise InvalidRecordError(
                        f"batch offsets {first}..{last} do not follow {previous_last_offset}")
                if last - base > INT32_MAX:  # last >= first >= base here
                    self._ensure_offset_in_range(last)
                if batch_max_ts > max_ts:
                    max_ts, max_ts_offset = batch_max_ts, last
                    self._max_timestamp_and_offset = TimestampOffset(max_ts, max_ts_offset)
                if valid_bytes - last_index_entry > interval:
                    offset_index.append(last, valid_bytes)
                    if max_ts > time_index_ts:  # else maybe_append would not append
                        time_index.maybe_append(max_ts, max_ts_offset)
                        time_index_ts = max_ts
                    last_index_entry = valid_bytes
                valid_bytes += header.batch_length + LOG_OVERHEAD
                epoch = header.partition_leader_epoch
                if (leader_epoch_cache is not None and epoch >= 0
                        and (latest_epoch is None or epoch > latest_epoch)):
                    leader_epoch_cache.assign(epoch, first)
                    latest_epoch = epoch
                if on_batch is not None and header.magic == CURRENT_MAGIC:  # legacy: no producer state
                    aborted = on_batch(header, batch)
                    if aborted is not None:
                        self._txn_index.append(aborted)
                previous_last_offset = last
        except (DecodeError, CorruptRecordError, InvalidRecordError) as exc:
            reason = f"invalid batch: {exc}"
        else:
            reason = "a partial batch at the end (an interrupted write)"
        truncated = self._log.size_in_bytes - valid_bytes
        if truncated > 0:
            batches, records, partial = self._describe_tail(valid_bytes)
            log.warning("Truncated %d bytes from byte offset %d of log segment %s during recovery "
                        "(the segment now ends after offset %d): %s; removed %d whole batches "
                        "holding %d records by their headers, and %d bytes of no whole batch",
                        truncated, valid_bytes, self._log.path, previous_last_offset, reason,
                        batches, records, partial)
        self._log.truncate_to(valid_bytes)
        offset_index.trim_to_valid_size()
        # as a cleanly closed segment, record the largest timestamp ever seen
        time_index.maybe_append(max_ts, max_ts_offset, skip_full_check=True)
        time_index.trim_to_valid_size()
        self._bytes_since_last_index_entry = valid_bytes - last_index_entry
        return truncated

    def _describe_tail(self, position: int) -> tuple[int, int, int]:
        """(whole batches, records their headers count, bytes left over) of the .log from
        ``position``, as far as the headers can be walked: what a recovery that cuts there
        removes, for its warning (a legacy entry counts one record)."""
        batches = records = 0
        end = position
        try:
            for pos, header, _ in self._log.iter_batches(position):
                batches += 1
                records += max(header.records_count, 0)
                end = pos + header.size_in_bytes
        except (DecodeError, CorruptRecordError):
            pass
        return batches, records, self._log.size_in_bytes - end

    def truncate_to(self, offset: int) -> int:
        """Remove every batch from the one holding ``offset`` on, and the index entries of
        those offsets; the indexes grow back to ``max_index_size`` (this segment becomes the
        active one). Returns the bytes removed from the .log."""
        mapping = self.translate_offset(offset)
        offset_index = self.offset_index
        time_index = self.time_index
        offset_index.truncate_to(offset)
        time_index.truncate_to(offset)
        self._txn_index.truncate_to(offset)
        offset_index.resize(offset_index.max_index_size)
        time_index.resize(time_index.max_index_size)
        truncated = 0 if mapping is None else self._log.truncate_to(mapping.position)
        if self._log.size_in_bytes == 0:
            self.created = self._time.milliseconds()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        if self.max_timestamp_so_far() >= 0:
            self._max_timestamp_and_offset = self._read_largest_timestamp()
        return truncated

    def _read_largest_timestamp(self) -> TimestampOffset:
        last_entry = self.time_index.last_entry
        position = self.offset_index.lookup(last_entry.offset).position
        after = self._log.largest_timestamp_after(position)
        if after.timestamp > last_entry.timestamp:
            return TimestampOffset(after.timestamp, after.offset)
        return last_entry

    # --- lifecycle ---

    def on_become_inactive_segment(self) -> None:
        """The segment stops being the active one: write the final time-index entry and
        trim the indexes and the .log to their contents."""
        self.time_index.maybe_append(self.max_timestamp_so_far(), self.offset_of_max_timestamp_so_far(),
                                     skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._log.trim()

    def flush(self) -> None:
        """fsync the .log and the indexes."""
        self._log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self._txn_index.flush()

    def update_parent_dir(self, directory: Path | str) -> None:
        self._log.update_parent_dir(directory)
        self._lazy_offset_index.update_parent_dir(directory)
        self._lazy_time_index.update_parent_dir(directory)
        self._txn_index.update_parent_dir(directory)

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment, replacing ``old_suffix`` at the end of its name
        with ``new_suffix`` (e.g. "" -> ".deleted", ".cleaned" -> ".swap", ".swap" -> "")."""
        self._log.rename_to(_replace_suffix(self._log.path, old_suffix, new_suffix))
        self._lazy_offset_index.rename_to(_replace_suffix(self.offset_index_file, old_suffix, new_suffix))
        self._lazy_time_index.rename_to(_replace_suffix(self.time_index_file, old_suffix, new_suffix))
        self._txn_index.rename_to(_replace_suffix(self._txn_index.file, old_suffix, new_suffix))

    def has_suffix(self, suffix: str) -> bool:
        return all(p.name.endswith(suffix) for p in (
            self._log.path, self.offset_index_file, self.time_index_file, self._txn_index.file))

    def close(self) -> None:
        """Write the final time-index entry, trim and close everything (fsyncs the .log)."""
        if self._max_timestamp_and_offset is not None:
            try:
                self.time_index.maybe_append(self._max_timestamp_and_offset.timestamp,
                                             self._max_timestamp_and_offset.offset, skip_full_check=True)
            except Exception as exc:  # as Kafka: closing must not fail on this
                log.warning("maybe_append on close of %s failed: %s", self._log.path, exc)
        for close in (self._lazy_offset_index.close, self._lazy_time_index.close, self._log.close,
                      self._txn_index.close):
            try:
                close()
            except Exception as exc:
                log.warning("closing %s failed: %s", self._log.path, exc)

    def close_handlers(self) -> None:
        """Release descriptors and mappings without writing (the disk may have failed)."""
        for close in (self._lazy_offset_index.close_handler, self._lazy_time_index.close_handler,
                      self._log.close_handlers, self._txn_index.close):
            try:
                close()
            except Exception as exc:
                log.warning("closing handlers of %s failed: %s", self._log.path, exc)

    def delete_if_exists(self) -> None:
        """Delete the .log and its indexes (each attempted; the first error is raised)."""
        errors: list[BaseException] = []
        for delete in (self._log.delete_if_exists, self._lazy_offset_index.delete_if_exists,
                       self._lazy_time_index.delete_if_exists, self._txn_index.delete_if_exists):
            try:
                delete()
            except OSError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def deleted(self) -> bool:
        return not any(p.exists() for p in (
            self._log.path, self.offset_index_file, self.time_index_file, self._txn_index.file))

    def __repr__(self) -> str:
        ts = self._max_timestamp_and_offset.timestamp if self._max_timestamp_and_offset else None
        return f"LogSegment(base_offset={self._base_offset}, size={self.size}, largest_record_timestamp={ts})"
