"""Record-level validation of a v2 batch: every record walked, nothing materialised.

Owns: ``check_records``, the read-only walk over the records section of one v2 batch that
the broker runs on every produce (Kafka's ``LogValidator`` iterating ``DefaultRecord`` s,
with ``skipKeyValueIterator`` for compressed batches), and ``record_details`` for the rare
error path that must name the records at fault.

What is checked, for every record (layout in ``batch.py``), so that every batch accepted
is one that Java, librdkafka, kafka-python and aiokafka can all read:

- the length varint is a valid int32 >= 6 and the record fits in what remains;
- attributes is one byte below 0x80 (kafka-python reads it as a varint);
- timestamp delta is a valid varlong, offset delta a valid varint equal to the record's
  index (0..count-1 in order: lastOffsetDelta + 1 == count is checked on the header);
- key and value lengths are -1 (null) or >= 0, and fit in the record;
- the header count is >= 0 and fits; each header key length is >= 0 and its bytes are
  UTF-8 (kafka-python and aiokafka decode them strictly); header value lengths -1 or >= 0;
- the fields use exactly the record's length; no varint is longer than its type allows
  (5 bytes for int32, 10 for int64) or overflows it;
- exactly ``count`` records, and nothing after the last one (uncompressed: up to the end of
  the batch; compressed: up to the end of the decompressed stream, which is drained to its
  end so that trailers and checksums are verified as a consumer would).

Uncompressed batches are walked in place: records of the common shape (64 B to 8 KiB,
attributes 0, timestamp delta 0-63 ms, key under 64 bytes or none, no headers) by a lean
loop of one unpack, a mask compare and three table lookups per record (``_walk_plain``,
about 0.35 us a record on CPython 3.11), every other record by the plain loop ``_walk``
that decodes 1- and 2-byte varints inline (about 0.6-1.4 us a record). From
``VECTOR_MIN_RECORDS`` records on, when the first record is under 64 bytes (a one-byte
length, which the lean loop does not take) or there are ``LEAN_MAX_RECORDS`` or more, only
the length varints are walked by a loop and every other field is read for all records at
once with numpy (2-3x faster than the plain loop on small records; about as fast as the
lean loop from ~1000 records; see ``_walk_vectorised``), falling back to the plain loop,
which names the error, when anything is wrong.

Compressed batches are decompressed as a stream (``_CHUNK`` bytes of output at a time;
zlib ``max_length`` with the input fed in ``_INPUT`` pieces, ``LZ4FrameDecompressor``
``max_length`` likewise, a zstd ``stream_reader``, xerial snappy block by block, each
block's size checked against the budget before it is decoded) and walked as the chunks
come, each chunk in place: a record cut by a chunk boundary is joined from its two parts
alone, and a record longer than ``MAX_BUFFERED_RECORD`` is walked field by field from the
stream with its key, value and header bytes skipped, never held. The whole output is
counted against ``max_decompressed`` (the caller's budget): past it, ``RecordTooLargeError``
as soon as the output passes it. Memory stays at about one chunk plus one buffered record
plus the decompressor's own state (zstd's window: at most 128 MiB, the library's and
zstd-jni's default limit, usually 1-8 MiB, reserved from the process-wide budget of
``codecs.DECOMPRESSION_IN_FLIGHT`` and not kept by the connection's thread afterwards; a
snappy block: at most 22x its input; lz4: two blocks of the frame's block maximum, up to
8 MiB; snappy blocks and lz4 buffers are reserved from that budget too),
whatever the ratio. Stricter than ``codecs.decompress`` on purpose: trailing bytes after
the last gzip member and a second lz4 frame are refused (Java's lz4 stream stops at the
first frame, and Python's gzip refuses trailing garbage, so some consumer would not read
those bytes the way the broker did).

Errors (``broker.record.errors``): ``CorruptRecordError`` (or ``DecompressionError``) for
anything that does not parse, ``InvalidRecordError`` with ``batch_index`` for an offset
delta out of order, ``RecordTooLargeError`` over budget.

Thread-safety: pure functions; decompressor objects are per call (zstd's context is lent
by ``codecs``' pool for the call); the lean loop's lookup tables are built once, on first
use, and only read afterwards.
"""

from __future__ import annotations

import codecs as pycodecs
import struct
import zlib
from collections.abc import Iterator

import cramjam
import lz4.frame

from . import codecs
from .errors import (
    CorruptRecordError,
    DecodeError,
    DecompressionError,
    InvalidRecordError,
    RecordTooLargeError,
)

__all__ = ["LEAN_MAX_RECORDS", "MAX_BUFFERED_RECORD", "VECTOR_MIN_RECORDS", "check_records", "record_details"]

