"""The share group APIs (KIP-932, Kafka 4.2's versions): ShareGroupHeartbeat (76) v1,
ShareGroupDescribe (77) v1, ShareFetch (78) v1-2 and ShareAcknowledge (79) v1-2, over the
group coordinator's share part (``broker.server.group.share_membership``) and the
``SharePartitionManager`` (``broker.server.share.manager``).

Wire details:

* ShareGroupHeartbeat: the assignment travels as (topic id, partitions), null unless the
  coordinator sends one; errors carry Kafka's message.
* ShareGroupDescribe: per group, GROUP_ID_NOT_FOUND for a missing group or one of another
  type; state ("Empty", "Stable"), epochs, the assignor ("simple") and the members with
  their subscriptions and assignments (topic names resolved from the ids).
* ShareFetch: the share session (epoch 0 opens, -1 closes, else the next epoch); a
  request-level error (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
  SHARE_SESSION_LIMIT_REACHED, INVALID_REQUEST, UNKNOWN_MEMBER_ID for a member the group
  does not know) goes in the top-level ErrorCode with no partitions. Acknowledgements come
  first: each acknowledged partition is answered with its AcknowledgeErrorCode. Then
  records are acquired (MaxRecords, ShareAcquireMode from v2) and each partition with
  records or an error is answered with the batches, the AcquiredRecords ranges and the
  leader (this node) with its epoch; AcquisitionLockTimeoutMs is the group's lock
  duration. With nothing acquired the request waits up to MaxWaitMs for an append to one
  of the session's partitions, or a release of records in it.
* ShareAcknowledge: the session's epoch as for ShareFetch (0 is
  INVALID_SHARE_SESSION_EPOCH; -1 closes the session after the acknowledgements);
  AcquisitionLockTimeoutMs from v2; RENEW acknowledgements extend the locks (v2).
* Authorization (Kafka's): the heartbeat, ShareFetch and ShareAcknowledge need READ on
  the group (GROUP_AUTHORIZATION_FAILED) and READ (fetch) / DESCRIBE (heartbeat) on the
  topics (TOPIC_AUTHORIZATION_FAILED); ShareGroupDescribe DESCRIBE on the group.
* Quotas: a ShareFetch response is counted against the client's fetch quota like a
  Fetch, and a throttled answer carries the throttle time.

Thread-safety: handlers keep no state; the coordinator and the manager are thread-safe.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from broker.protocol import ErrorCode
from broker.protocol.messages.share_acknowledge import SHARE_ACKNOWLEDGE_RESPONSE
from broker.protocol.messages.share_fetch import SHARE_FETCH_RESPONSE
from broker.protocol.messages.share_group_describe import SHARE_GROUP_DESCRIBE_RESPONSE
from broker.protocol.messages.share_group_heartbeat import SHARE_GROUP_HEARTBEAT_RESPONSE
from broker.record.limits import INT32_MIN
from broker.server.errors import ApiError
from broker.server.handlers import RequestContext, ServerState, throttling
from broker.server.handlers.authz import AclOperation, ResourceType, allowed, allowed_names, authorized_operations
from broker.server.handlers.consumer_group import heartbeat_denied
from broker.server.handlers.group import _coordinator
from broker.server.handlers.group_membership import client_host

HeartbeatResponse = SHARE_GROUP_HEARTBEAT_RESPONSE.cls
HbAssignment = SHARE_GROUP_HEARTBEAT_RESPONSE.structs["Assignment"]
HbTopicPartitions = SHARE_GROUP_HEARTBEAT_RESPONSE.structs["TopicPartitions"]
DescribeResponse = SHARE_GROUP_DESCRIBE_RESPONSE.cls
DescribedGroup = SHARE_GROUP_DESCRIBE_RESPONSE.structs["DescribedGroup"]
DescribedMember = SHARE_GROUP_DESCRIBE_RESPONSE.structs["Member"]
DescribedAssignment = SHARE_GROUP_DESCRIBE_RESPONSE.structs["Assignment"]
DescribedTopicPartitions = SHARE_GROUP_DESCRIBE_RESPONSE.structs["TopicPartitions"]
FetchResponse = SHARE_FETCH_RESPONSE.cls
FetchTopic = SHARE_FETCH_RESPONSE.structs["ShareFetchableTopicResponse"]
FetchPartition = SHARE_FETCH_RESPONSE.structs["PartitionData"]
FetchLeader = SHARE_FETCH_RESPONSE.structs["LeaderIdAndEpoch"]
Acquired = SHARE_FETCH_RESPONSE.structs["AcquiredRecords"]
AckResponse = SHARE_ACKNOWLEDGE_RESPONSE.cls
AckTopic = SHARE_ACKNOWLEDGE_RESPONSE.structs["ShareAcknowledgeTopicResponse"]
AckPartition = SHARE_ACKNOWLEDGE_RESPONSE.structs["PartitionData"]
AckLeader = SHARE_ACKNOWLEDGE_RESPONSE.structs["LeaderIdAndEpoch"]



def _manager(state: ServerState) -> Any:
    manager = getattr(state, "share_manager", None)
    if manager is None:
        raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "share groups are not running")
    return manager


# --- ShareGroupHeartbeat ---

def handle_heartbeat(state: ServerState, ctx: RequestContext, body) -> object:
    denial = heartbeat_denied(state, ctx, body.group_id, body.subscribed_topic_names)
    if denial is not None:
        response = heartbeat_error_response(state, ctx, body, denial[0])
        response.error_message = denial[1]
        return response
    r = _coordinator(state).share_group_heartbeat(
        body.group_id, body.member_id, body.member_epoch, body.rack_id, body.subscribed_topic_names,
        ctx.header.client_id or "", client_host(ctx))
    assignment = None
    if r.assignment is not None:
        assignment = HbAssignment(topic_partitions=[
            HbTopicPartitions(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(r.assignment.items(), key=lambda kv: str(kv[0])) if ps])
    ok = r.error == ErrorCode.NONE
    return HeartbeatResponse(throttle_time_ms=0, error_code=r.error, error_message=r.message,
                             member_id=r.member_id if ok else None, member_epoch=r.member_epoch if ok else -1,
                             heartbeat_interval_ms=r.heartbeat_interval_ms, assignment=assignment)


def heartbeat_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> Any:
    return HeartbeatResponse(throttle_time_ms=0, error_code=code, error_message=None, member_id=None,
                             member_epoch=-1, heartbeat_interval_ms=0, assignment=None)


# --- ShareGroupDescribe ---

def _topic_names(state: ServerState) -> dict:
    return {info.topic_id: name for name, info in state.topics.topics().items() if info is not None}


def _described_assignment(assignment, names: dict) -> object:
    return DescribedAssignment(topic_partitions=[
        DescribedTopicPartitions(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(ps))
        for t, ps in sorted(assignment.items(), key=lambda kv: names.get(kv[0], str(kv[0]))) if ps])


def _empty_group(group_id: str, code: int, message: str | None = None) -> object:
    return DescribedGroup(error_code=code, error_message=message, group_id=group_id, group_state="Dead",
                          group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
                          authorized_operations=INT32_MIN)


def handle_describe(state: ServerState, ctx: RequestContext, body) -> object:
    coordinator = _coordinator(state)
    names = _topic_names(state)
    groups = []
    for group_id in body.group_ids:
        if not allowed(state, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_empty_group(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        ops = authorized_operations(state, ctx, ResourceType.GROUP, group_id, body.include_authorized_operations)
        with coordinator.mlock:
            code, message, sg = coordinator.describe_share_group(group_id)
            if sg is None:
                groups.append(_empty_group(group_id, code, message))
                continue
            members = [DescribedMember(
                member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch, client_id=m.client_id,
                client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
                assignment=_described_assignment(m.assigned, names)) for m in sg.members.values()]
            groups.append(DescribedGroup(error_code=ErrorCode.NONE, error_message=None, group_id=group_id,
                                         group_state=sg.state(), group_epoch=sg.group_epoch,
                                         assignment_epoch=sg.assignment_epoch, assignor_name="simple",
                                         members=members, authorized_operations=ops))
    return DescribeResponse(throttle_time_ms=0, groups=groups)


def describe_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DescribeResponse(throttle_time_ms=0, groups=[_empty_group(g, code) for g in body.group_ids])


# --- ShareFetch / ShareAcknowledge ---

def _acks(topics) -> dict[tuple[uuid.UUID, int], list[tuple[int, int, list[int]]]]:
    out: dict[tuple[uuid.UUID, int], list[tuple[int, int, list[int]]]] = {}
    for t in topics:
        for p in t.partitions:
            if p.acknowledgement_batches:
                out.setdefault((t.topic_id, p.partition_index), []).extend(
                    (b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in p.acknowledgement_batches)
    return out


def _denied_topics(state: ServerState, ctx: RequestContext, manager: Any, topic_ids) -> set[uuid.UUID]:
    """The topic ids the principal may not READ (unknown ids are answered later)."""
    if state.authorizer is None:
        return set()
    names = {tid: manager.topic_name(tid) for tid in set(topic_ids)}
    known = {n for n in names.values() if n is not None}
    ok = allowed_names(state, ctx, AclOperation.READ, ResourceType.TOPIC, known)
    return {tid for tid, n in names.items() if n is not None and n not in ok}


def _check_member(state: ServerState, group_id: str, member_id: str) -> None:
    coordinator = state.group_coordinator
    if coordinator is not None and not coordinator.is_share_member(group_id, member_id):
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of share group {group_id}.")


def _leader(state: ServerState, cls, epoch: int) -> object:
    return cls(leader_id=state.node_id, leader_epoch=epoch)


def handle_share_fetch(state: ServerState, ctx: RequestContext, body) -> object:
    from broker.server.share.manager import FINAL_EPOCH, STRICT_MODE, ShareError

    manager = _manager(state)
    group_id, member_id = body.group_id or "", body.member_id or ""
    if not allowed(state, ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return share_fetch_error_response(state, ctx, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    epoch = body.share_session_epoch
    acks = _acks(body.topics)
    lock_ms = manager.lock_duration_ms(group_id)
    try:
        if not group_id or not member_id:
            raise ShareError(ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set")
        if epoch == 0 and acks:
            raise ShareError(ErrorCode.INVALID_REQUEST, "acknowledgements cannot open a share session")
        if epoch != FINAL_EPOCH:
            _check_member(state, group_id, member_id)
        requested = [(t.topic_id, p.partition_index) for t in body.topics for p in t.partitions]
        forgotten = [(t.topic_id, p) for t in body.forgotten_topics_data for p in t.partitions]
        session = manager.session(group_id, member_id, epoch, requested, forgotten)
    except ShareError as exc:
        return _fetch_error(exc.code, exc.message, lock_ms)
    except ApiError as exc:
        return _fetch_error(exc.code, exc.message, lock_ms)
    denied = _denied_topics(state, ctx, manager, [tp[0] for tp in session.partitions] + [tp[0] for tp in acks])
    partitions: dict[tuple[uuid.UUID, int], Any] = {}
    ack_results = manager.acknowledge(group_id, member_id, {k: v for k, v in acks.items() if k[0] not in denied})
    for tp in acks:
        code, message = ack_results.get(tp, (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None))
        partitions[tp] = _fetch_partition(state, tp[1], ack_error=code, ack_message=message)
    for tp in session.partitions:
        if tp[0] in denied and tp not in partitions:
            partitions[tp] = _fetch_partition(state, tp[1], error=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if epoch == FINAL_EPOCH:
        manager.release_member_session(group_id, member_id)
        return _fetch_answer(state, ctx, partitions, lock_ms, 0)
    strict = ctx.api_version >= 2 and body.share_acquire_mode == STRICT_MODE
    max_records = body.max_records if body.max_records > 0 else 500
    max_bytes = throttling.fetch_max_bytes(state, ctx, max(body.max_bytes, 0))  # 0: acknowledgements only
    wait_s = max(body.max_wait_ms, 0) / 1000.0
    names = [(manager.topic_name(t), p) for t, p in session.partitions if t not in denied]
    tps = [(n, p) for n, p in names if n is not None]
    waiter = state.watchers.register(tps) if wait_s > 0 and tps else None
    total = 0
    try:
        deadline = time.monotonic() + wait_s
        while True:
            results = manager.fetch_partitions(session, member_id, max_bytes, max_records, strict,
                                               skip=frozenset(tp for tp in session.partitions if tp[0] in denied))
            total = sum(r.size for r in results.values())
            if waiter is None or any(r.acquired or r.error for r in results.values()) or state.watchers.closed:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                break
            waiter.wait(left)
            waiter.clear()
    finally:
        if waiter is not None:
            state.watchers.unregister(tps, waiter)
    for tp, r in results.items():
        part = partitions.get(tp) or _fetch_partition(state, tp[1])
        part.error_code, part.error_message = r.error, r.message
        part.current_leader = _leader(state, FetchLeader, r.leader_epoch)
        if r.acquired:
            part.records = r.records
            part.acquired_records = [Acquired(first_offset=a, last_offset=b, delivery_count=c)
                                     for a, b, c in r.acquired]
        partitions[tp] = part
    return _fetch_answer(state, ctx, partitions, lock_ms, total)


def _fetch_partition(state: ServerState, index: int, *, error: int = ErrorCode.NONE, ack_error: int = ErrorCode.NONE,
                     ack_message: str | None = None) -> Any:
    return FetchPartition(partition_index=index, error_code=error, error_message=None, acknowledge_error_code=ack_error,
                          acknowledge_error_message=ack_message, current_leader=_leader(state, FetchLeader, 0),
                          records=b"", acquired_records=[])


def _fetch_answer(state: ServerState, ctx: RequestContext, partitions: dict, lock_ms: int, total: int) -> object:
    throttle_ms = throttling.record_fetch(state, ctx, total)
    if throttle_ms > 0 and total == 0:
        return FetchResponse(throttle_time_ms=throttle_ms, error_code=ErrorCode.NONE, error_message=None,
                             acquisition_lock_timeout_ms=lock_ms, responses=[], node_endpoints=[])
    by_topic: dict[uuid.UUID, list] = {}
    for (topic_id, _p), part in partitions.items():
        by_topic.setdefault(topic_id, []).append(part)
    return FetchResponse(throttle_time_ms=max(throttle_ms, 0), error_code=ErrorCode.NONE, error_message=None,
                         acquisition_lock_timeout_ms=lock_ms,
                         responses=[FetchTopic(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
                         node_endpoints=[])


def _fetch_error(code: int, message: str | None, lock_ms: int = 0) -> object:
    return FetchResponse(throttle_time_ms=0, error_code=code, error_message=message,
                         acquisition_lock_timeout_ms=lock_ms, responses=[], node_endpoints=[])


def share_fetch_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return _fetch_error(code, None)


def handle_share_acknowledge(state: ServerState, ctx: RequestContext, body) -> object:
    from broker.server.share.manager import FINAL_EPOCH, ShareError

    manager = _manager(state)
    group_id, member_id = body.group_id or "", body.member_id or ""
    if not allowed(state, ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return share_acknowledge_error_response(state, ctx, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    epoch = body.share_session_epoch
    lock_ms = manager.lock_duration_ms(group_id)
    try:
        if not group_id or not member_id:
            raise ShareError(ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set")
        if epoch != FINAL_EPOCH:
            _check_member(state, group_id, member_id)
        manager.session(group_id, member_id, epoch, (), (), fetch=False)
    except (ShareError, ApiError) as exc:
        return AckResponse(throttle_time_ms=0, error_code=exc.code, error_message=exc.message,
                           acquisition_lock_timeout_ms=lock_ms, responses=[], node_endpoints=[])
    acks = _acks(body.topics)
    denied = _denied_topics(state, ctx, manager, [tp[0] for tp in acks])
    results = manager.acknowledge(group_id, member_id, {k: v for k, v in acks.items() if k[0] not in denied})
    if epoch == FINAL_EPOCH:
        manager.release_member_session(group_id, member_id)
    by_topic: dict[uuid.UUID, list] = {}
    for tp in acks:
        code, message = results.get(tp, (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None))
        by_topic.setdefault(tp[0], []).append(AckPartition(
            partition_index=tp[1], error_code=code, error_message=message,
            current_leader=_leader(state, AckLeader, 0)))
    return AckResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                       acquisition_lock_timeout_ms=lock_ms,
                       responses=[AckTopic(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
                       node_endpoints=[])


def share_acknowledge_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return AckResponse(throttle_time_ms=0, error_code=code, error_message=None, acquisition_lock_timeout_ms=0,
                       responses=[], node_endpoints=[])
