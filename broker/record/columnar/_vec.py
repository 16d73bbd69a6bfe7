"""Vectorised zigzag varints: numpy readers and writers of many varints at once.

Owns: reading the varints that start at an array of positions of one byte buffer, and
writing arrays of varints at arrays of positions (the format is ``varint.py``'s), numpy
only (the log cleaner uses them without pyarrow; ``_walk.py`` walks the records with
them).

Invariants: the readers never index outside ``data`` (``np.take(mode="clip")``): a
position past the end reads the last byte, and it is the caller's job to check, once per
record, that every field ended inside its record (positions only move forward, so one
check at the end of a record covers every field). They raise ``CorruptRecordError``
when a varint is longer than its type allows or overflows it.

Thread-safety: pure functions over the arrays they are given.
"""

from __future__ import annotations

import numpy as np

from ..errors import CorruptRecordError
from ..varint import MAX_VARINT_BYTES, MAX_VARLONG_BYTES

_ONE = np.uint64(1)


def _tables() -> tuple[np.ndarray, np.ndarray]:
    """Decoded value and size of every 2-byte pattern b0 | b1 << 8 that holds a whole
    varint (size 1 or 2); size 0 marks a longer one."""
    w = np.arange(1 << 16, dtype=np.int64)
    b0, b1 = w & 0xFF, w >> 8
    z = np.where(b0 < 0x80, b0, (b0 & 0x7F) | (b1 << 7))
    size = np.where(b0 < 0x80, 1, np.where(b1 < 0x80, 2, 0))
    return (z >> 1) ^ -(z & 1), size


VALUE2, SIZE2 = _tables()
_VALUE1 = VALUE2[:256].copy()  # the 1-byte patterns (entries >= 0x80 unused)


def read_varints(data: np.ndarray, pos: np.ndarray,
                 max_bytes: int = MAX_VARINT_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints at every ``pos`` of ``data``: (int64 values, positions after them).

    1- and 2-byte varints (lengths below 8 KiB, small deltas) are looked up in tables,
    a dozen array operations in all; longer ones take one pass per byte."""
    b0 = data.take(pos, mode="clip")
    if not (b0 >= 0x80).any():
        return _VALUE1.take(b0), pos + 1
    w = data.take(pos + 1, mode="clip").astype(np.intp)
    w <<= 8
    w |= b0
    size = SIZE2.take(w)
    if not size.all():
        return _read_long_varints(data, pos, max_bytes)
    return VALUE2.take(w), pos + size


def _read_long_varints(data: np.ndarray, pos: np.ndarray,
                       max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    z = np.zeros(pos.size, np.uint64)
    size = np.zeros(pos.size, np.int64)
    active = np.ones(pos.size, np.bool_)
    for j in range(max_bytes):
        b = data.take(pos + j, mode="clip")
        if j == MAX_VARLONG_BYTES - 1 and (active & (b > 1)).any():
            raise CorruptRecordError("varlong does not fit in int64")
        z |= np.where(active, (b & 0x7F).astype(np.uint64) << np.uint64(7 * j), np.uint64(0))
        size += active
        active &= b >= 0x80
        if not active.any():
            break
    else:
        raise CorruptRecordError(f"varint longer than {max_bytes} bytes")
    if max_bytes == MAX_VARINT_BYTES and (z > 0xFFFFFFFF).any():
        raise CorruptRecordError("varint does not fit in int32")
    signed = (z >> _ONE).view(np.int64) ^ -(z & _ONE).view(np.int64)
    return signed, pos + size


def zigzag(v: np.ndarray) -> np.ndarray:
    """The unsigned (uint64) zigzag form of int64 values."""
    v = np.asarray(v, np.int64)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def varint_sizes(z: np.ndarray) -> np.ndarray:
    """Bytes taken by the unsigned varints ``z`` (uint64)."""
    size = np.ones(z.shape, np.int64)
    for k in range(1, MAX_VARLONG_BYTES):
        above = z >= np.uint64(1 << (7 * k))
        if not above.any():
            break
        size += above
    return size


def put_varints(out: np.ndarray, pos: np.ndarray, z: np.ndarray, size: np.ndarray) -> None:
    """Write the unsigned varints ``z`` (uint64) of ``size`` bytes at ``pos`` in ``out``."""
    if z.size == 0:
        return
    longest = int(size.max())
    for j in range(longest):
        if j == 0:
            zj, sj, pj = z, size, pos
        else:
            sel = np.flatnonzero(size > j)
            zj, sj, pj = z[sel] >> np.uint64(7 * j), size[sel], pos[sel] + j
        byte = (zj & np.uint64(0x7F)).astype(np.uint8)
        if j + 1 < longest:
            byte[sj > j + 1] |= 0x80
        out[pj] = byte
