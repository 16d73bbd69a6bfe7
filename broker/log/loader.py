"""Loading and crash recovery of one partition directory (Kafka's ``LogLoader``), and the
producer-state rebuild shared with truncation (``rebuild_producer_state``).

Owns: the passes that turn whatever a previous process left in a partition directory into
a consistent set of segments plus the offsets the log starts with (``LoadedLogOffsets``):

1. Leftovers: delete ``*.deleted`` and ``*.tmp`` files; collect ``*.swap`` files; delete
   ``*.swap`` files whose base offset is >= the smallest ``*.cleaned`` file's (an
   interrupted split, KAFKA-6264), then every ``*.cleaned`` file.
2. Swaps: the remaining ``.swap`` segments came from a replace that had written its
   new segment; delete the old segment files whose base offset lies in
   [min swap base, max swap next offset), then rename every ``.swap`` file to its live
   name. At any crash point of a replace (``.cleaned`` -> ``.swap`` -> rename -> delete
   old) this yields either the old segments or the new ones, never both (R5).
3. Segments: open every ``.log`` in ascending order; delete index files that have no
   ``.log`` (orphans); without the clean-shutdown marker, empty the offset and time
   indexes of the segments that pass 4 will rebuild (instead of mapping and scanning their
   preallocated zeros); sanity-check each segment (Kafka's: the offset index must exist,
   a newly created time index is emptied, the txn index is checked; the active segment's
   offset and time indexes are checked too). A missing or corrupt index makes that
   segment be recovered (rebuilt from its ``.log``) even after a clean shutdown.
4. Recovery, only without the clean-shutdown marker (``had_clean_shutdown=False``): every
   segment from the one holding the recovery point on is re-validated by
   ``LogSegment.recover`` (CRC, sizes, offsets; indexes, txn index, leader epochs and
   producer state rebuilt; records are not decoded, so a CRC-valid batch with bad records
   is kept, as in Kafka); the first invalid byte and everything after it is cut and
   every later segment deleted (from the last backwards, after an fsync of the cut one,
   so that a crash in between leaves a prefix). Before a segment is recovered the
   producer state is rebuilt up to its base offset from the newest valid snapshot at or
   below it (replaying only what follows it), and a snapshot is taken after it, so the
   next segment starts from there. The snapshots this pass wrote above the newest one it
   found are deleted at its end (unlike Kafka): a snapshot keeps only the last batch of
   each producer, so pass 5 replays the log after the newest snapshot from before the
   crash instead, which keeps each producer's last five batches as its dedup window
   (I7). If the log start offset checkpoint is past the end of the log, every segment is
   deleted and the log restarts empty at that offset.
5. Reconcile: resize the active segment's indexes back to segment.index.bytes, truncate the
   leader-epoch cache to the log end and the log start, drop stray snapshots, and rebuild
   the log's producer state from the newest snapshot up to the log end offset (after a
   clean shutdown that snapshot is at the log end: nothing is read; with no snapshot at
   all after a clean shutdown, the scan is skipped and a snapshot written, as Kafka's
   upgrade path). The log start offset is max(checkpoint, first segment base), except for a
   remote-storage log (``remote_log_enabled``, tiered storage): there the checkpoint is
   kept even below the first local segment, whose lower offsets live in remote storage.

The recovery point returned is the checkpointed one (clamped to the log end): it is only
advanced by a later flush, never by loading (a crash before that flush must recover the
same tail again). After a clean shutdown it is the log end offset.

Observability: ``LoadStats`` records the base offsets of segments whose ``recover()`` ran
(R7: empty after a clean shutdown) and of segments read to rebuild producer state (R8).

On-disk format: none of its own (see ``files.py``, ``segment.py``, ``producer_state.py``).

Thread-safety: runs before the log is published; single-threaded, no locks needed.
``rebuild_producer_state`` must be called under the log's lock by a live log.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..record.limits import INT64_MAX
from . import files
from .clock import SYSTEM_TIME, Time
from .errors import CorruptIndexError, InvalidOffsetError, OffsetOverflowError
from .file_records import FileRecords
from .producer_state import ProducerStateManager
from .segment import LogOffsetMetadata, LogSegment
from .segments import LogSegments
from .txn_index import AbortedTxn

__all__ = ["LogLoader", "LoadedLogOffsets", "LoadStats", "rebuild_producer_state"]

log = logging.getLogger(__name__)

_INDEX_SUFFIXES = (files.INDEX_FILE_SUFFIX, files.TIME_INDEX_FILE_SUFFIX, files.TXN_INDEX_FILE_SUFFIX)


class LoadedLogOffsets(NamedTuple):
    log_start_offset: int
    recovery_point: int
    next_offset_metadata: LogOffsetMetadata


@dataclass
class LoadStats:
    """What a load did: base offsets of recovered segments (``recover()`` ran), of segments
    read to rebuild producer state, of segments deleted, and the bytes cut. Written by the
    loader only, read afterwards."""
    recovered_segments: list[int] = field(default_factory=list)
    replayed_segments: list[int] = field(default_factory=list)
    deleted_segments: list[int] = field(default_factory=list)
    truncated_bytes: int = 0


def _producer_state_hook(psm: ProducerStateManager):
    """``LogSegment.recover``'s ``on_batch``: replay into ``psm``, return an aborted txn.
    Batches without a producer id only move the map end offset, which the caller sets
    once after the segment (``_recover_segment``)."""
    load = psm.load_producers_from_batch

    def on_batch(header, batch) -> AbortedTxn | None:
        if header.producer_id < 0:
            return None
        result = load(batch, 0, header)
        if result is not None:
            completed, lso = result
            if completed.is_aborted:
                return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso)
        return None

    return on_batch


def _replay_segment(psm: ProducerStateManager, segment: LogSegment, start_offset: int,
                    max_position: int) -> None:
    """Feed ``psm`` every batch of ``segment`` from the one holding ``start_offset`` up to
    ``max_position``. Only control batches are read whole (their marker is needed)."""
    found = segment.translate_offset(start_offset)
    if found is None:
        return
    records = segment.log
    load = psm.load_producers_from_batch
    for pos, header, _ in records.iter_batches(found.position, max_position):
        if header.is_control and header.has_producer_id:
            load(records.pread(pos, header.size_in_bytes), 0, header)
        else:
            load(None, 0, header)


def rebuild_producer_state(psm: ProducerStateManager, segments: LogSegments, log_start_offset: int,
                           last_offset: int, *, reload_from_clean_shutdown: bool = False,
                           now_ms: int | None = None,
                           on_segment_read: Callable[[LogSegment], None] | None = None) -> None:
    """Kafka's ``UnifiedLog.rebuildProducerState``: bring ``psm`` to ``last_offset`` from
    its newest usable snapshot, replaying only the log after it, then snapshot."""
    active = segments.active_segment
    if active is not None:
        last_base = active.base_offset
        lower = segments.lower_segment(last_base)
        offsets_to_snapshot = ([lower.base_offset] if lower is not None else []) + [last_base, last_offset]
    else:
        offsets_to_snapshot = [last_offset]
    if psm.latest_snapshot_offset() is None and reload_from_clean_shutdown:
        # Clean shutdown and no snapshot at all (an upgrade): skip the scan.
        for offset in offsets_to_snapshot:
            psm.update_map_end_offset(offset)
            psm.take_snapshot()
        return
    is_empty_before = psm.is_empty() and psm.map_end_offset >= last_offset
    psm.truncate_and_reload(log_start_offset, last_offset, now_ms)
    if last_offset > psm.map_end_offset and not is_empty_before:
        segment_of_last = segments.floor_segment(last_offset)
        for segment in segments.values(psm.map_end_offset, last_offset):
            start = max(segment.base_offset, psm.map_end_offset, log_start_offset)
            psm.update_map_end_offset(start)
            if segment.base_offset in offsets_to_snapshot:
                psm.take_snapshot()
            if segment is segment_of_last:
                found = segment.translate_offset(last_offset)
                max_position = found.position if found is not None else segment.size
            else:
                max_position = segment.size
            if on_segment_read is not None:
                on_segment_read(segment)
            _replay_segment(psm, segment, start, max_position)
    psm.update_map_end_offset(last_offset)
    psm.take_snapshot()


def _scan_next_offset(log_path: Path) -> int | None:
    """The next offset after the last whole batch of a ``.log`` (None when empty), read
    without opening any index."""
    records = FileRecords.open(log_path, file_already_exists=True)
    try:
        last = None
        for _, header, _ in records.iter_batches():
            last = header
        return last.next_offset if last is not None else None
    finally:
        records.close_handlers()


class LogLoader:
    """Loads one partition directory; see the module docstring for the passes.

    Thread-safety: single use, single thread, before the log it loads is published."""

    def __init__(self, directory: Path | str, config, *, had_clean_shutdown: bool,
                 segments: LogSegments, log_start_offset_checkpoint: int,
                 recovery_point_checkpoint: int, leader_epoch_cache,
                 producer_state_manager: ProducerStateManager,
                 producer_state_factory: Callable[[], ProducerStateManager],
                 time: Time = SYSTEM_TIME, stats: LoadStats | None = None,
                 remote_log_enabled: bool = False) -> None:
        self.dir = Path(directory)
        self.remote_log_enabled = remote_log_enabled
        self.config = config
        self.had_clean_shutdown = had_clean_shutdown
        self.segments = segments
        self.log_start_offset_checkpoint = log_start_offset_checkpoint
        self.recovery_point_checkpoint = recovery_point_checkpoint
        self.leader_epoch_cache = leader_epoch_cache
        self.producer_state_manager = producer_state_manager
        self.producer_state_factory = producer_state_factory
        self.time = time
        self.stats = stats if stats is not None else LoadStats()
        self._snapshots_found: set[Path] = set()  # the snapshot files before any recovery

    def load(self) -> LoadedLogOffsets:
        swap_files = self._remove_temp_files_and_collect_swap_files()
        self._complete_swap_operations(swap_files)
        self._snapshots_found = set(self.dir.glob("*" + files.PRODUCER_SNAPSHOT_FILE_SUFFIX))
        self._load_segment_files()
        recovery_point, next_offset = self._recover_log()
        active = self.segments.active_segment
        assert active is not None, "_recover_log leaves at least one segment"
        active.resize_indexes(self.config.max_index_size)
        cache = self.leader_epoch_cache
        if cache is not None:
            cache.truncate_from_end(next_offset)
        # A remote-storage log keeps its checkpointed start below its first local segment
        # (those offsets are in remote storage); a local log cannot start before its data.
        if self.remote_log_enabled:
            new_log_start = self.log_start_offset_checkpoint
        else:
            first_base = self.segments.first_segment_base_offset()
            assert first_base is not None, "_recover_log leaves at least one segment"
            new_log_start = max(self.log_start_offset_checkpoint, first_base)
        if cache is not None:
            cache.truncate_from_start(self.log_start_offset_checkpoint)
        psm = self.producer_state_manager
        if not psm.is_empty():
            raise RuntimeError("producer state must be empty during log initialization")
        psm.remove_stray_snapshots(self.segments.base_offsets())
        rebuild_producer_state(psm, self.segments, new_log_start, next_offset,
                               reload_from_clean_shutdown=self.had_clean_shutdown,
                               now_ms=self.time.milliseconds(), on_segment_read=self._count_read)
        active = self.segments.active_segment
        assert active is not None
        return LoadedLogOffsets(new_log_start, recovery_point,
                                LogOffsetMetadata(next_offset, active.base_offset, active.size))

    def _count_read(self, segment: LogSegment) -> None:
        self.stats.replayed_segments.append(segment.base_offset)

    # --- pass 1: leftovers ---

    def _remove_temp_files_and_collect_swap_files(self) -> list[Path]:
        swap_files: list[Path] = []
        cleaned_files: list[Path] = []
        min_cleaned_offset = INT64_MAX
        for path in sorted(self.dir.iterdir()):
            if not path.is_file():
                continue
            name = path.name
            if name.endswith(files.DELETED_FILE_SUFFIX) or name.endswith(files.TMP_FILE_SUFFIX):
                log.debug("deleting stray temporary file %s", path)
                path.unlink(missing_ok=True)
            elif name.endswith(files.CLEANED_FILE_SUFFIX):
                offset = _offset_or_none(name)
                if offset is not None:
                    min_cleaned_offset = min(min_cleaned_offset, offset)
                cleaned_files.append(path)
            elif name.endswith(files.SWAP_FILE_SUFFIX):
                swap_files.append(path)
        valid_swaps = []
        for path in swap_files:
            offset = _offset_or_none(path.name)
            if offset is None or offset >= min_cleaned_offset:
                log.info("deleting invalid swap file %s (incomplete split)", path)
                path.unlink(missing_ok=True)
            else:
                valid_swaps.append(path)
        for path in cleaned_files:
            path.unlink(missing_ok=True)
        return valid_swaps

    # --- pass 2: complete interrupted replaces ---

    def _complete_swap_operations(self, swap_files: list[Path]) -> None:
        min_swap, max_swap = INT64_MAX, -1
        for path in swap_files:
            live_name = path.name[:-len(files.SWAP_FILE_SUFFIX)]
            if not live_name.endswith(files.LOG_FILE_SUFFIX):
                continue
            base = files.offset_from_file_name(live_name)
            next_offset = _scan_next_offset(path)
            min_swap = min(min_swap, base)
            max_swap = max(max_swap, next_offset if next_offset is not None else base)
            log.info("found log file %s from an interrupted swap; recovering it by renaming", path)
        for path in sorted(self.dir.iterdir()):
            if not path.is_file() or path.name.endswith(files.SWAP_FILE_SUFFIX):
                continue
            offset = _offset_or_none(path.name)
            if offset is not None and min_swap <= offset < max_swap:
                log.info("deleting segment file %s, replaced but not yet deleted", path)
                path.unlink(missing_ok=True)
        for path in sorted(self.dir.iterdir()):
            if path.is_file() and path.name.endswith(files.SWAP_FILE_SUFFIX):
                path.rename(path.with_name(path.name[:-len(files.SWAP_FILE_SUFFIX)]))
        if swap_files:
            files.fsync_dir(self.dir)

    # --- pass 3: load segments ---

    def _load_segment_files(self) -> None:
        entries = sorted(p for p in self.dir.iterdir() if p.is_file())
        log_bases = {}
        for path in entries:
            if path.name.endswith(files.LOG_FILE_SUFFIX):
                offset = _offset_or_none(path.name)
                if offset is not None:
                    log_bases[offset] = path
        last_base = max(log_bases) if log_bases else None
        # Unclean: segments from the one holding the recovery point on are rebuilt by
        # recover() anyway; empty their offset and time indexes now instead of mapping and
        # scanning up to segment.index.bytes of preallocated zeros each (KIP-263's spirit).
        recover_from = None
        if not self.had_clean_shutdown and log_bases:
            below = [b for b in log_bases if b <= self.recovery_point_checkpoint]
            recover_from = max(below) if below else min(log_bases)
        for path in entries:
            name = path.name
            if name.endswith(_INDEX_SUFFIXES):
                offset = _offset_or_none(name)
                if offset is not None and offset not in log_bases:
                    log.warning("found an orphaned index file %s with no log file; deleting it", path)
                    path.unlink(missing_ok=True)
        for base, path in sorted(log_bases.items()):
            if recover_from is not None and base >= recover_from:
                for index_file in (files.offset_index_file(self.dir, base), files.time_index_file(self.dir, base)):
                    if index_file.exists():
                        os.truncate(index_file, 0)
            time_index_newly_created = not files.time_index_file(self.dir, base).exists()
            segment = LogSegment.open(self.dir, base, self.config, time=self.time, file_already_exists=True)
            try:
                segment.sanity_check(time_index_newly_created, check_indexes=base == last_base)
            except FileNotFoundError:
                if self.had_clean_shutdown or base < self.recovery_point_checkpoint:
                    log.error("no offset index for %s; recovering the segment and rebuilding its indexes",
                              path)
                self._recover_segment(segment)
            except CorruptIndexError as exc:
                log.warning("corrupt index for %s (%s); recovering the segment and rebuilding its "
                            "indexes", path, exc)
                self._recover_segment(segment)
            self.segments.add(segment)

    def _recover_segment(self, segment: LogSegment) -> int:
        """Kafka's ``recoverSegment``: producer state up to the segment from the newest
        snapshot, then ``segment.recover``, then a snapshot at its end."""
        psm = self.producer_state_factory()
        rebuild_producer_state(psm, self.segments, self.log_start_offset_checkpoint, segment.base_offset,
                               now_ms=self.time.milliseconds(), on_segment_read=self._count_read)
        self.stats.recovered_segments.append(segment.base_offset)
        truncated = segment.recover(_producer_state_hook(psm), self.leader_epoch_cache)
        next_offset = segment.read_next_offset()
        if next_offset > psm.map_end_offset:
            psm.update_map_end_offset(next_offset)
        psm.take_snapshot()
        return truncated

    # --- pass 4: recovery ---

    def _recover_log(self) -> tuple[int, int]:
        segments = self.segments
        if not self.had_clean_shutdown:
            unflushed = segments.values(self.recovery_point_checkpoint, INT64_MAX) if segments.non_empty() else []
            for i, segment in enumerate(unflushed):
                try:
                    truncated = self._recover_segment(segment)
                except (InvalidOffsetError, OffsetOverflowError) as exc:
                    log.warning("invalid offset during recovery of %s (%s): emptying the segment",
                                segment, exc)
                    truncated = segment.truncate_to(segment.base_offset)
                if truncated > 0:
                    self.stats.truncated_bytes += truncated
                    log.warning("corruption found in segment %d of %s: truncated %d bytes (the log "
                                "now ends at offset %d); deleting %d later segments",
                                segment.base_offset, self.dir.name, truncated,
                                segment.read_next_offset(), len(unflushed) - i - 1)
                    segment.flush()
                    self._delete_segments(unflushed[i + 1:])
                    break
            self._delete_recovery_snapshots(self._snapshots_found)
        log_end_offset = self._delete_segments_if_log_start_greater_than_log_end()
        if segments.is_empty():
            segments.add(LogSegment.open(
                self.dir, self.log_start_offset_checkpoint, self.config, time=self.time,
                init_file_size=self.config.segment_bytes if self.config.preallocate else 0,
                preallocate=self.config.preallocate))
        if self.had_clean_shutdown and log_end_offset is not None:
            return log_end_offset, log_end_offset
        if log_end_offset is None:
            active = segments.active_segment
            assert active is not None  # one was added above when there was none
            log_end_offset = active.read_next_offset()
        return min(self.recovery_point_checkpoint, log_end_offset), log_end_offset

    def _delete_recovery_snapshots(self, before: set[Path]) -> None:
        """Delete the snapshots recoveries wrote (passes 3 and 4) above the newest one from
        before (they let each recovered segment start from the previous one's end). A snapshot
        keeps one batch per producer, so loading the one at the log end would shrink each
        producer's dedup window to its last batch; without them the final rebuild replays
        the log after the newest snapshot that was there before the crash, and keeps the
        last five batches of each producer written since (I7: a client's in-flight
        batches, persisted but not acknowledged, are duplicates when it resends them after
        the restart)."""
        offsets = [o for o in (_offset_or_none(p.name) for p in before) if o is not None]
        newest_before = max(offsets, default=-1)
        for path in set(self.dir.glob("*" + files.PRODUCER_SNAPSHOT_FILE_SUFFIX)) - before:
            offset = _offset_or_none(path.name)
            if offset is not None and offset > newest_before:
                path.unlink(missing_ok=True)

    def _delete_segments(self, to_delete: list[LogSegment]) -> None:
        """Delete now, last segment first, so that a crash in between leaves a prefix."""
        for segment in reversed(to_delete):
            self.segments.remove(segment.base_offset)
            segment.delete_if_exists()
            self.stats.deleted_segments.append(segment.base_offset)
        if to_delete:
            files.fsync_dir(self.dir)

    def _delete_segments_if_log_start_greater_than_log_end(self) -> int | None:
        segments = self.segments
        active = segments.active_segment
        if active is None:
            return None
        log_end_offset = active.read_next_offset()
        if log_end_offset >= self.log_start_offset_checkpoint:
            return log_end_offset
        log.warning("deleting all segments of %s because the log end offset %d is smaller than the "
                    "log start offset %d (segment files deleted from the file system?)",
                    self.dir.name, log_end_offset, self.log_start_offset_checkpoint)
        self._delete_segments(segments.values())
        if self.leader_epoch_cache is not None:
            self.leader_epoch_cache.clear_and_flush()
        self.producer_state_manager.truncate_fully_and_start_at(self.log_start_offset_checkpoint)
        return None


def _offset_or_none(name: str) -> int | None:
    try:
        return files.offset_from_file_name(name)
    except ValueError:
        return None