# Decompressed output pulled per step, and the largest record buffered whole; a larger
# record is walked field by field from the stream. Input is fed to zlib in _INPUT pieces
# so that its unconsumed tail (a copy) stays small.
_CHUNK = 256 * 1024
MAX_BUFFERED_RECORD = 1024 * 1024
_INPUT = 64 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
_BIG = 1 << 70  # sentinels of the timestamp-delta min/max


def _uvarint(buf, pos: int, max_bytes: int) -> tuple[int, int]:
    """A multi-byte unsigned varint at ``pos`` (IndexError when the bytes run out):
    (value, position after it). At most ``max_bytes`` bytes (5: int32, 10: int64)."""
    z = 0
    shift = 0
    for i in range(pos, pos + max_bytes):
        b = buf[i]
        z |= (b & 0x7F) << shift
        if b < 0x80:
            if z > (0xFFFFFFFF if max_bytes == 5 else 0xFFFFFFFFFFFFFFFF):
                raise CorruptRecordError(f"varint at {pos} overflows its type")
            return z, i + 1
        shift += 7
    raise CorruptRecordError(f"varint at {pos} is longer than {max_bytes} bytes")


def _headers(buf, p: int, rec_end: int, n: int, index: int) -> int:
    """Walk ``n`` headers from ``p``; returns the position after them."""
    for _ in range(n):
        z = buf[p]
        if z < 0x80:
            p += 1
        else:
            z, p = _uvarint(buf, p, 5)
        if z & 1:
            raise CorruptRecordError(f"record {index}: negative header key length")
        k = z >> 1
        if p + k > rec_end:
            raise CorruptRecordError(f"record {index}: header key runs past the record")
        key = bytes(buf[p:p + k])
        if not key.isascii():
            try:
                bytes(key).decode("utf-8")
            except UnicodeDecodeError:
                raise CorruptRecordError(f"record {index}: header key is not UTF-8") from None
        p += k
        z = buf[p]
        if z < 0x80:
            p += 1
        else:
            z, p = _uvarint(buf, p, 5)
        if z & 1:
            if z != 1:
                raise CorruptRecordError(f"record {index}: header value length below -1")
        else:
            p += z >> 1
        if p > rec_end:
            raise CorruptRecordError(f"record {index}: header runs past the record")
    return p


def _walk(buf, pos: int, end: int, index: int, count: int, lo: int, hi: int, hi_index: int,
          nulls: int, sink: list | None) -> tuple[int, int, int, int, int, int]:
    """Walk the whole records of ``buf[pos:end]``, from record ``index`` until ``count`` or
    until the next record is not wholly inside ``end`` (the caller decides whether that is
    a truncation or a chunk boundary). Returns (pos, index, min timestamp delta, max
    timestamp delta, index of the first max, null keys). Raises on any malformed record;
    reads past a record's end inside ``buf`` are harmless and caught by the final length
    check, reads past ``buf`` raise IndexError (the caller's CorruptRecordError).

    The hot loop of every produce: varints of one and two bytes are decoded inline (a
    zigzag value z stays undecoded where a test on it is enough: z & 1 is the sign, z >> 1
    the magnitude of a non-negative value)."""
    uv = _uvarint
    while index < count:
        if pos >= end:
            break
        z = buf[pos]
        if z < 0x80:
            start = pos + 1
        elif end - pos > 1 and buf[pos + 1] < 0x80:
            z = (z & 0x7F) | buf[pos + 1] << 7
            start = pos + 2
        else:
            if end - pos < 5 and all(buf[i] >= 0x80 for i in range(pos, end)):
                break  # the length varint itself continues in the next chunk
            z, start = uv(buf, pos, 5)
        if z & 1 or z < 12:
            raise CorruptRecordError(f"record {index}: invalid record length {(z >> 1) ^ -(z & 1)}")
        rec_end = start + (z >> 1)
        if rec_end > end:
            break
        if buf[start] >= 0x80:
            raise CorruptRecordError(f"record {index}: attributes byte {buf[start]:#x} is not valid")
        z = buf[start + 1]  # timestamp delta
        if z < 0x80:
            p = start + 2
        elif buf[start + 2] < 0x80:
            z = (z & 0x7F) | buf[start + 2] << 7
            p = start + 3
        else:
            z, p = uv(buf, start + 1, 10)
        tsd = (z >> 1) ^ -(z & 1)
        z = buf[p]  # offset delta: zigzag of index is 2 * index
        if z < 0x80:
            p += 1
        elif buf[p + 1] < 0x80:
            z = (z & 0x7F) | buf[p + 1] << 7
            p += 2
        else:
            z, p = uv(buf, p, 5)
        if z != index + index:
            exc = InvalidRecordError(
                f"record {index} has offset delta {(z >> 1) ^ -(z & 1)}, expected {index}")
            exc.batch_index = index
            raise exc
        z = buf[p]  # key length
        if z == 1:
            p += 1
            nulls += 1
            null_key = True
        else:
            if z < 0x80:
                p += 1
            elif buf[p + 1] < 0x80:
                z = (z & 0x7F) | buf[p + 1] << 7
                p += 2
            else:
                z, p = uv(buf, p, 5)
            if z & 1:
                raise CorruptRecordError(f"record {index}: key length below -1")
            p += z >> 1
            null_key = False
        z = buf[p]  # value length
        if z < 0x80:
            p += 1
        elif buf[p + 1] < 0x80:
            z = (z & 0x7F) | buf[p + 1] << 7
            p += 2
        else:
            z, p = uv(buf, p, 5)
        if z & 1:
            if z != 1:
                raise CorruptRecordError(f"record {index}: value length below -1")
        else:
            p += z >> 1
        z = buf[p]  # headers count
        if z:
            if z < 0x80:
                p += 1
            else:
                z, p = uv(buf, p, 5)
            if z & 1 or z >> 1 > rec_end - p:
                raise CorruptRecordError(f"record {index}: invalid header count {(z >> 1) ^ -(z & 1)}")
            p = _headers(buf, p, rec_end, z >> 1, index)
        else:
            p += 1
        if p != rec_end:
            raise CorruptRecordError(
                f"record {index}: declares {rec_end - start} bytes but its fields take {p - start}")
        if tsd > hi:
            hi, hi_index = tsd, index
        if tsd < lo:
            lo = tsd
        if sink is not None:
            sink.append((tsd, null_key))
        index += 1
        pos = rec_end
    return pos, index, lo, hi, hi_index, nulls


