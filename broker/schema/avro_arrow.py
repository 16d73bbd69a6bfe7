"""The Arrow form of Avro data: the Arrow type of an Avro schema, as Spark's ``from_avro``
maps Avro to Spark SQL types (``org.apache.spark.sql.avro.SchemaConverters``), and the
conversion of decoded Avro values (and of schema defaults) into that form.

Owns ``arrow_type(reader, recursive_depth=-1)``, ``AvroArrowError`` and the helpers the
columnar decoder (``avro_columnar``) compiles its plans with: ``TypeMapper`` (the Arrow
type of one node of the resolved form, ``avro_compat`` describes that form),
``union_layout`` and ``logical_type``, and ``ValueConverter`` (Python values into what
``pyarrow.array`` takes for the mapped type).

The mapping (Spark's, with Spark's Arrow names: list items ``element``, map entries
``key``/``value``):

* ``null`` -> null; ``boolean`` -> bool; ``int`` -> int32; ``long`` -> int64; ``float``
  -> float32; ``double`` -> float64; ``bytes`` -> binary; ``string`` -> string;
* record -> struct of its fields in order; a field is nullable when its type is a union
  holding ``null`` (or is ``null``), as in Spark, and only then; enum -> string; fixed ->
  binary; array -> list (items nullable when a union with ``null``); map -> map<string, T>;
* a union with ``null`` -> its other branches, nullable: ``[null, T]`` (either order) is a
  nullable T; without ``null``, one branch is that branch's type; exactly ``int`` and
  ``long`` -> int64 and exactly ``float`` and ``double`` -> float64 (logical types of the
  two ignored, as Spark compares only the Avro types); any other union -> a struct of
  ``member0`` .. ``memberN`` (nullable each), one per non-null branch in order;
* logical types, on their Avro type (elsewhere ignored, the plain type's mapping):
  ``decimal`` (bytes, fixed) -> decimal128(precision, scale), precision <= 38, else an
  ``AvroArrowError`` naming the field; ``date`` (int) -> date32; ``time-millis`` (int)
  -> int32 and ``time-micros`` (long) -> int64, milliseconds and microseconds of the day
  (Spark has no time type); ``timestamp-millis`` / ``-micros`` / ``-nanos`` (long) ->
  timestamp("us", tz="UTC"), nanoseconds truncated towards negative infinity to
  microseconds (Spark's precision); ``local-timestamp-millis`` / ``-micros`` / ``-nanos``
  (long) -> timestamp("us") without a time zone (Spark's TIMESTAMP_NTZ); ``uuid``
  (string) -> string; ``duration`` (fixed 12) -> binary, its 12 bytes as written.

Recursive records (Spark's ``recursiveFieldMaxDepth``): with ``recursive_depth`` -1 (the
default) or 0 a record that contains itself is an ``AvroArrowError``, as in Spark; with
N >= 1 (at most 15, Spark's limit) a record type may occur N times on any path from the
root, and where it would occur once more the value becomes a string holding the JSON of
the value (Spark drops such fields instead). That JSON is the plain JSON of the decoded
value: records and maps as objects, arrays as arrays, a union's value untagged, enums as
their symbol, bytes and fixed as strings of the code points U+0000-U+00FF (Avro's JSON
convention), logical types not applied (a timestamp-millis is its long), non-finite
floats as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.

Values (``ValueConverter``): "raw" values are those of fastavro's ``schemaless_reader``
over schemas whose logical types are removed (ints, longs, bytes, ...; dicts for records
and maps; a named type inside a union as ``(name, value)``, fastavro's
``return_named_type``), or ``Branch(index, value)`` to say which branch of a union a value
took. A default (JSON, from the schema) converts through the same path, a union default
taking the union's first branch. Conversion checks what Arrow would refuse later (an int
outside int32, a decimal with more digits than its precision, a timestamp beyond int64
microseconds, a string that is not text) and raises ``ValueError`` for it.

Invariants: the mapping depends only on the schema (and ``recursive_depth``); it never
looks at data. Everything that is not a valid mapping raises ``AvroArrowError``.

Thread-safety: pure functions; the classes hold only immutable configuration.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa

from broker.record.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from broker.schema.avro import PRIMITIVES, AvroSchema, named_types

MAX_RECURSIVE_DEPTH = 15  # Spark's limit on recursiveFieldMaxDepth
MAX_DECIMAL_PRECISION = 38  # Spark's DecimalType and Arrow's decimal128
TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")
TIMESTAMP_NTZ = pa.timestamp("us")

# logicalType -> the Avro type it applies to (the spec's); "decimal" applies to two
_LOGICAL_BASE = {
    "date": "int", "time-millis": "int", "time-micros": "long",
    "timestamp-millis": "long", "timestamp-micros": "long", "timestamp-nanos": "long",
    "local-timestamp-millis": "long", "local-timestamp-micros": "long", "local-timestamp-nanos": "long",
    "uuid": "string",
}
_LOGICAL_ARROW = {
    "date": pa.date32(), "time-millis": pa.int32(), "time-micros": pa.int64(),
    "timestamp-millis": TIMESTAMP_UTC, "timestamp-micros": TIMESTAMP_UTC, "timestamp-nanos": TIMESTAMP_UTC,
    "local-timestamp-millis": TIMESTAMP_NTZ, "local-timestamp-micros": TIMESTAMP_NTZ,
    "local-timestamp-nanos": TIMESTAMP_NTZ, "uuid": pa.string(),
}
# logicalType of a long -> factor to microseconds (> 0: multiply, < 0: floor-divide by -factor)
TIMESTAMP_SCALE = {
    "timestamp-millis": 1000, "timestamp-micros": 1, "timestamp-nanos": -1000,
    "local-timestamp-millis": 1000, "local-timestamp-micros": 1, "local-timestamp-nanos": -1000,
}
_PRIMITIVE_ARROW = {
    "null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
    "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(),
}
JSON_TYPE = pa.string()  # a record past the recursion depth
_EXACT = Context(prec=2 * MAX_DECIMAL_PRECISION)  # scaling a decimal never rounds


class AvroArrowError(ValueError):
    """An Avro schema with no Arrow form: a decimal above 38 digits, a recursive record
    without ``recursive_depth``, a ``recursive_depth`` out of range."""


@dataclass(frozen=True)
class Logical:
    """A logical type that applies: its name, and a decimal's precision and scale."""

    name: str
    precision: int = 0
    scale: int = 0


