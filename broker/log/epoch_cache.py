"""The leader-epoch cache of a partition: which leader epoch started at which offset.

Owns: ``LeaderEpochFileCache`` (Kafka's ``storage.internals.epoch.LeaderEpochFileCache``),
the (epoch -> start offset) lineage behind OffsetsForLeaderEpoch, leader-epoch truncation
and ``epoch_for_offset``, and its ``leader-epoch-checkpoint`` file.

On-disk format (read and written by ``files.read_epoch_checkpoint`` /
``files.write_epoch_checkpoint``, always by atomic replace)::

    0          <- version
    2          <- number of entries
    0 0        <- epoch startOffset
    3 1500

Invariants (Kafka's): epochs and start offsets are both strictly increasing. ``assign``
of the latest epoch again (with a start offset not below the latest's) changes nothing;
any other assign first removes every entry that would break monotonicity (entries with
an epoch >= the new one, or a start offset >= the new one), then adds the new entry and
writes the checkpoint. Epochs and offsets must be >= 0.

Durability: ``assign`` writes the checkpoint synchronously, so the file never misses an
entry. ``truncate_from_start`` / ``truncate_from_end`` / ``clear`` change memory and then
write the checkpoint when ``flush=True`` (the default); Kafka defers these writes to a
scheduler, and a caller that wants that passes ``flush=False`` and calls ``flush()``
later. A stale checkpoint after a crash is fixed up by the loader, which truncates the
cache to the recovered log end and log start, exactly as in Kafka. The checkpoint is only
written if its directory still exists (a deleted partition is not resurrected).

Thread-safety: a single re-entrant lock guards the entries (the list is tiny); all
methods may be called from any thread. ``latest_epoch`` alone reads without the lock: one
indexing of the list (atomic under the GIL) gives an entry that was the latest.
"""

from __future__ import annotations

import bisect
import threading
from pathlib import Path
from typing import NamedTuple

from . import files

