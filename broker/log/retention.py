"""Retention of one partition's log: which local segments go, and what that does to the
log start offset (Kafka's ``UnifiedLog.deleteOldSegments`` and its three predicates).

Owns ``delete_old_segments(log)``, the body of ``UnifiedLog.delete_old_segments``:

- segments wholly below the log start offset (DeleteRecords, remote retention) go always;
- for delete-policy topics, oldest first, those past the size limit and those whose
  largest timestamp is older than the time limit;
- a segment goes only when the high watermark is at or past its end; the log always keeps
  a segment (the active one is rolled first when every segment goes).

Local logs: the limits are retention.bytes / retention.ms and each deletion advances the
log start offset to the first remaining segment.

Remote-storage logs (tiered storage, KIP-405; ``UnifiedLog.remote_log_enabled``): the
limits are local.retention.bytes / local.retention.ms (-2: retention.*), applied to the
local size; a segment past them goes only once it is copied (its end offset at or below
``highest_offset_in_remote_storage``), and its deletion moves only the *local* log start
offset (the first local segment), never the log start offset: its offsets stay readable
from remote storage. retention.ms / retention.bytes of the whole log are applied to the
remote segments by the ``RemoteLogManager`` (``remote/log_manager.py``).

Also ``min_snapshots_offset_to_retain(log)``: the oldest producer snapshot the log
manager's checkpoint task keeps (for a remote-storage log, every one above the highest
remote offset: a copy takes its segment's snapshot).

No on-disk format of its own. Thread-safety: runs under the log's lock (``UnifiedLog._lock``);
a friend module of ``unified_log.py`` (it uses the log's private members).
"""

from __future__ import annotations

from .segment import LogSegment

__all__ = ["delete_old_segments", "min_snapshots_offset_to_retain"]


def delete_old_segments(ulog, now_ms: int | None = None) -> int:
    """Delete what retention allows (module docstring); returns how many segments went."""
    config = ulog.config
    now_ms = ulog._time.milliseconds() if now_ms is None else now_ms
    remote = ulog.remote_log_enabled
    deleted = _delete_old_segments(
        ulog, lambda seg, nxt: nxt is not None and nxt.base_offset <= ulog.log_start_offset,
        "log start offset breach", remote=False)
    if not config.delete:
        return deleted
    retention_bytes = config.local_retention_bytes if remote else config.retention_bytes
    retention_ms = config.local_retention_ms if remote else config.retention_ms
    if retention_bytes >= 0:
        diff = ulog.size - retention_bytes
        if diff > 0:
            def size_breached(seg, nxt) -> bool:
                nonlocal diff
                if diff - seg.size >= 0:
                    diff -= seg.size
                    return True
                return False
            deleted += _delete_old_segments(ulog, size_breached, "retention size breach", remote)
    if retention_ms >= 0:
        deleted += _delete_old_segments(
            ulog, lambda seg, nxt: now_ms - seg.largest_timestamp() > retention_ms,
            "retention time breach", remote)
    return deleted


def _delete_old_segments(ulog, predicate, reason: str, remote: bool) -> int:
    """Delete the prefix of segments satisfying ``predicate``; for ``remote`` (local
    retention of a remote-storage log) only copied ones, without moving the log start."""
    with ulog._lock:
        local = ulog._local
        if ulog._deleted or local.is_closed:
            return 0
        highest_remote = ulog.highest_offset_in_remote_storage

        def should_delete(segment: LogSegment, nxt: LogSegment | None) -> bool:
            upper = nxt.base_offset if nxt is not None else ulog.log_end_offset
            if remote and not (highest_remote >= 0 and upper - 1 <= highest_remote):
                return False  # not copied yet: the only copy of these offsets
            return ulog.high_watermark >= upper and predicate(segment, nxt)

        deletable = local.deletable_segments(should_delete)
        if not deletable:
            return 0
        with ulog._io(f"error while deleting segments ({reason})"):
            to_delete = deletable
            if len(local.segments) == len(deletable):
                new_segment = ulog.roll()
                if deletable[-1].base_offset == new_segment.base_offset:
                    to_delete = deletable[:-1]
            local.check_if_memory_mapped_buffer_closed()
            local.remove_and_delete_segments(to_delete, async_delete=True, reason=reason)
            first = local.segments.first_segment_base_offset()
            ulog.producer_state_manager.delete_snapshots_before(first)
            if not remote:
                ulog.maybe_increment_log_start_offset(first, reason)
        return len(deletable)


def min_snapshots_offset_to_retain(ulog) -> int:
    """Keep snapshots from the segment before the recovery point and the last two segments
    (Kafka's ``minSnapshotsOffsetToRetain``), and for a remote-storage log those above the
    highest remote offset (each copy takes its segment's)."""
    with ulog._lock:
        segments = ulog._local.segments
        active = segments.active_segment
        lower = segments.lower_segment(active.base_offset)
        two_segments_min = (lower or active).base_offset
        rp = ulog.recovery_point
        rp_lower = segments.lower_segment(rp)
        keep = min(rp_lower.base_offset if rp_lower is not None else rp, two_segments_min)
        if ulog.remote_log_enabled:  # the snapshots of segments not yet copied go with them
            keep = min(keep, ulog.highest_offset_in_remote_storage + 1)
        return keep
