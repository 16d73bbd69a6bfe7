"""``TransactionMetadata``: one transactional id's state, and the state machine it moves
through (Kafka's ``TransactionState`` / ``TransactionMetadata``).

States and the byte each is stored as in ``__transaction_state`` (TransactionLogValue's
TransactionStatus)::

    Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3, CompleteCommit 4,
    CompleteAbort 5, Dead 6, PrepareEpochFence 7

Transitions (``VALID_PREVIOUS``: the states each one may be entered from), as Kafka::

    Empty              <- Empty, CompleteCommit, CompleteAbort
    Ongoing            <- Ongoing, Empty, CompleteCommit, CompleteAbort
    PrepareCommit      <- Ongoing
    PrepareAbort       <- Ongoing, PrepareEpochFence
    CompleteCommit     <- PrepareCommit
    CompleteAbort      <- PrepareAbort
    Dead               <- Empty, CompleteCommit, CompleteAbort
    PrepareEpochFence  <- Ongoing

``transition_to`` refuses anything else with ``IllegalStateTransition`` (a coordinator
bug, never bad input: requests are checked before a transition is attempted; the idiom of
every coordinator's state machine, ``broker.server.coordinator.state``).

Thread-safety: a ``TransactionMetadata`` is guarded by its own ``lock`` (an RLock), held by
the coordinator for the whole of a state change: check, log append, cache update, markers.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field

from broker.server.coordinator.state import IllegalStateTransition, check_transition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Kafka bumps to a new producer id once the epoch would reach Short.MAX_VALUE.
MAX_PRODUCER_EPOCH = 0x7FFF - 1


class TransactionState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """Kafka's name (DescribeTransactions, ListTransactions' filters)."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)

    @property
    def is_complete(self) -> bool:
        return self in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

    @property
    def is_prepare(self) -> bool:
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)


_NAMES = {
    TransactionState.EMPTY: "Empty", TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit", TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit", TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead", TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}

_S = TransactionState
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


@dataclass
class TransactionMetadata:
    """The coordinator's view of one transactional id (fields as TransactionLogValue)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState = TransactionState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # the epoch before the last bump (retries)
    # transaction version 2: the producer id the client moves to once this transaction is
    # complete (its epoch was exhausted by the commit's bump), else NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    # the transaction version the client last used (0/1: KIP-98 rules, 2: KIP-890 part 2)
    client_transaction_version: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    def transition_to(self, new_state: TransactionState) -> None:
        check_transition(f"transactional id {self.transactional_id}", self.state, new_state, VALID_PREVIOUS,
                         lambda s: s.display_name)
        self.state = new_state

    def snapshot(self) -> TransactionMetadata:
        """A copy to change and write before the cached one is replaced (so a failed log
        append leaves the cache as it was)."""
        return TransactionMetadata(self.transactional_id, self.producer_id, self.producer_epoch,
                                   self.txn_timeout_ms, self.state, set(self.partitions),
                                   self.txn_start_timestamp, self.txn_last_update_timestamp,
                                   self.previous_producer_id, self.last_producer_epoch,
                                   self.next_producer_id, self.client_transaction_version, self.lock)

    def copy_from(self, other: TransactionMetadata) -> None:
        for name in ("producer_id", "producer_epoch", "txn_timeout_ms", "state", "partitions",
                     "txn_start_timestamp", "txn_last_update_timestamp", "previous_producer_id",
                     "last_producer_epoch", "next_producer_id", "client_transaction_version"):
            setattr(self, name, getattr(other, name))


__all__ = ["IllegalStateTransition", "MAX_PRODUCER_EPOCH", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "TransactionMetadata",
           "TransactionState", "VALID_PREVIOUS"]