def kind_of(node: Any, names: Mapping[str, dict]) -> str:
    """The Avro type of a node: a primitive name, ``record``, ``enum``, ``fixed``,
    ``array``, ``map`` or ``union``."""
    if isinstance(node, list):
        return "union"
    if isinstance(node, dict):
        return str(node["type"])
    if node in PRIMITIVES:
        return str(node)
    kind = str(names[node]["type"])
    return "record" if kind == "error" else kind


def definition(node: Any, names: Mapping[str, dict]) -> dict:
    """The object holding a node's attributes: a named type's definition, a primitive's or
    an array's / map's object, ``{}`` for a bare primitive name."""
    if isinstance(node, dict):
        return node
    if isinstance(node, str) and node not in PRIMITIVES:
        return names[node]
    return {}


def logical_type(node: Any, names: Mapping[str, dict]) -> Logical | None:
    """The logical type of a node when it applies to the node's Avro type (else None:
    Avro ignores a logical type on the wrong type)."""
    attrs = definition(node, names)
    name = attrs.get("logicalType")
    if not isinstance(name, str):
        return None
    kind = kind_of(node, names)
    if name == "decimal":
        if kind not in ("bytes", "fixed"):
            return None
        precision, scale = attrs.get("precision"), attrs.get("scale", 0)
        if type(precision) is not int or type(scale) is not int or precision <= 0 or not 0 <= scale <= precision:
            return None
        return Logical(name, precision, scale)
    if name == "duration":
        return Logical(name) if kind == "fixed" and attrs.get("size") == 12 else None
    return Logical(name) if _LOGICAL_BASE.get(name) == kind else None


def is_nullable(node: Any, names: Mapping[str, dict]) -> bool:
    """Spark's nullability of a node: ``null``, or a union holding ``null``."""
    if isinstance(node, list):
        return any(kind_of(b, names) == "null" for b in node)
    return kind_of(node, names) == "null"


@dataclass(frozen=True)
class UnionLayout:
    """How a union is laid out in Arrow: ``kind`` ``single`` (one slot: a branch's type,
    or int64 / float64 for int+long / float+double), ``struct`` (slot i is ``member<i>``)
    or ``null`` (only null); ``nullable`` when it holds null; ``slot_of[b]`` is branch
    b's slot (-1 for null); ``slot_nodes[s]`` the node whose type slot s has (``"long"`` /
    ``"double"`` for the merged pairs, which the branches are read as)."""

    kind: str
    nullable: bool
    slot_of: tuple[int, ...]
    slot_nodes: tuple[Any, ...]


