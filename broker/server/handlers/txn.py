"""Transaction APIs over the ``TransactionCoordinator`` (``broker.server.txn``):
AddPartitionsToTxn (24) v0-5 (v4+: brokers' batched form with verify_only), AddOffsetsToTxn (25) v0-3, EndTxn (26) v0-5,
TxnOffsetCommit (28) v0-5, DescribeTransactions (65) v0, ListTransactions (66) v0-1,
DescribeProducers (61) v0, WriteTxnMarkers (27) v0-1 (a marker appended per listed
partition, as a partition leader does for its coordinator; CLUSTER_ACTION needed);
InitProducerId (22) is dispatched here (``handle_init_producer_id``): with a transactional
id to the coordinator, without one to ``producer_id.py``.

Wire behaviour (Kafka's ``KafkaApis``):

* PRODUCER_FENCED (90) exists from InitProducerId v4, AddPartitionsToTxn v2,
  AddOffsetsToTxn v2, EndTxn v2 and TxnOffsetCommit v3 (KIP-588); older versions get
  INVALID_PRODUCER_EPOCH (47) instead.
* AddPartitionsToTxn: a partition of a topic that does not exist gets
  UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED; otherwise every
  partition gets the coordinator's code. Internal topics are refused
  (INVALID_TOPIC_EXCEPTION... as Kafka's "Cannot add internal topic": the offsets topic
  joins a transaction only through AddOffsetsToTxn).
* Transaction version 2 (KIP-890 part 2; v4 of EndTxn and TxnOffsetCommit only adds
  TRANSACTION_ABORTABLE, which this broker never sends): EndTxn v5 bumps the epoch and
  answers the producer id and epoch to go on with (-1/-1 with an error); TxnOffsetCommit
  v5 adds the group's partition itself (``TransactionCoordinator``'s docstring).
* TxnOffsetCommit: the group's ``__consumer_offsets`` partition must have been added with
  AddOffsetsToTxn (INVALID_TXN_STATE) below v5; unknown topics get UNKNOWN_TOPIC_OR_PARTITION per
  partition; the offsets become visible when the transaction commits.
* DescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND for an unknown id; the partitions are
  listed while the transaction is Ongoing / Prepare*.
* DescribeProducers: per partition the producers the log knows (producer state: id,
  epoch, last sequence and timestamp, coordinator epoch, the first offset of an open
  transaction or -1), as ``kafka-transactions.sh describe-producers`` / ``find-hanging``
  read them; UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist.
* ListTransactions: state filters by Kafka's names (unknown names are returned in
  ``unknown_state_filters``), producer id filters, and (v1) ``duration_filter``: only
  transactions running longer than that many ms.

Authorization (Kafka's, ``authz.py``): InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit need WRITE on the
transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); AddPartitionsToTxn WRITE on
each topic (TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED);
AddOffsetsToTxn and TxnOffsetCommit READ on the group (GROUP_AUTHORIZATION_FAILED),
TxnOffsetCommit READ on each topic; DescribeTransactions DESCRIBE on the transactional id
(its topics listed only when the principal may DESCRIBE them); ListTransactions lists the
ids the principal may DESCRIBE; DescribeProducers needs READ on the topic.

Thread-safety: handlers keep no state; the coordinator is thread-safe.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Container
from typing import Any

from broker.protocol import ErrorCode
from broker.protocol.messages.add_offsets_to_txn import ADD_OFFSETS_TO_TXN_RESPONSE
from broker.protocol.messages.add_partitions_to_txn import ADD_PARTITIONS_TO_TXN_RESPONSE
from broker.protocol.messages.describe_producers import DESCRIBE_PRODUCERS_RESPONSE
from broker.protocol.messages.describe_transactions import DESCRIBE_TRANSACTIONS_RESPONSE
from broker.protocol.messages.end_txn import END_TXN_RESPONSE
from broker.protocol.messages.list_transactions import LIST_TRANSACTIONS_RESPONSE
from broker.protocol.messages.txn_offset_commit import TXN_OFFSET_COMMIT_RESPONSE
from broker.protocol.messages.write_txn_markers import WRITE_TXN_MARKERS_RESPONSE
from broker.server.errors import ApiError, error_code_for, is_expected
from broker.server.group.coordinator import INTERNAL_TOPICS
from broker.server.handlers import RequestContext, ServerState, TxnCoordinatorApi, producer_id
from broker.server.handlers.authz import AclOperation, ResourceType, allowed, allowed_names, cluster_allowed
from broker.server.txn.markers import write_marker
from broker.server.txn.state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TransactionState

log = logging.getLogger(__name__)

AddPartitionsResponse = ADD_PARTITIONS_TO_TXN_RESPONSE.cls
AddPartitionsTopic = ADD_PARTITIONS_TO_TXN_RESPONSE.structs["AddPartitionsToTxnTopicResult"]
AddPartitionsPartition = ADD_PARTITIONS_TO_TXN_RESPONSE.structs["AddPartitionsToTxnPartitionResult"]
AddPartitionsResult = ADD_PARTITIONS_TO_TXN_RESPONSE.structs["AddPartitionsToTxnResult"]
AddOffsetsResponse = ADD_OFFSETS_TO_TXN_RESPONSE.cls
EndTxnResponse = END_TXN_RESPONSE.cls
TxnOffsetCommitResponse = TXN_OFFSET_COMMIT_RESPONSE.cls
TxnCommitTopic = TXN_OFFSET_COMMIT_RESPONSE.structs["TxnOffsetCommitResponseTopic"]
TxnCommitPartition = TXN_OFFSET_COMMIT_RESPONSE.structs["TxnOffsetCommitResponsePartition"]
DescribeTransactionsResponse = DESCRIBE_TRANSACTIONS_RESPONSE.cls
DescribedTxn = DESCRIBE_TRANSACTIONS_RESPONSE.structs["TransactionState"]
DescribedTopic = DESCRIBE_TRANSACTIONS_RESPONSE.structs["TopicData"]
ListTransactionsResponse = LIST_TRANSACTIONS_RESPONSE.cls
DescribeProducersResponse = DESCRIBE_PRODUCERS_RESPONSE.cls
ProducersTopic = DESCRIBE_PRODUCERS_RESPONSE.structs["TopicResponse"]
ProducersPartition = DESCRIBE_PRODUCERS_RESPONSE.structs["PartitionResponse"]
ProducerStateStruct = DESCRIBE_PRODUCERS_RESPONSE.structs["ProducerState"]
ListedTxn = LIST_TRANSACTIONS_RESPONSE.structs["TransactionState"]
WriteTxnMarkersResponse = WRITE_TXN_MARKERS_RESPONSE.cls
MarkerResult = WRITE_TXN_MARKERS_RESPONSE.structs["WritableTxnMarkerResult"]
MarkerTopicResult = WRITE_TXN_MARKERS_RESPONSE.structs["WritableTxnMarkerTopicResult"]
MarkerPartitionResult = WRITE_TXN_MARKERS_RESPONSE.structs["WritableTxnMarkerPartitionResult"]

# The first version of each API that knows PRODUCER_FENCED (KIP-588).
_PRODUCER_FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2, 28: 3}


def _code(exc: Exception, what: str) -> int:
    if not is_expected(exc):
        log.exception("%s failed", what)
    return error_code_for(exc)


def _for_version(code: int, ctx: RequestContext) -> int:
    if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < _PRODUCER_FENCED_SINCE[ctx.header.api_key]:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def _coordinator(state: ServerState) -> TxnCoordinatorApi:
    coordinator = state.txn_coordinator
    if coordinator is None:
        raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction coordinator is not running")
    return coordinator


def _txn_writable(state: ServerState, ctx: RequestContext, transactional_id: str) -> bool:
    return allowed(state, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


# --- InitProducerId (transactional) ---

def handle_init_producer_id(state: ServerState, ctx: RequestContext, body) -> object:
    """InitProducerId: with a transactional id the coordinator's, else ``producer_id.handle``."""
    if body.transactional_id is None:
        return producer_id.handle(state, ctx, body)
    code, pid, epoch = init_producer_id(state, ctx, body)
    return producer_id.InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=pid,
                                              producer_epoch=epoch)


