"""Kafka's primitive wire types: a bounded ``Reader`` and an appending ``Writer``.

Owns the byte layout of every primitive type of the Kafka protocol (see "Protocol
Primitive Types" in Kafka's protocol guide), all big-endian:

    int8 / int16 / int32 / int64     fixed width, two's complement
    uint16 / uint32                  fixed width, unsigned
    float64                          IEEE 754 double
    boolean                          int8, 0 = false, anything else = true
    uuid                             16 raw bytes (returned as uuid.UUID)
    varint / varlong                 zig-zag, protobuf style (used inside records)
    unsigned varint                  7 bits per byte, low groups first (flexible versions)
    string                           int16 length + UTF-8; nullable: length -1 = null
    compact string                   uvarint (length + 1) + UTF-8; compact nullable: 0 = null
    bytes / nullable bytes           int32 length + bytes (-1 = null)
    compact (nullable) bytes         uvarint (length + 1) + bytes (0 = null)
    records                          nullable bytes holding record batches (compact in
                                     flexible versions); decoded as a zero-copy memoryview
    array                            int32 count + items (-1 = null)
    compact array                    uvarint (count + 1) + items (0 = null)
    tagged fields                    uvarint count, then (uvarint tag, uvarint size, bytes)*

Invariants:

* ``Reader`` never reads outside ``[pos, end)`` of the memoryview it was given (its
  buffer is sliced to ``end``, so ``struct.unpack_from`` bounds-checks for free).
* Every length and count is checked against the bytes remaining *before* anything is
  allocated: an array declaring 2**31-1 items with 10 bytes left raises at once. Callers
  pass the minimum encoded width of one item, so the check is ``count * width <= left``.
* Decoding raises only ``ProtocolDecodeError`` subclasses (``TruncatedFrameError``,
  ``InvalidValueError``); encoding raises ``ProtocolEncodeError`` for unencodable values.
* ``records`` come back as a memoryview slice of the input (no copy). Keep the input
  alive and unmodified while the slice is in use.
* Decoded Python objects are larger than their bytes (a 1-byte boolean in an array
  becomes a list slot, an empty compact string ~50 bytes of objects): the frame size
  limit (``frame.DEFAULT_MAX_FRAME_BYTES``) bounds the total, and a reader given an
  element budget (``limit_elements``: the broker's request path, ``MAX_REQUEST_ELEMENTS``)
  also refuses a frame whose arrays and tagged sections declare more elements in all
  than the budget (``TooManyElementsError``), so a valid-looking request of millions of
  one-byte elements cannot grow ~28x in memory. The budget is shared with the readers
  ``sub`` makes (tagged fields); readers without one (clients, tools) are unlimited.

Thread-safety: a ``Reader`` or ``Writer`` is a cursor owned by one thread at a time.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from broker.protocol.errors import InvalidValueError, ProtocolEncodeError, TooManyElementsError, TruncatedFrameError
from broker.record.limits import INT32_MAX

# --- Limits (each one a named constant with its reason) -----------------------------

# Kafka rejects any string, compact or not, longer than Short.MAX_VALUE bytes (the
# generated readers check ``length > 0x7fff``): client ids, topic names, group ids...
MAX_STRING_BYTES = 0x7FFF
# An unsigned varint carrying an int32 has at most 5 bytes (ByteUtils.readUnsignedVarint
# throws "Varint is too long" beyond); a varlong at most 10. Bounding the loop stops a
# run of 0xFF bytes from building an unbounded integer.
MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10
# Lengths and counts are Java ints on the wire: anything above is not a valid length.
MAX_LENGTH = INT32_MAX
# A tagged field costs at least 2 bytes (uvarint tag + uvarint size), which bounds the
# number of tags a section can declare by the bytes that remain.
MIN_TAGGED_FIELD_BYTES = 2
# The most array elements plus tagged fields one request may declare in all (the broker
# sets it on its request readers; Kafka has no such limit but a JVM heap). Far above any
# real request: a Metadata or Fetch request naming every partition of a 200k-partition
# cluster has ~200k-400k elements.
MAX_REQUEST_ELEMENTS = 1_000_000
# Writer.records/raw: buffers at least this large are kept as separate parts instead of
# being copied into the writer's bytearray, so a Fetch response can hand log bytes to
# ``socket.sendmsg`` untouched. Smaller ones are cheaper to copy than to track.
ZERO_COPY_MIN_BYTES = 16 * 1024

ZERO_UUID = uuid.UUID(int=0)

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

_u_i8 = _I8.unpack_from
_u_i16 = _I16.unpack_from
_u_i32 = _I32.unpack_from
_u_i64 = _I64.unpack_from
_u_u16 = _U16.unpack_from
_u_u32 = _U32.unpack_from
_u_f64 = _F64.unpack_from


def _truncated(what: str, need: int, left: int) -> TruncatedFrameError:
    return TruncatedFrameError(f"{what} needs {need} bytes, {left} left")


class Reader:
    """A cursor over ``buf[pos:end]``; each method reads one value and advances ``pos``.

    ``Reader(data, offset=0, end=None)`` accepts bytes, bytearray or a memoryview.
    """

    __slots__ = ("buf", "pos", "end", "budget")

    def __init__(self, data: Any, offset: int = 0, end: int | None = None) -> None:
        mv = data if type(data) is memoryview else memoryview(data)
        if mv.ndim != 1 or mv.itemsize != 1 or mv.format != "B":
            mv = mv.cast("B")
        size = len(mv)
        if end is None:
            end = size
        elif not 0 <= end <= size:
            raise ValueError(f"end {end} outside 0..{size}")
        if not 0 <= offset <= end:
            raise ValueError(f"offset {offset} outside 0..{end}")
        self.buf = mv if end == size else mv[:end]
        self.pos = offset
        self.end = end
        self.budget: list[int] | None = None  # [elements left], shared with sub-readers

    def limit_elements(self, limit: int = MAX_REQUEST_ELEMENTS) -> None:
        """Refuse (``TooManyElementsError``) arrays and tagged sections declaring more than
        ``limit`` elements in all, from here on (module docstring)."""
        self.budget = [limit]

    def spend(self, n: int) -> None:
        """Count ``n`` declared elements against the budget (if any)."""
        budget = self.budget
        if budget is not None:
            budget[0] -= n
            if budget[0] < 0:
                raise TooManyElementsError(f"the request declares more than the {MAX_REQUEST_ELEMENTS} "
                                           "array elements and tagged fields one request may hold")

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def __repr__(self) -> str:
        return f"Reader(pos={self.pos}, end={self.end})"

    # -- fixed width -----------------------------------------------------------------

    def int8(self) -> int:
        pos = self.pos
        try:
            v = _u_i8(self.buf, pos)[0]
        except struct.error:
            raise _truncated("int8", 1, self.end - pos) from None
        self.pos = pos + 1
        return v

    def int16(self) -> int:
        pos = self.pos
        try:
            v = _u_i16(self.buf, pos)[0]
        except struct.error:
            raise _truncated("int16", 2, self.end - pos) from None
        self.pos = pos + 2
        return v

    def int32(self) -> int:
        pos = self.pos
        try:
            v = _u_i32(self.buf, pos)[0]
        except struct.error:
            raise _truncated("int32", 4, self.end - pos) from None
        self.pos = pos + 4
        return v

    def int64(self) -> int:
        pos = self.pos
        try:
            v = _u_i64(self.buf, pos)[0]
        except struct.error:
            raise _truncated("int64", 8, self.end - pos) from None
        self.pos = pos + 8
        return v

    def uint16(self) -> int:
        pos = self.pos
        try:
            v = _u_u16(self.buf, pos)[0]
        except struct.error:
            raise _truncated("uint16", 2, self.end - pos) from None
        self.pos = pos + 2
        return v

    def uint32(self) -> int:
        pos = self.pos
        try:
            v = _u_u32(self.buf, pos)[0]
        except struct.error:
            raise _truncated("uint32", 4, self.end - pos) from None
        self.pos = pos + 4
        return v

    def float64(self) -> float:
        pos = self.pos
        try:
            v = _u_f64(self.buf, pos)[0]
        except struct.error:
            raise _truncated("float64", 8, self.end - pos) from None
        self.pos = pos + 8
        return v

    def boolean(self) -> bool:
        pos = self.pos
        if pos >= self.end:
            raise _truncated("boolean", 1, 0)
        self.pos = pos + 1
        return self.buf[pos] != 0

    def uuid(self) -> uuid.UUID:
        pos = self.pos
        end = pos + 16
        if end > self.end:
            raise _truncated("uuid", 16, self.end - pos)
        self.pos = end
        return uuid.UUID(bytes=bytes(self.buf[pos:end]))

    def unpack(self, fmt: struct.Struct, size: int) -> tuple:
        """Several fixed-width values at once (``size == fmt.size``)."""
        pos = self.pos
        try:
            v = fmt.unpack_from(self.buf, pos)
        except struct.error:
            raise _truncated("fixed-width fields", size, self.end - pos) from None
        self.pos = pos + size
        return v

    # -- varints ---------------------------------------------------------------------

    def _uvar(self, max_bytes: int, what: str) -> int:
        buf = self.buf
        pos = self.pos
        end = self.end
        result = 0
        shift = 0
        limit = pos + max_bytes
        while True:
            if pos >= end:
                raise _truncated(what, pos - self.pos + 1, end - self.pos)
            if pos >= limit:
                raise InvalidValueError(f"{what} longer than {max_bytes} bytes")
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return result
            shift += 7

    def uvarint(self) -> int:
        """Unsigned varint of an int32 (at most 5 bytes, value < 2**32)."""
        pos = self.pos
        if pos < self.end:
            b = self.buf[pos]
            if b < 0x80:  # fast path: one byte, the overwhelmingly common case
                self.pos = pos + 1
                return b
        v = self._uvar(MAX_VARINT_BYTES, "unsigned varint")
        if v > 0xFFFFFFFF:
            raise InvalidValueError(f"unsigned varint {v} does not fit 32 bits")
        return v

    def uvarlong(self) -> int:
        v = self._uvar(MAX_VARLONG_BYTES, "unsigned varlong")
        if v > 0xFFFFFFFFFFFFFFFF:
            raise InvalidValueError(f"unsigned varlong {v} does not fit 64 bits")
        return v

    def varint(self) -> int:
        """Zig-zag signed varint (int32)."""
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def varlong(self) -> int:
        """Zig-zag signed varlong (int64)."""
        v = self.uvarlong()
        return (v >> 1) ^ -(v & 1)

    # -- lengths, counts and slices ----------------------------------------------------

    def _compact_length(self, what: str) -> int:
        """uvarint (N + 1): returns N, -1 for null."""
        pos = self.pos
        if pos < self.end:
            b = self.buf[pos]
            if b < 0x80:  # fast path: lengths below 127
                self.pos = pos + 1
                return b - 1
        v = self.uvarint()
        if v > MAX_LENGTH:
            raise InvalidValueError(f"{what} length {v - 1} above {MAX_LENGTH}")
        return v - 1

    def check_count(self, count: int, min_width: int) -> None:
        """Raise unless ``count`` items of at least ``min_width`` bytes can fit in what
        remains. Called before any list is built."""
        if count * min_width > self.end - self.pos:
            raise TruncatedFrameError(
                f"count {count} of items of >= {min_width} bytes needs more than the "
                f"{self.end - self.pos} bytes left"
            )

    def raw(self, n: int) -> memoryview:
        """The next ``n`` bytes as a memoryview slice (no copy)."""
        pos = self.pos
        end = pos + n
        if n < 0 or end > self.end:
            raise _truncated("raw bytes", n, self.end - pos)
        self.pos = end
        return self.buf[pos:end]

    def skip(self, n: int) -> None:
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise _truncated("skip", n, self.end - pos)
        self.pos = pos + n

    def sub(self, n: int) -> Reader:
        """A reader over the next ``n`` bytes; this reader advances past them."""
        pos = self.pos
        end = pos + n
        if n < 0 or end > self.end:
            raise _truncated("tagged field", n, self.end - pos)
        self.pos = end
        r = Reader.__new__(Reader)
        r.buf = self.buf[:end]
        r.pos = pos
        r.end = end
        r.budget = self.budget
        return r

    def _utf8(self, n: int) -> str:
        if n > MAX_STRING_BYTES:
            raise InvalidValueError(f"string length {n} above {MAX_STRING_BYTES}")
        pos = self.pos
        end = pos + n
        if end > self.end:
            raise _truncated("string", n, self.end - pos)
        self.pos = end
        try:
            return str(self.buf[pos:end], "utf-8")
        except UnicodeDecodeError as e:
            raise InvalidValueError(f"string is not valid UTF-8: {e}") from None

    def _bytes(self, n: int) -> bytes:
        pos = self.pos
        end = pos + n
        if end > self.end:
            raise _truncated("bytes", n, self.end - pos)
        self.pos = end
        return self.buf[pos:end].tobytes()

    def _view(self, n: int) -> memoryview:
        pos = self.pos
        end = pos + n
        if end > self.end:
            raise _truncated("records", n, self.end - pos)
        self.pos = end
        return self.buf[pos:end]

    # -- strings -------------------------------------------------------------------

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise InvalidValueError("non-nullable string is null")
        return self._utf8(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self._utf8(n)

    def compact_string(self) -> str:
        n = self._compact_length("compact string")
        if n < 0:
            raise InvalidValueError("non-nullable compact string is null")
        return self._utf8(n)

    def compact_nullable_string(self) -> str | None:
        n = self._compact_length("compact string")
        return None if n < 0 else self._utf8(n)

    # -- bytes -------------------------------------------------------------------------

    def bytes(self) -> bytes:
        n = self.int32()
        if n < 0:
            raise InvalidValueError("non-nullable bytes is null")
        return self._bytes(n)

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else self._bytes(n)

    def compact_bytes(self) -> bytes:
        n = self._compact_length("compact bytes")
        if n < 0:
            raise InvalidValueError("non-nullable compact bytes is null")
        return self._bytes(n)

    def compact_nullable_bytes(self) -> bytes | None:
        n = self._compact_length("compact bytes")
        return None if n < 0 else self._bytes(n)

    # -- records (zero copy) -------------------------------------------------------------

    def records(self) -> memoryview | None:
        """Nullable int32-length bytes holding record batches, as a memoryview slice."""
        n = self.int32()
        return None if n < 0 else self._view(n)

    def compact_records(self) -> memoryview | None:
        n = self._compact_length("compact records")
        return None if n < 0 else self._view(n)

    # -- arrays ------------------------------------------------------------------------

    def array(self, read_item: Callable[[Reader], Any], min_width: int = 1) -> list:
        n = self.int32()
        if n < 0:
            raise InvalidValueError("non-nullable array is null")
        if n * min_width > self.end - self.pos:
            self.check_count(n, min_width)
        if self.budget is not None:
            self.spend(n)
        return [read_item(self) for _ in range(n)]

    def nullable_array(self, read_item: Callable[[Reader], Any], min_width: int = 1) -> list | None:
        n = self.int32()
        if n < 0:
            return None
        if n * min_width > self.end - self.pos:
            self.check_count(n, min_width)
        if self.budget is not None:
            self.spend(n)
        return [read_item(self) for _ in range(n)]

    def compact_array(self, read_item: Callable[[Reader], Any], min_width: int = 1) -> list:
        n = self._compact_length("compact array")
        if n < 0:
            raise InvalidValueError("non-nullable compact array is null")
        if n * min_width > self.end - self.pos:
            self.check_count(n, min_width)
        if self.budget is not None:
            self.spend(n)
        return [read_item(self) for _ in range(n)]

    def compact_nullable_array(
        self, read_item: Callable[[Reader], Any], min_width: int = 1
    ) -> list | None:
        n = self._compact_length("compact array")
        if n < 0:
            return None
        if n * min_width > self.end - self.pos:
            self.check_count(n, min_width)
        if self.budget is not None:
            self.spend(n)
        return [read_item(self) for _ in range(n)]

    def nullable_struct(self, read_struct: Callable[[Reader], Any]) -> Any:
        """Kafka's nullable struct: int8 -1 = null, 1 = a struct follows."""
        marker = self.int8()
        if marker < 0:
            return None
        return read_struct(self)

    # -- tagged fields -----------------------------------------------------------------

    def tagged_count(self) -> int:
        pos = self.pos
        if pos < self.end and self.buf[pos] == 0:  # fast path: no tagged fields
            self.pos = pos + 1
            return 0
        n = self.uvarint()
        if n * MIN_TAGGED_FIELD_BYTES > self.end - self.pos:
            self.check_count(n, MIN_TAGGED_FIELD_BYTES)
        if self.budget is not None:
            self.spend(n)
        return n

    def tagged_fields(self) -> list[tuple[int, memoryview]]:
        """Read a whole tagged-field section as ``[(tag, raw value bytes)]``."""
        out = []
        for _ in range(self.tagged_count()):
            tag = self.uvarint()
            out.append((tag, self.raw(self.uvarint())))
        return out

    def skip_tagged_fields(self) -> None:
        for _ in range(self.tagged_count()):
            self.uvarint()
            self.skip(self.uvarint())


