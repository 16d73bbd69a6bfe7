"""Decoding log entries into Arrow: the column-wise reader of the Spark data source.

Owns: ``iter_arrow`` / ``decode_to_arrow`` and everything between a buffer of back-to-back
log entries and ``pyarrow.RecordBatch``es of ``arrow_schema()`` (``__init__.py`` documents
the schema and ``batch.py`` the byte layout).

How it works: the entry walker groups v2 batches into *units* bounded by
``max_rows_per_batch`` / ``max_bytes_per_batch`` (so a reader holds a bounded amount of
memory: about twice the budget, plus one batch of at most ``max_decompressed``). A unit's
record bytes sit in one *region*: a zero-copy window of the input when none of its
batches is compressed; else a slice of the *arena* that lz4 payloads are decompressed
into back to back (``codecs.lz4_frames_into``, block by block; the arena is rewound for
each unit, the RecordBatches owning their memory), or, for the other codecs and mixed
units, the decompressed payloads joined. Runs of *plain* batches (uncompressed, kept, a
good CRC: the common case) are gathered by ``_plain_run``, and runs of lz4 batches by
``_arena.lz4_run``, a few Python steps per batch; the others go through the general loop,
which also reports the bad ones. A unit's batch
headers are read in one numpy gather (``HEADER_DTYPE``: 61-byte rows of a read-only
strided view of the input). The only sequential dependency, each record's length
varint, is walked with numpy *across batches* (step k reads record k of every batch at
once) when a unit has many batches; the batches longer than the rest, and the batches of
a unit with few of them, are walked one at a time: runs of records of one size by
speculation checked in numpy (the record at p takes s bytes: are the length varints at
p + s, p + 2s, ... the same?), the rest by a plain-Python loop. Every other field is then decoded for all the records of
the unit at once (``_vec.read_varints``), and keys, values and headers become Arrow
arrays by one C++ copy each: a binary_view array over the region cast to binary, or a
``take`` of the odd elements of a gap/value/gap/value binary array over the region.

Bad batches: a v2 batch whose framing is sound (base offset, batchLength, magic) but whose
content is not (CRC, decompression, the size budget, the records) is reported as a
``CorruptBatchError`` naming its base and last offsets and what is wrong (``record 3: key
length -7 out of range``): raised, or, with ``on_bad_batch``, handed to it and skipped, the
decode going on with the next batch. The rows of the batches before it are yielded first.
A unit that fails as a whole is decoded again batch by batch to find the bad one, and the
bad one once more by ``batch.decode_records`` for a precise reason: only on damaged data.
Framing errors (a batchLength below the header, an unknown magic) leave no next batch to
go on with: they raise ``CorruptBatchError`` (or ``UnsupportedMagicError``) in any case.

Invariants: malformed bytes raise ``DecodeError`` subclasses only. Counts are checked
against the bytes that remain before anything is allocated (a record takes at least 7
bytes, a header 2). The field readers never index outside the region; within a record
positions only move forward (lengths below -1 are rejected), so the checks that each
record's fields end exactly at its declared end, and that each batch's records end exactly
at its end, made once per unit, prove that every read was inside its record. The returned
arrays own their memory: nothing points into the caller's buffer. Offsets and timestamps
are int64 sums of a batch's base and a record's delta, and wrap like Java's longs (only
damaged records get there).

Thread-safety: pure functions; the input buffer is only read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CURRENT_MAGIC,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    H_ATTRIBUTES,
    H_BASE_OFFSET,
    H_BATCH_LENGTH,
    H_CRC,
    H_LAST_OFFSET_DELTA,
    H_MAGIC,
    H_PRODUCER_ID,
    H_RECORDS_COUNT,
    HEADER,
    LOG_ENTRY_PREFIX,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    crc32c,
    decode_records,
)
from ..errors import (
    CorruptBatchError,
    CorruptRecordError,
    DecodeError,
    UnsupportedMagicError,
)
from ..limits import INT64_MAX, INT64_MIN
from ..varint import MAX_VARLONG_BYTES, decode_varint
from ._arena import (
    ARENA_MAX_BYTES,
    ARENA_MIN_BYTES,
    ARENA_SLACK,
    Arena,
    in_one_arena,
    inflate,
    payload_size,
)
from ._arena import lz4_run as _lz4_run
from ._vec import read_varints
from ._walk import MIN_RECORD_BODY, MIN_RECORD_SIZE, VECTOR_WALK_MIN_BATCHES, gather_headers, walk_records

# Rows per decoded RecordBatch: large enough to amortise numpy's per-call cost (each
# vectorised step costs microseconds whatever its row count), small enough for Spark.
DEFAULT_MAX_ROWS_PER_BATCH = 1 << 16
# Record bytes (after decompression) decoded together: measured fastest at 16-32 MiB
# (smaller units pay numpy's per-call cost more often; past that, the joined payloads of
# compressed batches get slow to allocate). A reader holds about twice this.
DEFAULT_MAX_BYTES_PER_BATCH = 32 * 1024 * 1024
MIN_HEADER_SIZE = 2  # keyLength and valueLength varints
# Mean length from which a binary_view cast beats ``take`` over gap/value spans
# (pyarrow 26: the cast sizes its output once; take wins on short values).
VIEW_MIN_MEAN_LENGTH = 256

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()),
                                   pa.field("value", pa.binary())]))


def arrow_schema(include_headers: bool = True) -> pa.Schema:
    """The schema of the decoder's output."""
    fields = [pa.field("offset", pa.int64(), nullable=False),
              pa.field("timestamp", pa.int64(), nullable=False),
              pa.field("timestamp_type", pa.int32(), nullable=False),
              pa.field("key", pa.binary()), pa.field("value", pa.binary())]
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


