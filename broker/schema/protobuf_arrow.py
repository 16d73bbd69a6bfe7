"""Protobuf messages as Arrow, typed the way Spark's ``from_protobuf`` types them.

Owns ``arrow_type(descriptor, *, recursive_depth=-1) -> pa.DataType`` (the Arrow type of a
message) and ``decode(payloads, writer, reader_type) -> arrow_rows.DecodeResult`` (serialized
messages of one writer message type, as an Arrow array of a reader's type, field matched
by name).

Mapping (Spark's ``SchemaConverters`` for Protobuf, its default options, except the
wrappers, which are unwrapped):

    int32 sint32 sfixed32 uint32 fixed32     int32   (unsigned ones read as Java reads them:
    int64 sint64 sfixed64 uint64 fixed64     int64    above 2^31-1 / 2^63-1 they wrap)
    float / double / bool                    float32 / float64 / bool
    string / bytes                           string / binary
    enum                                     string: the value's name (a number the enum does not
                                             declare: UNKNOWN_ENUM_VALUE_<Enum>_<n>, as Java names it)
    message                                  struct of its fields, in declaration order; the members
                                             of a oneof are plain fields (at most one is set)
    repeated T                               list<T> (items never null)
    map<K, V>                                map<K, V> (values never null)
    google.protobuf.Timestamp                timestamp[us, UTC]
    google.protobuf.Duration                 duration[us] (Spark's DayTimeIntervalType)
    google.protobuf.*Value wrappers          the wrapped primitive, null when unset
    google.protobuf.Struct / Value /         string: the JSON text (Protobuf's JSON mapping; an Any
    ListValue / Any                          whose type is unknown: {"@type": ..., "value": base64})

Every field is nullable except proto2 ``required`` ones. Values follow Spark's default
``emit.default.values=false``: a field that is not set reads as null: a message field not
present, a field with presence not set, an implicit-presence (proto3) scalar holding its
zero value, an empty repeated or map field.

Recursion (a message reachable from itself) is refused unless ``recursive_depth`` is
1..10 (Spark's ``recursive.fields.max.depth``): a message type may then appear that many
times on a path from the root, the root counting once; a field that would exceed it is
left out of the type (1: every recursive field is dropped, 2: one level of recursion).

Decoding: each payload is parsed with the writer's message class (protobuf's C runtime),
then converted to the reader's type by field name, recursively: a reader field the writer
lacks reads as null, a writer field the reader lacks is skipped; a value that does not
fit the reader's type (another kind, an integer out of range) makes the row bad. A
payload that does not parse makes the row bad. Bad rows are null in the array and True in
``bad``; ``errors`` holds one message per bad row, by row index.

Invariants: ``decode(...).array.type == reader_type``; ``len(array) == len(payloads)``; a
null payload is a null row, never a bad one. Sans-IO; pyarrow and protobuf only.

Thread-safety: pure functions; the converter cache is filled under a lock.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

from broker.schema.arrow_rows import DecodeResult, UnfitValueError, rows_to_array
from broker.schema.base import InvalidSchemaError

MAX_RECURSIVE_DEPTH = 10  # Spark's upper bound of recursive.fields.max.depth

TIMESTAMP = "google.protobuf.Timestamp"
DURATION = "google.protobuf.Duration"
JSON_TEXT_TYPES = frozenset({"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue",
                             "google.protobuf.Any"})
WRAPPERS = frozenset({f"google.protobuf.{name}Value" for name in
                      ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")})

_F = FieldDescriptor
_INT32 = frozenset({_F.TYPE_INT32, _F.TYPE_SINT32, _F.TYPE_SFIXED32, _F.TYPE_UINT32, _F.TYPE_FIXED32})
_INT64 = frozenset({_F.TYPE_INT64, _F.TYPE_SINT64, _F.TYPE_SFIXED64, _F.TYPE_UINT64, _F.TYPE_FIXED64})
_UNSIGNED32 = frozenset({_F.TYPE_UINT32, _F.TYPE_FIXED32})
_UNSIGNED64 = frozenset({_F.TYPE_UINT64, _F.TYPE_FIXED64})
_SCALARS: dict[int, pa.DataType] = {
    **{t: pa.int32() for t in _INT32}, **{t: pa.int64() for t in _INT64},
    _F.TYPE_FLOAT: pa.float32(), _F.TYPE_DOUBLE: pa.float64(), _F.TYPE_BOOL: pa.bool_(),
    _F.TYPE_STRING: pa.string(), _F.TYPE_BYTES: pa.binary(), _F.TYPE_ENUM: pa.string(),
}


def arrow_type(descriptor: Descriptor, *, recursive_depth: int = -1) -> pa.DataType:
    """The Arrow type of ``descriptor``'s messages (module docstring); a recursive message
    without an allowed ``recursive_depth`` raises ``InvalidSchemaError``."""
    if recursive_depth > MAX_RECURSIVE_DEPTH:
        raise InvalidSchemaError(f"recursive.fields.max.depth {recursive_depth} is above "
                                 f"{MAX_RECURSIVE_DEPTH}, the most Spark allows")
    return _struct(descriptor, {descriptor.full_name: 1}, recursive_depth)


def _struct(descriptor: Descriptor, seen: dict[str, int], depth: int) -> pa.StructType:
    fields = []
    for fd in descriptor.fields:
        typ = _field_type(fd, seen, depth)
        if typ is not None:
            fields.append(pa.field(fd.name, typ, nullable=not fd.is_required))
    return pa.struct(fields)


def _field_type(fd: FieldDescriptor, seen: dict[str, int], depth: int) -> pa.DataType | None:
    if fd.is_repeated and _is_map(fd):
        key_fd, value_fd = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
        value = _value_type(value_fd, seen, depth)
        if value is None:
            return None
        return pa.map_(_value_type(key_fd, seen, depth), pa.field("value", value, nullable=False))
    typ = _value_type(fd, seen, depth)
    if typ is None:
        return None
    return pa.list_(pa.field("element", typ, nullable=False)) if fd.is_repeated else typ


def _value_type(fd: FieldDescriptor, seen: dict[str, int], depth: int) -> pa.DataType | None:
    if fd.type not in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
        return _SCALARS[fd.type]
    message = fd.message_type
    name = message.full_name
    if name == TIMESTAMP:
        return pa.timestamp("us", tz="UTC")
    if name == DURATION:
        return pa.duration("us")
    if name in WRAPPERS:
        return _SCALARS[message.fields_by_name["value"].type]
    if name in JSON_TEXT_TYPES:
        return pa.string()
    count = seen.get(name, 0)
    if count:
        if depth <= 0:
            raise InvalidSchemaError(
                f"Found recursive reference in Protobuf schema, which can not be processed by Spark by "
                f"default: {fd.full_name} (message {name}); set recursive.fields.max.depth to 1..10")
        if count >= depth:
            return None  # the allowed depth is reached: the field is left out
    return _struct(message, {**seen, name: count + 1}, depth)


def _is_map(fd: FieldDescriptor) -> bool:
    message = fd.message_type
    return message is not None and message.GetOptions().map_entry


# -- decoding ------------------------------------------------------------------------------


Converter = Callable[[Any], Any]
# (id of the writer descriptor, reader type) -> (the descriptor, kept alive, and its converter)
_CACHE: dict[tuple[int, str], tuple[Descriptor, Converter]] = {}
_CACHE_LOCK = threading.Lock()
_CLASSES: dict[int, tuple[Descriptor, type[Message]]] = {}


def _message_class(descriptor: Descriptor) -> type[Message]:
    found = _CLASSES.get(id(descriptor))
    if found is None or found[0] is not descriptor:
        found = (descriptor, message_factory.GetMessageClass(descriptor))
        with _CACHE_LOCK:
            _CLASSES[id(descriptor)] = found
    return found[1]


def decode(payloads: pa.Array, writer: Descriptor, reader_type: pa.DataType) -> DecodeResult:
    """Decode serialized ``writer`` messages (a binary array, nulls allowed) into an array of
    ``reader_type`` (a struct, e.g. ``arrow_type`` of the reader's message), fields matched by
    name (module docstring)."""
    cls = _message_class(writer)
    n = len(payloads)
    bad = np.zeros(n, dtype=bool)
    errors: dict[int, str] = {}
    try:
        convert = converter(writer, reader_type)
    except UnfitValueError as exc:  # the writer's message cannot be read as the reader's at all
        bad[:] = payloads.is_valid().to_numpy(zero_copy_only=False)
        errors.update((int(i), str(exc)) for i in np.flatnonzero(bad))
        return DecodeResult(pa.nulls(n, reader_type), bad, errors)
    rows: list[Any] = []
    for i, raw in enumerate(payloads.to_pylist()):
        if raw is None:
            rows.append(None)
            continue
        try:
            rows.append(convert(cls.FromString(raw)))
        except (DecodeError, UnfitValueError, RuntimeError, ValueError) as exc:
            rows.append(None)
            bad[i] = True
            errors[i] = f"not a {writer.full_name} message ({exc})" if isinstance(exc, DecodeError | RuntimeError) \
                else str(exc)
    return DecodeResult(rows_to_array(rows, reader_type, bad, errors), bad, errors)


def converter(writer: Descriptor, reader_type: pa.DataType) -> Converter:
    """A function turning a ``writer`` message into the Python value of ``reader_type``
    (a dict by field name), cached per (writer, reader type)."""
    key = (id(writer), str(reader_type))
    found = _CACHE.get(key)
    if found is None or found[0] is not writer:
        found = (writer, _message_converter(writer, reader_type, {}))
        with _CACHE_LOCK:
            _CACHE[key] = found
    return found[1]


def _message_converter(writer: Descriptor, reader_type: pa.DataType,
                       building: dict[tuple[str, str], Converter]) -> Converter:
    if not pa.types.is_struct(reader_type):
        raise UnfitValueError(f"message {writer.full_name} read as {reader_type}")
    key = (writer.full_name, str(reader_type))
    if key in building:  # a recursive reader type (never from arrow_type, which is finite)
        return building[key]
    plan: list[tuple[str, Converter]] = []
    names: list[str] = []

    def convert(message: Message) -> dict[str, Any]:
        present = {fd.name: value for fd, value in message.ListFields() if not fd.is_extension}
        out: dict[str, Any] = dict.fromkeys(names)
        for name, conv in plan:
            value = present.get(name)
            if value is not None:
                out[name] = conv(value)
        return out

    building[key] = convert
    for reader_field in reader_type:
        names.append(reader_field.name)
        fd = writer.fields_by_name.get(reader_field.name)
        if fd is not None:
            plan.append((fd.name, _field_converter(fd, reader_field.type, building)))
    return convert


def _field_converter(fd: FieldDescriptor, typ: pa.DataType, building: dict) -> Converter:
    if fd.is_repeated and _is_map(fd):
        if not pa.types.is_map(typ):
            raise UnfitValueError(f"map field {fd.full_name} read as {typ}")
        key_conv = _value_converter(fd.message_type.fields_by_name["key"], typ.key_type, building)
        value_conv = _value_converter(fd.message_type.fields_by_name["value"], typ.item_type, building)
        return lambda container: [(key_conv(k), value_conv(container[k])) for k in container]
    if fd.is_repeated:
        if not (pa.types.is_list(typ) or pa.types.is_large_list(typ)):
            raise UnfitValueError(f"repeated field {fd.full_name} read as {typ}")
        item = _value_converter(fd, typ.value_type, building)
        return lambda values: [item(v) for v in values]
    return _value_converter(fd, typ, building)


def _identity(value: Any) -> Any:
    return value


def _value_converter(fd: FieldDescriptor, typ: pa.DataType, building: dict) -> Converter:
    if fd.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
        name = fd.message_type.full_name
        if name == TIMESTAMP:
            return lambda m: m.seconds * 1_000_000 + m.nanos // 1000
        if name == DURATION:
            return lambda m: m.seconds * 1_000_000 + int(m.nanos / 1000)
        if name in WRAPPERS:
            inner = _value_converter(fd.message_type.fields_by_name["value"], typ, building)
            return lambda m: inner(m.value)
        if name in JSON_TEXT_TYPES:
            return _json_text
        return _message_converter(fd.message_type, typ, building)
    if fd.type == _F.TYPE_ENUM:
        return _enum_converter(fd.enum_type)
    if fd.type in _UNSIGNED32:
        return lambda v: v - (1 << 32) if v >= 1 << 31 else v
    if fd.type in _UNSIGNED64:
        return lambda v: v - (1 << 64) if v >= 1 << 63 else v
    return _identity


def _enum_converter(enum: EnumDescriptor) -> Converter:
    names = {number: value.name for number, value in enum.values_by_number.items()}
    prefix = f"UNKNOWN_ENUM_VALUE_{enum.name}_"
    return lambda number: names.get(number) or f"{prefix}{number}"


def _json_text(message: Message) -> str:
    try:
        return json_format.MessageToJson(message, indent=None, preserving_proto_field_name=True,
                                         descriptor_pool=message.DESCRIPTOR.file.pool)
    except (TypeError, KeyError, json_format.Error):  # an Any of a type the pool does not hold
        type_url = getattr(message, "type_url", "")
        value = getattr(message, "value", b"")
        return json.dumps({"@type": type_url, "value": base64.b64encode(value).decode("ascii")})


__all__ = ["DURATION", "JSON_TEXT_TYPES", "MAX_RECURSIVE_DEPTH", "TIMESTAMP", "WRAPPERS",
           "arrow_type", "converter", "decode"]
