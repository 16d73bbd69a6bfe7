"""Typed writes on the executors: a batch's ``value`` / ``key`` column (a struct, or any
type the writer schema takes) encoded to the framed bytes the sink sends.

Owns ``encode_column(array, encoding) -> pa.BinaryArray`` and ``TypedEncodeError``.
The writer schema and its id come resolved from the driver (``write_schema.FieldEncoding``);
the parsed schema is cached per process (``CatalogEntry.parsed``).

Format of every payload: with ``confluent`` framing, magic byte 0, the schema id (int32
big-endian) and, for Protobuf, the message indexes (``broker.schema.framing``), then:

* Avro: the Avro binary (``broker.schema.avro_encode.encode``: columnar, fastavro's
  exact bytes);
* JSON: the row as compact UTF-8 JSON (binary as base64, dates and timestamps as ISO 8601
  text, decimals as numbers), validated against the writer schema first, as Confluent's
  JSON Schema serializer does;
* Protobuf: the message's serialized bytes (``google.protobuf``), built from the row
  with ``json_format.ParseDict`` (fields by name; a field of the row the message lacks is
  an error).

A null row is a null payload (a tombstone for the value, no key for the key), never framed.

Invariants: the output has one payload per input row, in order; a row the writer schema
cannot take raises ``TypedEncodeError`` (a ``ValueError``) naming the column, the row
(0-based, in the batch) and the reason; nothing is returned for a batch with a bad row.

Thread-safety: pure functions of their arguments and of process caches guarded by locks.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import threading
from typing import TYPE_CHECKING, Any

from .options import AVRO, JSON, PROTOBUF

if TYPE_CHECKING:
    import pyarrow as pa

    from .write_schema import FieldEncoding

__all__ = ["encode_column", "TypedEncodeError"]

_CLASSES: dict[tuple[str, tuple[int, ...]], Any] = {}
_CLASSES_LOCK = threading.Lock()


class TypedEncodeError(ValueError):
    """A row the writer schema cannot take (the column, the row and why)."""


def _json_ready(value: Any, typ: Any = None) -> Any:
    """A row of an Arrow column (``to_pylist``) as JSON values, directed by the column's
    Arrow type ``typ`` (a map, even an empty one, becomes an object; None: by shape)."""
    import pyarrow as pa

    if value is None:
        return None
    if isinstance(value, dict):
        fields = {f.name: f.type for f in typ} if typ is not None and pa.types.is_struct(typ) else {}
        return {str(k): _json_ready(v, fields.get(k)) for k, v in value.items()}
    if isinstance(value, list):
        if typ is not None and pa.types.is_map(typ):
            return {str(k): _json_ready(v, typ.item_type) for k, v in value}
        if typ is None and value and isinstance(value[0], tuple) and len(value[0]) == 2:  # a map's entries
            return {str(k): _json_ready(v) for k, v in value}
        item = typ.value_type if typ is not None and (pa.types.is_list(typ) or pa.types.is_large_list(typ)) \
            else None
        return [_json_ready(v, item) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


def _framed(rows: list[bytes | None], prefix: bytes) -> pa.Array:
    import pyarrow as pa
    return pa.array([None if r is None else prefix + r for r in rows], pa.binary())


def _encode_json(array: pa.Array, encoding: FieldEncoding, prefix: bytes) -> pa.Array:
    schema: Any = encoding.entry.parsed()
    out: list[bytes | None] = []
    for i, row in enumerate(array.to_pylist()):
        if row is None:
            out.append(None)
            continue
        doc = _json_ready(row, array.type)
        errors = schema.validate(doc)
        if errors:
            raise TypedEncodeError(f"column {encoding.name}, row {i}: not valid against the writer schema "
                                   f"(id {encoding.entry.id}): {'; '.join(errors[:3])}")
        out.append(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode())
    return _framed(out, prefix)


def _message_class(encoding: FieldEncoding) -> Any:
    from google.protobuf import message_factory

    indexes = encoding.message_indexes or (0,)
    key = (encoding.entry.schema, indexes)
    with _CLASSES_LOCK:
        found = _CLASSES.get(key)
    if found is None:
        parsed: Any = encoding.entry.parsed()
        found = message_factory.GetMessageClass(parsed.message_descriptor(indexes))
        with _CLASSES_LOCK:
            _CLASSES[key] = found
    return found


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _encode_protobuf(array: pa.Array, encoding: FieldEncoding, prefix: bytes) -> pa.Array:
    from google.protobuf import json_format

    cls = _message_class(encoding)
    out: list[bytes | None] = []
    for i, row in enumerate(array.to_pylist()):
        if row is None:
            out.append(None)
            continue
        message = cls()
        try:
            json_format.ParseDict(_without_nulls(_json_ready(row, array.type)), message)
        except json_format.ParseError as exc:
            raise TypedEncodeError(f"column {encoding.name}, row {i}: not a {cls.DESCRIPTOR.full_name} message: "
                                   f"{exc}") from None
        out.append(message.SerializeToString(deterministic=True))
    return _framed(out, prefix)


def encode_column(array: pa.Array | pa.ChunkedArray, encoding: FieldEncoding) -> pa.Array:
    """The framed payloads of ``array``'s rows (module docstring)."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    prefix = encoding.prefix()
    if encoding.format == AVRO:
        from broker.schema.avro_encode import AvroEncodeError, encode

        try:
            return encode(array, encoding.entry.parsed(), prefix=prefix, tombstones=True).payloads  # type: ignore[arg-type]
        except AvroEncodeError as exc:
            raise TypedEncodeError(f"column {encoding.name}: cannot be written with the writer schema "
                                   f"(id {encoding.entry.id}): {exc}") from None
    if encoding.format == JSON:
        return _encode_json(array, encoding, prefix)
    if encoding.format == PROTOBUF:
        return _encode_protobuf(array, encoding, prefix)
    raise TypedEncodeError(f"column {encoding.name}: no encoder for format {encoding.format!r}")
