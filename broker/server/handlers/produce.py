"""Produce (key 0), served v3-v12 (v0-v2 are advertised for old librdkafka's compression
check but close the connection, as in Kafka 4: ``broker.server.apis``; v9+ are flexible,
v12 is transaction version 2).

Wire behaviour:

* acks must be 0, 1 or -1 (else INVALID_REQUIRED_ACKS, 21, for every partition). With
  one replica acks=1 and acks=all are the same: the response is sent once the batches
  are in the log (and fsynced when flush.messages says so).
* acks=0: no response at all (``NO_RESPONSE``); if any partition failed the connection
  is closed instead (``CLOSE_CONNECTION``), which is how Kafka tells such a producer.
* Per partition the records (whole v2 batches, stored byte for byte after the offsets
  and leader epoch are stamped in place: the request frame is a private writable buffer,
  so nothing is copied) go to ``UnifiedLog.append_as_leader``; its exceptions map to
  Kafka's codes (``broker.server.errors``): CORRUPT_MESSAGE, INVALID_RECORD,
  MESSAGE_TOO_LARGE (a batch over max.message.bytes), RECORD_LIST_TOO_LARGE (records
  larger than the topic's segment size), INVALID_TIMESTAMP, OUT_OF_ORDER_SEQUENCE_NUMBER,
  INVALID_PRODUCER_EPOCH, UNSUPPORTED_FOR_MESSAGE_FORMAT, KAFKA_STORAGE_ERROR. Every
  record of every batch is checked first (``broker.log.validator``): a batch whose records
  do not parse is CORRUPT_MESSAGE, one inflating past its budget MESSAGE_TOO_LARGE, and
  from v8 on records at fault are named in ``record_errors`` (KIP-467: a null key on a
  compacted topic or an offset delta out of order, INVALID_RECORD; a timestamp out of
  range, INVALID_TIMESTAMP), with ``error_message`` set. Nothing is appended then.
  A retried batch of an idempotent producer is answered with its original base offset.
* zstd batches in Produce below v7 get UNSUPPORTED_COMPRESSION_TYPE (76) (KIP-110).
* Unknown topics or partitions get UNKNOWN_TOPIC_OR_PARTITION (3): topics are
  auto-created by Metadata (which every producer asks first), not by Produce.
* A transactional batch goes in only when its partition is in its producer's Ongoing
  transaction (AddPartitionsToTxn), else INVALID_TXN_STATE (48): the simple form of
  Kafka's verification; the append then happens under the transaction's lock
  (``TransactionCoordinator.produce_guard``), so no marker slips in between. A fenced
  epoch gets INVALID_PRODUCER_EPOCH. From v12, with transaction version 2 finalized, the
  batch adds its partition to the transaction itself (KIP-890 part 2).
* Internal topics (``__consumer_offsets``, ``__transaction_state``) get
  INVALID_TOPIC_EXCEPTION (17), "Cannot append to internal topic", as in Kafka.
* The response gives base_offset, log_append_time_ms (-1 for CreateTime topics) and
  log_start_offset (v5+); every successful append wakes the fetches waiting on that
  partition (``PartitionWatchers.notify``).

Authorization (Kafka's, ``authz.py``): a transactional produce needs WRITE on its
transactional id (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED); each topic
needs WRITE (else its partitions TOPIC_AUTHORIZATION_FAILED, the others still appended).

Thread-safety: appends to one partition are serialised by the log; handlers run
concurrently for different connections.
"""

from __future__ import annotations

import logging

from broker.protocol import ErrorCode
from broker.protocol.produce_fast import ProduceRequestData, ProduceResult
from broker.record.batch import (
    COMPRESSION_CODEC_MASK,
    CURRENT_MAGIC,
    H_ATTRIBUTES,
    H_BATCH_LENGTH,
    H_MAGIC,
    H_PRODUCER_EPOCH,
    H_PRODUCER_ID,
    HEADER,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
    iter_batch_headers,
)
from broker.server.errors import ApiError, error_code_for, is_expected
from broker.server.group import INTERNAL_TOPICS
from broker.server.handlers import (
    CLOSE_CONNECTION,
    NO_RESPONSE,
    RequestContext,
    ServerState,
    leader_epoch_of,
    throttling,
)
from broker.server.handlers.authz import AclOperation, ResourceType, allowed, allowed_names

log = logging.getLogger(__name__)

ZSTD = 4
ZSTD_MIN_PRODUCE_VERSION = 7
_NONE = ErrorCode.NONE
_HEADER_UNPACK = HEADER.unpack_from
_HEADER_SIZE = HEADER.size
_MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD


def _partition_error(index: int, code: int, message: str | None = None,
                     record_errors: list | None = None) -> tuple:
    """A partition's answer (``ProduceResult``'s partition tuple) for a failed append."""
    return (index, code, -1, -1, -1, record_errors or [], message)


def _record_errors(exc: Exception) -> list:
    """KIP-467: the records at fault, ``(batch_index, message)`` pairs set on the log's
    InvalidRecordError / InvalidTimestampError (``broker.log.validator``)."""
    return [(i, message) for i, message in getattr(exc, "record_errors", None) or ()]


