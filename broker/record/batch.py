"""RecordBatch v2 (magic 2): the header walker, the per-record encoder and decoder.

Owns: the byte layout of Kafka's ``DefaultRecordBatch`` and ``DefaultRecord``, in-place
rewrites of the fields a broker may change (base offset, partition leader epoch,
LogAppendTime), and CRC-32C validation. Knows nothing of files or sockets. Defines once,
for every layer: ``LOG_ENTRY_PREFIX`` (the struct of the first ``LOG_OVERHEAD`` bytes of
any log entry: baseOffset, batchLength), ``HEADER`` (the v2 header's struct) and the
``H_*`` positions of its fields in a raw ``HEADER.unpack_from`` tuple (``BatchHeader``'s
field order, checked at import).

Batch header, 61 bytes, big-endian (``DefaultRecordBatch.java``)::

    offset  size  field
    0       8     baseOffset            int64   \\ LOG_OVERHEAD (12): every magic starts
    8       4     batchLength           int32   /  with offset + size
    12      4     partitionLeaderEpoch  int32   (outside the CRC)
    16      1     magic                 int8    (2; magic 0/1 entries also keep it at 16)
    17      4     crc                   uint32  CRC-32C of bytes 21 .. end of batch
    21      2     attributes            int16   bits 0-2 codec, 3 timestamp type
                                                (1 = LogAppendTime), 4 transactional,
                                                5 control, 6 delete horizon set
    23      4     lastOffsetDelta       int32
    27      8     baseTimestamp         int64   (the delete horizon when bit 6 is set)
    35      8     maxTimestamp          int64
    43      8     producerId            int64
    51      2     producerEpoch         int16
    53      4     baseSequence          int32
    57      4     recordsCount          int32
    61      ...   records (compressed as a whole when codec != 0)

Each record (varint = zigzag, see ``varint.py``)::

    length varint (bytes after this field) | attributes int8 (unused, 0)
    timestampDelta varlong | offsetDelta varint
    keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value
    headersCount varint | headers: [keyLength varint | key utf-8 | valueLength varint
                                    (-1 = null) | value]

Invariants: every length is checked against the bytes that remain before slicing; only
``DecodeError`` subclasses escape a decoder. ``batchLength`` counts the bytes after the
field, so a batch occupies ``batchLength + 12`` bytes.

Thread-safety: pure functions and immutable values, except the ``write_*`` helpers,
which mutate the caller's buffer.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import crc32c as _crc32c

from . import codecs
from .errors import (
    CorruptRecordError,
    DecodeError,
    EncodeError,
    InvalidRecordError,
    TruncatedError,
    UnsupportedMagicError,
)
from .varint import decode_varint, decode_varlong, encode_varint, encode_varlong

crc32c = _crc32c.crc32c

LOG_OVERHEAD = 12  # baseOffset + batchLength, common to every magic
RECORD_BATCH_OVERHEAD = 61  # the v2 header
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers from here to the end of the batch
RECORDS_OFFSET = 61
CURRENT_MAGIC = 2

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

# Decompressed records of one batch may not exceed this unless the caller says otherwise
# (Kafka's default max.message.bytes, 1 MiB + the batch overhead, times a generous factor
# for highly compressible data is the caller's choice; this default protects tools).
DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024

# baseOffset int64 | batchLength int32: the first LOG_OVERHEAD bytes of every log entry,
# whatever its magic (a legacy entry's offset and message size sit in the same places).
LOG_ENTRY_PREFIX = struct.Struct(">qi")
HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 batch, decoded; the records are not touched."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """Kafka's ``deleteHorizonMs``: the base timestamp when bit 6 is set (a batch the log
        cleaner stamped: its tombstones and its marker go once this time has passed)."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG_MASK else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping at 2**31 - 1 as Kafka does."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


# HEADER's fields are BatchHeader's, in order; LOG_ENTRY_PREFIX is their first two.
if (len(HEADER.unpack(bytes(HEADER.size))) != len(BatchHeader._fields)
        or HEADER.size != RECORD_BATCH_OVERHEAD or LOG_ENTRY_PREFIX.size != LOG_OVERHEAD
        or BatchHeader._fields[:2] != ("base_offset", "batch_length")):
    raise AssertionError("HEADER, LOG_ENTRY_PREFIX and BatchHeader disagree")

