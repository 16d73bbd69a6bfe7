"""Control records: the COMMIT and ABORT markers that end a transaction.

Owns: encoding and recognising the records of control batches (attribute bit 5), and
``is_abort_marker`` (is the batch at a position an ABORT marker?), which read_committed
consumers use to end an aborted transaction. A client never sends one; the broker
(transaction coordinator) writes them.

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

from .batch import (
    CREATE_TIME,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    BatchHeader,
    decode_records,
    encode_batch,
    read_header,
    records_payload,
)
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


def is_abort_marker(buf, pos: int = 0, header: BatchHeader | None = None,
                    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bool:
    """True when the v2 batch at ``pos`` of ``buf`` (whole; its CRC is not checked) is a
    control batch whose record is an ABORT marker. ``header``: the batch's header when
    the caller has it. Malformed bytes raise ``DecodeError`` subclasses."""
    if header is None:
        header = read_header(buf, pos)
    if not header.is_control:
        return False
    records = decode_records(records_payload(buf, pos, header, max_decompressed), header)
    return bool(records) and parse_control_type(records[0].key) == ControlRecordType.ABORT


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
