"""``Cleaner``: one compaction of one log (Kafka's ``LogCleaner.Cleaner``).

Owns the two passes of a cleaning and the rewrite of batches:

1. ``build_offset_map``: walk the dirty section [first dirty offset, first uncleanable
   offset) and put every keyed record's offset in the ``SkimpyOffsetMap`` (a later record
   of a key overwrites the earlier). Transactional and control batches are skipped (see
   below). When the map reaches its ``max_entries`` the pass stops there; the cleaning then
   covers [.., end offset) with end offset = the last offset put + 1, else the first
   uncleanable offset.
2. ``clean_segments`` per group of segments below the end offset (``group_segments_by_size``,
   Kafka's ``groupSegmentsBySize``: a group fits in segment.bytes, its indexes in
   segment.index.bytes, its offsets in int32 relative to the group's base): copy the group
   into ONE new segment ``<first base>.log.cleaned`` keeping a record when it has a key,
   its offset is >= the map's offset for the key (the latest), and it has a value or its
   batch's delete horizon has not passed. Then ``UnifiedLog.replace_segments`` swaps it in
   (``.cleaned`` -> ``.swap``, old segments -> ``.deleted``, ``.swap`` -> live; see
   ``LocalLog.replace_segments``).

Delete horizons (KIP-534, as Kafka's ``MemoryRecords.filterTo``): a tombstone or a
transaction marker is kept for delete.retention.ms after the cleaning that first met it
with nothing left to delete it for. That cleaning rewrites its batch with the delete
horizon (the cleaning's start time + delete.retention.ms) in the base timestamp field and
attribute bit 6 set (``DELETE_HORIZON_FLAG_MASK``; the records' timestamp deltas are then
relative to the horizon, so every record keeps its timestamp). A later cleaning that finds
the horizon passed drops the batch's tombstones, and the marker when its transaction has
no batch left (``CleanedTransactionMetadata``). A batch already stamped keeps its horizon;
one without tombstones is never stamped.

Batches keep their structure, as Kafka's ``MemoryRecords.filterTo``: a batch with every
record kept is copied byte for byte; one with some records kept is rewritten as one batch
with the same base offset, base timestamp, last offset delta (the producer's last sequence
survives), base sequence, producer id/epoch, partition leader epoch, timestamp type and
codec (recompressed), its records' bytes spliced as they were (their deltas are relative
to the unchanged base offset and base timestamp) and its max timestamp the kept records'
(CreateTime); a batch with nothing kept (an empty one too) is dropped, except the last
batch of a producer still in the producer state (a marker too), kept as an empty batch
(header only) so idempotence survives. Offsets never change: cleaning only opens gaps.

Both passes walk a segment a window of batches at a time (``scan.py``): the records of a
window are located at once with numpy (``RecordLayout``: the batches' headers gathered
from the bytes, every record's fields). Pass 1 keeps what it read and walked of a
segment's first windows (data batches only, all within the dirty section) for pass 2 in
the dedupe buffer's bytes that the map leaves (``log.cleaner.dedupe.buffer.size`` /
threads, less the map's ``reserved_bytes``: map and kept windows never exceed it together); pass 2 takes those and
reads and walks the rest again. Pass 1 hashes the window's keys and puts them in the
map at once (``SkimpyOffsetMap.put_records``: no Python object per record; while the
section's records fit in ``defer_limit`` they are only kept, and sorted once at the end).
Pass 2 keeps a dirty record when its offset is one of the map's
(``SkimpyOffsetMap.is_latest``: a bitmap or a search), looks the keys of the clean
section up by hash in bulk, takes the per-batch decisions from
counts, and writes each run of plain data batches (uncompressed, not transactional, not
being stamped) at once (``rewrite.py``: kept batches copied as bytes, the others spliced
with a new header); the other batches go one at a time. No record is decoded into an
object except in a batch being stamped with a delete horizon (re-encoded: its timestamp
deltas change) and in control batches. The offset and time indexes of the new segment are
built by ``LogSegment.append`` as for any append; the aborted transactions of the old
segments' ``.txnindex`` files are copied into the new one.

Transactions: every transaction with data below the first uncleanable offset is decided
(that offset is at most the log's first unstable offset). The aborted ones are read from the
``.txnindex`` files (``collect_aborted_transactions``): their data batches never enter the
offset map and are dropped by pass 2 (kept as an empty batch when a producer's last), so an
aborted write can never hide an older committed value. Committed transactional batches are
compacted like any other (a rewritten one stays transactional). A marker (control batch) is
removed, as Kafka's ``CleanedTransactionMetadata`` decides, once no batch of its transaction
was met in this pass (each pass walks the log from its start) and its delete horizon has
passed; the first pass that finds its transaction empty stamps the horizon; until then it
is kept whole. The aborted-transaction entries of the old ``.txnindex`` files are copied
into the new one, except those whose marker was removed.

Invariants: the active segment and everything from the first uncleanable offset on are
never read for removal nor rewritten; a cleaning aborted (``CleanerAbortedError``, or a
segment that vanished from the log meanwhile: retention, truncation) leaves the log as it
was and deletes its ``.cleaned`` files.

Thread-safety: a ``Cleaner`` is used by one cleaner thread. It reads inactive segments
without the log's lock (they are immutable); only the swap runs under the log's lock.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...record.batch import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CREATE_TIME,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DELETE_HORIZON_FLAG_MASK,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TRANSACTIONAL_FLAG_MASK,
    build_batch,
    decode_records,
    encode_record,
    records_payload,
)
from ...record.control import ControlRecordType, parse_control_type
from ...record.errors import DecodeError
from ...record.limits import INT32_MAX
from .. import files
from ..clock import SYSTEM_TIME, Time
from ..segment import LogSegment
from .offset_map import SkimpyOffsetMap
from .rewrite import rewrite_run
from .scan import WINDOW_BYTES, RecordLayout, read_windows
from .throttler import Throttler

__all__ = ["Cleaner", "CleanerStats", "CleanerAbortedError", "CleanedTransactionMetadata",
           "group_segments_by_size"]

log = logging.getLogger(__name__)

_APPEND_CHUNK = 1 << 20  # bytes of retained batches buffered before one append
# memory of a batch's (position, BatchHeader) pair, counted for the walks pass 1 keeps
_BATCH_OBJECT_BYTES = 320
# batches that pass 1 may have to leave out of the map (markers; aborted transactions)
_SKIPPED_BY_MAP = CONTROL_FLAG_MASK | TRANSACTIONAL_FLAG_MASK


class CleanedTransactionMetadata:
    """Kafka's ``CleanedTransactionMetadata``: the transactions met while pass 2 walks the
    batches in offset order. ``aborted``: the log's aborted transactions (``AbortedTxn``)."""

    def __init__(self, aborted) -> None:
        self._aborted = deque(sorted(aborted, key=lambda t: t.first_offset))
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, list] = {}  # pid -> [AbortedTxn, a batch was met]

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0].first_offset <= offset:
            txn = self._aborted.popleft()
            self._ongoing_aborted[txn.producer_id] = [txn, False]

    def on_data_batch(self, header) -> bool:
        """True when the batch belongs to an aborted transaction (to be removed)."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        entry = self._ongoing_aborted.get(header.producer_id)
        if entry is not None:
            entry[1] = True
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, header, kind: ControlRecordType | None) -> bool:
        """True when the marker ends a transaction none of whose batches was met: it may
        be removed (once past the delete horizon)."""
        self._consume_aborted_up_to(header.last_offset)
        pid = header.producer_id
        if kind == ControlRecordType.ABORT:
            entry = self._ongoing_aborted.pop(pid, None)
            return not (entry is not None and entry[1])
        if kind == ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False


@dataclass
class _Window:
    """Pass 2's decisions for the data batches of one window (``Cleaner._clean_window``):
    the records' layout and which it keeps, per batch the kept and tombstone counts and
    the largest kept timestamp delta, and the kept records as runs (``RecordLayout.runs``)."""
    layout: RecordLayout
    keep: Any
    kept_count: list[int]
    tomb_count: list[int]
    max_delta: list[int]
    run_starts: Any
    run_ends: Any
    run_ptr: list[int]


class CleanerAbortedError(Exception):
    """The cleaning of a log was aborted (log deleted, truncated, or shutdown)."""


@dataclass
class CleanerStats:
    """Kafka's ``CleanerStats``: what one cleaning read and wrote."""
    start_ms: int = 0
    map_complete_ms: int = 0
    end_ms: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0
    segments_replaced: list[int] = field(default_factory=list)

    @property
    def elapsed_secs(self) -> float:
        return max(self.end_ms - self.start_ms, 0) / 1000.0


