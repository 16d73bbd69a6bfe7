"""The consumer groups part of the group coordinator: the KIP-848 consumer group protocol
(ConsumerGroupHeartbeat, ConsumerGroupDescribe), the session and revocation timers, and
the consumer-group records of ``__consumer_offsets`` (Kafka's
``GroupMetadataManager.consumerGroupHeartbeat``).

Owns ``ConsumerGroups``: it receives the ``GroupContext`` (configuration, runtime, clock,
topics, membership lock, group map) and keeps only its own ``closed`` flag; the groups it
serves are the ``ConsumerGroup`` entries of the group map (``consumer_group.py``: members,
epochs, target assignment, reconciliation; the member epoch checks of OffsetCommit /
OffsetFetch are ``ConsumerGroup.validate_offset_commit`` / ``validate_offset_fetch``,
reached through the ``Group`` protocol). A group id is either classic or consumer: a ConsumerGroupHeartbeat
for a classic group with members gets GROUP_ID_NOT_FOUND, a JoinGroup for a consumer
group with members INCONSISTENT_GROUP_PROTOCOL; an EMPTY group of either kind is
converted on the first request of the other protocol (its offsets stay). Online
migration of a group with live members is not done.

Heartbeat (one request, under ``GroupContext.mlock``):

1. validation (INVALID_REQUEST): group id, member epoch >= -2, a member id when epoch != 0,
   on join (epoch 0) a rebalance timeout, a subscription (names or regex) and no owned
   partitions; an instance id with epoch -2. An unknown ``ServerAssignor`` ->
   UNSUPPORTED_ASSIGNOR; a regex Python's ``re`` refuses -> INVALID_REGULAR_EXPRESSION
   (Kafka compiles RE2/J; the common syntax is the same).
2. leave: -1 removes the member (its records become tombstones) and bumps the group
   epoch; -2 (static member) keeps it with epoch -2 and its assignment until its session
   expires or its instance id comes back (it then takes the assignment over).
3. join (epoch 0): an empty member id gets a fresh one (Kafka 4's v0 behaviour; clients on
   v1 choose their own, accepted as is); GROUP_MAX_SIZE_REACHED past
   ``group.consumer.max.size``; an instance id held by an active member
   UNRELEASED_INSTANCE_ID. A known member id joining again (a lost response) keeps its
   epoch and assignment, as in Kafka.
4. otherwise the member must exist (UNKNOWN_MEMBER_ID; FENCED_INSTANCE_ID when the
   instance id belongs to another member id) and send its epoch: newer than the member's
   FENCED_MEMBER_EPOCH; older FENCED_MEMBER_EPOCH too unless it is the previous epoch
   and the owned partitions are a subset of the assignment (the member missed a
   response).
5. subscription / assignor changes, new members and changed partition counts or topic
   ids of the subscribed topics (looked up in the topic manager at each heartbeat) bump
   the group epoch. Regexes are resolved at the start of each heartbeat (against the
   topics existing then); a regex first sent in a heartbeat is resolved at the group's
   next one, so its topics are assigned one heartbeat later, like Kafka's asynchronous
   resolution (librdkafka's tests expect literal topics first, matched ones after).
   The target assignment is then recomputed at once with the
   ``group.consumer.assignors`` assignor the members ask for (default: the first).
6. the member reconciles (``consumer_group.reconcile``); entering revocation starts a
   rebalance-timeout timer that removes the member if it never acknowledges.
7. the response carries the assignment when the member joined, when its assignment
   changed, or when the owned partitions it sent differ from it.

Sessions: ``group.consumer.session.timeout.ms`` (45 s) after its last heartbeat a member is
removed (fenced) and the group epoch bumped; heartbeats are asked every
``group.consumer.heartbeat.interval.ms`` (5 s).

Persistence: the records of what changed (group epoch, subscribed-topic metadata, target
assignment, member metadata, current member assignment) are appended as ONE batch after
the in-memory change (an append failure is logged and answered with its error code;
the cache then runs ahead of the log until the next successful write, as the next
heartbeat rewrites the member's records). Replay at startup rebuilds groups, epochs and
assignments; members get a full session to heartbeat again.

Thread-safety: every method runs under ``GroupContext.mlock`` (timers too); appends also
take the group's partition lock (``GroupContext.append``), after ``mlock``.
"""

