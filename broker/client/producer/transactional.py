"""The transactional producer: Kafka's ``TransactionManager`` states and requests (KIP-98,
transaction versions 1 and 2), on top of the idempotent ``TransactionManager``.

Owns:

* ``TransactionalManager``: the producer's transaction state, Kafka's names::

      UNINITIALIZED -> INITIALIZING -> READY -> IN_TRANSACTION -> COMMITTING_TRANSACTION -> READY
                                                      |                 \\-> ABORTABLE_ERROR
                                                      \\-> ABORTING_TRANSACTION -> READY
      ABORTABLE_ERROR -> ABORTING_TRANSACTION;   any -> FATAL_ERROR

  the partitions of the current transaction (added with AddPartitionsToTxn before their
  batches may be drained: ``should_stop_drain``), whether offsets were added, the last
  error, and the queue of transactional requests the Sender sends one at a time.
* The user calls (through ``KafkaProducer``): ``init_transactions`` (FindCoordinator
  TRANSACTION then InitProducerId with the transactional id and transaction.timeout.ms),
  ``begin_transaction`` (local), ``send_offsets_to_transaction`` (AddOffsetsToTxn, then
  FindCoordinator GROUP and TxnOffsetCommit), ``commit_transaction`` (flush, then EndTxn),
  ``abort_transaction`` (queued batches fail with ``TransactionAbortedError``, in-flight
  ones are awaited, then EndTxn; after a failed batch the epoch is bumped with
  InitProducerId naming the current producer id and epoch, KIP-360). Each returns once the
  broker answered, or raises.
* Errors, as Kafka classifies them: PRODUCER_FENCED / INVALID_PRODUCER_EPOCH ->
  ``ProducerFencedError``, fatal (FATAL_ERROR: every later call raises it; the producer
  can only be closed); INVALID_TRANSACTION_TIMEOUT, TRANSACTIONAL_ID_AUTHORIZATION_FAILED
  and an InitProducerId or EndTxn refused otherwise are fatal too; a failed record or a
  refused AddPartitionsToTxn / TxnOffsetCommit is abortable (ABORTABLE_ERROR: commit
  raises ``TransactionAbortableError``, abort works); NOT_COORDINATOR /
  COORDINATOR_NOT_AVAILABLE find the coordinator again, COORDINATOR_LOAD_IN_PROGRESS /
  CONCURRENT_TRANSACTIONS and other retriable codes are retried after retry.backoff.ms.

Transaction version 2 (KIP-890 part 2), as Kafka 4's client: ``begin_transaction`` reads the
cluster's finalized ``transaction.version`` (``NetworkClient.finalized_features``, through
``features``); at 2 the transaction sends no AddPartitionsToTxn (Produce v12 adds each
partition on the broker) and no AddOffsetsToTxn (TxnOffsetCommit v5 adds the group), and
EndTxn v5 answers the producer id and epoch to go on with (the coordinator bumps the epoch
at every commit and abort, so sequences start again at 0 and no InitProducerId bump is
needed after an abort). Below 2 the KIP-98 requests are sent as before, and Produce stays
at v11 at most inside transactions.

``maybe_send_transactional_request(sender, now)`` is the Sender's step (Kafka's
``maybeSendAndPollTransactionalRequest``): while a transactional request is in flight no
produce request is sent; EndTxn waits until no batch is incomplete.

Thread-safety: state changes under the manager's RLock; user threads block on
``TransactionalRequestResult`` events set by the Sender thread.
"""

from __future__ import annotations

import collections
import enum
import logging
import threading
from typing import Any, NamedTuple

from broker.client.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionAbortedError,
)
from broker.client.producer.transaction_manager import TransactionManager
from broker.protocol import ApiKey, ErrorCode, request_schema
from broker.record.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

log = logging.getLogger(__name__)

COORDINATOR_TRANSACTION = 1
COORDINATOR_GROUP = 0
_MAX_VERSIONS = {ApiKey.FIND_COORDINATOR: 2, ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 3,
                 ApiKey.ADD_OFFSETS_TO_TXN: 3, ApiKey.END_TXN: 3, ApiKey.TXN_OFFSET_COMMIT: 3}
# transaction version 2: exactly these (the version is what tells the broker)
_TV2_VERSIONS = {ApiKey.END_TXN: 5, ApiKey.TXN_OFFSET_COMMIT: 5}
TRANSACTION_VERSION_FEATURE = "transaction.version"
_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
_FIND_AGAIN = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


