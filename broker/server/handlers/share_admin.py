"""The share groups' admin and state APIs (KIP-932, Kafka 4.2's versions):
DescribeShareGroupOffsets (90) v0-1, AlterShareGroupOffsets (91) v0,
DeleteShareGroupOffsets (92) v0, and the share coordinator's state RPCs
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85) v0-1,
DeleteShareGroupState (86), ReadShareGroupStateSummary (87) v0-1.

Wire details:

* DescribeShareGroupOffsets: per group (GROUP_ID_NOT_FOUND for a missing group or one of
  another type), the topics asked for (null: every partition with share state), each
  partition's start offset (-1 without state), leader epoch and, from v1, its lag: the
  records from the start offset to the high watermark not yet acknowledged or archived
  (Kafka's KIP-1226 lag). Needs DESCRIBE on the group; topics the principal may not
  DESCRIBE are left out.
* AlterShareGroupOffsets: the group must have no member (NON_EMPTY_GROUP); a missing group
  is created; each partition starts over at the given offset with a new state epoch.
  Needs READ on the group and on each topic.
* DeleteShareGroupOffsets: the group must have no member; every partition of the topics
  loses its share state (the next fetch starts at ``share.auto.offset.reset``). Needs
  DELETE on the group and READ on each topic.
* The state RPCs are the persister's, served to principals with CLUSTER_ACTION on the
  cluster (``apis.CLUSTER_OPERATIONS``), as in Kafka: they read and change
  ``__share_group_state`` through the ``ShareCoordinator``; a change made this way drops
  the broker's live copy of that share-partition, which is reloaded on its next use.

Thread-safety: handlers keep no state; the coordinators and the manager are thread-safe.
"""

from __future__ import annotations

import uuid
from typing import Any

from broker.protocol import ErrorCode
from broker.protocol.messages.alter_share_group_offsets import ALTER_SHARE_GROUP_OFFSETS_RESPONSE
from broker.protocol.messages.delete_share_group_offsets import DELETE_SHARE_GROUP_OFFSETS_RESPONSE
from broker.protocol.messages.delete_share_group_state import DELETE_SHARE_GROUP_STATE_RESPONSE
from broker.protocol.messages.describe_share_group_offsets import DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE
from broker.protocol.messages.initialize_share_group_state import INITIALIZE_SHARE_GROUP_STATE_RESPONSE
from broker.protocol.messages.read_share_group_state import READ_SHARE_GROUP_STATE_RESPONSE
from broker.protocol.messages.read_share_group_state_summary import READ_SHARE_GROUP_STATE_SUMMARY_RESPONSE
from broker.protocol.messages.write_share_group_state import WRITE_SHARE_GROUP_STATE_RESPONSE
from broker.server.errors import ApiError
from broker.server.handlers import RequestContext, ServerState, leader_epoch_of
from broker.server.handlers.authz import AclOperation, ResourceType, allowed, allowed_names
from broker.server.handlers.group import _coordinator
from broker.server.handlers.share import _manager

DescribeResponse = DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE.cls
DescribeGroup = DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE.structs["DescribeShareGroupOffsetsResponseGroup"]
DescribeTopic = DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE.structs["DescribeShareGroupOffsetsResponseTopic"]
DescribePartition = DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE.structs["DescribeShareGroupOffsetsResponsePartition"]
AlterResponse = ALTER_SHARE_GROUP_OFFSETS_RESPONSE.cls
AlterTopic = ALTER_SHARE_GROUP_OFFSETS_RESPONSE.structs["AlterShareGroupOffsetsResponseTopic"]
AlterPartition = ALTER_SHARE_GROUP_OFFSETS_RESPONSE.structs["AlterShareGroupOffsetsResponsePartition"]
DeleteResponse = DELETE_SHARE_GROUP_OFFSETS_RESPONSE.cls
DeleteTopic = DELETE_SHARE_GROUP_OFFSETS_RESPONSE.structs["DeleteShareGroupOffsetsResponseTopic"]
_ZERO = uuid.UUID(int=0)  # the topic id of a topic that does not exist


# --- DescribeShareGroupOffsets ---

def _share_group_error(state: ServerState, group_id: str) -> tuple[int, str | None]:
    coordinator = _coordinator(state)
    with coordinator.mlock:
        code, message, _sg = coordinator.describe_share_group(group_id)
    return code, message


