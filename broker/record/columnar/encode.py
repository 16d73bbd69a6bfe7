"""Encoding Arrow columns into RecordBatch v2: the column-wise writer of the Spark sink.

Owns: ``encode_from_arrow`` (rows to batches, split like Kafka's ``batch.size``) and
``stamp_producer_fields`` (the producer sets sequences when it drains a batch).

How it works: every record's varint fields (length, timestampDelta, offsetDelta, key and
value lengths, headers count) are computed and written with numpy into small per-record
"pieces"; ``pyarrow.compute.binary_join_element_wise`` then joins pieces, keys, values
and encoded headers row by row in C++, so that the records of all batches come out as one
contiguous buffer, and each batch is that buffer's slice framed by ``batch.build_batch``
(compression, header, CRC). Batch boundaries come from an upper bound of every record's
size (its deltas to the batch's first record are bounded by the batch's row count and by
the spread of the timestamps), so that each batch's header plus uncompressed records stay
within ``max_batch_bytes``, with at least one record per batch.

Invariants: rows keep their order; batch i holds rows [row_start, row_end) with offset
deltas 0..n-1, base timestamp = its first row's, max timestamp = its largest. Inputs that
cannot be encoded raise ``EncodeError``.

Thread-safety: pure functions, except ``stamp_producer_fields``, which mutates the
caller's buffer.
"""

from __future__ import annotations

import struct
import time
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import codecs
from ..batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CRC_OFFSET,
    CREATE_TIME,
    CURRENT_MAGIC,
    HEADER,
    LOG_APPEND_TIME,
    LOG_ENTRY_PREFIX,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    build_batch,
    crc32c,
)
from ..errors import EncodeError, TruncatedError, UnsupportedMagicError
from ..limits import INT32_MAX, INT64_MAX
from ._vec import put_varints, varint_sizes, zigzag
from .decode import MIN_RECORD_SIZE

DEFAULT_MAX_BATCH_BYTES = 16384  # Kafka's batch.size default

# The producer-owned fields of the v2 header (batch.py's layout table):
#   43  producerId int64 | 51  producerEpoch int16 | 53  baseSequence int32
_PRODUCER = struct.Struct(">qhi")
_PRODUCER_OFFSET = 43
_ATTRIBUTES = struct.Struct(">h")
_UINT32 = struct.Struct(">I")
# the separator of the element-wise joins, built from buffers: pa.scalar (like pa.array of
# a Python list) imports pandas to check its argument, ~0.3 s at the import of every
# process that produces (each Spark Python worker of a write), for a constant
_EMPTY = pa.Array.from_buffers(pa.large_binary(), 1, [None, pa.py_buffer(np.zeros(2, np.int64)), pa.py_buffer(b"")])[0]


class EncodedBatch(NamedTuple):
    """One v2 batch holding rows [row_start, row_end) of the encoded columns (``data``: a
    bytearray when encoded with ``writable=True``)."""

    row_start: int
    row_end: int
    data: bytes | bytearray

    @property
    def record_count(self) -> int:
        return self.row_end - self.row_start


def _as_array(col, what: str) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    elif not isinstance(col, pa.Array):
        try:
            col = pa.array(col)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise EncodeError(f"{what}: cannot convert to Arrow: {exc}") from None
    return col


def _binary_column(col, n: int, what: str) -> tuple[pa.Array, np.ndarray]:
    """(large_binary array, lengths with -1 for nulls) of a binary-like column."""
    col = _as_array(col, what)
    if len(col) != n:
        raise EncodeError(f"{what} has {len(col)} rows, values have {n}")
    t = col.type
    if pa.types.is_null(t):
        return pa.nulls(n, pa.large_binary()), np.full(n, -1, np.int64)
    if not (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t) or pa.types.is_binary_view(t)
            or pa.types.is_string_view(t) or pa.types.is_fixed_size_binary(t)):
        raise EncodeError(f"{what} must be binary or string, not {t}")
    col = col.cast(pa.large_binary())
    lengths = pc.fill_null(pc.binary_length(col), -1).to_numpy(zero_copy_only=False)
    return col, lengths.astype(np.int64, copy=False)


