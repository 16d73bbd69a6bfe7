"""The vectorised reads of the columnar Avro decoder: one value at each of many positions
of a byte buffer at once, with numpy, and the Arrow arrays built from them.

Owns ``Context`` (one decode: the buffer, each record's bounds, each record's first
error) and the readers and builders ``avro_columnar_plan`` composes: zigzag varints
(``read_long``, ``read_int``), lengths and their spans (``read_spans``), fixed-width
little-endian floats and doubles, booleans, and the Arrow arrays of numbers, spans
(binary and string, one copy in C++) and decimals.

Format: Avro's binary encoding. A long is a zigzag varint of at most 10 bytes (the 10th
at most 1), an int one of at most 5 bytes holding 32 bits; bytes and strings are a long
length then the bytes; a float and a double are 4 and 8 bytes little-endian; a boolean is
one byte, 0 or 1.

How: varints of 1 or 2 bytes are looked up in tables (a few numpy calls for all
positions); longer ones are read as the 8 bytes at each position (one gather through an
unaligned uint64 view of the buffer) and decoded with bit tricks (find the first byte
below 0x80, keep the 7-bit groups before it, pack them in three steps); those longer than
8 bytes, and those within 8 bytes of the buffer's end, go byte by byte.

Invariants: readers never index outside the buffer (reads past its end are clipped, the
buffer is padded to at least 16 bytes); a value that cannot be read (a varint too long,
an int beyond 32 bits, a negative length, a length past the record's end, a boolean byte
other than 0 and 1) marks its record bad (``Context.fail``: the record's first error is
kept) and its position moves to the record's end, so positions only move forward and a
span never leaves its record: spans of one column are in increasing order, which the
binary builder relies on. Nothing raises for bad data.

Thread-safety: a ``Context`` belongs to one decode; the functions are pure otherwise.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from broker.record.limits import INT32_MAX, INT64_MAX

_ONE = np.uint64(1)
_M80 = np.uint64(0x8080808080808080)
_M7F = np.uint64(0x7F7F7F7F7F7F7F7F)
_U32 = np.uint64(0xFFFFFFFF)
_PACK = (  # (mask of the low part, shift, mask of the shifted high part) of the 3 packing steps
    (np.uint64(0x007F007F007F007F), np.uint64(1), np.uint64(0x3F803F803F803F80)),
    (np.uint64(0x00003FFF00003FFF), np.uint64(2), np.uint64(0x0FFFC0000FFFC000)),
    (np.uint64(0x000000000FFFFFFF), np.uint64(4), np.uint64(0x00FFFFFFF0000000)),
)
MIN_BUFFER = 16  # smaller buffers are copied into one this size (the 8-byte views need room)
TRUNCATED = "truncated: the record ends inside a value"


def _tables() -> tuple[np.ndarray, np.ndarray]:
    """Decoded value and size of every 2-byte pattern b0 | b1 << 8 that starts with a
    whole varint of 1 or 2 bytes; size 0 marks a longer one."""
    w = np.arange(1 << 16, dtype=np.int64)
    b0, b1 = w & 0xFF, w >> 8
    z = np.where(b0 < 0x80, b0, (b0 & 0x7F) | (b1 << 7))
    size = np.where(b0 < 0x80, 1, np.where(b1 < 0x80, 2, 0))
    return (z >> 1) ^ -(z & 1), size.astype(np.int64)


VALUE2, SIZE2 = _tables()
VALUE1 = VALUE2[:256].copy()


class Context:
    """One decode: ``data`` (uint8, padded), the records' ``start`` and ``end``, and per
    record the first error (``code``: 0 or 1 + an index of ``messages``; ``where``: its
    byte position). ``root`` is the identity array of record indices (``own`` of the
    top level)."""

    def __init__(self, data: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        if data.size < MIN_BUFFER:
            padded = np.zeros(MIN_BUFFER, np.uint8)
            padded[:data.size] = data
            data = padded
        self.data = data
        self.start = start
        self.end = end
        self.n = start.size
        self.code = np.zeros(self.n, np.int32)
        self.where = np.zeros(self.n, np.int64)
        self.messages: list[str] = []
        self._ids: dict[str, int] = {}
        self.root = np.arange(self.n, dtype=np.int64)
        self.depth = 0
        self._views: dict[str, np.ndarray] = {}

    def view(self, dtype: str) -> np.ndarray:
        """``data`` as unaligned little-endian values of ``dtype`` starting at every byte
        (``"<u8"``, ``"<f4"``, ``"<f8"``); index it (clipped), never ``take`` (slow)."""
        found = self._views.get(dtype)
        if found is None:
            width = np.dtype(dtype).itemsize
            found = np.ndarray((self.data.size - width + 1,), dtype, buffer=self.data, strides=(1,))
            self._views[dtype] = found
        return found

    def lim(self, own: np.ndarray) -> np.ndarray:
        """The end of the record of each position."""
        return self.end if own is self.root else self.end[own]

    def fail(self, own: np.ndarray, pos: np.ndarray, message: str) -> None:
        """Mark the records ``own`` bad (their first error is kept): ``message`` at
        ``pos``, or "truncated" when the position is already past the record's end."""
        if own.size == 0:
            return
        fresh = self.code[own] == 0
        if not fresh.any():
            return
        own, pos = own[fresh], pos[fresh]
        past = pos > self.end[own]
        for text, sel in ((message, ~past), (TRUNCATED, past)):
            if sel.any():
                code = self._ids.get(text)
                if code is None:
                    self.messages.append(text)
                    code = self._ids[text] = len(self.messages)
                self.code[own[sel]] = code
                self.where[own[sel]] = pos[sel]

    def message(self, i: int) -> str | None:
        code = int(self.code[i])
        return self.messages[code - 1] if code else None


