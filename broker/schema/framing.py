"""Confluent's wire framing of a serialized key or value: which schema wrote the bytes.

Owns the bytes in front of (or beside) a serialized payload, as Confluent's serializers
write them and its deserializers read them (confluent-kafka's ``SchemaId``,
``prefix_schema_id_serializer``, ``header_schema_id_serializer``,
``dual_schema_id_deserializer``; the Java ``AbstractKafkaSchemaSerDe``):

* magic 0, the schema id in the payload: ``0x00``, the id as a big-endian int32, the
  payload;
* magic 1, the schema GUID in the payload: ``0x01``, the GUID's 16 bytes (``UUID.bytes``,
  big-endian), the payload;
* Protobuf adds the message indexes right after the id (``with_indexes=True``): the path
  of the message type in the ``.proto`` file (``[0]``: its first message; ``[1, 0]``: the
  first nested message of the second one), as a zigzag varint count then one zigzag
  varint per index; the common ``[0]`` is the single byte ``0x00`` (a count of 0 reads as
  ``[0]``);
* the id in a record header instead (``schema.id.serializer=header_schema_id_serializer``):
  header ``__key_schema_id`` or ``__value_schema_id`` holds ``0x01`` + GUID (+ the message
  indexes for Protobuf), and the record's key or value is the bare payload. A reader looks
  for the header first, then for a prefix (``decode_dual``).

API: ``SchemaId`` (frozen: ``id`` and/or ``guid``, ``message_indexes``), ``encode``,
``decode``, ``header_name``, ``schema_id_header``, ``find_schema_id`` and
``decode_dual``. Every malformed input raises ``FramingError`` (a ``ValueError``) with a
message saying what is wrong (an unknown magic byte, truncated bytes, a bad message index
count); nothing else.

Invariants: ids are Java ints, 0 .. 2**31-1 (an id with the high bit set is refused, as it
would be negative in the Java registry); message indexes are zigzag int32 varints (5 bytes
at most, Java's ``ByteUtils.readVarint``); ``decode(encode(x)) == x`` for an ``x`` with
an id or a guid (not both: the frame carries one), with ``(0,)`` as the indexes of a
Protobuf id given none. Sans-IO, standard library and ``broker.record`` (its varints)
only.

Thread-safety: pure functions over immutable values.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from broker.record.errors import DecodeError
from broker.record.limits import INT32_MAX
from broker.record.varint import decode_varint, encode_varint

MAGIC_BYTE_V0 = 0  # 0x00 + int32 id
MAGIC_BYTE_V1 = 1  # 0x01 + 16-byte GUID
KEY_SCHEMA_ID_HEADER = "__key_schema_id"
VALUE_SCHEMA_ID_HEADER = "__value_schema_id"

_ID = struct.Struct(">I")
_V0_SIZE = 1 + _ID.size
_V1_SIZE = 1 + 16

Headers = Iterable[tuple[str, bytes | None]] | Mapping[str, bytes | None]


class FramingError(ValueError):
    """Bytes that are not a Confluent frame (or a ``SchemaId`` that cannot be written)."""


@dataclass(frozen=True)
class SchemaId:
    """Which schema wrote a payload: its registry ``id``, its ``guid`` or both (a
    registered schema has both; the frame carries one), and for Protobuf the
    ``message_indexes`` of the message type (None: not Protobuf, or not known yet).
    A ``guid`` given as text is parsed to a ``uuid.UUID``."""

    id: int | None = None
    guid: uuid.UUID | None = None
    message_indexes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.id is None and self.guid is None:
            raise FramingError("a schema id needs an id or a guid")
        if self.id is not None:
            if isinstance(self.id, bool) or not isinstance(self.id, int) or not 0 <= self.id <= INT32_MAX:
                raise FramingError(f"schema id {self.id!r} is not an int from 0 to {INT32_MAX}")
        if self.guid is not None and not isinstance(self.guid, uuid.UUID):
            try:
                object.__setattr__(self, "guid", uuid.UUID(str(self.guid)))
            except ValueError:
                raise FramingError(f"schema guid {self.guid!r} is not a UUID") from None
        if self.message_indexes is not None:
            indexes = tuple(self.message_indexes)
            if not indexes:
                raise FramingError("message indexes cannot be empty: the first message type is (0,)")
            for index in indexes:
                if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= INT32_MAX:
                    raise FramingError(f"message index {index!r} is not an int from 0 to {INT32_MAX}")
            object.__setattr__(self, "message_indexes", indexes)


def _indexes_bytes(indexes: tuple[int, ...]) -> bytes:
    if indexes == (0,):
        return b"\x00"
    return encode_varint(len(indexes)) + b"".join(encode_varint(i) for i in indexes)


def _id_bytes(schema_id: SchemaId, magic: int | None) -> bytes:
    if magic is None:
        magic = MAGIC_BYTE_V0 if schema_id.id is not None else MAGIC_BYTE_V1
    if magic == MAGIC_BYTE_V0:
        if schema_id.id is None:
            raise FramingError("magic byte 0 needs a schema id, and this one has only a guid")
        return bytes((MAGIC_BYTE_V0,)) + _ID.pack(schema_id.id)
    if magic == MAGIC_BYTE_V1:
        if schema_id.guid is None:
            raise FramingError("magic byte 1 needs a schema guid, and this one has only an id")
        return bytes((MAGIC_BYTE_V1,)) + schema_id.guid.bytes
    raise FramingError(f"unknown magic byte {magic!r}: Confluent frames use 0 (id) or 1 (guid)")


def encode(schema_id: SchemaId, payload: bytes, *, with_indexes: bool, magic: int | None = None) -> bytes:
    """The framed bytes: magic byte, id (``magic`` 0, the default when the id is known) or
    GUID (``magic`` 1, the default with a guid only), the message indexes when
    ``with_indexes`` (Protobuf; ``(0,)`` when the id has none), then ``payload``.
    Message indexes without ``with_indexes`` are refused rather than dropped."""
    return _prefix(schema_id, with_indexes, magic) + bytes(payload)


def _prefix(schema_id: SchemaId, with_indexes: bool, magic: int | None) -> bytes:
    head = _id_bytes(schema_id, magic)
    if with_indexes:
        return head + _indexes_bytes(schema_id.message_indexes or (0,))
    if schema_id.message_indexes is not None:
        raise FramingError("message indexes are written only with_indexes=True (Protobuf)")
    return head


def decode(data: bytes | bytearray | memoryview, *, with_indexes: bool) -> tuple[SchemaId, int]:
    """The ``SchemaId`` at the start of ``data`` and the offset where the payload starts.
    ``with_indexes``: read Protobuf's message indexes after the id."""
    view = memoryview(data)
    size = len(view)
    if size == 0:
        raise FramingError("truncated frame: no magic byte (0 bytes); is this data Confluent-framed?")
    magic = view[0]
    if magic == MAGIC_BYTE_V0:
        if size < _V0_SIZE:
            raise FramingError(f"truncated frame: {size} bytes, a magic-0 frame starts with {_V0_SIZE} "
                               "(magic byte and int32 schema id)")
        (raw_id,) = _ID.unpack_from(view, 1)
        if raw_id > INT32_MAX:
            raise FramingError(f"schema id {raw_id - (1 << 32)} is negative: not a registry id")
        schema_id, pos = SchemaId(id=raw_id), _V0_SIZE
    elif magic == MAGIC_BYTE_V1:
        if size < _V1_SIZE:
            raise FramingError(f"truncated frame: {size} bytes, a magic-1 frame starts with {_V1_SIZE} "
                               "(magic byte and 16-byte schema guid)")
        schema_id, pos = SchemaId(guid=uuid.UUID(bytes=bytes(view[1:_V1_SIZE]))), _V1_SIZE
    else:
        raise FramingError(f"unknown magic byte 0x{magic:02x}: not Confluent-framed data "
                           "(0x00: schema id, 0x01: schema guid)")
    if not with_indexes:
        return schema_id, pos
    indexes, pos = _read_indexes(view, pos, size)
    return SchemaId(schema_id.id, schema_id.guid, indexes), pos