def _timestamp_column(col, n: int, now_ms: int) -> np.ndarray:
    if col is None:
        return np.full(n, now_ms, np.int64)
    col = _as_array(col, "timestamps")
    if len(col) != n:
        raise EncodeError(f"timestamps has {len(col)} rows, values have {n}")
    try:
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ms", col.type.tz), safe=False)
        col = col.cast(pa.int64())
    except pa.ArrowException as exc:
        raise EncodeError(f"timestamps must be integers (ms) or timestamps: {exc}") from None
    return pc.fill_null(col, now_ms).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _pieces(n: int, fields: list[tuple[np.ndarray | None, np.ndarray | int]]) -> pa.Array:
    """A large_binary array whose element i is the concatenation of the varints
    (z[i], size[i]) of ``fields``; a None z is a zero byte (record attributes)."""
    sizes = np.zeros(n, np.int64)
    for _, size in fields:
        sizes += size
    offs = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=offs[1:])
    out = np.zeros(int(offs[-1]), np.uint8)
    cur = offs[:-1].copy()
    for z, size in fields:
        if z is not None:
            put_varints(out, cur, z, size if isinstance(size, np.ndarray)
                         else np.full(n, size, np.int64))
        cur += size
    return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offs),
                                                         pa.py_buffer(out)])


def _header_blobs(headers, n: int) -> tuple[np.ndarray, pa.Array | None]:
    """(headers count per record, large_binary array of each record's encoded headers)."""
    if headers is None:
        return np.zeros(n, np.int64), None
    h = _as_array(headers, "headers")
    if len(h) != n:
        raise EncodeError(f"headers has {len(h)} rows, values have {n}")
    if pa.types.is_null(h.type):
        return np.zeros(n, np.int64), None
    if not (pa.types.is_list(h.type) or pa.types.is_large_list(h.type)) or \
            not pa.types.is_struct(h.type.value_type):
        raise EncodeError(f"headers must be list<struct<key: string, value: binary>>, not {h.type}")
    offs = h.offsets.to_numpy().astype(np.int64)
    valid = np.ones(n, np.bool_) if h.null_count == 0 else \
        h.is_valid().to_numpy(zero_copy_only=False)
    lens = np.diff(offs) * valid
    child = h.values.slice(int(offs[0]), int(offs[-1] - offs[0]))
    if not valid.all():
        child = child.filter(pa.array(np.repeat(valid, np.diff(offs))))
    if child.null_count:
        raise EncodeError("a header is null")
    st = child.type
    try:
        hk = child.field("key")
        hv = child.field("value")
    except KeyError:
        raise EncodeError(f"header structs need fields key and value, not {st}") from None
    if not (pa.types.is_string(hk.type) or pa.types.is_large_string(hk.type)
            or pa.types.is_string_view(hk.type)):
        raise EncodeError(f"header keys must be strings, not {hk.type}")
    hk, hkl = _binary_column(hk, len(child), "header keys")
    if (hkl < 0).any():
        raise EncodeError("a header key is null")
    hv, hvl = _binary_column(hv, len(child), "header values")
    m = len(child)
    zk, zv = zigzag(hkl), zigzag(hvl)
    p1 = _pieces(m, [(zk, varint_sizes(zk))])
    p2 = _pieces(m, [(zv, varint_sizes(zv))])
    blobs = pc.binary_join_element_wise(p1, hk, p2, hv, _EMPTY, null_handling="replace",
                                        null_replacement=b"")
    blob_offs = np.frombuffer(blobs.buffers()[1], np.int64)[blobs.offset:blobs.offset + m + 1]
    rec = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=rec[1:])
    rec_offs = blob_offs[rec]
    arr = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(rec_offs),
                                                        blobs.buffers()[2]])
    return lens, arr


