"""The transaction coordinator (KIP-98): ``TransactionCoordinator`` (coordinator.py), the
transaction state machine (state.py), the ``__transaction_state`` records (log.py) and the
COMMIT / ABORT markers (markers.py). Its request handlers are in
``broker.server.handlers.txn``.
"""

from broker.server.txn.coordinator import TransactionCoordinator
from broker.server.txn.state import TransactionMetadata, TransactionState

__all__ = ["TransactionCoordinator", "TransactionMetadata", "TransactionState"]