_T = TxnState
_VALID_PREVIOUS = {
    _T.UNINITIALIZED: {_T.UNINITIALIZED},
    _T.INITIALIZING: {_T.UNINITIALIZED, _T.ABORTING_TRANSACTION},
    _T.READY: {_T.INITIALIZING, _T.COMMITTING_TRANSACTION, _T.ABORTING_TRANSACTION},
    _T.IN_TRANSACTION: {_T.READY},
    _T.COMMITTING_TRANSACTION: {_T.IN_TRANSACTION},
    _T.ABORTING_TRANSACTION: {_T.IN_TRANSACTION, _T.ABORTABLE_ERROR},
    _T.ABORTABLE_ERROR: {_T.IN_TRANSACTION, _T.COMMITTING_TRANSACTION, _T.ABORTABLE_ERROR},
}


class Node(NamedTuple):
    id: int
    host: str
    port: int


class TransactionalRequestResult:
    """What a user call waits on: set once by the Sender thread."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._event = threading.Event()
        self.error: BaseException | None = None

    def done(self, error: BaseException | None = None) -> None:
        if not self._event.is_set():
            self.error = error
            self._event.set()

    def wait(self, timeout_s: float | None) -> None:
        if not self._event.wait(timeout_s):
            raise KafkaTimeoutError(f"{self.name} did not complete within {timeout_s} s")
        if self.error is not None:
            raise self.error


class _Request:
    """One transactional request (Kafka's TxnRequestHandler)."""

    def __init__(self, api_key: ApiKey, build, on_response, result: TransactionalRequestResult,
                 coordinator: tuple[int, str] | None) -> None:
        self.api_key = api_key
        self.build = build  # (version) -> body
        self.on_response = on_response  # (body) -> None; may raise _RetryTxnRequest / KafkaError
        self.result = result
        self.coordinator = coordinator  # (key type, key) or None for any node
        self.retry_at = 0.0


class _RetryTxnRequest(Exception):
    def __init__(self, find_coordinator: bool = False) -> None:
        super().__init__()
        self.find_coordinator = find_coordinator


class TransactionalManager(TransactionManager):
    """Idempotence plus the transaction state (module docstring)."""

    def __init__(self, transactional_id: str, transaction_timeout_ms: int, retry_backoff_ms: int = 100) -> None:
        super().__init__()
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.state = TxnState.UNINITIALIZED
        self.last_error: BaseException | None = None
        self.in_transaction: set[tuple[str, int]] = set()  # added with AddPartitionsToTxn
        self.new_partitions: set[tuple[str, int]] = set()  # to add
        self.pending_partitions: set[tuple[str, int]] = set()  # being added
        self.offsets_added = False
        self.coordinators: dict[tuple[int, str], Node] = {}
        self.queue: collections.deque[_Request] = collections.deque()
        self.in_flight: _Request | None = None
        # () -> the finalized features the client saw (set by the producer: NetworkClient's)
        self.features = dict

    @property
    def is_transactional(self) -> bool:
        return True

    # -- state ---------------------------------------------------------------------------

    def _transition(self, target: TxnState, error: BaseException | None = None) -> None:
        with self._lock:
            if self.state == TxnState.FATAL_ERROR:
                return
            if target == TxnState.FATAL_ERROR:
                self.state, self.last_error = target, error
                self.fatal_error = error
                return
            if self.state not in _VALID_PREVIOUS[target]:
                raise IllegalStateError(f"invalid transition attempted from state {self.state.value} "
                                        f"to state {target.value}")
            if target == TxnState.ABORTABLE_ERROR:
                self.last_error = error
            elif target != TxnState.ABORTING_TRANSACTION:
                self.last_error = None
            self.state = target

    def fail(self, error: BaseException, fatal: bool) -> None:
        """A transactional failure: fatal, or abortable when a transaction is open."""
        with self._lock:
            if fatal or self.state in (TxnState.UNINITIALIZED, TxnState.INITIALIZING, TxnState.READY):
                self._transition(TxnState.FATAL_ERROR, error)
            elif self.state in _VALID_PREVIOUS[TxnState.ABORTABLE_ERROR]:
                self._transition(TxnState.ABORTABLE_ERROR, error)

    def check_not_fatal(self) -> None:
        if self.state == TxnState.FATAL_ERROR:
            raise self.last_error if isinstance(self.last_error, KafkaError) else KafkaError(str(self.last_error))

    # -- user calls (user threads; the producer waits on the results) --------------------

    def init_transactions(self) -> TransactionalRequestResult:
        with self._lock:
            self.check_not_fatal()
            if self.state != TxnState.UNINITIALIZED:
                raise IllegalStateError(f"init_transactions() in state {self.state.value}")
            self._transition(TxnState.INITIALIZING)
            return self._enqueue_init("InitProducerId")

    def _enqueue_init(self, name: str, bump: bool = False) -> TransactionalRequestResult:
        result = TransactionalRequestResult(name)
        pid, epoch = (self.producer_id, self.producer_epoch) if bump else (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

        def build(version: int):
            return request_schema(ApiKey.INIT_PRODUCER_ID, version).cls(
                transactional_id=self.transactional_id, transaction_timeout_ms=self.transaction_timeout_ms,
                producer_id=pid, producer_epoch=epoch)

        def on_response(body) -> None:
            code = ErrorCode.lookup(body.error_code)
            self._raise_for(code, "InitProducerId", fatal_default=True)
            with self._lock:
                self.set_producer_id_and_epoch(body.producer_id, body.producer_epoch)
                self._partitions.clear()  # sequences start again at 0 under the new epoch
                self._unresolved.clear()
                self._to_rewrite.clear()
                self._epoch_bump_required = False
                self._transition(TxnState.READY)

        self.queue.append(_Request(ApiKey.INIT_PRODUCER_ID, build, on_response, result,
                                   (COORDINATOR_TRANSACTION, self.transactional_id)))
        return result

    def begin_transaction(self) -> None:
        with self._lock:
            self.check_not_fatal()
            if self.state != TxnState.READY:
                raise IllegalStateError(f"begin_transaction() in state {self.state.value}"
                                        + (" (call init_transactions() first)"
                                           if self.state == TxnState.UNINITIALIZED else ""))
            self._transition(TxnState.IN_TRANSACTION)
            self.transaction_v2 = self.features().get(TRANSACTION_VERSION_FEATURE, 0) >= 2

    def maybe_add_partition(self, tp: tuple[str, int]) -> None:
        """A record for ``tp`` is being sent: it joins the transaction."""
        with self._lock:
            self.check_not_fatal()
            if self.state == TxnState.ABORTABLE_ERROR:
                raise TransactionAbortableError(f"the transaction must be aborted: {self.last_error}") \
                    from self.last_error
            if self.state != TxnState.IN_TRANSACTION:
                raise IllegalStateError(f"cannot send a record in state {self.state.value}"
                                        " (call begin_transaction() first)")
            if self.transaction_v2:
                self.in_transaction.add(tp)  # Produce v12 adds it on the broker
            elif tp not in self.in_transaction and tp not in self.pending_partitions:
                self.new_partitions.add(tp)

    def is_send_to_partition_allowed(self, tp: tuple[str, int]) -> bool:
        return tp in self.in_transaction

    def send_offsets(self, offsets: dict[tuple[str, int], Any], group_id: str, generation_id: int,
                     member_id: str, group_instance_id: str | None) -> TransactionalRequestResult:
        with self._lock:
            self.check_not_fatal()
            if self.state != TxnState.IN_TRANSACTION:
                raise IllegalStateError(f"send_offsets_to_transaction() in state {self.state.value}")
            if self.transaction_v2:  # TxnOffsetCommit v5 adds the group's partition itself
                result = TransactionalRequestResult("TxnOffsetCommit")
                self.offsets_added = True
                self.queue.append(self._txn_offset_commit(result, offsets, group_id, generation_id, member_id,
                                                          group_instance_id))
                return result
            result = TransactionalRequestResult("AddOffsetsToTxn")

            def build(version: int):
                return request_schema(ApiKey.ADD_OFFSETS_TO_TXN, version).cls(
                    transactional_id=self.transactional_id, producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch, group_id=group_id)

            def on_response(body) -> None:
                self._raise_for(ErrorCode.lookup(body.error_code), "AddOffsetsToTxn")
                self.offsets_added = True
                self.queue.appendleft(self._txn_offset_commit(result, offsets, group_id, generation_id,
                                                              member_id, group_instance_id))
                raise _Chained()

            self.queue.append(_Request(ApiKey.ADD_OFFSETS_TO_TXN, build, on_response, result,
                                       (COORDINATOR_TRANSACTION, self.transactional_id)))
            return result

    def _txn_offset_commit(self, result, offsets, group_id, generation_id, member_id, group_instance_id):
        by_topic: dict[str, list[tuple[int, int, str | None, int]]] = {}
        for (topic, partition), value in offsets.items():
            offset, metadata, leader_epoch = _offset_fields(value)
            by_topic.setdefault(topic, []).append((partition, offset, metadata, leader_epoch))

        def build(version: int):
            schema = request_schema(ApiKey.TXN_OFFSET_COMMIT, version)
            t_cls, p_cls = schema.structs["TxnOffsetCommitRequestTopic"], schema.structs[
                "TxnOffsetCommitRequestPartition"]
            return schema.cls(
                transactional_id=self.transactional_id, group_id=group_id, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, generation_id=generation_id, member_id=member_id,
                group_instance_id=group_instance_id,
                topics=[t_cls(name=t, partitions=[p_cls(partition_index=p, committed_offset=o,
                                                        committed_leader_epoch=e, committed_metadata=m)
                                                  for p, o, m, e in ps]) for t, ps in by_topic.items()])

        def on_response(body) -> None:
            codes = {ErrorCode.lookup(p.error_code) for t in body.topics for p in t.partitions}
            codes.discard(ErrorCode.NONE)
            for code in sorted(codes, key=lambda c: (c not in _FENCED, int(c))):
                self._raise_for(code, "TxnOffsetCommit")

        return _Request(ApiKey.TXN_OFFSET_COMMIT, build, on_response, result, (COORDINATOR_GROUP, group_id))

    def begin_completion(self, commit: bool) -> TransactionalRequestResult | None:
        """Enter COMMITTING / ABORTING and queue EndTxn (None: nothing was added, the
        transaction ends locally, as Kafka's client does)."""
        with self._lock:
            self.check_not_fatal()
            if commit:
                if self.state == TxnState.ABORTABLE_ERROR:
                    raise TransactionAbortableError(
                        f"cannot commit: the transaction must be aborted ({self.last_error})") from self.last_error
                if self.state != TxnState.IN_TRANSACTION:
                    raise IllegalStateError(f"commit_transaction() in state {self.state.value}")
                self._transition(TxnState.COMMITTING_TRANSACTION)
            else:
                if self.state not in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR):
                    raise IllegalStateError(f"abort_transaction() in state {self.state.value}")
                self._transition(TxnState.ABORTING_TRANSACTION)
            started = bool(self.in_transaction or self.pending_partitions or self.offsets_added)
            self.new_partitions.clear()  # never sent: nothing to add
            if not started:
                self._complete_transaction()
                return None
            result = TransactionalRequestResult("EndTxn")

            def build(version: int):
                return request_schema(ApiKey.END_TXN, version).cls(
                    transactional_id=self.transactional_id, producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch, committed=commit)

            def on_response(body) -> None:
                self._raise_for(ErrorCode.lookup(body.error_code), "EndTxn", fatal_default=True)
                with self._lock:
                    if self.transaction_v2 and body.producer_id >= 0:
                        # the coordinator bumped the epoch (or moved to a new id): sequences restart
                        self.set_producer_id_and_epoch(body.producer_id, body.producer_epoch)
                        self._partitions.clear()
                        self._unresolved.clear()
                        self._to_rewrite.clear()
                        self._epoch_bump_required = False
                    self._complete_transaction()

            self.queue.append(_Request(ApiKey.END_TXN, build, on_response, result,
                                       (COORDINATOR_TRANSACTION, self.transactional_id)))
            return result

    def abort_on_close(self) -> None:
        """The producer closes: an open (or failed) transaction is aborted; its queued
        records fail with TransactionAbortedError (Sender thread)."""
        with self._lock:
            if self.state in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR):
                log.info("aborting the open transaction of %s: the producer is closing", self.transactional_id)
                self.begin_completion(commit=False)

    def has_pending_requests(self) -> bool:
        return bool(self.queue) or self.in_flight is not None

    def _complete_transaction(self) -> None:
        self.in_transaction.clear()
        self.pending_partitions.clear()
        self.offsets_added = False
        if self.state == TxnState.ABORTING_TRANSACTION and self._epoch_bump_required:
            # a batch of the aborted transaction failed: its sequences have a gap (KIP-360)
            self._transition(TxnState.INITIALIZING)
            self._bump_result = self._enqueue_init("InitProducerId (epoch bump)", bump=True)
        else:
            self._transition(TxnState.READY)

    # -- idempotence overrides ------------------------------------------------------------

    def should_stop_drain(self, batch: Any, tp: tuple[str, int]) -> bool:
        if tp not in self.in_transaction:
            return True
        return super().should_stop_drain(batch, tp)

    def handle_failed_batch(self, batch: Any, error: BaseException, adjust_sequences: bool) -> None:
        super().handle_failed_batch(batch, error, adjust_sequences)
        code = getattr(error, "code", None)
        if isinstance(error, TransactionAbortedError):
            return
        if code in _FENCED:
            self.fail(ProducerFencedError(f"fenced while producing to {batch.topic}-{batch.partition}: {error}"),
                      fatal=True)
        else:
            self.fail(error, fatal=False)

    def bump_epoch_if_needed(self) -> bool:
        return False  # a transactional producer bumps its epoch with InitProducerId, after an abort

    # -- errors --------------------------------------------------------------------------

    def _raise_for(self, code: ErrorCode, what: str, fatal_default: bool = False) -> None:
        if code == ErrorCode.NONE:
            return
        if code in _FIND_AGAIN:
            raise _RetryTxnRequest(find_coordinator=True)
        if code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS) or code.retriable:
            raise _RetryTxnRequest()
        if code in _FENCED:
            raise _Fatal(ProducerFencedError(f"{what}: there is a newer producer with the same transactional.id "
                                             f"{self.transactional_id}", code))
        error = KafkaError.from_code(code, what)
        if fatal_default or code in (ErrorCode.INVALID_TRANSACTION_TIMEOUT,
                                     ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                     ErrorCode.UNSUPPORTED_VERSION):
            raise _Fatal(error)
        raise _Abortable(error)


