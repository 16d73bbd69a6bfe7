"""Writing the COMMIT / ABORT markers that end a transaction (Kafka's
``TransactionMarkerChannelManager`` + ``WriteTxnMarkers``, on one node: a direct append).

``write_marker`` appends one control batch (``broker.record.control``) with the
transaction's producer id and epoch and the coordinator epoch to one partition, with
``AppendOrigin.COORDINATOR`` (``broker.server.coordinator.append_as_coordinator``): the
log then completes the producer's open transaction there (``ProducerStateManager``: the
LSO moves, an ABORT adds an entry to the ``.txnindex``) and fences older epochs. A
partition whose topic was deleted meanwhile is skipped, as Kafka does (nothing is left to
end). Errors propagate (the coordinator leaves the transaction in its Prepare state,
retried at the next startup or the next request).

Crash points for the recovery tests: with ``KAFKALOG_TXN_CRASH_POINT`` set in the broker's
environment, ``crash_point(name)`` ends the process at once (``os._exit``, no shutdown; the
appends already made are in the files, as after a SIGKILL). Names used by the coordinator:
``after-prepare`` (the Prepare record is logged, no marker written), ``after-first-marker``
(one marker written), ``before-complete`` (every marker written, the Complete record not).

Thread-safety: called under the transaction's lock; appends are serialised by each log.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from broker.record.control import ControlRecordType, encode_end_txn_marker_batch
from broker.server.coordinator import append_as_coordinator

log = logging.getLogger(__name__)

CRASH_POINT_ENV = "KAFKALOG_TXN_CRASH_POINT"
COORDINATOR_EPOCH = 0  # a single node is always the coordinator of every partition, epoch 0


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_POINT_ENV) == name:
        sys.stderr.write(f"{CRASH_POINT_ENV}={name}: exiting now\n")
        sys.stderr.flush()
        os._exit(86)


def write_marker(topics: Any, topic: str, partition: int, *, producer_id: int, producer_epoch: int,
                 commit: bool, timestamp: int, coordinator_epoch: int = COORDINATOR_EPOCH) -> int | None:
    """Append the marker; returns its offset, None when the partition no longer exists."""
    lg = topics.get_log(topic, partition) if topics.get(topic) is not None else None
    if lg is None:
        log.info("transaction marker for %s-%d skipped: the partition no longer exists", topic, partition)
        return None
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    batch = encode_end_txn_marker_batch(kind, producer_id=producer_id, producer_epoch=producer_epoch,
                                        coordinator_epoch=coordinator_epoch, timestamp=timestamp)
    return append_as_coordinator(lg, batch).first_offset
