"""Transactional offset commits (TxnOffsetCommit): the group coordinator's side of a
transaction, kept apart from ``coordinator.py`` so that the two evolve separately.

Owns ``TransactionalOffsets``, one per ``GroupCoordinator`` (its ``txn_offsets``), a part
that receives the ``GroupContext`` and the offsets part (``offsets.GroupOffsets``) and owns
its state: the pending offsets, producer id -> {(group id, topic, partition):
OffsetAndMetadata}, written in an open transaction and not visible to OffsetFetch yet.

* ``commit``: validates the group / member / generation as an OffsetCommit
  (``GroupOffsets.validate_commit``, transactional; a request without a generation and
  member, as TxnOffsetCommit v0-v2 send, skips it as Kafka does), appends ONE transactional batch
  (the producer's id and epoch, no sequence) of OffsetCommit records to the group's
  ``__consumer_offsets`` partition through the coordinator's ``RecordWriter``, and keeps
  the offsets pending. The log fences an older producer epoch (INVALID_PRODUCER_EPOCH;
  the handler maps it); append errors are answered as the log raised them (the writer's
  OffsetCommit map is not applied, ``_AS_RAISED``).
* ``complete``: called by the transaction coordinator right after it wrote the COMMIT or
  ABORT marker of ``producer_id`` to a ``__consumer_offsets`` partition: on COMMIT the
  pending offsets of the groups hashing there become the committed offsets
  (``GroupOffsets.apply``), on ABORT they are dropped.
* ``restore``: at startup, the transactions the loader found open at the end of a
  partition (``LoadResult.open_transactions``: written before a restart, marker not yet
  written) become pending again, so that their marker completes them as if the broker had
  not stopped. Transactions that ended before the restart are applied (COMMIT) or dropped
  (ABORT) by the loader itself.

Thread-safety: ``commit`` and ``complete`` run under ``GroupContext.mlock`` and the
partition's lock, like the offsets part's commits; the pending map has its own leaf lock
(short moments, never held while another leaf lock is taken).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from broker.protocol import ErrorCode
from broker.server.coordinator import CoordinatorRecord
from broker.server.errors import ApiError
from broker.server.group.context import GroupContext
from broker.server.group.group import OffsetAndMetadata
from broker.server.group.offsets import GroupOffsets, OffsetEntry, TopicPartition
from broker.server.group.records import OffsetCommitKey, RecordFormatError, decode_key, decode_offset_commit_value

log = logging.getLogger(__name__)

_AS_RAISED: dict[int, int] = {}  # TxnOffsetCommit answers append errors unmapped

PendingKey = tuple[str, str, int]  # (group id, topic, partition)


class TransactionalOffsets:
    """The TxnOffsetCommit path over ``ctx`` and ``offsets`` (the offsets part), and its
    pending offsets (module docstring)."""

    def __init__(self, ctx: GroupContext, offsets: GroupOffsets) -> None:
        self._ctx = ctx
        self._offsets = offsets
        self._pending: dict[int, dict[PendingKey, OffsetAndMetadata]] = {}
        self._lock = threading.Lock()

    def pending(self, producer_id: int) -> dict[PendingKey, OffsetAndMetadata]:
        """A copy of the producer's pending offsets."""
        with self._lock:
            return dict(self._pending.get(producer_id, {}))

    def commit(self, group_id: str, producer_id: int, producer_epoch: int, generation_id: int, member_id: str,
               group_instance_id: str | None, offsets: Iterable[OffsetEntry]) -> list[int]:
        """Append ``offsets`` ((topic, partition, offset, leader_epoch, metadata)) in the
        producer's transaction; one error code per entry."""
        ctx = self._ctx
        entries = list(offsets)
        if not group_id:
            return [ErrorCode.INVALID_GROUP_ID] * len(entries)
        ctx.runtime.topic.ensure()
        p = ctx.partition_for(group_id)
        with ctx.mlock, ctx.runtime.partition_lock(p):
            group = ctx.groups.get(group_id)
            if generation_id >= 0 or member_id or group_instance_id is not None:
                code = GroupOffsets.validate_commit(group, generation_id, member_id, group_instance_id,
                                                    transactional=True)
                if code != ErrorCode.NONE:
                    return [code] * len(entries)
            now = ctx.time.milliseconds()
            results, records, accepted = self._offsets.entries(group_id, entries, now, -1)
            if not records:
                return results
            try:
                ctx.runtime.append(p, records, timestamp=now, producer_id=producer_id, producer_epoch=producer_epoch,
                                  errors=_AS_RAISED)
            except ApiError as exc:
                log.info("transactional offset commit of group %s failed: %s", group_id, exc)
                return [exc.code if r == ErrorCode.NONE else r for r in results]
            with self._lock:
                pending = self._pending.setdefault(producer_id, {})
                for (topic, partition), om in accepted:
                    pending[(group_id, topic, partition)] = om
        return results

    def complete(self, partition: int, producer_id: int, commit: bool, marker_offset: int) -> int:
        """Apply (commit) or drop (abort) the producer's pending offsets of the groups in
        ``__consumer_offsets``-``partition``, whose marker is at ``marker_offset``. Returns
        the number of offsets made visible."""
        ctx = self._ctx
        with ctx.mlock, ctx.runtime.partition_lock(partition):
            with self._lock:
                mine = self._pending.get(producer_id, {})
                found = {k: v for k, v in mine.items() if ctx.partition_for(k[0]) == partition}
                for k in found:
                    del mine[k]
                if not mine:
                    self._pending.pop(producer_id, None)
            if not commit:
                return 0
            by_group: dict[str, list[tuple[TopicPartition, OffsetAndMetadata]]] = {}
            for (group_id, topic, p), om in found.items():
                by_group.setdefault(group_id, []).append(((topic, p), om))
            for group_id, committed in by_group.items():
                self._offsets.apply(group_id, committed)
            log.debug("%s-%d: %d offsets of producer %d committed at offset %d", ctx.runtime.topic.name, partition,
                      len(found), producer_id, marker_offset)
            return len(found)

    def restore(self, producer_id: int, records: Iterable[CoordinatorRecord]) -> int:
        """Make the offset records of an open transaction pending again (startup); returns
        how many were kept (unreadable records are logged and skipped)."""
        kept = 0
        with self._lock:
            pending = self._pending.setdefault(producer_id, {})
            for rec in records:
                try:
                    key = decode_key(rec.key)
                    if not isinstance(key, OffsetCommitKey) or rec.value is None:
                        continue
                    v = decode_offset_commit_value(rec.value)
                except RecordFormatError as exc:
                    log.warning("%s-%d: skipping an unreadable transactional offset record at %d: %s",
                                self._ctx.runtime.topic.name, rec.partition, rec.offset, exc)
                    continue
                pending[(key.group, key.topic, key.partition)] = OffsetAndMetadata(
                    v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)
                kept += 1
            if not pending:
                del self._pending[producer_id]
        return kept


__all__ = ["TransactionalOffsets"]