# --- the common record, walked with fewer Python operations ------------------------------
#
# Producers write almost every record in one shape: a record of 64 bytes to 8 KiB (a
# two-byte length varint), attributes 0, a timestamp delta in [0, 63] ms (one byte), an
# offset delta below 8192 (one byte below 64, two from 64 on), a key of fewer than 64 bytes
# or none, a value length of one or two bytes, no headers. ``_walk_plain`` walks the records of that shape with one
# unpack of the length varint and the next four bytes, a mask compare on those four
# (attributes == 0, timestamp delta byte < 0x80 and even, i.e. a non-negative delta,
# offset delta byte == 2 * index, key length byte < 0x80) and three table lookups: the
# record length of every valid two-byte length varint, the bytes a key length byte and a
# value length varint (with the key or value) take, invalid entries making the record
# fail the final check. From the first record of another shape, or at fault, ``_walk``
# takes over with the summary so far, and names the error. The uncompressed path and the
# decompressed stream (chunk by chunk) both take it. Every record the lean loop
# accepts is one ``_walk`` accepts with the same end, timestamp delta and null key, so
# ``check_records`` returns and raises exactly what ``_walk`` alone would
# (tests/test_record_validation_fast.py checks it on valid, mutated and truncated batches).

_HEAD = struct.Struct(">HI").unpack_from  # length varint (2 bytes), then 4 bytes of fields
_HEAD_LONG = struct.Struct(">HIB").unpack_from  # the same and the key length, for a 2-byte offset delta
_U16 = struct.Struct(">H").unpack_from
# attributes; the timestamp delta's continuation and sign bits; the offset delta (one byte,
# or the two of a two-byte one); the key length's continuation bit (one-byte offset delta)
_COMMON_MASK = 0xFF81FF80
_COMMON_MASK_LONG = 0xFF81FFFF
_ONE_BYTE_OFFSETS = 64  # offset deltas from 64 on take two bytes
_COMMON_MAX = 8192  # and from 8192 on three: the plain walk's
_EXPECTED = [i << 9 for i in range(_ONE_BYTE_OFFSETS)]  # the masked word of record i
_FAR = 1 << 40  # an invalid entry of the record or key tables: past any buffer or section
_BAD = -(1 << 40)  # an invalid value length: the record then fails the final check
_COMMON_TABLES: tuple[list[int], list[int], list[int], list[int], list[int]] | None = None