def union_layout(branches: list, names: Mapping[str, dict]) -> UnionLayout:
    kinds = [kind_of(b, names) for b in branches]
    nullable = "null" in kinds
    others = [i for i, k in enumerate(kinds) if k != "null"]
    slot_of = [-1] * len(branches)
    if not others:
        return UnionLayout("null", True, tuple(slot_of), ())
    other_kinds = {kinds[i] for i in others}
    merged = None
    if len(others) == 2 and other_kinds == {"int", "long"}:
        merged = "long"
    elif len(others) == 2 and other_kinds == {"float", "double"}:
        merged = "double"
    if merged is not None or len(others) == 1:
        for i in others:
            slot_of[i] = 0
        return UnionLayout("single", nullable, tuple(slot_of), (merged or branches[others[0]],))
    for s, i in enumerate(others):
        slot_of[i] = s
    return UnionLayout("struct", nullable, tuple(slot_of), tuple(branches[i] for i in others))


class TypeMapper:
    """The Arrow type of nodes of one schema (its ``names``) for one ``recursive_depth``.
    ``stack`` is the tuple of record names on the path from the root (recursion)."""

    def __init__(self, names: Mapping[str, dict], recursive_depth: int = -1) -> None:
        if type(recursive_depth) is not int or not -1 <= recursive_depth <= MAX_RECURSIVE_DEPTH:
            raise AvroArrowError(f"recursive_depth must be -1 (recursion is an error), 0 (the same) or 1 to "
                                 f"{MAX_RECURSIVE_DEPTH}, not {recursive_depth!r}")
        self.names = names
        self.depth = recursive_depth

    def cut(self, node: Any, stack: tuple[str, ...], where: str) -> bool:
        """Whether a record node, met with ``stack`` above it, becomes JSON text (raises
        when recursion is not allowed)."""
        if not (isinstance(node, str) and node in stack):
            return False
        if self.depth <= 0:
            raise AvroArrowError(f"the record {node} is recursive (at {where}); Spark refuses recursive types "
                                 "unless recursive_depth (recursiveFieldMaxDepth) is 1 or more")
        return stack.count(node) >= self.depth

    def type(self, node: Any, stack: tuple[str, ...] = (), where: str = "") -> pa.DataType:
        names = self.names
        kind = kind_of(node, names)
        here = where or "the top-level schema"
        if kind in ("record", "enum", "fixed"):
            d = names[node]
            if kind == "enum":
                return pa.string()
            if kind == "fixed":
                logical = logical_type(node, names)
                return self._decimal(logical, here) if logical and logical.name == "decimal" else pa.binary()
            if self.cut(node, stack, here):
                return JSON_TYPE
            inner = (*stack, node)
            return pa.struct([pa.field(f["name"], self.type(f["type"], inner, f"{node}.{f['name']}"),
                                       nullable=is_nullable(f["type"], names)) for f in d["fields"]])
        if kind == "array":
            items = node["items"]
            return pa.list_(pa.field("element", self.type(items, stack, f"{here}[]"),
                                     nullable=is_nullable(items, names)))
        if kind == "map":
            values = node["values"]
            return pa.map_(pa.string(), pa.field("value", self.type(values, stack, f"{here}{{}}"),
                                                 nullable=is_nullable(values, names)))
        if kind == "union":
            layout = union_layout(node, names)
            if layout.kind == "null":
                return pa.null()
            if layout.kind == "single":
                return self.type(layout.slot_nodes[0], stack, where)
            return pa.struct([pa.field(f"member{s}", self.type(b, stack, f"{here}.member{s}"), nullable=True)
                              for s, b in enumerate(layout.slot_nodes)])
        logical = logical_type(node, names)
        if logical is not None:
            if logical.name == "decimal":
                return self._decimal(logical, here)
            if logical.name != "duration":
                return _LOGICAL_ARROW[logical.name]
        return _PRIMITIVE_ARROW[kind]

    @staticmethod
    def _decimal(logical: Logical, where: str) -> pa.DataType:
        if logical.precision > MAX_DECIMAL_PRECISION:
            raise AvroArrowError(f"the decimal at {where} has precision {logical.precision}: Spark and Arrow's "
                                 f"decimal128 hold at most {MAX_DECIMAL_PRECISION} digits")
        return pa.decimal128(logical.precision, logical.scale)


