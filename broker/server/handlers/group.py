"""Consumer-group offset APIs: FindCoordinator (10) v0-2, OffsetCommit (8) v2-9, OffsetFetch
(9) v1-9, ListGroups (16) v0-5, DescribeGroups (15) v0-5, DeleteGroups (42) v0-1, over the
``GroupCoordinator`` (``broker.server.group``). OffsetCommit v9 / OffsetFetch v9 are what
KIP-848 consumers need (librdkafka requires them for group.protocol=consumer).

Wire behaviour (Kafka's ``KafkaApis`` and group coordinator):

* FindCoordinator: this node coordinates every group (key_type 0, and v0 which has no
  key_type) and every transactional id (key_type 1, ``broker.server.txn``), at the
  endpoint advertised for the listener the request came in on; any other key type
  INVALID_REQUEST.
* OffsetCommit: a partition of a topic that does not exist (or beyond its partition
  count) gets UNKNOWN_TOPIC_OR_PARTITION; the others go to the coordinator, which
  answers INVALID_GROUP_ID for an empty group id, the generation / member checks of
  Kafka (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
  REBALANCE_IN_PROGRESS; see ``broker.server.group.coordinator``; for a KIP-848 consumer
  group ``generation_id_or_member_epoch`` is the member epoch: UNKNOWN_MEMBER_ID,
  STALE_MEMBER_EPOCH when older than the member's, FENCED_MEMBER_EPOCH when newer;
  an admin commit, empty member id and epoch -1, only into an empty group), and
  OFFSET_METADATA_TOO_LARGE per partition for metadata longer than
  offset.metadata.max.bytes. A commit is answered once its batch is in the log.
  retention_time_ms (v2-v4) other than -1 sets the offsets' expire timestamp.
* OffsetFetch: -1 / leader epoch -1 / metadata "" for a partition without a committed
  offset (error NONE); a null topic list (v2+) returns every committed offset of the
  group. A group-level error (INVALID_GROUP_ID) is the top-level error_code at v2+, and
  each requested partition's error at v1 (which has no top-level code). v8+ is the batched
  form (one answer per requested group, a group-level error in that group's entry);
  v9's member id / epoch are checked for consumer groups (UNKNOWN_MEMBER_ID,
  STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH; no member id: no check).
* ListGroups: every group, with its protocol type ("" for a simple group; "consumer" for
  a consumer group of either protocol), its state (v4+) and type (v5+: "classic" or
  "consumer"). v4's states_filter and v5's types_filter keep the groups whose state /
  type is listed (case-insensitive, as Kafka); an empty filter keeps all.
* DescribeGroups: the group's state and protocol type; when Stable its protocol and each
  member's id, instance id, client id, host, metadata and assignment (other states list
  the members without metadata or assignment, as Kafka); Dead
  for one that does not (error NONE, as Kafka up to DescribeGroups v5), and for a KIP-848
  consumer group (Kafka 4 describes those with ConsumerGroupDescribe only);
  INVALID_GROUP_ID for "". authorized_operations (v3+) when asked (``authz.py``).
* DeleteGroups: the group's offsets and its record become tombstones;
  GROUP_ID_NOT_FOUND for a group that does not exist, NON_EMPTY_GROUP for one with
  members, INVALID_GROUP_ID for "".

Authorization (Kafka's, ``authz.py``): FindCoordinator needs DESCRIBE on the group
(GROUP_AUTHORIZATION_FAILED) or the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
OffsetCommit READ on the group (every partition GROUP_AUTHORIZATION_FAILED) and READ on
each topic (TOPIC_AUTHORIZATION_FAILED); OffsetFetch DESCRIBE on the group (the group's
error) and DESCRIBE on each requested topic (its partitions TOPIC_AUTHORIZATION_FAILED;
fetching all offsets leaves those topics out); ListGroups lists every group with DESCRIBE
on the CLUSTER, else the groups the principal may DESCRIBE; DescribeGroups DESCRIBE and
DeleteGroups DELETE on each group (GROUP_AUTHORIZATION_FAILED).

The membership APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetDelete) are in
``group_membership.py``.

Thread-safety: the coordinator is thread-safe; handlers keep no state.
"""

from __future__ import annotations

import logging