def init_producer_id(state: ServerState, ctx: RequestContext, body) -> tuple[int, int, int]:
    """(error code, producer id, epoch) for an InitProducerId with a transactional id."""
    version = ctx.api_version
    if not _txn_writable(state, ctx, body.transactional_id):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1
    pid = body.producer_id if version >= 3 else -1
    epoch = body.producer_epoch if version >= 3 else -1
    try:
        got_pid, got_epoch = _coordinator(state).init_producer_id(
            body.transactional_id, body.transaction_timeout_ms, pid, epoch)
    except Exception as exc:  # noqa: BLE001 - answered with its code
        return _for_version(_code(exc, "InitProducerId"), ctx), -1, -1
    return ErrorCode.NONE, got_pid, got_epoch


# --- AddPartitionsToTxn ---

def handle_add_partitions_to_txn(state: ServerState, ctx: RequestContext, body) -> object:
    if ctx.api_version >= 4:
        return _add_partitions_batched(state, ctx, body)
    requested = [(t.name, list(t.partitions)) for t in body.v3_and_below_topics]
    if not _txn_writable(state, ctx, body.v3_and_below_transactional_id):
        return _add_partitions_response(requested, lambda name, p: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = allowed_names(state, ctx, AclOperation.WRITE, ResourceType.TOPIC, (name for name, _ in requested))
    if len(writable) < len({name for name, _ in requested}):
        return _add_partitions_response(requested, lambda name, p: ErrorCode.OPERATION_NOT_ATTEMPTED
                                        if name in writable else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    unknown: set[tuple[str, int]] = set()
    for name, parts in requested:
        info = state.topics.get(name)
        for p in parts:
            if info is None or not 0 <= p < info.partitions or name in INTERNAL_TOPICS:
                unknown.add((name, p))
    if unknown:
        def code_of(name: str, p: int) -> int:
            if (name, p) not in unknown:
                return ErrorCode.OPERATION_NOT_ATTEMPTED
            return ErrorCode.INVALID_TOPIC_EXCEPTION if name in INTERNAL_TOPICS \
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return _add_partitions_response(requested, code_of)
    try:
        _coordinator(state).add_partitions(body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                                           body.v3_and_below_producer_epoch,
                                           {(name, p) for name, parts in requested for p in parts})
        code: int = ErrorCode.NONE
    except Exception as exc:  # noqa: BLE001 - answered with its code
        code = _for_version(_code(exc, "AddPartitionsToTxn"), ctx)
    return _add_partitions_response(requested, lambda name, p: code)


def _add_partitions_batched(state: ServerState, ctx: RequestContext, body) -> object:
    """v4+ (brokers' requests, KIP-890): several transactions; ``verify_only`` checks that
    the partitions are in the Ongoing transaction (those that are not: INVALID_TXN_STATE,
    TRANSACTION_ABORTABLE from v5), otherwise they are added (transaction version 2's
    implicit add). CLUSTER_ACTION is needed, as in Kafka."""
    if not cluster_allowed(state, ctx, AclOperation.CLUSTER_ACTION):
        return AddPartitionsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                     results_by_transaction=[])
    not_in_txn = ErrorCode.TRANSACTION_ABORTABLE if ctx.api_version >= 5 else ErrorCode.INVALID_TXN_STATE
    results = []
    for txn in body.transactions:
        requested = [(t.name, list(t.partitions)) for t in txn.topics]
        wanted = {(name, p) for name, parts in requested for p in parts}
        code_of: Callable[[str, int], int]
        try:
            if txn.verify_only:
                missing = _coordinator(state).verify_partitions(txn.transactional_id, txn.producer_id,
                                                                txn.producer_epoch, wanted)
                code_of = _code_of(ErrorCode.NONE, missing, not_in_txn)
            else:
                _coordinator(state).add_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                                   wanted, client_transaction_version=2)
                code_of = _code_of(ErrorCode.NONE)
        except Exception as exc:  # noqa: BLE001 - answered with its code
            code = _code(exc, "AddPartitionsToTxn")
            code_of = _code_of(code)
        results.append(AddPartitionsResult(
            transactional_id=txn.transactional_id,
            topic_results=_add_partitions_response(requested, code_of).results_by_topic_v3_and_below))
    return AddPartitionsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=results)