class _Chained(Exception):
    """The request succeeded and queued its follow-up, which completes the same result."""


class _Fatal(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class _Abortable(_Fatal):
    pass


def _offset_fields(value: Any) -> tuple[int, str | None, int]:
    """(offset, metadata, leader epoch) of an offsets entry: an int or an object with
    ``offset`` (and optionally ``metadata`` / ``leader_epoch``)."""
    if isinstance(value, int):
        return value, "", -1
    offset = int(value.offset)
    metadata = getattr(value, "metadata", "") or ""
    epoch = getattr(value, "leader_epoch", None)
    return offset, metadata, epoch if isinstance(epoch, int) and epoch >= 0 else -1


# -- the Sender's step -----------------------------------------------------------------------

def maybe_send_transactional_request(sender: Any, now: float) -> bool:
    """Send the next transactional request if any; True when the Sender should only poll
    this round (Kafka's maybeSendAndPollTransactionalRequest)."""
    tm: TransactionalManager = sender.tm
    client = sender.client
    if tm.in_flight is not None:
        client.poll(sender.retry_backoff_ms, now)
        return True
    if tm.state in (TxnState.ABORTING_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR) \
            and sender.acc.has_undrained():
        sender.acc.abort_undrained_batches(TransactionAbortedError(
            "the transaction was aborted" if tm.last_error is None else f"the transaction failed: {tm.last_error}"))
    with tm._lock:
        if tm.new_partitions and tm.state == TxnState.IN_TRANSACTION and not tm.pending_partitions:
            tm.queue.appendleft(_add_partitions_request(tm))
        if not tm.queue:
            return False
        request = tm.queue[0]
        if request.api_key == ApiKey.END_TXN and (sender.acc.has_incomplete() or tm.pending_partitions):
            return False  # the transaction's records go first
    if now < request.retry_at:
        client.poll(min(request.retry_at - now, sender.retry_backoff_ms), now)
        return True
    node = _coordinator_node(sender, tm, request, now)
    if node is None:
        return True
    if not client.ready(node, now):
        client.poll(min(client.poll_delay_ms(node.id, now), sender.retry_backoff_ms), now)
        return True
    if tm.transaction_v2 and request.api_key in _TV2_VERSIONS:
        wanted = _TV2_VERSIONS[request.api_key]
        version = client.api_version(node.id, request.api_key, wanted, wanted)
    else:
        version = client.api_version(node.id, request.api_key, _MAX_VERSIONS[request.api_key])
    if version is None:
        tm.queue.popleft()
        error = KafkaError(f"the broker does not support {request.api_key.name}", ErrorCode.UNSUPPORTED_VERSION)
        tm.fail(error, fatal=True)
        request.result.done(error)
        return True
    tm.queue.popleft()
    tm.in_flight = request

    def on_response(resp: Any) -> None:
        tm.in_flight = None
        if resp.error is not None or resp.body is None:
            _retry(tm, request, resp.received_ms, find_coordinator=True)
            return
        try:
            request.on_response(resp.body)
        except _RetryTxnRequest as r:
            _retry(tm, request, resp.received_ms, r.find_coordinator)
            return
        except _Chained:
            return
        except _Fatal as f:
            tm.fail(f.error, fatal=not isinstance(f, _Abortable))
            if request.api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
                with tm._lock:
                    tm.pending_partitions.clear()
            request.result.done(f.error)
            return
        request.result.done(None)

    client.send(node.id, request.api_key, request.build(version), version=version, callback=on_response,
                now_ms=now)
    client.poll(sender.retry_backoff_ms, now)
    return True


def _retry(tm: TransactionalManager, request: _Request, now: float, find_coordinator: bool) -> None:
    if find_coordinator and request.coordinator is not None:
        tm.coordinators.pop(request.coordinator, None)
    request.retry_at = now + tm.retry_backoff_ms
    with tm._lock:
        tm.queue.appendleft(request)


def _add_partitions_request(tm: TransactionalManager) -> _Request:
    partitions = set(tm.new_partitions)
    tm.new_partitions.clear()
    tm.pending_partitions |= partitions
    result = TransactionalRequestResult("AddPartitionsToTxn")
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(partitions):
        by_topic.setdefault(topic, []).append(p)

    def build(version: int):
        schema = request_schema(ApiKey.ADD_PARTITIONS_TO_TXN, version)
        t_cls = schema.structs["AddPartitionsToTxnTopic"]
        return schema.cls(v3_and_below_transactional_id=tm.transactional_id,
                          v3_and_below_producer_id=tm.producer_id, v3_and_below_producer_epoch=tm.producer_epoch,
                          v3_and_below_topics=[t_cls(name=t, partitions=ps) for t, ps in by_topic.items()])

    def on_response(body) -> None:
        codes = {ErrorCode.lookup(p.partition_error_code) for t in body.results_by_topic_v3_and_below
                 for p in t.results_by_partition}
        codes.discard(ErrorCode.NONE)
        codes.discard(ErrorCode.OPERATION_NOT_ATTEMPTED)
        try:
            for code in sorted(codes, key=lambda c: (c not in _FENCED, int(c))):
                tm._raise_for(code, "AddPartitionsToTxn")
        except _RetryTxnRequest:
            with tm._lock:  # added again by the next round
                tm.pending_partitions -= partitions
                tm.new_partitions |= partitions
            raise _Chained() from None
        with tm._lock:
            tm.pending_partitions -= partitions
            tm.in_transaction |= partitions

    return _Request(ApiKey.ADD_PARTITIONS_TO_TXN, build, on_response, result,
                    (COORDINATOR_TRANSACTION, tm.transactional_id))


def _coordinator_node(sender: Any, tm: TransactionalManager, request: _Request, now: float) -> Node | None:
    """The coordinator of ``request`` when known; else a FindCoordinator is sent (None)."""
    if request.coordinator is None:
        return sender.client.least_loaded_node(now, sender.metadata)
    node = tm.coordinators.get(request.coordinator)
    if node is not None:
        return node
    key_type, key = request.coordinator
    client = sender.client
    target = client.least_loaded_node(now, sender.metadata)
    if target is None:
        client.poll(client.reconnect_backoff_ms, now)
        return None
    if not client.ready(target, now):
        client.poll(min(client.poll_delay_ms(target.id, now), sender.retry_backoff_ms), now)
        return None
    version = client.api_version(target.id, ApiKey.FIND_COORDINATOR, 2, 1)
    if version is None:
        tm.fail(KafkaError("the broker does not support FindCoordinator v1+", ErrorCode.UNSUPPORTED_VERSION),
                fatal=True)
        return None
    body = request_schema(ApiKey.FIND_COORDINATOR, version).cls(key=key, key_type=key_type)
    find = _Request(ApiKey.FIND_COORDINATOR, None, None, request.result, None)
    tm.in_flight = find

    def on_response(resp: Any) -> None:
        tm.in_flight = None
        b = resp.body
        if resp.error is not None or b is None or b.error_code != ErrorCode.NONE:
            request.retry_at = resp.received_ms + tm.retry_backoff_ms
            return
        tm.coordinators[(key_type, key)] = Node(b.node_id, b.host, b.port)
        client.add_node(b.node_id, b.host, b.port)

    client.send(target.id, ApiKey.FIND_COORDINATOR, body, version=version, callback=on_response, now_ms=now)
    client.poll(sender.retry_backoff_ms, now)
    return None
