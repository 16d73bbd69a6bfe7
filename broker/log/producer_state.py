"""Per-partition producer state: idempotent dedup, open transactions, and ``.snapshot`` files.

Owns: Kafka's ``ProducerStateManager``, ``ProducerStateEntry``, ``BatchMetadata`` and
``ProducerAppendInfo``. For every producer id that wrote to the partition it keeps the
epoch, the metadata of its last ``NUM_BATCHES_TO_RETAIN`` (5) batches (sequence range,
offsets, timestamp), the coordinator epoch of its last transaction marker, the first offset
of its open transaction, and its last timestamp. From that it answers the append path:

- a retry of any of the last 5 batches (same epoch, same first and last sequence) is a
  duplicate: ``find_duplicate`` returns the ORIGINAL batch's metadata and the log appends
  nothing (I1, I2);
- otherwise the batch must continue the sequence: ``first_seq == last_seq + 1``, wrapping
  from 2**31-1 to 0 (I6); an older duplicate, a partial overlap or a gap is
  OUT_OF_ORDER_SEQUENCE_NUMBER (45) (I2, I3, I4);
- an epoch below the known one is INVALID_PRODUCER_EPOCH (47); a new epoch must start at
  sequence 0, and so must the first batch after a transaction marker that bumped the epoch
  (no batch retained for that epoch) (I5);
- an unknown producer id (no state: never seen, expired, or its data deleted) may start at
  any sequence, as in current Kafka (``ProducerAppendInfo.checkSequence``: with no current
  epoch "accept writes with any sequence number"); old brokers answered UNKNOWN_PRODUCER_ID.

Appends are two-phase so that a failed write changes nothing: ``prepare_update`` returns a
``ProducerAppendInfo`` that validates batches against a private copy of the entry, and
``update`` applies it once the bytes are in the log. ``analyze_append``/``apply_append``
do that for a whole request (``UnifiedLog.analyzeAndValidateProducerState`` and the
producer-state part of ``UnifiedLog.append``).

Transactions: the first data batch of a transactional producer opens a transaction (its
first offset joins ``ongoing``); a COMMIT/ABORT control batch closes it into a
``CompletedTxn``. ``last_stable_offset(completed)`` gives the LSO to store with an aborted
transaction in the txn index (the first offset of the oldest OTHER open transaction, else
``last_offset + 1``), then ``complete_txn`` moves it to "unreplicated" until the high
watermark passes its marker. ``first_unstable_offset`` bounds READ_COMMITTED reads.

Snapshot file ``<20-digit offset>.snapshot`` (``ProducerSnapshot.json``, version 1, not a
flexible message: no tagged fields; offsets from ``ProducerStateManager.java``), all
big-endian; the file name's offset is the map end offset (the LEO) it was taken at::

    offset  size  field
    0       2     version                int16   (1)
    2       4     crc                    uint32  CRC-32C of bytes 6 .. end of file
    6       4     entry count            int32   (ProducerEntries array length)
    10      46*n  entries:
                  0   8  producerId             int64
                  8   2  epoch                  int16
                  10  4  lastSequence           int32   (-1: no batch retained)
                  14  8  lastOffset             int64   (-1: no batch retained)
                  22  4  offsetDelta            int32   lastOffset - first offset of the batch
                  26  8  timestamp              int64   last timestamp of the producer
                  34  4  coordinatorEpoch       int32
                  38  8  currentTxnFirstOffset  int64   (-1: no open transaction)

Only the LAST batch of each producer is persisted (Kafka's format has no room for more), so
after a restart the dedup window of each producer is one batch until it writes again, plus
whatever the loader replays from the log after the snapshot. A retry of an older batch
after a restart therefore gets 45, exactly as from Kafka.

Snapshots are written with ``files.atomic_write`` (tmp, fsync, rename, fsync dir) instead of
Kafka's in-place write: a crash leaves the old snapshot or the new one, and a failed write
(OSError) propagates to the caller, which must then not advance its recovery point, leaves
the previous snapshots untouched and no ``.tmp`` behind (R11). A snapshot that fails its
checks (short, bad version, CRC mismatch, count past the end) is ``CorruptSnapshotError``
internally: it is deleted and the next older one is tried; nothing escapes (R9, R10).

Not done: KIP-890 transaction verification. The TV2 marker-epoch rule exists
(``append_end_txn_marker(transaction_version=2)``); ``append`` uses the TV0/TV1 rule.

Thread-safety: none inside. A ``ProducerStateManager`` belongs to one partition and every
mutating call (prepare/update, markers, snapshots, truncation, expiry) must be made under
that partition's append lock, which the caller (``UnifiedLog``) holds. Readers on other
threads use the values the log publishes under that lock (LSO, first unstable offset), or
``active_producers()``, which returns copies.
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from broker.record import batch as rb
from broker.record import errors as record_errors
from broker.record.batch import BatchHeader, crc32c
from broker.record.control import ControlRecordType, EndTransactionMarker, parse_end_txn_marker
from broker.record.limits import INT32_MAX

from . import files
from .clock import SYSTEM_TIME, Time
from .errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from .validator import AppendOrigin

__all__ = ["AppendOrigin", "BatchMetadata", "ProducerStateEntry", "TxnMetadata", "CompletedTxn",
           "ProducerAppendInfo", "ProducerStateAnalysis", "ProducerStateManager",
           "InvalidTxnStateError", "TransactionCoordinatorFencedError", "encode_snapshot",
           "decode_snapshot", "read_snapshot", "increment_sequence", "decrement_sequence"]

log = logging.getLogger(__name__)
_CLIENT = AppendOrigin.CLIENT  # enum lookups on the class are slow (see validator.py)
_REPLICATION = AppendOrigin.REPLICATION

NUM_BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms
LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000
PRODUCER_SNAPSHOT_VERSION = 1
MAX_SEQUENCE = INT32_MAX
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
# A control batch holds one tiny record; never inflate more than this to read it.
_MAX_CONTROL_BATCH_BYTES = 1 << 20

VERSION_OFFSET = 0
CRC_OFFSET = 2
PRODUCER_ENTRIES_OFFSET = 6
_SNAPSHOT_HEADER = struct.Struct(">hI")  # version int16, crc uint32
_ENTRY_COUNT = struct.Struct(">i")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # the 46-byte entry laid out above
assert _SNAPSHOT_ENTRY.size == 46


def increment_sequence(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: sequences wrap from 2**31-1 to 0."""
    return (sequence + increment) % (MAX_SEQUENCE + 1)