def _common_tables() -> tuple[list[int], list[int], list[int], list[int], list[int]]:
    """The lean loop's tables, built on first use (~1.9 MB, ~20 ms; two threads building
    them at once build the same lists, and either set wins): record[w]: 2 + the record
    length for a big-endian 16-bit word w that is a valid two-byte length varint (even,
    >= 12), else _FAR; key[z]: 6 + the key's bytes for a one-byte key length z (-1 or
    >= 0), else _FAR (key_long: 7 + the same, after a two-byte offset delta); value[w]:
    the bytes of the value length varint starting w (one or two bytes, -1 or >= 0) plus the
    value's, else _BAD; expected_long[i]: the masked word of record i >= 64."""
    global _COMMON_TABLES
    if _COMMON_TABLES is None:
        record = [_FAR] * 65536
        value = [_BAD] * 65536
        for b0 in range(0x80):
            if not b0 & 1 or b0 == 1:
                value[b0 << 8:(b0 + 1) << 8] = [1 + (b0 >> 1)] * 256  # the next byte is the value's
        for b0 in range(0x80, 0x100):
            for b1 in range(0x80):
                z = (b0 & 0x7F) | b1 << 7
                if not z & 1:
                    value[b0 << 8 | b1] = 2 + (z >> 1)
                    if z >= 12:
                        record[b0 << 8 | b1] = 2 + (z >> 1)
        key = [6 + (z >> 1) if not z & 1 or z == 1 else _FAR for z in range(0x80)]
        key_long = [k + 1 for k in key]
        expected_long = [0] * _ONE_BYTE_OFFSETS + [
            ((2 * i) & 0x7F | 0x80) << 8 | (2 * i) >> 7 for i in range(_ONE_BYTE_OFFSETS, _COMMON_MAX)]
        _COMMON_TABLES = record, key, key_long, value, expected_long
    return _COMMON_TABLES


def _walk_plain(buf, pos: int, end: int, index: int, count: int, lo: int, hi: int, hi_index: int,
                nulls: int) -> tuple[int, int, int, int, int, int]:
    """``_walk`` with no sink, the same arguments and results (and errors), the records of
    the common shape walked by the lean loop; from the first record of another shape (or
    at fault, or cut by ``end``) on, ``_walk`` walks the rest."""
    stop = count if count < _COMMON_MAX else _COMMON_MAX
    if index >= stop:
        return _walk(buf, pos, end, index, count, lo, hi, hi_index, nulls, None)
    record, key, key_long, value, expected_long = _COMMON_TABLES or _common_tables()
    first = index
    deltas = [0] * stop
    n_nulls = 0
    u16 = _U16
    i = index
    index = stop  # the first record declined, if any
    try:
        head, mask, expected = _HEAD, _COMMON_MASK, _EXPECTED
        for i in range(first, stop if stop < _ONE_BYTE_OFFSETS else _ONE_BYTE_OFFSETS):
            z, w = head(buf, pos)
            rec_end = pos + record[z]
            if rec_end > end or w & mask != expected[i]:
                index = i
                break
            p = pos + key[w & 0x7F]  # a null key (-1) adds nothing
            p += value[u16(buf, p)[0]]
            if p + 1 != rec_end or buf[p]:  # the header count, 0, ends the record
                index = i
                break
            deltas[i] = w >> 17
            n_nulls += w & 1  # the key length's zigzag bit: odd only for -1 (null) here
            pos = rec_end
        else:
            head, mask = _HEAD_LONG, _COMMON_MASK_LONG
            for i in range(first if first > _ONE_BYTE_OFFSETS else _ONE_BYTE_OFFSETS, stop):
                z, w, k = head(buf, pos)
                rec_end = pos + record[z]
                if rec_end > end or w & mask != expected_long[i]:
                    index = i
                    break
                p = pos + key_long[k]  # k >= 0x80: IndexError, declined
                p += value[u16(buf, p)[0]]
                if p + 1 != rec_end or buf[p]:
                    index = i
                    break
                deltas[i] = w >> 17
                n_nulls += k & 1
                pos = rec_end
    except (IndexError, struct.error):
        index = i  # a record running past the buffer: declined (``_walk`` reports it)
    if index > first:
        run = deltas[first:index] if first or index < stop else deltas
        top = max(run)
        if top > hi:
            hi, hi_index = top, first + run.index(top)
        least = min(run)
        if least < lo:
            lo = least
        nulls += n_nulls
        if index == count:
            return pos, index, lo, hi, hi_index, nulls
    return _walk(buf, pos, end, index, count, lo, hi, hi_index, nulls, None)


def _finish(index: int, count: int, lo: int, hi: int, hi_index: int, nulls: int) -> tuple[int, int, int, int]:
    if index != count:
        raise CorruptRecordError(f"the batch declares {count} records but holds {index}")
    return lo, hi, hi_index, nulls


