"""Metadata (key 3), v0-v12: brokers, controller, cluster id and topic partitions (v10+ with
topic ids: KIP-848 assignments name topics by id, and librdkafka resolves them with
Metadata v12 requests by id).

Wire behaviour (PROTOCOL.md 3.7):

* Which topics: v0 with an empty list, or v1+ with a null list, means every topic; v1+
  with an empty list means none. Repeated names are answered once. A requested topic
  with a null name (v10+) is looked up by its topic id: UNKNOWN_TOPIC_ID when no topic
  has it (never auto-created).
* Unknown topics are created with the broker defaults (num.partitions) when
  auto.create.topics.enable is true and the request allows it (v4+
  ``allow_auto_topic_creation``; always allowed below v4, as in Kafka). The new topic is
  answered as ready at once: its logs exist before the response is written. Otherwise
  UNKNOWN_TOPIC_OR_PARTITION (3); an invalid name gets INVALID_TOPIC_EXCEPTION (17).
* The only broker is this node, at the host and port advertised for the listener the
  request came in on (the real bound port when the listener said port 0); it is also the
  controller (kafka-python's admin client loops while controller_id is -1) and the leader
  and only replica of every partition. leader_epoch (v7+) is the log's latest epoch.
* A partition whose log is missing or offline answers LEADER_NOT_AVAILABLE (5) with
  leader -1 and this node in offline_replicas (v5+).
* topic_authorized_operations (v8+) and cluster_authorized_operations (v8-10) are Kafka's
  "not requested" INT32_MIN unless asked for; then the bit field of what the principal
  may do (every supported operation with no authorizer; ``authz.py``).
* Authorization (Kafka's): listing every topic lists only those the principal may
  DESCRIBE (denials not audited); a requested topic it may not DESCRIBE is answered
  TOPIC_AUTHORIZATION_FAILED, whether or not it exists; auto-creation needs CREATE on
  the CLUSTER or on the topic (else TOPIC_AUTHORIZATION_FAILED); a topic id the
  principal may not DESCRIBE is answered as unknown (UNKNOWN_TOPIC_ID).
* Internal topics (``__consumer_offsets``, ``__transaction_state``) are listed like the
  others with is_internal=true (v1+), as Kafka does; clients leave them out of pattern
  subscriptions (exclude.internal.topics). Auto-creating ``__consumer_offsets`` goes
  through the group coordinator, so it gets its partition count and compaction.

Thread-safety: reads the topic manager's snapshots; auto-creation is serialised there.
"""

from __future__ import annotations

import logging

from broker.protocol import ErrorCode
from broker.protocol.messages.metadata import METADATA_RESPONSE
from broker.record.limits import INT32_MIN
from broker.server.errors import ApiError, error_code_for, is_expected
from broker.server.group import INTERNAL_TOPICS, OFFSETS_TOPIC
from broker.server.handlers import RequestContext, ServerState, leader_epoch_of
from broker.server.handlers.authz import CLUSTER_NAME, AclOperation, ResourceType, allowed, authorized_operations

log = logging.getLogger(__name__)

MetadataResponse = METADATA_RESPONSE.cls
Broker = METADATA_RESPONSE.structs["MetadataResponseBroker"]
Topic = METADATA_RESPONSE.structs["MetadataResponseTopic"]
Partition = METADATA_RESPONSE.structs["MetadataResponsePartition"]


