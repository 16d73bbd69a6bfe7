"""The local segment set of one partition and its log end offset (Kafka's ``LocalLog``),
plus the one choke point that turns I/O errors into "log dir offline" (``LogDirFailureChannel``).

Owns:
- ``LocalLog``: the ``LogSegments`` of a partition directory, the log end offset (LEO, as
  ``next_offset_metadata``: offset, active segment base, byte position), the recovery point
  (first offset not known to be fsynced), append to the active segment (``append_batch``
  for the one validated batch of a produce request, ``append_batch_unless_roll`` when
  nothing lies between the roll check and the write), multi-segment reads
  bounded by an offset's position, roll, truncation, segment deletion (rename to
  ``.deleted``, delete after file.delete.delay.ms on the scheduler, so that a fetch slice
  already handed out stays readable), the log cleaner's segment swap (``replace_segments``:
  ``.cleaned`` -> ``.swap`` -> old segments ``.deleted`` -> live, the order the loader
  completes after a crash), and flush (fsync of the segments below an offset).
  The semantics above it (offset assignment, high watermark, producer state, leader epochs,
  retention policy) belong to ``UnifiedLog``.
- ``LogDirFailureChannel`` and ``maybe_handle_io_exception``: every mutating I/O path of the
  engine runs inside it. An ``OSError`` marks the log directory (the ``log.dirs`` entry)
  offline and is re-raised as ``KafkaStorageError``; once a directory is offline every
  further guarded operation on it raises ``KafkaStorageError`` before touching a file.
  Nothing is swallowed, and nothing more is written to an offline directory. Its
  ``any_offline`` flag lets a hot path skip the lookup while every directory is online.

On-disk format: the partition directory ``<log.dir>/<topic>-<partition>/`` holding the
segment files named in ``files.py`` (``<20-digit base>.log/.index/.timeindex/.txnindex``),
``.deleted`` files on their way out (removed by the next start if the process dies first),
``.cleaned`` / ``.swap`` files of a swap in progress (``loader.py`` finishes or drops them).

Invariants:
- there is always at least one segment; the active segment is the last one and has the
  largest base offset; ``next_offset_metadata`` points at the end of the active segment;
- ``recovery_point <= log_end_offset``; it only moves forward through ``mark_flushed``
  (after an actual fsync), or backward when the log is truncated below it;
- a segment removed from ``segments`` is renamed ``.deleted`` at once and its descriptors
  are closed only by the delayed delete task (or ``close``).

Thread-safety: mutations (append, roll, truncate, delete, flush bookkeeping, close) are
made by one writer holding the owning ``UnifiedLog``'s lock. ``read``,
``collect_aborted_transactions``, ``log_end_offset*`` and ``recovery_point`` may be called
from any thread without a lock: ``segments`` is copy-on-write, ``next_offset_metadata`` is
one immutable tuple published by a single attribute store after the bytes it describes are
written, and segment reads are lock-free (``segment.py``). ``flush(offset)`` may run on the
scheduler thread concurrently with appends (fsync of files that are only appended to).
``LogDirFailureChannel`` is guarded by its own lock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from . import files
from .clock import SYSTEM_TIME, Time
from .errors import KafkaStorageError, LogError, LogOffsetOutOfRangeError
from .file_records import EMPTY_RECORDS
from .index import OffsetPosition
from .scheduler import Scheduler
from .segment import FetchDataInfo, LogOffsetMetadata, LogSegment
from .segments import LogSegments
from .txn_index import AbortedTxn

__all__ = ["LocalLog", "LogDirFailureChannel", "maybe_handle_io_exception",
           "LogOffsetMetadata", "FetchDataInfo"]

log = logging.getLogger(__name__)


# --- the I/O error choke point ---

class LogDirFailureChannel:
    """Which log directories are offline, and who wants to know (Kafka's
    ``LogDirFailureChannel``). Listeners are called once per directory, from the thread
    that hit the error, after the directory is marked; they must not block.

    Thread-safety: any thread; a lock guards the set of offline directories (readers of
    ``is_offline`` take no lock: one dict lookup)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[str, str] = {}
        # True once any directory is offline (never reset): lets a hot path skip
        # ``is_offline`` with one attribute load while every directory is healthy
        self.any_offline = False
        self._listeners: list[Callable[[str], None]] = []

    @staticmethod
    def _key(log_dir) -> str:
        return str(Path(log_dir).absolute())

    def add_listener(self, listener: Callable[[str], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def maybe_add_offline_log_dir(self, log_dir, message: str, exc: BaseException | None = None) -> bool:
        """Mark ``log_dir`` offline; True when it was online until now."""
        key = self._key(log_dir)
        with self._lock:
            if key in self._offline:
                return False
            self._offline[key] = message
            self.any_offline = True
            listeners = list(self._listeners)
        log.error("log dir %s is offline: %s (%s)", key, message, exc)
        for listener in listeners:
            try:
                listener(key)
            except Exception:
                log.exception("log dir failure listener failed for %s", key)
        return True

    def is_offline(self, log_dir) -> bool:
        return bool(self._offline) and self._key(log_dir) in self._offline

    def offline_log_dirs(self) -> list[str]:
        with self._lock:
            return sorted(self._offline)

    def storage_error(self, log_dir, message: str) -> KafkaStorageError:
        return KafkaStorageError(f"{message}: the log dir {self._key(log_dir)} is offline "
                                 f"({self._offline.get(self._key(log_dir), 'I/O error')})")


@contextlib.contextmanager
def maybe_handle_io_exception(channel: LogDirFailureChannel, log_dir, message: str) -> Iterator[None]:
    """Kafka's ``maybeHandleIOException``: refuse to touch an offline directory; turn an
    ``OSError`` into ``KafkaStorageError`` after marking the directory offline."""
    if channel.is_offline(log_dir):
        raise channel.storage_error(log_dir, message)
    try:
        yield
    except OSError as exc:
        channel.maybe_add_offline_log_dir(log_dir, f"{message}: {exc}", exc)
        raise KafkaStorageError(f"{message}: {exc}") from exc


# --- the local log ---

class LocalLog:
    """The segments of one partition directory and its LEO and recovery point (invariants
    in the module docstring).

    Thread-safety: mutations by one writer holding the owning ``UnifiedLog``'s lock; reads
    (``read``, offsets, ``collect_aborted_transactions``) lock-free from any thread."""

    def __init__(self, directory: Path | str, config, segments: LogSegments, recovery_point: int,
                 next_offset_metadata: LogOffsetMetadata, scheduler: Scheduler,
                 time: Time = SYSTEM_TIME, failure_channel: LogDirFailureChannel | None = None) -> None:
        self._dir = Path(directory).absolute()
        self._parent_dir = str(self._dir.parent)
        self.config = config
        self.segments = segments
        self._recovery_point = recovery_point
        self._next_offset_metadata = next_offset_metadata
        self.scheduler = scheduler
        self.time = time
        self.failure_channel = failure_channel or LogDirFailureChannel()
        self._last_flush_time = time.milliseconds()
        self._closed = False
        self._pending_deletes: list[LogSegment] = []
        self._pending_lock = threading.Lock()
        parsed = files.parse_partition_dir_name(self._dir.name)
        self.topic_partition = parsed if parsed is not None else (self._dir.name, 0)

    # --- properties ---

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def parent_dir(self) -> str:
        return self._parent_dir

    @property
    def name(self) -> str:
        return self._dir.name

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def log_end_offset(self) -> int:
        return self._next_offset_metadata.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._next_offset_metadata

    @property
    def unflushed_messages(self) -> int:
        return self._next_offset_metadata.message_offset - self._recovery_point

    @property
    def last_flush_time(self) -> int:
        return self._last_flush_time

    @property
    def is_closed(self) -> bool:
        return self._closed

    def io(self, message: str):
        """The choke point for this log's directory (a context manager)."""
        return maybe_handle_io_exception(self.failure_channel, self.parent_dir, message)

    def check_if_memory_mapped_buffer_closed(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"the memory mapped buffers of log {self.name} are already closed")

    def update_config(self, config) -> None:
        self.config = config

    def _init_file_size(self) -> int:
        return self.config.segment_bytes if self.config.preallocate else 0

    def _open_segment(self, base_offset: int) -> LogSegment:
        return LogSegment.open(self._dir, base_offset, self.config, time=self.time,
                               init_file_size=self._init_file_size(), preallocate=self.config.preallocate)

    # --- offsets ---

    def update_recovery_point(self, offset: int) -> None:
        self._recovery_point = offset

    def mark_flushed(self, offset: int) -> None:
        """The log is fsynced below ``offset``: advance the recovery point."""
        self.check_if_memory_mapped_buffer_closed()
        if offset > self._recovery_point:
            self._recovery_point = offset
            self._last_flush_time = self.time.milliseconds()

    def update_log_end_offset(self, end_offset: int) -> None:
        active = self.segments.active_segment
        assert active is not None, "a loaded log always has an active segment"
        self._next_offset_metadata = LogOffsetMetadata(end_offset, active.base_offset, active.size)
        if self._recovery_point > end_offset:
            self._recovery_point = end_offset

    # --- append / flush ---

    def append(self, last_offset: int, largest_timestamp: int, offset_of_max_timestamp: int, records,
               batches=None) -> None:
        """Write whole batches (offsets assigned) to the active segment and move the LEO."""
        active = self.segments.active_segment
        assert active is not None, "a loaded log always has an active segment"
        active.append(last_offset, largest_timestamp, offset_of_max_timestamp, records, batches)
        self._next_offset_metadata = LogOffsetMetadata(last_offset + 1, active.base_offset, active.size)

    def append_batch(self, segment: LogSegment, buf, first_offset: int, last_offset: int,
                     batch_max_timestamp: int, largest_timestamp: int) -> LogOffsetMetadata:
        """``append`` of one validated batch to ``segment`` (the active segment) through
        ``LogSegment.append_batch``; returns the new LEO metadata, published as ``append``
        publishes it."""
        metadata = self._next_offset_metadata = segment.append_batch(
            buf, first_offset, last_offset, batch_max_timestamp, largest_timestamp)
        return metadata

    def append_batch_unless_roll(self, buf, first_offset: int, last_offset: int, batch_max_timestamp: int,
                                 largest_timestamp: int, max_segment_ms: int, max_segment_bytes: int,
                                 now: int) -> LogOffsetMetadata | None:
        """``LogSegment.append_batch_unless_roll`` on the active segment: None (nothing
        written) when it should roll first, else the new LEO metadata, published as
        ``append_batch`` publishes it."""
        active = self.segments.last_segment()
        assert active is not None, "a loaded log always has an active segment"
        metadata = active.append_batch_unless_roll(
            buf, first_offset, last_offset, batch_max_timestamp, largest_timestamp, max_segment_ms,
            max_segment_bytes, now)
        if metadata is not None:
            self._next_offset_metadata = metadata
        return metadata

    def flush(self, offset: int) -> bool:
        """fsync every segment holding offsets in [recovery point, ``offset``) and the
        directory; True when something was flushed. The caller then ``mark_flushed``."""
        current = self._recovery_point
        if current > offset:
            return False
        to_flush = self.segments.values(current, offset) if current != offset else []
        for segment in to_flush:
            try:
                segment.flush()
            except OSError:
                if self.segments.get(segment.base_offset) is segment:
                    raise
                # deleted (and closed) by retention meanwhile: nothing to make durable
        # a segment created since the last flush: make its directory entry durable too
        if any(s.base_offset >= current for s in to_flush) and self._dir.is_dir():
            files.fsync_dir(self._dir)
        return bool(to_flush)

    # --- reads ---

    def read(self, start_offset: int, max_length: int, min_one_message: bool,
             max_offset_metadata: LogOffsetMetadata, include_aborted_txns: bool) -> FetchDataInfo:
        """Batches from the one holding ``start_offset``, at most ``max_length`` bytes (the
        first batch whole with ``min_one_message``), never past ``max_offset_metadata``
        (LEO, high watermark or last stable offset). Lock-free."""
        end_metadata = self._next_offset_metadata
        segment = self.segments.floor_segment(start_offset)
        if start_offset > end_metadata.message_offset or segment is None:
            raise LogOffsetOutOfRangeError(
                f"received request for offset {start_offset} for partition {self.name}, but we only "
                f"have log segments up to the end offset {end_metadata.message_offset}")
        max_offset = max_offset_metadata.message_offset
        if start_offset >= max_offset:
            metadata = max_offset_metadata if start_offset == max_offset else LogOffsetMetadata(start_offset)
            return FetchDataInfo(metadata, EMPTY_RECORDS,
                                 aborted_transactions=[] if include_aborted_txns else None)
        while segment is not None:
            base = segment.base_offset
            if base < max_offset_metadata.segment_base_offset:
                info = segment.read(start_offset, max_length, segment.size, min_one_message)
            elif base == max_offset_metadata.segment_base_offset and not max_offset_metadata.message_offset_only:
                info = segment.read(start_offset, max_length,
                                    max_offset_metadata.relative_position_in_segment, min_one_message)
            else:  # the bound lies before this segment: nothing may be returned
                found = segment.translate_offset(start_offset)
                info = None if found is None else FetchDataInfo(
                    LogOffsetMetadata(start_offset, base, found.position), EMPTY_RECORDS)
            if info is not None:
                if include_aborted_txns:
                    info = self._add_aborted_transactions(start_offset, segment, info, max_length)
                return info
            segment = self.segments.higher_segment(base)
        # the offset is the LEO but the active segment has just been rolled past it
        return FetchDataInfo(self._next_offset_metadata, EMPTY_RECORDS,
                             aborted_transactions=[] if include_aborted_txns else None)

    def _add_aborted_transactions(self, start_offset: int, segment: LogSegment, info: FetchDataInfo,
                                  max_length: int) -> FetchDataInfo:
        meta = info.fetch_offset_metadata
        upper = segment.fetch_upper_bound_offset(
            OffsetPosition(meta.message_offset, meta.relative_position_in_segment), info.records.size_in_bytes)
        if upper is None:
            higher = self.segments.higher_segment(segment.base_offset)
            upper = higher.base_offset if higher is not None else self.log_end_offset
        aborted = [t.as_aborted_transaction() for t in
                   self.collect_aborted_transactions(start_offset, upper, segment)]
        return dataclasses.replace(info, aborted_transactions=aborted)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int,
                                     starting_segment: LogSegment | None = None) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset), searching
        from ``starting_segment`` (default: the floor segment of ``start_offset``) forward
        until a segment's search is complete."""
        segment = starting_segment or self.segments.floor_segment(start_offset)
        if segment is None:
            return []
        out: list[AbortedTxn] = []
        for seg in [segment] + self.segments.higher_segments(segment.base_offset):
            result = seg.collect_aborted_txns(start_offset, upper_bound_offset)
            out.extend(result.aborted_transactions)
            if result.is_complete:
                break
        return out

    # --- roll ---

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(``expected_next_offset``, LEO). The old one
        becomes inactive (final time-index entry, indexes trimmed). KAFKA-6388: an empty
        active segment at the same base offset is replaced in place."""
        self.check_if_memory_mapped_buffer_closed()
        new_offset = max(expected_next_offset or 0, self.log_end_offset)
        active = self.segments.active_segment
        if self.segments.contains(new_offset):
            assert active is not None  # a segment holds new_offset
            if active.base_offset == new_offset and active.size == 0:
                log.warning("%s: rolling onto the empty active segment %d (index full?); recreating it",
                            self.name, new_offset)
                new_segment = self._create_and_delete_segment(new_offset, active)
                self.update_log_end_offset(self.log_end_offset)
                return new_segment
            raise LogError(
                f"trying to roll a new log segment for {self.name} with start offset {new_offset} "
                f"while it already exists: {self.segments.get(new_offset)}")
        if active is not None and new_offset < active.base_offset:
            raise LogError(
                f"trying to roll a new log segment for {self.name} with start offset {new_offset} "
                f"lower than the start offset of the active segment {active}")
        for make in (files.log_file, files.offset_index_file, files.time_index_file, files.txn_index_file):
            path = make(self._dir, new_offset)
            if path.exists():
                log.warning("newly rolled segment file %s already exists; deleting it first", path)
                path.unlink()
        if active is not None:
            active.on_become_inactive_segment()
        new_segment = self._open_segment(new_offset)
        self.segments.add(new_segment)
        self.update_log_end_offset(self.log_end_offset)
        return new_segment

    # --- truncation and deletion ---

    def deletable_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> list[LogSegment]:
        """The longest prefix of segments satisfying ``predicate(segment, next_segment)``,
        never including an empty active segment."""
        segs = self.segments.values()
        out = []
        for i, segment in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            if nxt is None and segment.size == 0:
                break
            if not predicate(segment, nxt):
                break
            out.append(segment)
        return out

    def truncate_to(self, target_offset: int) -> list[LogSegment]:
        """Remove every offset >= ``target_offset``; returns the deleted segments. The
        caller checks ``target_offset`` lies within [first segment base, LEO)."""
        deletable = [s for s in self.segments.values() if s.base_offset > target_offset]
        self.remove_and_delete_segments(deletable, async_delete=True, reason="log truncation")
        active = self.segments.active_segment
        assert active is not None, "truncation keeps the segment holding target_offset"
        active.truncate_to(target_offset)
        self.update_log_end_offset(target_offset)
        return deletable

    def truncate_fully_and_start_at(self, new_offset: int) -> list[LogSegment]:
        """Delete every segment and start an empty log at ``new_offset``."""
        self.check_if_memory_mapped_buffer_closed()
        to_delete = self.segments.values()
        if to_delete:
            self.remove_and_delete_segments(to_delete[:-1], async_delete=True, reason="log truncation")
            self._create_and_delete_segment(new_offset, to_delete[-1])
        else:
            self.segments.add(self._open_segment(new_offset))
        self.update_log_end_offset(new_offset)
        self.update_recovery_point(new_offset)
        return to_delete

    def _create_and_delete_segment(self, new_offset: int, segment_to_delete: LogSegment) -> LogSegment:
        if new_offset == segment_to_delete.base_offset:
            segment_to_delete.change_file_suffixes("", files.DELETED_FILE_SUFFIX)
        new_segment = self._open_segment(new_offset)
        self.segments.add(new_segment)
        if new_offset != segment_to_delete.base_offset:
            self.segments.remove(segment_to_delete.base_offset)
        self._delete_segment_files([segment_to_delete], async_delete=True)
        return new_segment

    def remove_and_delete_segments(self, to_delete: Iterable[LogSegment], async_delete: bool,
                                   reason: str) -> None:
        to_delete = list(to_delete)
        if not to_delete:
            return
        log.info("%s: deleting segments %s (%s)", self.name, [s.base_offset for s in to_delete], reason)
        for segment in to_delete:
            self.segments.remove(segment.base_offset)
        self._delete_segment_files(to_delete, async_delete)

    def _delete_segment_files(self, to_delete: list[LogSegment], async_delete: bool) -> None:
        """Rename to ``.deleted`` now; close and delete after file.delete.delay.ms."""
        for segment in to_delete:
            if not segment.has_suffix(files.DELETED_FILE_SUFFIX):
                segment.change_file_suffixes("", files.DELETED_FILE_SUFFIX)
        with self._pending_lock:
            self._pending_deletes.extend(to_delete)

        def delete() -> None:
            with self._pending_lock:
                for segment in to_delete:
                    if segment in self._pending_deletes:
                        self._pending_deletes.remove(segment)
            with self.io(f"error while deleting segments of {self.name}"):
                for segment in to_delete:
                    segment.delete_if_exists()

        if async_delete:
            self.scheduler.schedule_once("delete-file", delete, self.config.file_delete_delay_ms)
        else:
            delete()

    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment],
                         crash_hook: Callable[[str], None] | None = None) -> None:
        """Kafka's ``LocalLog.replaceSegments``: swap ``new_segments`` (written with the
        ``.cleaned`` suffix, flushed) in for ``old_segments``, in the order the loader's
        recovery completes after a crash at any step (R5): rename each new segment
        ``.cleaned`` -> ``.swap`` (newest first); put it in the segment set; rename the old
        ones ``.deleted`` (closed and removed after file.delete.delay.ms, so a reader
        holding one keeps reading it); rename each ``.swap`` to its live name; fsync the
        directory. ``crash_hook(step)`` (tests) is called after the steps "swap", "delete".
        The caller holds the log's lock."""
        new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
        old_sorted = [s for s in sorted(old_segments, key=lambda s: s.base_offset)
                      if self.segments.get(s.base_offset) is s]
        with self.io(f"error while replacing segments of {self.name}"):
            for segment in reversed(new_sorted):
                segment.change_file_suffixes(files.CLEANED_FILE_SUFFIX, files.SWAP_FILE_SUFFIX)
            files.fsync_dir(self._dir)
            if crash_hook is not None:
                crash_hook("swap")
            for segment in reversed(new_sorted):
                self.segments.add(segment)
            new_bases = {s.base_offset for s in new_sorted}
            for segment in old_sorted:
                if segment.base_offset not in new_bases:
                    self.segments.remove(segment.base_offset)
            self._delete_segment_files(old_sorted, async_delete=True)
            files.fsync_dir(self._dir)
            if crash_hook is not None:
                crash_hook("delete")
            for segment in new_sorted:
                segment.change_file_suffixes(files.SWAP_FILE_SUFFIX, "")
            files.fsync_dir(self._dir)

    @property
    def pending_deletes(self) -> list[LogSegment]:
        with self._pending_lock:
            return list(self._pending_deletes)

    def _close_pending_deletes(self, delete: bool) -> None:
        with self._pending_lock:
            pending, self._pending_deletes = self._pending_deletes, []
        for segment in pending:
            try:
                if delete:
                    segment.delete_if_exists()
                else:
                    segment.close_handlers()
            except OSError as exc:
                log.warning("%s: releasing deleted segment %s failed: %s", self.name, segment, exc)

    # --- lifecycle ---

    def close(self) -> None:
        """Close every segment (fsync, final time-index entry, trim), and delete the files
        of segments waiting for their delayed deletion."""
        with self.io(f"error while closing log {self.name}"):
            self.check_if_memory_mapped_buffer_closed()
            self._close_pending_deletes(delete=True)
            self.segments.close()
            self._closed = True

    def close_handlers(self) -> None:
        """Release every descriptor and mapping without writing (the disk may be gone)."""
        self._close_pending_deletes(delete=False)
        self.segments.close_handlers()
        self._closed = True

    def rename_dir(self, name: str) -> Path:
        """Rename the partition directory (e.g. to ``<topic>-<p>.<uuid>-delete``)."""
        with self.io(f"error while renaming dir of {self.name}"):
            new_dir = self._dir.parent / name
            self._dir.rename(new_dir)
            files.fsync_dir(new_dir.parent)
            self._dir = new_dir
            self.segments.update_parent_dir(new_dir)
            for segment in self.pending_deletes:
                segment.update_parent_dir(new_dir)
            return new_dir

    def delete_all_segments(self) -> list[LogSegment]:
        """Delete every segment file now (the log is being deleted)."""
        with self.io(f"error while deleting all segments of {self.name}"):
            deleted = self.segments.values()
            self._close_pending_deletes(delete=True)
            for segment in deleted:
                segment.delete_if_exists()
            self.segments.clear()
            self._closed = True
            return deleted

    def __repr__(self) -> str:
        return (f"LocalLog({self.name}, log_end_offset={self.log_end_offset}, "
                f"recovery_point={self._recovery_point}, segments={len(self.segments)})")