@dataclass
class DecodeProgress:
    """Where a decode got to, filled in by ``iter_arrow``: every entry before ``position``
    was decoded or skipped (a trailing partial entry starts there), ``next_offset`` is the
    offset after the last of them (None before the first), ``records`` counts the rows
    yielded. Exact once the iterator is exhausted; before that, position may run ahead of
    the rows yielded by up to one unit (the entries being decoded)."""

    position: int = 0
    next_offset: int | None = None
    records: int = 0


def _is_aborted(attributes: int, producer_id: int, base_offset: int,
                aborted: dict[int, list[tuple[int, int]]]) -> bool:
    if not attributes & TRANSACTIONAL_FLAG_MASK:
        return False
    for first, last in aborted.get(producer_id, ()):
        if first <= base_offset <= last:
            return True
    return False


def iter_arrow(buf, start_offset: int | None = None, end_offset: int | None = None, *,
               max_rows_per_batch: int = DEFAULT_MAX_ROWS_PER_BATCH,
               max_bytes_per_batch: int = DEFAULT_MAX_BYTES_PER_BATCH,
               max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
               skip_control: bool = True,
               aborted: Sequence[tuple[int, int, int]] | None = None,
               verify_crc: bool = True, include_headers: bool = True,
               progress: DecodeProgress | None = None,
               on_bad_batch: Callable[[CorruptBatchError], None] | None = None
               ) -> Iterator[pa.RecordBatch]:
    """Decode the log entries of ``buf`` (bytes, bytearray, memoryview or mmap) into
    RecordBatches of ``arrow_schema(include_headers)`` of at most ``max_rows_per_batch``
    rows, holding about ``max_bytes_per_batch`` of record bytes at a time.

    Keeps records with ``start_offset <= offset < end_offset`` (None: unbounded), skips
    control batches (``skip_control``) and the transactional batches of ``aborted``
    transactions, given as (producer_id, first_offset, last_offset), inclusive. Stops
    silently at a trailing partial entry and at the first batch at or past ``end_offset``.
    A batch that cannot be read (bad CRC, records, compressed payload, or one inflating
    past ``max_decompressed``) raises ``CorruptBatchError`` naming its offsets, or, with
    ``on_bad_batch``, is handed to it and skipped (the callback may raise); other
    malformed bytes raise ``DecodeError`` subclasses. The iterator keeps ``buf``
    exported while it runs (close an mmap after it is exhausted or closed); the batches
    it yields do not point into ``buf``.
    """
    if max_rows_per_batch < 1 or max_bytes_per_batch < 1:
        raise ValueError("max_rows_per_batch and max_bytes_per_batch must be positive")
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    data = np.frombuffer(view, np.uint8)
    lo = INT64_MIN if start_offset is None else start_offset
    hi = INT64_MAX if end_offset is None else end_offset
    aborted_by_pid: dict[int, list[tuple[int, int]]] = {}
    for pid, first, last in aborted or ():
        aborted_by_pid.setdefault(pid, []).append((first, last))
    schema = arrow_schema(include_headers)
    progress = progress if progress is not None else DecodeProgress()
    arena = Arena(min(max(max_bytes_per_batch + max_bytes_per_batch // ARENA_SLACK,
                           ARENA_MIN_BYTES), ARENA_MAX_BYTES))

    # The unit being gathered: v2 batches (headers, positions, payloads: None when not
    # compressed) or one run [legacy_start, legacy_end) of legacy entries.
    headers: list[tuple] = []
    positions: list[int] = []
    payloads: list[bytes | tuple[np.ndarray, int, int] | None] = []
    legacy_start = legacy_end = -1
    unit_rows = unit_bytes = 0

    def bad(error: CorruptBatchError) -> None:
        if on_bad_batch is None:
            raise error
        on_bad_batch(error)

    def parts(rb: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        for s in range(0, rb.num_rows, max_rows_per_batch):
            part = rb.slice(s, max_rows_per_batch) if rb.num_rows > max_rows_per_batch else rb
            progress.records += part.num_rows
            yield part

    def emit() -> Iterator[pa.RecordBatch]:
        if legacy_start >= 0:
            try:
                rb = _decode_legacy(view[legacy_start:legacy_end], lo, hi, max_decompressed,
                                    schema)
            except DecodeError:
                yield from _legacy_one_by_one(view, legacy_start, legacy_end, lo, hi,
                                              max_decompressed, schema, bad, parts)
                return
            yield from parts(rb)
            return
        try:
            rb = _decode_unit(view, data, headers, positions, payloads, lo, hi,
                              include_headers, schema)
        except DecodeError as exc:
            if len(headers) == 1:
                bad(_bad_batch(view, headers[0], positions[0], payloads[0], exc))
                return
            # Which batch? Each alone, in order: the good ones' rows, the bad ones reported.
            for header, position, payload in zip(headers, positions, payloads):
                try:
                    rb = _decode_unit(view, data, [header], [position], [payload], lo, hi,
                                      include_headers, schema)
                except DecodeError as exc1:
                    bad(_bad_batch(view, header, position, payload, exc1))
                    continue
                yield from parts(rb)
            return
        yield from parts(rb)

    pos, end = 0, len(view)
    unpack_header = HEADER.unpack_from
    check_aborted = bool(aborted_by_pid)
    not_plain = COMPRESSION_CODEC_MASK | (CONTROL_FLAG_MASK if skip_control else 0) \
        | (TRANSACTIONAL_FLAG_MASK if check_aborted else 0)
    while end - pos > MAGIC_OFFSET:
        magic = view[pos + MAGIC_OFFSET]
        if magic == CURRENT_MAGIC:
            if legacy_start < 0:  # the common case, batch after batch in one call
                run_end, rows, nbytes, next_offset = _plain_run(
                    view, pos, end, lo, hi, not_plain, verify_crc, headers, positions, payloads,
                    max_rows_per_batch - unit_rows, max_bytes_per_batch - unit_bytes)
                full = False
                if run_end == pos and arena.buf is not None:
                    run_end, rows, nbytes, next_offset, full = _lz4_run(
                        view, pos, end, lo, hi, not_plain, verify_crc, headers, positions,
                        payloads, max_rows_per_batch - unit_rows, max_bytes_per_batch - unit_bytes,
                        arena, max_decompressed)
                if run_end != pos:
                    unit_rows += rows
                    unit_bytes += nbytes
                    pos = run_end
                    progress.position, progress.next_offset = pos, next_offset
                if full:  # the next lz4 batch starts a unit: this one first, then the arena again
                    yield from emit()
                    arena.rewind()
                    headers, positions, payloads = [], [], []
                    unit_rows = unit_bytes = 0
                if run_end != pos or full:
                    continue
            if end - pos < RECORD_BATCH_OVERHEAD:
                break
            header = unpack_header(view, pos)
            base_offset = header[H_BASE_OFFSET]
            size = header[H_BATCH_LENGTH] + LOG_OVERHEAD
            if size < RECORD_BATCH_OVERHEAD:
                raise CorruptBatchError(f"batchLength {header[H_BATCH_LENGTH]} is smaller than "
                                        "the header", base_offset=base_offset,
                                        last_offset=base_offset, position=pos)
            if size > end - pos or base_offset >= hi:
                break
            attributes = header[H_ATTRIBUTES]
            next_offset = base_offset + header[H_LAST_OFFSET_DELTA] + 1
            if (next_offset <= lo or (skip_control and attributes & CONTROL_FLAG_MASK)
                    or check_aborted and _is_aborted(attributes, header[H_PRODUCER_ID],
                                                     base_offset, aborted_by_pid)):
                pos += size
                progress.position, progress.next_offset = pos, next_offset
                continue
            codec = attributes & COMPRESSION_CODEC_MASK
            payload = None
            count = header[H_RECORDS_COUNT]
            try:
                if verify_crc:
                    actual = crc32c(view[pos + ATTRIBUTES_OFFSET:pos + size])
                    if actual != header[H_CRC]:
                        raise CorruptRecordError(f"CRC {actual:#010x} != stored "
                                                 f"{header[H_CRC]:#010x}")
                if codec:
                    payload = inflate(codec, view[pos + RECORDS_OFFSET:pos + size],
                                       max_decompressed, arena, end - pos)
                    nbytes = payload_size(payload)
                else:
                    nbytes = size - RECORDS_OFFSET
                if count < 0 or count * MIN_RECORD_SIZE > nbytes:
                    raise CorruptRecordError(f"records count {count} does not fit in "
                                             f"{nbytes} bytes")
            except DecodeError as exc:
                if headers or legacy_start >= 0:  # the rows before it first
                    yield from emit()
                    arena.rewind()
                    headers, positions, payloads = [], [], []
                    legacy_start = -1
                    unit_rows = unit_bytes = 0
                payload = None
                pos += size
                progress.position, progress.next_offset = pos, next_offset
                bad(_batch_error(header, pos - size, str(exc)))
                continue
            if legacy_start >= 0 or headers and (unit_rows + count > max_rows_per_batch
                                                 or unit_bytes + nbytes > max_bytes_per_batch):
                yield from emit()
                payload = arena.rewind(payload)
                headers, positions, payloads = [], [], []
                legacy_start = -1
                unit_rows = unit_bytes = 0
            headers.append(header)
            positions.append(pos)
            payloads.append(payload)
            unit_rows += count
            unit_bytes += nbytes
        elif magic == 0 or magic == 1:
            base_offset, length = LOG_ENTRY_PREFIX.unpack_from(view, pos)
            size = length + LOG_OVERHEAD
            if length < 0:
                raise CorruptRecordError(f"message size {length} at position {pos}")
            if size > end - pos:
                break
            next_offset = base_offset + 1
            if headers or legacy_start >= 0 and unit_bytes + size > max_bytes_per_batch:
                yield from emit()
                arena.rewind()
                headers, positions, payloads = [], [], []
                legacy_start = -1
                unit_rows = unit_bytes = 0
            if legacy_start < 0:
                legacy_start = pos
            legacy_end = pos + size
            unit_bytes += size
        else:
            raise UnsupportedMagicError(f"magic {magic} at position {pos}")
        pos += size
        progress.position, progress.next_offset = pos, next_offset
    if headers or legacy_start >= 0:
        yield from emit()


def _plain_run(view: memoryview, pos: int, end: int, lo: int, hi: int, not_plain: int,
               verify_crc: bool, headers: list, positions: list, payloads: list,
               room_rows: int, room_bytes: int) -> tuple[int, int, int, int | None]:
    """Gather the run of *plain* v2 batches from ``pos`` into the unit's lists: whole,
    uncompressed, kept (no attribute of ``not_plain``, offsets reaching into [lo, hi)),
    a sane records count, a good CRC, and within the room left in the unit. Stops at the
    first other batch, which the general loop of ``iter_arrow`` then handles (and reports
    when it is bad): the same outcome, with a few Python steps less per batch.
    Returns (position after the run, rows, record bytes, offset after the run)."""
    unpack = HEADER.unpack_from
    rows = nbytes = 0
    next_offset = None
    last = end - RECORD_BATCH_OVERHEAD
    while pos <= last:
        h = unpack(view, pos)
        size = h[H_BATCH_LENGTH] + LOG_OVERHEAD
        body = size - RECORDS_OFFSET
        count = h[H_RECORDS_COUNT]
        base = h[H_BASE_OFFSET]
        after = base + h[H_LAST_OFFSET_DELTA] + 1
        if (h[H_MAGIC] != CURRENT_MAGIC or h[H_ATTRIBUTES] & not_plain or body < 0
                or size > end - pos or base >= hi or after <= lo
                or count < 0 or count * MIN_RECORD_SIZE > body
                or rows + count > room_rows or nbytes + body > room_bytes
                or verify_crc and crc32c(view[pos + ATTRIBUTES_OFFSET:pos + size]) != h[H_CRC]):
            break
        headers.append(h)
        positions.append(pos)
        payloads.append(None)
        rows += count
        nbytes += body
        pos += size
        next_offset = after
    return pos, rows, nbytes, next_offset


def _batch_error(header: tuple, pos: int, reason: str) -> CorruptBatchError:
    base = header[H_BASE_OFFSET]
    return CorruptBatchError(reason, base_offset=base,
                             last_offset=base + header[H_LAST_OFFSET_DELTA], position=pos)


def _bad_batch(view: memoryview, header: tuple, pos: int, payload: bytes | tuple | None,
               exc: DecodeError) -> CorruptBatchError:
    """The error of a batch whose records the vectorised decode refused, with the reason
    told by the scalar decoder (it names the record), else by ``exc``."""
    records: bytes | memoryview
    if payload is None:
        records = view[pos + RECORDS_OFFSET:pos + header[H_BATCH_LENGTH] + LOG_OVERHEAD]
    elif isinstance(payload, tuple):
        buf, start, stop = payload
        records = buf[start:stop].data
    else:
        records = payload
    reason = str(exc)
    try:
        decode_records(records, BatchHeader(*header))
    except DecodeError as scalar:
        reason = str(scalar)
    return _batch_error(header, pos, reason)


def _legacy_one_by_one(view: memoryview, start: int, end: int, lo: int, hi: int,
                       max_decompressed: int, schema: pa.Schema, bad, parts
                       ) -> Iterator[pa.RecordBatch]:
    """A legacy run that failed as a whole, entry by entry: the bad entries reported."""
    pos = start
    while pos < end:
        offset, length = LOG_ENTRY_PREFIX.unpack_from(view, pos)
        size = length + LOG_OVERHEAD
        try:
            rb = _decode_legacy(view[pos:pos + size], lo, hi, max_decompressed, schema)
        except DecodeError as exc:
            # a legacy entry's offset is its last (inner) offset; its first is unknown here
            bad(CorruptBatchError(str(exc), base_offset=offset, last_offset=offset,
                                  position=pos))
        else:
            yield from parts(rb)
        pos += size


def decode_to_arrow(buf, start_offset: int | None = None, end_offset: int | None = None, *,
                    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
                    skip_control: bool = True,
                    aborted: Sequence[tuple[int, int, int]] | None = None,
                    verify_crc: bool = True, include_headers: bool = True) -> pa.RecordBatch:
    """All the records of ``buf`` as one RecordBatch (see ``iter_arrow``, whose budgets
    this lifts: use ``iter_arrow`` to bound memory)."""
    parts = list(iter_arrow(buf, start_offset, end_offset, max_rows_per_batch=1 << 62,
                            max_bytes_per_batch=1 << 62, max_decompressed=max_decompressed,
                            skip_control=skip_control, aborted=aborted, verify_crc=verify_crc,
                            include_headers=include_headers))
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return pa.RecordBatch.from_pylist([], schema=arrow_schema(include_headers))
    return pa.concat_batches(parts)


# --- v2 units -------------------------------------------------------------------------------

def _decode_unit(view: memoryview, data: np.ndarray, headers: list[tuple], positions: list[int],
                 payloads: list, lo: int, hi: int, include_headers: bool,
                 schema: pa.Schema) -> pa.RecordBatch:
    """Decode the records of a unit of v2 batches."""
    nb = len(headers)
    pos_arr = np.array(positions, np.int64)
    hv = gather_headers(data, pos_arr)
    sizes = hv["batch_length"].astype(np.int64) + LOG_OVERHEAD
    if all(p is None for p in payloads):
        first = positions[0] + RECORDS_OFFSET
        region = data[first:positions[-1] + int(sizes[-1])]  # a window of the input: no copy
        bstart = pos_arr + (RECORDS_OFFSET - first)
        bend = bstart + (sizes - RECORDS_OFFSET)
    else:
        in_arena = in_one_arena(payloads)
        if in_arena is not None:
            region = in_arena
            lengths = np.fromiter((stop - start for _, start, stop in payloads), np.int64, nb)
        else:
            pieces = [view[p + RECORDS_OFFSET:p + int(size)] if payload is None
                      else payload[0][payload[1]:payload[2]] if type(payload) is tuple
                      else payload for p, size, payload in zip(positions, sizes.tolist(), payloads)]
            lengths = np.fromiter(map(len, pieces), np.int64, nb)
            region = np.frombuffer(b"".join(pieces), np.uint8)
        bend = np.cumsum(lengths)
        bstart = bend - lengths
    counts = hv["records_count"].astype(np.int64)
    n = int(counts.sum())
    first_rec = np.cumsum(counts) - counts

    rec_start, rec_end = walk_records(region, bstart, bend, counts, first_rec, n)
    rb_idx = np.repeat(np.arange(nb), counts)  # the batch of every record
    if n and ((rec_end - rec_start < MIN_RECORD_BODY).any() or (rec_end > bend[rb_idx]).any()):
        raise CorruptRecordError("record length out of bounds of its batch")

    # Every field of every record at once; positions only move forward, one check at the end.
    p = rec_start + 1  # attributes: unused by Kafka
    ts_delta, p = read_varints(region, p, MAX_VARLONG_BYTES)
    off_delta, p = read_varints(region, p)
    klen, kstart = read_varints(region, p)
    vlen, vstart = read_varints(region, kstart + np.maximum(klen, 0))
    hcount, p = read_varints(region, vstart + np.maximum(vlen, 0))
    if n and (min(klen.min(), vlen.min()) < -1 or hcount.min() < 0
              or (hcount * MIN_HEADER_SIZE > rec_end - p).any()):
        raise CorruptRecordError("bad key, value or headers length")
    hdr = None
    if hcount.any():
        hdr, p = _read_headers(region, p, rec_end, hcount)
    if not np.array_equal(p, rec_end):
        raise CorruptRecordError("record length disagrees with its fields")

    # Absolute offsets and timestamps, from per-batch columns.
    base_offsets = hv["base_offset"].astype(np.int64)
    log_append = (hv["attributes"] & TIMESTAMP_TYPE_MASK) != 0
    base_ts = hv["base_timestamp"].astype(np.int64)
    max_ts = hv["max_timestamp"].astype(np.int64)
    offsets = base_offsets[rb_idx] + off_delta
    if log_append.any():
        timestamps = np.where(log_append[rb_idx], max_ts[rb_idx], base_ts[rb_idx] + ts_delta)
    else:
        timestamps = base_ts[rb_idx] + ts_delta
    ts_type = log_append.astype(np.int32)[rb_idx]

    keep = None
    if offsets.size and (offsets.min() < lo or offsets.max() >= hi):
        keep = np.flatnonzero((offsets >= lo) & (offsets < hi))
        if hdr is not None:
            hdr = _filter_headers(hdr, hcount, keep)
        offsets, timestamps, ts_type = offsets[keep], timestamps[keep], ts_type[keep]
        kstart, klen, vstart, vlen, hcount = (kstart[keep], klen[keep], vstart[keep],
                                              vlen[keep], hcount[keep])
    m = offsets.size
    columns = [pa.array(offsets), pa.array(timestamps), pa.array(ts_type),
               _binary_array(region, kstart, klen), _binary_array(region, vstart, vlen)]
    if include_headers:
        columns.append(_headers_array(region, hcount, hdr, m))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _read_headers(region: np.ndarray, p: np.ndarray, rec_end: np.ndarray, hcount: np.ndarray):
    """Decode the headers of every record with some: (header arrays, new positions)."""
    recs = np.flatnonzero(hcount)
    hc = hcount[recs]
    total = int(hc.sum())
    first = np.zeros(recs.size, np.int64)
    np.cumsum(hc[:-1], out=first[1:])
    hk_start = np.empty(total, np.int64)
    hk_len = np.empty(total, np.int64)
    hv_start = np.empty(total, np.int64)
    hv_len = np.empty(total, np.int64)
    p = p.copy()
    order = np.argsort(-hc, kind="stable")
    pr, er, hcs, first = p[recs[order]], rec_end[recs[order]], hc[order], first[order]
    hdr = (hk_start, hk_len, hv_start, hv_len)
    active = np.searchsorted(-hcs, -np.arange(int(hcs[0])), side="left")
    for j, m in enumerate(active.tolist()):
        if m < VECTOR_WALK_MIN_BATCHES:  # a few records with many headers: scalar walk
            for i in range(m):
                pr[i] = _headers_python(region, int(pr[i]), int(er[i]), int(first[i]) + j,
                                        int(hcs[i]) - j, hdr)
            break
        kl, ks = read_varints(region, pr[:m])
        vl, vs = read_varints(region, ks + np.maximum(kl, 0))
        if kl.min() < 0 or vl.min() < -1:
            raise CorruptRecordError("bad header key or value length")
        idx = first[:m] + j
        hk_start[idx], hk_len[idx], hv_start[idx], hv_len[idx] = ks, kl, vs, vl
        pr[:m] = vs + np.maximum(vl, 0)
    p[recs[order]] = pr
    return hdr, p


def _headers_python(region: np.ndarray, q: int, e: int, first: int, count: int, hdr) -> int:
    """The scalar decode of ``count`` headers from ``q`` (record end ``e``)."""
    mv = memoryview(region)
    e = min(e, len(mv))
    hk_start, hk_len, hv_start, hv_len = hdr
    for i in range(first, first + count):
        kl, q = decode_varint(mv, max(q, 0), e)
        if kl < 0:
            raise CorruptRecordError("null or negative header key length")
        hk_start[i], hk_len[i] = q, kl
        vl, q = decode_varint(mv, q + kl, e)
        if vl < -1:
            raise CorruptRecordError("negative header value length")
        hv_start[i], hv_len[i] = q, vl
        q += max(vl, 0)
    return q


def _filter_headers(hdr, hcount: np.ndarray, keep: np.ndarray):
    mask = np.zeros(hcount.size, np.bool_)
    mask[keep] = True
    hmask = np.repeat(mask, hcount)
    return tuple(a[hmask] for a in hdr)


def _binary_array(region: np.ndarray, start: np.ndarray, length: np.ndarray,
                  type_: pa.DataType = pa.binary()) -> pa.Array:  # noqa: B008 (one immutable type)
    """A binary array of the spans (start, length) of ``region`` (length -1: null), built
    by one copy in C++. Spans are in increasing, non-overlapping order."""
    n = start.size
    valid = length >= 0
    lens = np.maximum(length, 0)
    if n == 0:
        return pa.array([], type_)
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    base = int(start[0])
    top = int(start[-1] + lens[-1])
    window = region[base:top]
    rel = start - base
    if lens.mean() >= VIEW_MIN_MEAN_LENGTH and window.size < (1 << 31):
        # 16-byte views: length int32, then 12 inline bytes when length <= 12, else a
        # 4-byte prefix, buffer index 0 and offset int32.
        views = np.zeros((n, 4), np.int32)
        views[:, 0] = lens
        prefix = window.take(rel[:, None] + np.arange(4), mode="clip").view("<i4")[:, 0]
        if lens.min() > 12:
            views[:, 1] = prefix
            views[:, 3] = rel
        else:
            long_ = lens > 12
            views[:, 1] = np.where(long_, prefix, 0)
            views[:, 3] = np.where(long_, rel, 0)
            short = np.flatnonzero(~long_)
            inline = window.take(rel[short, None] + np.arange(12), mode="clip")
            inline[np.arange(12)[None, :] >= lens[short, None]] = 0
            views.view(np.uint8).reshape(n, 16)[short, 4:] = inline
        arr = pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views),
                                                          pa.py_buffer(window)])
        return arr.cast(type_)
    offs = np.empty(2 * n + 1, np.int64 if window.size >= (1 << 31) else np.int32)
    offs[0] = 0
    offs[1::2] = rel
    offs[2::2] = rel + lens
    large = offs.dtype == np.int64
    spans = pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), 2 * n,
                                  [None, pa.py_buffer(offs), pa.py_buffer(window)])
    taken = spans.take(pa.array(np.arange(1, 2 * n, 2, dtype=np.int64)))
    if large:
        taken = taken.cast(pa.binary())
    bufs = taken.buffers()
    out = pa.Array.from_buffers(type_, n, [validity, bufs[1], bufs[2]], offset=taken.offset)
    return out


