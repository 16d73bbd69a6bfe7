"""Legacy message sets: reading magic 0 and magic 1 messages (Kafka before 0.11).

Owns: the byte layout of Kafka's ``LegacyRecord`` and the walk of a message set, including
compressed wrapper messages and the offsets and timestamps of their inner messages. The
broker never writes these formats; the encoders here exist for tests and tools.

Message set, big-endian: repeated ``[offset int64][message_size int32][message]``. A
message (``LegacyRecord.java``)::

    crc          uint32  CRC-32 (zlib.crc32) of every byte after this field
    magic        int8    0 or 1
    attributes   int8    bits 0-2 codec (none, gzip, snappy, lz4; zstd needs magic 2),
                         bit 3 timestamp type (magic 1: 0 CreateTime, 1 LogAppendTime)
    timestamp    int64   magic 1 only
    key          int32 length (-1 = null), then the bytes
    value        int32 length (-1 = null), then the bytes

A compressed *wrapper* message has a null key and, as its value, a whole message set of
inner messages compressed with its codec. Inner offsets are absolute at magic 0; at
magic 1 they are relative (0 .. n-1) and the wrapper carries the last absolute offset,
so ``absolute = wrapper_offset - last_inner_offset + inner_offset`` (a wrapper offset of
0, as producers send it, leaves them as they are). At magic 1 the inner messages take the
wrapper's timestamp type, and its timestamp too when that type is LogAppendTime.

Invariants: every length is checked against the bytes that remain before slicing; every
CRC is verified; decompression is bounded by ``max_bytes``; compression nests at most one
level. Only ``DecodeError`` subclasses escape the reader.

Thread-safety: pure functions and immutable values.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from broker.record.batch import LOG_ENTRY_PREFIX, LOG_OVERHEAD, build_batch, encode_record
from broker.record.codecs import CompressionType, compress, decompress
from broker.record.errors import (
    CorruptRecordError,
    DecompressionError,
    EncodeError,
    InvalidRecordError,
    TruncatedError,
    UnsupportedCodecError,
    UnsupportedMagicError,
)

__all__ = [
    "LegacyEntryInfo",
    "LegacyRecord",
    "legacy_entry_info",
    "legacy_entry_to_v2",
    "iter_legacy_records",
    "encode_legacy_message",
    "encode_legacy_message_set",
]

# Message set entry header: batch.LOG_ENTRY_PREFIX, the LOG_OVERHEAD shared by every magic:
#   offset        int64   absolute (relative inside a magic 1 wrapper)
#   message_size  int32   bytes of the message that follows

# Message header up to the key:
#   crc         uint32
#   magic       int8
#   attributes  int8
#   timestamp   int64   (magic 1 only: _HEADER_V1)
_HEADER_V0 = struct.Struct(">IBb")
_HEADER_V1 = struct.Struct(">IBbq")
_LENGTH = struct.Struct(">i")  # key and value lengths, -1 = null
_CRC = struct.Struct(">I")
_CRC_SIZE = _CRC.size

RECORD_OVERHEAD_V0 = _HEADER_V0.size + 2 * _LENGTH.size  # 14: smallest magic 0 message
RECORD_OVERHEAD_V1 = _HEADER_V1.size + 2 * _LENGTH.size  # 22: smallest magic 1 message

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
NO_TIMESTAMP = -1
NO_TIMESTAMP_TYPE = -1  # magic 0 has no timestamp (Kafka's TimestampType.NO_TIMESTAMP_TYPE)
CREATE_TIME = 0
LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True)
class LegacyRecord:
    """One message as a consumer sees it: inner messages of a wrapper come out one by one
    with absolute offsets; ``magic``, ``crc`` and ``attributes`` are the message's own."""

    offset: int
    timestamp: int  # -1 at magic 0
    timestamp_type: int  # -1 at magic 0, else CREATE_TIME or LOG_APPEND_TIME
    key: bytes | None
    value: bytes | None
    magic: int
    crc: int
    attributes: int