# Positions of the fields in a raw ``HEADER.unpack_from`` tuple, for the hot paths that
# skip building a BatchHeader: ``header[H_PRODUCER_ID]`` (taken from BatchHeader._fields,
# so a reordering cannot silently shift them).
H_BASE_OFFSET = BatchHeader._fields.index("base_offset")
H_BATCH_LENGTH = BatchHeader._fields.index("batch_length")
H_PARTITION_LEADER_EPOCH = BatchHeader._fields.index("partition_leader_epoch")
H_MAGIC = BatchHeader._fields.index("magic")
H_CRC = BatchHeader._fields.index("crc")
H_ATTRIBUTES = BatchHeader._fields.index("attributes")
H_LAST_OFFSET_DELTA = BatchHeader._fields.index("last_offset_delta")
H_BASE_TIMESTAMP = BatchHeader._fields.index("base_timestamp")
H_MAX_TIMESTAMP = BatchHeader._fields.index("max_timestamp")
H_PRODUCER_ID = BatchHeader._fields.index("producer_id")
H_PRODUCER_EPOCH = BatchHeader._fields.index("producer_epoch")
H_BASE_SEQUENCE = BatchHeader._fields.index("base_sequence")
H_RECORDS_COUNT = BatchHeader._fields.index("records_count")


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    attributes: int = 0


def read_header(buf, pos: int = 0) -> BatchHeader:
    """Decode the v2 header at ``pos``; the whole header must be present."""
    if len(buf) - pos < RECORD_BATCH_OVERHEAD:
        raise TruncatedError(
            f"batch header needs {RECORD_BATCH_OVERHEAD} bytes, {len(buf) - pos} remain")
    header = BatchHeader._make(HEADER.unpack_from(buf, pos))
    if header.magic != CURRENT_MAGIC:
        raise UnsupportedMagicError(f"magic {header.magic} is not a v2 batch")
    if header.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
        raise CorruptRecordError(f"batchLength {header.batch_length} is smaller than the header")
    return header


def peek_entry(buf, pos: int, end: int) -> tuple[int, int, int] | None:
    """(base offset, total size, magic) of the log entry at ``pos``, or None when fewer
    than 17 bytes remain. Works for every magic: all keep offset, size and magic at the
    same positions."""
    if end - pos < MAGIC_OFFSET + 1:
        return None
    base_offset, length = LOG_ENTRY_PREFIX.unpack_from(buf, pos)
    return base_offset, length + LOG_OVERHEAD, buf[pos + MAGIC_OFFSET]


def iter_batch_headers(buf, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Walk back-to-back v2 batches in ``buf[pos:end]`` yielding (position, header).

    Never touches the records. Stops silently at a trailing partial batch (a fetch
    response may cut the last one); a header that cannot be a batch raises
    ``CorruptRecordError`` and a non-v2 magic ``UnsupportedMagicError``.
    """
    if end is None:
        end = len(buf)
    unpack = HEADER.unpack_from
    make = BatchHeader._make
    while end - pos >= RECORD_BATCH_OVERHEAD:
        header = make(unpack(buf, pos))
        if header.magic != CURRENT_MAGIC:
            raise UnsupportedMagicError(f"magic {header.magic} at position {pos}")
        if header.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            raise CorruptRecordError(
                f"batchLength {header.batch_length} at position {pos} is smaller than the header")
        size = header.batch_length + LOG_OVERHEAD
        if size > end - pos:
            return
        yield pos, header
        pos += size


def compute_crc(buf, pos: int, size: int) -> int:
    """CRC-32C of the batch at ``pos`` of ``size`` bytes (attributes .. end)."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:pos + size])


def is_crc_valid(buf, pos: int = 0, header: BatchHeader | None = None) -> bool:
    header = header or read_header(buf, pos)
    if header.size_in_bytes > len(buf) - pos:
        raise TruncatedError("batch runs past the end of the buffer")
    return compute_crc(buf, pos, header.size_in_bytes) == header.crc


def ensure_valid(buf, pos: int = 0, header: BatchHeader | None = None) -> BatchHeader:
    """Check sizes and CRC of the batch at ``pos``; return its header."""
    header = header or read_header(buf, pos)
    if header.size_in_bytes > len(buf) - pos:
        raise TruncatedError(
            f"batch of {header.size_in_bytes} bytes at {pos}, {len(buf) - pos} remain")
    actual = compute_crc(buf, pos, header.size_in_bytes)
    if actual != header.crc:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset}: CRC {actual:#010x} != stored {header.crc:#010x}")
    if header.records_count < 0:
        raise InvalidRecordError(f"negative records count {header.records_count}")
    return header


# --- in-place rewrites (fields outside the CRC, or followed by a CRC update) ---

def write_base_offset(buf, pos: int, base_offset: int) -> None:
    _INT64.pack_into(buf, pos, base_offset)


def write_partition_leader_epoch(buf, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + 12, epoch)


def write_log_append_time(buf, pos: int, timestamp: int) -> None:
    """Set the timestamp type to LogAppendTime and maxTimestamp to ``timestamp``, then
    recompute the CRC, as a leader does for topics with message.timestamp.type=LogAppendTime."""
    header = read_header(buf, pos)
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, header.attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + 35, timestamp)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, header.size_in_bytes))


