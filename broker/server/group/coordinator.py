"""``GroupCoordinator``: Kafka's group coordinator, composed of parts. The groups'
committed offsets and their records are kept in ``__consumer_offsets``, through the
coordinator runtime (``broker.server.coordinator``: topic, writer, loader, timers).

The parts, each a class owning its own state and receiving what it needs explicitly (the
``GroupContext`` of ``context.py``: ``GroupConfig``, the runtime, the clock, the topics,
the membership lock and the group map):

* ``offsets``: ``offsets.GroupOffsets``, the offsets cache and OffsetCommit, OffsetFetch,
  OffsetDelete and expiration;
* ``classic``: ``membership.ClassicGroups``, the classic protocol (JoinGroup / SyncGroup /
  Heartbeat / LeaveGroup, rebalances, sessions) over ``GroupMetadata`` (``group.py``) and
  its group record;
* ``consumer``: ``consumer_membership.ConsumerGroups``, the KIP-848 protocol
  (ConsumerGroupHeartbeat, member epochs, server-side assignment) over ``ConsumerGroup``
  (``consumer_group.py``) and its records;
* ``txn_offsets``: ``txn_offsets.TransactionalOffsets``, TxnOffsetCommit and the pending
  offsets of open transactions;
* ``share``: ``share_membership.ShareGroups``, the KIP-932 share groups' membership
  (ShareGroupHeartbeat, ShareGroupDescribe, sessions, the simple assignor) over
  ``ShareGroup`` (``share_group.py``) and its ShareGroupMetadata record; the records'
  delivery state is the share coordinator's (``broker.server.share``), which the broker
  wires to it (a member leaving releases its records; a deleted group loses its state).

The coordinator keeps the public methods the request handlers call and routes each to its
part; what spans parts is here: ListGroups, DescribeGroups and DeleteGroups (through the
``Group`` protocol of ``protocol.py``, which both kinds of group implement), startup
(loading, then the parts resume their timers) and shutdown.

Owns:

* the group map (``context.GroupMap``): group id -> ``Group``. A group exists while it has
  offsets, a group record or members.
* the records: a classic group's ``GroupMetadataValue`` (``membership.py``), a KIP-848
  group's records (``consumer_membership.py``), the offsets (``offsets.py``); a
  tombstone when a group is deleted or expires.
* the topic ``__consumer_offsets`` (``OFFSETS_TOPIC_SPEC``): every commit is ONE record
  batch appended with ``AppendOrigin.COORDINATOR`` to partition
  ``abs(java_hashCode(group_id)) % partitions``, keys and values as Kafka writes them
  (``records.py``), the cache changed only after the append returned: a commit is
  acknowledged once it is in the log, as durable as the topic's flush policy makes it. The
  topic is created on first write with ``offsets.topic.num.partitions`` partitions and
  Kafka's internal-topic configs (cleanup.policy=compact,
  segment.bytes=offsets.topic.segment.bytes, compression.type=producer); when it already
  exists its own partition count is used, as Kafka does, so that a changed setting never
  moves a group.
* loading: ``startup()`` replays every partition of the topic from its log start offset
  before the broker accepts connections (so COORDINATOR_LOAD_IN_PROGRESS never happens),
  with the runtime's ``CoordinatorLoader`` calling ``_replay`` per record, which hands each
  record to its part: records apply in log order, a tombstone removes, transactional
  offset commits apply at their COMMIT marker and are dropped at ABORT (those still open
  become pending again, ``TransactionalOffsets.restore``), unreadable batches or records
  and record types this broker does not write (the other share-group records) are logged
  and skipped.
* expiration (``offsets.retention.minutes``, checked every
  ``offsets.retention.check.interval.ms``, a periodic task of the runtime's timer on the
  log manager's scheduler), as Kafka 2.1+ (KIP-211): an offset committed with an explicit
  retention (OffsetCommit v2-v4 ``retention_time_ms``) expires at its expire timestamp;
  otherwise an offset of a simple group expires ``offsets.retention.minutes`` after its
  commit, and all offsets of a group with a protocol type expire that long after the
  group became empty; in a Stable group of the "consumer" protocol (KIP-496) and in a
  KIP-848 group, the offsets of the topics no member subscribes to expire that long after
  their commit (``Group.offset_expiration``). Expired offsets are removed with
  tombstones; an Empty group left without offsets disappears (its group record too, with
  a tombstone, at the next check).

Validation of a commit (``Group.validate_offset_commit``; Kafka's
``ClassicGroup.validateOffsetCommit`` / ``ConsumerGroup.validateOffsetCommit``): a group
that does not exist accepts generation -1 (a simple consumer, an admin tool; the group is
created) and answers ILLEGAL_GENERATION otherwise; see ``group.py`` and
``consumer_group.py`` for the rest. Metadata longer than ``offset.metadata.max.bytes``
gets OFFSET_METADATA_TOO_LARGE for that partition only. Append failures map as Kafka's
``GroupMetadataManager.storeOffsets``: a missing log or partition ->
COORDINATOR_NOT_AVAILABLE, a storage error -> NOT_COORDINATOR, a batch too large ->
INVALID_COMMIT_OFFSET_SIZE. Empty group ids are refused with INVALID_GROUP_ID.

Offsets of subscribed topics never expire while the group has members. DeleteGroups
answers NON_EMPTY_GROUP for a group with members; OffsetDelete GROUP_SUBSCRIBED_TO_TOPIC
for a partition of a topic a member subscribes to ("consumer" protocol), NON_EMPTY_GROUP
when members use another protocol type.

Thread-safety: handlers call concurrently. The locks, in the order every part takes them:
``mlock`` (``GroupContext.mlock``, an RLock) serialises every change of membership state
and of the group map and is taken first; one lock per ``__consumer_offsets`` partition
(``runtime.partition_lock``) then serialises the append-then-cache-update of the groups
hashing to it (so the cache always ends in log order); last, leaf locks held for short
moments and never nested: the group map's, the offsets cache's and the pending
transactional offsets'. Loading runs before any request; expiration runs on the log
manager's scheduler thread and the membership timers on the coordinator's own
(``group-coordinator-timer``), both under the same locks. ``shutdown()`` answers the
JoinGroup / SyncGroup requests still waiting.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from broker.log.clock import SYSTEM_TIME, Time
from broker.protocol import ErrorCode
from broker.server.coordinator import (
    INTERNAL_TOPICS,
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    CoordinatorRecord,
    CoordinatorRuntime,
    InternalTopicSpec,
    java_string_hash,
    partition_for,
    storage_error_map,
)
from broker.server.errors import ApiError
from broker.server.group import consumer_records, share_records
from broker.server.group.config import GroupConfig
from broker.server.group.consumer_group import Assignment, ConsumerGroup
from broker.server.group.consumer_membership import ConsumerGroups, HeartbeatResult
from broker.server.group.context import GroupContext, GroupMap
from broker.server.group.group import STATE_DEAD, STATE_EMPTY, GroupMetadata, OffsetAndMetadata
from broker.server.group.membership import ClassicGroups, JoinResult, SyncResult
from broker.server.group.offsets import GroupOffsets, OffsetCache, OffsetEntry, TopicPartition
from broker.server.group.protocol import GROUP_TYPE_CLASSIC, GROUP_TYPE_CONSUMER, Group, GroupSummary, Record
from broker.server.group.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from broker.server.group.share_group import ShareGroup
from broker.server.group.share_membership import ShareGroups, ShareHeartbeatResult
from broker.server.group.txn_offsets import TransactionalOffsets
from broker.server.share.config import ShareConfig

log = logging.getLogger(__name__)

# Kafka's groupMetadataTopicConfigs and the offsets.* keys of its GroupCoordinatorConfig.
OFFSETS_TOPIC_SPEC = InternalTopicSpec(
    OFFSETS_TOPIC, partitions_key="offsets.topic.num.partitions",
    replication_key="offsets.topic.replication.factor", segment_bytes_key="offsets.topic.segment.bytes",
    load_buffer_key="offsets.load.buffer.size", compression_codec_key="offsets.topic.compression.codec",
    configs=(("cleanup.policy", "compact"), ("compression.type", "producer")))
# Append errors of an offset commit, as Kafka's GroupMetadataManager.storeOffsets maps them.
_APPEND_ERRORS = {**storage_error_map(ErrorCode.INVALID_COMMIT_OFFSET_SIZE),
                  ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE}


class GroupCoordinator:
    """See the module docstring. ``topics`` is the broker's ``TopicManager``; ``config`` the
    server config (parsed or raw: ``GroupConfig.from_config`` reads the group keys);
    ``on_append((topic, partition))`` wakes fetches waiting on it."""

    def __init__(self, topics: Any, config: Mapping[str, Any], *, time: Time = SYSTEM_TIME,
                 scheduler: Any = None, on_append: Callable[[tuple[str, int]], None] | None = None) -> None:
        self.topics = topics
        self.time = time
        self.config = GroupConfig.from_config(config)
        self.runtime = CoordinatorRuntime(OFFSETS_TOPIC_SPEC, topics, config, append_errors=_APPEND_ERRORS,
                                          time=time, scheduler=scheduler, on_append=on_append,
                                          timer_thread="group-coordinator-timer")
        cache = OffsetCache()
        self.groups = GroupMap(has_offsets=cache.has)
        self.context = GroupContext(self.config, self.runtime, time, topics, threading.RLock(), self.groups)
        self.offsets = GroupOffsets(self.context, cache)
        self.classic = ClassicGroups(self.context)
        self.consumer = ConsumerGroups(self.context)
        self.txn_offsets = TransactionalOffsets(self.context, self.offsets)
        self.share = ShareGroups(self.context, ShareConfig.from_config(config))
        # called with the group id after a share group is deleted (its share-partition state goes too)
        self.on_share_group_deleted: Callable[[str], None] | None = None
        self._started = False

    @property
    def mlock(self) -> threading.RLock:
        """The membership lock (taken first; see the module docstring): a caller holds it to
        read a consistent view of a group (ConsumerGroupDescribe)."""
        return self.context.mlock

    @property
    def consumer_assignors(self) -> list[str]:
        return self.consumer.assignors

    @property
    def retention_ms(self) -> int:
        return self.config.offsets_retention_ms

    # --- lifecycle ---

    def startup(self) -> None:
        """Load the cache from ``__consumer_offsets`` and schedule offset expiration."""
        results = self.runtime.startup(self._replay)
        for result in results:
            for producer_id, records in result.open_transactions.items():
                self.txn_offsets.restore(producer_id, records)
        if results:
            log.info("loaded %d records of %d groups from %s", sum(r.applied for r in results), len(self.groups),
                     OFFSETS_TOPIC)
        self.runtime.timer.schedule_periodic("delete-expired-group-metadata", self.delete_expired_offsets,
                                             self.config.offsets_retention_check_interval_ms)
        with self.mlock:
            self.classic.resume()
            self.consumer.resume()
        self._started = True

    def shutdown(self) -> None:
        """Answer the waiting JoinGroup / SyncGroup requests (NOT_COORDINATOR) and stop the
        timers; offsets stay served. Idempotent."""
        self.classic.close()
        self.consumer.close()
        self.share.close()
        self.runtime.shutdown()
        self._started = False

    # --- the topic ---

    def partition_for(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    def ensure_offsets_topic(self) -> Any:
        """The ``TopicInfo`` of ``__consumer_offsets``, created if missing (Metadata's
        auto-creation of the name also lands here, so it always gets these configs)."""
        return self.runtime.topic.ensure()

    # --- groups ---

    def group(self, group_id: str) -> Group | None:
        """The group (classic or consumer), None when it does not exist."""
        return self.groups.get(group_id)

    def list_groups(self) -> list[GroupSummary]:
        with self.mlock:
            return sorted((g.summary(members=False) for g in self.groups.values()), key=lambda s: s.group_id)

    def describe_group(self, group_id: str) -> GroupSummary:
        """The group's summary; a group that does not exist is ``Dead`` (Kafka's answer), and
        so is a consumer group (Kafka 4 up to DescribeGroups v5: it only describes classic
        groups; ConsumerGroupDescribe describes the others)."""
        if not group_id:
            raise ApiError(ErrorCode.INVALID_GROUP_ID, "the group id is empty")
        with self.mlock:
            group = self.groups.get(group_id)
            if group is None or group.group_type != GROUP_TYPE_CLASSIC:
                return GroupSummary(group_id, str(STATE_DEAD), "", "")
            return group.summary()

    def delete_group(self, group_id: str) -> None:
        """Delete the group and its offsets (tombstones); ApiError: INVALID_GROUP_ID,
        GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or the append's error."""
        if not group_id:
            raise ApiError(ErrorCode.INVALID_GROUP_ID, "the group id is empty")
        p = self.partition_for(group_id)
        with self.mlock, self.runtime.partition_lock(p):
            group = self.groups.get(group_id)
            if group is None:
                raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist")
            if not group.is_empty():
                raise ApiError(ErrorCode.NON_EMPTY_GROUP, f"group {group_id} has members")
            offsets = self.offsets.tombstones(group_id)
            records: list[Record] = [*offsets, *group.tombstones()]
            self.runtime.append(p, records)
            self.offsets.forget(group_id)
            self.groups.remove(group_id)
        if isinstance(group, ShareGroup) and self.on_share_group_deleted is not None:
            self.on_share_group_deleted(group_id)
        log.info("deleted group %s and its %d offsets", group_id, len(offsets))

    # --- offsets (the offsets part) ---

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                       offsets: Iterable[OffsetEntry], retention_time_ms: int = -1) -> list[int]:
        """Commit ``offsets`` ((topic, partition, offset, leader_epoch, metadata) in request
        order; topics already checked to exist); returns one error code per entry. For a
        KIP-848 consumer group ``generation_id`` is the member epoch."""
        return self.offsets.commit(group_id, generation_id, member_id, group_instance_id, offsets, retention_time_ms)

    def fetch_offsets(self, group_id: str, tps: Iterable[TopicPartition] | None, member_id: str | None = None,
                      member_epoch: int = -1) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The committed offset of each of ``tps`` (None: not committed), or with ``tps``
        None every committed offset of the group. ApiError(INVALID_GROUP_ID) for "";
        for a KIP-848 consumer group, OffsetFetch v9's member id and epoch are checked
        (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH; epoch -1: no check)."""
        return self.offsets.fetch(group_id, tps, member_id, member_epoch)

    def delete_offsets(self, group_id: str, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """OffsetDelete: tombstones for the committed offsets of ``tps``; one code per
        partition (GROUP_SUBSCRIBED_TO_TOPIC for a topic a member subscribes to). ApiError:
        INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (members of an unknown
        protocol type), or the append's error."""
        return self.offsets.delete(group_id, tps)

    def delete_expired_offsets(self, now_ms: int | None = None) -> int:
        """Remove the offsets past retention (rules in the module docstring); returns how
        many were removed."""
        return self.offsets.delete_expired(now_ms)

    # --- classic groups (the classic part) ---

    def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                   require_known_member_id: bool, client_id: str, client_host: str,
                   rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]]) -> JoinResult:
        return self.classic.join_group(group_id, member_id, group_instance_id, require_known_member_id, client_id,
                                       client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                       protocols)

    def sync_group(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol: str | None,
                   assignments: list[tuple[str, bytes]]) -> SyncResult:
        return self.classic.sync_group(group_id, generation, member_id, group_instance_id, protocol_type, protocol,
                                       assignments)

    def heartbeat(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None) -> int:
        return self.classic.heartbeat(group_id, generation, member_id, group_instance_id)

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[int]:
        return self.classic.leave_group(group_id, leaving)

    # --- KIP-848 consumer groups (the consumer part) ---

    def consumer_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
                                 rack_id: str | None, rebalance_timeout_ms: int,
                                 subscribed_topic_names: list[str] | None, subscribed_topic_regex: str | None,
                                 server_assignor: str | None, owned: Assignment | None,
                                 client_id: str = "", client_host: str = "") -> HeartbeatResult:
        return self.consumer.consumer_group_heartbeat(
            group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms, subscribed_topic_names,
            subscribed_topic_regex, server_assignor, owned, client_id, client_host)

    def describe_consumer_group(self, group_id: str) -> tuple[int, str | None, ConsumerGroup | None]:
        """(error code, message, a consistent view while ``mlock`` is held) for
        ConsumerGroupDescribe."""
        return self.consumer.describe(group_id)

    # --- KIP-932 share groups (the share part) ---

    def share_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                              subscribed_topic_names: list[str] | None, client_id: str = "",
                              client_host: str = "") -> ShareHeartbeatResult:
        return self.share.heartbeat(group_id, member_id, member_epoch, rack_id, subscribed_topic_names, client_id,
                                    client_host)

    def describe_share_group(self, group_id: str) -> tuple[int, str | None, ShareGroup | None]:
        """(error code, message, a consistent view while ``mlock`` is held) for
        ShareGroupDescribe."""
        return self.share.describe(group_id)

    def ensure_share_group(self, group_id: str) -> ShareGroup:
        return self.share.ensure(group_id)

    def is_share_member(self, group_id: str, member_id: str) -> bool:
        return self.share.is_member(group_id, member_id)

    def topic_name_of(self, topic_id: Any) -> str | None:
        return self.consumer.topic_name_of(topic_id)

    # --- loading ---

    def _replay(self, record: CoordinatorRecord) -> bool:
        """Apply one loaded record to the parts (the runtime's loader calls it in log
        order); False when it was skipped."""
        key_bytes, value_bytes = record.key, record.value
        try:
            key = decode_key(key_bytes)
            if isinstance(key, OffsetCommitKey):
                self.offsets.replay(key, None if value_bytes is None else decode_offset_commit_value(value_bytes))
                return True
            if isinstance(key, GroupMetadataKey):
                self.classic.replay(key, None if value_bytes is None else decode_group_metadata_value(value_bytes))
                return True
            ckey = consumer_records.decode_consumer_key(key_bytes) if key_bytes is not None else None
            if ckey is not None:
                self.consumer.replay(ckey, value_bytes)
                return True
            share_group = share_records.decode_key(key_bytes) if key_bytes is not None else None
            if share_group is not None:
                self.share.replay(share_group, value_bytes)
                return True
            log.debug("%s-%d: skipping a record of type %d (not used by this broker)", OFFSETS_TOPIC,
                      record.partition, key.version)
            return False
        except RecordFormatError as exc:
            log.warning("%s-%d: skipping an unreadable record at offset %d: %s", OFFSETS_TOPIC, record.partition,
                        record.offset, exc)
            return False


__all__ = ["GROUP_TYPE_CLASSIC", "GROUP_TYPE_CONSUMER", "GroupCoordinator", "GroupMetadata", "GroupSummary",
           "INTERNAL_TOPICS", "OFFSETS_TOPIC", "OffsetAndMetadata", "STATE_DEAD", "STATE_EMPTY",
           "TRANSACTION_STATE_TOPIC", "java_string_hash", "partition_for"]
