"""TransactionManager: the idempotent producer's state (the transactional producer's
states and requests extend it in ``transactional.py``).

Owns, as Kafka's ``TransactionManager`` / ``TxnPartitionMap`` for a producer without a
``transactional.id``:

* The producer id and epoch, fetched with InitProducerId on first use (the Sender sends
  the request; ``needs_producer_id`` / ``set_producer_id_and_epoch``).
* Per partition (``_TxnPartitionEntry``): the producer id/epoch its sequences belong to,
  the next sequence to assign (wrapping at 2**31 - 1 like the broker, I6), the last
  acknowledged sequence and offset, and the batches that hold a sequence and are not
  done ("in flight": sent, or queued again for retry), ordered by base sequence.
* The decisions of the seed's error table for idempotence-recoverable errors
  (``can_retry``: OUT_OF_ORDER_SEQUENCE_NUMBER and UNKNOWN_PRODUCER_ID), unresolved
  sequences after an expired in-flight batch (no new batch is drained for that partition
  until every earlier one is resolved, I9), and the local epoch bump: the epoch is
  incremented (a new producer id is fetched at the int16 limit) and the affected
  partitions' in-flight batches get new sequences from 0 in ascending old-sequence order
  (I10; only batches of the current producer id and epoch).

Thread-safety: every public method takes the manager's lock; the Sender thread is the
main user, user threads only read ``producer_id_and_epoch`` for diagnostics.
"""

from __future__ import annotations

import bisect
import logging
import threading
from typing import Any

from broker.protocol import ErrorCode
from broker.record.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE

log = logging.getLogger(__name__)

