"""Writing a coordinator's records to its internal topic.

Owns:

* ``append_as_coordinator(lg, batch)``: the one way a coordinator appends to any log (its
  own topic's, or a data partition's transaction marker): as leader, at the partition's
  leader epoch, with ``AppendOrigin.COORDINATOR`` (the log validates and assigns offsets;
  a transactional or control batch goes through the producer state, which fences older
  epochs);
* ``RecordWriter``: ``append(partition, records)`` writes a coordinator's (key, value)
  records (value None: a tombstone) as ONE batch to a partition of its ``InternalTopic``
  (created on demand), stamped with the clock's time (or the caller's ``timestamp``), in
  the coordinator's codec. With ``producer_id`` / ``producer_epoch`` the batch is
  transactional (no sequence, as Kafka's coordinators write a TxnOffsetCommit); its records
  count once the transaction coordinator's COMMIT marker follows them. A successful append
  wakes the fetches waiting on the partition (``on_append``).
* the error map: every failure (a missing partition, a storage error, a batch too large, a
  fenced epoch) is raised as ``ApiError`` with the code the coordinator answers:
  ``error_code_for`` of the failure, then translated by the writer's map (or the one given
  to ``append``). ``storage_error_map(too_large)`` is the map Kafka's coordinators share
  (``GroupMetadataManager.storeOffsets``, ``TransactionStateManager.appendTransactionToLog``):
  UNKNOWN_TOPIC_OR_PARTITION and NOT_ENOUGH_REPLICAS -> COORDINATOR_NOT_AVAILABLE,
  NOT_LEADER_OR_FOLLOWER and KAFKA_STORAGE_ERROR -> NOT_COORDINATOR, MESSAGE_TOO_LARGE and
  RECORD_LIST_TOO_LARGE -> ``too_large`` (INVALID_COMMIT_OFFSET_SIZE for offsets,
  UNKNOWN_SERVER_ERROR for transactions). Unexplained failures are logged with their
  traceback, the others not at all (the caller logs what it answers).

Invariants: a batch is appended whole or not at all; ``on_append`` is called only after a
successful append.

Thread-safety: appends are serialised by the log; a coordinator that must keep its cache in
log order holds its partition's lock (``CoordinatorRuntime.partition_lock``) around the
append and the cache update.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from broker.log.clock import SYSTEM_TIME, Time
from broker.log.validator import AppendOrigin, LogAppendInfo
from broker.protocol import ErrorCode
from broker.record.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, encode_batch
from broker.server.coordinator.topic import InternalTopic
from broker.server.errors import ApiError, error_code_for, is_expected
from broker.server.handlers import leader_epoch_of

if TYPE_CHECKING:  # pragma: no cover
    from broker.log.unified_log import UnifiedLog

log = logging.getLogger(__name__)


def storage_error_map(too_large: int) -> dict[int, int]:
    """The append errors Kafka's coordinators translate (module docstring)."""
    return {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
        ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
        ErrorCode.MESSAGE_TOO_LARGE: too_large,
        ErrorCode.RECORD_LIST_TOO_LARGE: too_large,
    }


def append_as_coordinator(lg: UnifiedLog, batch: bytes) -> LogAppendInfo:
    """Append ``batch`` to ``lg`` as its leader, from a coordinator; the ``LogAppendInfo``."""
    return lg.append_as_leader(batch, leader_epoch=leader_epoch_of(lg), origin=AppendOrigin.COORDINATOR)


class RecordWriter:
    """Appends to ``topic`` (module docstring). ``errors``: append error code -> the code
    the coordinator answers; ``compression``: the codec of its batches."""

    def __init__(self, topic: InternalTopic, *, errors: Mapping[int, int], compression: int = 0,
                 time: Time = SYSTEM_TIME, on_append: Callable[[tuple[str, int]], None] | None = None) -> None:
        self.topic = topic
        self.errors = dict(errors)
        self.compression = compression
        self.time = time
        self.on_append = on_append

    def append(self, partition: int, records: Sequence[tuple[bytes | None, bytes | None]], *,
               timestamp: int | None = None, producer_id: int = NO_PRODUCER_ID,
               producer_epoch: int = NO_PRODUCER_EPOCH, errors: Mapping[int, int] | None = None
               ) -> LogAppendInfo:
        """Append ``records`` as one batch to ``partition``; the ``LogAppendInfo``. Raises
        ``ApiError`` with the mapped code (``errors`` replaces the writer's map)."""
        try:
            self.topic.ensure()
            lg = self.topic.get_log(partition)
            if lg is None:
                raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                               f"{self.topic.partition_name(partition)} is not available")
            now = self.time.milliseconds() if timestamp is None else timestamp
            transactional = producer_id != NO_PRODUCER_ID
            batch = encode_batch([(k, v, now) for k, v in records], compression=self.compression,
                                 producer_id=producer_id, producer_epoch=producer_epoch,
                                 base_sequence=NO_SEQUENCE, is_transactional=transactional)
            info = append_as_coordinator(lg, batch)
        except Exception as exc:  # noqa: BLE001 - every failure becomes the coordinator's code
            code = error_code_for(exc)
            if not is_expected(exc):
                log.exception("appending to %s failed", self.topic.partition_name(partition))
            mapping = self.errors if errors is None else errors
            raise ApiError(ErrorCode(mapping.get(code, code)), str(exc)) from exc
        if self.on_append is not None:
            self.on_append((self.topic.name, partition))
        return info


__all__ = ["RecordWriter", "append_as_coordinator", "storage_error_map"]