def _encode_error(what: str, value: Any) -> ProtocolEncodeError:
    return ProtocolEncodeError(f"cannot encode {value!r} as {what}")


def _buffer_len(value: Any) -> int:
    return value.nbytes if type(value) is memoryview else len(value)


class Writer:
    """Appends encoded values to a bytearray; big buffers (records) become separate parts.

    ``buffers()`` returns the parts in order (for ``socket.sendmsg``), ``getvalue()`` the
    joined bytes. ``len(writer)`` is the total encoded size.
    """

    __slots__ = ("buf", "_parts", "_parts_len", "zero_copy_min")

    def __init__(self, zero_copy_min: int = ZERO_COPY_MIN_BYTES) -> None:
        self.buf = bytearray()
        self._parts: list[Any] = []
        self._parts_len = 0
        self.zero_copy_min = zero_copy_min

    def __len__(self) -> int:
        return self._parts_len + len(self.buf)

    def buffers(self) -> list[Any]:
        if not self._parts:
            return [self.buf]
        return [*self._parts, self.buf] if self.buf else list(self._parts)

    def getvalue(self) -> bytes:
        if not self._parts:
            return bytes(self.buf)
        return b"".join(self.buffers())

    def raw(self, data: Any) -> None:
        """Append bytes as they are; large buffers are referenced, not copied."""
        n = _buffer_len(data)
        if n >= self.zero_copy_min:
            if self.buf:
                self._parts.append(self.buf)
                self._parts_len += len(self.buf)
                self.buf = bytearray()
            self._parts.append(data)
            self._parts_len += n
        else:
            self.buf += data

    # -- fixed width -----------------------------------------------------------------

    def int8(self, v: int) -> None:
        try:
            self.buf += _I8.pack(v)
        except struct.error:
            raise _encode_error("int8", v) from None

    def int16(self, v: int) -> None:
        try:
            self.buf += _I16.pack(v)
        except struct.error:
            raise _encode_error("int16", v) from None

    def int32(self, v: int) -> None:
        try:
            self.buf += _I32.pack(v)
        except struct.error:
            raise _encode_error("int32", v) from None

    def int64(self, v: int) -> None:
        try:
            self.buf += _I64.pack(v)
        except struct.error:
            raise _encode_error("int64", v) from None

    def uint16(self, v: int) -> None:
        try:
            self.buf += _U16.pack(v)
        except struct.error:
            raise _encode_error("uint16", v) from None

    def uint32(self, v: int) -> None:
        try:
            self.buf += _U32.pack(v)
        except struct.error:
            raise _encode_error("uint32", v) from None

    def float64(self, v: float) -> None:
        try:
            self.buf += _F64.pack(v)
        except struct.error:
            raise _encode_error("float64", v) from None

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def pack(self, fmt: struct.Struct, *values: Any) -> None:
        """Several fixed-width values at once."""
        try:
            self.buf += fmt.pack(*values)
        except struct.error:
            raise _encode_error(f"struct {fmt.format}", values) from None

    def uuid(self, v: uuid.UUID) -> None:
        if type(v) is not uuid.UUID:
            raise _encode_error("uuid", v)
        self.buf += v.bytes

    # -- varints ---------------------------------------------------------------------

    def uvarint(self, v: int) -> None:
        if v < 0x80:
            if v < 0:
                raise _encode_error("unsigned varint", v)
            self.buf.append(v)
            return
        if v > 0xFFFFFFFF:
            raise _encode_error("unsigned varint", v)
        self._uvar(v)

    def uvarlong(self, v: int) -> None:
        if not 0 <= v <= 0xFFFFFFFFFFFFFFFF:
            raise _encode_error("unsigned varlong", v)
        self._uvar(v)

    def _uvar(self, v: int) -> None:
        buf = self.buf
        while v >= 0x80:
            buf.append((v & 0x7F) | 0x80)
            v >>= 7
        buf.append(v)

    def varint(self, v: int) -> None:
        if not -0x80000000 <= v <= 0x7FFFFFFF:
            raise _encode_error("varint", v)
        self._uvar(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def varlong(self, v: int) -> None:
        if not -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
            raise _encode_error("varlong", v)
        self._uvar(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)

    # -- strings -------------------------------------------------------------------

    @staticmethod
    def _utf8(v: Any, what: str) -> bytes:
        if type(v) is not str:
            raise _encode_error(what, v)
        data = v.encode("utf-8")
        if len(data) > MAX_STRING_BYTES:
            raise ProtocolEncodeError(f"{what} of {len(data)} bytes above {MAX_STRING_BYTES}")
        return data

    def string(self, v: str) -> None:
        data = self._utf8(v, "string")
        self.buf += _I16.pack(len(data))
        self.buf += data

    def nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf += b"\xff\xff"
        else:
            self.string(v)

    def compact_string(self, v: str) -> None:
        data = self._utf8(v, "compact string")
        self.uvarint(len(data) + 1)
        self.buf += data

    def compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_string(v)

    # -- bytes -------------------------------------------------------------------------

    def bytes(self, v: Any) -> None:
        if v is None:
            raise _encode_error("non-nullable bytes", v)
        self.int32(_buffer_len(v))
        self.raw(v)

    def nullable_bytes(self, v: Any) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
        else:
            self.bytes(v)

    def compact_bytes(self, v: Any) -> None:
        if v is None:
            raise _encode_error("non-nullable compact bytes", v)
        self.uvarint(_buffer_len(v) + 1)
        self.raw(v)

    def compact_nullable_bytes(self, v: Any) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_bytes(v)

    # -- records -----------------------------------------------------------------------

    @staticmethod
    def _records_parts(v: Any) -> Sequence[Any]:
        # A list/tuple of buffers is written back to back (batches from several segments).
        return v if isinstance(v, (list, tuple)) else (v,)

    def records(self, v: Any) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
            return
        parts = self._records_parts(v)
        self.int32(sum(_buffer_len(p) for p in parts))
        for p in parts:
            self.raw(p)

    def compact_records(self, v: Any) -> None:
        if v is None:
            self.buf.append(0)
            return
        parts = self._records_parts(v)
        self.uvarint(sum(_buffer_len(p) for p in parts) + 1)
        for p in parts:
            self.raw(p)

    # -- arrays ------------------------------------------------------------------------

    def array(self, items: Sequence[Any], write_item: Callable[[Writer, Any], None]) -> None:
        if items is None:
            raise _encode_error("non-nullable array", items)
        self.int32(len(items))
        for item in items:
            write_item(self, item)

    def nullable_array(self, items: Sequence[Any] | None, write_item: Callable) -> None:
        if items is None:
            self.buf += b"\xff\xff\xff\xff"
        else:
            self.array(items, write_item)

    def compact_array(self, items: Sequence[Any], write_item: Callable) -> None:
        if items is None:
            raise _encode_error("non-nullable compact array", items)
        self.uvarint(len(items) + 1)
        for item in items:
            write_item(self, item)

    def compact_nullable_array(self, items: Sequence[Any] | None, write_item: Callable) -> None:
        if items is None:
            self.buf.append(0)
        else:
            self.compact_array(items, write_item)

    def nullable_struct(self, value: Any, write_struct: Callable) -> None:
        if value is None:
            self.buf.append(0xFF)
        else:
            self.buf.append(1)
            write_struct(self, value)

    # -- tagged fields -----------------------------------------------------------------

    def empty_tagged_fields(self) -> None:
        self.buf.append(0)

    def tagged_fields(self, fields: Sequence[tuple[int, Any]]) -> None:
        """Write ``[(tag, raw value bytes)]`` as a tagged-field section, sorted by tag."""
        self.uvarint(len(fields))
        for tag, data in sorted(fields, key=lambda f: f[0]):
            self.uvarint(tag)
            self.uvarint(_buffer_len(data))
            self.buf += data