from __future__ import annotations

import base64
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any

from broker.log.scheduler import ScheduledTask
from broker.protocol import ErrorCode
from broker.server.errors import ApiError
from broker.server.group import assignors as assignor_impl
from broker.server.group import consumer_records as cr
from broker.server.group.consumer_group import (
    CONSUMER_PROTOCOL_TYPE,
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    MEMBER_UNREVOKED_PARTITIONS,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    compile_regex,
    member_tombstones,
    reconcile,
)
from broker.server.group.context import GroupContext
from broker.server.group.protocol import GROUP_TYPE_CLASSIC, GROUP_TYPE_CONSUMER, Record

log = logging.getLogger(__name__)

Records = list[Record]


def new_consumer_member_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 22 url-safe base64 characters."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass
class HeartbeatResult:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


class ConsumerGroups:
    """The consumer groups part (see the module docstring)."""

    def __init__(self, ctx: GroupContext) -> None:
        self._ctx = ctx
        self._closed = False
        self._heartbeat_interval_ms = ctx.config.consumer_heartbeat_interval_ms
        self._session_timeout_ms = ctx.config.consumer_session_timeout_ms
        self.assignors = list(ctx.config.consumer_assignors)
        for n in self.assignors:
            if n not in assignor_impl.ASSIGNORS:
                raise ValueError(f"group.consumer.assignors: unknown assignor {n!r} (known: uniform, range)")

    # --- ConsumerGroupHeartbeat ---

    def consumer_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
                                 rack_id: str | None, rebalance_timeout_ms: int,
                                 subscribed_topic_names: list[str] | None, subscribed_topic_regex: str | None,
                                 server_assignor: str | None, owned: Assignment | None,
                                 client_id: str = "", client_host: str = "") -> HeartbeatResult:
        invalid = self._invalid_heartbeat(group_id, member_id, member_epoch, instance_id, rebalance_timeout_ms,
                                          subscribed_topic_names, subscribed_topic_regex, owned)
        if invalid:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, invalid)
        if server_assignor is not None and server_assignor not in self.assignors:
            return HeartbeatResult(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                   f"ServerAssignor {server_assignor} is not supported. Supported assignors: "
                                   f"{', '.join(self.assignors)}.")
        if subscribed_topic_regex:
            try:
                compile_regex(subscribed_topic_regex)
            except re.error as exc:
                return HeartbeatResult(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                       f"SubscribedTopicRegex {subscribed_topic_regex!r} is invalid: {exc}")
        with self._ctx.mlock:
            if self._closed:
                return HeartbeatResult(ErrorCode.NOT_COORDINATOR)
            try:
                cg = self._consumer_group_for(group_id, create=member_epoch == 0)
            except ApiError as exc:
                return HeartbeatResult(exc.code, str(exc))
            records: Records = []
            if member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
                result = self._consumer_leave(cg, member_id, member_epoch, instance_id, records)
            else:
                result = self._consumer_heartbeat(
                    cg, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms,
                    subscribed_topic_names, subscribed_topic_regex, server_assignor, owned, client_id,
                    client_host, records)
            if records:
                try:
                    self._ctx.append(group_id, records)
                    cg.has_records = True
                except ApiError as exc:
                    log.warning("group %s: writing the consumer group records failed: %s", group_id, exc)
                    return HeartbeatResult(exc.code, str(exc))
            self._ctx.groups.drop_if_unused(cg)
            return result

    @staticmethod
    def _invalid_heartbeat(group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
                           rebalance_timeout_ms: int, names: list[str] | None, regex: str | None,
                           owned: Assignment | None) -> str | None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        if not group_id:
            return "GroupId can't be empty."
        if member_epoch < LEAVE_STATIC_EPOCH:
            return f"MemberEpoch is invalid: {member_epoch}."
        if member_epoch != 0 and not member_id:
            return "MemberId can't be empty."
        if member_epoch == 0:
            if rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request."
            if owned:
                return "TopicPartitions must be empty when (re-)joining."
            if names is None and regex is None:
                return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        if member_epoch == LEAVE_STATIC_EPOCH and instance_id is None:
            return "InstanceId can't be null."
        return None

    def _consumer_group_for(self, group_id: str, create: bool) -> ConsumerGroup:
        cg = self._ctx.groups.consumer(group_id)
        if cg is not None:
            return cg
        group = self._ctx.groups.get(group_id)  # None, or a classic group
        if group is not None and not group.is_empty():
            raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not create:
            raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        if group is not None and group.has_records:  # an empty classic group becomes a consumer group
            self._ctx.append(group_id, group.tombstones())
            log.info("group %s: the empty classic group is converted to a consumer group", group_id)
        cg = ConsumerGroup(group_id)
        self._ctx.groups.put(cg)
        return cg

    def _heartbeat_result(self, member: ConsumerGroupMember, assignment: Assignment | None = None,
                          epoch: int | None = None) -> HeartbeatResult:
        return HeartbeatResult(ErrorCode.NONE, None, member.member_id,
                               member.member_epoch if epoch is None else epoch,
                               self._heartbeat_interval_ms, assignment)

    def _consumer_leave(self, cg: ConsumerGroup, member_id: str, epoch: int, instance_id: str | None,
                        records: Records) -> HeartbeatResult:
        if instance_id is not None:
            current = cg.static_members.get(instance_id)
            if current is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                       f"Instance id {instance_id} is unknown.")
            if current != member_id:
                return HeartbeatResult(ErrorCode.FENCED_INSTANCE_ID,
                                       f"Instance id {instance_id} belongs to another member.")
        member = cg.members.get(member_id)
        if member is None:
            return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group.")
        if epoch == LEAVE_STATIC_EPOCH:
            log.info("group %s: static member %s (%s) leaves temporarily", cg.group_id, member_id, instance_id)
            member.previous_member_epoch, member.member_epoch = member.member_epoch, LEAVE_STATIC_EPOCH
            self._cancel_revocation(member)
            records.extend(self._member_assignment_records(cg, member))
            return HeartbeatResult(ErrorCode.NONE, None, member_id, LEAVE_STATIC_EPOCH,
                                   self._heartbeat_interval_ms)
        log.info("group %s: member %s leaves", cg.group_id, member_id)
        self._remove_consumer_member(cg, member, records)
        return HeartbeatResult(ErrorCode.NONE, None, member_id, LEAVE_EPOCH, self._heartbeat_interval_ms)

    def _consumer_heartbeat(self, cg: ConsumerGroup, member_id: str, member_epoch: int, instance_id: str | None,
                            rack_id: str | None, rebalance_timeout_ms: int, names: list[str] | None,
                            regex: str | None, server_assignor: str | None, owned: Assignment | None,
                            client_id: str, client_host: str, records: Records) -> HeartbeatResult:
        bump = False
        joined = member_epoch == 0
        cg.resolve_regexes(self._ctx.topics.topics())  # those known before this request
        if joined:
            member_id = member_id or new_consumer_member_id()
            member: ConsumerGroupMember | None = cg.members.get(member_id)
            replaced = False
            if instance_id is not None:
                current_id = cg.static_members.get(instance_id)
                current = cg.members.get(current_id) if current_id is not None else None
                if current is not None and current.member_id != member_id:
                    if current.member_epoch != LEAVE_STATIC_EPOCH:
                        return HeartbeatResult(ErrorCode.UNRELEASED_INSTANCE_ID,
                                               f"Static member {current.member_id} with instance id {instance_id} "
                                               "is not released yet.")
                    member = self._replace_static_consumer_member(cg, current, member_id, records)
                    replaced = True
            if member is None:
                max_size = self._ctx.config.consumer_max_size
                if len(cg.members) >= max_size:
                    return HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                           f"The consumer group has reached its maximum capacity of "
                                           f"{max_size} members.")
                member = ConsumerGroupMember(member_id, instance_id)
                cg.add_member(member)
                bump = True
                log.info("group %s: member %s joins (instance id %s)", cg.group_id, member_id, instance_id)
            elif not replaced:
                # a known member joining again (its first response was lost): as Kafka, it
                # keeps its epoch and assignment, and gets them in the response
                log.info("group %s: member %s joins again", cg.group_id, member_id)
        else:
            member = cg.members.get(member_id)
            if instance_id is not None and cg.static_members.get(instance_id) not in (None, member_id):
                return HeartbeatResult(ErrorCode.FENCED_INSTANCE_ID,
                                       f"Instance id {instance_id} belongs to another member.")
            if member is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                       f"Member {member_id} is not a member of the group.")
            if member_epoch != member.member_epoch:
                if member_epoch > member.member_epoch or member_epoch != member.previous_member_epoch or \
                        owned is None or not _subset(owned, member.assigned):
                    which = "greater" if member_epoch > member.member_epoch else "smaller"
                    return HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH,
                                           f"The consumer group member has a {which} member epoch ({member_epoch}) "
                                           f"than the one known by the group coordinator ({member.member_epoch}). "
                                           "The member must abandon all its partitions and rejoin.")
        # member metadata
        before = (member.rack_id, member.client_id, member.client_host, member.subscribed_topic_names,
                  member.subscribed_topic_regex, member.server_assignor, member.rebalance_timeout_ms)
        if rack_id is not None:
            member.rack_id = rack_id or None
        member.client_id, member.client_host = client_id, client_host
        if rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if names is not None:
            if tuple(sorted(set(names))) != member.subscribed_topic_names:
                member.subscribed_topic_names = tuple(sorted(set(names)))
                bump = True
        if regex is not None:
            if (regex or None) != member.subscribed_topic_regex:
                member.subscribed_topic_regex = regex or None
                bump = True
        if server_assignor is not None and server_assignor != member.server_assignor:
            member.server_assignor = server_assignor or None
            bump = True
        after = (member.rack_id, member.client_id, member.client_host, member.subscribed_topic_names,
                 member.subscribed_topic_regex, member.server_assignor, member.rebalance_timeout_ms)
        if before != after or joined:
            records.append(self._member_metadata_record(cg, member))
        # the subscribed topics' metadata
        metadata = self._subscribed_metadata(cg)
        if metadata != cg.subscribed_metadata:
            cg.subscribed_metadata = metadata
            records.append(self._partition_metadata_record(cg))
            bump = True
        if bump:
            cg.group_epoch += 1
            records.append((cr.encode_consumer_key(cr.ConsumerGroupKey(cr.METADATA, cg.group_id)),
                            cr.encode_consumer_value(cr.METADATA, epoch=cg.group_epoch)))
        if cg.group_epoch > cg.assignment_epoch:
            self._compute_target(cg, records)
        old_assigned = member.assigned
        if reconcile(cg, member, owned) or joined:
            records.extend(self._member_assignment_records(cg, member))
            if member.state == MEMBER_UNREVOKED_PARTITIONS:
                self._schedule_revocation(cg, member)
            else:
                self._cancel_revocation(member)
        self._touch_consumer(cg, member)
        send = joined or member.assigned != old_assigned or (owned is not None and owned != member.assigned)
        return self._heartbeat_result(member, dict(member.assigned) if send else None)

    def _replace_static_consumer_member(self, cg: ConsumerGroup, old: ConsumerGroupMember, new_id: str,
                                        records: Records) -> ConsumerGroupMember:
        """The instance id of a static member that left with -2 comes back under ``new_id``:
        it takes the old member's assignment and epoch over."""
        log.info("group %s: static member %s replaces %s (instance id %s)", cg.group_id, new_id, old.member_id,
                 old.instance_id)
        self._cancel_timers(old)
        records.extend(member_tombstones(cg.group_id, old.member_id))
        target = cg.target.pop(old.member_id, None)
        cg.remove_member(old.member_id)
        new = ConsumerGroupMember(
            new_id, old.instance_id, old.rack_id, old.client_id, old.client_host, old.subscribed_topic_names,
            old.subscribed_topic_regex, old.server_assignor, old.rebalance_timeout_ms,
            member_epoch=old.previous_member_epoch if old.member_epoch == LEAVE_STATIC_EPOCH else old.member_epoch,
            previous_member_epoch=old.previous_member_epoch, state=old.state, assigned=dict(old.assigned),
            pending_revocation=dict(old.pending_revocation))
        if new.member_epoch <= 0:
            new.member_epoch = cg.assignment_epoch
        cg.add_member(new)
        if target is not None:
            cg.target[new_id] = target
            records.append(self._target_member_record(cg, new_id))
        return new

    def _remove_consumer_member(self, cg: ConsumerGroup, member: ConsumerGroupMember, records: Records) -> None:
        self._cancel_timers(member)
        cg.remove_member(member.member_id)
        records.extend(member_tombstones(cg.group_id, member.member_id))
        cg.group_epoch += 1
        records.append((cr.encode_consumer_key(cr.ConsumerGroupKey(cr.METADATA, cg.group_id)),
                        cr.encode_consumer_value(cr.METADATA, epoch=cg.group_epoch)))
        if cg.members:
            metadata = self._subscribed_metadata(cg)
            if metadata != cg.subscribed_metadata:
                cg.subscribed_metadata = metadata
                records.append(self._partition_metadata_record(cg))
            self._compute_target(cg, records)
        else:
            cg.assignment_epoch = cg.group_epoch
            records.append((cr.encode_consumer_key(cr.ConsumerGroupKey(cr.TARGET_ASSIGNMENT_METADATA, cg.group_id)),
                            cr.encode_consumer_value(cr.TARGET_ASSIGNMENT_METADATA,
                                                     assignment_epoch=cg.assignment_epoch)))

    # --- target assignment ---

    def _subscribed_metadata(self, cg: ConsumerGroup) -> dict[str, tuple[Any, int]]:
        names = cg.subscribed_topic_names()
        out: dict[str, tuple[Any, int]] = {}
        for name in sorted(names):
            info = self._ctx.topics.get(name)
            if info is not None:
                out[name] = (info.topic_id, info.partitions)
        return out

    def _compute_target(self, cg: ConsumerGroup, records: Records) -> None:
        ids = {name: tid for name, (tid, _) in cg.subscribed_metadata.items()}
        partitions = {tid: count for tid, count in cg.subscribed_metadata.values()}
        subscriptions = {m.member_id: {ids[n] for n in cg.member_topic_names(m) if n in ids}
                         for m in cg.members.values()}
        name = cg.preferred_assignor(self.assignors[0])
        target = assignor_impl.assign(name, subscriptions, partitions, cg.target)
        changed = [m for m in target if target[m] != cg.target.get(m)]
        cg.target = target
        cg.assignor = name
        cg.assignment_epoch = cg.group_epoch
        for m in changed:
            records.append(self._target_member_record(cg, m))
        records.append((cr.encode_consumer_key(cr.ConsumerGroupKey(cr.TARGET_ASSIGNMENT_METADATA, cg.group_id)),
                        cr.encode_consumer_value(cr.TARGET_ASSIGNMENT_METADATA,
                                                 assignment_epoch=cg.assignment_epoch)))
        log.info("group %s: target assignment of epoch %d computed by the %s assignor for %d members",
                 cg.group_id, cg.assignment_epoch, name, len(target))

    # --- records ---

    @staticmethod
    def _member_metadata_record(cg: ConsumerGroup, m: ConsumerGroupMember) -> tuple[bytes, bytes]:
        return (cr.encode_consumer_key(cr.ConsumerGroupKey(cr.MEMBER_METADATA, cg.group_id, m.member_id)),
                cr.encode_consumer_value(
                    cr.MEMBER_METADATA, instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
                    client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
                    subscribed_topic_regex=m.subscribed_topic_regex, rebalance_timeout_ms=m.rebalance_timeout_ms,
                    server_assignor=m.server_assignor))

    @staticmethod
    def _partition_metadata_record(cg: ConsumerGroup) -> tuple[bytes, bytes]:
        return (cr.encode_consumer_key(cr.ConsumerGroupKey(cr.PARTITION_METADATA, cg.group_id)),
                cr.encode_consumer_value(cr.PARTITION_METADATA, topics=[
                    {"topic_id": tid, "topic_name": name, "num_partitions": count, "partition_metadata": []}
                    for name, (tid, count) in sorted(cg.subscribed_metadata.items())]))

    @staticmethod
    def _target_member_record(cg: ConsumerGroup, member_id: str) -> tuple[bytes, bytes]:
        return (cr.encode_consumer_key(cr.ConsumerGroupKey(cr.TARGET_ASSIGNMENT_MEMBER, cg.group_id, member_id)),
                cr.encode_consumer_value(cr.TARGET_ASSIGNMENT_MEMBER,
                                         topic_partitions=cr.topic_partitions(cg.target.get(member_id, {}))))

    @staticmethod
    def _member_assignment_records(cg: ConsumerGroup, m: ConsumerGroupMember) -> list[tuple[bytes, bytes]]:
        return [(cr.encode_consumer_key(cr.ConsumerGroupKey(cr.CURRENT_MEMBER_ASSIGNMENT, cg.group_id, m.member_id)),
                 cr.encode_consumer_value(
                     cr.CURRENT_MEMBER_ASSIGNMENT, member_epoch=m.member_epoch,
                     previous_member_epoch=m.previous_member_epoch, state=m.state,
                     assigned_partitions=cr.topic_partitions(m.assigned),
                     partitions_pending_revocation=cr.topic_partitions(m.pending_revocation)))]

    def replay(self, key: cr.ConsumerGroupKey, value_bytes: bytes | None) -> None:
        """Apply one loaded consumer-group record (under no lock: startup). A record of a
        group that is a classic group now replaces it (the later record wins); a tombstone
        of one leaves it alone."""
        groups = self._ctx.groups
        if value_bytes is None:
            cg = groups.consumer(key.group)
            if cg is None:
                return
            if key.type == cr.METADATA:
                groups.forget(cg)  # a simple group stays while the offsets do
            elif key.type == cr.MEMBER_METADATA:
                cg.remove_member(key.member_id or "")
            elif key.type == cr.TARGET_ASSIGNMENT_MEMBER:
                cg.target.pop(key.member_id or "", None)
            elif key.type == cr.CURRENT_MEMBER_ASSIGNMENT:
                m = cg.members.get(key.member_id or "")
                if m is not None:
                    m.assigned, m.pending_revocation = {}, {}
            return
        value = cr.decode_consumer_value(key.type, value_bytes)
        cg = groups.consumer(key.group)
        if cg is None:
            cg = ConsumerGroup(key.group)
            groups.put(cg)
        cg.has_records = True
        if key.type == cr.METADATA:
            cg.group_epoch = value.epoch
        elif key.type == cr.PARTITION_METADATA:
            cg.subscribed_metadata = {t.topic_name: (t.topic_id, t.num_partitions) for t in value.topics}
        elif key.type == cr.TARGET_ASSIGNMENT_METADATA:
            cg.assignment_epoch = value.assignment_epoch
        elif key.type == cr.TARGET_ASSIGNMENT_MEMBER:
            cg.target[key.member_id or ""] = cr.from_topic_partitions(value.topic_partitions)
        else:
            m = cg.members.get(key.member_id or "")
            if m is None:
                m = ConsumerGroupMember(key.member_id or "")
                cg.members[m.member_id] = m
            if key.type == cr.MEMBER_METADATA:
                m.instance_id, m.rack_id = value.instance_id, value.rack_id
                m.client_id, m.client_host = value.client_id, value.client_host
                m.subscribed_topic_names = tuple(value.subscribed_topic_names)
                m.subscribed_topic_regex = value.subscribed_topic_regex
                m.rebalance_timeout_ms = value.rebalance_timeout_ms
                m.server_assignor = value.server_assignor
                if m.instance_id is not None:
                    cg.static_members[m.instance_id] = m.member_id
            else:
                m.member_epoch, m.previous_member_epoch = value.member_epoch, value.previous_member_epoch
                m.state = value.state
                m.assigned = cr.from_topic_partitions(value.assigned_partitions)
                m.pending_revocation = cr.from_topic_partitions(value.partitions_pending_revocation)

    def resume(self) -> None:
        """After loading: every consumer-group member gets a full session to come back."""
        for cg in self._ctx.groups.consumer_groups():
            for m in list(cg.members.values()):
                self._touch_consumer(cg, m)
                if m.state == MEMBER_UNREVOKED_PARTITIONS:
                    self._schedule_revocation(cg, m)

    # --- timers ---

    def _touch_consumer(self, cg: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if member.session_task is not None:
            member.session_task.cancel()
        gid, mid = cg.group_id, member.member_id

        def expire() -> None:
            with self._ctx.mlock:
                current = self._consumer_member(gid, mid)
                if current is None or current.session_task is not task:
                    return
                log.info("group %s: member %s's session expired (%d ms without heartbeat); fencing it", gid, mid,
                         self._session_timeout_ms)
                self._fence_consumer_member(gid, current)

        task = self._ctx.runtime.timer.schedule_once(f"consumer-session-{mid}", expire, self._session_timeout_ms)
        member.session_task = task

    def _schedule_revocation(self, cg: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if member.revocation_task is not None:
            return
        gid, mid, epoch = cg.group_id, member.member_id, member.member_epoch
        timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else self._session_timeout_ms

        def expire() -> None:
            with self._ctx.mlock:
                current = self._consumer_member(gid, mid)
                if current is None or current.revocation_task is not task:
                    return
                current.revocation_task = None
                if current.state == MEMBER_UNREVOKED_PARTITIONS and current.member_epoch == epoch:
                    log.info("group %s: member %s did not revoke its partitions within %d ms; fencing it",
                             gid, mid, timeout)
                    self._fence_consumer_member(gid, current)

        task: ScheduledTask = self._ctx.runtime.timer.schedule_once(f"consumer-revocation-{mid}", expire, timeout)
        member.revocation_task = task

    @staticmethod
    def _cancel_revocation(member: ConsumerGroupMember) -> None:
        if member.revocation_task is not None:
            member.revocation_task.cancel()
            member.revocation_task = None

    def _cancel_timers(self, member: ConsumerGroupMember) -> None:
        self._cancel_revocation(member)
        if member.session_task is not None:
            member.session_task.cancel()
            member.session_task = None

    def _consumer_member(self, gid: str, mid: str) -> ConsumerGroupMember | None:
        cg = self._ctx.groups.consumer(gid)
        return None if cg is None else cg.members.get(mid)

    def _fence_consumer_member(self, gid: str, member: ConsumerGroupMember) -> None:
        cg = self._ctx.groups.consumer(gid)
        if cg is None:
            return
        records: Records = []
        self._remove_consumer_member(cg, member, records)
        try:
            self._ctx.append(gid, records)
        except ApiError as exc:
            log.warning("group %s: writing the removal of member %s failed: %s", gid, member.member_id, exc)

    def close(self) -> None:
        """Refuse heartbeats from now on and stop every member's timers (shutdown)."""
        with self._ctx.mlock:
            self._closed = True
            for cg in self._ctx.groups.consumer_groups():
                for m in cg.members.values():
                    self._cancel_timers(m)

    # --- description ---

    def describe(self, group_id: str) -> tuple[int, str | None, ConsumerGroup | None]:
        """(error code, message, a consistent view) for ConsumerGroupDescribe."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, "the group id is empty", None
        with self._ctx.mlock:
            cg = self._ctx.groups.consumer(group_id)
            if cg is None:
                group = self._ctx.groups.classic(group_id)
                if group is not None and (group.members or group.protocol_type):
                    return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
            return ErrorCode.NONE, None, cg

    def topic_name_of(self, topic_id: Any) -> str | None:
        for name in self._ctx.topics.topics():
            info = self._ctx.topics.get(name)
            if info is not None and info.topic_id == topic_id:
                return name
        return None


def _subset(a: Assignment, b: Assignment) -> bool:
    return all(set(ps) <= set(b.get(t, ())) for t, ps in a.items())


__all__ = ["CONSUMER_PROTOCOL_TYPE", "ConsumerGroups", "GROUP_TYPE_CLASSIC", "GROUP_TYPE_CONSUMER",
           "HeartbeatResult", "new_consumer_member_id"]
