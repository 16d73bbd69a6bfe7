"""ListOffsets (key 2), v1-v10, and DeleteRecords (key 21), v0-v1.

ListOffsets wire behaviour (PROTOCOL.md 3.7; v6+ flexible):

* timestamp -2 (earliest): the log start offset; -1 (latest): the high watermark, or the
  last stable offset for read_committed (isolation_level 1, v2+); -3 (max timestamp,
  KIP-734, v7+): the offset and timestamp of the record with the largest timestamp; any
  other value: the first offset whose record timestamp is >= it, or offset -1 /
  timestamp -1 when there is none (also when that offset is not yet visible at the
  isolation level).
* Tiered storage (KIP-405): -2 is the log start offset, which may lie in remote storage
  (below the local log start offset); -4 (earliest local, v8+) is the local log start
  offset, answered like -2 (never hidden by the visibility check: when every segment is
  tiered it equals the high watermark and is still the answer); -5 (latest tiered,
  KIP-1005, v9+) is the highest offset in remote storage (-1 when none, or the topic has
  no remote storage). A timestamp, and -3, are searched in the remote segments too
  (``UnifiedLog.fetch_offset_by_timestamp`` with the remote log manager as its
  ``remote_reader``). v10's timeout_ms (KIP-1075) is accepted and unused: remote lookups
  are answered synchronously. As in Kafka the broker does not tie a special timestamp
  to a version (the client's builder picks the minimum version for what it asks).
* Answers carry offset, timestamp (-1 for -2/-1/-4/-5) and, from v4, the leader epoch
  of that offset (-1 when unknown). v0's old_style_offsets is not served (min version 1).
* Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; offline directory:
  KAFKA_STORAGE_ERROR. Duplicate partitions are answered as asked.

DeleteRecords: moves a partition's log start offset (offset -1 = the high watermark);
OFFSET_OUT_OF_RANGE past the high watermark; answers the new low watermark. The segments
wholly below it are removed by the next retention pass, as in Kafka. An internal topic
(``__consumer_offsets``) gets INVALID_TOPIC_EXCEPTION.

Authorization (Kafka's, ``authz.py``): ListOffsets needs DESCRIBE on each topic,
DeleteRecords DELETE (else the topic's partitions TOPIC_AUTHORIZATION_FAILED).

Thread-safety: ``fetch_offset_by_timestamp`` is a lock-free read; the log start offset
move takes the log's lock.
"""

from __future__ import annotations

import logging

from broker.log.unified_log import EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from broker.protocol import ErrorCode
from broker.protocol.messages.delete_records import DELETE_RECORDS_RESPONSE
from broker.protocol.messages.list_offsets import LIST_OFFSETS_RESPONSE
from broker.server.errors import error_code_for, log_failure
from broker.server.group import INTERNAL_TOPICS
from broker.server.handlers import RequestContext, ServerState
from broker.server.handlers.authz import AclOperation, ResourceType, allowed_names

log = logging.getLogger(__name__)

ListOffsetsResponse = LIST_OFFSETS_RESPONSE.cls
TopicResponse = LIST_OFFSETS_RESPONSE.structs["ListOffsetsTopicResponse"]
PartitionResponse = LIST_OFFSETS_RESPONSE.structs["ListOffsetsPartitionResponse"]

DeleteRecordsResponse = DELETE_RECORDS_RESPONSE.cls
DeleteTopicResult = DELETE_RECORDS_RESPONSE.structs["DeleteRecordsTopicResult"]
DeletePartitionResult = DELETE_RECORDS_RESPONSE.structs["DeleteRecordsPartitionResult"]

READ_COMMITTED = 1


def _error(index: int, code: int) -> object:
    return PartitionResponse(partition_index=index, error_code=code, timestamp=-1, offset=-1, leader_epoch=-1)


def _lookup(lg, timestamp: int, read_committed: bool) -> tuple[int, int, int]:
    """(offset, timestamp, leader epoch) for one partition."""
    visible = lg.last_stable_offset if read_committed else lg.high_watermark
    if timestamp == LATEST_TIMESTAMP:
        epoch = lg.leader_epoch_cache.epoch_for_offset(visible) if lg.leader_epoch_cache else None
        return visible, -1, -1 if epoch is None else epoch
    found = lg.fetch_offset_by_timestamp(timestamp)
    if found is None:
        return -1, -1, -1
    if timestamp not in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP) and found.offset >= visible:
        return -1, -1, -1
    epoch = -1 if found.leader_epoch is None else found.leader_epoch
    return found.offset, found.timestamp, epoch


def handle(state: ServerState, ctx: RequestContext, body) -> object:
    read_committed = ctx.api_version >= 2 and body.isolation_level == READ_COMMITTED
    visible = allowed_names(state, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in body.topics))
    topics = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            index = p.partition_index
            if t.name not in visible:
                partitions.append(_error(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            lg = state.topics.get_log(t.name, index) if state.topics.get(t.name) is not None else None
            if lg is None:
                partitions.append(_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                offset, ts, epoch = _lookup(lg, p.timestamp, read_committed)
            except Exception as exc:  # noqa: BLE001 - every error becomes a code
                log_failure(log, exc, "ListOffsets of %s-%d failed", t.name, index)
                partitions.append(_error(index, error_code_for(exc)))
                continue
            partitions.append(PartitionResponse(partition_index=index, error_code=ErrorCode.NONE,
                                                timestamp=ts, offset=offset, leader_epoch=epoch))
        topics.append(TopicResponse(name=t.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return ListOffsetsResponse(throttle_time_ms=0, topics=[
        TopicResponse(name=t.name, partitions=[_error(p.partition_index, code) for p in t.partitions])
        for t in body.topics])


# --- DeleteRecords ---

def handle_delete_records(state: ServerState, ctx: RequestContext, body) -> object:
    deletable = allowed_names(state, ctx, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in body.topics))
    topics = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            index = p.partition_index
            if t.name not in deletable:
                partitions.append(DeletePartitionResult(partition_index=index, low_watermark=-1,
                                                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            lg = state.topics.get_log(t.name, index) if state.topics.get(t.name) is not None else None
            if lg is None:
                partitions.append(DeletePartitionResult(partition_index=index, low_watermark=-1,
                                                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if t.name in INTERNAL_TOPICS:  # Kafka: "Cannot delete records of internal topic"
                partitions.append(DeletePartitionResult(partition_index=index, low_watermark=-1,
                                                        error_code=ErrorCode.INVALID_TOPIC_EXCEPTION))
                continue
            try:
                offset = lg.high_watermark if p.offset == -1 else p.offset
                if offset < 0:
                    raise ValueError(f"offset {offset}")
                lg.maybe_increment_log_start_offset(offset, "client delete records")
                code, low = ErrorCode.NONE, lg.log_start_offset
            except ValueError:
                code, low = ErrorCode.OFFSET_OUT_OF_RANGE, -1
            except Exception as exc:  # noqa: BLE001 - every error becomes a code
                log_failure(log, exc, "DeleteRecords of %s-%d failed", t.name, index)
                code, low = error_code_for(exc), -1
            partitions.append(DeletePartitionResult(partition_index=index, low_watermark=low, error_code=code))
        topics.append(DeleteTopicResult(name=t.name, partitions=partitions))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def delete_records_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DeleteRecordsResponse(throttle_time_ms=0, topics=[
        DeleteTopicResult(name=t.name, partitions=[
            DeletePartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=code)
            for p in t.partitions])
        for t in body.topics])