from broker.protocol import ErrorCode
from broker.protocol.messages.delete_groups import DELETE_GROUPS_RESPONSE
from broker.protocol.messages.describe_groups import DESCRIBE_GROUPS_RESPONSE
from broker.protocol.messages.find_coordinator import FIND_COORDINATOR_RESPONSE
from broker.protocol.messages.list_groups import LIST_GROUPS_RESPONSE
from broker.protocol.messages.offset_commit import OFFSET_COMMIT_RESPONSE
from broker.protocol.messages.offset_fetch import OFFSET_FETCH_RESPONSE
from broker.record.limits import INT32_MIN
from broker.server.errors import ApiError, error_code_for, is_expected
from broker.server.handlers import GroupCoordinatorApi, RequestContext, ServerState
from broker.server.handlers.authz import (
    AclOperation,
    ResourceType,
    allowed,
    allowed_names,
    authorized_operations,
    cluster_allowed,
)

log = logging.getLogger(__name__)

FindCoordinatorResponse = FIND_COORDINATOR_RESPONSE.cls
OffsetCommitResponse = OFFSET_COMMIT_RESPONSE.cls
CommitTopic = OFFSET_COMMIT_RESPONSE.structs["OffsetCommitResponseTopic"]
CommitPartition = OFFSET_COMMIT_RESPONSE.structs["OffsetCommitResponsePartition"]
OffsetFetchResponse = OFFSET_FETCH_RESPONSE.cls
FetchTopic = OFFSET_FETCH_RESPONSE.structs["OffsetFetchResponseTopic"]
FetchPartition = OFFSET_FETCH_RESPONSE.structs["OffsetFetchResponsePartition"]
FetchGroup = OFFSET_FETCH_RESPONSE.structs["OffsetFetchResponseGroup"]
FetchTopics = OFFSET_FETCH_RESPONSE.structs["OffsetFetchResponseTopics"]
FetchPartitions = OFFSET_FETCH_RESPONSE.structs["OffsetFetchResponsePartitions"]
ListGroupsResponse = LIST_GROUPS_RESPONSE.cls
ListedGroup = LIST_GROUPS_RESPONSE.structs["ListedGroup"]
DescribeGroupsResponse = DESCRIBE_GROUPS_RESPONSE.cls
DescribedGroup = DESCRIBE_GROUPS_RESPONSE.structs["DescribedGroup"]
DescribedMember = DESCRIBE_GROUPS_RESPONSE.structs["DescribedGroupMember"]
DeleteGroupsResponse = DELETE_GROUPS_RESPONSE.cls
DeletableGroupResult = DELETE_GROUPS_RESPONSE.structs["DeletableGroupResult"]

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
NO_METADATA = ""  # Kafka's OffsetFetchResponse.NO_METADATA


def _coordinator(state: ServerState) -> GroupCoordinatorApi:
    coordinator = state.group_coordinator
    if coordinator is None:
        raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is not running")
    return coordinator


# --- FindCoordinator ---

def handle_find_coordinator(state: ServerState, ctx: RequestContext, body) -> object:
    key_type = body.key_type if ctx.api_version >= 1 else KEY_TYPE_GROUP
    if key_type == KEY_TYPE_TRANSACTION:
        if not allowed(state, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, body.key):
            return _coordinator_error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if state.txn_coordinator is None:
            return _coordinator_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction coordinator is not running")
    elif key_type != KEY_TYPE_GROUP:
        return _coordinator_error(ErrorCode.INVALID_REQUEST, f"Unknown coordinator type received: {key_type}")
    else:
        if not allowed(state, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, body.key):
            return _coordinator_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        _coordinator(state)
    host, port = state.advertised_endpoint(ctx.listener, ctx.local_address)
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                   node_id=state.node_id, host=host, port=port)


def _coordinator_error(code: int, message: str | None = None) -> object:
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                   node_id=-1, host="", port=-1)


def find_coordinator_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return _coordinator_error(code)


# --- OffsetCommit ---

