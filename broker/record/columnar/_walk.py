"""The record walk of the columnar decoder: where every record of a unit of v2 batches
starts and ends, from the records' length varints (the only sequential dependency of a
batch's records).

Owns ``walk_records`` (used by ``decode.py`` and the log cleaner's ``scan.py``), the
record-size constants, and ``gather_headers`` (the v2 headers of many batches in one
numpy gather, as ``HEADER_DTYPE`` records). Three walks:
with numpy *across batches* (step k reads record k of every batch still walking) while
at least ``VECTOR_WALK_MIN_BATCHES`` batches are; then each remaining batch alone, by
speculation on runs of records of one size (the record at p takes s bytes: the length
varints read at p + s, p + 2s, ... in numpy must be the same size and value; the
matching prefix is a chain of true record starts), and by a plain-Python loop where sizes
vary.

Invariants: only ``region`` is read, never outside it (numpy's ``take(mode="clip")``,
bounds checked in the scalar loop); each batch's records must end exactly at its end, else
``CorruptRecordError``. The caller checks each record's fields against its bounds.

Thread-safety: pure functions (the output arrays are the caller's).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..batch import HEADER, RECORD_BATCH_OVERHEAD, BatchHeader
from ..errors import CorruptRecordError, TruncatedError
from ..varint import decode_varint
from ._vec import SIZE2, VALUE2, read_varints

# The smallest record: length, attributes, timestampDelta, offsetDelta, keyLength,
# valueLength, headersCount, one byte each; counts are checked against it.
MIN_RECORD_SIZE = 7
MIN_RECORD_BODY = MIN_RECORD_SIZE - 1
# Below this many batches still walking, one numpy step (a dozen calls of 1-10 us) costs
# more than walking their remaining records in Python (~0.5 us a record; measured).
VECTOR_WALK_MIN_BATCHES = 24
# Speculative walk of a batch's records (``_walk_runs``): tried on batches of at least this
# many records, given up after a run shorter than SPECULATE_MIN_RUN (record sizes vary).
SPECULATE_MIN_RECORDS = 16
SPECULATE_MIN_RUN = 8


# The v2 batch header as a numpy record (big-endian fields named as ``BatchHeader``'s),
# derived from ``HEADER``'s format: the headers of many batches are read in one gather.
HEADER_DTYPE = np.dtype([(name, ">" + code) for name, code
                         in zip(BatchHeader._fields, HEADER.format.lstrip("<>!=@"))])
assert HEADER_DTYPE.itemsize == RECORD_BATCH_OVERHEAD
# From this many batches their headers are gathered through a strided view (see
# ``gather_headers``), below by ``take``.
STRIDED_GATHER_MIN_BATCHES = 8


def gather_headers(data: np.ndarray, pos_arr: np.ndarray) -> np.ndarray:
    """The v2 headers at ``pos_arr`` (each inside ``data``) as HEADER_DTYPE records: for
    many batches, rows of a read-only strided view of ``data`` (one 61-byte row per
    position, copied by fancy indexing, which checks the bounds), several times faster
    than ``take`` of 61 indices a batch; for a few, ``take`` (the view costs a few us)."""
    if pos_arr.size >= STRIDED_GATHER_MIN_BATCHES:
        rows = as_strided(data, (data.size - RECORD_BATCH_OVERHEAD + 1, RECORD_BATCH_OVERHEAD),
                          (data.strides[0], data.strides[0]), writeable=False)
        raw = rows[pos_arr]
    else:
        raw = data.take(pos_arr[:, None] + np.arange(RECORD_BATCH_OVERHEAD))
    return raw.view(HEADER_DTYPE)[:, 0]


def walk_records(region: np.ndarray, bstart: np.ndarray, bend: np.ndarray, counts: np.ndarray,
          first_rec: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of every record body, from the length varints walked across batches.
    Checks only that each batch's records end at its end: the caller checks the rest."""
    rec_start = np.empty(n, np.int64)
    rec_end = np.empty(n, np.int64)
    order = np.argsort(-counts, kind="stable")
    cnt = counts[order]
    pos = bstart[order]
    end = bend[order]
    first = first_rec[order]
    longest = int(cnt[0]) if cnt.size else 0
    # active[k]: batches with more than k records (a prefix, counts being sorted)
    active = np.searchsorted(-cnt, -np.arange(longest), side="left").tolist()
    steps = 0
    while steps < longest and active[steps] >= VECTOR_WALK_MIN_BATCHES:
        steps += 1
    if steps:
        # Step k reads record k of the active batches; the steps' results are put in
        # record order once at the end (no padding: counts may be very uneven).
        bodies, stops = [], []
        for k in range(steps):
            m = active[k]
            p = pos[:m]
            w = region.take(p + 1, mode="clip").astype(np.intp)
            w <<= 8
            w |= region.take(p, mode="clip")
            size = SIZE2.take(w)
            if size.all():  # 1- and 2-byte lengths: records below 8 KiB
                body = p + size
                stop = body + VALUE2.take(w)
            else:
                length, body = read_varints(region, p)
                stop = body + length
            bodies.append(body)
            stops.append(stop)
            pos[:m] = stop
        per_step = np.array(active[:steps], np.int64)
        step_of = np.repeat(np.arange(steps), per_step)
        batch_of = np.arange(step_of.size) - np.repeat(np.cumsum(per_step) - per_step, per_step)
        idx = first[batch_of] + step_of
        rec_start[idx] = np.concatenate(bodies)
        rec_end[idx] = np.concatenate(stops)
    if steps < longest:  # the few batches longer than the rest: scalar walk
        for i in range(active[steps]):
            pos[i] = _walk_python(region, int(pos[i]), int(end[i]), int(first[i]) + steps,
                                  int(cnt[i]) - steps, rec_start, rec_end)
    if not np.array_equal(pos, end):
        raise CorruptRecordError("the records of a batch do not end at its end")
    return rec_start, rec_end