def _code_of(code: int, missing: Container[tuple[str, int]] = (), missing_code: int = ErrorCode.NONE
             ) -> Callable[[str, int], int]:
    """The code of each (topic, partition): ``missing_code`` for those in ``missing``, else ``code``."""
    return lambda name, p: missing_code if (name, p) in missing else code


def _add_partitions_response(requested, code_of: Callable[[str, int], int]) -> Any:
    return AddPartitionsResponse(throttle_time_ms=0, results_by_topic_v3_and_below=[
        AddPartitionsTopic(name=name, results_by_partition=[
            AddPartitionsPartition(partition_index=p, partition_error_code=code_of(name, p)) for p in parts])
        for name, parts in requested])


def add_partitions_to_txn_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    if ctx.api_version >= 4:
        return AddPartitionsResponse(throttle_time_ms=0, error_code=code, results_by_transaction=[])
    return _add_partitions_response([(t.name, list(t.partitions)) for t in body.v3_and_below_topics],
                                    lambda name, p: code)


# --- AddOffsetsToTxn ---

def handle_add_offsets_to_txn(state: ServerState, ctx: RequestContext, body) -> object:
    if not _txn_writable(state, ctx, body.transactional_id):
        return AddOffsetsResponse(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not allowed(state, ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return AddOffsetsResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    try:
        _coordinator(state).add_offsets(body.transactional_id, body.producer_id, body.producer_epoch,
                                        body.group_id)
        code: int = ErrorCode.NONE
    except Exception as exc:  # noqa: BLE001 - answered with its code
        code = _for_version(_code(exc, "AddOffsetsToTxn"), ctx)
    return AddOffsetsResponse(throttle_time_ms=0, error_code=code)


def add_offsets_to_txn_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return AddOffsetsResponse(throttle_time_ms=0, error_code=code)


# --- EndTxn ---

def handle_end_txn(state: ServerState, ctx: RequestContext, body) -> object:
    if not _txn_writable(state, ctx, body.transactional_id):
        return EndTxnResponse(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    pid, epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
    try:
        pid, epoch = _coordinator(state).end_transaction(
            body.transactional_id, body.producer_id, body.producer_epoch, bool(body.committed),
            client_transaction_version=2 if ctx.api_version >= 5 else 0)
        code: int = ErrorCode.NONE
    except Exception as exc:  # noqa: BLE001 - answered with its code
        code = _for_version(_code(exc, "EndTxn"), ctx)
    return EndTxnResponse(throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch)


def end_txn_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return EndTxnResponse(throttle_time_ms=0, error_code=code)


# --- TxnOffsetCommit ---

def handle_txn_offset_commit(state: ServerState, ctx: RequestContext, body) -> object:
    version = ctx.api_version
    if not _txn_writable(state, ctx, body.transactional_id):
        return txn_offset_commit_error_response(state, ctx, body, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not allowed(state, ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return txn_offset_commit_error_response(state, ctx, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = allowed_names(state, ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in body.topics))
    slots: list[tuple[int, int]] = []
    entries = []
    topics = []
    for t_index, t in enumerate(body.topics):
        info = state.topics.get(t.name)
        partitions = []
        for p in t.partitions:
            if t.name not in readable:
                partitions.append(TxnCommitPartition(partition_index=p.partition_index,
                                                     error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if info is None or not 0 <= p.partition_index < info.partitions:
                partitions.append(TxnCommitPartition(partition_index=p.partition_index,
                                                     error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            slots.append((t_index, len(partitions)))
            partitions.append(TxnCommitPartition(partition_index=p.partition_index, error_code=ErrorCode.NONE))
            epoch = p.committed_leader_epoch if version >= 2 else -1
            entries.append((t.name, p.partition_index, p.committed_offset, epoch, p.committed_metadata))
        topics.append(TxnCommitTopic(name=t.name, partitions=partitions))
    if entries:
        try:
            coordinator = _coordinator(state)
            if state.group_coordinator is None:
                raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is not running")
            with coordinator.txn_offset_commit_guard(body.transactional_id, body.producer_id, body.producer_epoch,
                                                     body.group_id, implicit_add=version >= 5):
                codes = state.group_coordinator.txn_offsets.commit(
                    body.group_id, body.producer_id, body.producer_epoch,
                    body.generation_id if version >= 3 else -1, body.member_id if version >= 3 else "",
                    body.group_instance_id if version >= 3 else None, entries)
        except Exception as exc:  # noqa: BLE001 - answered with its code
            codes = [_code(exc, "TxnOffsetCommit")] * len(entries)
        for (t_index, p_index), code in zip(slots, codes):
            topics[t_index].partitions[p_index].error_code = _for_version(code, ctx)
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=topics)


def txn_offset_commit_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        TxnCommitTopic(name=t.name, partitions=[TxnCommitPartition(partition_index=p.partition_index,
                                                                   error_code=code) for p in t.partitions])
        for t in body.topics])


# --- DescribeTransactions / ListTransactions ---

def _described(txn_id: str, code: int, md=None, visible=None) -> object:
    if md is None:
        return DescribedTxn(error_code=code, transactional_id=txn_id, transaction_state="",
                            transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                            producer_epoch=-1, topics=[])
    topics: dict[str, list[int]] = {}
    for topic, p in sorted(md.partitions):
        if visible is None or topic in visible:
            topics.setdefault(topic, []).append(p)
    return DescribedTxn(error_code=ErrorCode.NONE, transactional_id=txn_id,
                        transaction_state=md.state.display_name, transaction_timeout_ms=md.txn_timeout_ms,
                        transaction_start_time_ms=md.txn_start_timestamp, producer_id=md.producer_id,
                        producer_epoch=md.producer_epoch,
                        topics=[DescribedTopic(topic=t, partitions=ps) for t, ps in topics.items()])


def handle_describe_transactions(state: ServerState, ctx: RequestContext, body) -> object:
    out = []
    for txn_id in body.transactional_ids:
        if not allowed(state, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
            out.append(_described(txn_id, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        try:
            md = _coordinator(state).describe(txn_id)
            visible = None if md is None or state.authorizer is None else allowed_names(
                state, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in md.partitions), audit=False)
            out.append(_described(txn_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND) if md is None
                       else _described(txn_id, ErrorCode.NONE, md, visible))
        except Exception as exc:  # noqa: BLE001 - answered with its code
            out.append(_described(txn_id, _code(exc, "DescribeTransactions")))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=out)


def describe_transactions_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DescribeTransactionsResponse(throttle_time_ms=0,
                                        transaction_states=[_described(t, code) for t in body.transactional_ids])


def handle_list_transactions(state: ServerState, ctx: RequestContext, body) -> object:
    wanted = set()
    unknown = []
    for name in body.state_filters:
        s = TransactionState.from_name(name)
        if s is None:
            unknown.append(name)
        else:
            wanted.add(s)
    pids = set(body.producer_id_filters)
    duration = body.duration_filter if ctx.api_version >= 1 else -1
    try:
        coordinator = _coordinator(state)
        mds = coordinator.list_transactions()
    except Exception as exc:  # noqa: BLE001 - answered with its code
        return list_transactions_error_response(state, ctx, body, _code(exc, "ListTransactions"))
    now = coordinator.time.milliseconds()
    listed = []
    for md in sorted(mds, key=lambda m: m.transactional_id):
        if body.state_filters and md.state not in wanted:
            continue
        if pids and md.producer_id not in pids:
            continue
        if duration >= 0 and now - md.txn_start_timestamp <= duration:
            continue
        if not allowed(state, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, md.transactional_id,
                       audit=False):
            continue
        listed.append(ListedTxn(transactional_id=md.transactional_id, producer_id=md.producer_id,
                                transaction_state=md.state.display_name))
    return ListTransactionsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, unknown_state_filters=unknown,
                                    transaction_states=listed)


def list_transactions_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return ListTransactionsResponse(throttle_time_ms=0, error_code=code, unknown_state_filters=[],
                                    transaction_states=[])


# --- DescribeProducers ---

def handle_describe_producers(state: ServerState, ctx: RequestContext, body) -> object:
    readable = allowed_names(state, ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in body.topics))
    topics = []
    for t in body.topics:
        partitions = []
        for index in t.partition_indexes:
            if t.name not in readable:
                partitions.append(ProducersPartition(partition_index=index,
                                                     error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                     error_message=None, active_producers=[]))
                continue
            lg = state.topics.get_log(t.name, index) if state.topics.get(t.name) is not None else None
            if lg is None:
                partitions.append(ProducersPartition(partition_index=index,
                                                     error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                     error_message=None, active_producers=[]))
                continue
            producers = [ProducerStateStruct(
                producer_id=e.producer_id, producer_epoch=e.producer_epoch, last_sequence=e.last_seq,
                last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                current_txn_start_offset=e.current_txn_first_offset if e.current_txn_first_offset is not None else -1)
                for e in sorted(lg.active_producers(), key=lambda e: e.producer_id)]
            partitions.append(ProducersPartition(partition_index=index, error_code=ErrorCode.NONE, error_message=None,
                                                 active_producers=producers))
        topics.append(ProducersTopic(name=t.name, partitions=partitions))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


def describe_producers_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DescribeProducersResponse(throttle_time_ms=0, topics=[
        ProducersTopic(name=t.name, partitions=[ProducersPartition(partition_index=i, error_code=code,
                                                                   error_message=None, active_producers=[])
                                                for i in t.partition_indexes]) for t in body.topics])


# --- WriteTxnMarkers ---

def handle_write_txn_markers(state: ServerState, ctx: RequestContext, body) -> object:
    """Append the COMMIT / ABORT marker of each listed producer to each listed partition
    (what a coordinator sends a partition leader; also how ``kafkalog transactions abort``
    and kafka-transactions.sh end a hanging transaction). Needs CLUSTER_ACTION."""
    if not cluster_allowed(state, ctx, AclOperation.CLUSTER_ACTION):
        return write_txn_markers_error_response(state, ctx, body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    now = state.txn_coordinator.time.milliseconds() if state.txn_coordinator is not None else \
        int(time.time() * 1000)
    results = []
    for m in body.markers:
        topics = []
        for t in m.topics:
            partitions = []
            for index in t.partition_indexes:
                code: int = ErrorCode.NONE
                if state.topics.get(t.name) is None or state.topics.get_log(t.name, index) is None:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    try:
                        write_marker(state.topics, t.name, index, producer_id=m.producer_id,
                                     producer_epoch=m.producer_epoch, commit=bool(m.transaction_result),
                                     timestamp=now, coordinator_epoch=m.coordinator_epoch)
                        state.watchers.notify((t.name, index))
                        log.info("WriteTxnMarkers from %s: %s marker for producer %d epoch %d written to %s-%d",
                                 ctx.connection_id, "COMMIT" if m.transaction_result else "ABORT",
                                 m.producer_id, m.producer_epoch, t.name, index)
                    except Exception as exc:  # noqa: BLE001 - answered with its code
                        code = _code(exc, "WriteTxnMarkers")
                partitions.append(MarkerPartitionResult(partition_index=index, error_code=code))
            topics.append(MarkerTopicResult(name=t.name, partitions=partitions))
        results.append(MarkerResult(producer_id=m.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=results)


def write_txn_markers_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return WriteTxnMarkersResponse(markers=[MarkerResult(producer_id=m.producer_id, topics=[
        MarkerTopicResult(name=t.name, partitions=[MarkerPartitionResult(partition_index=i, error_code=code)
                                                  for i in t.partition_indexes]) for t in m.topics])
        for m in body.markers])