def handle_offset_commit(state: ServerState, ctx: RequestContext, body) -> object:
    version = ctx.api_version
    if not allowed(state, ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return offset_commit_error_response(state, ctx, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = allowed_names(state, ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in body.topics))
    slots: list[tuple[int, int]] = []  # (topic index, partition index) of each coordinator entry
    entries = []
    topics = []
    for t_index, t in enumerate(body.topics):
        info = state.topics.get(t.name)
        partitions = []
        for p in t.partitions:
            if t.name not in readable:
                partitions.append(CommitPartition(partition_index=p.partition_index,
                                                  error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if info is None or not 0 <= p.partition_index < info.partitions:
                partitions.append(CommitPartition(partition_index=p.partition_index,
                                                  error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            slots.append((t_index, len(partitions)))
            partitions.append(CommitPartition(partition_index=p.partition_index, error_code=ErrorCode.NONE))
            epoch = p.committed_leader_epoch if version >= 6 else -1
            entries.append((t.name, p.partition_index, p.committed_offset, epoch, p.committed_metadata))
        topics.append(CommitTopic(name=t.name, partitions=partitions))
    if entries:
        coordinator = _coordinator(state)
        codes = coordinator.commit_offsets(
            body.group_id, body.generation_id_or_member_epoch, body.member_id,
            body.group_instance_id if version >= 7 else None, entries,
            retention_time_ms=body.retention_time_ms if 2 <= version <= 4 else -1)
        for (t_index, p_index), code in zip(slots, codes):
            topics[t_index].partitions[p_index].error_code = code
    return OffsetCommitResponse(throttle_time_ms=0, topics=topics)


def offset_commit_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        CommitTopic(name=t.name, partitions=[CommitPartition(partition_index=p.partition_index, error_code=code)
                                            for p in t.partitions]) for t in body.topics])


# --- OffsetFetch ---

def _fetch_partition(index: int, om, code: int = ErrorCode.NONE) -> object:
    if om is None:
        return FetchPartition(partition_index=index, committed_offset=-1, committed_leader_epoch=-1,
                              metadata=NO_METADATA, error_code=code)
    return FetchPartition(partition_index=index, committed_offset=om.offset,
                          committed_leader_epoch=om.leader_epoch, metadata=om.metadata, error_code=code)


def _fetch_group(state: ServerState, ctx: RequestContext, group_id: str, requested, member_id=None,
                 member_epoch=-1, partition_cls=None) -> tuple[int, dict[str, list]]:
    """(group error, topic -> partition entries) of one group of an OffsetFetch."""
    make = partition_cls or FetchPartition
    if not allowed(state, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, {}
    if requested is not None:
        visible = allowed_names(state, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in requested))
    try:
        coordinator = _coordinator(state)
        tps = None if requested is None else [(t.name, p) for t in requested if t.name in visible
                                              for p in t.partition_indexes]
        committed = coordinator.fetch_offsets(group_id, tps, member_id, member_epoch)
    except ApiError as exc:
        return exc.code, {}
    topics: dict[str, list] = {}

    def entry(index, om):
        if om is None:
            return make(partition_index=index, committed_offset=-1, committed_leader_epoch=-1,
                        metadata=NO_METADATA, error_code=ErrorCode.NONE)
        return make(partition_index=index, committed_offset=om.offset, committed_leader_epoch=om.leader_epoch,
                    metadata=om.metadata, error_code=ErrorCode.NONE)
    if requested is None:
        visible = allowed_names(state, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                {topic for topic, _ in committed}, audit=False)
        for (topic, partition), om in committed.items():
            if topic in visible:
                topics.setdefault(topic, []).append(entry(partition, om))
    else:
        for t in requested:
            parts = topics.setdefault(t.name, [])
            for p in t.partition_indexes:
                if t.name in visible:
                    parts.append(entry(p, committed.get((t.name, p))))
                else:
                    parts.append(make(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                      metadata=NO_METADATA, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    return ErrorCode.NONE, topics


def handle_offset_fetch(state: ServerState, ctx: RequestContext, body) -> object:
    if ctx.api_version >= 8:
        groups = []
        for g in body.groups:
            code, topics = _fetch_group(state, ctx, g.group_id, g.topics,
                                        g.member_id if ctx.api_version >= 9 else None,
                                        g.member_epoch if ctx.api_version >= 9 else -1, FetchPartitions)
            groups.append(FetchGroup(group_id=g.group_id, error_code=code, topics=[
                FetchTopics(name=name, partitions=parts) for name, parts in topics.items()]))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    code, topics = _fetch_group(state, ctx, body.group_id, body.topics)
    if code != ErrorCode.NONE:
        return offset_fetch_error_response(state, ctx, body, code)
    return OffsetFetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                               topics=[FetchTopic(name=name, partitions=parts) for name, parts in topics.items()])


def offset_fetch_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    """Kafka's ``OffsetFetchRequest.getErrorResponse``: the top-level code at v2+, each
    requested partition's code below v2."""
    if ctx.api_version >= 8:
        return OffsetFetchResponse(throttle_time_ms=0, groups=[
            FetchGroup(group_id=g.group_id, error_code=code, topics=[]) for g in body.groups])
    topics = []
    if ctx.api_version < 2:
        topics = [FetchTopic(name=t.name, partitions=[_fetch_partition(p, None, code) for p in t.partition_indexes])
                  for t in body.topics or []]
    return OffsetFetchResponse(throttle_time_ms=0, error_code=code, topics=topics)


# --- ListGroups, DescribeGroups ---

def handle_list_groups(state: ServerState, ctx: RequestContext, body) -> object:
    groups = _coordinator(state).list_groups()
    if not cluster_allowed(state, ctx, AclOperation.DESCRIBE, audit=False):
        visible = allowed_names(state, ctx, AclOperation.DESCRIBE, ResourceType.GROUP,
                                (g.group_id for g in groups), audit=False)
        groups = [g for g in groups if g.group_id in visible]
    states = {s.lower() for s in body.states_filter} if ctx.api_version >= 4 else set()
    types = {t.lower() for t in body.types_filter} if ctx.api_version >= 5 else set()
    return ListGroupsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=[
        ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state, group_type=g.group_type)
        for g in groups
        if (not states or g.state.lower() in states) and (not types or g.group_type.lower() in types)])


def list_groups_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return ListGroupsResponse(throttle_time_ms=0, error_code=code, groups=[])


def handle_describe_groups(state: ServerState, ctx: RequestContext, body) -> object:
    coordinator = _coordinator(state)
    ask_ops = ctx.api_version >= 3 and body.include_authorized_operations
    described = []
    for group_id in body.groups:
        if not allowed(state, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(_described_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        ops = authorized_operations(state, ctx, ResourceType.GROUP, group_id, ask_ops)
        try:
            s = coordinator.describe_group(group_id)
            members = [DescribedMember(member_id=mid, group_instance_id=iid, client_id=cid, client_host=host,
                                       member_metadata=meta, member_assignment=assignment)
                       for mid, iid, cid, host, meta, assignment in s.members]
            described.append(DescribedGroup(error_code=ErrorCode.NONE, group_id=group_id, group_state=s.state,
                                            protocol_type=s.protocol_type, protocol_data=s.protocol,
                                            members=members, authorized_operations=ops))
        except Exception as exc:  # noqa: BLE001 - answered with its code
            described.append(_described_error(group_id, _code(exc, f"DescribeGroups {group_id!r}")))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=described)


def _described_error(group_id: str, code: int) -> object:
    return DescribedGroup(error_code=code, group_id=group_id, group_state="", protocol_type="", protocol_data="",
                          members=[], authorized_operations=INT32_MIN)


def describe_groups_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DescribeGroupsResponse(throttle_time_ms=0, groups=[_described_error(g, code) for g in body.groups])


# --- DeleteGroups ---

def handle_delete_groups(state: ServerState, ctx: RequestContext, body) -> object:
    coordinator = _coordinator(state)
    results = []
    for group_id in dict.fromkeys(body.groups_names):
        if not allowed(state, ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
            results.append(DeletableGroupResult(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        try:
            coordinator.delete_group(group_id)
            code: int = ErrorCode.NONE
        except Exception as exc:  # noqa: BLE001 - answered with its code
            code = _code(exc, f"DeleteGroups {group_id!r}")
        results.append(DeletableGroupResult(group_id=group_id, error_code=code))
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)


def delete_groups_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeletableGroupResult(group_id=g, error_code=code) for g in dict.fromkeys(body.groups_names)])


def _code(exc: Exception, what: str) -> int:
    if not is_expected(exc):
        log.exception("%s failed", what)
    return error_code_for(exc)
