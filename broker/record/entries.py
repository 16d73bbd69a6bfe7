"""Log entries of every magic: the shallow header walk over the bytes of a log.

Owns: ``entry_header`` and ``iter_entry_headers``, which walk back-to-back log entries,
RecordBatch v2 (magic 2) and legacy message set entries (magic 0 and 1, written by Kafka
before 0.11), yielding a ``batch.BatchHeader`` for each; and ``decode_entry``, the
records of one entry of any magic. Kafka 4 stopped writing the legacy formats, not reading
them (KIP-724): a log directory of a long-lived cluster still holds such entries, so every
walk over a log's files (recovery, fetch, offset and timestamp searches, the cleaner)
goes through here. The produce path and the internal topics keep
``batch.iter_batch_headers``, which accepts v2 only.

Every entry starts with the same 17 bytes: ``baseOffset int64 | length int32`` (the
``LOG_OVERHEAD``), then 4 bytes (v2: the partition leader epoch; legacy: the message's
CRC-32) and the magic byte at position 16. A legacy entry's header is synthesised, shallow,
as Kafka's ``AbstractLegacyRecordBatch`` sees it without decompressing::

    base_offset = last_offset   the entry's offset (a compressed wrapper's is the offset of
                                its last inner message; its first needs the inner set, see
                                ``legacy.legacy_entry_info``)
    batch_length                the message size (so ``size_in_bytes`` is the entry's)
    partition_leader_epoch      -1 (legacy entries carry none)
    magic, crc                  the message's (crc: CRC-32, not CRC-32C)
    attributes                  bits 0-3 of the message's: codec, timestamp type
    base/max_timestamp          the message's timestamp (magic 1), -1 (magic 0)
    producer id/epoch/sequence  -1: legacy entries are never idempotent nor transactional
    records_count               1 (the shallow entry)

Invariants: a walk stops silently at a trailing partial entry, and raises ``DecodeError``
(``CorruptRecordError`` for a length below the smallest entry of its magic,
``UnsupportedMagicError`` for a magic outside 0-2) for a header that cannot be an entry;
it never reads past ``end``.

Thread-safety: pure functions and immutable values.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from .batch import (
    CURRENT_MAGIC,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    HEADER,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Record,
    decode_batch,
)
from .errors import CorruptRecordError, UnsupportedMagicError
from .legacy import RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1, LegacyRecord, iter_legacy_records

__all__ = ["ENTRY_HEADER_PREFIX", "entry_header", "iter_entry_headers", "decode_entry", "is_legacy"]

# Bytes needed to know an entry's magic: offset, length, 4 bytes, magic.
ENTRY_HEADER_PREFIX = MAGIC_OFFSET + 1

# A legacy entry's first 18 bytes: offset, message size, crc, magic, attributes; then
# (magic 1) the timestamp.
_LEGACY_HEAD = struct.Struct(">qiIbb")
_LEGACY_TIMESTAMP = struct.Struct(">q")
_LEGACY_V1_HEAD_SIZE = _LEGACY_HEAD.size + _LEGACY_TIMESTAMP.size
# Codec (bits 0-2) and timestamp type (bit 3); the v2 flags above them mean nothing there.
_LEGACY_ATTRIBUTES_MASK = 0x0F
_MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD


def is_legacy(header: BatchHeader) -> bool:
    return header.magic != CURRENT_MAGIC


def _legacy_header(buf, pos: int, end: int, magic: int) -> BatchHeader | None:
    if end - pos < _LEGACY_HEAD.size:
        return None
    offset, size, crc, _, attributes = _LEGACY_HEAD.unpack_from(buf, pos)
    minimum = RECORD_OVERHEAD_V0 if magic == 0 else RECORD_OVERHEAD_V1
    if size < minimum:
        raise CorruptRecordError(f"magic {magic} message size {size} at position {pos} is below "
                                 f"the minimum {minimum}")
    if magic == 1:
        if end - pos < _LEGACY_V1_HEAD_SIZE:
            return None
        (timestamp,) = _LEGACY_TIMESTAMP.unpack_from(buf, pos + _LEGACY_HEAD.size)
    else:
        timestamp = NO_TIMESTAMP
    return BatchHeader(offset, size, NO_PARTITION_LEADER_EPOCH, magic, crc,
                       attributes & _LEGACY_ATTRIBUTES_MASK, 0, timestamp, timestamp,
                       NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, 1)


def entry_header(buf, pos: int = 0, end: int | None = None) -> BatchHeader | None:
    """The header of the entry at ``pos`` (see the module docstring), or None when
    ``buf[pos:end]`` is too short to hold it. The entry itself may run past ``end``."""
    if end is None:
        end = len(buf)
    if end - pos < ENTRY_HEADER_PREFIX:
        return None
    magic = buf[pos + MAGIC_OFFSET]
    if magic == CURRENT_MAGIC:
        if end - pos < RECORD_BATCH_OVERHEAD:
            return None
        header = BatchHeader._make(HEADER.unpack_from(buf, pos))
        if header.batch_length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"batchLength {header.batch_length} at position {pos} is smaller than the header")
        return header
    if magic == 0 or magic == 1:
        return _legacy_header(buf, pos, end, magic)
    raise UnsupportedMagicError(f"magic {magic} at position {pos}")


def iter_entry_headers(buf, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole entry of any magic in ``buf[pos:end]``; stops
    silently at a trailing partial entry. v2 batches take the same few steps as
    ``batch.iter_batch_headers``."""
    if end is None:
        end = len(buf)
    unpack = HEADER.unpack_from
    make = BatchHeader._make
    while end - pos >= ENTRY_HEADER_PREFIX:
        if buf[pos + MAGIC_OFFSET] == CURRENT_MAGIC:
            if end - pos < RECORD_BATCH_OVERHEAD:
                return
            header = make(unpack(buf, pos))
            if header.batch_length < _MIN_BATCH_LENGTH:
                raise CorruptRecordError(
                    f"batchLength {header.batch_length} at position {pos} is smaller than the header")
        else:
            header = entry_header(buf, pos, end)
            if header is None:
                return
        size = header.batch_length + LOG_OVERHEAD
        if size > end - pos:
            return
        yield pos, header
        pos += size


def decode_entry(buf, pos: int, header: BatchHeader, *, verify_crc: bool = True,
                 max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> list[Record] | list[LegacyRecord]:
    """The records of the whole entry at ``pos`` whose header is ``header``: v2 records,
    or a legacy entry's messages (a wrapper's inner ones, absolute offsets). Both kinds
    have ``offset``, ``timestamp``, ``key`` and ``value``. Raises ``DecodeError``."""
    if header.magic == CURRENT_MAGIC:
        return decode_batch(buf, pos, verify_crc=verify_crc, max_decompressed=max_decompressed)[1]
    view = memoryview(buf)[pos:pos + header.size_in_bytes]
    return list(iter_legacy_records(view, max_decompressed))