def decrement_sequence(sequence: int, decrement: int) -> int:
    return (sequence - decrement) % (MAX_SEQUENCE + 1)


_CONTROL_OR_TRANSACTIONAL = rb.CONTROL_FLAG_MASK | rb.TRANSACTIONAL_FLAG_MASK
_new_tuple = tuple.__new__  # builds a NamedTuple from its values without the generated __new__


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


class BatchMetadata(NamedTuple):
    """One retained batch of a producer (Kafka's ``BatchMetadata``); a NamedTuple, several
    times cheaper to build than a frozen dataclass (one per idempotent batch appended)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    """The state of one producer id; batches are oldest first, at most 5."""

    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset", "_batches")

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH,
                 coordinator_epoch: int = -1, last_timestamp: int = rb.NO_TIMESTAMP,
                 current_txn_first_offset: int | None = None,
                 batches: Iterable[BatchMetadata] = ()) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self._batches: deque[BatchMetadata] = deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)

    @classmethod
    def empty(cls, producer_id: int) -> ProducerStateEntry:
        return cls(producer_id)

    @property
    def batch_metadata(self) -> tuple[BatchMetadata, ...]:
        return tuple(self._batches)

    def is_empty(self) -> bool:
        return not self._batches

    @property
    def first_seq(self) -> int:
        return self._batches[0].first_seq if self._batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self._batches[-1].last_seq if self._batches else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self._batches[0].first_offset if self._batches else -1

    @property
    def last_data_offset(self) -> int:
        return self._batches[-1].last_offset if self._batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self._batches[-1].offset_delta if self._batches else 0

    def copy(self, *, with_batches: bool = True) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset,
                                  self._batches if with_batches else ())

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """A new epoch forgets the batches of the old one."""
        if self.producer_epoch != producer_epoch:
            self._batches.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def add_batch(self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self._batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update_for_marker(self, producer_epoch: int, coordinator_epoch: int, last_timestamp: int) -> None:
        """A transaction marker: the transaction is over; batches stay unless the epoch moved."""
        self.maybe_update_producer_epoch(producer_epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = last_timestamp

    def update_from(self, next_entry: ProducerStateEntry) -> None:
        """Merge what a ``ProducerAppendInfo`` collected (``ProducerStateEntry.update``)."""
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        self._batches.extend(next_entry._batches)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        self.last_timestamp = next_entry.last_timestamp

    def find_duplicate_batch(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if producer_epoch != self.producer_epoch:
            return None
        for meta in self._batches:  # last_seq first: first_seq is computed
            if meta.last_seq == last_seq and meta.first_seq == first_seq:
                return meta
        return None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return (self.producer_id, self.producer_epoch, self.coordinator_epoch, self.last_timestamp,
                self.current_txn_first_offset, tuple(self._batches)) == (
                other.producer_id, other.producer_epoch, other.coordinator_epoch,
                other.last_timestamp, other.current_txn_first_offset, tuple(other._batches))

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(producer_id={self.producer_id}, epoch={self.producer_epoch}, "
                f"coordinator_epoch={self.coordinator_epoch}, last_timestamp={self.last_timestamp}, "
                f"current_txn_first_offset={self.current_txn_first_offset}, "
                f"batches={list(self._batches)})")


@dataclass(slots=True)
class TxnMetadata:
    """An open (or completed, not yet replicated) transaction."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