def _has_zstd(records) -> bool:
    try:
        return any(h.attributes & COMPRESSION_CODEC_MASK == ZSTD for _, h in iter_batch_headers(records))
    except Exception:  # noqa: BLE001 - malformed batches are rejected by the log's validator
        return False


def _transactional_header(records) -> tuple | None:
    """The header fields (``HEADER``'s tuple) of the first batch when it is transactional
    (a request's batches are one producer's), else None; ``iter_batch_headers``' rules for
    that first batch, unrolled (this runs on every produce): a header that is not a whole
    v2 batch is left to the log's validator."""
    if len(records) < _HEADER_SIZE:
        return None
    h = _HEADER_UNPACK(records, 0)
    if (h[H_MAGIC] != CURRENT_MAGIC or h[H_BATCH_LENGTH] < _MIN_BATCH_LENGTH
            or h[H_BATCH_LENGTH] + LOG_OVERHEAD > len(records)):
        return None
    return h if h[H_ATTRIBUTES] & TRANSACTIONAL_FLAG_MASK and h[H_PRODUCER_ID] >= 0 else None


def _append(state: ServerState, name: str, index: int, records, version: int) -> tuple:
    lg = state.topics.get_log(name, index) if state.topics.get(name) is not None else None
    if lg is None:
        return _partition_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if name in INTERNAL_TOPICS:  # Kafka's ReplicaManager: only the coordinators write there
        return _partition_error(index, ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {name}")
    if name in state.protected_topics:  # the Schema Registry's _schemas: only the registry writes there
        return _partition_error(index, ErrorCode.POLICY_VIOLATION,
                                f"{name} is written by the broker's Schema Registry only (produce refused while "
                                "schema.registry.listeners is set)")
    if records is None or len(records) == 0:
        return _partition_error(index, ErrorCode.INVALID_RECORD, "no record batches")
    if version < ZSTD_MIN_PRODUCE_VERSION and _has_zstd(records):
        return _partition_error(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                f"zstd needs Produce v{ZSTD_MIN_PRODUCE_VERSION} or later")
    try:
        txn = _transactional_header(records)
        if txn is None:
            info = lg.append_as_leader(records, leader_epoch=leader_epoch_of(lg))
        else:
            coordinator = state.txn_coordinator
            if coordinator is None:
                raise ApiError(ErrorCode.INVALID_TXN_STATE, "no transaction coordinator")
            with coordinator.produce_guard(txn[H_PRODUCER_ID], txn[H_PRODUCER_EPOCH], name, index,
                                           implicit_add=version >= 12):
                info = lg.append_as_leader(records, leader_epoch=leader_epoch_of(lg))
    except Exception as exc:  # noqa: BLE001 - every error becomes a code
        code = error_code_for(exc)
        if code == ErrorCode.KAFKA_STORAGE_ERROR and state.topics.get(name) is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # deleted while appending
        if is_expected(exc):
            log.debug("produce to %s-%d rejected: %s", name, index, exc)
        else:
            log.exception("produce to %s-%d failed", name, index)
        if version < 8:
            return _partition_error(index, code)
        return _partition_error(index, code, str(exc), _record_errors(exc))
    state.watchers.notify((name, index))
    stats = state.stats
    if stats is not None:
        stats.record_bytes_in(name, len(records))
    return (index, _NONE, info.first_offset, info.log_append_time, lg.log_start_offset, [], None)


def handle(state: ServerState, ctx: RequestContext, body: ProduceRequestData) -> object:
    version = ctx.api_version
    acks = body.acks
    responses = []
    failed = False
    denied: dict[str, int] = {}  # topic -> its authorization error code
    if state.authorizer is not None:
        names = [name for name, _ in body.topic_data]
        if body.transactional_id is not None and not allowed(
                state, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
            denied = dict.fromkeys(names, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        else:
            writable = allowed_names(state, ctx, AclOperation.WRITE, ResourceType.TOPIC, names)
            denied = {n: ErrorCode.TOPIC_AUTHORIZATION_FAILED for n in names if n not in writable}
    valid_acks = acks in (0, 1, -1)
    for name, partition_data in body.topic_data:
        partitions = []
        refused = denied.get(name) if denied else None
        for index, records in partition_data:
            if not valid_acks:
                part = _partition_error(index, ErrorCode.INVALID_REQUIRED_ACKS)
            elif refused is not None:
                part = _partition_error(index, refused)
            else:
                part = _append(state, name, index, records, version)
            if part[1] != _NONE:
                failed = True
            partitions.append(part)
        responses.append((name, partitions))
    throttle_ms = throttling.record_produce(state, ctx, ctx.extra.get("request_size", 0)) \
        if state.quotas is not None else 0
    if acks == 0:
        return CLOSE_CONNECTION if failed else NO_RESPONSE
    return ProduceResult(responses, throttle_ms)


def error_response(state: ServerState, ctx: RequestContext, body: ProduceRequestData, code: int) -> object:
    if body.acks == 0:
        return CLOSE_CONNECTION
    return ProduceResult([(name, [_partition_error(index, code) for index, _ in partition_data])
                          for name, partition_data in body.topic_data])
