"""The machinery of ``avro_encode``'s plans: the output of a level of rows (``Out``), the
leaf nodes (one per Avro primitive and logical type) and the error (``AvroEncodeError``).
The nodes of structure (records, unions, arrays, maps) and the compiler are in
``avro_encode_plan``; ``avro_encode`` documents the whole.

A node has two methods over the same conversions:

* ``emit(arr, active, rows, out)``: appends to ``out`` the bytes of every row of ``arr``
  (an Arrow array of ``out.n`` rows) where ``active`` is True (None: all rows); inactive
  rows take no bytes and are not checked. ``rows`` maps a row of this level to the
  top-level row, for errors;
* ``py(value, row)``: the value fastavro's ``schemaless_writer`` expects for one
  ``to_pylist()`` value (``encode_per_row``), in pure Python.

``Out`` holds a level's segments in order: columns (a (rows, width) uint8 matrix, every
row the same width), glue (per-row sizes, an int when every row takes the same, and a
function writing the bytes at per-row positions of a numpy buffer) and blobs (an Arrow
large_binary column; a null takes no bytes). ``payloads()`` makes one part of each run of
columns (one matrix) and of glue (one buffer; narrow columns next to glue are written into
it) and joins the parts and blobs row by row (``binary_join_element_wise``); its result
has no nulls, each value exactly its row's bytes.

Invariants: a writer writes exactly the sizes it declared, at the positions it is given;
a blob holds bytes at active rows only (its other rows null or empty).

Thread-safety: nodes are immutable after compilation; an ``Out`` belongs to one call.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from broker.record.columnar._vec import put_varints, varint_sizes, zigzag
from broker.record.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

_U8 = np.uint8
_SEP = pa.scalar(b"", pa.large_binary())
_EMPTY_BUFFER = pa.py_buffer(b"")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_EPOCH_DAY = datetime.date(1970, 1, 1)
_MICRO = datetime.timedelta(microseconds=1)
_UNIT_EXP = {"s": 0, "ms": 3, "us": 6, "ns": 9}  # Arrow's time units as powers of ten of a second

Write = Callable[[np.ndarray, np.ndarray], None]


class AvroEncodeError(ValueError):
    """A row, or an Arrow type, the writer schema cannot take: ``path`` is the field
    (``""`` for the top-level value), ``row`` the first bad row (None for a type)."""

    def __init__(self, path: str, reason: str, row: int | None = None) -> None:
        self.path = path
        self.reason = reason
        self.row = row
        where = f"field {path!r}" if path else "the value"
        super().__init__(f"{where}: {reason}" + ("" if row is None else f" (row {row})"))

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.path, self.reason, self.row)


class Rows:
    """Maps a row of one level (items of arrays and maps) to its top-level row."""

    __slots__ = ("parent", "offsets")

    def __init__(self, parent: Rows | None = None, offsets: np.ndarray | None = None) -> None:
        self.parent = parent
        self.offsets = offsets  # the parent rows' item offsets, starting at 0

    def top(self, i: int) -> int:
        rows: Rows | None = self
        while rows is not None and rows.parent is not None and rows.offsets is not None:
            i = int(np.searchsorted(rows.offsets, i, side="right")) - 1
            rows = rows.parent
        return i


def first(bad: np.ndarray) -> int | None:
    """The first True of a bool array, or None."""
    if bad.size == 0:
        return None
    i = int(np.argmax(bad))
    return i if bad[i] else None


def both(active: np.ndarray | None, mask: np.ndarray | None) -> np.ndarray | None:
    if active is None:
        return mask
    return active if mask is None else active & mask


def bad_at(active: np.ndarray | None, bad: np.ndarray | None) -> np.ndarray | None:
    """The rows of ``bad`` that are active (None: none)."""
    if bad is None or active is None:
        return bad
    return active & bad


def valid_mask(arr: pa.Array) -> np.ndarray | None:
    """The validity of ``arr`` as bools, None when it has no null."""
    if arr.null_count == 0:
        return None
    buf = arr.buffers()[0]
    if buf is None:  # the null type
        return np.zeros(len(arr), np.bool_)
    bits = np.unpackbits(np.frombuffer(buf, _U8), count=arr.offset + len(arr), bitorder="little")
    return bits[arr.offset:].view(np.bool_)


def values(arr: pa.Array, dtype: Any) -> np.ndarray:
    """The fixed-width values buffer of ``arr`` (anything at null slots)."""
    dt = np.dtype(dtype)
    buf = arr.buffers()[1]
    if buf is None:
        return np.zeros(len(arr), dt)
    return np.frombuffer(buf, dt, count=len(arr), offset=arr.offset * dt.itemsize)


def offsets(arr: pa.Array) -> np.ndarray:
    """The int64 value offsets (n + 1) of a string, binary or list array."""
    t = arr.type
    large = pa.types.is_large_string(t) or pa.types.is_large_binary(t) or pa.types.is_large_list(t)
    dt = np.dtype(np.int64 if large else np.int32)
    buf = arr.buffers()[1]
    if buf is None:
        return np.zeros(len(arr) + 1, np.int64)
    found = np.frombuffer(buf, dt, count=len(arr) + 1, offset=arr.offset * dt.itemsize)
    return found.astype(np.int64, copy=False)


def with_validity(arr: pa.Array, mask: np.ndarray) -> pa.Array:
    """``arr`` with ``mask`` as its validity (same data buffers)."""
    bits = mask if not arr.offset else np.concatenate([np.zeros(arr.offset, np.bool_), mask])
    bitmap = pa.py_buffer(np.packbits(bits, bitorder="little"))
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, *arr.buffers()[1:]], offset=arr.offset)


def large_binary(arr: pa.Array) -> pa.Array:
    return arr if pa.types.is_large_binary(arr.type) else arr.cast(pa.large_binary())


def _put(buf: np.ndarray, pos: np.ndarray, mat: np.ndarray) -> None:
    """Write row k of ``mat`` (k, w) at ``pos[k]``."""
    width = mat.shape[1]
    if width == 1:
        buf[pos] = mat[:, 0]
    else:
        buf[pos[:, None] + np.arange(width)] = mat


class Out:
    """The segments of one level of rows, in order (module docstring)."""

    __slots__ = ("n", "segments")

    def __init__(self, n: int) -> None:
        self.n = n
        # columns: a (n, w) uint8 matrix, the same width at every row; glue: (sizes, write);
        # blobs: Arrow large_binary arrays
        self.segments: list[np.ndarray | tuple[int | np.ndarray, Write] | pa.Array] = []

    def glue(self, sizes: int | np.ndarray, write: Write) -> None:
        self.segments.append((sizes, write))

    def blob(self, arr: pa.Array) -> None:
        self.segments.append(large_binary(arr))

    def varints(self, z: np.ndarray, active: np.ndarray | None) -> None:
        """The unsigned varints ``z`` (uint64, one per row) of the active rows."""
        if active is None:
            size = varint_sizes(z)
            width = int(size.max()) if z.size else 0
            if width and bool((size == width).all()):
                self.segments.append(_varint_columns(z, width))
            else:
                self.glue(size, lambda buf, pos: put_varints(buf, pos, z, size))
            return
        idx = np.flatnonzero(active)
        zs = z[idx]
        size = varint_sizes(zs)
        sizes = np.zeros(self.n, np.int64)
        sizes[idx] = size
        if not zs.size or int(size.max()) == 1:
            z8 = zs.astype(_U8)
            self.glue(sizes, lambda buf, pos: buf.__setitem__(pos[idx], z8))
        else:
            self.glue(sizes, lambda buf, pos: put_varints(buf, pos[idx], zs, size))

    def fixed(self, mat: np.ndarray, active: np.ndarray | None) -> None:
        """Row k of ``mat`` (n, w) uint8 at each active row."""
        width = mat.shape[1]
        if not width:
            return
        if active is None:
            self.segments.append(mat)
            return
        data = np.ascontiguousarray(mat)  # a blob, null at the inactive rows
        offs = np.arange(self.n + 1, dtype=np.int64) * width
        bitmap = pa.py_buffer(np.packbits(active, bitorder="little"))
        self.segments.append(pa.Array.from_buffers(pa.large_binary(), self.n,
                                                   [bitmap, pa.py_buffer(offs), pa.py_buffer(data)]))

    def const(self, data: bytes, active: np.ndarray | None) -> None:
        """The same bytes at each active row."""
        if data:
            row = np.frombuffer(data, _U8)[None, :]
            self.fixed(np.broadcast_to(row, (self.n, len(data))), active)

    def _columns(self, mats: list[np.ndarray]) -> pa.Array:
        n = self.n
        width = sum(m.shape[1] for m in mats)
        if len(mats) == 1 and mats[0].flags.c_contiguous:
            data = mats[0]
        else:
            data = np.empty((n, width), _U8)
            at = 0
            for m in mats:
                data[:, at:at + m.shape[1]] = m
                at += m.shape[1]
        offs = np.arange(n + 1, dtype=np.int64) * width
        return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offs), pa.py_buffer(data)])

    def _glue(self, run: list[tuple[int | np.ndarray, Write]]) -> pa.Array:
        n = self.n
        constant = sum(s for s, _ in run if isinstance(s, int))
        varying = [s for s, _ in run if not isinstance(s, int)]
        if varying:
            total = varying[0] + constant
            for s in varying[1:]:
                total += s
            offs = np.zeros(n + 1, np.int64)
            np.cumsum(total, out=offs[1:])
        else:
            offs = np.arange(n + 1, dtype=np.int64) * constant
        buf = np.empty(int(offs[-1]), _U8)
        pos = offs[:-1].copy()
        for k, (sizes, write) in enumerate(run):
            write(buf, pos)
            if k + 1 < len(run):
                pos += sizes
        return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offs), pa.py_buffer(buf)])

    def payloads(self) -> pa.Array:
        """A large_binary array of the rows' bytes, no nulls (module docstring).

        Consecutive columns make one part (a matrix, no scatter), consecutive glue one
        part (written at per-row positions); columns of one or two bytes next to glue
        join the glue, where they cost less than a part of their own in the join."""
        groups: list[list] = []  # ["columns", mats] | ["glue", run] | ["blob", array]
        for seg in self.segments:
            last = groups[-1] if groups else None
            if isinstance(seg, np.ndarray):
                if last is not None and last[0] == "columns":
                    last[1].append(seg)
                elif last is not None and last[0] == "glue" and seg.shape[1] <= _NARROW:
                    last[1].append(_as_glue(seg))
                else:
                    groups.append(["columns", [seg]])
            elif isinstance(seg, tuple):
                if last is not None and last[0] == "glue":
                    last[1].append(seg)
                elif last is not None and last[0] == "columns" and sum(m.shape[1] for m in last[1]) <= _NARROW:
                    last[0], last[1] = "glue", [_as_glue(m) for m in last[1]] + [seg]
                else:
                    groups.append(["glue", [seg]])
            else:
                groups.append(["blob", seg])
        parts = [self._columns(g[1]) if g[0] == "columns" else self._glue(g[1]) if g[0] == "glue" else g[1]
                 for g in groups]
        if not parts:
            return pa.Array.from_buffers(pa.large_binary(), self.n,
                                         [None, pa.py_buffer(np.zeros(self.n + 1, np.int64)), _EMPTY_BUFFER])
        if len(parts) == 1 and parts[0].null_count == 0:
            return parts[0]
        return pc.binary_join_element_wise(*parts, _SEP, null_handling="replace", null_replacement=b"")


_NARROW = 2  # columns this wide or narrower are written into neighbouring glue


def _as_glue(mat: np.ndarray) -> tuple[int, Write]:
    return mat.shape[1], lambda buf, pos: _put(buf, pos, mat)


def _varint_columns(z: np.ndarray, width: int) -> np.ndarray:
    """The varints ``z``, all ``width`` bytes long, as a (n, width) matrix."""
    if width == 1:
        return z.astype(_U8)[:, None]
    mat = np.empty((z.size, width), _U8)
    for j in range(width):
        byte = (z >> np.uint64(7 * j)) & np.uint64(0x7F)
        if j + 1 < width:
            byte |= np.uint64(0x80)
        mat[:, j] = byte
    return mat


def payload_offsets(payloads: pa.Array) -> tuple[np.ndarray, pa.Buffer]:
    """(int64 offsets, data buffer) of a large_binary array."""
    offs = np.frombuffer(payloads.buffers()[1], np.int64, count=len(payloads) + 1, offset=payloads.offset * 8)
    data = payloads.buffers()[2]
    return offs, (data if data is not None else _EMPTY_BUFFER)


class Node:
    """One node of a plan (module docstring)."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        raise NotImplementedError

    def py(self, value: Any, row: int) -> Any:
        raise NotImplementedError

    def error(self, reason: str, row: int | None = None) -> AvroEncodeError:
        return AvroEncodeError(self.path, reason, row)

    def check(self, bad: np.ndarray | None, rows: Rows, reason: Callable[[int], str] | str) -> None:
        """Raise for the first True of ``bad``; ``reason`` may take its index."""
        if bad is None:
            return
        i = first(bad)
        if i is not None:
            raise self.error(reason(i) if callable(reason) else reason, rows.top(i))

    def present(self, arr: pa.Array, active: np.ndarray | None, rows: Rows) -> None:
        """Raise for a null at an active row (the schema has no null branch here)."""
        if arr.null_count:
            valid = valid_mask(arr)
            assert valid is not None
            self.check(~valid if active is None else active & ~valid, rows, NULL_REASON)

    def null(self, value: Any, row: int) -> None:
        if value is None:
            raise self.error(NULL_REASON, row)