def check_records(buf, start: int, end: int, codec: int, count: int, max_decompressed: int,
                  sink: list | None = None) -> tuple[int, int, int, int]:
    """Validate the ``count`` records of the records section ``buf[start:end]`` of a v2
    batch compressed with ``codec`` (0-4); read-only. Returns (smallest timestamp delta,
    largest timestamp delta, index of the first record with the largest, number of null
    keys); with ``count == 0`` the deltas are the sentinels +-2**70. ``sink``, when given,
    receives (timestamp delta, key is null) per record (the error path). Raises
    ``DecodeError`` subclasses as the module docstring says."""
    if count < 0:
        raise CorruptRecordError(f"negative records count {count}")
    if codec == 0:
        if count * 7 > end - start:
            raise CorruptRecordError(f"{count} records cannot fit in {end - start} bytes")
        if count >= VECTOR_MIN_RECORDS and sink is None and (count >= LEAN_MAX_RECORDS or buf[start] < 0x80):
            summary = _walk_vectorised(buf, start, end, count)
            if summary is not None:
                return summary
            # a failure: the plain walk below finds the first record at fault and its error
        try:
            if sink is None:
                pos, index, lo, hi, hi_index, nulls = _walk_plain(buf, start, end, 0, count, _BIG, -_BIG, -1, 0)
            else:
                pos, index, lo, hi, hi_index, nulls = _walk(buf, start, end, 0, count, _BIG, -_BIG, -1, 0, sink)
        except IndexError:
            raise CorruptRecordError("a record runs past the end of the batch") from None
        if index == count and pos != end:
            raise CorruptRecordError(f"{end - pos} bytes after the last of {count} records")
        if index < count:
            if pos < end:
                raise CorruptRecordError(f"record {index} runs past the end of the batch")
            _finish(index, count, lo, hi, hi_index, nulls)  # raises
        return lo, hi, hi_index, nulls
    chunks = _decompressed_chunks(codec, memoryview(buf)[start:end], max_decompressed)
    try:
        return _walk_stream(chunks, count, sink)
    finally:
        chunks.close()


def record_details(buf, start: int, end: int, codec: int, count: int,
                   max_decompressed: int) -> list[tuple[int, bool]]:
    """(timestamp delta, key is null) of every record, for the error path."""
    sink: list[tuple[int, bool]] = []
    check_records(buf, start, end, codec, count, max_decompressed, sink)
    return sink


# --- uncompressed batches of many records: numpy ------------------------------------------
#
# The only sequential dependency is each record's length varint: a plain loop finds where
# every record starts and ends (about a third of the work of the full walk). Every other
# field is then read for all the records at once, one varint per record per numpy pass:
# 1- and 2-byte varints through a 64-Ki-entry table (value and size of every 2-byte
# pattern), longer ones a pass per byte. Positions only move forward, so one check that
# every record's fields end exactly at its end proves every read was inside its record
# (reads use mode="clip": never outside the batch). Headers, rare, are walked in Python,
# only for the records that have some. Any failure returns None and the plain walk then
# reports the first record at fault, so errors are the plain walk's.

VECTOR_MIN_RECORDS = 128  # below this the numpy calls cost more than they save (measured)
# below this the lean loop is faster than numpy on records of 64 bytes or more (measured:
# 42 vs 80 us at 130 records of 100 B, 143 vs 165 at 500 of 60 B, a tie at 1000)
LEAN_MAX_RECORDS = 1000
_np = None
_TABLES = None


def _numpy():
    global _np, _TABLES
    if _np is None:
        import numpy

        w = numpy.arange(1 << 16, dtype=numpy.int64)
        b0, b1 = w & 0xFF, w >> 8
        z = numpy.where(b0 < 0x80, b0, (b0 & 0x7F) | (b1 << 7))
        size = numpy.where(b0 < 0x80, 1, numpy.where(b1 < 0x80, 2, 0))
        _TABLES = ((z >> 1) ^ -(z & 1), size)
        _np = numpy
    return _np


def _np_varints(np, data, pos, max_bytes: int):
    """Zigzag varints at every ``pos``: (int64 values, positions after them), or None when
    one is longer than ``max_bytes`` or overflows its type."""
    value2, size2 = _TABLES
    w = data.take(pos + 1, mode="clip").astype(np.intp)
    w <<= 8
    w |= data.take(pos, mode="clip")
    size = size2.take(w)
    if size.all():
        return value2.take(w), pos + size
    z = np.zeros(pos.size, np.uint64)
    n = np.zeros(pos.size, np.int64)
    active = np.ones(pos.size, np.bool_)
    for j in range(max_bytes):
        b = data.take(pos + j, mode="clip")
        z |= np.where(active, (b & 0x7F).astype(np.uint64) << np.uint64(7 * j), np.uint64(0))
        n += active
        active &= b >= 0x80
        if not active.any():
            break
    else:
        return None
    if max_bytes == 5 and (z > 0xFFFFFFFF).any():
        return None
    if max_bytes == 10 and ((n == 10) & (data.take(pos + 9, mode="clip") > 1)).any():
        return None
    one = np.uint64(1)
    return (z >> one).view(np.int64) ^ -(z & one).view(np.int64), pos + n


