"""Control records: the COMMIT and ABORT markers that end a transaction.

Owns: encoding and recognising the records of control batches (attribute bit 5). A
client never sends one; the broker (transaction coordinator, later) writes them.

Layout (``ControlRecordType.java``, ``EndTransactionMarker.java``)::

    key   = version int16 (0) | type int16 (0 = ABORT, 1 = COMMIT)
    value = version int16 (0) | coordinatorEpoch int32

A control batch holds exactly one record, with the producer id and epoch of the
transaction it ends.

Thread-safety: pure functions.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from .batch import CREATE_TIME, encode_batch
from .errors import CorruptRecordError

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CURRENT_CONTROL_KEY_VERSION = 0
CURRENT_END_TXN_MARKER_VERSION = 0


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2  # KRaft's; recognised, never written here
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4


class EndTransactionMarker(NamedTuple):
    type: ControlRecordType
    coordinator_epoch: int


def control_key(kind: ControlRecordType) -> bytes:
    return _KEY.pack(CURRENT_CONTROL_KEY_VERSION, int(kind))


def parse_control_type(key: bytes | None) -> ControlRecordType:
    """The type of a control record from its key (version 0 keys; newer versions keep the
    same prefix, as Kafka reads them)."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError("control record key shorter than 4 bytes")
    version, kind = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record key version {version}")
    try:
        return ControlRecordType(kind)
    except ValueError:
        raise CorruptRecordError(f"unknown control record type {kind}") from None


def parse_end_txn_marker(key: bytes | None, value: bytes | None) -> EndTransactionMarker:
    kind = parse_control_type(key)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise CorruptRecordError(f"{kind.name} is not a transaction marker")
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError("end transaction marker value shorter than 6 bytes")
    version, epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"end transaction marker version {version}")
    return EndTransactionMarker(kind, epoch)


def encode_end_txn_marker_batch(kind: ControlRecordType, *, producer_id: int, producer_epoch: int,
                                coordinator_epoch: int, timestamp: int, base_offset: int = 0,
                                partition_leader_epoch: int = -1) -> bytes:
    """A control batch holding one COMMIT or ABORT marker."""
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError(f"{kind!r} is not a transaction marker")
    value = _VALUE.pack(CURRENT_END_TXN_MARKER_VERSION, coordinator_epoch)
    return encode_batch([(control_key(kind), value, timestamp)], base_offset=base_offset,
                        timestamp_type=CREATE_TIME, producer_id=producer_id,
                        producer_epoch=producer_epoch, is_transactional=True, is_control=True,
                        partition_leader_epoch=partition_leader_epoch)
