"""The KIP-848 consumer group APIs: ConsumerGroupHeartbeat (68) v0-1 and
ConsumerGroupDescribe (69) v0, over the ``GroupCoordinator`` (behaviour in
``broker.server.group.consumer_membership``).

Wire details:

* ConsumerGroupHeartbeat: partitions travel as (topic id, partitions); the owned
  ``TopicPartitions`` of the request (null: unchanged since the last heartbeat) are
  passed as {topic id: partitions}. The response's ``assignment`` is null unless the
  coordinator sends one; error_message carries Kafka's wording for the error.
  ``SubscribedTopicRegex`` exists from v1 (v0 requests have none).
* ConsumerGroupDescribe: per group, GROUP_ID_NOT_FOUND for a group that does not exist or
  is not a consumer group, INVALID_GROUP_ID for ""; otherwise the group's state
  ("Empty", "Assigning", "Reconciling", "Stable"), group and assignment epochs, the
  assignor of the last target assignment and each member's epoch, subscription, current
  assignment and target assignment (topic names resolved from the ids; a deleted
  topic's partitions are listed with an empty name). authorized_operations when asked
  (``authz.py``).
* Authorization (Kafka's): the heartbeat needs READ on the group
  (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed topic name
  (TOPIC_AUTHORIZATION_FAILED naming them); ConsumerGroupDescribe DESCRIBE on each group.
  Topics a regex subscription matches are not filtered by ACLs (Kafka 4 does).

Thread-safety: handlers keep no state; the coordinator is thread-safe.
"""

from __future__ import annotations

from typing import Any

from broker.protocol import ErrorCode
from broker.protocol.messages.consumer_group_describe import CONSUMER_GROUP_DESCRIBE_RESPONSE
from broker.protocol.messages.consumer_group_heartbeat import CONSUMER_GROUP_HEARTBEAT_RESPONSE
from broker.record.limits import INT32_MIN
from broker.server.handlers import RequestContext, ServerState
from broker.server.handlers.authz import AclOperation, ResourceType, allowed, allowed_names, authorized_operations
from broker.server.handlers.group import _coordinator
from broker.server.handlers.group_membership import client_host

HeartbeatResponse = CONSUMER_GROUP_HEARTBEAT_RESPONSE.cls
HbAssignment = CONSUMER_GROUP_HEARTBEAT_RESPONSE.structs["Assignment"]
HbTopicPartitions = CONSUMER_GROUP_HEARTBEAT_RESPONSE.structs["TopicPartitions"]
DescribeResponse = CONSUMER_GROUP_DESCRIBE_RESPONSE.cls
DescribedGroup = CONSUMER_GROUP_DESCRIBE_RESPONSE.structs["DescribedGroup"]
DescribedMember = CONSUMER_GROUP_DESCRIBE_RESPONSE.structs["Member"]
DescribedAssignment = CONSUMER_GROUP_DESCRIBE_RESPONSE.structs["Assignment"]
DescribedTopicPartitions = CONSUMER_GROUP_DESCRIBE_RESPONSE.structs["TopicPartitions"]


def heartbeat_denied(state: ServerState, ctx: RequestContext, group_id: str,
                     topics: list[str] | None) -> tuple[int, str | None] | None:
    """Kafka's checks of a group heartbeat (consumer or share): READ on the group, DESCRIBE on
    every subscribed topic name; the (code, message) of a denial, None when allowed."""
    if not allowed(state, ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    if topics and state.authorizer is not None:
        names = set(topics)
        denied = names - allowed_names(state, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        if denied:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Topic authorization failed for topics {sorted(denied)}"
    return None


def handle_heartbeat(state: ServerState, ctx: RequestContext, body) -> object:
    denial = heartbeat_denied(state, ctx, body.group_id, body.subscribed_topic_names)
    if denial is not None:
        response = heartbeat_error_response(state, ctx, body, denial[0])
        response.error_message = denial[1]
        return response
    owned: dict[Any, frozenset[int]] | None = None  # topic id -> partitions
    if body.topic_partitions is not None:
        owned = {}
        for tp in body.topic_partitions:
            if tp.partitions:
                owned[tp.topic_id] = frozenset(owned.get(tp.topic_id, frozenset()) | set(tp.partitions))
    regex = body.subscribed_topic_regex if ctx.api_version >= 1 else None
    r = _coordinator(state).consumer_group_heartbeat(
        body.group_id, body.member_id, body.member_epoch, body.instance_id, body.rack_id, body.rebalance_timeout_ms,
        body.subscribed_topic_names, regex, body.server_assignor, owned, ctx.header.client_id or "",
        client_host(ctx))
    assignment = None
    if r.assignment is not None:
        assignment = HbAssignment(topic_partitions=[
            HbTopicPartitions(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(r.assignment.items(), key=lambda kv: str(kv[0])) if ps])
    return HeartbeatResponse(throttle_time_ms=0, error_code=r.error, error_message=r.message,
                             member_id=r.member_id if r.error == ErrorCode.NONE else None,
                             member_epoch=r.member_epoch if r.error == ErrorCode.NONE else -1,
                             heartbeat_interval_ms=r.heartbeat_interval_ms, assignment=assignment)


def heartbeat_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> Any:
    return HeartbeatResponse(throttle_time_ms=0, error_code=code, error_message=None, member_id=None,
                             member_epoch=-1, heartbeat_interval_ms=0, assignment=None)


def _described_assignment(assignment, names: dict) -> object:
    return DescribedAssignment(topic_partitions=[
        DescribedTopicPartitions(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(ps))
        for t, ps in sorted(assignment.items(), key=lambda kv: names.get(kv[0], str(kv[0]))) if ps])


def handle_describe(state: ServerState, ctx: RequestContext, body) -> object:
    coordinator = _coordinator(state)
    groups = []
    names = {}
    for name in state.topics.topics():
        info = state.topics.get(name)
        if info is not None:
            names[info.topic_id] = name
    for group_id in body.group_ids:
        if not allowed(state, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None,
                                         group_id=group_id, group_state="", group_epoch=-1, assignment_epoch=-1,
                                         assignor_name="", members=[], authorized_operations=INT32_MIN))
            continue
        ops = authorized_operations(state, ctx, ResourceType.GROUP, group_id, body.include_authorized_operations)
        with coordinator.mlock:  # a consistent view of the group while it is copied out
            code, message, cg = coordinator.describe_consumer_group(group_id)
            if cg is None:
                groups.append(DescribedGroup(error_code=code, error_message=message, group_id=group_id,
                                             group_state="Dead", group_epoch=-1, assignment_epoch=-1,
                                             assignor_name="", members=[], authorized_operations=INT32_MIN))
                continue
            members = [DescribedMember(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_described_assignment(m.assigned, names),
                target_assignment=_described_assignment(cg.target.get(m.member_id, {}), names))
                for m in cg.members.values()]
            groups.append(DescribedGroup(error_code=ErrorCode.NONE, error_message=None, group_id=group_id,
                                         group_state=cg.state(), group_epoch=cg.group_epoch,
                                         assignment_epoch=cg.assignment_epoch,
                                         assignor_name=cg.assignor or coordinator.consumer_assignors[0],
                                         members=members, authorized_operations=ops))
    return DescribeResponse(throttle_time_ms=0, groups=groups)


def describe_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DescribeResponse(throttle_time_ms=0, groups=[
        DescribedGroup(error_code=code, error_message=None, group_id=g, group_state="", group_epoch=-1,
                       assignment_epoch=-1, assignor_name="", members=[], authorized_operations=INT32_MIN)
        for g in body.group_ids])
