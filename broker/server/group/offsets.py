"""The group coordinator's offsets part (Kafka's ``OffsetMetadataManager``): the committed
offsets of every group, their commits, fetches, deletions and expiration, and the replay
of the offset records of ``__consumer_offsets``.

Owns:

* ``OffsetCache``: group id -> {(topic, partition): ``OffsetAndMetadata``}; a group id is
  present only while it has at least one offset. Only ``GroupOffsets`` (and the pending
  transactional offsets becoming visible, through ``GroupOffsets.apply``) writes it; the
  group map reads ``has`` to know whether a group without members or records still
  exists.
* ``GroupOffsets``: the requests on offsets. Every commit is ONE record batch (all of the
  request's offsets, all-or-nothing) appended to the group's partition, the cache changed
  only after the append returned. A deleted offset is a tombstone.

Validation of a commit: a group that does not exist accepts generation -1 (a simple
consumer, an admin tool; the group is created as a simple classic group) and answers
ILLEGAL_GENERATION otherwise; an existing group answers through
``Group.validate_offset_commit`` (classic: generation and member; consumer: member epoch).
Metadata longer than ``offset.metadata.max.bytes`` (Java's UTF-16 length) gets
OFFSET_METADATA_TOO_LARGE for that partition only.

Expiration (``offsets.retention.minutes``, KIP-211 / KIP-496), through
``Group.offset_expiration``: an offset committed with an explicit retention expires at its
expire timestamp; otherwise it expires ``offsets.retention.minutes`` after its base
timestamp (the group becoming empty for a classic group with a protocol type, else its
commit), unless a member subscribes to its topic. An empty group whose offsets all expired
is removed, with its group records (tombstones); so is an empty group left without
offsets.

Invariants: every group id with offsets is in the group map (a commit, a replayed offset
or a committed transaction creates a simple group when there is none); the cache ends in
log order (each change is made under the partition's lock right after its append).

Thread-safety: commits, deletions and expiration run under ``GroupContext.mlock`` then the
group's partition lock, as the membership parts; the cache's own lock is a leaf held for
short moments (never with another leaf lock). Fetches take only the cache's lock (and
``mlock`` to check a consumer group member's epoch).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from broker.protocol import ErrorCode
from broker.server.errors import ApiError
from broker.server.group.context import GroupContext
from broker.server.group.group import OffsetAndMetadata
from broker.server.group.protocol import Group, OffsetExpiration, Record
from broker.server.group.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_offset_commit_value,
)

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
OffsetEntry = tuple[str, int, int, int, str | None]  # (topic, partition, offset, leader_epoch, metadata)


def _utf16_length(s: str) -> int:
    """Java's ``String.length()``: what offset.metadata.max.bytes is compared with."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


