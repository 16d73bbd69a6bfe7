"""``TransactionCoordinator``: Kafka's transaction coordinator on one node (KIP-98, and
KIP-890 part 2's transaction version 2).

Owns:

* the cache: transactional id -> ``TransactionMetadata`` (``state.py``), and producer id ->
  the same metadata (for the Produce check);
* its persistence in the compacted internal topic ``__transaction_state`` (``log.py``;
  ``TRANSACTION_STATE_TOPIC_SPEC``, through the coordinator runtime,
  ``broker.server.coordinator``): every state change is ONE record appended with
  ``AppendOrigin.COORDINATOR`` to partition
  ``abs(java_hashCode(transactional_id)) % partitions`` BEFORE the cache changes (a failed
  append leaves the cache as it was and answers the request with its code). The topic is
  created on first write with ``transaction.state.log.num.partitions`` partitions and Kafka's
  configs (cleanup.policy=compact, min.insync.replicas=transaction.state.log.min.isr,
  segment.bytes=transaction.state.log.segment.bytes, unclean.leader.election.enable=false,
  compression.type=uncompressed); an existing topic keeps its own partition count. Append
  failures map as Kafka's ``TransactionStateManager``: a missing partition ->
  COORDINATOR_NOT_AVAILABLE, a storage error -> NOT_COORDINATOR, a record too large ->
  UNKNOWN_SERVER_ERROR.
* loading (``startup()``, before the broker accepts connections; requests meanwhile get
  COORDINATOR_LOAD_IN_PROGRESS): every partition is replayed in order by the runtime's
  loader (``_replay`` per record), the latest record of an id wins, a tombstone removes
  it. A transaction found in PrepareCommit / PrepareAbort
  (the broker stopped between that record and the Complete one) has its markers written
  again (a marker written twice is harmless: the second finds no open transaction) and is
  completed. An Ongoing one is left to its timeout.
* ending a transaction (EndTxn, a fenced or timed-out one): Prepare* is logged (the
  outcome is decided), then the markers go to every partition of the transaction
  (``markers.py``; for a ``__consumer_offsets`` partition the group coordinator then applies
  or drops the transaction's offsets, its ``txn_offsets.complete``), then Complete*
  is logged, normally all before the request is answered. If the markers cannot be written
  (a log directory offline) the EndTxn is still answered NONE, as Kafka answers once
  Prepare* is logged, and ``retry_pending_completions`` (every
  ``kafkalog.transaction.marker.retry.interval.ms``) tries again; meanwhile the id's next
  requests get CONCURRENT_TRANSACTIONS (a transactional Produce v12: NOT_ENOUGH_REPLICAS,
  which every producer retries). A crash in between converges to the same outcome at the
  next startup.
* transaction versions: ``transaction_version`` (``kafkalog.feature.transaction.version``,
  default 2) is the level ApiVersions finalizes. A client at 2 sends Produce v12 and
  TxnOffsetCommit v5, which add their partition to the transaction themselves
  (``produce_guard`` / ``txn_offset_commit_guard`` with ``implicit_add``, starting the
  transaction if none is Ongoing; the epoch must be the current one), and EndTxn v5: the
  Prepare* bumps the epoch (the markers carry the bumped one, so the producer's earlier
  epoch is fenced), and the answer names the producer id and epoch to go on with. When the
  epoch is exhausted (32766) the bump goes to 32767 for the markers and a new producer id
  (``next_producer_id``, logged) takes over at epoch 0 once they are written. A retried
  EndTxn v5 names the epoch before the bump (or the old id at 32766): recognised as a retry
  (NONE with the current id and epoch); anything else older is PRODUCER_FENCED. The
  client's version is logged with every state (TransactionLogValue v1's tag 2), so this
  holds across restarts. A TV2 transaction aborted by its timeout or by a new instance is
  fenced two epochs up (one for the fence, one for the completion), so the old producer's
  epoch + 1 is not taken for a retry.
* timeouts (periodic tasks of the runtime's timer, on the broker's scheduler): every
  ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` an Ongoing
  transaction older than its ``transaction.timeout.ms`` is aborted with its epoch bumped
  (the producer that started it is fenced, as in Kafka). Every
  ``transaction.remove.expired.transaction.cleanup.interval.ms`` ids in Empty / Complete*
  whose last update is older than ``transactional.id.expiration.ms`` are removed
  (a tombstone).

Request rules (Kafka's ``TransactionCoordinator``), codes returned by the methods:

* InitProducerId: timeout <= 0 or above ``transaction.max.timeout.ms`` ->
  INVALID_TRANSACTION_TIMEOUT; "" -> INVALID_REQUEST. A new id gets a new producer id with
  epoch 0. Otherwise (KIP-360: the request may name its current producer id and epoch, which
  must be the current or the previous one, else PRODUCER_FENCED) the epoch is bumped (a new
  producer id when it would reach 32767); a request without them (a new instance) clears
  the previous epoch, so the replaced instance's own KIP-360 bump is fenced, not taken
  for a retry; an Ongoing transaction of the previous instance is
  first aborted with a fencing epoch, so that instance's further writes are refused.
* AddPartitionsToTxn / AddOffsetsToTxn / TxnOffsetCommit / EndTxn: an unknown id or another
  producer id -> INVALID_PRODUCER_ID_MAPPING, another epoch -> PRODUCER_FENCED, a
  transaction being completed -> CONCURRENT_TRANSACTIONS. EndTxn: commit after an abort
  (or the reverse) and EndTxn without a transaction -> INVALID_TXN_STATE; a retried EndTxn
  of a completed transaction -> NONE.
* Produce of a transactional batch (``produce_guard``): the partition must be in the
  producer's Ongoing transaction, else INVALID_TXN_STATE (the simple form of Kafka's
  verification); the append happens under the transaction's lock so that no marker can
  slip in between the check and the append.

Thread-safety: ``_lock`` guards the cache's structure for short moments; each
``TransactionMetadata.lock`` (RLock) is held for a whole state change, including the log
appends and the markers. Lock order: a transaction's lock, then the group coordinator's
locks, then a log's lock.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from broker.log.clock import SYSTEM_TIME, Time
from broker.protocol import ErrorCode
from broker.server.coordinator import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    CoordinatorRecord,
    CoordinatorRuntime,
    InternalTopicSpec,
    storage_error_map,
)
from broker.server.errors import ApiError, is_expected
from broker.server.txn import log as txn_log
from broker.server.txn.config import TransactionConfig
from broker.server.txn.markers import crash_point, write_marker
from broker.server.txn.state import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
)

log = logging.getLogger(__name__)

S = TransactionState
# Kafka's TransactionLog topic configs and the transaction.state.log.* keys of its
# TransactionStateManagerConfig / TransactionLogConfig.
TRANSACTION_STATE_TOPIC_SPEC = InternalTopicSpec(
    TRANSACTION_STATE_TOPIC, partitions_key="transaction.state.log.num.partitions",
    replication_key="transaction.state.log.replication.factor",
    segment_bytes_key="transaction.state.log.segment.bytes", load_buffer_key="transaction.state.log.load.buffer.size",
    min_isr_key="transaction.state.log.min.isr",
    configs=(("cleanup.policy", "compact"), ("unclean.leader.election.enable", "false"),
             ("compression.type", "uncompressed")))


class TransactionCoordinator:
    """See the module docstring. ``topics``: the broker's ``TopicManager``;
    ``producer_ids``: its ``ProducerIdManager``; ``group_coordinator``: for the offsets of
    transactions; ``on_append((topic, partition))`` wakes fetches waiting on a partition."""

    def __init__(self, topics: Any, config: Mapping[str, Any], producer_ids: Any, group_coordinator: Any, *,
                 time: Time = SYSTEM_TIME, scheduler: Any = None,
                 on_append: Any = None) -> None:
        self.topics = topics
        self.producer_ids = producer_ids
        self.group_coordinator = group_coordinator
        self.time = time
        self.on_append = on_append
        self.runtime = CoordinatorRuntime(
            TRANSACTION_STATE_TOPIC_SPEC, topics, config, time=time, scheduler=scheduler, on_append=on_append,
            append_errors=storage_error_map(ErrorCode.UNKNOWN_SERVER_ERROR))
        settings = TransactionConfig.from_config(config)  # ConfigError naming a bad key
        self.settings = settings
        self.max_timeout_ms = settings.max_timeout_ms
        self.id_expiration_ms = settings.id_expiration_ms
        self.abort_interval_ms = settings.abort_interval_ms
        self.expire_interval_ms = settings.expire_interval_ms
        self.transaction_version = settings.transaction_version
        self.features_epoch = self.time.milliseconds()
        self.marker_retry_interval_ms = settings.marker_retry_interval_ms
        self._pending_completion: set[str] = set()
        self._txns: dict[str, TransactionMetadata] = {}
        self._by_pid: dict[int, TransactionMetadata] = {}
        self._lock = threading.Lock()

    # --- lifecycle ---

    def startup(self) -> None:
        results = self.runtime.startup(self._replay)
        if results:
            log.info("loaded %d records of %d transactional ids from %s", sum(r.applied for r in results),
                     len(self._txns), TRANSACTION_STATE_TOPIC)
        for md in list(self._txns.values()):
            if md.state.is_prepare:
                with md.lock:
                    log.info("completing transaction %s (%s at startup)", md.transactional_id,
                             md.state.display_name)
                    self._try_complete(md, md.state == S.PREPARE_COMMIT)
        timer = self.runtime.timer
        timer.schedule_periodic("transaction-abort", self.abort_timed_out_transactions, self.abort_interval_ms)
        timer.schedule_periodic("transaction-marker-retry", self.retry_pending_completions,
                                self.marker_retry_interval_ms)
        timer.schedule_periodic("transactionalId-expiration", self.remove_expired_transactional_ids,
                                self.expire_interval_ms)

    def shutdown(self) -> None:
        self.runtime.shutdown()

    # --- the topic ---

    def partition_for(self, transactional_id: str) -> int:
        return self.runtime.partition_for(transactional_id)

    def _write(self, md: TransactionMetadata, tombstone: bool = False) -> None:
        """Log ``md`` (a snapshot about to replace the cached one); ApiError on failure."""
        value = None if tombstone else txn_log.encode_value(md)
        self.runtime.append(self.partition_for(md.transactional_id),
                            [(txn_log.encode_key(md.transactional_id), value)])

    def _commit_state(self, md: TransactionMetadata, new: TransactionMetadata) -> None:
        """Write ``new`` and make it the cached state of ``md``."""
        self._write(new)
        old_pid = md.producer_id
        md.copy_from(new)
        with self._lock:
            if old_pid != md.producer_id:
                self._by_pid.pop(old_pid, None)
            self._by_pid[md.producer_id] = md

    # --- lookups ---

    def _get(self, transactional_id: str) -> TransactionMetadata | None:
        with self._lock:
            return self._txns.get(transactional_id)

    def _check(self, transactional_id: str | None, producer_id: int, producer_epoch: int
               ) -> TransactionMetadata:
        """The metadata of a request naming a transaction; ApiError otherwise."""
        if not transactional_id:
            raise ApiError(ErrorCode.INVALID_REQUEST, "the transactional id is empty")
        self.runtime.check_loaded()
        md = self._get(transactional_id)
        if md is None or md.state == S.DEAD:
            raise ApiError(ErrorCode.INVALID_PRODUCER_ID_MAPPING, f"unknown transactional id {transactional_id}")
        return md

    @staticmethod
    def _check_producer(md: TransactionMetadata, producer_id: int, producer_epoch: int) -> None:
        if md.producer_id != producer_id:
            raise ApiError(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                           f"producer id {producer_id} is not the one of {md.transactional_id}")
        if md.producer_epoch != producer_epoch:
            raise ApiError(ErrorCode.PRODUCER_FENCED,
                           f"epoch {producer_epoch} of {md.transactional_id} is not the current one "
                           f"({md.producer_epoch}): fenced by a newer producer")

    # --- InitProducerId ---

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = NO_PRODUCER_ID,
                         producer_epoch: int = NO_PRODUCER_EPOCH) -> tuple[int, int]:
        """(producer id, epoch) for a transactional producer; ApiError with the code."""
        if transactional_id == "":
            raise ApiError(ErrorCode.INVALID_REQUEST, "the transactional id is empty")
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            raise ApiError(ErrorCode.INVALID_TRANSACTION_TIMEOUT,
                           f"transaction.timeout.ms {timeout_ms} is not in 1..{self.max_timeout_ms} "
                           "(transaction.max.timeout.ms)")
        self.runtime.check_loaded()
        with self._lock:
            md = self._txns.get(transactional_id)
            if md is None or md.state == S.DEAD:
                md = self._txns[transactional_id] = TransactionMetadata(
                    transactional_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, timeout_ms)
        with md.lock:
            if self._get(transactional_id) is not md:  # expired meanwhile: start over
                return self.init_producer_id(transactional_id, timeout_ms, producer_id, producer_epoch)
            if md.producer_id == NO_PRODUCER_ID:  # new
                new = md.snapshot()
                new.producer_id, new.producer_epoch = self.producer_ids.generate(), 0
                new.txn_timeout_ms, new.state = timeout_ms, S.EMPTY
                new.txn_last_update_timestamp = self.time.milliseconds()
                try:
                    self._commit_state(md, new)
                except ApiError:
                    with self._lock:
                        if self._txns.get(transactional_id) is md and md.producer_id == NO_PRODUCER_ID:
                            del self._txns[transactional_id]
                    raise
                return md.producer_id, md.producer_epoch
            if producer_id != NO_PRODUCER_ID:
                current = producer_id == md.producer_id and producer_epoch == md.producer_epoch
                retry = ((producer_id == md.producer_id and producer_epoch == md.last_producer_epoch)
                         or (producer_id == md.previous_producer_id and md.producer_epoch == 0))
                if retry and not md.state == S.ONGOING:
                    return md.producer_id, md.producer_epoch
                if not current:
                    raise ApiError(ErrorCode.PRODUCER_FENCED,
                                   f"producer {producer_id} epoch {producer_epoch} is not the current "
                                   f"one of {transactional_id}")
            if md.state.is_prepare and not self._try_complete(md, md.state == S.PREPARE_COMMIT):
                raise ApiError(ErrorCode.CONCURRENT_TRANSACTIONS,
                               f"the markers of {transactional_id}'s last transaction are still being written")
            if md.state == S.ONGOING:
                self._fence_and_abort(md, "a new producer instance initialised")
            new = md.snapshot()
            self._bump(new)
            if producer_id == NO_PRODUCER_ID:
                # a new instance (Kafka's prepareIncrementProducerEpoch without an expected
                # epoch): the last epoch is cleared, so the instance it replaces cannot pass
                # a KIP-360 bump naming its own epoch off as a retry of this one
                new.last_producer_epoch = NO_PRODUCER_EPOCH
            new.txn_timeout_ms, new.state = timeout_ms, S.EMPTY
            new.partitions = set()
            new.txn_start_timestamp, new.txn_last_update_timestamp = -1, self.time.milliseconds()
            self._commit_state(md, new)
            return md.producer_id, md.producer_epoch

    def _bump(self, new: TransactionMetadata) -> None:
        if new.producer_epoch >= MAX_PRODUCER_EPOCH:
            new.previous_producer_id, new.producer_id = new.producer_id, self.producer_ids.generate()
            new.last_producer_epoch, new.producer_epoch = NO_PRODUCER_EPOCH, 0
        else:
            new.last_producer_epoch, new.producer_epoch = new.producer_epoch, new.producer_epoch + 1

    def _fence_and_abort(self, md: TransactionMetadata, why: str) -> None:
        """Abort ``md``'s Ongoing transaction under an epoch above the producer's (Kafka's
        PrepareEpochFence): the markers carry it, so the fenced producer's writes fail. With
        transaction version 2 the abort bumps once more, as every TV2 completion does, so the
        fenced producer's epoch + 1 is not mistaken for a retry of its own EndTxn."""
        log.info("aborting transaction %s (producer %d epoch %d): %s", md.transactional_id, md.producer_id,
                 md.producer_epoch, why)
        new = md.snapshot()
        new.transition_to(S.PREPARE_EPOCH_FENCE)
        bumps = 2 if md.client_transaction_version >= 2 else 1
        for _ in range(bumps):
            if new.producer_epoch < MAX_PRODUCER_EPOCH:
                new.last_producer_epoch, new.producer_epoch = new.producer_epoch, new.producer_epoch + 1
        new.transition_to(S.PREPARE_ABORT)
        new.txn_last_update_timestamp = self.time.milliseconds()
        self._commit_state(md, new)
        crash_point("after-prepare")
        self._try_complete(md, False)

    # --- adding partitions ---

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: set[tuple[str, int]], client_transaction_version: int = 0) -> None:
        """AddPartitionsToTxn / AddOffsetsToTxn; ApiError with the code."""
        md = self._check(transactional_id, producer_id, producer_epoch)
        with md.lock:
            self._check_producer(md, producer_id, producer_epoch)
            self._add_locked(md, partitions, client_transaction_version)

    def _add_locked(self, md: TransactionMetadata, partitions: set[tuple[str, int]],
                    client_transaction_version: int) -> None:
        """Add ``partitions`` to ``md``'s transaction (starting one if none is Ongoing);
        ``md.lock`` held and the producer checked."""
        if md.state.is_prepare or md.state == S.PREPARE_EPOCH_FENCE:
            raise ApiError(ErrorCode.CONCURRENT_TRANSACTIONS,
                           f"transaction {md.transactional_id} is being completed")
        if md.state == S.DEAD:
            raise ApiError(ErrorCode.INVALID_PRODUCER_ID_MAPPING, f"{md.transactional_id} has expired")
        if md.state == S.ONGOING and partitions <= md.partitions:
            return
        new = md.snapshot()
        now = self.time.milliseconds()
        if new.state != S.ONGOING:
            new.txn_start_timestamp = now
            new.partitions = set()
        new.transition_to(S.ONGOING)
        new.partitions |= partitions
        new.client_transaction_version = client_transaction_version
        new.txn_last_update_timestamp = now
        self._commit_state(md, new)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: set[tuple[str, int]]) -> set[tuple[str, int]]:
        """AddPartitionsToTxn v4+ with verify_only (KIP-890 part 1, a partition leader asking
        before it appends a transactional batch): the partitions of ``partitions`` that are
        NOT in the producer's Ongoing transaction; ApiError for the id as a whole."""
        md = self._check(transactional_id, producer_id, producer_epoch)
        with md.lock:
            self._check_producer(md, producer_id, producer_epoch)
            if md.state != S.ONGOING:
                return set(partitions)
            return partitions - md.partitions

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> None:
        if self.group_coordinator is None:
            raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is not running")
        if not group_id:
            raise ApiError(ErrorCode.INVALID_GROUP_ID, "the group id is empty")
        self.group_coordinator.ensure_offsets_topic()
        p = self.group_coordinator.partition_for(group_id)
        self.add_partitions(transactional_id, producer_id, producer_epoch, {(OFFSETS_TOPIC, p)})

    @contextlib.contextmanager
    def txn_offset_commit_guard(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                group_id: str, implicit_add: bool = False) -> Iterator[None]:
        """Held around a TxnOffsetCommit's append: the group's partition must be in the
        producer's Ongoing transaction (AddOffsetsToTxn first), else INVALID_TXN_STATE. With
        ``implicit_add`` (TxnOffsetCommit v5+ while transaction version 2 is finalized) the
        commit adds it itself, as KIP-890 part 2 has it."""
        md = self._check(transactional_id, producer_id, producer_epoch)
        with md.lock:
            self._check_producer(md, producer_id, producer_epoch)
            p = self.group_coordinator.partition_for(group_id) if self.group_coordinator is not None else -1
            if md.state.is_prepare:
                raise ApiError(ErrorCode.CONCURRENT_TRANSACTIONS)
            if implicit_add and self.transaction_version >= 2:
                self.group_coordinator.ensure_offsets_topic()
                self._add_locked(md, {(OFFSETS_TOPIC, p)}, 2)
            if md.state != S.ONGOING or (OFFSETS_TOPIC, p) not in md.partitions:
                raise ApiError(ErrorCode.INVALID_TXN_STATE,
                               f"group {group_id} was not added to transaction {transactional_id}")
            yield

    @contextlib.contextmanager
    def produce_guard(self, producer_id: int, producer_epoch: int, topic: str, partition: int,
                      implicit_add: bool = False) -> Iterator[None]:
        """Held around the append of a transactional batch (module docstring). With
        ``implicit_add`` (Produce v12+ while transaction version 2 is finalized) a partition
        not yet in the transaction is added, starting the transaction if none is Ongoing;
        the epoch must then be the current one."""
        with self._lock:
            md = self._by_pid.get(producer_id)
        if md is None:
            raise ApiError(ErrorCode.INVALID_TXN_STATE,
                           f"producer {producer_id} has no transaction with this coordinator")
        with md.lock:
            if md.producer_id != producer_id:
                raise ApiError(ErrorCode.INVALID_TXN_STATE, f"producer {producer_id} has no transaction")
            if producer_epoch < md.producer_epoch:
                raise ApiError(ErrorCode.INVALID_PRODUCER_EPOCH,
                               f"epoch {producer_epoch} of producer {producer_id} is fenced "
                               f"(current {md.producer_epoch})")
            if implicit_add and self.transaction_version >= 2 and (
                    md.state != S.ONGOING or (topic, partition) not in md.partitions):
                if producer_epoch != md.producer_epoch:
                    raise ApiError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                   f"epoch {producer_epoch} of producer {producer_id} is not the current one "
                                   f"({md.producer_epoch})")
                try:
                    self._add_locked(md, {(topic, partition)}, 2)
                except ApiError as exc:
                    if exc.code == ErrorCode.CONCURRENT_TRANSACTIONS:  # retriable for every producer
                        raise ApiError(ErrorCode.NOT_ENOUGH_REPLICAS, str(exc)) from exc
                    raise
            if md.state != S.ONGOING or (topic, partition) not in md.partitions:
                raise ApiError(ErrorCode.INVALID_TXN_STATE,
                               f"{topic}-{partition} is not in an ongoing transaction of producer {producer_id}")
            yield

    # --- ending ---

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                        client_transaction_version: int = 0) -> tuple[int, int]:
        """EndTxn; returns (producer id, epoch) the producer goes on with (EndTxn v5 answers
        them: with transaction version 2 the epoch is bumped at every completion);
        ApiError with the code.

        The outcome is decided once Prepare* is logged: the markers are then written
        before the answer, and if that fails (a log directory offline) the request is
        still answered NONE and the markers are retried in the background
        (``retry_pending_completions``), as Kafka's marker channel does; the next
        transaction waits (CONCURRENT_TRANSACTIONS) until they are in."""
        md = self._check(transactional_id, producer_id, producer_epoch)
        with md.lock:
            tv2 = md.client_transaction_version >= 2 and md.state != S.PREPARE_EPOCH_FENCE
            retry_on_bump = tv2 and md.producer_epoch == producer_epoch + 1
            retry_on_overflow = (tv2 and md.previous_producer_id == producer_id
                                 and producer_epoch == MAX_PRODUCER_EPOCH and md.producer_epoch == 0)
            if md.producer_id != producer_id and not retry_on_overflow:
                raise ApiError(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                               f"producer id {producer_id} is not the one of {transactional_id}")
            state = md.state
            if not tv2:
                valid = producer_epoch == md.producer_epoch
            elif state.is_prepare:
                valid = retry_on_bump
            elif state.is_complete:
                valid = retry_on_bump or retry_on_overflow
            else:
                valid = producer_epoch == md.producer_epoch
            if not valid:
                raise ApiError(ErrorCode.PRODUCER_FENCED,
                               f"epoch {producer_epoch} of {transactional_id} is not the current one "
                               f"({md.producer_epoch}): fenced by a newer producer")
            if state == S.ONGOING:
                new = md.snapshot()
                new.transition_to(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
                new.client_transaction_version = client_transaction_version
                if client_transaction_version >= 2:
                    if new.producer_epoch >= MAX_PRODUCER_EPOCH:  # exhausted: a new id after the markers
                        new.next_producer_id = self.producer_ids.generate()
                    new.last_producer_epoch, new.producer_epoch = new.producer_epoch, new.producer_epoch + 1
                new.txn_last_update_timestamp = self.time.milliseconds()
                self._commit_state(md, new)
                crash_point("after-prepare")
                self._try_complete(md, commit)
                return self._next_producer(md)
            if state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
                return md.producer_id, md.producer_epoch  # a retry
            if state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
                if self._try_complete(md, commit):  # an earlier completion failed: retry it now
                    return md.producer_id, md.producer_epoch
                raise ApiError(ErrorCode.CONCURRENT_TRANSACTIONS,
                               f"the markers of {transactional_id}'s transaction are still being written")
            what = "commit" if commit else "abort"
            raise ApiError(ErrorCode.INVALID_TXN_STATE,
                           f"cannot {what} transaction {transactional_id} in state {state.display_name}")

    @staticmethod
    def _next_producer(md: TransactionMetadata) -> tuple[int, int]:
        """What the producer goes on with once ``md``'s transaction is complete."""
        if md.state.is_prepare and md.next_producer_id != NO_PRODUCER_ID:
            return md.next_producer_id, 0
        return md.producer_id, md.producer_epoch

    def _try_complete(self, md: TransactionMetadata, commit: bool) -> bool:
        """``_complete``; on failure the transaction stays Prepare* and is retried by
        ``retry_pending_completions``. True when complete."""
        try:
            self._complete(md, commit)
        except Exception as exc:  # noqa: BLE001 - retried in the background
            (log.warning if is_expected(exc) else log.exception)(
                "writing the markers of transaction %s failed (retried every %d ms): %s", md.transactional_id,
                self.marker_retry_interval_ms, exc)
            with self._lock:
                self._pending_completion.add(md.transactional_id)
            return False
        with self._lock:
            self._pending_completion.discard(md.transactional_id)
        return True

    def retry_pending_completions(self) -> list[str]:
        """Complete the transactions whose markers could not be written (scheduled task)."""
        with self._lock:
            pending = [self._txns.get(t) for t in self._pending_completion]
        done = []
        for md in pending:
            if md is None:
                continue
            with md.lock:
                if not md.state.is_prepare:
                    with self._lock:
                        self._pending_completion.discard(md.transactional_id)
                    continue
                if self._try_complete(md, md.state == S.PREPARE_COMMIT):
                    done.append(md.transactional_id)
        if done:
            log.info("completed %d transactions whose markers had failed", len(done))
        return done

    def _complete(self, md: TransactionMetadata, commit: bool) -> None:
        """Markers to every partition, then Complete* (``md`` in Prepare*, lock held)."""
        now = self.time.milliseconds()
        written = 0
        for topic, partition in sorted(md.partitions):
            offset = write_marker(self.topics, topic, partition, producer_id=md.producer_id,
                                  producer_epoch=md.producer_epoch, commit=commit, timestamp=now)
            if offset is None:
                continue
            if self.on_append is not None:
                self.on_append((topic, partition))
            if topic == OFFSETS_TOPIC and self.group_coordinator is not None:
                self.group_coordinator.txn_offsets.complete(partition, md.producer_id, commit, offset)
            written += 1
            if written == 1:
                crash_point("after-first-marker")
        crash_point("before-complete")
        new = md.snapshot()
        new.transition_to(S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
        new.txn_last_update_timestamp = self.time.milliseconds()
        if new.next_producer_id != NO_PRODUCER_ID:  # TV2, epoch exhausted: the markers carried the old id
            new.previous_producer_id, new.producer_id = new.producer_id, new.next_producer_id
            new.last_producer_epoch, new.producer_epoch = new.producer_epoch, 0
            new.next_producer_id = NO_PRODUCER_ID
        self._commit_state(md, new)
        md.partitions = set()

    # --- timeouts and expiry ---

    def abort_timed_out_transactions(self, now_ms: int | None = None) -> list[str]:
        now = self.time.milliseconds() if now_ms is None else now_ms
        with self._lock:
            candidates = [md for md in self._txns.values()
                          if md.state == S.ONGOING and md.txn_start_timestamp + md.txn_timeout_ms <= now]
        aborted = []
        for md in candidates:
            with md.lock:
                if md.state != S.ONGOING or md.txn_start_timestamp + md.txn_timeout_ms > now:
                    continue
                try:
                    self._fence_and_abort(md, f"timed out after {md.txn_timeout_ms} ms")
                    aborted.append(md.transactional_id)
                except Exception:  # noqa: BLE001 - retried at the next check
                    log.exception("aborting the timed-out transaction %s failed", md.transactional_id)
        return aborted

    def remove_expired_transactional_ids(self, now_ms: int | None = None) -> list[str]:
        now = self.time.milliseconds() if now_ms is None else now_ms
        with self._lock:
            candidates = [md for md in self._txns.values()
                          if (md.state == S.EMPTY or md.state.is_complete)
                          and md.txn_last_update_timestamp + self.id_expiration_ms <= now]
        removed = []
        for md in candidates:
            with md.lock:
                if not (md.state == S.EMPTY or md.state.is_complete):
                    continue
                try:
                    self._write(md, tombstone=True)
                except ApiError as exc:
                    log.warning("expiring transactional id %s failed: %s", md.transactional_id, exc)
                    continue
                md.transition_to(S.DEAD)
                with self._lock:
                    self._txns.pop(md.transactional_id, None)
                    if self._by_pid.get(md.producer_id) is md:
                        del self._by_pid[md.producer_id]
                removed.append(md.transactional_id)
        if removed:
            log.info("expired %d transactional ids", len(removed))
        return removed

    # --- admin ---

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        self.runtime.check_loaded()
        md = self._get(transactional_id)
        if md is None or md.state == S.DEAD:
            return None
        with md.lock:
            return md.snapshot()

    def list_transactions(self) -> list[TransactionMetadata]:
        self.runtime.check_loaded()
        with self._lock:
            mds = list(self._txns.values())
        return [md.snapshot() for md in mds if md.state != S.DEAD and md.producer_id != NO_PRODUCER_ID]

    # --- loading ---

    def _replay(self, record: CoordinatorRecord) -> bool:
        """Apply one loaded record to the cache (the runtime's loader calls it in log
        order); False when it was skipped."""
        key, value = record.key, record.value
        try:
            txn_id = txn_log.decode_key(key or b"")
            if value is None:
                md = self._txns.pop(txn_id, None)
                if md is not None and self._by_pid.get(md.producer_id) is md:
                    del self._by_pid[md.producer_id]
                return True
            loaded = txn_log.decode_value(txn_id, value)
        except txn_log.TransactionLogFormatError as exc:
            log.warning("%s-%d: skipping an unreadable record at offset %d: %s", TRANSACTION_STATE_TOPIC,
                        record.partition, record.offset, exc)
            return False
        md = self._txns.get(txn_id)
        if md is None:
            md = self._txns[txn_id] = loaded
        else:
            if self._by_pid.get(md.producer_id) is md:
                del self._by_pid[md.producer_id]
            md.copy_from(loaded)
        self._by_pid[md.producer_id] = md
        return True


__all__ = ["TransactionCoordinator"]