def _walk_python(region: np.ndarray, p: int, e: int, first: int, count: int,
                 rec_start: np.ndarray, rec_end: np.ndarray) -> int:
    """The walk of ``count`` records of one batch from ``p``; returns the position after
    them. Runs of records of one size (fixed-size values: the common case) are found by
    speculation, checked in numpy; the rest is walked in Python."""
    if p < 0:  # the vectorised steps went astray (a negative length)
        raise CorruptRecordError("record length out of bounds")
    done = 0
    if count >= SPECULATE_MIN_RECORDS:
        p, done = _walk_runs(region, p, e, first, count, rec_start, rec_end)
    if done < count:
        p = _walk_scalar(region, p, e, first + done, count - done, rec_start, rec_end)
    return p


def _walk_runs(region: np.ndarray, p: int, e: int, first: int, count: int,
               rec_start: np.ndarray, rec_end: np.ndarray) -> tuple[int, int]:
    """Speculative walk: if the record at ``p`` takes ``step`` bytes (length varint
    included), guess that the next ones do too and check every guess at once: the length
    varint read at each guessed start must be the same size and value as the first
    one's. The matching prefix is a chain of true record starts (each verified record
    ends where the next verified one starts); the walk goes on from its end while runs
    stay long. Returns (position, records walked)."""
    done = 0
    while count - done >= SPECULATE_MIN_RECORDS and e - p > 2:
        b0 = int(region[p])
        if b0 < 0x80:
            head, z = 1, b0
        else:
            b1 = int(region[p + 1])
            if b1 >= 0x80:
                break  # records of 8 KiB or more: few per batch, walked one by one
            head, z = 2, (b0 & 0x7F) | (b1 << 7)
        length = (z >> 1) ^ -(z & 1)
        if length < MIN_RECORD_BODY or length > e - p - head:
            break  # the scalar walk names the problem
        step = head + length
        m = min(count - done, (e - p) // step)
        starts = np.arange(p, p + m * step, step, dtype=np.int64)
        w = region.take(starts + 1, mode="clip").astype(np.intp)
        w <<= 8
        w |= region.take(starts)
        same = (SIZE2.take(w) == head) & (VALUE2.take(w) == length)
        k = m if same.all() else int(same.argmin())  # same[0] holds: k >= 1
        rec_start[first + done:first + done + k] = starts[:k] + head
        rec_end[first + done:first + done + k] = starts[:k] + step
        done += k
        p += k * step
        if k < SPECULATE_MIN_RUN:
            break  # sizes vary: the scalar walk is cheaper
    return p, done


def _walk_scalar(region: np.ndarray, p: int, e: int, first: int, count: int,
                 rec_start: np.ndarray, rec_end: np.ndarray) -> int:
    """The record-by-record walk of ``count`` records from ``p``."""
    mv = memoryview(region)
    starts = [0] * count
    ends = [0] * count
    for i in range(count):
        if p >= e:
            raise TruncatedError("records count larger than the records present")
        b0 = mv[p]
        if b0 < 0x80:  # fast paths: 1- and 2-byte lengths (records up to 8 KiB)
            length = (b0 >> 1) ^ -(b0 & 1)
            p += 1
        else:
            b1 = mv[p + 1] if p + 1 < e else 0x80
            if b1 < 0x80:
                z = (b0 & 0x7F) | (b1 << 7)
                length = (z >> 1) ^ -(z & 1)
                p += 2
            else:
                length, p = decode_varint(mv, p, e)
        if length < MIN_RECORD_BODY or length > e - p:
            raise CorruptRecordError(f"record length {length} with {e - p} bytes left")
        starts[i] = p
        p += length
        ends[i] = p
    rec_start[first:first + count] = starts
    rec_end[first:first + count] = ends
    return p


__all__ = ["MIN_RECORD_BODY", "MIN_RECORD_SIZE", "VECTOR_WALK_MIN_BATCHES", "walk_records"]
