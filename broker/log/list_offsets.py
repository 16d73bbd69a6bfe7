"""ListOffsets on one partition's log: the special timestamps, the answer type and the
search for the first record at or after a timestamp (Kafka's
``UnifiedLog.fetchOffsetByTimestamp``, its segment walk).

Owns: the ListOffsets special timestamps (``LATEST_TIMESTAMP`` -1 ...
``LATEST_TIERED_TIMESTAMP`` -5), ``OffsetAndTimestamp`` (one answer) and
``search_by_timestamp``: for ``MAX_TIMESTAMP`` the record with the largest timestamp
(the segment with the largest one, its offset index, then a scan; with tiered storage
compared with the remote segments' own, ``fetch_offset_by_timestamp``), otherwise the first
segment whose largest timestamp reaches the target, then its time index, offset index and
a scan (``LogSegment.find_offset_by_timestamp``). ``UnifiedLog.fetch_offset_by_timestamp``
answers the other special timestamps from its offsets and leader epochs, and runs the
search lock-free, retried once when retention deletes a segment under it.

No on-disk format of its own (it reads segments through ``segment.py``).

Thread-safety: a pure function of the segment list it is given (a snapshot: the segment
set is copy-on-write); segment reads are lock-free (``segment.py``). A segment deleted
and closed meanwhile makes it raise ``OSError``, which the caller handles.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..record.batch import NO_TIMESTAMP
from .file_records import TimestampAndOffset
from .segment import LogSegment

__all__ = ["OffsetAndTimestamp", "search_by_timestamp", "LATEST_TIMESTAMP", "EARLIEST_TIMESTAMP",
           "MAX_TIMESTAMP", "EARLIEST_LOCAL_TIMESTAMP", "LATEST_TIERED_TIMESTAMP"]

# ListOffsets special timestamps (ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


class OffsetAndTimestamp(NamedTuple):
    """A ListOffsets answer: the offset, the timestamp found there (-1 for earliest and
    latest) and the leader epoch of that offset (None when unknown)."""
    offset: int
    timestamp: int
    leader_epoch: int | None


def search_by_timestamp(segments: Sequence[LogSegment], target_timestamp: int,
                        log_start_offset: int) -> TimestampAndOffset | None:
    """The first record at or after ``log_start_offset`` with a timestamp >= the target
    (for ``MAX_TIMESTAMP``: the record with the largest timestamp), or None."""
    if target_timestamp == MAX_TIMESTAMP:
        best = max(segments, key=lambda s: s.max_timestamp_so_far(), default=None)
        if best is None or best.max_timestamp_so_far() < 0:
            return None
        max_ts = best.read_max_timestamp_and_offset_so_far()
        position = best.offset_index.lookup(max_ts.offset).position
        return best.log.search_for_timestamp(max_ts.timestamp, position, log_start_offset)
    for segment in segments:
        if segment.largest_timestamp() >= target_timestamp:
            found = segment.find_offset_by_timestamp(target_timestamp, log_start_offset)
            if found is not None:
                return found
    return None


def fetch_offset_by_timestamp(ulog, target_timestamp: int) -> OffsetAndTimestamp | None:
    """The body of ``UnifiedLog.fetch_offset_by_timestamp`` (its docstring): the special
    timestamps from the log's offsets and leader epochs, else the remote segments
    (``ulog.remote_reader``, tiered storage) then ``search_by_timestamp`` on the local
    ones, lock-free, retried once when retention deletes a segment under it. For
    ``MAX_TIMESTAMP`` both are searched (``find_max_timestamp``: the manifests' max
    timestamps pick the remote segment) and the larger timestamp wins, the remote one on
    a tie (lower offsets)."""
    local = ulog._local
    channel = local.failure_channel
    if channel.any_offline and channel.is_offline(local.parent_dir):
        raise channel.storage_error(local.parent_dir, f"offset lookup in {ulog.name}")
    ulog._check_open()
    if target_timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        start = ulog._log_start_offset if target_timestamp == EARLIEST_TIMESTAMP else ulog.local_log_start_offset
        return OffsetAndTimestamp(start, NO_TIMESTAMP, ulog._epoch_for_offset(start))
    if target_timestamp == LATEST_TIMESTAMP:
        return OffsetAndTimestamp(ulog.log_end_offset, NO_TIMESTAMP, ulog.latest_epoch())
    if target_timestamp == LATEST_TIERED_TIMESTAMP:
        highest = ulog.highest_offset_in_remote_storage if ulog.remote_log_enabled else -1
        return OffsetAndTimestamp(highest, NO_TIMESTAMP, ulog._epoch_for_offset(highest) if highest >= 0 else -1)
    remote_max = None
    if ulog.remote_reader is not None and ulog.remote_log_enabled:
        if target_timestamp >= 0:
            found = ulog.remote_reader.find_offset_by_timestamp(ulog, target_timestamp)
            if found is not None:
                return found
        elif target_timestamp == MAX_TIMESTAMP:
            remote_max = ulog.remote_reader.find_max_timestamp(ulog)
    for attempt in range(2):
        segments = local.segments.values()
        try:
            found = search_by_timestamp(segments, target_timestamp, ulog._log_start_offset)
            break
        except OSError as exc:
            if attempt == 0 and local.segments.values() != segments:
                continue  # retention deleted a segment under this lock-free lookup: retry
            raise ulog._storage_error(f"error while fetching offset by timestamp for {ulog.name}",
                                      exc) from exc
    if remote_max is not None and (found is None or remote_max.timestamp >= found.timestamp):
        return remote_max  # a tie: the remote record comes first (or is the same, copied)
    if found is None:
        return None
    return OffsetAndTimestamp(found.offset, found.timestamp, found.leader_epoch)
