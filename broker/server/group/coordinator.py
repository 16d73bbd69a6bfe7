"""``GroupCoordinator``: Kafka's group coordinator. The groups' committed offsets
and their generations are kept in ``__consumer_offsets``; the classic membership protocol
(JoinGroup / SyncGroup / Heartbeat / LeaveGroup, rebalances, sessions) is the mixed-in
``ClassicMembership`` (``membership.py``), over the ``GroupMetadata`` state machine
(``group.py``); the KIP-848 consumer group protocol (ConsumerGroupHeartbeat, member
epochs, server-side assignment) the mixed-in ``ConsumerMembership``
(``consumer_membership.py``), over ``GroupMetadata.consumer``.

Owns:

* the group cache: group id -> ``GroupMetadata`` (committed offsets, state, generation,
  protocol, members). A group exists while it has offsets, a group record or members.
* the group record: a ``GroupMetadataValue`` (v3, Kafka's layout: generation, protocol,
  leader, each member's subscription and assignment) written when a generation becomes
  Stable (the leader's SyncGroup), when a rebalance ends with no member (Empty, members
  []), and when a static member is replaced; a tombstone when the group is deleted or
  expires. Loaded back at startup: a group with members is Stable with them (each gets
  a full session to heartbeat again, as in Kafka), otherwise Empty.
* its persistence in the compacted internal topic ``__consumer_offsets`` (``OFFSETS_TOPIC_SPEC``,
  through the coordinator runtime, ``broker.server.coordinator``): every commit is
  ONE record batch (all of the request's offsets, all-or-nothing) appended with
  ``AppendOrigin.COORDINATOR`` to partition ``abs(java_hashCode(group_id)) % partitions``,
  keys and values as Kafka writes them (``records.py``), the cache changed only after the
  append returned: a commit is acknowledged once it is in the log, as durable as the
  topic's flush policy makes it (flush.messages / log.flush.interval.messages). A deleted
  offset or group is a tombstone (null value). The topic is created on first write with
  ``offsets.topic.num.partitions`` partitions and Kafka's internal-topic configs
  (cleanup.policy=compact, segment.bytes=offsets.topic.segment.bytes,
  compression.type=producer); when it already exists its own partition count is used, as
  Kafka does, so that a changed setting never moves a group.
* loading: ``startup()`` replays every partition of the topic from its log start offset
  before the broker accepts connections (so COORDINATOR_LOAD_IN_PROGRESS never happens),
  with the runtime's ``CoordinatorLoader`` calling ``_replay`` per record: records apply
  in log order, a tombstone removes, transactional offset commits apply at their COMMIT
  marker and are dropped at ABORT (those still open become pending again,
  ``txn_offsets.TransactionalOffsets.restore``), the KIP-848 consumer group records (key
  types 3-8) rebuild consumer groups (``consumer_membership._replay_consumer``),
  unreadable batches or records and record types this broker does not use (share
  groups) are logged and skipped.
* expiration (``offsets.retention.minutes``, checked every
  ``offsets.retention.check.interval.ms``, a periodic task of the runtime's timer on the
  log manager's scheduler), as Kafka 2.1+
  (KIP-211): an offset committed with an explicit retention (OffsetCommit v2-v4
  ``retention_time_ms``) expires at its expire timestamp; otherwise an offset of a simple
  group expires ``offsets.retention.minutes`` after its commit, and all offsets of a group
  with a protocol type expire that long after the group became empty; in a Stable group
  of the "consumer" protocol (KIP-496) and in a KIP-848 group, the offsets of the topics
  no member subscribes to expire that long after their commit (``_expiration_condition``).
  Expired offsets are removed with tombstones; an Empty group left without offsets
  disappears (its group record too, with a tombstone, at the next check).

Validation of a commit (Kafka's ``ClassicGroup.validateOffsetCommit``): a group that
does not exist accepts generation -1 (a simple consumer, an admin tool; the group is
created) and answers ILLEGAL_GENERATION otherwise; an Empty group accepts generation -1;
a commit naming a member (generation >= 0, a member id or an instance id) gets
UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID (an instance id now owned by another member id)
for a member that is not in the group, ILLEGAL_GENERATION for another generation; an
anonymous commit into a group with members UNKNOWN_MEMBER_ID; then REBALANCE_IN_PROGRESS
while CompletingRebalance (Stable and PreparingRebalance accept). Metadata longer than
``offset.metadata.max.bytes`` gets OFFSET_METADATA_TOO_LARGE for that partition only.
Append failures map as Kafka's ``GroupMetadataManager.storeOffsets``: a missing log or
partition -> COORDINATOR_NOT_AVAILABLE, a storage error -> NOT_COORDINATOR, a batch too
large -> INVALID_COMMIT_OFFSET_SIZE. Empty group ids are refused with INVALID_GROUP_ID.

Offsets of subscribed topics never expire while the group has members.
DeleteGroups answers NON_EMPTY_GROUP for a group with members; OffsetDelete
GROUP_SUBSCRIBED_TO_TOPIC for a partition of a topic a member subscribes to ("consumer"
protocol), NON_EMPTY_GROUP when members use another protocol type.

Thread-safety: handlers call concurrently. ``_mlock`` (an RLock) serialises every change
of membership state and is taken first; one lock per ``__consumer_offsets`` partition then
serialises the append-then-cache-update of the groups hashing to it (so the cache always
ends in log order; ``runtime.partition_lock``); ``_lock`` guards the cache's structure for
short moments. Loading runs before any request; expiration runs on the log manager's
scheduler thread and the membership timers on the coordinator's own
(``group-coordinator-timer``), both under the same locks. ``shutdown()`` answers the
JoinGroup / SyncGroup requests still waiting.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
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
from broker.server.group import consumer_records
from broker.server.group.consumer_membership import GROUP_TYPE_CLASSIC, GROUP_TYPE_CONSUMER, ConsumerMembership
from broker.server.group.group import (
    STATE_COMPLETING_REBALANCE,
    STATE_DEAD,
    STATE_EMPTY,
    STATE_STABLE,
    GroupMetadata,
    OffsetAndMetadata,
)
from broker.server.group.member import Member
from broker.server.group.membership import ClassicMembership
from broker.server.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from broker.server.group.txn_offsets import TransactionalOffsets

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


def _utf16_length(s: str) -> int:
    """Java's ``String.length()``: what offset.metadata.max.bytes is compared with."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


