"""Replaying a coordinator's partition: its records from the log start offset to the end,
in log order (Kafka's ``CoordinatorLoaderImpl``).

Owns ``CoordinatorLoader.load(partition, replay)``: reads the partition's ``UnifiedLog``
from its log start offset to its end offset (or ``end_offset``) in ``load_buffer_size``
chunks (``read(..., LOG_END, min_one_message=True)``: a batch larger than the buffer is
still read whole), walks the entries of every magic (``iter_entry_headers``: an old
Kafka's ``__consumer_offsets`` may hold magic 0 / 1 message sets) and decodes each
(``decode_entry``, CRCs checked, decompressed up to ``MAX_DECOMPRESSED`` bytes). Then, per
record (the records of a batch before the read offset, after DeleteRecords moved the log
start into it, are left out):

* a record of a non-transactional entry is handed to ``replay(record)`` at once;
* a record of a transactional batch is kept pending under its producer id until that
  producer's control batch: at a COMMIT marker its records are replayed in their log
  order, at an ABORT marker they are dropped (or, with ``on_transaction_end``, handed to
  it with the outcome instead); other control records (not COMMIT / ABORT) are ignored;
* the transactions still open at the end are returned in ``LoadResult.open_transactions``
  (the coordinator completes them when the transaction coordinator writes their marker).

``replay`` answers whether the record was applied (a coordinator skips, and logs, the
records it cannot read or does not use); ``LoadResult`` counts them.

Invariants: ``load`` never raises for bad data: an entry that cannot be decoded (a bad CRC,
an unknown codec, a truncated record) is logged with its offset and skipped; a failure of
``replay`` on one record is logged and that record skipped; an unreadable log (a header
that cannot be an entry, an I/O error) ends the load there, logged, with what was read so
far kept (``LoadResult.complete`` False). A missing log loads nothing (``complete`` False).

Thread-safety: a load reads one log and calls back on the caller's thread; coordinators
load at startup, before any request, or under their own locks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.log.unified_log import LOG_END
from broker.record.batch import NO_PRODUCER_ID
from broker.record.control import ControlRecordType, parse_control_type
from broker.record.entries import decode_entry, iter_entry_headers
from broker.server.coordinator.topic import InternalTopic

log = logging.getLogger(__name__)

# The decompressed size bound of one batch while loading (a batch is at most
# max.message.bytes compressed; a coordinator's records compress well).
MAX_DECOMPRESSED = 256 * 1024 * 1024


class CoordinatorRecord(NamedTuple):
    """One record of a coordinator's partition. ``producer_id`` is the transaction's
    producer (NO_PRODUCER_ID for a record outside a transaction)."""

    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    producer_id: int = NO_PRODUCER_ID


@dataclass
class LoadResult:
    """What one ``load`` did."""

    partition: int
    replayed: int = 0  # records handed to replay
    applied: int = 0  # ... for which it answered True
    skipped_batches: int = 0  # entries that could not be decoded
    next_offset: int = 0  # where the load stopped (the end offset when complete)
    complete: bool = True
    open_transactions: dict[int, list[CoordinatorRecord]] = field(default_factory=dict)


Replay = Callable[[CoordinatorRecord], bool]
TransactionEnd = Callable[[int, bool, list[CoordinatorRecord]], None]  # (producer id, committed, records)


class CoordinatorLoader:
    """Loads the partitions of ``topic`` (module docstring)."""

    def __init__(self, topic: InternalTopic, load_buffer_size: int) -> None:
        self.topic = topic
        self.load_buffer_size = load_buffer_size

    def load(self, partition: int, replay: Replay, *, on_transaction_end: TransactionEnd | None = None,
             end_offset: int | None = None) -> LoadResult:
        name = self.topic.partition_name(partition)
        result = LoadResult(partition)
        lg = self.topic.get_log(partition)
        if lg is None:
            log.warning("%s is not available: it loads nothing", name)
            result.complete = False
            return result
        pending = result.open_transactions

        def apply(record: CoordinatorRecord) -> None:
            result.replayed += 1
            try:
                if replay(record):
                    result.applied += 1
            except Exception:  # noqa: BLE001 - one bad record must not stop the load
                log.exception("%s: replaying the record at offset %d failed; skipped", name, record.offset)

        def end_transaction(producer_id: int, records: list) -> None:
            for rec in records:
                try:
                    kind = parse_control_type(rec.key)
                except Exception:  # noqa: BLE001 - not a marker
                    continue
                if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                    continue
                txn = pending.pop(producer_id, [])
                committed = kind == ControlRecordType.COMMIT
                if on_transaction_end is not None:
                    on_transaction_end(producer_id, committed, txn)
                elif committed:
                    for record in txn:
                        apply(record)

        offset = lg.log_start_offset
        result.next_offset = offset
        try:
            end = lg.log_end_offset if end_offset is None else min(end_offset, lg.log_end_offset)
            while offset < end:
                data = lg.read(offset, self.load_buffer_size, LOG_END, min_one_message=True).records.read_bytes()
                next_offset = offset
                for pos, header in iter_entry_headers(data):
                    if header.base_offset >= end:
                        next_offset = end
                        break
                    next_offset = header.next_offset
                    try:
                        records = decode_entry(data, pos, header, max_decompressed=MAX_DECOMPRESSED)
                    except Exception as exc:  # noqa: BLE001 - a damaged batch is skipped, not fatal
                        log.error("%s: skipping unreadable batch at offset %d: %s", name, header.base_offset, exc)
                        result.skipped_batches += 1
                        continue
                    if header.is_control:
                        end_transaction(header.producer_id, records)
                        continue
                    pid = header.producer_id if header.is_transactional else NO_PRODUCER_ID
                    for rec in records:
                        if rec.offset < offset:
                            continue
                        record = CoordinatorRecord(partition, rec.offset, rec.timestamp, rec.key, rec.value, pid)
                        if header.is_transactional:
                            pending.setdefault(pid, []).append(record)
                        else:
                            apply(record)
                if next_offset <= offset:
                    log.error("%s: no readable batch at offset %d; loading stops there", name, offset)
                    result.complete = False
                    break
                offset = result.next_offset = next_offset
        except Exception:  # noqa: BLE001 - an unreadable log must not stop the broker
            log.exception("loading %s failed; what was read so far is kept", name)
            result.complete = False
        return result


__all__ = ["CoordinatorLoader", "CoordinatorRecord", "LoadResult", "MAX_DECOMPRESSED"]