def _fail_at(ctx: Context, bad: np.ndarray, pos: np.ndarray, own: np.ndarray, newpos: np.ndarray,
             message: str) -> np.ndarray:
    """Record the failures ``bad`` (a mask) and move their positions to their records'
    ends; returns the indices."""
    idx = np.flatnonzero(bad)
    ctx.fail(own[idx], pos[idx], message)
    newpos[idx] = ctx.lim(own)[idx]
    return idx


def read_long(ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag longs at ``pos``: (int64 values, positions after them)."""
    return _varints(ctx, pos, own, False)


def read_int(ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag ints at ``pos`` (at most 5 bytes, 32 bits): (int64 values, positions)."""
    return _varints(ctx, pos, own, True)


def _varints(ctx: Context, pos: np.ndarray, own: np.ndarray, int32: bool) -> tuple[np.ndarray, np.ndarray]:
    data = ctx.data
    b0 = data.take(pos, mode="clip")
    if pos.size == 0 or b0.max() < 0x80:
        return VALUE1.take(b0), pos + 1
    w = data.take(pos + 1, mode="clip").astype(np.intp)
    w <<= 8
    w |= b0
    size = SIZE2.take(w)
    if size.min() > 0:
        return VALUE2.take(w), pos + size
    return _long_varints(ctx, pos, own, int32)


def _long_varints(ctx: Context, pos: np.ndarray, own: np.ndarray, int32: bool) -> tuple[np.ndarray, np.ndarray]:
    words = ctx.view("<u8")
    top = words.size - 1
    w = words[np.minimum(pos, top)]
    t = ~w & _M80  # the high bit of every byte below 0x80 (a varint's last byte)
    low = t & (np.uint64(0) - t)  # the first of them
    keep = low | (low - _ONE)  # the varint's bytes
    z = w & keep & _M7F
    for lo_mask, shift, hi_mask in _PACK:
        z = (z & lo_mask) | ((z >> shift) & hi_mask)
    size = (np.bitwise_count(keep) >> np.uint8(3)).astype(np.int64)
    slow = (t == 0) | (pos > top)
    bad = None
    if slow.any():
        idx = np.flatnonzero(slow)
        z[idx], size[idx], bad_slow = _bytewise(ctx.data, pos[idx])
        if bad_slow.any():
            bad = np.zeros(pos.size, np.bool_)
            bad[idx[bad_slow]] = True
    if int32:
        over = (size > 5) | (z > _U32)
        if over.any():
            bad = over if bad is None else bad | over
    signed = (z >> _ONE).view(np.int64) ^ -(z & _ONE).view(np.int64)
    newpos = pos + size
    if bad is not None and bad.any():
        what = "an int varint longer than 5 bytes or beyond 32 bits" if int32 else \
            "a varint longer than 10 bytes or beyond 64 bits"
        idx = _fail_at(ctx, bad, pos, own, newpos, what)
        signed[idx] = 0
    return signed, newpos


def _bytewise(data: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Varints read byte by byte (the long ones): (unsigned values, sizes, too long)."""
    z = np.zeros(pos.size, np.uint64)
    size = np.zeros(pos.size, np.int64)
    active = np.ones(pos.size, np.bool_)
    over = np.zeros(pos.size, np.bool_)
    for j in range(10):
        b = data.take(pos + j, mode="clip")
        if j == 9:
            over = active & (b > 1)
        z |= np.where(active, (b & 0x7F).astype(np.uint64) << np.uint64(7 * j), np.uint64(0))
        size += active
        active &= b >= 0x80
        if not active.any():
            break
    return z, size, over | active


def read_spans(ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Length-prefixed values (bytes, string) at ``pos``: (starts, lengths, positions
    after them). A negative length, or one past the record's end, fails the record."""
    length, start = _varints(ctx, pos, own, False)
    lim = ctx.lim(own)
    bad = (length < 0) | (length > lim - start)
    if bad.any():
        idx = np.flatnonzero(bad)
        neg = length[idx] < 0
        ctx.fail(own[idx[neg]], pos[idx[neg]], "a negative length")
        ctx.fail(own[idx[~neg]], pos[idx[~neg]], "a length of more bytes than the record has left")
        start[idx] = lim[idx]
        length[idx] = 0
    return start, length, start + length


def read_fixed_spans(ctx: Context, pos: np.ndarray, own: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray,
                                                                                           np.ndarray]:
    """Fixed values of ``size`` bytes at ``pos``: (starts, lengths, positions after)."""
    lim = ctx.lim(own)
    length = np.full(pos.size, size, np.int64)
    newpos = pos + size
    bad = newpos > lim
    if bad.any():
        idx = _fail_at(ctx, bad, pos, own, newpos, TRUNCATED)
        length[idx] = 0
        start = pos.copy()
        start[idx] = lim[idx]
        return start, length, newpos
    return pos.copy(), length, newpos


def read_float(ctx: Context, pos: np.ndarray) -> np.ndarray:
    view = ctx.view("<f4")
    return view[np.minimum(pos, view.size - 1)]


def read_double(ctx: Context, pos: np.ndarray) -> np.ndarray:
    view = ctx.view("<f8")
    return view[np.minimum(pos, view.size - 1)]


def read_boolean(ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    b = ctx.data.take(pos, mode="clip")
    newpos = pos + 1
    if pos.size and b.max() > 1:
        _fail_at(ctx, b > 1, pos, own, newpos, "a boolean byte other than 0 and 1")
    return b == 1, newpos


def scale_timestamps(ctx: Context, values: np.ndarray, pos: np.ndarray, own: np.ndarray,
                     factor: int) -> np.ndarray:
    """Timestamps in microseconds: times ``factor`` (> 0) or floor-divided by ``-factor``;
    a product beyond int64 fails its record."""
    if factor == 1:
        return values
    if factor < 0:
        return values // -factor
    limit = INT64_MAX // factor
    over = (values > limit) | (values < -limit)
    if over.any():
        idx = np.flatnonzero(over)
        ctx.fail(own[idx], pos[idx], "a timestamp beyond the range of int64 microseconds")
        values = values.copy()
        values[idx] = 0
    return values * factor


def read_decimals(ctx: Context, start: np.ndarray, length: np.ndarray, own: np.ndarray,
                  precision: int) -> np.ndarray:
    """Big-endian two's-complement unscaled values (spans of any length) as decimal128
    words: (m, 2) uint64, little-endian. More than ``precision`` digits, or a value past
    128 bits, fails the record."""
    m = start.size
    data = ctx.data
    last = start + length  # one past the value's last byte
    cols = np.arange(16)
    raw = data.take((last - 16)[:, None] + cols, mode="clip")  # the value's last 16 bytes, leading junk
    first = data.take(np.where(length > 16, last - 16, start), mode="clip")
    negative = (first >= 0x80) & (length > 0)
    fill = np.where(negative, 0xFF, 0).astype(np.uint8)
    lead = cols[None, :] < (16 - length)[:, None]
    raw = np.where(lead, fill[:, None], raw)
    words = np.ascontiguousarray(raw[:, ::-1]).view(np.uint64).reshape(m, 2)
    bad = np.zeros(m, np.bool_)
    long_ = np.flatnonzero(length > 16)
    if long_.size:  # the bytes before the last 16 must extend the sign
        extra = length[long_] - 16
        rows = np.repeat(np.arange(long_.size), extra)
        offs = np.arange(rows.size) - np.repeat(np.cumsum(extra) - extra, extra)
        ext = data.take(start[long_][rows] + offs, mode="clip")
        wrong = ext != fill[long_][rows]
        bad[long_[np.unique(rows[wrong])]] = True
    bad |= ~_fits_precision(words, precision)
    if bad.any():
        idx = np.flatnonzero(bad)
        ctx.fail(own[idx], start[idx], f"a decimal with more than {precision} digits")
        words[idx] = 0
    return words


def _fits_precision(words: np.ndarray, precision: int) -> np.ndarray:
    """|value| < 10**precision for the 128-bit little-endian values."""
    bound = 10 ** precision - 1
    lo, hi = words[:, 0], words[:, 1].view(np.int64)
    b_lo, b_hi = np.uint64(bound & 0xFFFFFFFFFFFFFFFF), np.int64(bound >> 64)
    nb = (-bound) & ((1 << 128) - 1)
    n_lo, n_hi = np.uint64(nb & 0xFFFFFFFFFFFFFFFF), np.int64((nb >> 64) - (1 << 64) if nb >> 127 else nb >> 64)
    below = (hi < b_hi) | ((hi == b_hi) & (lo <= b_lo))
    above = (hi > n_hi) | ((hi == n_hi) & (lo >= n_lo))
    return below & above


# ---------------------------------------------------------------------------------------
# Builders


def validity(valid: np.ndarray | None) -> pa.Buffer | None:
    """The Arrow validity bitmap of a mask (None when every row is valid)."""
    if valid is None or valid.all():
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def numbers(type_: pa.DataType, values: np.ndarray, valid: np.ndarray | None) -> pa.Array:
    """An Arrow array of fixed-width ``values`` (numpy of the type's width)."""
    if values.dtype == np.bool_:
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
    else:
        data = pa.py_buffer(np.ascontiguousarray(values))
    return pa.Array.from_buffers(type_, values.shape[0], [validity(valid), data])


def with_validity(array: pa.Array, valid: np.ndarray | None) -> pa.Array:
    """A flat (primitive or binary) array with rows of ``~valid`` null."""
    bitmap = validity(valid)
    if valid is None or bitmap is None:
        return array
    if array.offset or array.null_count:
        return array.take(pa.array(np.arange(len(array)), mask=~valid))
    return pa.Array.from_buffers(array.type, len(array), [bitmap, *array.buffers()[1:]])


def spans(ctx: Context, type_: pa.DataType, start: np.ndarray, length: np.ndarray,
          valid: np.ndarray | None) -> pa.Array:
    """A binary (or string: not validated here) array of the spans of ``ctx.data``,
    gathered by one ``take`` in C++ over an array of gap/value/gap/value spans. Spans are
    in increasing order and do not overlap (the module's invariant)."""
    n = start.size
    if n == 0:
        return pa.array([], type_)
    base = int(start[0])
    end = start + length
    top = int(end.max())
    window = ctx.data[base:top]
    offs = np.empty(2 * n + 1, np.int64)
    offs[0] = 0
    offs[1::2] = start - base
    offs[2::2] = end - base
    if (offs[1:] < offs[:-1]).any():  # never for spans read by this module; kept safe regardless
        offs = np.maximum.accumulate(offs)
    large = window.size >= INT32_MAX
    if not large:
        offs = offs.astype(np.int32)
    gaps = pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), 2 * n,
                                 [None, pa.py_buffer(offs), pa.py_buffer(window)])
    taken = gaps.take(pa.array(np.arange(1, 2 * n, 2, dtype=np.int64)))
    if large:
        if int(length.sum()) >= INT32_MAX:
            raise ValueError("a column of more than 2 GiB of bytes or strings in one batch: decode fewer records "
                             "at a time")
        taken = taken.cast(pa.binary())
    bufs = taken.buffers()
    return pa.Array.from_buffers(type_, n, [validity(valid), bufs[1], bufs[2]], offset=taken.offset)


def invalid_utf8(array: pa.Array) -> np.ndarray:
    """The rows of a binary array that are not UTF-8 (slow: only after a failed check)."""
    bad = np.zeros(len(array), np.bool_)
    for i, value in enumerate(array.to_pylist()):
        if value is not None:
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                bad[i] = True
    return bad


def expand_spans(start: np.ndarray, length: np.ndarray, rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Spans of ``rows`` in an array of ``n``: the other rows empty, placed at the end of
    the span before them so that the spans stay in increasing order."""
    end = np.zeros(n, np.int64)
    end[rows] = start + length
    full_start = np.maximum.accumulate(end)
    full_start[rows] = start
    full_length = np.zeros(n, np.int64)
    full_length[rows] = length
    return full_start, full_length


__all__ = ["Context", "TRUNCATED", "expand_spans", "invalid_utf8", "numbers", "read_boolean", "read_decimals",
           "read_double", "read_fixed_spans", "read_float", "read_int", "read_long", "read_spans",
           "scale_timestamps", "spans", "validity", "with_validity"]