@dataclass(frozen=True)
class GroupSummary:
    group_id: str
    state: str  # Kafka's name, a plain str (what DescribeGroups / ListGroups send)
    protocol_type: str
    protocol: str
    members: tuple = ()  # (member_id, group_instance_id, client_id, client_host, metadata, assignment)
    group_type: str = GROUP_TYPE_CLASSIC  # "classic" or "consumer" (ListGroups v5)


class GroupCoordinator(ClassicMembership, ConsumerMembership):
    """See the module docstring. ``topics`` is the broker's ``TopicManager``; ``config`` the
    parsed server config; ``on_append((topic, partition))`` wakes fetches waiting on it."""

    def __init__(self, topics: Any, config: Mapping[str, Any], *, time: Time = SYSTEM_TIME,
                 scheduler: Any = None, on_append: Callable[[tuple[str, int]], None] | None = None) -> None:
        self.topics = topics
        self.time = time
        self.runtime = CoordinatorRuntime(OFFSETS_TOPIC_SPEC, topics, config, append_errors=_APPEND_ERRORS,
                                          time=time, scheduler=scheduler, on_append=on_append,
                                          timer_thread="group-coordinator-timer")
        self.retention_ms = int(config.get("offsets.retention.minutes", 10080)) * 60_000
        self.retention_check_interval_ms = int(config.get("offsets.retention.check.interval.ms", 600000))
        self.metadata_max_bytes = int(config.get("offset.metadata.max.bytes", 4096))
        self._groups: dict[str, GroupMetadata] = {}
        self._lock = threading.Lock()
        self._mlock = threading.RLock()  # membership; taken before the partition locks
        self._timer = self.runtime.timer  # the membership timers (schedule_once)
        self.txn_offsets = TransactionalOffsets(self)
        self._init_membership(config)
        self._init_consumer(config)
        self._started = False

    # --- lifecycle ---

    def startup(self) -> None:
        """Load the cache from ``__consumer_offsets`` and schedule offset expiration."""
        results = self.runtime.startup(self._replay)
        for result in results:
            for producer_id, records in result.open_transactions.items():
                self.txn_offsets.restore(producer_id, records)
        if results:
            log.info("loaded %d records of %d groups from %s", sum(r.applied for r in results), len(self._groups),
                     OFFSETS_TOPIC)
        self.runtime.timer.schedule_periodic("delete-expired-group-metadata", self.delete_expired_offsets,
                                             self.retention_check_interval_ms)
        with self._mlock:
            self._resume_loaded_members()
            self._resume_consumer_members()
        self._started = True

    def shutdown(self) -> None:
        """Answer the waiting JoinGroup / SyncGroup requests (NOT_COORDINATOR) and stop the
        timers; offsets stay served. Idempotent."""
        self._close_membership()
        self._close_consumer_membership()
        self.runtime.shutdown()
        self._started = False

    # --- the topic ---

    def partition_for(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    def ensure_offsets_topic(self) -> Any:
        """The ``TopicInfo`` of ``__consumer_offsets``, created if missing (Metadata's
        auto-creation of the name also lands here, so it always gets these configs)."""
        return self.runtime.topic.ensure()

    # --- commits ---

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                       offsets: Iterable[tuple[str, int, int, int, str | None]],
                       retention_time_ms: int = -1) -> list[int]:
        """Commit ``offsets`` ((topic, partition, offset, leader_epoch, metadata) in request
        order; topics already checked to exist); returns one error code per entry."""
        entries = list(offsets)
        if not group_id:
            return [ErrorCode.INVALID_GROUP_ID] * len(entries)
        p = self.partition_for(group_id)
        with self._mlock, self.runtime.partition_lock(p):
            group = self._groups.get(group_id)
            if group is not None and group.consumer is not None:
                code = self.validate_consumer_commit(group.consumer, member_id, generation_id)
            else:
                code = self._validate_commit(group, generation_id, member_id, group_instance_id)
            if code != ErrorCode.NONE:
                return [code] * len(entries)
            now = self.time.milliseconds()
            expire = now + retention_time_ms if retention_time_ms is not None and retention_time_ms >= 0 else -1
            results, records, accepted = self._offset_entries(group_id, entries, now, expire)
            if not records:
                return results
            try:
                self.runtime.append(p, records, timestamp=now)
            except ApiError as exc:
                log.info("offset commit of group %s failed: %s", group_id, exc)
                return [exc.code if r == ErrorCode.NONE else r for r in results]
            with self._lock:
                group = self._groups.get(group_id)
                if group is None:
                    group = self._groups[group_id] = GroupMetadata(group_id)
                for tp, om in accepted:
                    group.offsets[tp] = om
        return results

    def _offset_entries(self, group_id: str, entries: list[tuple[str, int, int, int, str | None]], now: int,
                        expire: int) -> tuple[list[int], list[tuple[bytes, bytes]],
                                              list[tuple[tuple[str, int], OffsetAndMetadata]]]:
        """The records of a commit's entries (OffsetCommit and TxnOffsetCommit): one code
        per entry (OFFSET_METADATA_TOO_LARGE past ``offset.metadata.max.bytes``), the
        (key, value) records of the accepted ones, and their ((topic, partition), offset)."""
        results: list[int] = []
        records: list[tuple[bytes, bytes]] = []
        accepted: list[tuple[tuple[str, int], OffsetAndMetadata]] = []
        for topic, partition, offset, leader_epoch, metadata in entries:
            metadata = metadata or ""
            if _utf16_length(metadata) > self.metadata_max_bytes:
                results.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            om = OffsetAndMetadata(offset, leader_epoch if leader_epoch >= 0 else -1, metadata, now, expire)
            records.append((encode_key(OffsetCommitKey(group_id, topic, partition)),
                            encode_offset_commit_value(OffsetCommitValue(
                                om.offset, om.metadata, om.commit_timestamp, om.leader_epoch, om.expire_timestamp))))
            accepted.append(((topic, partition), om))
            results.append(ErrorCode.NONE)
        return results, records, accepted

    @staticmethod
    def _validate_commit(group: GroupMetadata | None, generation_id: int, member_id: str,
                         group_instance_id: str | None) -> int:
        """Kafka's ``ClassicGroup.validateOffsetCommit`` (and ``validateMember``)."""
        if group is None:
            # a simple consumer or an admin tool creates the group; a generation from elsewhere
            return ErrorCode.NONE if generation_id < 0 else ErrorCode.ILLEGAL_GENERATION
        if generation_id < 0 and group.state == STATE_EMPTY:
            return ErrorCode.NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            if group_instance_id is not None:
                current = group.static_member_id(group_instance_id)
                if current is None:
                    return ErrorCode.UNKNOWN_MEMBER_ID
                if current != member_id:
                    return ErrorCode.FENCED_INSTANCE_ID
            if member_id not in group.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if generation_id != group.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif group.state != STATE_EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit into a group with members
        if group.state == STATE_COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # --- fetches and descriptions ---

    def fetch_offsets(self, group_id: str, tps: Iterable[tuple[str, int]] | None, member_id: str | None = None,
                      member_epoch: int = -1) -> dict[tuple[str, int], OffsetAndMetadata | None]:
        """The committed offset of each of ``tps`` (None: not committed), or with ``tps``
        None every committed offset of the group. ApiError(INVALID_GROUP_ID) for "";
        for a KIP-848 consumer group, OffsetFetch v9's member id and epoch are checked
        (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH; epoch -1: no check)."""
        if not group_id:
            raise ApiError(ErrorCode.INVALID_GROUP_ID, "the group id is empty")
        if member_id is not None:  # OffsetFetch v9 (classic groups ignore the member, as Kafka)
            with self._mlock:
                group = self._groups.get(group_id)
                if group is not None and group.consumer is not None:
                    code = self.validate_consumer_commit(group.consumer, member_id, member_epoch, for_fetch=True)
                    if code != ErrorCode.NONE:
                        raise ApiError(code, f"member {member_id!r} epoch {member_epoch}")
        with self._lock:
            group = self._groups.get(group_id)
            committed = dict(group.offsets) if group is not None else {}
        if tps is None:
            return dict(sorted(committed.items()))
        return {tp: committed.get(tp) for tp in tps}

    def list_groups(self) -> list[GroupSummary]:
        with self._mlock:
            return sorted((self._summary(g, members=False) for g in self._groups.values()),
                          key=lambda s: s.group_id)

    def describe_group(self, group_id: str) -> GroupSummary:
        """The group's summary; a group that does not exist is ``Dead`` (Kafka's answer), and
        so is a consumer group (Kafka 4 up to DescribeGroups v5: it only describes classic
        groups; ConsumerGroupDescribe describes the others)."""
        if not group_id:
            raise ApiError(ErrorCode.INVALID_GROUP_ID, "the group id is empty")
        with self._mlock:
            group = self._groups.get(group_id)
            if group is None or group.consumer is not None:
                return GroupSummary(group_id, str(STATE_DEAD), "", "")
            return self._summary(group)

    @staticmethod
    def _summary(group: GroupMetadata, members: bool = True) -> GroupSummary:
        """Kafka's ``GroupMetadata.summary``: the protocol name, the members' metadata of the
        selected protocol and their assignments only when the group is Stable."""
        if group.consumer is not None:
            return GroupSummary(group.group_id, group.consumer.state(), group.protocol_type or "consumer", "",
                                group_type=GROUP_TYPE_CONSUMER)
        stable = group.state == STATE_STABLE and group.protocol is not None
        listed = ()
        if members:
            listed = tuple(
                (m.member_id, m.group_instance_id, m.client_id, m.client_host,
                 m.metadata(group.protocol) if stable else b"", m.assignment if stable else b"")
                for m in group.members.values())
        return GroupSummary(group.group_id, str(group.state), group.protocol_type or "",
                            group.protocol if stable else "", listed)

    # --- deletion and expiration ---

    def delete_group(self, group_id: str) -> None:
        """Delete the group and its offsets (tombstones); ApiError: INVALID_GROUP_ID,
        GROUP_ID_NOT_FOUND, or the append's error."""
        if not group_id:
            raise ApiError(ErrorCode.INVALID_GROUP_ID, "the group id is empty")
        p = self.partition_for(group_id)
        with self._mlock, self.runtime.partition_lock(p):
            group = self._groups.get(group_id)
            if group is None:
                raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist")
            if group.state != STATE_EMPTY or group.members or group.pending_members or \
                    (group.consumer is not None and group.consumer.members):
                raise ApiError(ErrorCode.NON_EMPTY_GROUP, f"group {group_id} has members")
            records = [(encode_key(OffsetCommitKey(group_id, t, part)), None) for t, part in sorted(group.offsets)]
            if group.consumer is not None:
                records.extend(self._group_tombstones(group.consumer))
            else:
                records.append((encode_key(GroupMetadataKey(group_id)), None))
            self.runtime.append(p, records)
            with self._lock:
                self._groups.pop(group_id, None)
        log.info("deleted group %s and its %d offsets", group_id, len(records) - 1)

    def delete_offsets(self, group_id: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """OffsetDelete: tombstones for the committed offsets of ``tps``; one code per
        partition (GROUP_SUBSCRIBED_TO_TOPIC for a topic a member subscribes to). ApiError:
        INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (members of an unknown
        protocol type), or the append's error."""
        if not group_id:
            raise ApiError(ErrorCode.INVALID_GROUP_ID, "the group id is empty")
        p = self.partition_for(group_id)
        with self._mlock, self.runtime.partition_lock(p):
            group = self._groups.get(group_id)
            if group is None:
                raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist")
            subscribed: set[str] = set()
            if group.consumer is not None and group.consumer.members:
                subscribed = group.consumer.subscribed_topic_names()
            elif group.members:
                topics = group.subscribed_topics()
                if topics is None:
                    raise ApiError(ErrorCode.NON_EMPTY_GROUP, f"group {group_id} has members")
                subscribed = topics
            codes: dict[tuple[str, int], int] = {}
            removed = []
            for tp in tps:
                if tp[0] in subscribed:
                    codes[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                    continue
                codes[tp] = ErrorCode.NONE
                if tp in group.offsets:
                    removed.append(tp)
            if removed:
                self.runtime.append(p, [(encode_key(OffsetCommitKey(group_id, t, part)), None) for t, part in removed])
                with self._lock:
                    for tp in removed:
                        group.offsets.pop(tp, None)
            return codes

    # --- group records ---

    def _store_group(self, group: GroupMetadata) -> None:
        """Write the group's GroupMetadataValue (its generation and, when it has members,
        their subscriptions and assignments). Under ``_mlock``; raises ApiError."""
        members = tuple(
            MemberMetadata(m.member_id, m.client_id, m.client_host, m.session_timeout_ms, m.rebalance_timeout_ms,
                           m.group_instance_id, m.metadata(group.protocol) if group.protocol else b"",
                           m.assignment)
            for m in group.members.values())
        value = GroupMetadataValue(group.protocol_type or "", group.generation, group.protocol,
                                   group.leader if group.members else None,
                                   group.current_state_timestamp, members)
        p = self.partition_for(group.group_id)
        with self.runtime.partition_lock(p):
            self.runtime.append(p, [(encode_key(GroupMetadataKey(group.group_id)), encode_group_metadata_value(value))])
        group.has_metadata_record = True

    @staticmethod
    def _restore_group(group: GroupMetadata, gm: GroupMetadataValue) -> None:
        """Apply a loaded GroupMetadataValue: Stable with its members, or Empty."""
        group.protocol_type = gm.protocol_type or None
        group.generation = gm.generation
        group.protocol = gm.protocol
        group.current_state_timestamp = gm.current_state_timestamp
        group.has_metadata_record = True
        group.members.clear()
        group.static_members.clear()
        group.leader = None
        for mm in gm.members:
            group.add(Member(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                             mm.rebalance_timeout, mm.session_timeout, gm.protocol_type,
                             [(gm.protocol or "", bytes(mm.subscription))], bytes(mm.assignment), is_new=False))
        if gm.leader in group.members:
            group.leader = gm.leader
        group.restore_state(STATE_STABLE if group.members and gm.protocol else STATE_EMPTY)
        if group.state == STATE_EMPTY:
            group.members.clear()
            group.static_members.clear()
            group.leader = None

    def delete_expired_offsets(self, now_ms: int | None = None) -> int:
        """Remove the offsets past retention (rules in the module docstring); returns how
        many were removed."""
        now = self.time.milliseconds() if now_ms is None else now_ms
        with self._lock:
            group_ids = list(self._groups)
        removed = 0
        for group_id in group_ids:
            p = self.partition_for(group_id)
            with self._mlock, self.runtime.partition_lock(p):
                group = self._groups.get(group_id)
                condition = self._expiration_condition(group) if group is not None else None
                if condition is None:
                    continue  # a rebalancing group, or one whose subscriptions are unknown: nothing expires
                since_empty, subscribed = condition
                expired = [tp for tp, om in group.offsets.items()
                           if tp[0] not in subscribed and self._expired(group, om, now, since_empty)]
                has_record = group.has_metadata_record or (group.consumer is not None and group.consumer.has_records)
                if not expired and (group.offsets or not has_record or group.join_task is not None):
                    continue  # (an Empty group without offsets goes, as Kafka's cleanupGroupMetadata)
                records: list[tuple[bytes, bytes | None]] = [
                    (encode_key(OffsetCommitKey(group_id, t, part)), None) for t, part in sorted(expired)]
                dead = len(expired) == len(group.offsets) and not group.members and not group.pending_members \
                    and (group.consumer is None or not group.consumer.members)
                if dead and group.has_metadata_record and group.generation > 0:
                    records.append((encode_key(GroupMetadataKey(group_id)), None))
                if dead and group.consumer is not None and group.consumer.has_records:
                    records.extend(self._group_tombstones(group.consumer))
                try:
                    if records:
                        self.runtime.append(p, records)
                except ApiError as exc:
                    log.warning("expiring offsets of group %s failed: %s", group_id, exc)
                    continue
                with self._lock:
                    for tp in expired:
                        group.offsets.pop(tp, None)
                    if dead:
                        self._groups.pop(group_id, None)
                removed += len(expired)
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    @staticmethod
    def _expiration_condition(group: GroupMetadata) -> tuple[bool, set[str]] | None:
        """Kafka's offsetExpirationCondition and isSubscribedToTopic: (whether retention
        counts from the group becoming empty rather than from each commit, the topics whose
        offsets never expire), or None when nothing may expire now.

        * a classic group without members: every offset, counted from the group becoming
          Empty (from each commit for a simple group);
        * a Stable classic group of the "consumer" protocol: the offsets of the topics no
          member subscribes to, counted from their commit (KIP-496);
        * a KIP-848 group: the offsets of the topics no member subscribes to (all of them
          once it has no members), counted from their commit;
        * any other group (rebalancing, another protocol type): none."""
        if group.consumer is not None and (group.consumer.members or not group.members):
            return False, group.consumer.subscribed_topic_names()
        if group.state == STATE_EMPTY and not group.members and not group.pending_members:
            return True, set()
        if group.state == STATE_STABLE:
            subscribed = group.subscribed_topics()
            if subscribed is not None:
                return False, subscribed
        return None

    def _expired(self, group: GroupMetadata, om: OffsetAndMetadata, now: int, since_empty: bool = True) -> bool:
        if om.expire_timestamp >= 0:
            return now >= om.expire_timestamp
        if since_empty and group.protocol_type and group.current_state_timestamp >= 0:
            base = group.current_state_timestamp  # since the group became empty
        else:
            base = om.commit_timestamp
        return now - base >= self.retention_ms

    # --- loading ---

    def _replay(self, record: CoordinatorRecord) -> bool:
        """Apply one loaded record to the cache (the runtime's loader calls it in log
        order); False when it was skipped."""
        key_bytes, value_bytes = record.key, record.value
        try:
            key = decode_key(key_bytes)
            if isinstance(key, OffsetCommitKey):
                value = None if value_bytes is None else decode_offset_commit_value(value_bytes)
                group = self._groups.get(key.group)
                tp = (key.topic, key.partition)
                if value is None:
                    if group is not None:
                        group.offsets.pop(tp, None)
                        if group.is_empty_shell():
                            del self._groups[key.group]
                    return True
                if group is None:
                    group = self._groups[key.group] = GroupMetadata(key.group)
                group.offsets[tp] = OffsetAndMetadata(value.offset, value.leader_epoch, value.metadata,
                                                      value.commit_timestamp, value.expire_timestamp)
                return True
            if isinstance(key, GroupMetadataKey):
                if value_bytes is None:
                    group = self._groups.get(key.group)
                    if group is not None:
                        group.has_metadata_record = False
                        group.protocol_type, group.generation = None, 0
                        group.members.clear()
                        group.static_members.clear()
                        group.restore_state(STATE_EMPTY)
                        group.protocol, group.leader = None, None
                        if group.is_empty_shell():
                            del self._groups[key.group]
                    return True
                gm: GroupMetadataValue = decode_group_metadata_value(value_bytes)
                group = self._groups.setdefault(key.group, GroupMetadata(key.group))
                self._restore_group(group, gm)
                return True
            ckey = consumer_records.decode_consumer_key(key_bytes)
            if ckey is not None:
                self._replay_consumer(ckey, value_bytes)
                return True
            log.debug("%s-%d: skipping a record of type %d (not used by this broker)", OFFSETS_TOPIC,
                      record.partition, key.version)
            return False
        except RecordFormatError as exc:
            log.warning("%s-%d: skipping an unreadable record at offset %d: %s", OFFSETS_TOPIC, record.partition,
                        record.offset, exc)
            return False


__all__ = ["GroupCoordinator", "GroupMetadata", "GroupSummary", "INTERNAL_TOPICS", "OFFSETS_TOPIC",
           "OffsetAndMetadata", "STATE_DEAD", "STATE_EMPTY", "TRANSACTION_STATE_TOPIC", "java_string_hash",
           "partition_for"]