def arrow_type(reader: AvroSchema, *, recursive_depth: int = -1) -> pa.DataType:
    """The Arrow type of data read with ``reader`` (module docstring): a struct for a
    record. ``AvroArrowError`` when the schema has no Arrow form."""
    return TypeMapper(named_types(reader), recursive_depth).type(reader.root)


# ---------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True)
class Branch:
    """A union's value with the index of the branch it took."""

    index: int
    value: Any


def _json_ready(value: Any) -> Any:
    """A raw value as plain JSON (module docstring)."""
    if isinstance(value, Branch):
        return _json_ready(value.value)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return _json_ready(value[1])  # (name, value) of a named type in a union
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_ready(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("latin-1")
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def json_text(value: Any) -> str:
    """The JSON text of a raw value (module docstring), compact, non-ASCII unescaped."""
    return json.dumps(_json_ready(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class ValueConverter:
    """Raw values (module docstring) of reader nodes into what ``pyarrow.array`` takes for
    the node's Arrow type (``TypeMapper`` of the same names and depth)."""

    def __init__(self, mapper: TypeMapper) -> None:
        self.mapper = mapper
        self.names = mapper.names

    def convert(self, node: Any, value: Any, stack: tuple[str, ...] = ()) -> Any:
        names = self.names
        kind = kind_of(node, names)
        if kind == "union":
            return self._union(node, value, stack)
        if isinstance(value, Branch):
            value = value.value
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and kind in (
                "record", "enum", "fixed"):
            value = value[1]
        if kind == "null":
            if value is not None:
                raise ValueError(f"expected null, found {type(value).__name__}")
            return None
        if kind == "record":
            if isinstance(node, str) and node in stack and self.mapper.cut(node, stack, node):
                return json_text(value)
            inner = (*stack, node)
            if not isinstance(value, dict):
                raise ValueError(f"expected a record, found {type(value).__name__}")
            return {f["name"]: self.convert(f["type"], value[f["name"]], inner) for f in names[node]["fields"]}
        if kind == "array":
            return [self.convert(node["items"], v, stack) for v in _list(value)]
        if kind == "map":
            if not isinstance(value, dict):
                raise ValueError(f"expected a map, found {type(value).__name__}")
            return [(_text(k), self.convert(node["values"], v, stack)) for k, v in value.items()]
        if kind == "enum":
            if not isinstance(value, str) or value not in names[node]["symbols"]:
                raise ValueError(f"{value!r} is not a symbol of the enum {node}")
            return value
        logical = logical_type(node, names)
        if kind in ("bytes", "fixed"):
            raw = _bytes(value)
            if kind == "fixed" and len(raw) != names[node]["size"]:
                raise ValueError(f"a fixed {node} of {len(raw)} bytes")
            if logical is not None and logical.name == "decimal":
                return _decimal(raw, logical)
            return raw
        if kind == "string":
            return _text(value)
        if kind == "boolean":
            if not isinstance(value, bool):
                raise ValueError(f"expected a boolean, found {type(value).__name__}")
            return value
        if kind in ("int", "long"):
            if type(value) is not int:
                raise ValueError(f"expected an integer, found {type(value).__name__}")
            low, high = (INT32_MIN, INT32_MAX) if kind == "int" else (INT64_MIN, INT64_MAX)
            if not low <= value <= high:
                raise ValueError(f"{value} is out of {kind}'s range")
            if logical is not None and logical.name in TIMESTAMP_SCALE:
                return scale_timestamp(value, TIMESTAMP_SCALE[logical.name])
            return value
        if kind in ("float", "double"):
            if isinstance(value, str):
                return float(value)  # "NaN", "Infinity" of a JSON default
            if type(value) not in (int, float):
                raise ValueError(f"expected a number, found {type(value).__name__}")
            return float(value)
        raise ValueError(f"unknown Avro type {kind}")

    def _union(self, node: list, value: Any, stack: tuple[str, ...]) -> Any:
        names = self.names
        layout = union_layout(node, names)
        b = self.branch(node, value)
        branch_node = node[b]
        if isinstance(value, Branch):
            value = value.value
        slot = layout.slot_of[b]
        if slot < 0:
            return None
        if layout.kind == "single":
            return self.convert(layout.slot_nodes[0] if len(node) > 1 else branch_node, value, stack)
        converted = self.convert(branch_node, value, stack)
        return {f"member{s}": (converted if s == slot else None) for s in range(len(layout.slot_nodes))}

    def branch(self, node: list, value: Any) -> int:
        """The branch of a union a raw value took: explicit (``Branch``, a named type's
        ``(name, value)``), else the first branch whose Avro type holds the Python value,
        unnamed types first (an int in the first of int/long, a float in the first of
        float/double, bytes in bytes before fixed)."""
        names = self.names
        if isinstance(value, Branch):
            if not 0 <= value.index < len(node):
                raise ValueError(f"branch {value.index} of a union of {len(node)}")
            return value.index
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
            for i, b in enumerate(node):
                if isinstance(b, str) and b == value[0]:
                    return i
        kinds = [kind_of(b, names) for b in node]
        for named in (False, True):  # a named type's value is tagged, unless its writer was no union
            for i, k in enumerate(kinds):
                if (k in ("record", "enum", "fixed")) == named and _holds(k, value):
                    return i
        raise ValueError(f"no branch of the union holds a {type(value).__name__}")

    def default(self, node: Any, value: Any, stack: tuple[str, ...] = ()) -> Any:
        """A field default (JSON) converted: a union's default is its first branch's."""
        return self.convert(node, self.raw_default(node, value), stack)

    def raw_default(self, node: Any, value: Any) -> Any:
        """A default's JSON as a raw value."""
        names = self.names
        kind = kind_of(node, names)
        if kind == "union":
            return Branch(0, self.raw_default(node[0], value))
        if kind in ("bytes", "fixed"):
            return value.encode("latin-1") if isinstance(value, str) else value
        if kind == "record":
            out = {}
            for f in names[node]["fields"]:
                if isinstance(value, dict) and f["name"] in value:
                    out[f["name"]] = self.raw_default(f["type"], value[f["name"]])
                else:
                    out[f["name"]] = self.raw_default(f["type"], f.get("default"))
            return out
        if kind == "array":
            return [self.raw_default(node["items"], v) for v in _list(value)]
        if kind == "map":
            return {k: self.raw_default(node["values"], v) for k, v in value.items()} if isinstance(
                value, dict) else value
        if kind in ("float", "double") and isinstance(value, str):
            return float(value)
        return value


def _holds(kind: str, value: Any) -> bool:
    if value is None:
        return kind == "null"
    if isinstance(value, bool):
        return kind == "boolean"
    if isinstance(value, int):
        return kind in ("int", "long")
    if isinstance(value, float):
        return kind in ("float", "double")
    if isinstance(value, str):
        return kind in ("string", "enum")
    if isinstance(value, bytes | bytearray):
        return kind in ("bytes", "fixed")
    if isinstance(value, list):
        return kind == "array"
    if isinstance(value, dict):
        return kind in ("map", "record")
    return False


def _list(value: Any) -> list:
    if not isinstance(value, list):
        raise ValueError(f"expected an array, found {type(value).__name__}")
    return value


def _bytes(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("latin-1")
    raise ValueError(f"expected bytes, found {type(value).__name__}")


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8")  # UnicodeDecodeError is a ValueError
    if not isinstance(value, str):
        raise ValueError(f"expected a string, found {type(value).__name__}")
    value.encode("utf-8")  # no unpaired surrogates
    return value


def _decimal(raw: bytes, logical: Logical) -> Decimal:
    unscaled = int.from_bytes(raw, "big", signed=True)
    if abs(unscaled) >= 10 ** logical.precision:
        raise ValueError(f"the decimal {unscaled}e-{logical.scale} has more than {logical.precision} digits")
    return Decimal(unscaled).scaleb(-logical.scale, context=_EXACT)


def scale_timestamp(value: int, factor: int) -> int:
    """A timestamp long in microseconds (``TIMESTAMP_SCALE``); ValueError past int64."""
    micros = value * factor if factor > 0 else value // -factor
    if not INT64_MIN <= micros <= INT64_MAX:
        raise ValueError(f"the timestamp {value} is out of range in microseconds")
    return micros


__all__ = ["AvroArrowError", "Branch", "JSON_TYPE", "Logical", "MAX_DECIMAL_PRECISION", "MAX_RECURSIVE_DEPTH",
           "TIMESTAMP_NTZ", "TIMESTAMP_SCALE", "TIMESTAMP_UTC", "TypeMapper", "UnionLayout", "ValueConverter",
           "arrow_type", "definition", "is_nullable", "json_text", "kind_of", "logical_type", "scale_timestamp",
           "union_layout"]