def _read_indexes(view: memoryview, pos: int, end: int) -> tuple[tuple[int, ...], int]:
    try:
        count, pos = decode_varint(view, pos, end)
        if count == 0:
            return (0,), pos
        if count < 0:
            raise FramingError(f"invalid message index count {count}")
        if count > end - pos:  # each index takes a byte at least
            raise FramingError(f"truncated frame: {count} message indexes announced, "
                               f"{end - pos} bytes left")
        indexes = []
        for _ in range(count):
            index, pos = decode_varint(view, pos, end)
            if index < 0:
                raise FramingError(f"invalid message index {index}")
            indexes.append(index)
    except DecodeError as exc:
        raise FramingError(f"truncated or invalid message indexes: {exc}") from None
    return tuple(indexes), pos


def header_name(*, is_key: bool) -> str:
    """The record header that carries the schema id of the key or of the value."""
    return KEY_SCHEMA_ID_HEADER if is_key else VALUE_SCHEMA_ID_HEADER


def schema_id_header(schema_id: SchemaId, *, is_key: bool, with_indexes: bool) -> tuple[str, bytes]:
    """The header ``(name, value)`` of confluent-kafka's ``header_schema_id_serializer``:
    magic 1, the GUID, the message indexes when ``with_indexes``; the key or value then
    holds the bare payload."""
    return header_name(is_key=is_key), _prefix(schema_id, with_indexes, MAGIC_BYTE_V1)


def _header_value(headers: Headers | None, name: str) -> bytes | None:
    if headers is None:
        return None
    if isinstance(headers, Mapping):
        return headers.get(name)
    for key, value in headers:
        if key == name:
            return value
    return None


def find_schema_id(headers: Headers | None, *, is_key: bool, with_indexes: bool) -> SchemaId | None:
    """The ``SchemaId`` in the record's ``__key_schema_id`` / ``__value_schema_id``
    header (the first of that name; ``headers`` a list of ``(name, value)`` pairs or a
    mapping), or None when there is none. Bytes after the id are refused."""
    value = _header_value(headers, header_name(is_key=is_key))
    if value is None:
        return None
    schema_id, end = decode(value, with_indexes=with_indexes)
    if end != len(value):
        raise FramingError(f"header {header_name(is_key=is_key)} has {len(value) - end} bytes after the schema id")
    return schema_id


def decode_dual(data: bytes | bytearray | memoryview, headers: Headers | None, *, is_key: bool,
                with_indexes: bool) -> tuple[SchemaId, int]:
    """confluent-kafka's ``dual_schema_id_deserializer``: the id from the record header
    when there is one (the payload is then all of ``data``, offset 0), else from the
    prefix of ``data``."""
    found = find_schema_id(headers, is_key=is_key, with_indexes=with_indexes)
    if found is not None:
        return found, 0
    return decode(data, with_indexes=with_indexes)


__all__ = ["FramingError", "KEY_SCHEMA_ID_HEADER", "MAGIC_BYTE_V0", "MAGIC_BYTE_V1", "SchemaId",
           "VALUE_SCHEMA_ID_HEADER", "decode", "decode_dual", "encode", "find_schema_id", "header_name",
           "schema_id_header"]
