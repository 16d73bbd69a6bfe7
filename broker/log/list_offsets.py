"""ListOffsets on one partition's log: the special timestamps, the answer type and the
search for the first record at or after a timestamp (Kafka's
``UnifiedLog.fetchOffsetByTimestamp``, its segment walk).

Owns: the ListOffsets special timestamps (``LATEST_TIMESTAMP`` -1 ...
``LATEST_TIERED_TIMESTAMP`` -5), ``OffsetAndTimestamp`` (one answer) and
``search_by_timestamp``: for ``MAX_TIMESTAMP`` the record with the largest timestamp
(the segment with the largest one, its offset index, then a scan), otherwise the first
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
