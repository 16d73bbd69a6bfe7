"""Truncation of one partition's log (Kafka's ``UnifiedLog.truncateTo`` /
``truncateFullyAndStartAt``): the bodies of ``UnifiedLog.truncate_to`` and
``UnifiedLog.truncate_fully_and_start_at``.

``truncate_to(target)`` removes every offset >= target (a no-op at or past the log end
offset; below the first local segment it empties the log and starts it at the target),
truncates the leader-epoch cache from the end, rebuilds the producer state up to the
target and moves the high watermark and first unstable offset with it.
``truncate_fully_and_start_at`` deletes every segment and starts an empty log.

No on-disk format of its own. Thread-safety: under the log's lock (``UnifiedLog._lock``);
a friend module of ``unified_log.py`` (it uses the log's private members).
"""

from __future__ import annotations

__all__ = ["truncate_to", "truncate_fully_and_start_at"]


def truncate_to(ulog, target_offset: int) -> bool:
    """Remove every offset >= ``target_offset`` (a no-op at or past the LEO). True when
    something was removed."""
    if target_offset < 0:
        raise ValueError(f"cannot truncate partition {ulog.name} to a negative offset ({target_offset})")
    with ulog._lock, ulog._io(f"error while truncating log to offset {target_offset}"):
        ulog._check_open()
        if target_offset >= ulog.log_end_offset:
            return False
        if target_offset < ulog._local.segments.first_segment_base_offset():
            truncate_fully_and_start_at(ulog, target_offset)
            return True
        ulog._local.truncate_to(target_offset)
        if ulog.leader_epoch_cache is not None:
            ulog._checked_epoch = None
            ulog.leader_epoch_cache.truncate_from_end(target_offset)
        ulog._rebuild_producer_state(target_offset)
        if ulog.high_watermark >= ulog.log_end_offset:
            ulog._update_high_watermark_metadata(ulog._local.log_end_offset_metadata)
        else:
            ulog._maybe_increment_first_unstable_offset()
        return True

def truncate_fully_and_start_at(ulog, new_offset: int, log_start_offset: int | None = None) -> None:
    """Delete everything and start an empty log at ``new_offset``."""
    with ulog._lock, ulog._io(f"error while truncating the entire log to {new_offset}"):
        ulog._check_open()
        ulog._local.truncate_fully_and_start_at(new_offset)
        if ulog.leader_epoch_cache is not None:
            ulog._checked_epoch = None
            ulog.leader_epoch_cache.clear_and_flush()
        ulog.producer_state_manager.truncate_fully_and_start_at(new_offset)
        ulog._log_start_offset = new_offset if log_start_offset is None else log_start_offset
        ulog._rebuild_producer_state(new_offset)
        ulog._update_high_watermark_metadata(ulog._local.log_end_offset_metadata)
