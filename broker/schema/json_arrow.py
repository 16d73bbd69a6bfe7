"""JSON documents as Arrow, typed by a JSON Schema the way Spark types JSON.

Owns ``arrow_type(schema, *, recursive_depth=-1) -> pa.DataType`` (the Arrow type of the
documents a ``JsonSchema`` describes), ``record_name(schema)`` (the schema's ``title``:
the record name Confluent's subject name strategies use for JSON) and
``decode(payloads, reader_type) -> arrow_rows.DecodeResult`` (JSON texts, as an array of
that type, properties matched by name).

Mapping (read through ``JsonSchema.model()``, so ``$ref``s, references to other subjects
and ``type`` lists are followed as the compatibility rules follow them):

    object with properties                 struct of the properties, in the order written
                                           (allOf of such objects: their properties merged)
    object with only additionalProperties  map<string, T> of that schema
    integer / number / boolean / string    int64 / float64 / bool / string
    array with one items schema            list<T>; without items: list<string>
    enum, const, null, not, if/then/else,  string holding the value (a JSON string as is,
    oneOf / anyOf, no type, tuple items,   anything else as its JSON text, as Spark's
    any other object                       from_json fills a string column)
    oneOf / anyOf / type list of T and     T (nullable), as Avro's ["null", T]
    null only

Every field, item and map value is nullable (a document may leave any property out).

Recursion (an object schema reachable from itself through ``$ref``) is refused unless
``recursive_depth`` is 1..10, as Spark's ``recursive.fields.max.depth`` for Protobuf: a
schema may appear that many times on a path from the root, the root counting once; a
property that would exceed it is left out of the type.

Decoding: each payload is parsed with ``json.loads`` and converted to the reader's type
by name, recursively: a property the type lacks is skipped, one the document lacks reads
as null; an integral float fills an integer (``1.0``); a value of another kind than the
type (a string for a number, an object for a list) makes the row bad, as does text that
is not JSON. Documents are not validated against the writer's schema.

Invariants: ``decode(...).array.type == reader_type``; a null payload, and the document
``null``, is a null row, never a bad one. Sans-IO.

Thread-safety: pure functions; converters are cached per type under a lock.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from broker.schema.arrow_rows import DecodeResult, UnfitValueError, rows_to_array
from broker.schema.base import InvalidSchemaError
from broker.schema.json_schema import JsonSchema
from broker.schema.json_schema_compat import Node

MAX_RECURSIVE_DEPTH = 10  # Spark's upper bound of recursive.fields.max.depth

_TEXT = pa.string()


def arrow_type(schema: JsonSchema, *, recursive_depth: int = -1) -> pa.DataType:
    """The Arrow type of ``schema``'s documents (module docstring); a recursive object
    schema without an allowed ``recursive_depth`` raises ``InvalidSchemaError``."""
    if recursive_depth > MAX_RECURSIVE_DEPTH:
        raise InvalidSchemaError(f"recursive.fields.max.depth {recursive_depth} is above "
                                 f"{MAX_RECURSIVE_DEPTH}, the most Spark allows")
    typ = _Mapper(recursive_depth).type(schema.model(), {}, "#")
    return _TEXT if typ is None else typ


def record_name(schema: JsonSchema) -> str | None:
    """The schema's ``title`` (Confluent's record name of a JSON schema), None without one."""
    title = _target(schema.model()).title
    return title if isinstance(title, str) and title else None


def _target(node: Node) -> Node:
    hops = 0
    while node.kind == "ref" and node.target is not None:
        node = node.target()
        hops += 1
        if hops > 1000:  # parse refuses in-place cycles; a guard all the same
            break
    return node


class _Mapper:
    def __init__(self, depth: int) -> None:
        self.depth = depth

    def type(self, node: Node, seen: dict[int, int], path: str) -> pa.DataType | None:
        node = _target(node)
        kind = node.kind
        if kind == "string":
            return pa.string()
        if kind == "number":
            return pa.int64() if node.integer else pa.float64()
        if kind == "boolean":
            return pa.bool_()
        if kind == "object":
            return self.object(node, [node], seen, path)
        if kind == "array":
            if node.all_items is not None and node.item_schemas is None:
                item = self.type(node.all_items, seen, path + "/items")
                return None if item is None else pa.list_(item)
            if node.item_schemas is None and node.additional_schema is None:
                return pa.list_(_TEXT)
            return _TEXT
        if kind == "combined":
            branches = [_target(b) for b in node.subschemas]
            if node.criterion in ("anyOf", "oneOf"):
                kept = [b for b in branches if b.kind != "null"]
                if len(kept) == 1:
                    return self.type(kept[0], seen, path)
                return _TEXT
            if len(branches) == 1:
                return self.type(branches[0], seen, path)
            if branches and all(b.kind == "object" and b.properties for b in branches):
                return self.object(node, branches, seen, path)
            return _TEXT
        return _TEXT  # enum, const, null, empty, false, not, conditional

    def object(self, node: Node, parts: list[Node], seen: dict[int, int], path: str) -> pa.DataType | None:
        properties: dict[str, Node] = {}
        for part in parts:
            for name, sub in part.properties.items():
                properties.setdefault(name, sub)
        if not properties:
            additional = parts[0].additional_schema
            if len(parts) == 1 and additional is not None and not parts[0].pattern_properties:
                value = self.type(additional, seen, path + "/additionalProperties")
                return None if value is None else pa.map_(pa.string(), value)
            return _TEXT
        key = id(node)
        count = seen.get(key, 0)
        if count:
            if self.depth <= 0:
                raise InvalidSchemaError(
                    f"Found recursive reference in JSON schema at {path}, which can not be processed by "
                    "default; set recursive.fields.max.depth to 1..10")
            if count >= self.depth:
                return None
        inner = {**seen, key: count + 1}
        fields = []
        for name, sub in properties.items():
            typ = self.type(sub, inner, f"{path}/properties/{name}")
            if typ is not None:
                fields.append(pa.field(name, typ))
        return pa.struct(fields)


# -- decoding ------------------------------------------------------------------------------


Converter = Callable[[Any], Any]
_CONVERTERS: dict[str, Converter] = {}
_LOCK = threading.Lock()


def decode(payloads: pa.Array, reader_type: pa.DataType) -> DecodeResult:
    """Parse JSON texts (a binary or string array, nulls allowed) into an array of
    ``reader_type`` (module docstring)."""
    convert = converter(reader_type)
    n = len(payloads)
    bad = np.zeros(n, dtype=bool)
    errors: dict[int, str] = {}
    rows: list[Any] = []
    for i, raw in enumerate(payloads.to_pylist()):
        if raw is None:
            rows.append(None)
            continue
        try:
            rows.append(convert(json.loads(raw)))
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, UnfitValueError
            rows.append(None)
            bad[i] = True
            errors[i] = str(exc) if isinstance(exc, UnfitValueError) else f"not a JSON document ({exc})"
    return DecodeResult(rows_to_array(rows, reader_type, bad, errors), bad, errors)


def converter(typ: pa.DataType) -> Converter:
    """A function turning a parsed JSON value into the Python value of ``typ`` (cached per
    type)."""
    key = str(typ)
    found = _CONVERTERS.get(key)
    if found is None:
        found = _converter(typ)
        with _LOCK:
            _CONVERTERS[key] = found
    return found


def _nullable(convert: Converter) -> Converter:
    return lambda value: None if value is None else convert(value)


def _converter(typ: pa.DataType) -> Converter:
    if pa.types.is_struct(typ):
        plan = [(f.name, _converter(f.type)) for f in typ]

        def struct(value: Any) -> dict[str, Any]:
            if not isinstance(value, dict):
                raise UnfitValueError(f"expected an object, got {_kind(value)}")
            return {name: conv(value.get(name)) for name, conv in plan}
        return _nullable(struct)
    if pa.types.is_map(typ):
        item = _converter(typ.item_type)

        def mapping(value: Any) -> list[tuple[str, Any]]:
            if not isinstance(value, dict):
                raise UnfitValueError(f"expected an object, got {_kind(value)}")
            return [(k, item(v)) for k, v in value.items()]
        return _nullable(mapping)
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        element = _converter(typ.value_type)

        def array(value: Any) -> list[Any]:
            if not isinstance(value, list):
                raise UnfitValueError(f"expected an array, got {_kind(value)}")
            return [element(v) for v in value]
        return _nullable(array)
    if pa.types.is_integer(typ):
        return _nullable(_integer)
    if pa.types.is_floating(typ):
        return _nullable(_number)
    if pa.types.is_boolean(typ):
        return _nullable(_boolean)
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return _nullable(_text)
    return lambda value: value


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "null"


def _integer(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise UnfitValueError(f"expected an integer, got {_kind(value)} {json.dumps(value)[:40]}")


def _number(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise UnfitValueError(f"expected a number, got {_kind(value)}")


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise UnfitValueError(f"expected a boolean, got {_kind(value)}")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


__all__ = ["MAX_RECURSIVE_DEPTH", "arrow_type", "converter", "decode", "record_name"]