def _headers_array(region: np.ndarray, hcount: np.ndarray, hdr, m: int) -> pa.Array:
    if hdr is None or not hcount.any():
        return pa.nulls(m, HEADERS_TYPE)
    hk_start, hk_len, hv_start, hv_len = hdr
    try:
        keys = _binary_array(region, hk_start, hk_len).cast(pa.string())
    except pa.ArrowInvalid as exc:
        raise CorruptRecordError(f"header key is not UTF-8: {exc}") from None
    values = _binary_array(region, hv_start, hv_len)
    struct_arr = pa.StructArray.from_arrays([keys, values], fields=list(HEADERS_TYPE.value_type))
    offs = np.zeros(m + 1, np.int32)
    np.cumsum(hcount, out=offs[1:])
    valid = hcount > 0
    validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(HEADERS_TYPE, m, [validity, pa.py_buffer(offs)],
                                 children=[struct_arr])


# --- legacy runs ----------------------------------------------------------------------------

def _decode_legacy(view: memoryview, lo: int, hi: int, max_decompressed: int,
                   schema: pa.Schema) -> pa.RecordBatch:
    """A run of magic 0/1 entries, through ``legacy.py`` (one object per record: legacy
    data is rare and old)."""
    from ..legacy import iter_legacy_records

    offsets, timestamps, types, keys, values = [], [], [], [], []
    for r in iter_legacy_records(view, max_decompressed):
        if lo <= r.offset < hi:
            offsets.append(r.offset)
            timestamps.append(r.timestamp)
            types.append(r.timestamp_type)
            keys.append(r.key)
            values.append(r.value)
    columns = [pa.array(offsets, pa.int64()), pa.array(timestamps, pa.int64()),
               pa.array(types, pa.int32()), pa.array(keys, pa.binary()),
               pa.array(values, pa.binary())]
    if len(schema) > 5:
        columns.append(pa.nulls(len(offsets), HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