# --- records ---

def records_payload(buf, pos: int, header: BatchHeader, max_decompressed: int) -> memoryview | bytes:
    """The (decompressed) record bytes of the batch at ``pos``."""
    mv = memoryview(buf)[pos + RECORDS_OFFSET:pos + header.size_in_bytes]
    if len(mv) != header.size_in_bytes - RECORDS_OFFSET:
        raise TruncatedError("batch runs past the end of the buffer")
    codec = header.compression
    if codec == 0:
        return mv
    return codecs.decompress(codec, mv, max_decompressed)


def decode_records(payload, header: BatchHeader) -> list[Record]:
    """Decode the records of a batch from its (decompressed) payload."""
    count = header.records_count
    end = len(payload)
    # Each record takes at least 7 bytes; refuse counts the payload cannot hold before
    # building anything.
    if count < 0 or count * 7 > end:
        raise CorruptRecordError(f"records count {count} does not fit in {end} bytes")
    base_offset = header.base_offset
    log_append = header.timestamp_type == LOG_APPEND_TIME
    base_ts = header.max_timestamp if log_append else header.base_timestamp
    out: list[Record] = []
    pos = 0
    i = 0
    try:
        for i in range(count):  # noqa: B007 (i is read by the except clause)
            length, pos = decode_varint(payload, pos, end)
            if length < 6 or length > end - pos:
                raise CorruptRecordError(f"record length {length} with {end - pos} bytes left")
            rec_end = pos + length
            attributes = payload[pos]
            pos += 1
            ts_delta, pos = decode_varlong(payload, pos, rec_end)
            off_delta, pos = decode_varint(payload, pos, rec_end)
            key, pos = _read_nullable_bytes(payload, pos, rec_end, "key")
            value, pos = _read_nullable_bytes(payload, pos, rec_end, "value")
            n_headers, pos = decode_varint(payload, pos, rec_end)
            if n_headers < 0 or n_headers * 2 > rec_end - pos:
                raise CorruptRecordError(f"headers count {n_headers} does not fit in the record")
            headers = []
            for _h in range(n_headers):
                hkey, pos = _read_nullable_bytes(payload, pos, rec_end, "header key")
                if hkey is None:
                    raise CorruptRecordError("null header key")
                hvalue, pos = _read_nullable_bytes(payload, pos, rec_end, "header value")
                try:
                    headers.append((hkey.decode("utf-8"), hvalue))
                except UnicodeDecodeError as exc:
                    raise CorruptRecordError(f"header key is not UTF-8: {exc}") from None
            if pos != rec_end:
                raise CorruptRecordError(f"record declares {length} bytes but uses "
                                         f"{length - (rec_end - pos)}")
            out.append(Record(base_offset + off_delta, base_ts if log_append else base_ts + ts_delta,
                              key, value, tuple(headers), attributes))
    except DecodeError as exc:  # name the record: "record 3: key length -7 out of range"
        raise type(exc)(f"record {i}: {exc}") from None
    if pos != end:
        raise CorruptRecordError(f"records end {end - pos} bytes before the batch end "
                                 f"({count} records)")
    return out


def _read_nullable_bytes(buf, pos: int, end: int, what: str = "length") -> tuple[bytes | None, int]:
    n, pos = decode_varint(buf, pos, end)
    if n < 0:
        if n != -1:
            raise CorruptRecordError(f"{what} length {n} out of range")
        return None, pos
    if n > end - pos:
        raise CorruptRecordError(f"{what} length {n} out of range: {end - pos} bytes left in "
                                 "the record")
    return bytes(buf[pos:pos + n]), pos + n