def _walk_vectorised(buf, start: int, end: int, count: int) -> tuple[int, int, int, int] | None:
    uv = _uvarint
    starts = [0] * count
    ends = [0] * count
    pos = start
    try:
        for i in range(count):
            z = buf[pos]
            if z < 0x80:
                p = pos + 1
            elif buf[pos + 1] < 0x80:
                z = (z & 0x7F) | buf[pos + 1] << 7
                p = pos + 2
            else:
                z, p = uv(buf, pos, 5)
            if z & 1 or z < 12:
                return None
            starts[i] = p
            pos = ends[i] = p + (z >> 1)
    except (IndexError, DecodeError):
        return None
    if pos != end:
        return None
    np = _numpy()
    data = np.frombuffer(buf, np.uint8, count=end - start, offset=start)
    first = np.array(starts, np.int64)
    first -= start
    last = np.array(ends, np.int64)
    last -= start
    if (data.take(first) >= 0x80).any():  # attributes
        return None
    r = _np_varints(np, data, first + 1, 10)
    if r is None:
        return None
    tsd, p = r
    r = _np_varints(np, data, p, 5)
    if r is None or (r[0] != np.arange(count)).any():
        return None
    r = _np_varints(np, data, r[1], 5)
    if r is None:
        return None
    key_len, p = r
    if (key_len < -1).any():
        return None
    nulls = int((key_len == -1).sum())
    p = p + np.maximum(key_len, 0)
    r = _np_varints(np, data, p, 5)
    if r is None:
        return None
    value_len, p = r
    if (value_len < -1).any():
        return None
    p = p + np.maximum(value_len, 0)
    r = _np_varints(np, data, p, 5)
    if r is None:
        return None
    n_headers, p = r
    if n_headers.any():
        if (n_headers < 0).any() or (n_headers > last - p).any():
            return None
        try:
            for i in np.flatnonzero(n_headers).tolist():
                p[i] = _headers(buf, start + int(p[i]), start + int(last[i]), int(n_headers[i]), i) - start
        except (IndexError, DecodeError):
            return None
    if (p != last).any():
        return None
    hi_index = int(tsd.argmax())
    return int(tsd.min()), int(tsd[hi_index]), hi_index, nulls


# --- compressed: a stream of decompressed chunks, walked as it comes ----------------------


class _Stream:
    """Pull-based reader over decompressed chunks, for records too long to buffer."""

    __slots__ = ("buf", "chunks", "pos")

    def __init__(self, buf: bytes, pos: int, chunks: Iterator[bytes]) -> None:
        self.buf, self.pos, self.chunks = buf, pos, chunks

    def _more(self) -> bool:
        chunk = next(self.chunks, None)
        if chunk is None:
            return False
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def byte(self) -> int:
        while self.pos >= len(self.buf):
            if not self._more():
                raise CorruptRecordError("premature end of the decompressed records")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self, max_bytes: int) -> tuple[int, int]:
        """(zigzag-decoded value, bytes taken)."""
        z = shift = 0
        for i in range(max_bytes):
            b = self.byte()
            z |= (b & 0x7F) << shift
            if b < 0x80:
                if z >> (7 * max_bytes - 1) and z > (0xFFFFFFFF if max_bytes == 5 else 0xFFFFFFFFFFFFFFFF):
                    raise CorruptRecordError("varint overflows its type")
                return (z >> 1) ^ -(z & 1), i + 1
            shift += 7
        raise CorruptRecordError(f"varint longer than {max_bytes} bytes")

    def skip(self, n: int, utf8: bool = False) -> None:
        """Consume ``n`` bytes without keeping them (checking they are UTF-8 if asked)."""
        decoder = _incremental_utf8() if utf8 else None
        while n > 0:
            if self.pos >= len(self.buf) and not self._more():
                raise CorruptRecordError("premature end of the decompressed records")
            take = min(n, len(self.buf) - self.pos)
            if decoder is not None:
                try:
                    decoder.decode(self.buf[self.pos:self.pos + take], take == n)
                except UnicodeDecodeError:
                    raise CorruptRecordError("header key is not UTF-8") from None
            self.pos += take
            n -= take


def _incremental_utf8():
    return pycodecs.getincrementaldecoder("utf-8")()