class CompletedTxn(NamedTuple):
    """A transaction closed by a marker at ``last_offset``; aborted ones go to the txn index."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerAppendInfo:
    """Validates the batches of one producer in one append against a private copy of its
    entry; nothing is shared with the manager until ``ProducerStateManager.update``."""

    __slots__ = ("producer_id", "current_entry", "origin", "_updated", "started_transactions",
                 "_applied")

    def __init__(self, producer_id: int, current_entry: ProducerStateEntry,
                 origin: AppendOrigin = AppendOrigin.CLIENT) -> None:
        self.producer_id = producer_id
        self.current_entry = current_entry  # read, never written
        self.origin = origin
        self._updated = current_entry.copy(with_batches=False)
        self.started_transactions: list[TxnMetadata] = []
        self._applied = False

    def _check_producer_epoch(self, producer_epoch: int, offset: int, transaction_version: int = 0) -> None:
        current = self._updated.producer_epoch
        invalid = producer_epoch <= current if transaction_version >= 2 else producer_epoch < current
        if not invalid:
            return
        if (transaction_version >= 2 and producer_epoch == current
                and self._updated.current_txn_first_offset is None):
            return  # a retried TV2 marker for a transaction that already ended (KAFKA-19999)
        message = (f"epoch {producer_epoch} of producer {self.producer_id} at offset {offset} is "
                   f"older than the last seen epoch {current}")
        if self.origin is _REPLICATION:
            log.warning(message)
        else:
            raise InvalidProducerEpochError(message)

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self._updated, self.current_entry
        if producer_epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {self.producer_id} at offset {offset}: a new epoch "
                    f"{producer_epoch} must start at sequence 0, not {first_seq} "
                    f"(current epoch {updated.producer_epoch})")
            return
        if not updated.is_empty():
            last_seq = updated.last_seq
        elif producer_epoch == current.producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = NO_SEQUENCE
        # With no known epoch (state expired or deleted with the data) any sequence goes.
        if current.producer_epoch != NO_PRODUCER_EPOCH and not _in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"out of order sequence for producer {self.producer_id} at offset {offset}: "
                f"{first_seq} (incoming), {last_seq} (current end sequence)")

    def append(self, header: BatchHeader, buf=None, pos: int = 0) -> CompletedTxn | None:
        """Validate and collect one batch (``header`` with its assigned offsets). A control
        batch needs ``buf``/``pos`` to read its marker."""
        attributes = header.attributes
        if attributes & rb.CONTROL_FLAG_MASK:
            if header.records_count == 0:
                return None  # the cleaner emptied it: the transaction is gone from the log
            marker = self._read_marker(header, buf, pos)
            if marker is None:
                return None
            kind, coordinator_epoch, timestamp = marker
            return self.append_end_txn_marker(kind, coordinator_epoch, header.producer_epoch,
                                              header.base_offset, timestamp)
        self.append_data_batch(header.producer_epoch, header.base_sequence, header.last_sequence,
                               header.max_timestamp, header.base_offset, header.last_offset,
                               bool(attributes & rb.TRANSACTIONAL_FLAG_MASK))
        return None

    def _read_marker(self, header: BatchHeader, buf, pos: int) -> tuple[ControlRecordType, int, int] | None:
        if buf is None:
            raise ValueError("a control batch needs its bytes to read the marker")
        try:
            payload = rb.records_payload(buf, pos, header, _MAX_CONTROL_BATCH_BYTES)
            record = rb.decode_records(payload, header)[0]
            marker: EndTransactionMarker = parse_end_txn_marker(record.key, record.value)
        except record_errors.DecodeError as exc:
            if self.origin is _REPLICATION:
                log.warning("producer %d: unreadable control batch at offset %d: %s",
                            self.producer_id, header.base_offset, exc)
                return None
            raise InvalidRecordError(f"control batch at offset {header.base_offset}: {exc}") from None
        return marker.type, marker.coordinator_epoch, record.timestamp

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, last_timestamp: int,
                          first_offset: int, last_offset: int, is_transactional: bool) -> None:
        self._check_producer_epoch(epoch, first_offset)
        if self.origin is _CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        updated = self._updated
        updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        if updated.current_txn_first_offset is not None and not is_transactional:
            message = (f"expected a transactional write from producer {self.producer_id} at "
                       f"offset {first_offset}")
            if self.origin is not _REPLICATION:
                raise InvalidTxnStateError(message)
            log.warning(message)
        elif updated.current_txn_first_offset is None and is_transactional:
            updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(self, kind: ControlRecordType, coordinator_epoch: int,
                              producer_epoch: int, offset: int, timestamp: int,
                              transaction_version: int = 0) -> CompletedTxn | None:
        self._check_producer_epoch(producer_epoch, offset, transaction_version)
        updated = self._updated
        if updated.coordinator_epoch > coordinator_epoch:
            message = (f"coordinator epoch {coordinator_epoch} for producer {self.producer_id} at "
                       f"offset {offset} is older than {updated.coordinator_epoch}")
            if self.origin is not _REPLICATION:
                raise TransactionCoordinatorFencedError(message)
            log.info(message)
        completed = None
        if updated.current_txn_first_offset is not None:
            # Only a transaction with data affects the LSO and the txn index.
            completed = CompletedTxn(self.producer_id, updated.current_txn_first_offset, offset,
                                     kind == ControlRecordType.ABORT)
        updated.update_for_marker(producer_epoch, coordinator_epoch, timestamp)
        return completed

    def to_entry(self) -> ProducerStateEntry:
        return self._updated


@dataclass(slots=True)
class ProducerStateAnalysis:
    """The producer-state outcome of one append, before anything is applied."""

    updated_producers: dict[int, ProducerAppendInfo] = field(default_factory=dict)
    completed_txns: list[CompletedTxn] = field(default_factory=list)
    duplicate: BatchMetadata | None = None


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The bytes of a snapshot file holding ``entries`` (sorted by producer id)."""
    entries = sorted(entries, key=lambda e: e.producer_id)
    out = bytearray(PRODUCER_ENTRIES_OFFSET + _ENTRY_COUNT.size + _SNAPSHOT_ENTRY.size * len(entries))
    _ENTRY_COUNT.pack_into(out, PRODUCER_ENTRIES_OFFSET, len(entries))
    pos = PRODUCER_ENTRIES_OFFSET + _ENTRY_COUNT.size
    for e in entries:
        txn = e.current_txn_first_offset
        _SNAPSHOT_ENTRY.pack_into(out, pos, e.producer_id, e.producer_epoch, e.last_seq,
                                  e.last_data_offset, e.last_offset_delta, e.last_timestamp,
                                  e.coordinator_epoch, -1 if txn is None else txn)
        pos += _SNAPSHOT_ENTRY.size
    crc = crc32c(memoryview(out)[PRODUCER_ENTRIES_OFFSET:])
    _SNAPSHOT_HEADER.pack_into(out, VERSION_OFFSET, PRODUCER_SNAPSHOT_VERSION, crc)
    return bytes(out)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Parse a snapshot; ``CorruptSnapshotError`` for anything but a well-formed version 1."""
    header_size = PRODUCER_ENTRIES_OFFSET + _ENTRY_COUNT.size
    if len(data) < header_size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is shorter than its {header_size}-byte header")
    version, crc = _SNAPSHOT_HEADER.unpack_from(data, VERSION_OFFSET)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    computed = crc32c(memoryview(data)[PRODUCER_ENTRIES_OFFSET:])
    if computed != crc:
        raise CorruptSnapshotError(f"snapshot CRC mismatch: stored {crc:#010x}, computed {computed:#010x}")
    (count,) = _ENTRY_COUNT.unpack_from(data, PRODUCER_ENTRIES_OFFSET)
    if count < 0 or count * _SNAPSHOT_ENTRY.size > len(data) - header_size:
        raise CorruptSnapshotError(f"snapshot declares {count} entries in {len(data)} bytes")
    entries = []
    for (pid, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch,
         txn_first) in _SNAPSHOT_ENTRY.iter_unpack(data[header_size:header_size + count * _SNAPSHOT_ENTRY.size]):
        batches = [BatchMetadata(last_seq, last_offset, offset_delta, timestamp)] if last_offset >= 0 else []
        entries.append(ProducerStateEntry(pid, epoch, coordinator_epoch, timestamp,
                                          txn_first if txn_first >= 0 else None, batches))
    return entries


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    return decode_snapshot(Path(path).read_bytes())


class ProducerStateManager:
    """The producer table of one partition and its snapshot files in ``log_dir``."""

    def __init__(self, log_dir: Path, *, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
                 time: Time = SYSTEM_TIME) -> None:
        self.log_dir = Path(log_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self.time = time
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing_txns: dict[int, TxnMetadata] = {}  # by first offset
        self._unreplicated_txns: dict[int, TxnMetadata] = {}  # completed, marker above the HW
        self._last_map_offset = 0
        self._last_snap_offset = 0
        self._remove_tmp_files()
        self._snapshots: dict[int, Path] = self._scan_snapshots()

    # --- snapshot files ---

    def _remove_tmp_files(self) -> None:
        """A crash (or failed write) mid-snapshot leaves ``<offset>.snapshot.tmp``: drop it."""
        suffix = files.PRODUCER_SNAPSHOT_FILE_SUFFIX + files.TMP_FILE_SUFFIX
        for path in self.log_dir.glob("*" + suffix):
            path.unlink(missing_ok=True)

    def _scan_snapshots(self) -> dict[int, Path]:
        found = {}
        for path in self.log_dir.glob("*" + files.PRODUCER_SNAPSHOT_FILE_SUFFIX):
            try:
                found[files.offset_from_file_name(path.name)] = path
            except ValueError:
                continue  # not one of ours
        return dict(sorted(found.items()))

    def snapshot_files(self) -> list[Path]:
        return [self._snapshots[k] for k in sorted(self._snapshots)]

    def fetch_snapshot(self, offset: int) -> Path | None:
        return self._snapshots.get(offset)

    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots) if self._snapshots else None

    def oldest_snapshot_offset(self) -> int | None:
        return min(self._snapshots) if self._snapshots else None

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None:
            path.unlink(missing_ok=True)

    def delete_snapshots_before(self, offset: int) -> None:
        for off in [o for o in self._snapshots if o < offset]:
            self._remove_and_delete_snapshot(off)

    def remove_stray_snapshots(self, segment_base_offsets: Sequence[int]) -> None:
        """Drop snapshots not at a segment base offset, except the newest one if it is above
        every segment (written at a clean shutdown)."""
        base = set(segment_base_offsets)
        snapshots = self._scan_snapshots()
        stray = [o for o in snapshots if o not in base]
        keep = stray[-1] if stray and (not base or stray[-1] >= max(base)) else None
        for off in stray:
            if off != keep:
                snapshots.pop(off).unlink(missing_ok=True)
        self._snapshots = snapshots

    def take_snapshot(self, *, sync: bool = True) -> Path | None:
        """Write ``<map end offset>.snapshot`` unless one exists at that offset; return its
        path. An OSError propagates (the caller must not advance its recovery point); the
        previous snapshots stay and no ``.tmp`` remains."""
        if self._last_map_offset <= self._last_snap_offset:
            return None
        path = files.producer_snapshot_file(self.log_dir, self._last_map_offset)
        data = encode_snapshot(self._producers.values())
        try:
            files.atomic_write(path, data, fsync=sync)
        except BaseException:
            path.with_name(path.name + files.TMP_FILE_SUFFIX).unlink(missing_ok=True)
            if path.exists():  # renamed before the directory fsync failed: it is complete
                self._snapshots[self._last_map_offset] = path
            raise
        self._snapshots[self._last_map_offset] = path
        self._last_snap_offset = self._last_map_offset
        return path

    def load_from_snapshot(self, log_start_offset: int = 0, max_offset: int | None = None,
                           now_ms: int | None = None) -> int | None:
        """Replace the in-memory state with the newest readable snapshot at or below
        ``max_offset`` (all when None); corrupt ones are deleted on the way. Returns the
        snapshot's offset, or None when there is none (the state then starts empty at
        ``log_start_offset``). The caller replays the log from ``map_end_offset``."""
        now_ms = self.time.milliseconds() if now_ms is None else now_ms
        self._clear()
        for offset in sorted(self._snapshots, reverse=True):
            if max_offset is not None and offset > max_offset:
                continue
            path = self._snapshots[offset]
            try:
                entries = read_snapshot(path)
            except FileNotFoundError:
                self._snapshots.pop(offset, None)
                continue
            except CorruptSnapshotError as exc:
                log.warning("deleting corrupt producer snapshot %s: %s", path, exc)
                self._remove_and_delete_snapshot(offset)
                continue
            for entry in entries:
                if not self._is_expired(now_ms, entry):
                    self._load_producer_entry(entry)
            self._last_snap_offset = self._last_map_offset = offset
            return offset
        self._last_snap_offset = self._last_map_offset = log_start_offset
        return None

    # --- state ---

    def _clear(self) -> None:
        self._producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()

    def _load_producer_entry(self, entry: ProducerStateEntry) -> None:
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            self._ongoing_txns[entry.current_txn_first_offset] = TxnMetadata(
                entry.producer_id, entry.current_txn_first_offset)

    def _is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return (entry.current_txn_first_offset is None
                and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms)

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget producers idle for producer.id.expiration.ms (never one with an open txn)."""
        now_ms = self.time.milliseconds() if now_ms is None else now_ms
        expired = [pid for pid, e in self._producers.items() if self._is_expired(now_ms, e)]
        for pid in expired:
            del self._producers[pid]
        return expired

    @property
    def map_end_offset(self) -> int:
        return self._last_map_offset

    def update_map_end_offset(self, offset: int) -> None:
        self._last_map_offset = offset

    def is_empty(self) -> bool:
        return not self._producers and not self._unreplicated_txns

    @property
    def producer_id_count(self) -> int:
        return len(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def active_producers(self) -> dict[int, ProducerStateEntry]:
        return {pid: e.copy() for pid, e in self._producers.items()}

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """The retained batch that ``header`` (same epoch and sequence range) repeats."""
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return None
        return entry.find_duplicate_batch(header.producer_epoch, header.base_sequence, header.last_sequence)

    def prepare_update(self, producer_id: int, origin: AppendOrigin = AppendOrigin.CLIENT) -> ProducerAppendInfo:
        current = self._producers.get(producer_id) or ProducerStateEntry.empty(producer_id)
        return ProducerAppendInfo(producer_id, current, origin)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Apply what ``append_info`` collected (after the bytes are in the log)."""
        if append_info.producer_id < 0:
            raise ValueError(f"invalid producer id {append_info.producer_id}")
        if append_info._applied:
            raise ValueError("this ProducerAppendInfo was already applied")
        append_info._applied = True
        updated = append_info.to_entry()
        current = self._producers.get(append_info.producer_id)
        if current is not None:
            current.update_from(updated)
        else:
            self._producers[append_info.producer_id] = updated.copy()
        for txn in append_info.started_transactions:
            self._ongoing_txns[txn.first_offset] = txn

    # --- transactions ---

    def first_undecided_offset(self) -> int | None:
        return min(self._ongoing_txns) if self._ongoing_txns else None

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is open, or completed with its
        marker not yet below the high watermark; None when everything is stable."""
        candidates = []
        if self._ongoing_txns:
            candidates.append(min(self._ongoing_txns))
        if self._unreplicated_txns:
            candidates.append(min(self._unreplicated_txns))
        return min(candidates) if candidates else None

    def ongoing_transactions(self) -> list[TxnMetadata]:
        return [self._ongoing_txns[k] for k in sorted(self._ongoing_txns)]

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO to record with ``completed`` in the txn index (before ``complete_txn``)."""
        for txn in self.ongoing_transactions():
            if txn.producer_id != completed.producer_id:
                return txn.first_offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        txn = self._ongoing_txns.pop(completed.first_offset, None)
        if txn is None:
            raise ValueError(f"completing {completed}, which was never started")
        txn.last_offset = completed.last_offset
        self._unreplicated_txns[completed.first_offset] = txn

    def on_high_watermark_updated(self, high_watermark: int) -> int | None:
        """Forget transactions whose marker is below it; returns ``first_unstable_offset()``."""
        if self._unreplicated_txns:
            self._remove_unreplicated_txns(high_watermark)
        elif not self._ongoing_txns:
            return None
        return self.first_unstable_offset()

    def analyze_in_sequence(self, header: BatchHeader) -> ProducerStateEntry | None:
        """``analyze_append`` of one batch from a client, decided without building a
        ``ProducerAppendInfo`` in the common case: a data batch, not transactional, from a
        known producer outside a transaction, in its current epoch, continuing its sequence,
        and not a duplicate of a retained batch. Returns that producer's entry, for
        ``apply_in_sequence`` once the bytes are written; None in every other case (the
        caller then runs ``analyze_append``, which decides, raises or finds the duplicate).
        Mutates nothing."""
        entry = self._producers.get(header.producer_id)
        if (entry is None or not entry._batches or entry.producer_epoch != header.producer_epoch
                or entry.current_txn_first_offset is not None
                or header.attributes & _CONTROL_OR_TRANSACTIONAL):
            return None
        first_seq = header.base_sequence
        if not _in_sequence(entry._batches[-1].last_seq, first_seq):
            return None
        if entry.find_duplicate_batch(header.producer_epoch, first_seq, header.last_sequence) is not None:
            return None
        return entry

    def apply_in_sequence(self, entry: ProducerStateEntry, header: BatchHeader, end_offset: int) -> int | None:
        """What ``apply_append`` of ``analyze_append``'s result, then
        ``on_high_watermark_updated(end_offset)``, do for a batch ``analyze_in_sequence``
        accepted (``entry``): the batch retained, the producer's last timestamp, the map end
        offset; returns ``first_unstable_offset()`` as ``on_high_watermark_updated`` does."""
        last_offset = header.base_offset + header.last_offset_delta
        timestamp = header.max_timestamp
        entry._batches.append(_new_tuple(BatchMetadata, (header.last_sequence, last_offset,
                                                         last_offset - header.base_offset, timestamp)))
        entry.last_timestamp = timestamp
        self._last_map_offset = end_offset
        return self.on_high_watermark_updated(end_offset)

    def on_append_without_producer(self, end_offset: int) -> int | None:
        """``update_map_end_offset(end_offset)`` then ``on_high_watermark_updated(end_offset)``
        in one call: what a leader's append of a batch without a producer id does to the
        producer state, the high watermark following the log end offset (a single node)."""
        self._last_map_offset = end_offset
        return self.on_high_watermark_updated(end_offset)

    def _remove_unreplicated_txns(self, offset: int) -> None:
        for key in [k for k, t in self._unreplicated_txns.items()
                    if t.last_offset is not None and t.last_offset < offset]:
            del self._unreplicated_txns[key]

    def oldest_txn_last_timestamp(self) -> int:
        if not self._ongoing_txns:
            return -1
        entry = self._producers.get(self._ongoing_txns[min(self._ongoing_txns)].producer_id)
        return entry.last_timestamp if entry is not None else -1

    def has_late_transaction(self, now_ms: int) -> bool:
        last = self.oldest_txn_last_timestamp()
        return last > 0 and now_ms - last > self.max_transaction_timeout_ms + LATE_TRANSACTION_BUFFER_MS

    # --- the append path (UnifiedLog.analyzeAndValidateProducerState) ---

    def analyze_append(self, buf, batches: Sequence[tuple[int, BatchHeader]],
                       origin: AppendOrigin = AppendOrigin.CLIENT) -> ProducerStateAnalysis:
        """Validate the producer side of an append whose offsets are assigned; mutates
        nothing. A client retry of a retained batch stops the walk with ``duplicate`` set:
        the caller then appends nothing and answers with the duplicate's offsets.
        Raises OutOfOrderSequenceError, InvalidProducerEpochError, InvalidTxnStateError,
        TransactionCoordinatorFencedError or InvalidRecordError (bad marker)."""
        analysis = ProducerStateAnalysis()
        for pos, header in batches:
            producer_id = header.producer_id
            if producer_id < 0:  # no producer id
                continue
            if origin is _CLIENT:
                duplicate = self.find_duplicate(header)
                if duplicate is not None:
                    analysis.duplicate = duplicate
                    return analysis
            info = analysis.updated_producers.get(producer_id)
            if info is None:
                info = analysis.updated_producers[producer_id] = self.prepare_update(producer_id, origin)
            completed = info.append(header, buf, pos)
            if completed is not None:
                analysis.completed_txns.append(completed)
        return analysis

    def apply_append(self, analysis: ProducerStateAnalysis,
                     map_end_offset: int | None = None) -> list[tuple[CompletedTxn, int]]:
        """Apply an analysis once its bytes are written: update the producers, complete the
        transactions, move the map end offset. Returns each completed transaction with the
        last stable offset the txn index must store for it (aborted ones only go there)."""
        if analysis.duplicate is not None:
            raise ValueError("a duplicate append is not applied")
        for info in analysis.updated_producers.values():
            self.update(info)
        out = []
        for completed in analysis.completed_txns:
            out.append((completed, self.last_stable_offset(completed)))
            self.complete_txn(completed)
        if map_end_offset is not None:
            self._last_map_offset = map_end_offset
        return out

    # --- recovery: replaying the log after the snapshot ---

    def load_producers_from_batch(self, buf, pos: int, header: BatchHeader) -> tuple[CompletedTxn, int] | None:
        """Replay one batch read back from the log (``LogSegment.updateProducerState``):
        no sequence, epoch or transaction-state errors are raised (``REPLICATION`` origin),
        and the map end offset moves past the batch. Returns a completed transaction and
        its last stable offset, for the txn index, or None."""
        result = None
        if header.has_producer_id:
            info = self.prepare_update(header.producer_id, _REPLICATION)
            completed = info.append(header, buf, pos)
            self.update(info)
            if completed is not None:
                result = (completed, self.last_stable_offset(completed))
                if completed.first_offset in self._ongoing_txns:
                    self.complete_txn(completed)
        self._last_map_offset = header.next_offset
        return result

    def load_producers_from_records(self, buf, start: int = 0, end: int | None = None
                                    ) -> list[tuple[CompletedTxn, int]]:
        """``load_producers_from_batch`` for every complete batch of ``buf[start:end]``."""
        out = []
        for pos, header in rb.iter_batch_headers(buf, start, end):
            result = self.load_producers_from_batch(buf, pos, header)
            if result is not None:
                out.append(result)
        return out

    # --- truncation ---

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated_txns(log_start_offset)
        if self._last_map_offset < log_start_offset:
            self._last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset()
        self._last_snap_offset = latest if latest is not None else log_start_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int,
                            now_ms: int | None = None) -> None:
        """Drop snapshots outside (log_start_offset, log_end_offset] and, unless the map
        already ends at ``log_end_offset``, reload from the newest remaining snapshot; the
        caller then replays the log from ``map_end_offset``."""
        for off in [o for o in self._snapshots if o > log_end_offset or o <= log_start_offset]:
            self._remove_and_delete_snapshot(off)
        if log_end_offset != self._last_map_offset:
            self.load_from_snapshot(log_start_offset, log_end_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything, delete every snapshot, and start the map at ``offset``."""
        self._clear()
        for off in list(self._snapshots):
            self._remove_and_delete_snapshot(off)
        self._last_snap_offset = 0
        self._last_map_offset = offset