def decode_batch(buf, pos: int = 0, *, verify_crc: bool = True,
                 max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> tuple[BatchHeader, list[Record]]:
    """Decode one whole v2 batch at ``pos`` into its header and records."""
    header = ensure_valid(buf, pos) if verify_crc else read_header(buf, pos)
    if header.size_in_bytes > len(buf) - pos:
        raise TruncatedError("batch runs past the end of the buffer")
    payload = records_payload(buf, pos, header, max_decompressed)
    return header, decode_records(payload, header)


def iter_batches(buf, pos: int = 0, end: int | None = None, *, verify_crc: bool = True,
                 max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_BYTES
                 ) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Decode every complete v2 batch in ``buf[pos:end]`` (a trailing partial one is skipped)."""
    for p, header in iter_batch_headers(buf, pos, end):
        if verify_crc:
            ensure_valid(buf, p, header)
        yield header, decode_records(records_payload(buf, p, header, max_decompressed), header)


# --- encoding ---

HeaderList = Sequence[tuple[str, bytes | None]]


# Zigzag varints of the signed values 0..8191 (the lengths, counts and deltas of nearly
# every record), precomputed: one list index instead of a function call per field.
_SMALL_VARINTS = tuple(encode_varint(n) for n in range(8192))


def _varint(n: int, _small=_SMALL_VARINTS, _limit=len(_SMALL_VARINTS)) -> bytes:  # noqa: B008 (bound once: fast locals)
    return _small[n] if 0 <= n < _limit else encode_varint(n)


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None,
                  value: bytes | None, headers: HeaderList = ()) -> bytes:
    """The bytes of one record, length prefix included."""
    small = _SMALL_VARINTS
    parts = [b"\x00",
             small[timestamp_delta] if 0 <= timestamp_delta < 8192 else encode_varlong(timestamp_delta),
             _varint(offset_delta)]
    for blob in (key, value):
        if blob is None:
            parts.append(b"\x01")  # zigzag(-1)
        else:
            parts.append(_varint(len(blob)))
            parts.append(blob if blob.__class__ is bytes else bytes(blob))
    parts.append(_varint(len(headers)))
    for hkey, hvalue in headers:
        if not isinstance(hkey, str):
            raise EncodeError(f"header key must be str, not {type(hkey).__name__}")
        kb = hkey.encode("utf-8")
        parts.append(_varint(len(kb)))
        parts.append(kb)
        if hvalue is None:
            parts.append(b"\x01")
        else:
            parts.append(_varint(len(hvalue)))
            parts.append(hvalue if hvalue.__class__ is bytes else bytes(hvalue))
    body = b"".join(parts)
    return _varint(len(body)) + body


def build_batch(records_bytes: bytes, *, count: int, base_offset: int = 0,
                last_offset_delta: int | None = None, base_timestamp: int = NO_TIMESTAMP,
                max_timestamp: int = NO_TIMESTAMP, compression: int = 0,
                timestamp_type: int = CREATE_TIME, producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                is_transactional: bool = False, is_control: bool = False,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                compression_level: int | None = None, delete_horizon_ms: int = NO_TIMESTAMP) -> bytes:
    """Frame already-encoded record bytes as a batch: compress, write the header, CRC.

    ``delete_horizon_ms`` (the log cleaner, KIP-534): when given, it is written as the base
    timestamp with the delete-horizon attribute bit (6) set, as Kafka's
    ``MemoryRecordsBuilder``; the records' timestamp deltas must then be relative to it."""
    if delete_horizon_ms != NO_TIMESTAMP:
        base_timestamp = delete_horizon_ms
    if compression:
        records_bytes = codecs.compress(compression, records_bytes, compression_level)
    attributes = compression & COMPRESSION_CODEC_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if delete_horizon_ms != NO_TIMESTAMP:
        attributes |= DELETE_HORIZON_FLAG_MASK
    if last_offset_delta is None:
        last_offset_delta = count - 1
    # Pack the header alone and chain the CRC over header tail + records, so the records
    # are copied once (by the final concatenation), not twice.
    header = bytearray(RECORD_BATCH_OVERHEAD)
    HEADER.pack_into(header, 0, base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(records_bytes),
                     partition_leader_epoch, CURRENT_MAGIC, 0, attributes, last_offset_delta,
                     base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, count)
    crc = crc32c(records_bytes, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    _UINT32.pack_into(header, CRC_OFFSET, crc)
    return bytes(header) + records_bytes


def encode_batch(records: Iterable[tuple], *, base_offset: int = 0, compression: int = 0,
                 timestamp_type: int = CREATE_TIME, producer_id: int = NO_PRODUCER_ID,
                 producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                 is_transactional: bool = False, is_control: bool = False,
                 partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                 compression_level: int | None = None) -> bytes:
    """Encode records given as (key, value, timestamp[, headers]) tuples into one batch.

    Offset deltas are 0..n-1; the base timestamp is the first record's, as Java's
    MemoryRecordsBuilder does.
    """
    records = list(records)
    if not records:
        raise EncodeError("a batch needs at least one record")
    base_ts = records[0][2]
    max_ts = NO_TIMESTAMP
    parts = []
    for i, rec in enumerate(records):
        key, value, ts = rec[0], rec[1], rec[2]
        headers = rec[3] if len(rec) > 3 and rec[3] is not None else ()
        if ts > max_ts:
            max_ts = ts
        parts.append(encode_record(i, ts - base_ts, key, value, headers))
    return build_batch(b"".join(parts), count=len(records), base_offset=base_offset,
                       base_timestamp=base_ts, max_timestamp=max_ts, compression=compression,
                       timestamp_type=timestamp_type, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=base_sequence,
                       is_transactional=is_transactional, is_control=is_control,
                       partition_leader_epoch=partition_leader_epoch,
                       compression_level=compression_level)