def _big_record(s: _Stream, index: int) -> tuple[int, bool]:
    """Walk one record from the stream, skipping its key, value and header bytes."""
    length, _ = s.varint(5)
    taken = 0

    def vint(max_bytes: int) -> int:
        nonlocal taken
        value, n = s.varint(max_bytes)
        taken += n
        return value

    if s.byte() >= 0x80:
        raise CorruptRecordError(f"record {index}: attributes byte is not valid")
    taken += 1
    tsd = vint(10)
    delta = vint(5)
    if delta != index:
        exc = InvalidRecordError(f"record {index} has offset delta {delta}, expected {index}")
        exc.batch_index = index
        raise exc
    null_key = False
    for field in ("key", "value"):
        n = vint(5)
        if n < -1:
            raise CorruptRecordError(f"record {index}: {field} length below -1")
        if n == -1:
            null_key = null_key or field == "key"
        else:
            if taken + n > length:
                raise CorruptRecordError(f"record {index}: {field} runs past the record")
            s.skip(n)
            taken += n
    headers = vint(5)
    if headers < 0 or headers > length - taken:
        raise CorruptRecordError(f"record {index}: invalid header count {headers}")
    for _ in range(headers):
        n = vint(5)
        if n < 0 or taken + n > length:
            raise CorruptRecordError(f"record {index}: invalid header key length {n}")
        s.skip(n, utf8=True)
        taken += n
        n = vint(5)
        if n < -1 or taken + n > length:
            raise CorruptRecordError(f"record {index}: invalid header value length {n}")
        if n > 0:
            s.skip(n)
            taken += n
    if taken != length:
        raise CorruptRecordError(f"record {index}: declares {length} bytes but its fields take {taken}")
    return tsd, null_key


def _walk_stream(chunks: Iterator[bytes], count: int, sink: list | None) -> tuple[int, int, int, int]:
    """Walk the records of a stream of decompressed chunks. Each chunk is walked in place;
    a record cut by a chunk boundary is joined from its two parts alone (its length is
    known from its varint) rather than the chunks being joined, so output is copied only
    around boundaries; a record longer than MAX_BUFFERED_RECORD is walked from the stream
    with its bytes skipped (``_big_record``)."""
    buf, pos = b"", 0
    index, lo, hi, hi_index, nulls = 0, _BIG, -_BIG, -1, 0
    while index < count:
        total = -1  # bytes of the record cut at pos (length varint included), when known
        if pos < len(buf):
            try:
                z, start = _uvarint(buf, pos, 5) if buf[pos] >= 0x80 else (buf[pos], pos + 1)
                if not z & 1:
                    total = start - pos + (z >> 1)
            except IndexError:
                pass  # the length varint itself is cut
            if total > MAX_BUFFERED_RECORD:
                s = _Stream(buf, pos, chunks)
                tsd, null_key = _big_record(s, index)
                buf, pos = s.buf, s.pos
                if tsd > hi:
                    hi, hi_index = tsd, index
                lo = min(lo, tsd)
                nulls += null_key
                if sink is not None:
                    sink.append((tsd, null_key))
                index += 1
                continue
        chunk = next(chunks, None)
        if chunk is None:
            if pos < len(buf):
                raise CorruptRecordError(f"record {index} is cut by the end of the decompressed records")
            break
        try:
            if pos >= len(buf):
                buf, pos = chunk, 0
            else:
                need = total - (len(buf) - pos)
                if 0 < need <= len(chunk):  # the cut record, joined alone, then the chunk
                    one = buf[pos:] + chunk[:need]
                    _, index, lo, hi, hi_index, nulls = _walk(one, 0, len(one), index, index + 1, lo, hi,
                                                              hi_index, nulls, sink)
                    buf, pos = chunk, need
                else:  # a cut length varint, or a record longer than the chunk
                    buf, pos = buf[pos:] + chunk, 0
            if sink is None:
                pos, index, lo, hi, hi_index, nulls = _walk_plain(buf, pos, len(buf), index, count, lo, hi,
                                                                  hi_index, nulls)
            else:
                pos, index, lo, hi, hi_index, nulls = _walk(buf, pos, len(buf), index, count, lo, hi,
                                                            hi_index, nulls, sink)
        except IndexError:
            raise CorruptRecordError(f"record {index} runs past its declared length") from None
    if index == count and (pos < len(buf) or any(chunks)):
        raise CorruptRecordError(f"bytes after the last of {count} records")
    return _finish(index, count, lo, hi, hi_index, nulls)


def _decompressed_chunks(codec: int, view: memoryview, budget: int) -> Iterator[bytes]:
    """The decompressed output in chunks of at most ``_CHUNK`` bytes, with the budget and
    the completeness of the stream checked; library failures become DecodeError."""
    gen = {1: _gzip_chunks, 2: _snappy_chunks, 3: _lz4_chunks, 4: _zstd_chunks}.get(codec)
    if gen is None:
        raise codecs.UnsupportedCodecError(f"unknown compression codec id {codec}")
    name = codecs.CompressionType(codec).name.lower()
    total = 0
    try:
        for chunk in gen(view, budget):
            total += len(chunk)
            if total > budget:
                raise RecordTooLargeError(f"{name}: decompressed records exceed the budget of {budget} bytes")
            yield chunk
    except DecodeError:
        raise
    except codecs._LIBRARY_ERRORS as exc:  # the codecs' list of "bad payload" library errors
        raise DecompressionError(f"{name}: {str(exc)[:200]}") from exc