def _topic_entry(state: ServerState, ctx: RequestContext, name: str, include_ops: bool) -> object:
    info = state.topics.get(name)
    if info is None:  # deleted since the name was listed
        return _error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    node = state.node_id
    partitions = []
    for p in range(info.partitions):
        lg = state.topics.get_log(name, p)
        if lg is None or lg.is_offline:
            partitions.append(Partition(error_code=ErrorCode.LEADER_NOT_AVAILABLE, partition_index=p,
                                        leader_id=-1, leader_epoch=-1, replica_nodes=[node],
                                        isr_nodes=[], offline_replicas=[node]))
        else:
            partitions.append(Partition(error_code=ErrorCode.NONE, partition_index=p, leader_id=node,
                                        leader_epoch=leader_epoch_of(lg), replica_nodes=[node],
                                        isr_nodes=[node], offline_replicas=[]))
    return Topic(error_code=ErrorCode.NONE, name=name, topic_id=info.topic_id, is_internal=name in INTERNAL_TOPICS,
                 partitions=partitions,
                 topic_authorized_operations=authorized_operations(state, ctx, ResourceType.TOPIC, name,
                                                                   include_ops))


def _error_topic(name, code: int, topic_id=None) -> object:
    topic = Topic(error_code=code, name=name, is_internal=False, partitions=[],
                  topic_authorized_operations=INT32_MIN)
    if topic_id is not None:
        topic.topic_id = topic_id
    return topic


def _name_of(state: ServerState, topic_id) -> str | None:
    for name in state.topics.topics():
        info = state.topics.get(name)
        if info is not None and info.topic_id == topic_id:
            return name
    return None


def _brokers(state: ServerState, ctx: RequestContext) -> list:
    host, port = state.advertised_endpoint(ctx.listener, ctx.local_address)
    return [Broker(node_id=state.node_id, host=host, port=port, rack=None)]


def handle(state: ServerState, ctx: RequestContext, body) -> object:
    version = ctx.api_version
    requested = body.topics
    include_ops = version >= 8 and body.include_topic_authorized_operations
    topics = []
    if requested is None or (version == 0 and not requested):
        for name in sorted(state.topics.topics()):
            if allowed(state, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name, audit=False):
                topics.append(_topic_entry(state, ctx, name, include_ops))
    else:
        allow_create = state.auto_create_topics and (version < 4 or body.allow_auto_topic_creation)
        seen = set()
        for t in requested:
            name = t.name
            if name is not None and name in seen:
                continue
            seen.add(name)
            if name is None:  # v10+ lookup by topic id
                found = _name_of(state, t.topic_id)
                if found is None or not allowed(state, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, found):
                    topics.append(_error_topic(None, ErrorCode.UNKNOWN_TOPIC_ID, t.topic_id))
                else:
                    topics.append(_topic_entry(state, ctx, found, include_ops))
                continue
            if not allowed(state, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                topics.append(_error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if state.topics.get(name) is None:
                try:
                    state.topics.validate_name(name)
                    if not allow_create:
                        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    if not (allowed(state, ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME,
                                    audit=False)
                            or allowed(state, ctx, AclOperation.CREATE, ResourceType.TOPIC, name)):
                        raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    if name == OFFSETS_TOPIC and state.group_coordinator is not None:
                        state.group_coordinator.ensure_offsets_topic()
                    else:
                        state.topics.auto_create(name)
                except Exception as exc:  # noqa: BLE001 - answered with its code
                    if not is_expected(exc):
                        log.exception("auto-creating topic %r failed", name)
                    topics.append(_error_topic(name, error_code_for(exc)))
                    continue
            topics.append(_topic_entry(state, ctx, name, include_ops))
    include_cluster_ops = 8 <= version <= 10 and body.include_cluster_authorized_operations
    return MetadataResponse(
        throttle_time_ms=0, brokers=_brokers(state, ctx), cluster_id=state.cluster_id,
        controller_id=state.node_id, topics=topics,
        cluster_authorized_operations=authorized_operations(state, ctx, ResourceType.CLUSTER, CLUSTER_NAME,
                                                            include_cluster_ops))


def error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return MetadataResponse(
        throttle_time_ms=0, brokers=_brokers(state, ctx), cluster_id=state.cluster_id,
        controller_id=state.node_id, topics=[_error_topic(t.name, code, getattr(t, "topic_id", None))
                                             for t in body.topics or []],
        cluster_authorized_operations=INT32_MIN)