def _frame_writable(records: memoryview, *, count: int, base_offset: int, base_timestamp: int,
                    max_timestamp: int, compression: int, timestamp_type: int,
                    producer_id: int, producer_epoch: int, base_sequence: int,
                    is_transactional: bool, partition_leader_epoch: int,
                    compression_level: int | None) -> bytearray:
    """``batch.build_batch``'s bytes, framed in a new bytearray with one copy of the
    (compressed) records: the producer stamps sequences into it, so it needs a writable
    buffer, and ``bytearray(build_batch(...))`` would copy the records twice more."""
    payload = codecs.compress(compression, records, compression_level) if compression else records
    size = RECORD_BATCH_OVERHEAD + len(payload)
    out = bytearray(size)
    out[RECORD_BATCH_OVERHEAD:] = payload
    attributes = compression & COMPRESSION_CODEC_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    HEADER.pack_into(out, 0, base_offset, size - LOG_OVERHEAD, partition_leader_epoch,
                     CURRENT_MAGIC, 0, attributes, count - 1, base_timestamp, max_timestamp,
                     producer_id, producer_epoch, base_sequence, count)
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return out


def encode_from_arrow(values, keys=None, timestamps=None, headers=None, *,
                      compression: int = 0, compression_level: int | None = None,
                      max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, base_offset: int = 0,
                      producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                      base_sequence: int = NO_SEQUENCE, is_transactional: bool = False,
                      partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                      timestamp_type: int = CREATE_TIME,
                      now_ms: int | None = None, writable: bool = False) -> list[EncodedBatch]:
    """Encode rows given as Arrow columns into v2 batches, in row order.

    ``values`` and ``keys``: (Chunked)Arrays of binary/large_binary/string/large_string
    (nulls allowed; ``keys=None`` means null keys). ``timestamps``: int64 ms or Arrow
    timestamps (None or null: ``now_ms``, default the current time). ``headers``:
    list<struct<key: string, value: binary>> (null: no headers).

    Each batch holds at most ``max_batch_bytes`` (header + uncompressed records, like
    Kafka's ``batch.size``), at least one record. Batch i has base offset
    ``base_offset + row_start`` and, when ``base_sequence`` >= 0, base sequence
    ``base_sequence + row_start`` (mod 2**31); ``stamp_producer_fields`` rewrites them.
    All the batches are built at once: call it per chunk of rows to bound memory.
    ``writable=True``: each batch's ``data`` is a bytearray (the producer's path: same
    bytes, one copy of the records fewer than ``bytearray(data)``).
    """
    values = _as_array(values, "values")
    n = len(values)
    if n == 0:
        return []
    now = int(time.time() * 1000) if now_ms is None else now_ms
    vcol, vl = _binary_column(values, n, "values")
    if keys is None:
        kcol, kl = None, np.full(n, -1, np.int64)
    else:
        kcol, kl = _binary_column(keys, n, "keys")
    ts = _timestamp_column(timestamps, n, now)
    hc, hblob = _header_blobs(headers, n)
    hsize = np.zeros(n, np.int64) if hblob is None else \
        pc.binary_length(hblob).to_numpy().astype(np.int64)

    zk, zv, zh = zigzag(kl), zigzag(vl), zigzag(hc)
    sk, sv, sh = varint_sizes(zk), varint_sizes(zv), varint_sizes(zh)
    fixed = 1 + sk + np.maximum(kl, 0) + sv + np.maximum(vl, 0) + sh + hsize

    # Batch boundaries from an upper bound of every record's size: the deltas of a record
    # to its batch's first one are bounded by the batch's row count and by the spread of
    # all timestamps.
    limit = max_batch_bytes - RECORD_BATCH_OVERHEAD
    max_rows = min(n, max(limit, 0) // MIN_RECORD_SIZE + 1)
    spread = int(ts.max()) - int(ts.min())
    if spread > INT64_MAX:
        raise EncodeError("timestamps too far apart for int64 deltas")
    bound = int(varint_sizes(zigzag(np.array([max_rows, spread], np.int64))).sum())
    est = fixed + bound
    est += varint_sizes(zigzag(est))
    cum = np.cumsum(est)
    starts = []
    s = 0
    while s < n:
        before = int(cum[s - 1]) if s else 0
        e = max(int(np.searchsorted(cum, before + limit, side="right")), s + 1)
        starts.append(s)
        s = e
    bstarts = np.array(starts, np.int64)
    bends = np.append(bstarts[1:], n)
    bidx = np.repeat(np.arange(bstarts.size), bends - bstarts)

    # Exact fields.
    zo = zigzag(np.arange(n, dtype=np.int64) - bstarts[bidx])
    base_ts = ts[bstarts]
    zt = zigzag(ts - base_ts[bidx])
    so, st = varint_sizes(zo), varint_sizes(zt)
    body = fixed + so + st
    if body.max() > INT32_MAX:
        raise EncodeError("a record larger than 2 GiB")
    zb = zigzag(body)
    p1 = _pieces(n, [(zb, varint_sizes(zb)), (None, 1), (zt, st), (zo, so), (zk, sk)])
    p2 = _pieces(n, [(zv, sv)])
    p3 = _pieces(n, [(zh, sh)])
    parts = [p1] + ([] if kcol is None else [kcol]) + [p2, vcol, p3]
    if hblob is not None:
        parts.append(hblob)
    records = pc.binary_join_element_wise(*parts, _EMPTY, null_handling="replace",
                                          null_replacement=b"")
    roffs = np.frombuffer(records.buffers()[1], np.int64)[records.offset:records.offset + n + 1]
    rdata = memoryview(records.buffers()[2])
    max_ts = np.maximum.reduceat(ts, bstarts)

    out = []
    for b in range(bstarts.size):
        s, e = int(bstarts[b]), int(bends[b])
        seq = base_sequence if base_sequence < 0 else (base_sequence + s) % (1 << 31)
        data = (_frame_writable if writable else build_batch)(
                           rdata[int(roffs[s]):int(roffs[e])], count=e - s,
                           base_offset=base_offset + s, base_timestamp=int(base_ts[b]),
                           max_timestamp=int(max_ts[b]), compression=compression,
                           timestamp_type=timestamp_type, producer_id=producer_id,
                           producer_epoch=producer_epoch, base_sequence=seq,
                           is_transactional=is_transactional,
                           partition_leader_epoch=partition_leader_epoch,
                           compression_level=compression_level)
        out.append(EncodedBatch(s, e, data))
    return out


def stamp_producer_fields(batch, producer_id: int, producer_epoch: int, base_sequence: int,
                          is_transactional: bool | None = None, pos: int = 0) -> None:
    """Rewrite producerId, producerEpoch, baseSequence (and the transactional bit unless
    None) of the v2 batch at ``pos`` of the writable ``batch`` (bytearray, memoryview),
    then recompute its CRC, as the producer does when it drains a batch."""
    view = memoryview(batch)
    if len(view) - pos < RECORD_BATCH_OVERHEAD:
        raise TruncatedError("not a whole v2 batch header")
    if view[pos + MAGIC_OFFSET] != CURRENT_MAGIC:
        raise UnsupportedMagicError(f"magic {view[pos + MAGIC_OFFSET]} is not a v2 batch")
    size = LOG_ENTRY_PREFIX.unpack_from(view, pos)[1] + LOG_OVERHEAD
    if size > len(view) - pos or size < RECORD_BATCH_OVERHEAD:
        raise TruncatedError("batch runs past the end of the buffer")
    try:
        _PRODUCER.pack_into(view, pos + _PRODUCER_OFFSET, producer_id, producer_epoch,
                            base_sequence)
    except struct.error as exc:
        raise EncodeError(f"producer fields out of range: {exc}") from None
    if is_transactional is not None:
        (attributes,) = _ATTRIBUTES.unpack_from(view, pos + ATTRIBUTES_OFFSET)
        attributes = (attributes | TRANSACTIONAL_FLAG_MASK if is_transactional
                      else attributes & ~TRANSACTIONAL_FLAG_MASK)
        _ATTRIBUTES.pack_into(view, pos + ATTRIBUTES_OFFSET, attributes)
    _UINT32.pack_into(view, pos + CRC_OFFSET, crc32c(view[pos + ATTRIBUTES_OFFSET:pos + size]))