def _gzip_chunks(view: memoryview, budget: int) -> Iterator[bytes]:
    at, end = 0, len(view)
    while True:  # one pass per member
        d = zlib.decompressobj(31)
        data: bytes | memoryview = b""
        while not d.eof:
            if not data:
                if at >= end:
                    raise DecompressionError("gzip: truncated stream")
                data = view[at:at + _INPUT]
                at += len(data)
            out = d.decompress(data, _CHUNK)
            data = d.unconsumed_tail
            if out:
                yield out
        rest = bytes(d.unused_data) + bytes(view[at:])
        if not rest:
            return
        if not rest.startswith(_GZIP_MAGIC):
            raise DecompressionError(f"gzip: {len(rest)} bytes after the last member")
        view, at, end = memoryview(rest), 0, len(rest)


def _snappy_chunks(view: memoryview, budget: int) -> Iterator[bytes]:
    # Every block's length preamble is checked against the budget before any decoding
    # (snappy has no streaming decoder: a block is decoded whole, at most ~32x its input).
    if len(view) >= codecs._XERIAL_HEADER.size and view[:len(codecs._XERIAL_MAGIC)] == codecs._XERIAL_MAGIC:
        blocks = codecs._xerial_blocks(view, budget)
    else:
        blocks = [(view, codecs._snappy_uncompressed_length(view))]
        if blocks[0][1] > budget:
            raise RecordTooLargeError(f"snappy: decompressed records exceed the budget of {budget} bytes")
        codecs._snappy_check_ratio(*blocks[0])
    for block, length in blocks:
        # the block is decoded whole (up to ~21x its input): reserved from the process-wide
        # budget of codecs (as zstd windows are), and handed on without a copy
        codecs._zstd_contexts.reserve(length)
        try:
            out = bytearray(length)
            if cramjam.snappy.decompress_raw_into(block, out) != length:
                raise DecompressionError("snappy: block shorter than its length preamble")
            yield out
            del out
        finally:
            codecs._zstd_contexts.release(length)


_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_MAX = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}  # BD byte, bits 4-6


def _lz4_buffers(view: memoryview) -> int:
    """What an LZ4 frame decompressor holds for this frame: two blocks of the frame
    header's block maximum (a block and, for linked blocks, the previous one's window)."""
    block = 4 * 1024 * 1024
    if len(view) >= 6 and int.from_bytes(view[:4], "little") == _LZ4_MAGIC:
        block = _LZ4_BLOCK_MAX.get(view[5] >> 4 & 7, block)
    return 2 * block + 64 * 1024


def _lz4_chunks(view: memoryview, budget: int) -> Iterator[bytes]:
    # Input in _INPUT pieces: the decompressor keeps what it has not consumed, and a
    # piece at a time keeps that small (and is as fast as one call for the whole frame).
    # Its block buffers (up to 8 MiB for a frame of a few bytes) are reserved from the
    # process-wide budget of codecs, as zstd windows are.
    reserved = _lz4_buffers(view)
    codecs._zstd_contexts.reserve(reserved)
    try:
        d = lz4.frame.LZ4FrameDecompressor()
        at, end = 0, len(view)
        while not d.eof:
            if d.needs_input:
                if at >= end:
                    raise DecompressionError("lz4: truncated frame")
                data: bytes | memoryview = view[at:at + _INPUT]
                at += len(data)
            else:
                data = b""
            out = d.decompress(data, max_length=_CHUNK)
            if out:
                yield out
        if d.unused_data or at < end:
            raise DecompressionError(f"lz4: {len(d.unused_data) + end - at} bytes after the frame")
    finally:
        d = None
        codecs._zstd_contexts.release(reserved)


def _zstd_chunks(view: memoryview, budget: int) -> Iterator[bytes]:
    # every frame complete (the streaming reader stops silently at a cut), and the window
    # the context is lent for (codecs' pool and in-flight budget: ``_ZstdContexts``)
    _, window = codecs._zstd_scan(view)
    dctx = codecs._zstd_contexts.lend(window)
    reader = None
    try:
        reader = dctx.stream_reader(view, read_size=_INPUT, read_across_frames=True)
        while True:
            out = reader.read(_CHUNK)
            if not out:
                return
            yield out
    finally:  # also when the walk stops early (check_records closes the generator)
        reader = None
        codecs._zstd_contexts.give_back(window, dctx)