__all__ = ["EpochEntry", "LeaderEpochFileCache", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET"]

# OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    """(leader epoch -> first offset of that epoch), backed by a checkpoint file (or by
    nothing when ``checkpoint_file`` is None, for tools and tests)."""

    def __init__(self, checkpoint_file: Path | str | None, *, fsync: bool = True,
                 entries: list[EpochEntry] | None = None) -> None:
        self._lock = threading.RLock()
        self._file = Path(checkpoint_file) if checkpoint_file is not None else None
        self._fsync = fsync
        self._entries: list[EpochEntry] = []
        self._epochs: list[int] = []  # parallel to _entries, for bisect
        loaded = entries if entries is not None else (
            [EpochEntry(e, o) for e, o in files.read_epoch_checkpoint(self._file)]
            if self._file is not None else [])
        for entry in loaded:
            self._assign(EpochEntry(*entry))

    @property
    def checkpoint_file(self) -> Path | None:
        return self._file

    # --- assignment ---

    def _is_update_needed(self, entry: EpochEntry) -> bool:
        if not self._entries:
            return True
        latest = self._entries[-1]
        return entry.epoch != latest.epoch or entry.start_offset < latest.start_offset

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"received invalid partition leader epoch entry {entry}")
        with self._lock:
            if not self._is_update_needed(entry):
                return False
            # drop entries that would break monotonicity (from the end)
            while self._entries and (self._entries[-1].epoch >= entry.epoch
                                     or self._entries[-1].start_offset >= entry.start_offset):
                self._entries.pop()
                self._epochs.pop()
            self._entries.append(entry)
            self._epochs.append(entry.epoch)
            return True

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; write the checkpoint if that
        changed anything. Returns whether it did."""
        with self._lock:
            if self._assign(EpochEntry(epoch, start_offset)):
                self._write()
                return True
            return False

    def assign_all(self, entries: list[EpochEntry]) -> None:
        with self._lock:
            for entry in entries:
                self._assign(EpochEntry(*entry))
            if entries:
                self._write()

    # --- queries ---

    def non_empty(self) -> bool:
        return bool(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        """The epoch currently being written, or None. Lock-free (every produce asks): the
        last element of the list, read in one step, is an entry that was the latest."""
        try:
            return self._entries[-1].epoch
        except IndexError:
            return None

    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[0] if self._entries else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        with self._lock:
            i = bisect.bisect_left(self._epochs, epoch)
            if i < len(self._epochs) and self._epochs[i] == epoch:
                return self._entries[i]
            return None

    def previous_epoch(self, epoch: int | None = None) -> int | None:
        """The largest epoch below ``epoch`` (default: below the latest one)."""
        with self._lock:
            if epoch is None:
                if not self._entries:
                    return None
                epoch = self._entries[-1].epoch
            i = bisect.bisect_left(self._epochs, epoch)
            return self._epochs[i - 1] if i > 0 else None

    def previous_entry(self, epoch: int) -> EpochEntry | None:
        with self._lock:
            i = bisect.bisect_left(self._epochs, epoch)
            return self._entries[i - 1] if i > 0 else None

    def next_epoch(self, epoch: int) -> int | None:
        with self._lock:
            i = bisect.bisect_right(self._epochs, epoch)
            return self._epochs[i] if i < len(self._epochs) else None

    def epoch_entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._entries)

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset``: the last entry with start <= offset."""
        with self._lock:
            previous = None
            for epoch, start in self._entries:
                if start == offset:
                    return epoch
                if start > offset:
                    return previous
                previous = epoch
            return previous

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch: the largest known epoch <=
        ``requested_epoch`` and the start offset of the first epoch after it, or the log
        end offset when the latest epoch is requested. (UNDEFINED_EPOCH,
        UNDEFINED_EPOCH_OFFSET) for an undefined or a too-new epoch."""
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if self._entries and self._entries[-1].epoch == requested_epoch:
                return requested_epoch, log_end_offset
            higher = bisect.bisect_right(self._epochs, requested_epoch)
            if higher == len(self._entries):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            higher_start = self._entries[higher].start_offset
            if higher == 0:
                # older than anything cached: the data is gone; point at the first known start
                return requested_epoch, higher_start
            return self._entries[higher - 1].epoch, higher_start

    def epoch_entries_in_range(self, start_offset: int, end_offset: int) -> list[EpochEntry]:
        """The entries covering [start_offset, end_offset), the first one moved up to
        ``start_offset`` (Kafka's epochEntriesInRange)."""
        with self._lock:
            copy = list(self._entries)
        if start_offset >= 0:
            copy = _truncated_from_start(copy, start_offset)
        return _truncated_from_end(copy, end_offset)

    # --- truncation ---

    def truncate_from_end(self, end_offset: int, *, flush: bool = True) -> list[EpochEntry]:
        """Remove entries whose start offset is >= ``end_offset``; returns them."""
        with self._lock:
            kept = _truncated_from_end(self._entries, end_offset)
            removed = self._entries[len(kept):]
            if removed:
                self._set(kept)
                if flush:
                    self._write(if_dir_exists=True)
            return removed

    def truncate_from_start(self, start_offset: int, *, flush: bool = True) -> list[EpochEntry]:
        """Drop entries entirely below ``start_offset`` and move the epoch that covers it to
        start there (exclusive: an entry starting exactly at ``start_offset`` stays)."""
        with self._lock:
            kept = _truncated_from_start(self._entries, start_offset)
            if kept != self._entries:
                removed = [e for e in self._entries if e.start_offset <= start_offset]
                self._set(kept)
                if flush:
                    self._write(if_dir_exists=True)
                return removed
            return []

    def clear_and_flush(self) -> None:
        with self._lock:
            self._set([])
            self._write()

    def clear(self) -> None:
        with self._lock:
            self._set([])

    def flush(self) -> None:
        """Write the checkpoint (if its directory still exists)."""
        self._write(if_dir_exists=True)

    def with_checkpoint(self, checkpoint_file: Path | str | None) -> LeaderEpochFileCache:
        """A cache with the same entries over another checkpoint file (e.g. after a
        directory rename); nothing is written."""
        return LeaderEpochFileCache(checkpoint_file, fsync=self._fsync, entries=self.epoch_entries())

    # --- internals ---

    def _set(self, entries: list[EpochEntry]) -> None:
        self._entries = list(entries)
        self._epochs = [e.epoch for e in self._entries]

    def _write(self, if_dir_exists: bool = False) -> None:
        with self._lock:
            if self._file is None:
                return
            if if_dir_exists and not self._file.parent.is_dir():
                return
            files.write_epoch_checkpoint(self._file, [(e.epoch, e.start_offset) for e in self._entries],
                                         fsync=self._fsync)

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self._entries})"


def _truncated_from_end(entries: list[EpochEntry], end_offset: int) -> list[EpochEntry]:
    if end_offset >= 0 and entries and entries[-1].start_offset >= end_offset:
        i = len(entries)
        while i > 0 and entries[i - 1].start_offset >= end_offset:
            i -= 1
        return list(entries[:i])
    return list(entries)


def _truncated_from_start(entries: list[EpochEntry], start_offset: int) -> list[EpochEntry]:
    i = 0
    while i < len(entries) and entries[i].start_offset <= start_offset:
        i += 1
    if i == 0:
        return list(entries)
    last_removed = entries[i - 1]
    return [EpochEntry(last_removed.epoch, start_offset)] + list(entries[i:])