class OffsetCache:
    """group id -> its committed offsets (module docstring)."""

    def __init__(self) -> None:
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self._lock = threading.Lock()

    def has(self, group_id: str) -> bool:
        return bool(self._offsets.get(group_id))

    def of(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """A copy of the group's offsets."""
        with self._lock:
            return dict(self._offsets.get(group_id, {}))

    def put(self, group_id: str, offsets: Iterable[tuple[TopicPartition, OffsetAndMetadata]]) -> None:
        with self._lock:
            mine = self._offsets.setdefault(group_id, {})
            for tp, om in offsets:
                mine[tp] = om
            if not mine:
                del self._offsets[group_id]

    def remove(self, group_id: str, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            mine = self._offsets.get(group_id)
            if mine is None:
                return
            for tp in tps:
                mine.pop(tp, None)
            if not mine:
                del self._offsets[group_id]

    def drop(self, group_id: str) -> None:
        with self._lock:
            self._offsets.pop(group_id, None)


class GroupOffsets:
    """The offsets part (module docstring); ``cache`` is its own."""

    def __init__(self, ctx: GroupContext, cache: OffsetCache) -> None:
        self._ctx = ctx
        self._cache = cache

    # --- commits ---

    def commit(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
               offsets: Iterable[OffsetEntry], retention_time_ms: int = -1) -> list[int]:
        """OffsetCommit: one error code per entry (topics already checked to exist)."""
        ctx = self._ctx
        entries = list(offsets)
        if not group_id:
            return [ErrorCode.INVALID_GROUP_ID] * len(entries)
        p = ctx.partition_for(group_id)
        with ctx.mlock, ctx.runtime.partition_lock(p):
            code = self.validate_commit(ctx.groups.get(group_id), generation_id, member_id, group_instance_id)
            if code != ErrorCode.NONE:
                return [code] * len(entries)
            now = ctx.time.milliseconds()
            expire = now + retention_time_ms if retention_time_ms is not None and retention_time_ms >= 0 else -1
            results, records, accepted = self.entries(group_id, entries, now, expire)
            if not records:
                return results
            try:
                ctx.runtime.append(p, records, timestamp=now)
            except ApiError as exc:
                log.info("offset commit of group %s failed: %s", group_id, exc)
                return [exc.code if r == ErrorCode.NONE else r for r in results]
            self.apply(group_id, accepted)
        return results

    @staticmethod
    def validate_commit(group: Group | None, generation_id: int, member_id: str, group_instance_id: str | None,
                        transactional: bool = False) -> int:
        """A commit into ``group`` (None: it does not exist; generation -1 creates it)."""
        if group is None:
            # a simple consumer or an admin tool creates the group; a generation from elsewhere
            return ErrorCode.NONE if generation_id < 0 else ErrorCode.ILLEGAL_GENERATION
        return group.validate_offset_commit(member_id, group_instance_id, generation_id, transactional)

    def entries(self, group_id: str, entries: list[OffsetEntry], now: int, expire: int
                ) -> tuple[list[int], list[Record], list[tuple[TopicPartition, OffsetAndMetadata]]]:
        """The records of a commit's entries (OffsetCommit and TxnOffsetCommit): one code
        per entry (OFFSET_METADATA_TOO_LARGE past ``offset.metadata.max.bytes``), the
        (key, value) records of the accepted ones, and their ((topic, partition), offset)."""
        max_bytes = self._ctx.config.offset_metadata_max_bytes
        results: list[int] = []
        records: list[Record] = []
        accepted: list[tuple[TopicPartition, OffsetAndMetadata]] = []
        for topic, partition, offset, leader_epoch, metadata in entries:
            metadata = metadata or ""
            if _utf16_length(metadata) > max_bytes:
                results.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            om = OffsetAndMetadata(offset, leader_epoch if leader_epoch >= 0 else -1, metadata, now, expire)
            records.append((encode_key(OffsetCommitKey(group_id, topic, partition)),
                            encode_offset_commit_value(OffsetCommitValue(
                                om.offset, om.metadata, om.commit_timestamp, om.leader_epoch, om.expire_timestamp))))
            accepted.append(((topic, partition), om))
            results.append(ErrorCode.NONE)
        return results, records, accepted

    def apply(self, group_id: str, offsets: Iterable[tuple[TopicPartition, OffsetAndMetadata]]) -> None:
        """Make ``offsets`` the group's committed offsets (after their append or their
        transaction's COMMIT marker); the group is created as a simple group if missing."""
        self._ctx.groups.simple(group_id)
        self._cache.put(group_id, offsets)

    # --- fetches ---

    def fetch(self, group_id: str, tps: Iterable[TopicPartition] | None, member_id: str | None = None,
              member_epoch: int = -1) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """OffsetFetch (see ``GroupCoordinator.fetch_offsets``)."""
        if not group_id:
            raise ApiError(ErrorCode.INVALID_GROUP_ID, "the group id is empty")
        if member_id is not None:  # OffsetFetch v9
            with self._ctx.mlock:
                group = self._ctx.groups.get(group_id)
                if group is not None:
                    code = group.validate_offset_fetch(member_id, member_epoch)
                    if code != ErrorCode.NONE:
                        raise ApiError(ErrorCode(code), f"member {member_id!r} epoch {member_epoch}")
        committed = self._cache.of(group_id)
        if tps is None:
            return dict(sorted(committed.items()))
        return {tp: committed.get(tp) for tp in tps}

    def has(self, group_id: str) -> bool:
        return self._cache.has(group_id)

    # --- deletion ---

    def tombstones(self, group_id: str) -> list[Record]:
        """The tombstones of every committed offset of the group (DeleteGroups)."""
        return [(encode_key(OffsetCommitKey(group_id, t, part)), None) for t, part in sorted(self._cache.of(group_id))]

    def forget(self, group_id: str) -> None:
        """The group was deleted (its tombstones appended): drop its offsets."""
        self._cache.drop(group_id)

    def delete(self, group_id: str, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """OffsetDelete (see ``GroupCoordinator.delete_offsets``)."""
        ctx = self._ctx
        if not group_id:
            raise ApiError(ErrorCode.INVALID_GROUP_ID, "the group id is empty")
        p = ctx.partition_for(group_id)
        with ctx.mlock, ctx.runtime.partition_lock(p):
            group = ctx.groups.get(group_id)
            if group is None:
                raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist")
            subscribed = group.topics_in_use()
            if subscribed is None:
                raise ApiError(ErrorCode.NON_EMPTY_GROUP, f"group {group_id} has members")
            committed = self._cache.of(group_id)
            codes: dict[TopicPartition, int] = {}
            removed = []
            for tp in tps:
                if tp[0] in subscribed:
                    codes[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                    continue
                codes[tp] = ErrorCode.NONE
                if tp in committed:
                    removed.append(tp)
            if removed:
                ctx.runtime.append(p, [(encode_key(OffsetCommitKey(group_id, t, part)), None) for t, part in removed])
                self._cache.remove(group_id, removed)
            return codes

    # --- expiration ---

    def delete_expired(self, now_ms: int | None = None) -> int:
        """Remove the offsets past retention (module docstring); how many were removed."""
        ctx = self._ctx
        now = ctx.time.milliseconds() if now_ms is None else now_ms
        removed = 0
        for group_id in ctx.groups.ids():
            p = ctx.partition_for(group_id)
            with ctx.mlock, ctx.runtime.partition_lock(p):
                group = ctx.groups.get(group_id)
                condition = group.offset_expiration() if group is not None else None
                if group is None or condition is None:
                    continue  # a rebalancing group, or one whose subscriptions are unknown: nothing expires
                committed = self._cache.of(group_id)
                expired = [tp for tp, om in committed.items()
                           if tp[0] not in condition.subscribed and self._expired(om, now, condition)]
                if not expired and (committed or not group.has_records):
                    continue  # (an Empty group without offsets goes, as Kafka's cleanupGroupMetadata)
                records: list[Record] = [
                    (encode_key(OffsetCommitKey(group_id, t, part)), None) for t, part in sorted(expired)]
                dead = len(expired) == len(committed) and group.is_empty()
                if dead and group.has_records:
                    records.extend(group.tombstones())
                try:
                    if records:
                        ctx.runtime.append(p, records)
                except ApiError as exc:
                    log.warning("expiring offsets of group %s failed: %s", group_id, exc)
                    continue
                self._cache.remove(group_id, expired)
                if dead:
                    ctx.groups.remove(group_id)
                removed += len(expired)
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    def _expired(self, om: OffsetAndMetadata, now: int, condition: OffsetExpiration) -> bool:
        if om.expire_timestamp >= 0:
            return now >= om.expire_timestamp
        base = condition.empty_since_ms if condition.empty_since_ms >= 0 else om.commit_timestamp
        return now - base >= self._ctx.config.offsets_retention_ms

    # --- loading ---

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        """Apply one loaded offset record (startup, in log order; a None value: tombstone)."""
        tp = (key.topic, key.partition)
        if value is None:
            self._cache.remove(key.group, [tp])
            group = self._ctx.groups.get(key.group)
            if group is not None:
                self._ctx.groups.drop_if_unused(group)
            return
        self.apply(key.group, [(tp, OffsetAndMetadata(value.offset, value.leader_epoch, value.metadata,
                                                      value.commit_timestamp, value.expire_timestamp))])


__all__ = ["GroupOffsets", "OffsetCache", "OffsetEntry", "TopicPartition"]