NULL_REASON = "null, but the schema has no null branch here"


class NullNode(Node):
    """Avro ``null``: no bytes (the Arrow null type)."""

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        pass

    def py(self, value: Any, row: int) -> Any:
        return None


class AllNullNode(Node):
    """An Arrow null-type column where the schema has no null: an error at the first
    active row."""

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        self.check(np.ones(len(arr), np.bool_) if active is None else active, rows, NULL_REASON)

    def py(self, value: Any, row: int) -> Any:
        raise self.error(NULL_REASON, row)


class BooleanNode(Node):
    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        self.present(arr, active, rows)
        buf = arr.buffers()[1]
        if buf is None:  # no values at all (every row null)
            out.fixed(np.zeros((len(arr), 1), _U8), active)
            return
        bits = np.unpackbits(np.frombuffer(buf, _U8), count=arr.offset + len(arr), bitorder="little")
        out.fixed(bits[arr.offset:, None], active)

    def py(self, value: Any, row: int) -> Any:
        self.null(value, row)
        return bool(value)


# -- integers: int, long and the logical types on them ---------------------------------


def _rescale(v: np.ndarray, from_exp: int, to_exp: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Integers in 10^-from_exp units to 10^-to_exp units: floored when finer, multiplied
    (with the rows that overflow int64) when coarser."""
    if to_exp == from_exp:
        return v, None
    if to_exp < from_exp:
        return np.floor_divide(v, 10 ** (from_exp - to_exp)), None
    f = 10 ** (to_exp - from_exp)
    over = (v > INT64_MAX // f) | (v < -((INT64_MAX + 1) // f))
    return v * f, over


def _py_rescale(v: int, from_exp: int, to_exp: int) -> int:
    return v // 10 ** (from_exp - to_exp) if to_exp < from_exp else v * 10 ** (to_exp - from_exp)


class IntNode(Node):
    """int and long, and date, time-*, timestamp-*, local-timestamp-* on them: a zigzag
    varint of the value in the schema's unit (``unit``: a power of ten of a second for
    times and timestamps, ``"day"`` for dates, None for plain integers)."""

    __slots__ = ("low", "high", "unit", "what")

    def __init__(self, path: str, is_int: bool, unit: int | str | None, what: str) -> None:
        super().__init__(path)
        self.low, self.high = (INT32_MIN, INT32_MAX) if is_int else (INT64_MIN, INT64_MAX)
        self.unit = unit
        self.what = what

    def ints(self, arr: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
        """(int64 values in the schema's unit, rows that overflow int64 or None)."""
        t = arr.type
        if pa.types.is_timestamp(t) or pa.types.is_time(t):
            raw = values(arr, np.int32 if pa.types.is_time32(t) else np.int64).astype(np.int64, copy=False)
            assert isinstance(self.unit, int)
            return _rescale(raw, _UNIT_EXP[t.unit], self.unit)
        if pa.types.is_date32(t):
            return values(arr, np.int32).astype(np.int64), None
        if pa.types.is_date64(t):
            return np.floor_divide(values(arr, np.int64), 86_400_000), None
        dt = np.dtype(f"{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}")
        raw = values(arr, dt)
        if dt == np.uint64:
            return raw.astype(np.int64), raw > np.uint64(INT64_MAX)
        return raw.astype(np.int64, copy=False), None

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        self.present(arr, active, rows)
        v, over = self.ints(arr)
        self.check(bad_at(active, over), rows, f"the value does not fit a long in the schema's unit ({self.what})")
        if self.low != INT64_MIN:
            bad = (v < self.low) | (v > self.high)
            self.check(both(active, bad), rows, lambda i: f"{int(v[i])} does not fit Avro's int")
        out.varints(zigzag(v), active)

    def py(self, value: Any, row: int) -> Any:
        self.null(value, row)
        v: int
        if isinstance(value, datetime.datetime):
            ns = getattr(value, "value", None)  # pandas' Timestamp: exact nanoseconds
            if isinstance(ns, int):
                v, exp = ns, 9
            else:
                moment = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
                v, exp = (moment - _EPOCH) // _MICRO, 6
            assert isinstance(self.unit, int)
            v = _py_rescale(v, exp, self.unit)
        elif isinstance(value, datetime.date):
            v = (value - _EPOCH_DAY).days
        elif isinstance(value, datetime.time):
            micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
            assert isinstance(self.unit, int)
            v = _py_rescale(micros, 6, self.unit)
        else:
            v = int(value)
        if not INT64_MIN <= v <= INT64_MAX:
            raise self.error(f"the value does not fit a long in the schema's unit ({self.what})", row)
        if not self.low <= v <= self.high:
            raise self.error(f"{v} does not fit Avro's int", row)
        return v


class FloatNode(Node):
    """float (4 bytes) and double (8), little-endian IEEE 754, from floats or integers."""

    __slots__ = ("dtype",)

    def __init__(self, path: str, width: int) -> None:
        super().__init__(path)
        self.dtype = np.dtype("<f4" if width == 4 else "<f8")

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        self.present(arr, active, rows)
        t = arr.type
        if pa.types.is_floating(t):
            raw = values(arr, np.dtype(f"<f{t.bit_width // 8}"))
        else:
            raw = values(arr, np.dtype(f"{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}"))
            raw = raw.astype(np.float64)
        with np.errstate(over="ignore"):
            v = raw.astype(self.dtype, copy=False)
        out.fixed(np.ascontiguousarray(v).view(_U8).reshape(len(arr), self.dtype.itemsize), active)

    def py(self, value: Any, row: int) -> Any:
        self.null(value, row)
        with np.errstate(over="ignore"):
            return float(self.dtype.type(float(value)))


class BytesNode(Node):
    """string and bytes (and uuid): a varint length then the bytes, taken from the Arrow
    column as is."""

    __slots__ = ("text",)

    def __init__(self, path: str, text: bool) -> None:
        super().__init__(path)
        self.text = text

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        self.present(arr, active, rows)
        if pa.types.is_fixed_size_binary(arr.type):
            lengths = np.full(len(arr), arr.type.byte_width, np.int64)
        else:
            lengths = np.diff(offsets(arr))
        out.varints(zigzag(lengths), active)
        out.blob(masked(arr, active, lengths))

    def py(self, value: Any, row: int) -> Any:
        self.null(value, row)
        if self.text:
            return value
        return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def masked(arr: pa.Array, active: np.ndarray | None, lengths: np.ndarray) -> pa.Array:
    """``arr`` as a blob: null (no bytes) at inactive rows that hold bytes."""
    if active is not None and lengths[~active].any():
        return with_validity(arr, active)
    return arr


class FixedNode(Node):
    """fixed (and duration, uuid on fixed): exactly ``size`` bytes, no length."""

    __slots__ = ("size", "name")

    def __init__(self, path: str, size: int, name: str) -> None:
        super().__init__(path)
        self.size = size
        self.name = name

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        self.present(arr, active, rows)
        if pa.types.is_fixed_size_binary(arr.type):  # the compiler checked its width
            out.blob(masked(arr, active, np.full(len(arr), self.size, np.int64)))
            return
        lengths = np.diff(offsets(arr))
        wrong = lengths != self.size
        self.check(both(active, wrong), rows,
                   lambda i: f"{int(lengths[i])} bytes, but the fixed {self.name} has size {self.size}")
        out.blob(masked(arr, active, lengths))

    def py(self, value: Any, row: int) -> Any:
        self.null(value, row)
        if len(value) != self.size:
            raise self.error(f"{len(value)} bytes, but the fixed {self.name} has size {self.size}", row)
        return bytes(value)


class EnumNode(Node):
    """enum: the varint index of the symbol."""

    __slots__ = ("symbols", "name", "lookup")

    def __init__(self, path: str, symbols: list[str], name: str, arrow_type: pa.DataType) -> None:
        super().__init__(path)
        self.symbols = symbols
        self.name = name
        self.lookup = pa.array(symbols, arrow_type)

    def reason(self, symbol: Any) -> str:
        shown = ", ".join(self.symbols[:10]) + (", ..." if len(self.symbols) > 10 else "")
        return f"{symbol!r} is not a symbol of the enum {self.name} ({shown})"

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        self.present(arr, active, rows)
        index = pc.index_in(arr, value_set=self.lookup)
        if index.null_count > arr.null_count:
            found = valid_mask(index)
            known = valid_mask(arr)
            assert found is not None
            unknown = ~found if known is None else known & ~found
            self.check(both(active, unknown), rows, lambda i: self.reason(arr[i].as_py()))
        out.varints(zigzag(values(index, np.int32).astype(np.int64)), active)

    def py(self, value: Any, row: int) -> Any:
        self.null(value, row)
        if value not in self.symbols:
            raise self.error(self.reason(value), row)
        return value


# -- decimals ----------------------------------------------------------------------------

_LOW64 = (1 << 64) - 1


def _at_least(hi: np.ndarray, lo: np.ndarray, bound: int) -> np.ndarray:
    """(hi, lo) >= bound, for unsigned 128-bit values split in uint64 halves."""
    bh, bl = np.uint64(bound >> 64), np.uint64(bound & _LOW64)
    return (hi > bh) | ((hi == bh) & (lo >= bl))


def _byte_count(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """1 + the number of k >= 1 with (hi, lo) >= 2^(8k-1): the bytes of a two's
    complement holding that magnitude (fastavro's ``(bit_length + 8) // 8``)."""
    count = np.ones(hi.shape, np.int64)
    for k in range(1, 16):
        above = _at_least(hi, lo, 1 << (8 * k - 1))
        if not above.any():
            break
        count += above
    return count


class DecimalNode(Node):
    """decimal on bytes (a varint length and fastavro's big-endian two's complement) or on
    fixed (sign-extended to ``size``), from decimal128 of the schema's scale (another
    scale is rescaled when exact)."""

    __slots__ = ("precision", "scale", "size")

    def __init__(self, path: str, precision: int, scale: int, size: int | None) -> None:
        super().__init__(path)
        self.precision = precision
        self.scale = scale
        self.size = size

    def rescaled(self, arr: pa.Array, active: np.ndarray | None, rows: Rows) -> pa.Array:
        t = arr.type
        if t.scale == self.scale:
            return arr
        target = pa.decimal128(min(38, t.precision - t.scale + self.scale), self.scale)
        valid = valid_mask(arr)
        live = arr if active is None else with_validity(arr, active if valid is None else active & valid)
        try:
            return live.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            for i, value in enumerate(live.to_pylist()):
                if value is not None:
                    try:
                        self.unscaled(value, rows.top(i))
                    except OverflowError:
                        raise self.error(f"{value} does not fit decimal({self.precision}, {self.scale})",
                                         rows.top(i)) from None
            raise self.error(f"cannot rescale {t} to the schema's scale {self.scale}") from None

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        self.present(arr, active, rows)
        arr = self.rescaled(arr, active, rows)
        n = len(arr)
        buf = arr.buffers()[1]
        raw = np.zeros((n, 16), _U8) if buf is None else \
            np.frombuffer(buf, _U8, count=16 * n, offset=16 * arr.offset).reshape(n, 16)
        words = raw.view("<u8")
        lo, hi = words[:, 0], words[:, 1]
        neg = (hi >> np.uint64(63)).astype(np.bool_)
        if self.size is None:  # the magnitude, for fastavro's byte count
            mlo = np.where(neg, ~lo + np.uint64(1), lo)
            mhi = np.where(neg, ~hi + (mlo == 0).astype(np.uint64), hi)
            count = _byte_count(mhi, mlo)
        else:
            mlo, mhi = np.where(neg, ~lo, lo), np.where(neg, ~hi, hi)  # -v - 1 for negatives
            count = _byte_count(mhi, mlo)
            mlo = np.where(neg, mlo + np.uint64(1), mlo)
            mhi = np.where(neg, mhi + (mlo == 0).astype(np.uint64), mhi)
        if self.precision < 39:  # decimal128 holds fewer digits
            too_big = _at_least(mhi, mlo, 10 ** self.precision)
            self.check(both(active, too_big), rows,
                       lambda i: f"{arr[i].as_py()} has more than {self.precision} digits (the schema's precision)")
        if self.size is not None:  # the precision fits the size (fastavro checks the schema)
            width = min(self.size, 16)
            mat = np.empty((n, self.size), _U8)
            mat[:, self.size - width:] = raw[:, width - 1::-1]
            if self.size > 16:
                mat[:, :self.size - 16] = np.where(neg, 0xFF, 0).astype(_U8)[:, None]
            out.fixed(mat, active)
            return
        out.varints(zigzag(count), active)
        idx = None if active is None else np.flatnonzero(active)
        sub_count = count if idx is None else count[idx]
        sub_raw = raw if idx is None else raw[idx]
        longest = int(sub_count.max()) if sub_count.size else 0

        def write(buf: np.ndarray, pos: np.ndarray) -> None:
            at = pos if idx is None else pos[idx]
            end = at + sub_count - 1
            for k in range(longest):  # byte k of the little-endian value, written from the end
                sel = np.flatnonzero(sub_count > k)
                buf[end[sel] - k] = sub_raw[sel, k]

        out.glue(count if active is None else count * active, write)

    def unscaled(self, value: decimal.Decimal, row: int) -> int:
        sign, digits, exponent = value.as_tuple()
        if not isinstance(exponent, int):
            raise self.error(f"{value} is not a finite decimal", row)
        unscaled = int("".join(map(str, digits)) or "0")
        shift = exponent + self.scale
        if shift >= 0:
            unscaled *= 10 ** shift
        elif unscaled % 10 ** -shift:
            raise self.error(f"{value} has more than {self.scale} decimal places (the schema's scale)", row)
        else:
            unscaled //= 10 ** -shift
        if unscaled >= 10 ** self.precision:
            raise self.error(f"{value} has more than {self.precision} digits (the schema's precision)", row)
        return -unscaled if sign else unscaled

    def py(self, value: Any, row: int) -> Any:
        self.null(value, row)
        unscaled = self.unscaled(value, row)
        if self.size is None:
            return unscaled.to_bytes((abs(unscaled).bit_length() + 8) // 8, "big", signed=True)
        try:
            return unscaled.to_bytes(self.size, "big", signed=True)
        except OverflowError:
            raise self.error(f"{value} does not fit the fixed of {self.size} bytes", row) from None


__all__ = ["AllNullNode", "AvroEncodeError", "BooleanNode", "BytesNode", "DecimalNode", "EnumNode", "FixedNode",
           "FloatNode", "IntNode", "NULL_REASON", "Node", "NullNode", "Out", "Rows", "bad_at", "both", "first",
           "large_binary", "masked", "offsets", "payload_offsets", "valid_mask", "values", "with_validity"]