def group_segments_by_size(segments: list[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose total log size fits in
    ``max_size``, whose offset and time indexes each fit in ``max_index_size``, and whose
    offsets fit in an int32 relative to the group's first base offset."""
    groups: list[list[LogSegment]] = []
    segs = list(segments)
    i = 0
    while i < len(segs):
        first = segs[i]
        group = [first]
        log_size = first.size
        index_size = first.offset_index.size_in_bytes()
        time_index_size = first.time_index.size_in_bytes()
        i += 1
        while i < len(segs):
            nxt = segs[i]
            last_offset = (segs[i + 1].base_offset - 1 if i + 1 < len(segs)
                           else max(nxt.read_next_offset(), nxt.base_offset + 1) - 1)
            last_offset = min(last_offset, max(first_uncleanable_offset - 1, nxt.base_offset))
            if (log_size + nxt.size > max_size
                    or index_size + nxt.offset_index.size_in_bytes() > max_index_size
                    or time_index_size + nxt.time_index.size_in_bytes() > max_index_size
                    or (nxt.size > 0 and last_offset - group[0].base_offset > INT32_MAX)):
                break
            group.append(nxt)
            log_size += nxt.size
            index_size += nxt.offset_index.size_in_bytes()
            time_index_size += nxt.time_index.size_in_bytes()
            i += 1
        groups.append(group)
    return groups


class Cleaner:
    """Cleans one log at a time (``clean``); see the module docstring.

    ``throttler`` (log.cleaner.io.max.bytes.per.second) is told of every batch read and
    written. ``check_done(topic_partition)`` is called between segments and raises
    ``CleanerAbortedError`` to stop; ``crash_hook(step)`` (tests) is called at each step of
    a replace: "cleaned" (the ``.cleaned`` segment is written and flushed), then those of
    ``LocalLog.replace_segments`` ("swap", "delete")."""

    def __init__(self, offset_map: SkimpyOffsetMap, *, time: Time = SYSTEM_TIME,
                 check_done: Callable[[tuple[str, int]], None] | None = None,
                 crash_hook: Callable[[str], None] | None = None,
                 throttler: Throttler | None = None,
                 max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> None:
        self.offset_map = offset_map
        self.time = time
        self.check_done = check_done or (lambda tp: None)
        self.crash_hook = crash_hook
        self.max_decompressed = max_decompressed
        self.throttler = throttler
        self._aborted: dict[int, list[tuple[int, int]]] = {}
        self._txns = CleanedTransactionMetadata([])
        # set by ``clean`` for pass 2: the dirty section [start, end) the map covers
        self._dirty_start = self._map_end = 0
        # segment base offset -> the windows pass 1 walked from the segment's start, kept
        # for pass 2 while they fit in the dedupe buffer beside the map's table:
        # [(file position after the window, bytes, batches, RecordLayout)]
        self._walked: dict[int, list[tuple[int, bytes, list, RecordLayout]]] = {}
        self.window_bytes = WINDOW_BYTES  # bytes of batches walked at once (``read_windows``)

    # --- the whole cleaning ---

    def clean(self, ulog, first_dirty_offset: int, first_uncleanable_offset: int) -> tuple[int, CleanerStats]:
        """Clean ``ulog`` (a ``UnifiedLog``) up to the first uncleanable offset. Returns the
        end offset (the next first dirty offset, for the cleaner checkpoint) and stats."""
        stats = CleanerStats(start_ms=self.time.milliseconds())
        unstable = ulog.first_unstable_offset  # an open transaction is never cleaned
        if unstable is not None:
            first_uncleanable_offset = max(min(first_uncleanable_offset, unstable), first_dirty_offset)
        omap = self.offset_map
        omap.clear()
        self._walked = {}
        try:
            return self._clean(ulog, first_dirty_offset, first_uncleanable_offset, stats)
        finally:
            self._walked = {}

    def _clean(self, ulog, first_dirty_offset: int, first_uncleanable_offset: int,
               stats: CleanerStats) -> tuple[int, CleanerStats]:
        omap = self.offset_map
        aborted_txns = ulog.collect_aborted_transactions(ulog.log_start_offset, ulog.log_end_offset)
        self._aborted = self._aborted_ranges(aborted_txns)
        self._txns = CleanedTransactionMetadata(aborted_txns)
        end_offset = self.build_offset_map(ulog, first_dirty_offset, first_uncleanable_offset, stats)
        self._dirty_start, self._map_end = first_dirty_offset, end_offset
        stats.map_complete_ms = self.time.milliseconds()
        stats.buffer_utilization = omap.utilization
        config = ulog.config
        active = ulog.active_segment
        to_clean = [s for s in ulog.segments if s.base_offset < end_offset and s is not active]
        last_offsets_of_producers = ulog.last_records_of_active_producers()
        for group in group_segments_by_size(to_clean, config.segment_bytes, config.max_index_size,
                                            first_uncleanable_offset):
            self.clean_segments(ulog, group, stats.start_ms, last_offsets_of_producers, stats)
        stats.end_ms = self.time.milliseconds()
        return end_offset, stats

    @staticmethod
    def _aborted_ranges(aborted_txns) -> dict[int, list[tuple[int, int]]]:
        """producer id -> [(first offset, marker offset)] of its aborted transactions."""
        out: dict[int, list[tuple[int, int]]] = {}
        for txn in aborted_txns:
            out.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
        return out

    def _is_aborted(self, header) -> bool:
        ranges = self._aborted.get(header.producer_id) if header.is_transactional else None
        if not ranges:
            return False
        return any(first <= header.base_offset <= last for first, last in ranges)

    # --- pass 1 ---

    def build_offset_map(self, ulog, start: int, end: int, stats: CleanerStats) -> int:
        """Fill the map from ``start`` to ``end`` (exclusive); returns where it stopped."""
        tp = ulog.topic_partition
        active = ulog.active_segment
        dirty = [s for s in ulog.segments if s is not active and s.read_next_offset() > start
                 and s.base_offset < end]
        if dirty:  # the offsets of the section bound its keys: the table is sized once
            self.offset_map.reserve(min(end, dirty[-1].read_next_offset()) - start)
        # the dedupe buffer's bytes the map leaves: pass 1 keeps its walks there
        room = self.offset_map.memory - self.offset_map.reserved_bytes
        for segment in dirty:
            self.check_done(tp)
            walked: list[tuple[int, bytes, list, RecordLayout]] = []
            self._walked[segment.base_offset] = walked
            keeping = True  # the windows walked so far are all kept, from the segment's start
            for window_end, buf, batches in read_windows(segment.log, self.window_bytes):
                data = []
                reached_end = False
                layout = None
                if (batches[0][1].last_offset >= start and batches[-1][1].base_offset < end
                        and not any(h.attributes & _SKIPPED_BY_MAP for _, h in batches)):
                    # the common window: all of it in range, data batches only, none aborted
                    size = sum([h.batch_length for _, h in batches]) + LOG_OVERHEAD * len(batches)
                    stats.map_bytes_read += size
                    if self.throttler is not None:
                        self.throttler.maybe_throttle(size)
                    layout = RecordLayout(buf, batches, self.max_decompressed)
                    cost = len(buf) + layout.nbytes + _BATCH_OBJECT_BYTES * len(batches)
                    if keeping and cost <= room:  # pass 2 takes it from here
                        walked.append((window_end, buf, batches, layout))
                        room -= cost
                    else:
                        keeping = False  # from here on pass 2 reads the segment again
                    batches = []
                else:
                    keeping = False
                for pos, header in batches:
                    if header.last_offset < start:
                        continue
                    if header.base_offset >= end:
                        reached_end = True
                        break
                    stats.map_bytes_read += header.size_in_bytes
                    if self.throttler is not None:
                        self.throttler.maybe_throttle(header.size_in_bytes)
                    if not (header.is_control or self._is_aborted(header)):
                        data.append((pos, header))
                if layout is not None or data:
                    if layout is None:
                        layout = RecordLayout(buf, data, self.max_decompressed)
                    stopped = self._index(layout, start, end, stats)
                    if stopped is not None:
                        log.debug("%s: offset map full at offset %d", ulog.name, stopped)
                        return stopped
                if reached_end:
                    return end
        return end

    def _index(self, layout: RecordLayout, start: int, end: int, stats: CleanerStats) -> int | None:
        """Put the keyed records of ``layout`` within [start, end) in the map; the offset
        where a full map stopped it, else None."""
        omap = self.offset_map
        stats.map_messages_read += layout.n
        offsets = layout.offsets
        key_start, key_len = layout.key_start, layout.key_len
        wanted = key_len >= 0
        if layout.n and (offsets[0] < start or offsets[-1] >= end):
            wanted &= (offsets >= start) & (offsets < end)
        if not wanted.all():
            offsets, key_start, key_len = offsets[wanted], key_start[wanted], key_len[wanted]
        hi, lo = omap.hash(layout.region, key_start, key_len)
        if omap.put_records(hi, lo, offsets) < offsets.size:
            return omap.latest_offset + 1
        return None

    # --- pass 2 ---

    def clean_segments(self, ulog, group: list[LogSegment], current_time_ms: int,
                       last_offsets_of_producers: dict[int, int], stats: CleanerStats) -> None:
        """Copy ``group`` into one ``.cleaned`` segment and swap it in for the group.
        ``current_time_ms``: the cleaning's time, against which delete horizons are read
        and from which new ones are stamped."""
        directory = ulog.dir
        config = ulog.config
        base = group[0].base_offset
        LogSegment.delete_files(directory, base, files.CLEANED_FILE_SUFFIX)  # a stale one
        cleaned = LogSegment.open(directory, base, config, time=self.time,
                                  file_suffix=files.CLEANED_FILE_SUFFIX)
        try:
            for old in group:
                self.check_done(ulog.topic_partition)
                removed_markers = self._clean_into(old, cleaned, current_time_ms,
                                                   config.values["delete.retention.ms"],
                                                   last_offsets_of_producers, stats)
                for txn in old.txn_index.all_aborted_txns():
                    if txn.last_offset not in removed_markers:
                        cleaned.txn_index.append(txn)
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            cleaned.set_last_modified(group[-1].last_modified)
            if self.crash_hook is not None:
                self.crash_hook("cleaned")
            if not ulog.replace_segments([cleaned], group, crash_hook=self.crash_hook):
                raise CleanerAbortedError(f"{ulog.name}: segments {[s.base_offset for s in group]} "
                                          "changed during cleaning")
        except Exception:
            # (an Exception only: a BaseException is a simulated crash in tests, which must
            # leave the files as a real crash would)
            if cleaned.has_suffix(files.CLEANED_FILE_SUFFIX):
                cleaned.close_handlers()
                cleaned.delete_if_exists()
            raise
        stats.segments_replaced.append(base)

    def _clean_into(self, source: LogSegment, dest: LogSegment, now_ms: int, delete_retention_ms: int,
                    last_offsets_of_producers: dict[int, int], stats: CleanerStats) -> set[int]:
        """Copy what ``source`` keeps into ``dest``; returns the offsets of removed markers."""
        removed_markers: set[int] = set()
        self._pending: list[bytes | bytearray] = []
        self._pending_size = 0
        # the (position, header) of every pending batch, while all are known (else None)
        self._pending_batches: list | None = []
        self._max_ts, self._max_ts_offset, self._last = -1, source.base_offset, source.base_offset
        position = 0
        for window_end, buf, batches, layout in self._walked.pop(source.base_offset, None) or ():
            self._clean_window(buf, batches, dest, now_ms, now_ms + delete_retention_ms,
                               last_offsets_of_producers, removed_markers, stats, layout)
            position = window_end
        for _, buf, batches in read_windows(source.log, self.window_bytes, start=position):
            self._clean_window(buf, batches, dest, now_ms, now_ms + delete_retention_ms,
                               last_offsets_of_producers, removed_markers, stats)
        self._flush(dest)
        return removed_markers

    def _flush(self, dest: LogSegment) -> None:
        if self._pending:
            dest.append(self._last, self._max_ts, self._max_ts_offset, b"".join(self._pending),
                        batches=self._pending_batches)
            self._pending, self._pending_size, self._pending_batches = [], 0, []

    def _clean_window(self, buf, batches, dest: LogSegment, now_ms: int, new_horizon: int,
                      last_offsets_of_producers: dict[int, int], removed_markers: set[int],
                      stats: CleanerStats, layout: RecordLayout | None = None) -> None:
        """Pass 2 over one window of batches: which records each batch keeps, all at once
        (``RecordLayout``, or ``layout``: pass 1's of the same batches, all data); then
        each run of consecutive plain data batches (uncompressed, not transactional, not
        to be stamped, kept or dropped by their records alone) is written at once
        (``rewrite_run``), and every other batch is copied, spliced, rebuilt, emptied or
        dropped on its own (``_clean_batch``)."""
        data_at = [i for i, (_, h) in enumerate(batches) if not h.is_control] if layout is None else None
        if data_at is not None and not data_at:
            for pos, header in batches:
                self._clean_batch(buf, pos, header, -1, None, dest, now_ms, new_horizon,
                                  last_offsets_of_producers, removed_markers, stats)
            return
        if data_at is None or len(data_at) == len(batches):
            data = batches
        else:
            data = [batches[i] for i in data_at]
        if layout is None:
            layout = RecordLayout(buf, data, self.max_decompressed)
        np = layout.np
        nb = len(data)
        has_key = layout.key_len >= 0
        stats.invalid_messages += int(layout.n - has_key.sum())
        attrs = layout.attributes
        base_ts = layout.header["base_timestamp"]
        has_horizon = (attrs & DELETE_HORIZON_FLAG_MASK) != 0
        retain_deletes = ~has_horizon | (now_ms < base_ts)
        is_null = layout.value_len < 0
        keep = has_key & self._is_latest(layout) & (~is_null | retain_deletes[layout.batch])
        kept_count = np.bincount(layout.batch, weights=keep, minlength=nb).astype(np.int64)
        tomb_count = np.bincount(layout.batch, weights=keep & is_null, minlength=nb).astype(np.int64)
        kept_idx = np.flatnonzero(keep)
        ptr = np.zeros(nb + 1, np.int64)
        np.cumsum(kept_count, out=ptr[1:])
        run_starts, run_ends, run_ptr = layout.runs(kept_idx)
        # per batch, the largest timestamp delta of its kept records (CreateTime max)
        max_delta = np.zeros(nb, np.int64)
        nonempty = np.flatnonzero(kept_count)
        if nonempty.size:
            max_delta[nonempty] = np.maximum.reduceat(layout.ts_delta[kept_idx], ptr[nonempty])
        stamp = (kept_count > 0) & (tomb_count > 0) & ~has_horizon
        plain = (((attrs & (TRANSACTIONAL_FLAG_MASK | COMPRESSION_CODEC_MASK)) == 0) & ~stamp
                 & ((kept_count > 0) | (layout.header["producer_id"] < 0)))
        if len(data) == len(batches) and plain.all():  # one run, no batch on its own
            self._write_run(buf, layout, 0, nb, data, kept_count, max_delta, run_starts, run_ends, run_ptr,
                            dest, stats)
            return
        window = _Window(layout, keep, kept_count.tolist(), tomb_count.tolist(), max_delta.tolist(),
                         run_starts, run_ends, run_ptr.tolist())
        if data_at is None:
            data_at = list(range(nb))
        # runs of consecutive plain data batches [a, b) (data indexes), with no control
        # batch between them
        at = np.array(data_at, np.int64)
        brk = np.ones(nb, bool)
        brk[1:] = (~plain[1:] | ~plain[:-1]) | (at[1:] != at[:-1] + 1)
        heads = np.flatnonzero(brk & plain).tolist()
        ends = np.flatnonzero(brk[1:] | ~plain[1:]).tolist() + [nb - 1]  # last data batch of each run
        plain_list = plain.tolist()
        j_of = [-1] * len(batches)  # data index of each batch (-1: control)
        for j, i in enumerate(data_at):
            j_of[i] = j
        i = 0
        for a in heads + [nb]:
            stop = data_at[a] if a < nb else len(batches)
            while i < stop:  # control batches and data batches that are not plain
                pos, header = batches[i]
                self._clean_batch(buf, pos, header, j_of[i], window, dest, now_ms, new_horizon,
                                  last_offsets_of_producers, removed_markers, stats)
                i += 1
            if a == nb:
                break
            b = ends[np.searchsorted(ends, a)] + 1 if plain_list[a] else a + 1
            self._write_run(buf, layout, a, b, data, kept_count, max_delta, run_starts, run_ends, run_ptr,
                            dest, stats)
            i = data_at[b - 1] + 1

    def _write_run(self, buf, layout: RecordLayout, a: int, b: int, data, kept_count, max_delta, run_starts,
                   run_ends, run_ptr, dest: LogSegment, stats: CleanerStats) -> None:
        """``rewrite_run`` of the plain data batches a..b-1 of the window (``data``, laid
        out by ``layout``; per batch ``kept_count`` and ``max_delta``, and the kept runs,
        see ``_clean_window``), then their accounting as ``_clean_batch`` does it one batch
        at a time."""
        np = layout.np
        lo, hi = int(run_ptr[a]), int(run_ptr[b])
        header = layout.header[a:b]
        sizes = layout.sizes[a:b]
        kept = kept_count[a:b]
        out, emitted, out_batches = rewrite_run(
            buf, layout.region_bytes, header, layout.positions[a:b], sizes, kept, max_delta[a:b],
            run_starts[lo:hi], run_ends[lo:hi], run_ptr[a:b + 1] - lo,
            headers=[h for _, h in data[a:b]] if self._pending_batches is not None else None)
        read = int(sizes.sum())
        stats.bytes_read += read
        stats.messages_read += int(layout.counts[a:b].sum())
        stats.messages_written += int(kept.sum())
        if self.throttler is not None:
            self.throttler.maybe_throttle(read + len(out))
        if not len(out):
            return
        e = np.flatnonzero(emitted)
        max_ts = header["max_timestamp"][e]
        top = int(e[np.argmax(max_ts)])  # the first of the largest, as one at a time
        if max_ts.max() > self._max_ts:
            self._max_ts = int(header["max_timestamp"][top])
            self._max_ts_offset = int(header["base_offset"][top]) + int(header["last_offset_delta"][top])
        self._last = int(header["base_offset"][e[-1]]) + int(header["last_offset_delta"][e[-1]])
        if self._pending_batches is not None and out_batches is not None:
            base = self._pending_size
            self._pending_batches += [(base + p, h) for p, h in out_batches]
        self._pending.append(out)
        self._pending_size += len(out)
        stats.bytes_written += len(out)
        if self._pending_size >= _APPEND_CHUNK:
            self._flush(dest)

    def _clean_batch(self, buf, pos: int, header, j: int, w: _Window | None, dest: LogSegment, now_ms: int,
                     new_horizon: int, last_offsets_of_producers: dict[int, int], removed_markers: set[int],
                     stats: CleanerStats) -> None:
        """One batch of pass 2 on its own: ``j`` its index among the window's data batches
        (-1: a control batch), ``w`` the window's decisions."""
        txns = self._txns
        mv = memoryview(buf)
        size = header.size_in_bytes
        stats.bytes_read += size
        horizon = header.delete_horizon_ms
        producer_last = (header.producer_id >= 0
                         and last_offsets_of_producers.get(header.producer_id) == header.last_offset)
        out: bytes | None
        if header.is_control:
            batch = mv[pos:pos + size]
            stats.messages_read += header.records_count
            records, kind = self._control_records(batch, header)
            can_discard = txns.on_control_batch(header, kind)
            if records == []:  # emptied by an earlier cleaning (DELETE_EMPTY / RETAIN_EMPTY)
                out = bytes(batch) if producer_last else None
            elif can_discard and horizon is not None and horizon <= now_ms:
                removed_markers.add(header.last_offset)  # its transaction is gone
                out = self._empty(header) if producer_last else None
            elif can_discard and horizon is None and records:  # stamped: kept until then
                stats.messages_written += len(records)
                out = self._rebuild(header, records, new_horizon)
            else:
                stats.messages_written += header.records_count
                out = bytes(batch)
        else:
            assert w is not None  # a data batch: the window's decisions were taken
            layout = w.layout
            count = header.records_count
            stats.messages_read += count
            kept = 0 if txns.on_data_batch(header) else w.kept_count[j]
            stamp = kept and w.tomb_count[j] and horizon is None
            stats.messages_written += kept
            if kept and kept == count and not stamp:
                out = bytes(mv[pos:pos + size])
            elif kept and stamp:  # the first cleaning to keep a tombstone: the horizon
                records = decode_records(records_payload(mv[pos:pos + size], 0, header,
                                                         self.max_decompressed), header)
                mask = w.keep[layout.first[j]:layout.first[j] + count].tolist()
                out = self._rebuild(header, [r for r, m in zip(records, mask) if m], new_horizon)
            elif kept:
                a, b = w.run_ptr[j], w.run_ptr[j + 1]
                out = self._splice(layout.join(w.run_starts[a:b].tolist(), w.run_ends[a:b].tolist()), header,
                                   kept, w.max_delta[j])
            elif producer_last:
                out = self._empty(header)
            else:
                out = None
        if self.throttler is not None:
            self.throttler.maybe_throttle(size + (len(out) if out is not None else 0))
        if out is None:
            return
        if header.max_timestamp > self._max_ts:
            self._max_ts, self._max_ts_offset = header.max_timestamp, header.last_offset
        self._last = header.last_offset
        self._pending_batches = None  # the segment append walks them
        self._pending.append(out)
        self._pending_size += len(out)
        stats.bytes_written += len(out)
        if self._pending_size >= _APPEND_CHUNK:
            self._flush(dest)

    def _is_latest(self, layout: RecordLayout):
        """Per record of ``layout``: its offset is >= the map's offset for its key (Kafka's
        ``shouldRetainRecord``). Pass 1 put every keyed record of [dirty start, map end) in
        the map, so there a record is the latest of its key exactly when its offset is one
        of the map's offsets (offsets are unique): ``SkimpyOffsetMap.is_latest``, no key
        looked up. Past the map's end every record is (the map's offsets are below it);
        only the records of the clean section, below the dirty start, are looked up by key."""
        np = layout.np
        offsets = layout.offsets
        out = offsets >= self._map_end
        dirty = (offsets >= self._dirty_start) & ~out
        if dirty.any():
            out |= dirty & self.offset_map.is_latest(offsets)
        below = np.flatnonzero((offsets < self._dirty_start) & (layout.key_len >= 0))
        if below.size:
            omap = self.offset_map
            hi, lo = omap.hash(layout.region, layout.key_start[below], layout.key_len[below])
            out[below] = offsets[below] >= omap.get_records(hi, lo)
        return out

    @staticmethod
    def _splice(body: bytes, header, count: int, max_delta: int) -> bytes:
        """The batch with only the ``count`` records of ``body``, their bytes copied as they are
        (offset and timestamp deltas stay relative to the unchanged base offset and base
        timestamp); the header keeps the batch's identity (filterTo)."""
        max_ts = header.base_timestamp + max_delta if header.timestamp_type == CREATE_TIME else header.max_timestamp
        horizon = header.delete_horizon_ms
        return build_batch(body, count=count, base_offset=header.base_offset,
                           last_offset_delta=header.last_offset_delta, base_timestamp=header.base_timestamp,
                           max_timestamp=max_ts, compression=header.compression,
                           timestamp_type=header.timestamp_type, producer_id=header.producer_id,
                           producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                           is_transactional=header.is_transactional, is_control=False,
                           partition_leader_epoch=header.partition_leader_epoch,
                           delete_horizon_ms=NO_TIMESTAMP if horizon is None else horizon)

    def _control_records(self, batch, header) -> tuple[list | None, ControlRecordType | None]:
        """The records of a control batch and its marker type; (None, None) when unreadable
        (an unknown marker is kept)."""
        try:
            records = decode_records(records_payload(batch, 0, header, self.max_decompressed), header)
            return records, (parse_control_type(records[0].key) if records else None)
        except DecodeError:
            return None, None

    @staticmethod
    def _empty(header) -> bytes:
        """Kafka's ``DefaultRecordBatch.writeEmptyHeader``: the batch's identity, no record
        (a producer's last batch, kept so its sequence and epoch survive)."""
        return build_batch(b"", count=0, base_offset=header.base_offset,
                           last_offset_delta=header.last_offset_delta,
                           base_timestamp=header.max_timestamp, max_timestamp=header.max_timestamp,
                           timestamp_type=header.timestamp_type, producer_id=header.producer_id,
                           producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                           is_transactional=header.is_transactional, is_control=header.is_control,
                           partition_leader_epoch=header.partition_leader_epoch)

    @staticmethod
    def _rebuild(header, kept, delete_horizon_ms: int | None = None) -> bytes:
        """One batch of the ``kept`` records with ``header``'s identity (filterTo); with a
        delete horizon, it is the base timestamp (bit 6 set) and the deltas are from it."""
        base_ts = header.base_timestamp if delete_horizon_ms is None else delete_horizon_ms
        body = b"".join(encode_record(r.offset - header.base_offset, r.timestamp - base_ts, r.key, r.value,
                                      r.headers) for r in kept)
        max_ts = (max(r.timestamp for r in kept) if header.timestamp_type == CREATE_TIME
                  else header.max_timestamp)
        return build_batch(body, count=len(kept), base_offset=header.base_offset,
                           last_offset_delta=header.last_offset_delta, base_timestamp=base_ts,
                           max_timestamp=max_ts, compression=header.compression,
                           timestamp_type=header.timestamp_type, producer_id=header.producer_id,
                           producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                           is_transactional=header.is_transactional, is_control=header.is_control,
                           partition_leader_epoch=header.partition_leader_epoch,
                           delete_horizon_ms=NO_TIMESTAMP if delete_horizon_ms is None else delete_horizon_ms)
