"""Group membership APIs of the classic protocol: JoinGroup (11) v0-5, SyncGroup (14) v0-3,
Heartbeat (12) v0-3, LeaveGroup (13) v0-3 (v3: a batch of members), and OffsetDelete (47)
v0, over the ``GroupCoordinator`` (``broker.server.group``; behaviour in its
``membership.py``). Versions are PROTOCOL.md section 2's (no flexible version).

Wire details (Kafka's ``KafkaApis``):

* JoinGroup v0 has no rebalance timeout: the session timeout is used. v4+ requires a known
  member id (MEMBER_ID_REQUIRED round trip). The request's thread blocks until the
  rebalance answers it. The client host is Kafka's ``"/" + address``.
* SyncGroup v3+ carries the group instance id; v5's protocol type / name are checked.
* LeaveGroup v0-2 carry one member id, and the top-level error is that member's; v3 answers
  per member with a top-level NONE.
* OffsetDelete: partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION; a group-level
  error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, INVALID_GROUP_ID) is the top-level code.

Authorization (Kafka's, ``authz.py``): JoinGroup, SyncGroup, Heartbeat and LeaveGroup need
READ on the group (GROUP_AUTHORIZATION_FAILED); OffsetDelete DELETE on the group and READ
on each topic (its partitions TOPIC_AUTHORIZATION_FAILED).

Thread-safety: handlers keep no state; the coordinator is thread-safe.
"""

from __future__ import annotations

from broker.protocol import ErrorCode
from broker.protocol.messages.heartbeat import HEARTBEAT_RESPONSE
from broker.protocol.messages.join_group import JOIN_GROUP_RESPONSE
from broker.protocol.messages.leave_group import LEAVE_GROUP_RESPONSE
from broker.protocol.messages.offset_delete import OFFSET_DELETE_RESPONSE
from broker.protocol.messages.sync_group import SYNC_GROUP_RESPONSE
from broker.server.errors import ApiError
from broker.server.handlers import RequestContext, ServerState
from broker.server.handlers.authz import AclOperation, ResourceType, allowed, allowed_names
from broker.server.handlers.group import _coordinator

JoinGroupResponse = JOIN_GROUP_RESPONSE.cls
JoinMember = JOIN_GROUP_RESPONSE.structs["JoinGroupResponseMember"]
SyncGroupResponse = SYNC_GROUP_RESPONSE.cls
HeartbeatResponse = HEARTBEAT_RESPONSE.cls
LeaveGroupResponse = LEAVE_GROUP_RESPONSE.cls
LeaveMember = LEAVE_GROUP_RESPONSE.structs["MemberResponse"]
OffsetDeleteResponse = OFFSET_DELETE_RESPONSE.cls
DeleteTopic = OFFSET_DELETE_RESPONSE.structs["OffsetDeleteResponseTopic"]
DeletePartition = OFFSET_DELETE_RESPONSE.structs["OffsetDeleteResponsePartition"]


def client_host(ctx: RequestContext) -> str:
    host = ctx.peer_address[0] if ctx.peer_address else ""
    return f"/{host}"


# --- JoinGroup ---

def handle_join_group(state: ServerState, ctx: RequestContext, body) -> object:
    if not allowed(state, ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return join_group_error_response(state, ctx, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    version = ctx.api_version
    rebalance_timeout = body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms
    result = _coordinator(state).join_group(
        body.group_id, body.member_id, body.group_instance_id if version >= 5 else None, version >= 4,
        ctx.header.client_id or "", client_host(ctx), rebalance_timeout, body.session_timeout_ms,
        body.protocol_type, [(p.name, bytes(p.metadata)) for p in body.protocols])
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error, generation_id=result.generation,
        protocol_type=result.protocol_type, protocol_name=result.protocol or "", leader=result.leader,
        member_id=result.member_id,
        members=[JoinMember(member_id=mid, group_instance_id=iid, metadata=meta) for mid, iid, meta in result.members])


def join_group_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return JoinGroupResponse(throttle_time_ms=0, error_code=code, generation_id=-1, protocol_type=None,
                             protocol_name="", leader="", member_id=body.member_id, members=[])


# --- SyncGroup ---

def handle_sync_group(state: ServerState, ctx: RequestContext, body) -> object:
    if not allowed(state, ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return sync_group_error_response(state, ctx, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    version = ctx.api_version
    result = _coordinator(state).sync_group(
        body.group_id, body.generation_id, body.member_id, body.group_instance_id if version >= 3 else None,
        body.protocol_type if version >= 5 else None, body.protocol_name if version >= 5 else None,
        [(a.member_id, bytes(a.assignment)) for a in body.assignments])
    return SyncGroupResponse(throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                             protocol_name=result.protocol, assignment=result.assignment)


def sync_group_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return SyncGroupResponse(throttle_time_ms=0, error_code=code, protocol_type=None, protocol_name=None,
                             assignment=b"")


# --- Heartbeat ---

def handle_heartbeat(state: ServerState, ctx: RequestContext, body) -> object:
    if not allowed(state, ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return heartbeat_error_response(state, ctx, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    code = _coordinator(state).heartbeat(body.group_id, body.generation_id, body.member_id,
                                         body.group_instance_id if ctx.api_version >= 3 else None)
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)


def heartbeat_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)


# --- LeaveGroup ---

def _leaving(ctx: RequestContext, body) -> list[tuple[str, str | None]]:
    if ctx.api_version >= 3:
        return [(m.member_id, m.group_instance_id) for m in body.members]
    return [(body.member_id, None)]


def handle_leave_group(state: ServerState, ctx: RequestContext, body) -> object:
    if not allowed(state, ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return leave_group_error_response(state, ctx, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    leaving = _leaving(ctx, body)
    codes = _coordinator(state).leave_group(body.group_id, leaving)
    if ctx.api_version < 3:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=codes[0] if codes else ErrorCode.NONE, members=[])
    group_code = ErrorCode.INVALID_GROUP_ID if not body.group_id else ErrorCode.NONE
    return LeaveGroupResponse(throttle_time_ms=0, error_code=group_code, members=[
        LeaveMember(member_id=mid, group_instance_id=iid, error_code=code)
        for (mid, iid), code in zip(leaving, codes)])


def leave_group_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return LeaveGroupResponse(throttle_time_ms=0, error_code=code, members=[])


# --- OffsetDelete ---

def handle_offset_delete(state: ServerState, ctx: RequestContext, body) -> object:
    if not allowed(state, ctx, AclOperation.DELETE, ResourceType.GROUP, body.group_id):
        return offset_delete_error_response(state, ctx, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = _coordinator(state)
    readable = allowed_names(state, ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in body.topics))
    known: list[tuple[str, int]] = []
    for t in body.topics:
        info = state.topics.get(t.name)
        for p in t.partitions:
            if t.name in readable and info is not None and 0 <= p.partition_index < info.partitions:
                known.append((t.name, p.partition_index))
    try:
        codes = coordinator.delete_offsets(body.group_id, known)
    except ApiError as exc:
        return OffsetDeleteResponse(error_code=exc.code, throttle_time_ms=0, topics=[])
    return OffsetDeleteResponse(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
        DeleteTopic(name=t.name, partitions=[
            DeletePartition(partition_index=p.partition_index,
                            error_code=codes.get((t.name, p.partition_index), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                            if t.name in readable else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for p in t.partitions])
        for t in body.topics])


def offset_delete_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=[])
