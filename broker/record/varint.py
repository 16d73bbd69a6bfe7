"""Zigzag varints as used inside Kafka records (and unsigned varints of the protocol).

Owns: the scalar encoders and decoders of Kafka's variable-length integers.

Format (protobuf's base-128 little-endian groups): each byte carries 7 bits of the value,
least significant group first; the high bit (0x80) says "another byte follows". Signed
values are zigzag-mapped first so small magnitudes stay short:
``zigzag(n) = (n << 1) ^ (n >> 63)``, i.e. 0->0, -1->1, 1->2, -2->3, 2->4.
A varint (int32) takes at most 5 bytes, a varlong (int64) at most 10.

Invariants: decoders never read past ``end`` and raise ``TruncatedError`` when the bytes run
out, ``CorruptRecordError`` when a varint is longer than its type allows.

Thread-safety: pure functions.
"""

from __future__ import annotations

from .errors import CorruptRecordError, EncodeError, TruncatedError
from .limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

MAX_VARINT_BYTES = 5  # int32 needs ceil(32 / 7) groups
MAX_VARLONG_BYTES = 10  # int64 needs ceil(64 / 7) groups


def zigzag_encode(n: int) -> int:
    """Map a signed int64 to the unsigned zigzag form."""
    return (n << 1) ^ (n >> 63)


def zigzag_decode(z: int) -> int:
    """Map an unsigned zigzag value back to its signed form."""
    return (z >> 1) ^ -(z & 1)


def encode_uvarint(value: int) -> bytes:
    """Unsigned varint bytes of ``value`` (0 <= value < 2**64)."""
    if value < 0 or value >= 1 << 64:
        raise EncodeError(f"unsigned varint out of range: {value}")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag varint bytes of a signed int32."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise EncodeError(f"varint (int32) out of range: {value}")
    return encode_uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """Zigzag varint bytes of a signed int64."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise EncodeError(f"varlong (int64) out of range: {value}")
    return encode_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def decode_uvarint(buf, pos: int, end: int, max_bytes: int = MAX_VARLONG_BYTES) -> tuple[int, int]:
    """Decode an unsigned varint at ``buf[pos:end]``; return (value, position after it)."""
    if pos >= end:
        raise TruncatedError("varint: no bytes left")
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    i = pos + 1
    limit = min(end, pos + max_bytes)
    while i < limit:
        b = buf[i]
        result |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return result, i
        shift += 7
    if limit == end and end - pos < max_bytes:
        raise TruncatedError("varint runs past the end of the buffer")
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


def decode_varint(buf, pos: int, end: int) -> tuple[int, int]:
    """Decode a zigzag int32 varint; return (value, position after it)."""
    z, pos = decode_uvarint(buf, pos, end, MAX_VARINT_BYTES)
    if z > 0xFFFFFFFF:
        raise CorruptRecordError("varint does not fit in int32")
    return (z >> 1) ^ -(z & 1), pos


def decode_varlong(buf, pos: int, end: int) -> tuple[int, int]:
    """Decode a zigzag int64 varlong; return (value, position after it)."""
    z, pos = decode_uvarint(buf, pos, end, MAX_VARLONG_BYTES)
    if z > 0xFFFFFFFFFFFFFFFF:
        raise CorruptRecordError("varlong does not fit in int64")
    return (z >> 1) ^ -(z & 1), pos


def size_of_varint(value: int) -> int:
    """Bytes taken by the zigzag varint (or varlong) of ``value``."""
    z = (value << 1) ^ (value >> 63)
    z &= 0xFFFFFFFFFFFFFFFF
    n = 1
    while z >= 0x80:
        z >>= 7
        n += 1
    return n
