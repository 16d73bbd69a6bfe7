"""OffsetForLeaderEpoch (key 23), v2-v3 (librdkafka sends exactly v2, KIP-320).

Wire behaviour (Kafka's ``Partition.lastOffsetForLeaderEpoch``):

* current_leader_epoch (-1 = not checked) is compared with the partition's leader epoch:
  older gets FENCED_LEADER_EPOCH (74), newer UNKNOWN_LEADER_EPOCH (75).
* Otherwise the answer is the log's epoch cache lookup: the largest epoch <= the
  requested one and the start offset of the next epoch, or the log end offset for the
  latest epoch; epoch -1 / offset -1 for an unknown (too new or undefined) epoch.
* Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; offline directory:
  KAFKA_STORAGE_ERROR. replica_id (v3+) is ignored (no followers on a single node).

Thread-safety: the epoch cache has its own lock.
"""

from __future__ import annotations

import logging

from broker.protocol import ErrorCode
from broker.protocol.messages.offset_for_leader_epoch import OFFSET_FOR_LEADER_EPOCH_RESPONSE
from broker.server.errors import error_code_for, is_expected
from broker.server.handlers import RequestContext, ServerState, leader_epoch_of
from broker.server.handlers.authz import AclOperation, ResourceType, allowed_names

log = logging.getLogger(__name__)

OffsetForLeaderEpochResponse = OFFSET_FOR_LEADER_EPOCH_RESPONSE.cls
TopicResult = OFFSET_FOR_LEADER_EPOCH_RESPONSE.structs["OffsetForLeaderTopicResult"]
EpochEndOffset = OFFSET_FOR_LEADER_EPOCH_RESPONSE.structs["EpochEndOffset"]


def _error(index: int, code: int) -> object:
    return EpochEndOffset(error_code=code, partition=index, leader_epoch=-1, end_offset=-1)


def _lookup(lg, index: int, current: int, requested: int) -> object:
    epoch = leader_epoch_of(lg)
    if current >= 0 and current < epoch:
        return _error(index, ErrorCode.FENCED_LEADER_EPOCH)
    if current > epoch:
        return _error(index, ErrorCode.UNKNOWN_LEADER_EPOCH)
    cache = lg.leader_epoch_cache
    if cache is None:
        return _error(index, ErrorCode.NONE)
    found_epoch, end_offset = cache.end_offset_for(requested, lg.log_end_offset)
    return EpochEndOffset(error_code=ErrorCode.NONE, partition=index, leader_epoch=found_epoch,
                          end_offset=end_offset)


def handle(state: ServerState, ctx: RequestContext, body) -> object:
    visible = allowed_names(state, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in body.topics))
    topics = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            if t.topic not in visible:  # Kafka: a consumer needs DESCRIBE on the topic
                partitions.append(_error(p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            lg = state.topics.get_log(t.topic, p.partition) if state.topics.get(t.topic) is not None else None
            if lg is None:
                partitions.append(_error(p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                partitions.append(_lookup(lg, p.partition, p.current_leader_epoch, p.leader_epoch))
            except Exception as exc:  # noqa: BLE001 - answered with its code
                if not is_expected(exc):
                    log.exception("OffsetForLeaderEpoch of %s-%d failed", t.topic, p.partition)
                partitions.append(_error(p.partition, error_code_for(exc)))
        topics.append(TopicResult(topic=t.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


def error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[
        TopicResult(topic=t.topic, partitions=[_error(p.partition, code) for p in t.partitions])
        for t in body.topics])