class _Message(NamedTuple):
    crc: int
    magic: int
    attributes: int
    timestamp: int
    key: memoryview | None
    value: memoryview | None


def _byte_view(buf: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(buf)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _read_bytes(msg: memoryview, pos: int, what: str) -> tuple[memoryview | None, int]:
    if len(msg) - pos < _LENGTH.size:
        raise TruncatedError(f"legacy message ends before its {what} length")
    (length,) = _LENGTH.unpack_from(msg, pos)
    pos += _LENGTH.size
    if length == -1:
        return None, pos
    if length < -1:
        raise InvalidRecordError(f"legacy message has a negative {what} length {length}")
    if length > len(msg) - pos:
        raise TruncatedError(f"legacy message {what} length {length} points past its end")
    return msg[pos:pos + length], pos + length


def _parse_message(msg: memoryview) -> _Message:
    """One message (``len(msg) >= RECORD_OVERHEAD_V0``, checked by the caller)."""
    crc, magic, attributes = _HEADER_V0.unpack_from(msg, 0)
    if magic == 0:
        timestamp, pos = NO_TIMESTAMP, _HEADER_V0.size
    elif magic == 1:
        if len(msg) < RECORD_OVERHEAD_V1:
            raise CorruptRecordError(f"magic 1 message of {len(msg)} bytes is too short")
        timestamp, pos = _HEADER_V1.unpack_from(msg, 0)[3], _HEADER_V1.size
    else:
        raise UnsupportedMagicError(f"legacy message set entry has magic {magic}")
    if zlib.crc32(msg[_CRC_SIZE:]) != crc:
        raise CorruptRecordError("legacy message CRC mismatch")
    key, pos = _read_bytes(msg, pos, "key")
    value, pos = _read_bytes(msg, pos, "value")
    if pos != len(msg):
        raise CorruptRecordError(f"legacy message has {len(msg) - pos} trailing bytes")
    return _Message(crc, magic, attributes, timestamp, key, value)


def _entries(view: memoryview, partial_ok: bool) -> Iterator[tuple[int, memoryview]]:
    """(offset, message bytes) of each entry. A cut trailing entry ends the walk silently
    when ``partial_ok`` (a fetch may cut the last one), else raises TruncatedError."""
    pos, end = 0, len(view)
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            if partial_ok:
                return
            raise TruncatedError("message set ends inside an entry header")
        offset, size = LOG_ENTRY_PREFIX.unpack_from(view, pos)
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(f"message size {size} is below the minimum")
        start = pos + LOG_OVERHEAD
        if size > end - start:
            if partial_ok:
                return
            raise TruncatedError(f"message of {size} bytes runs past the message set")
        yield offset, view[start:start + size]
        pos = start + size


def iter_legacy_records(buf: bytes | memoryview, max_bytes: int = 1 << 30) -> Iterator[LegacyRecord]:
    """The records of a magic 0/1 message set, wrappers expanded, in offset order.

    A partial trailing entry ends the iteration silently; a CRC mismatch raises
    ``CorruptRecordError``; each wrapper inflates to at most ``max_bytes``."""
    for offset, msg in _entries(_byte_view(buf), partial_ok=True):
        message = _parse_message(msg)
        codec = message.attributes & CODEC_MASK
        if codec == CompressionType.NONE:
            yield _record(offset, message, message.timestamp, _timestamp_type(message))
        else:
            yield from _inner_records(offset, message, codec, max_bytes)


def _timestamp_type(message: _Message) -> int:
    if message.magic == 0:
        return NO_TIMESTAMP_TYPE
    return LOG_APPEND_TIME if message.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME


def _record(offset: int, m: _Message, timestamp: int, timestamp_type: int) -> LegacyRecord:
    return LegacyRecord(
        offset=offset,
        timestamp=timestamp,
        timestamp_type=timestamp_type,
        key=None if m.key is None else bytes(m.key),
        value=None if m.value is None else bytes(m.value),
        magic=m.magic,
        crc=m.crc,
        attributes=m.attributes,
    )


def _inner_records(wrapper_offset: int, wrapper: _Message, codec: int,
                   max_bytes: int) -> Iterator[LegacyRecord]:
    for offset, message, timestamp, timestamp_type in _inner_messages(wrapper_offset, wrapper, codec, max_bytes):
        yield _record(offset, message, timestamp, timestamp_type)


def _inner_messages(wrapper_offset: int, wrapper: _Message, codec: int, max_bytes: int
                    ) -> Iterator[tuple[int, _Message, int, int]]:
    """(absolute offset, message, timestamp, timestamp type) of each inner message of a
    compressed wrapper, every one parsed (CRC-32 checked) before the first is yielded."""
    if codec == CompressionType.ZSTD:
        raise UnsupportedCodecError("zstd compression needs magic 2")
    if wrapper.value is None:
        raise CorruptRecordError("compressed wrapper message has a null value")
    payload: bytes | memoryview = wrapper.value
    if codec == CompressionType.LZ4 and wrapper.magic == 0:
        payload = _fix_lz4_header_checksum(payload)
    inner_set = memoryview(decompress(codec, payload, max_bytes))
    inner: list[tuple[int, _Message]] = []
    for offset, msg in _entries(inner_set, partial_ok=False):
        message = _parse_message(msg)
        if message.attributes & CODEC_MASK:
            raise CorruptRecordError("compressed message nested inside a compressed message")
        inner.append((offset, message))
    if not inner:
        raise InvalidRecordError("compressed wrapper message holds no inner messages")

    base = 0  # magic 0: inner offsets are absolute
    if wrapper.magic == 1 and wrapper_offset != 0:
        last_inner = inner[-1][0]
        if wrapper_offset < last_inner:
            raise InvalidRecordError(
                f"wrapper offset {wrapper_offset} is below its last inner offset {last_inner}")
        base = wrapper_offset - last_inner
    wrapper_type = _timestamp_type(wrapper)
    for offset, message in inner:
        if message.magic == 0:
            timestamp, timestamp_type = NO_TIMESTAMP, NO_TIMESTAMP_TYPE
        elif wrapper.magic == 0:
            timestamp, timestamp_type = message.timestamp, _timestamp_type(message)
        elif wrapper_type == LOG_APPEND_TIME:
            timestamp, timestamp_type = wrapper.timestamp, LOG_APPEND_TIME
        else:
            timestamp, timestamp_type = message.timestamp, wrapper_type
        yield base + offset, message, timestamp, timestamp_type


# --- LZ4 at magic 0 ----------------------------------------------------------------------
# Kafka 0.8/0.9 computed the LZ4 frame header checksum over the magic number too (KIP-57),
# and Kafka's reader ignores that checksum at magic 0. lz4.frame always checks it, so the
# reader rewrites it. Frame header: magic uint32 LE | FLG | BD | [content size 8] | HC,
# where HC = (xxh32(FLG .. end of content size) >> 8) & 0xFF, xxh32 with a zero seed.

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_XXH_PRIME1, _XXH_PRIME2, _XXH_PRIME3 = 2654435761, 2246822519, 3266489917
_XXH_PRIME4, _XXH_PRIME5 = 668265263, 374761393
_U32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _U32


def _xxh32_short(data: bytes) -> int:
    """XXH32 (zero seed) of fewer than 16 bytes (enough for an LZ4 frame descriptor)."""
    assert len(data) < 16
    h = (_XXH_PRIME5 + len(data)) & _U32
    pos = 0
    while len(data) - pos >= 4:
        h = (h + int.from_bytes(data[pos:pos + 4], "little") * _XXH_PRIME3) & _U32
        h = (_rotl32(h, 17) * _XXH_PRIME4) & _U32
        pos += 4
    for byte in data[pos:]:
        h = (h + byte * _XXH_PRIME5) & _U32
        h = (_rotl32(h, 11) * _XXH_PRIME1) & _U32
    h = ((h ^ (h >> 15)) * _XXH_PRIME2) & _U32
    h = ((h ^ (h >> 13)) * _XXH_PRIME3) & _U32
    return h ^ (h >> 16)


def _fix_lz4_header_checksum(payload: memoryview) -> bytes | memoryview:
    """``payload`` with a correct LZ4 frame header checksum (unchanged if not a frame)."""
    if len(payload) < 7 or payload[:4] != _LZ4_MAGIC:
        return payload  # let the decompressor report it
    descriptor_end = 6 + (8 if payload[4] & 0x08 else 0)  # FLG bit 3: content size
    if len(payload) <= descriptor_end:
        raise DecompressionError("lz4: truncated frame header")
    fixed = bytearray(payload)
    fixed[descriptor_end] = (_xxh32_short(bytes(payload[4:descriptor_end])) >> 8) & 0xFF
    return bytes(fixed)


# --- encoders (tests and tools only) -----------------------------------------------------


def _encode_bytes(data: bytes | None) -> bytes:
    if data is None:
        return _LENGTH.pack(-1)
    return _LENGTH.pack(len(data)) + bytes(data)


def encode_legacy_message(offset: int, key: bytes | None, value: bytes | None, magic: int,
                          timestamp: int = NO_TIMESTAMP, codec: int = 0,
                          timestamp_type: int = CREATE_TIME) -> bytes:
    """One message set entry (offset, size, message). ``codec`` only sets the attribute
    bits: the value must already be the compressed inner message set."""
    if magic not in (0, 1):
        raise EncodeError(f"legacy messages have magic 0 or 1, not {magic}")
    if not 0 <= codec <= CODEC_MASK:
        raise EncodeError(f"codec id {codec} does not fit the attributes")
    attributes = codec
    if magic == 1 and timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    try:
        if magic == 0:
            header = bytes((0, attributes))
        else:
            header = struct.pack(">bbq", 1, attributes, timestamp)
        body = header + _encode_bytes(key) + _encode_bytes(value)
        return LOG_ENTRY_PREFIX.pack(offset, _CRC_SIZE + len(body)) + _CRC.pack(zlib.crc32(body)) + body
    except (struct.error, TypeError) as exc:
        raise EncodeError(f"cannot encode legacy message: {exc}") from exc


def encode_legacy_message_set(records: Iterable[Sequence], magic: int, codec: int = 0,
                              base_offset: int = 0, timestamp_type: int = CREATE_TIME,
                              wrapper_timestamp: int | None = None,
                              wrapper_offset: int | None = None) -> bytes:
    """A message set of ``records``, each ``(key, value)`` or ``(key, value, timestamp)``,
    at offsets ``base_offset, base_offset + 1, ...``.

    With ``codec != 0`` the records go into one wrapper message, as a magic 0/1 producer and
    broker wrote them: inner offsets absolute at magic 0 and relative at magic 1, wrapper
    offset = last offset (override with ``wrapper_offset``, e.g. 0 as producers send),
    wrapper timestamp = ``wrapper_timestamp`` or the largest inner timestamp."""
    items = [(r[0], r[1], r[2] if len(r) > 2 else NO_TIMESTAMP) for r in records]
    if codec == CompressionType.NONE:
        return b"".join(
            encode_legacy_message(base_offset + i, key, value, magic, ts, 0, timestamp_type)
            for i, (key, value, ts) in enumerate(items))
    if codec == CompressionType.ZSTD:
        raise EncodeError("zstd compression needs magic 2")
    if not items:
        raise EncodeError("a compressed message set needs at least one record")
    first_inner = base_offset if magic == 0 else 0
    inner = b"".join(
        encode_legacy_message(first_inner + i, key, value, magic, ts)
        for i, (key, value, ts) in enumerate(items))
    if wrapper_timestamp is None:
        wrapper_timestamp = max(ts for _, _, ts in items) if magic == 1 else NO_TIMESTAMP
    if wrapper_offset is None:
        wrapper_offset = base_offset + len(items) - 1
    return encode_legacy_message(wrapper_offset, None, compress(codec, inner), magic,
                                 wrapper_timestamp, codec, timestamp_type)


# --- whole entries: validation (log recovery) and conversion to v2 (the log cleaner) -----


class LegacyEntryInfo(NamedTuple):
    """What recovery learns from one validated message set entry: its records' first and
    last absolute offsets (the entry's own offset is the last, as Kafka's ``lastOffset``),
    the number of records, and the largest timestamp with its offset (-1 at magic 0)."""
    first_offset: int
    last_offset: int
    count: int
    max_timestamp: int
    offset_of_max_timestamp: int


def legacy_entry_info(entry: bytes | memoryview, max_bytes: int = 1 << 30) -> LegacyEntryInfo:
    """Validate one whole message set entry (``[offset][size][message]``, exactly its
    bytes) as Kafka's recovery would, and more: the message's size, CRC-32 and fields,
    and for a compressed wrapper every inner message (CRC-32, no nesting, offsets
    increasing, the last one not past the wrapper's offset). Raises ``DecodeError``."""
    view = _byte_view(entry)
    if len(view) < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
        raise TruncatedError(f"legacy entry of {len(view)} bytes is shorter than the smallest message")
    offset, size = LOG_ENTRY_PREFIX.unpack_from(view, 0)
    if size != len(view) - LOG_OVERHEAD:
        raise CorruptRecordError(f"legacy entry size {size} does not match its {len(view) - LOG_OVERHEAD} bytes")
    if size < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(f"message size {size} is below the minimum")
    message = _parse_message(view[LOG_OVERHEAD:])  # no record objects: nothing is copied
    codec = message.attributes & CODEC_MASK
    if codec == CompressionType.NONE:
        return LegacyEntryInfo(offset, offset, 1, message.timestamp, offset)
    first = previous = None
    count = 0
    max_ts = NO_TIMESTAMP
    for inner_offset, _, timestamp, _ in _inner_messages(offset, message, codec, max_bytes):
        if previous is None:
            first = inner_offset
        elif inner_offset <= previous:
            raise InvalidRecordError(
                f"inner offsets of the wrapper at offset {offset} do not increase ({previous}, {inner_offset})")
        previous = inner_offset
        count += 1
        if timestamp > max_ts:
            max_ts = timestamp
    if first is None or first < 0 or previous > offset:
        raise InvalidRecordError(
            f"inner offsets {first}..{previous} of the message at offset {offset} do not end at or before it")
    return LegacyEntryInfo(first, offset, count, max_ts, offset)


def legacy_entry_to_v2(entry: bytes | memoryview, max_bytes: int = 1 << 30) -> bytes:
    """The v2 batch that holds the records of one whole message set entry, as Kafka's log
    cleaner rewrites legacy data (KIP-724): an uncompressed message becomes a single-record
    batch, a compressed wrapper one batch of its inner messages compressed with the same
    codec. Offsets, keys, values and timestamps are kept; a magic 0 message has no
    timestamp (-1, CreateTime); a LogAppendTime wrapper stays LogAppendTime. The batch has
    no producer id and no partition leader epoch."""
    view = _byte_view(entry)
    offset, _ = LOG_ENTRY_PREFIX.unpack_from(view, 0)
    records = list(iter_legacy_records(view, max_bytes))
    if not records:
        raise CorruptRecordError("legacy entry holds no message")
    attributes = view[LOG_OVERHEAD + _CRC_SIZE + 1]
    codec = attributes & CODEC_MASK
    base_offset = records[0].offset
    base_ts = records[0].timestamp
    log_append = any(r.timestamp_type == LOG_APPEND_TIME for r in records)
    body = b"".join(encode_record(r.offset - base_offset, r.timestamp - base_ts, r.key, r.value)
                    for r in records)
    return build_batch(body, count=len(records), base_offset=base_offset,
                       last_offset_delta=offset - base_offset,
                       base_timestamp=base_ts, max_timestamp=max(r.timestamp for r in records),
                       compression=codec,
                       timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME)