def handle_describe_offsets(state: ServerState, ctx: RequestContext, body) -> object:
    manager = _manager(state)
    groups = []
    for g in body.groups:
        if not allowed(state, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
            groups.append(DescribeGroup(group_id=g.group_id, topics=[], error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                        error_message=None))
            continue
        code, message = _share_group_error(state, g.group_id)
        if code != ErrorCode.NONE:
            groups.append(DescribeGroup(group_id=g.group_id, topics=[], error_code=code, error_message=message))
            continue
        starts = manager.start_offsets(g.group_id)
        wanted: dict[str, list[int] | None] = {}
        if g.topics is None:
            for (_group, topic_id, partition) in starts:
                name = manager.topic_name(topic_id)
                if name is not None:
                    wanted.setdefault(name, []).append(partition)  # type: ignore[union-attr]
        else:
            for t in g.topics:
                wanted[t.topic_name] = list(t.partitions)
        visible = allowed_names(state, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, set(wanted))
        topics = []
        for name in sorted(wanted):
            if name not in visible:
                continue
            info = state.topics.get(name)
            partitions = []
            for p in sorted(wanted[name] or ()):
                if info is None or not 0 <= p < info.partitions:
                    partitions.append(DescribePartition(partition_index=p, start_offset=-1, leader_epoch=-1, lag=-1,
                                                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                        error_message=None))
                    continue
                lg = state.topics.get_log(name, p)
                start = starts.get((g.group_id, info.topic_id, p))
                if start is None:
                    partitions.append(DescribePartition(partition_index=p, start_offset=-1,
                                                        leader_epoch=leader_epoch_of(lg), lag=-1,
                                                        error_code=ErrorCode.NONE, error_message=None))
                    continue
                offset, done = start
                hw = lg.high_watermark if lg is not None else offset
                lag = max(hw - max(offset, lg.log_start_offset if lg is not None else offset) - done, 0)
                partitions.append(DescribePartition(partition_index=p, start_offset=offset,
                                                    leader_epoch=leader_epoch_of(lg), lag=lag,
                                                    error_code=ErrorCode.NONE, error_message=None))
            topics.append(DescribeTopic(topic_name=name, topic_id=info.topic_id if info is not None else _ZERO,
                                        partitions=partitions))
        groups.append(DescribeGroup(group_id=g.group_id, topics=topics, error_code=ErrorCode.NONE,
                                    error_message=None))
    return DescribeResponse(throttle_time_ms=0, groups=groups)


def describe_offsets_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DescribeResponse(throttle_time_ms=0, groups=[
        DescribeGroup(group_id=g.group_id, topics=[], error_code=code, error_message=None) for g in body.groups])


# --- AlterShareGroupOffsets / DeleteShareGroupOffsets ---

def _check_empty(state: ServerState, group_id: str, create: bool) -> None:
    coordinator = _coordinator(state)
    with coordinator.mlock:
        code, message, sg = coordinator.describe_share_group(group_id)
        missing = code == ErrorCode.GROUP_ID_NOT_FOUND and "not a share group" not in (message or "")
        if sg is None and create and missing:
            sg = coordinator.ensure_share_group(group_id)
        if sg is None:
            raise ApiError(ErrorCode(code), message)
        if sg.members:
            raise ApiError(ErrorCode.NON_EMPTY_GROUP,
                           f"The group {group_id} has active members: stop them before changing its offsets.")


def handle_alter_offsets(state: ServerState, ctx: RequestContext, body) -> object:
    manager = _manager(state)
    if not allowed(state, ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return alter_offsets_error_response(state, ctx, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    try:
        _check_empty(state, body.group_id, create=True)
    except ApiError as exc:
        return AlterResponse(throttle_time_ms=0, error_code=exc.code, error_message=exc.message, responses=[])
    readable = allowed_names(state, ctx, AclOperation.READ, ResourceType.TOPIC, {t.topic_name for t in body.topics})
    out = []
    for t in body.topics:
        info = state.topics.get(t.topic_name)
        partitions = []
        for p in t.partitions:
            code, message = ErrorCode.NONE, None
            if t.topic_name not in readable:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < info.partitions:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                lg = state.topics.get_log(t.topic_name, p.partition_index)
                offset = p.start_offset
                if offset < 0 or lg is None or offset > lg.log_end_offset:
                    code, message = ErrorCode.INVALID_REQUEST, f"start offset {offset} is outside the log"
                else:
                    try:
                        manager.reset_offset((body.group_id, info.topic_id, p.partition_index),
                                             max(offset, lg.log_start_offset), leader_epoch_of(lg))
                    except ApiError as exc:
                        code, message = exc.code, exc.message
            partitions.append(AlterPartition(partition_index=p.partition_index, error_code=code, error_message=message))
        out.append(AlterTopic(topic_name=t.topic_name, topic_id=info.topic_id if info is not None else _ZERO,
                              partitions=partitions))
    return AlterResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=out)


def alter_offsets_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return AlterResponse(throttle_time_ms=0, error_code=code, error_message=None, responses=[])


def handle_delete_offsets(state: ServerState, ctx: RequestContext, body) -> object:
    manager = _manager(state)
    if not allowed(state, ctx, AclOperation.DELETE, ResourceType.GROUP, body.group_id):
        return delete_offsets_error_response(state, ctx, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    try:
        _check_empty(state, body.group_id, create=False)
    except ApiError as exc:
        return DeleteResponse(throttle_time_ms=0, error_code=exc.code, error_message=exc.message, responses=[])
    readable = allowed_names(state, ctx, AclOperation.READ, ResourceType.TOPIC, {t.topic_name for t in body.topics})
    keys = manager.partitions_of(body.group_id)
    out = []
    for t in body.topics:
        info = state.topics.get(t.topic_name)
        code, message = ErrorCode.NONE, None
        if t.topic_name not in readable:
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif info is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            try:
                manager.delete_state([k for k in keys if k[1] == info.topic_id])
            except ApiError as exc:
                code, message = exc.code, exc.message
        out.append(DeleteTopic(topic_name=t.topic_name, topic_id=info.topic_id if info is not None else _ZERO,
                               error_code=code, error_message=message))
    return DeleteResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=out)


def delete_offsets_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DeleteResponse(throttle_time_ms=0, error_code=code, error_message=None, responses=[])


# --- the share coordinator's state RPCs (CLUSTER_ACTION) ---

def _state_results(body, response, result_name: str, fn) -> object:
    """Run ``fn(key, partition request) -> dict of extra fields`` per partition."""
    result_cls = response.structs[result_name]
    partition_cls = response.structs["PartitionResult"]
    results = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            fields: dict[str, Any] = {}
            code, message = ErrorCode.NONE, None
            try:
                fields = fn((body.group_id, t.topic_id, p.partition), p)
            except ApiError as exc:
                code, message = exc.code, exc.message
            partitions.append(partition_cls(partition=p.partition, error_code=code, error_message=message, **fields))
        results.append(result_cls(topic_id=t.topic_id, partitions=partitions))
    return response.cls(results=results)


def handle_initialize_state(state: ServerState, ctx: RequestContext, body) -> object:
    manager = _manager(state)

    def init(key, p) -> dict:
        manager.invalidate(key)
        manager.coordinator.initialize(key, p.state_epoch, p.start_offset)
        return {}
    return _state_results(body, INITIALIZE_SHARE_GROUP_STATE_RESPONSE, "InitializeStateResult", init)


def handle_read_state(state: ServerState, ctx: RequestContext, body) -> object:
    manager = _manager(state)
    batch_cls = READ_SHARE_GROUP_STATE_RESPONSE.structs["StateBatch"]

    def read(key, p) -> dict:
        persisted = manager.coordinator.read(key)
        if persisted is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "the share-partition has no state")
        return {"state_epoch": persisted.state_epoch, "start_offset": persisted.start_offset,
                "state_batches": [batch_cls(first_offset=b.first_offset, last_offset=b.last_offset,
                                            delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                  for b in persisted.batches]}
    return _state_results(body, READ_SHARE_GROUP_STATE_RESPONSE, "ReadStateResult", read)


def handle_write_state(state: ServerState, ctx: RequestContext, body) -> object:
    from broker.server.share.partition import StateBatch

    manager = _manager(state)

    def write(key, p) -> dict:
        manager.invalidate(key)
        manager.coordinator.write(key, p.state_epoch, p.leader_epoch, p.start_offset,
                                  [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                   for b in p.state_batches])
        return {}
    return _state_results(body, WRITE_SHARE_GROUP_STATE_RESPONSE, "WriteStateResult", write)


def handle_delete_state(state: ServerState, ctx: RequestContext, body) -> object:
    manager = _manager(state)

    def delete(key, p) -> dict:
        manager.delete_state([key])
        return {}
    return _state_results(body, DELETE_SHARE_GROUP_STATE_RESPONSE, "DeleteStateResult", delete)


def handle_read_state_summary(state: ServerState, ctx: RequestContext, body) -> object:
    manager = _manager(state)

    def summary(key, p) -> dict:
        persisted = manager.coordinator.read(key)
        if persisted is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "the share-partition has no state")
        done = sum(b.last_offset - b.first_offset + 1 for b in persisted.batches if b.delivery_state in (2, 4))
        return {"state_epoch": persisted.state_epoch, "leader_epoch": persisted.leader_epoch,
                "start_offset": persisted.start_offset, "delivery_complete_count": done}
    return _state_results(body, READ_SHARE_GROUP_STATE_SUMMARY_RESPONSE, "ReadStateSummaryResult", summary)


def state_error_response(response: Any, result_name: str):
    def build(state: ServerState, ctx: RequestContext, body, code: int) -> object:
        result_cls = response.structs[result_name]
        partition_cls = response.structs["PartitionResult"]
        return response.cls(results=[result_cls(topic_id=t.topic_id, partitions=[
            partition_cls(partition=p.partition, error_code=code, error_message=None) for p in t.partitions])
            for t in body.topics])
    return build


initialize_state_error_response = state_error_response(INITIALIZE_SHARE_GROUP_STATE_RESPONSE, "InitializeStateResult")
read_state_error_response = state_error_response(READ_SHARE_GROUP_STATE_RESPONSE, "ReadStateResult")
write_state_error_response = state_error_response(WRITE_SHARE_GROUP_STATE_RESPONSE, "WriteStateResult")
delete_state_error_response = state_error_response(DELETE_SHARE_GROUP_STATE_RESPONSE, "DeleteStateResult")
read_state_summary_error_response = state_error_response(READ_SHARE_GROUP_STATE_SUMMARY_RESPONSE,
                                                         "ReadStateSummaryResult")
