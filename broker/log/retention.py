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

Remote-storage logs with remote.log.copy.disable=true (KIP-950, a read-only tier): the
limits are retention.bytes / retention.ms (local.retention.* are then -2 or equal to
them, ``config.py``), applied to the local size; a copied segment goes as above, an
uncopied one only when no remote offset remains below the local log start offset (log
start offset >= local log start offset: deleting it earlier would leave a hole between
the remote and the local offsets; the remote segments, older, go first by the remote
retention), and then the log start offset moves with it, as for a local log.

Also ``min_snapshots_offset_to_retain(log)``: the oldest producer snapshot the log
manager's checkpoint task keeps (for a remote-storage log, every one above the highest
remote offset: a copy takes its segment's snapshot).

No on-disk format of its own. Thread-safety: runs under the log's lock (``UnifiedLog._lock``);
a friend module of ``unified_log.py`` (it uses the log's private members).
"""

from __future__ import annotations

from .segment import LogSegment

__all__ = ["delete_old_segments", "min_snapshots_offset_to_retain"]


# How a deletion treats the log start offset and uncopied segments (module docstring).
_LOCAL, _TIERED, _READ_ONLY_TIER = "local", "tiered", "read-only tier"


def delete_old_segments(ulog, now_ms: int | None = None) -> int:
    """Delete what retention allows (module docstring); returns how many segments went."""
    config = ulog.config
    now_ms = ulog._time.milliseconds() if now_ms is None else now_ms
    remote = ulog.remote_log_enabled
    copying = remote and not config.remote_log_copy_disable
    mode = _TIERED if copying else _READ_ONLY_TIER if remote else _LOCAL
    deleted = _delete_old_segments(
        ulog, lambda seg, nxt: nxt is not None and nxt.base_offset <= ulog.log_start_offset,
        "log start offset breach", _LOCAL)
    if not config.delete:
        return deleted
    retention_bytes = config.local_retention_bytes if copying else config.retention_bytes
    retention_ms = config.local_retention_ms if copying else config.retention_ms
    if retention_bytes >= 0:
        diff = ulog.size - retention_bytes
        if diff > 0:
            def size_breached(seg, nxt) -> bool:
                nonlocal diff
                if diff - seg.size >= 0:
                    diff -= seg.size
                    return True
                return False
            deleted += _delete_old_segments(ulog, size_breached, "retention size breach", mode)
    if retention_ms >= 0:
        deleted += _delete_old_segments(
            ulog, lambda seg, nxt: now_ms - seg.largest_timestamp() > retention_ms,
            "retention time breach", mode)
    return deleted


def _delete_old_segments(ulog, predicate, reason: str, mode: str) -> int:
    """Delete the prefix of segments satisfying ``predicate``; in ``_TIERED`` mode (local
    retention of a remote-storage log) only copied ones, without moving the log start;
    in ``_READ_ONLY_TIER`` mode uncopied ones only when no remote offset is left below
    them, moving the log start then (module docstring)."""
    with ulog._lock:
        local = ulog._local
        if ulog._deleted or local.is_closed:
            return 0
        highest_remote = ulog.highest_offset_in_remote_storage
        remote_below = ulog.log_start_offset < ulog.local_log_start_offset

        def should_delete(segment: LogSegment, nxt: LogSegment | None) -> bool:
            upper = nxt.base_offset if nxt is not None else ulog.log_end_offset
            copied = highest_remote >= 0 and upper - 1 <= highest_remote
            if mode == _TIERED and not copied:
                return False  # not copied yet: the only copy of these offsets
            if mode == _READ_ONLY_TIER and not copied and remote_below:
                return False  # would leave a hole between the remote and the local offsets
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
            if mode == _LOCAL or (mode == _READ_ONLY_TIER and not remote_below):
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