SEQUENCE_MODULUS = 1 << 31
EPOCH_MAX = 0x7FFF
NO_LAST_ACKED_SEQUENCE = -1


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from 2**31 - 1 to 0, as the broker expects (I6)."""
    return (sequence + increment) % SEQUENCE_MODULUS


class _TxnPartitionEntry:
    __slots__ = ("producer_id", "epoch", "next_sequence", "last_acked_sequence",
                 "last_acked_offset", "in_flight")

    def __init__(self, producer_id: int, epoch: int) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.next_sequence = 0
        self.last_acked_sequence = NO_LAST_ACKED_SEQUENCE
        self.last_acked_offset = -1
        self.in_flight: list[Any] = []  # ProducerBatch, sorted by base_sequence

    def add(self, batch: Any) -> None:
        keys = [b.base_sequence for b in self.in_flight]
        self.in_flight.insert(bisect.bisect_right(keys, batch.base_sequence), batch)

    def remove(self, batch: Any) -> None:
        try:
            self.in_flight.remove(batch)
        except ValueError:
            pass

    def start_sequences_at_beginning(self, producer_id: int, epoch: int) -> None:
        """Renumber the in-flight batches from 0 in their current (sequence) order."""
        seq = 0
        for b in self.in_flight:
            b.reset_producer_state(producer_id, epoch, seq)
            seq = increment_sequence(seq, b.record_count)
        self.producer_id = producer_id
        self.epoch = epoch
        self.next_sequence = seq
        self.last_acked_sequence = NO_LAST_ACKED_SEQUENCE


class TransactionManager:
    """Idempotence state (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self._partitions: dict[tuple[str, int], _TxnPartitionEntry] = {}
        self._unresolved: dict[tuple[str, int], int] = {}  # tp -> next seq when marked
        self._to_rewrite: set[tuple[str, int]] = set()
        self._epoch_bump_required = False
        self._init_in_flight = False
        self.fatal_error: BaseException | None = None
        self.epoch_bumps = 0
        self.transaction_v2 = False  # KIP-890 part 2 for the current transaction (transactional.py)

    # -- producer id ---------------------------------------------------------------------

    @property
    def is_transactional(self) -> bool:
        return False

    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    def producer_id_and_epoch(self) -> tuple[int, int]:
        return self.producer_id, self.producer_epoch

    def needs_producer_id(self) -> bool:
        with self._lock:
            return not self.has_producer_id() and not self._init_in_flight

    def init_started(self) -> None:
        self._init_in_flight = True

    def init_failed(self) -> None:
        self._init_in_flight = False

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
        with self._lock:
            self._init_in_flight = False
            self.producer_id = producer_id
            self.producer_epoch = epoch
            log.debug("producer id %d epoch %d", producer_id, epoch)

    # -- per-partition state -------------------------------------------------------------

    def _entry(self, tp: tuple[str, int]) -> _TxnPartitionEntry:
        e = self._partitions.get(tp)
        if e is None:
            e = _TxnPartitionEntry(self.producer_id, self.producer_epoch)
            self._partitions[tp] = e
        return e

    def sequence_number(self, tp: tuple[str, int]) -> int:
        with self._lock:
            return self._entry(tp).next_sequence

    def last_acked_sequence(self, tp: tuple[str, int]) -> int:
        e = self._partitions.get(tp)
        return e.last_acked_sequence if e is not None else NO_LAST_ACKED_SEQUENCE

    def has_in_flight_batches(self, tp: tuple[str, int]) -> bool:
        e = self._partitions.get(tp)
        return bool(e is not None and e.in_flight)

    def first_in_flight_sequence(self, tp: tuple[str, int]) -> int:
        e = self._partitions.get(tp)
        if e is None or not e.in_flight:
            return NO_SEQUENCE
        return e.in_flight[0].base_sequence

    def has_stale_producer_id_and_epoch(self, tp: tuple[str, int]) -> bool:
        e = self._partitions.get(tp)
        return e is not None and (e.producer_id, e.epoch) != (self.producer_id, self.producer_epoch)

    def has_unresolved_sequence(self, tp: tuple[str, int]) -> bool:
        return tp in self._unresolved

    def is_next_sequence(self, tp: tuple[str, int], sequence: int) -> bool:
        return increment_sequence(self.last_acked_sequence(tp), 1) == sequence \
            if self.last_acked_sequence(tp) != NO_LAST_ACKED_SEQUENCE else sequence == 0

    # -- drain-time stamping (Sender thread, from RecordAccumulator.drain) ---------------

    def should_stop_drain(self, batch: Any, tp: tuple[str, int]) -> bool:
        """Kafka's shouldStopDrainBatchesForPartition."""
        with self._lock:
            if not self.has_producer_id() or self.fatal_error is not None:
                return True
            if not batch.has_sequence():
                if self.has_in_flight_batches(tp) and self.has_stale_producer_id_and_epoch(tp):
                    return True  # no new-epoch seq 0 ahead of old-epoch batches
                if self.has_unresolved_sequence(tp):
                    return True  # earlier outcomes unknown: wait for them
            first = self.first_in_flight_sequence(tp)
            # A retried batch goes only when it is the first in line: one in flight.
            return first != NO_SEQUENCE and batch.has_sequence() and batch.base_sequence != first

    def assign_sequence(self, batch: Any, tp: tuple[str, int]) -> None:
        """Stamp a batch at drain (no sequence yet) and track it in flight."""
        with self._lock:
            e = self._entry(tp)
            if (e.producer_id, e.epoch) != (self.producer_id, self.producer_epoch) \
                    and not e.in_flight:
                e.start_sequences_at_beginning(self.producer_id, self.producer_epoch)
            batch.set_producer_state(self.producer_id, self.producer_epoch, e.next_sequence,
                                     self.is_transactional)
            e.next_sequence = increment_sequence(e.next_sequence, batch.record_count)
            e.add(batch)

    def add_in_flight_batch(self, batch: Any) -> None:
        """Track a batch that already has a sequence (the pieces of a split)."""
        with self._lock:
            self._entry((batch.topic, batch.partition)).add(batch)

    def remove_in_flight_batch(self, batch: Any) -> None:
        with self._lock:
            e = self._partitions.get((batch.topic, batch.partition))
            if e is not None:
                e.remove(batch)

    # -- outcomes (Sender thread) --------------------------------------------------------

    def handle_completed_batch(self, batch: Any, base_offset: int) -> None:
        with self._lock:
            tp = (batch.topic, batch.partition)
            e = self._partitions.get(tp)
            if e is not None:
                if (batch.producer_id, batch.producer_epoch) == (e.producer_id, e.epoch):
                    last = batch.last_sequence
                    if e.last_acked_sequence == NO_LAST_ACKED_SEQUENCE or \
                            _seq_after(last, e.last_acked_sequence):
                        e.last_acked_sequence = last
                    if base_offset >= 0:
                        e.last_acked_offset = max(e.last_acked_offset,
                                                  base_offset + batch.record_count - 1)
                e.remove(batch)

    def handle_failed_batch(self, batch: Any, error: BaseException, adjust_sequences: bool) -> None:
        """A batch failed for good. When the broker surely did not write it
        (``adjust_sequences``) later sequences would leave a gap: bump the epoch."""
        with self._lock:
            self.remove_in_flight_batch(batch)
            if not batch.has_sequence():
                return
            code = getattr(error, "code", None)
            if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER or adjust_sequences:
                self.request_epoch_bump_for_partition((batch.topic, batch.partition))

    def mark_sequence_unresolved(self, batch: Any) -> None:
        """An in-flight batch expired: its fate on the broker is unknown (I9)."""
        with self._lock:
            tp = (batch.topic, batch.partition)
            self._unresolved[tp] = self.sequence_number(tp)

    def can_retry(self, code: ErrorCode, batch: Any, log_start_offset: int) -> bool:
        """Kafka's TransactionManager.canRetry for an idempotent producer."""
        with self._lock:
            tp = (batch.topic, batch.partition)
            if code == ErrorCode.UNKNOWN_PRODUCER_ID:
                if log_start_offset == -1:
                    return True
                if batch.sequence_reset:
                    return True
                self.request_epoch_bump_for_partition(tp)
                return True
            if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
                if not self.has_unresolved_sequence(tp) and (
                        batch.sequence_reset or not self.is_next_sequence(tp, batch.base_sequence)):
                    return True  # an earlier batch is the one missing: wait for it
                if not self.has_unresolved_sequence(tp) or \
                        self._unresolved.get(tp) == batch.base_sequence:
                    self.request_epoch_bump_for_partition(tp)
                return True
            return code.retriable

    # -- epoch bump ----------------------------------------------------------------------

    def request_epoch_bump_for_partition(self, tp: tuple[str, int]) -> None:
        with self._lock:
            self._epoch_bump_required = True
            self._to_rewrite.add(tp)

    def maybe_resolve_sequences(self) -> None:
        """Unresolved partitions whose in-flight batches are all done: fine if the acked
        sequence caught up, else bump the epoch (Kafka's maybeResolveSequences)."""
        with self._lock:
            for tp in list(self._unresolved):
                if self.has_in_flight_batches(tp):
                    continue
                if not self.is_next_sequence(tp, self.sequence_number(tp)):
                    self.request_epoch_bump_for_partition(tp)
                del self._unresolved[tp]

    def bump_epoch_if_needed(self) -> bool:
        """Local epoch bump of the idempotent producer; True when a new producer id must
        be fetched (the epoch would overflow)."""
        with self._lock:
            if not self._epoch_bump_required:
                return False
            self._epoch_bump_required = False
            self.epoch_bumps += 1
            if self.producer_epoch >= EPOCH_MAX:
                self.producer_id = NO_PRODUCER_ID
                self.producer_epoch = NO_PRODUCER_EPOCH
                for tp in self._to_rewrite:
                    e = self._partitions.get(tp)
                    if e is not None:
                        e.producer_id, e.epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
                self._to_rewrite.clear()
                return True
            self.producer_epoch += 1
            log.info("bumped the producer epoch to %d", self.producer_epoch)
            for tp in self._to_rewrite:
                e = self._partitions.get(tp)
                if e is not None:
                    e.start_sequences_at_beginning(self.producer_id, self.producer_epoch)
                self._unresolved.pop(tp, None)
            self._to_rewrite.clear()
            return False

    def after_new_producer_id(self) -> None:
        """A fresh producer id after the epoch ran out: renumber the in-flight batches of
        the partitions that asked for the bump."""
        with self._lock:
            for tp, e in self._partitions.items():
                if e.producer_id == NO_PRODUCER_ID:
                    e.start_sequences_at_beginning(self.producer_id, self.producer_epoch)
                    self._unresolved.pop(tp, None)


def _seq_after(a: int, b: int) -> bool:
    """a comes after b in wrapping sequence space."""
    d = (a - b) % SEQUENCE_MODULUS
    return 0 < d < SEQUENCE_MODULUS // 2
