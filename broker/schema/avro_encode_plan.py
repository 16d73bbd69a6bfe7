"""The compiler of ``avro_encode``'s plans and their nodes of structure: records, unions,
arrays, maps, the per-row node (a recursive type cut to a JSON string), and the wrappers
that normalise an Arrow column first (dictionary, extension, view and narrow decimal
types). ``avro_encode`` documents what each Avro type is written from; the leaves are in
``avro_encode_nodes``.

``compile_node(node, arrow_type, path, names, per_row)`` walks the writer schema (the
resolved form of ``avro``: primitives and full names of named types as strings, unions as
lists, ``names`` the definitions) along the Arrow type, so a recursive schema compiles to
the finite depth of the data. Where a logical type applies is ``avro_arrow.logical_type``'s
rule and unions merge as ``avro_arrow.union_layout`` says, so that the columns
``arrow_type`` describes are the ones taken here. Defaults of fields absent from the Arrow
struct are encoded once, at compile time, by fastavro.

Thread-safety: compilation is pure; the nodes are immutable afterwards.
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import pyarrow as pa
from fastavro import parse_schema, schemaless_writer

from broker.record.columnar._vec import zigzag
from broker.record.limits import INT32_MAX, INT32_MIN
from broker.schema.avro import PRIMITIVES
from broker.schema.avro_arrow import logical_type, union_layout
from broker.schema.avro_encode_nodes import (
    NULL_REASON,
    AllNullNode,
    AvroEncodeError,
    BooleanNode,
    BytesNode,
    DecimalNode,
    EnumNode,
    FixedNode,
    FloatNode,
    IntNode,
    Node,
    NullNode,
    Out,
    Rows,
    bad_at,
    both,
    payload_offsets,
    valid_mask,
)

_NAMED = ("record", "error", "enum", "fixed")
# the logical types of int and long (``avro_arrow.logical_type`` says where one applies) ->
# their unit: a power of ten of a second, or "day"
_UNITS: dict[str, int | str] = {
    "date": "day", "time-millis": 3, "time-micros": 6,
    "timestamp-millis": 3, "timestamp-micros": 6, "timestamp-nanos": 9,
    "local-timestamp-millis": 3, "local-timestamp-micros": 6, "local-timestamp-nanos": 9,
}


def resolve(node: Any, names: dict[str, dict]) -> tuple[str, dict]:
    """(Avro type name, the node's attributes: a named type's definition or a primitive's
    or container's properties) of a resolved-form node; ``"union"`` for a list."""
    if isinstance(node, list):
        return "union", {}
    if isinstance(node, dict):
        return str(node["type"]), node
    if node in PRIMITIVES:
        return str(node), {}
    definition = names[node]
    return str(definition["type"]), definition


def branch_name(node: Any, names: dict[str, dict]) -> str:
    """The name fastavro's tuple notation gives a union branch: a named type's full
    name, else the type's name."""
    kind, info = resolve(node, names)
    return str(info["name"]) if kind in _NAMED else kind


def describe(node: Any, names: dict[str, dict]) -> str:
    kind, info = resolve(node, names)
    if kind == "union":
        return "union [" + ", ".join(describe(b, names) for b in node) + "]"
    if kind in _NAMED:
        return f"{kind} {info['name']}"
    logical = info.get("logicalType")
    return f"{kind} ({logical})" if isinstance(logical, str) else kind


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# -- fastavro's view of a part of the schema: defaults and per-row values -----------------


def inline(node: Any, names: dict[str, dict], seen: set[str] | None = None) -> Any:
    """The JSON schema of ``node``, named types defined at their first use."""
    seen = set() if seen is None else seen
    if isinstance(node, list):
        return [inline(b, names, seen) for b in node]
    if isinstance(node, dict):
        out = dict(node)
        if node["type"] == "array":
            out["items"] = inline(node["items"], names, seen)
        elif node["type"] == "map":
            out["values"] = inline(node["values"], names, seen)
        return out
    if node in PRIMITIVES or node in seen:
        return node
    seen.add(node)
    definition = dict(names[node])
    if definition["type"] in ("record", "error"):
        definition["fields"] = [{**f, "type": inline(f["type"], names, seen)} for f in definition["fields"]]
    return definition


_NON_FINITE = ("NaN", "Infinity", "-Infinity")  # floats in JSON text (avro_arrow's convention)


def _guess(node: list, value: Any, names: dict[str, dict]) -> Any:
    """The first branch of a union a JSON value has the shape of."""
    shapes = {
        "null": value is None, "boolean": isinstance(value, bool),
        "int": type(value) is int, "long": type(value) is int,
        "float": type(value) in (int, float) or value in _NON_FINITE,
        "double": type(value) in (int, float) or value in _NON_FINITE,
        "string": isinstance(value, str), "bytes": isinstance(value, str), "enum": isinstance(value, str),
        "fixed": isinstance(value, str), "array": isinstance(value, list),
        "map": isinstance(value, dict), "record": isinstance(value, dict), "error": isinstance(value, dict),
    }
    for branch in node:
        kind, info = resolve(branch, names)
        if kind == "enum" and value not in info["symbols"]:
            continue
        if shapes.get(kind):
            return branch
    raise ValueError(f"{json.dumps(value)[:60]} matches no branch of the union")


def json_value(node: Any, value: Any, names: dict[str, dict], default: bool = True) -> Any:
    """The fastavro value of a JSON value of ``node``: a field's default (a union's is
    its first branch's) or, with ``default=False``, a value in plain JSON (a union's
    branch is the first its shape fits; bytes and fixed as code points up to U+00FF)."""
    kind, info = resolve(node, names)
    if kind == "union":
        branch = node[0] if default else _guess(node, value, names)
        if resolve(branch, names)[0] == "null":
            return None
        return branch_name(branch, names), json_value(branch, value, names, default)
    if kind == "null":
        return None
    if kind in ("bytes", "fixed"):
        return value.encode("latin-1") if isinstance(value, str) else value
    if kind in ("float", "double"):
        return float(value)
    if kind == "array":
        return [json_value(info["items"], v, names, default) for v in value]
    if kind == "map":
        return {k: json_value(info["values"], v, names, default) for k, v in value.items()}
    if kind in ("record", "error"):
        out = {}
        for f in info["fields"]:
            if f["name"] in value:
                out[f["name"]] = json_value(f["type"], value[f["name"]], names, default)
            elif "default" in f:
                out[f["name"]] = json_value(f["type"], f["default"], names, True)
        return out
    return value


def _write(schema: Any, datum: Any) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, schema, datum)
    return buf.getvalue()


# -- nodes of structure ---------------------------------------------------------------------


class RecordNode(Node):
    """record: its fields in schema order; ``fields`` holds (name, Arrow field index,
    node) or, for a field the struct lacks, (name, None, (default bytes, fastavro value))."""

    __slots__ = ("fields",)

    def __init__(self, path: str, fields: list[tuple[str, int | None, Any]]) -> None:
        super().__init__(path)
        self.fields = fields

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        self.present(arr, active, rows)
        for _, index, child in self.fields:
            if index is None:
                out.const(child[0], active)
            else:
                child.emit(arr.field(index), active, rows, out)

    def py(self, value: Any, row: int) -> Any:
        self.null(value, row)
        return {name: child[1] if index is None else child.py(value[name], row)
                for name, index, child in self.fields}


class NullableNode(Node):
    """``[null, T]`` in either order: the branch index, then T for non-null rows
    (``child`` None: an Arrow null-type column, every row null)."""

    __slots__ = ("null_index", "index", "name", "child")

    def __init__(self, path: str, null_index: int, index: int, name: str, child: Node | None) -> None:
        super().__init__(path)
        self.null_index, self.index, self.name, self.child = null_index, index, name, child

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        if self.child is None:
            out.const(bytes([2 * self.null_index]), active)
            return
        valid = valid_mask(arr)
        if valid is None:
            out.const(bytes([2 * self.index]), active)
        else:
            out.fixed(np.where(valid, 2 * self.index, 2 * self.null_index).astype(np.uint8)[:, None], active)
        self.child.emit(arr, both(active, valid), rows, out)

    def py(self, value: Any, row: int) -> Any:
        if value is None or self.child is None:
            return None
        return self.name, self.child.py(value, row)


class BranchNode(Node):
    """A union of one branch, no null: its index (0), then the value."""

    __slots__ = ("index", "name", "child")

    def __init__(self, path: str, index: int, name: str, child: Node) -> None:
        super().__init__(path)
        self.index, self.name, self.child = index, name, child

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        out.const(bytes([2 * self.index]), active)
        self.child.emit(arr, active, rows, out)

    def py(self, value: Any, row: int) -> Any:
        return self.name, self.child.py(value, row)


class NullOnlyNode(Node):
    """A union whose only branch is null: the index, every value null."""

    __slots__ = ("index",)

    def __init__(self, path: str, index: int) -> None:
        super().__init__(path)
        self.index = index

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        valid = valid_mask(arr)
        live = np.ones(len(arr), np.bool_) if valid is None else valid
        self.check(both(active, live), rows, "not null, but the union has only the null branch")
        out.const(bytes([2 * self.index]), active)

    def py(self, value: Any, row: int) -> Any:
        if value is not None:
            raise self.error("not null, but the union has only the null branch", row)
        return None


class NumberUnionNode(Node):
    """A union of int and long (or float and double), maybe with null: Spark's one
    integer (floating) column. Integers take the int branch when it comes first and the
    value fits, else long; floats the double branch (fastavro's choices)."""

    __slots__ = ("null_index", "indices", "prefer_int", "value")

    def __init__(self, path: str, null_index: int | None, indices: dict[str, int]) -> None:
        super().__init__(path)
        self.null_index = null_index
        self.indices = indices
        self.prefer_int = indices.get("int", 1 << 20) < indices.get("long", -1)
        self.value: Node = IntNode(path, False, None, "long") if "long" in indices else FloatNode(path, 8)

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        valid = valid_mask(arr)
        if self.null_index is None:
            self.present(arr, active, rows)
        live = both(active, valid)
        n = len(arr)
        if isinstance(self.value, IntNode):
            v, over = self.value.ints(arr)
            self.check(bad_at(live, over), rows, "the value does not fit a long")
            if self.prefer_int:
                fits = (v >= INT32_MIN) & (v <= INT32_MAX)
                branch = np.where(fits, self.indices["int"], self.indices["long"])
            else:
                branch = np.full(n, self.indices["long"], np.int64)
        else:
            branch = np.full(n, self.indices["double"], np.int64)
        if valid is not None:
            branch = np.where(valid, branch, self.null_index or 0)
        out.varints(zigzag(branch.astype(np.int64)), active)
        self.value.emit(arr, live, rows, out)

    def py(self, value: Any, row: int) -> Any:
        if value is None:
            if self.null_index is None:
                raise self.error(NULL_REASON, row)
            return None
        converted = self.value.py(value, row)
        if isinstance(self.value, IntNode):
            fits = self.prefer_int and INT32_MIN <= converted <= INT32_MAX
            return ("int" if fits else "long"), converted
        return "double", converted


class StructUnionNode(Node):
    """Any other union: struct<member0..memberN>, one member per non-null branch, in
    order; exactly one member is set per row (a null struct, or none set, is the null
    branch when there is one)."""

    __slots__ = ("null_index", "indices", "names", "members", "fields")

    def __init__(self, path: str, null_index: int | None, indices: list[int], names: list[str],
                 members: list[Node], fields: list[str]) -> None:
        super().__init__(path)
        self.null_index, self.indices, self.names = null_index, indices, names
        self.members, self.fields = members, fields

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        n = len(arr)
        struct_valid = valid_mask(arr)
        live = np.ones(n, np.bool_) if active is None else active
        if struct_valid is not None:
            live = live & struct_valid
        chosen = []
        count = np.zeros(n, np.int8)
        branch = np.full(n, self.null_index or 0, np.int64)
        for k in range(len(self.members)):
            mv = valid_mask(arr.field(k))
            set_k = live if mv is None else live & mv
            chosen.append(set_k)
            count += set_k
            branch[set_k] = self.indices[k]
        self.check(count > 1, rows, "several members of the union struct are set (a value is one of them)")
        if self.null_index is None:
            unset = count == 0 if active is None else active & (count == 0)
            self.check(unset, rows, lambda i: NULL_REASON if struct_valid is not None and not struct_valid[i]
                       else "none of the union struct's members is set (exactly one must be)")
        out.varints(zigzag(branch), active)
        for k, member in enumerate(self.members):
            member.emit(arr.field(k), chosen[k], rows, out)

    def py(self, value: Any, row: int) -> Any:
        if value is None:
            if self.null_index is None:
                raise self.error(NULL_REASON, row)
            return None
        set_ = [k for k, f in enumerate(self.fields) if value[f] is not None]
        if len(set_) > 1:
            raise self.error("several members of the union struct are set (a value is one of them)", row)
        if not set_:
            if self.null_index is None:
                raise self.error("none of the union struct's members is set (exactly one must be)", row)
            return None
        k = set_[0]
        return self.names[k], self.members[k].py(value[self.fields[k]], row)


def _blocks(arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out, children: list[Node],
            parts: list[pa.Array]) -> None:
    """The one block of an array's or map's items: count, items, the 0 terminator; the
    items (entries: key then value, each a child of ``parts``) encoded as rows."""
    n = len(arr)
    if pa.types.is_fixed_size_list(arr.type):
        offs = (np.arange(n + 1, dtype=np.int64) + arr.offset) * arr.type.list_size
    else:
        offs = np.asarray(arr.offsets, np.int64)
    start = int(offs[0])
    rel = offs - start
    m = int(rel[-1])
    counts = np.diff(rel)
    item_active = None if active is None else np.repeat(active, counts)
    if active is not None:
        counts = counts * active
    out.varints(zigzag(counts), counts > 0)
    if m:
        items = Out(m)
        for child, part in zip(children, parts):
            child.emit(part.slice(start, m), item_active, Rows(rows, rel), items)
        po, data = payload_offsets(items.payloads())
        out.blob(pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(po[rel]), data]))
    out.const(b"\x00", active)


class ArrayNode(Node):
    __slots__ = ("item",)

    def __init__(self, path: str, item: Node) -> None:
        super().__init__(path)
        self.item = item

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        self.present(arr, active, rows)
        _blocks(arr, active, rows, out, [self.item], [arr.values])

    def py(self, value: Any, row: int) -> Any:
        self.null(value, row)
        return [self.item.py(v, row) for v in value]


class MapNode(Node):
    """map: entries of a map<string, T> (every entry written, duplicate keys too; the
    per-row path keeps the last of duplicates, as a dict does)."""

    __slots__ = ("key", "value")

    def __init__(self, path: str, key: Node, value: Node) -> None:
        super().__init__(path)
        self.key, self.value = key, value

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        self.present(arr, active, rows)
        _blocks(arr, active, rows, out, [self.key, self.value], [arr.keys, arr.items])

    def py(self, value: Any, row: int) -> Any:
        self.null(value, row)
        return {self.key.py(k, row): self.value.py(v, row) for k, v in value}


class JsonNode(Node):
    """A string column holding the JSON of values of a record, array, map or union (a
    recursive type cut at a depth): each row parsed (``json_value`` with
    ``default=False``) and written by fastavro, row by row."""

    __slots__ = ("node", "names", "schema")

    def __init__(self, path: str, node: Any, names: dict[str, dict]) -> None:
        super().__init__(path)
        self.node, self.names = node, names
        self.schema = parse_schema(inline(node, names))

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        self.present(arr, active, rows)
        texts = arr.to_pylist()
        blobs: list[bytes | None] = []
        for i, text in enumerate(texts):
            if text is None or (active is not None and not active[i]):
                blobs.append(None)
            else:
                blobs.append(self.written(text, rows.top(i))[1])
        out.blob(pa.array(blobs, pa.large_binary()))

    def written(self, text: str, row: int) -> tuple[Any, bytes]:
        """(fastavro value, bytes) of one row's JSON text."""
        try:
            datum = json_value(self.node, json.loads(text), self.names, default=False)
            return datum, _write(self.schema, datum)
        except Exception as e:  # json's, the conversion's and fastavro's refusals of the value
            raise self.error(f"not the JSON of a {describe(self.node, self.names)}: {e}", row) from None

    def py(self, value: Any, row: int) -> Any:
        self.null(value, row)
        return self.written(value, row)[0]


class ConvertNode(Node):
    """An Arrow column converted first (``how``: a cast target type, ``"decode"`` for a
    dictionary, ``"storage"`` for an extension type)."""

    __slots__ = ("how", "child")

    def __init__(self, path: str, how: pa.DataType | str, child: Node) -> None:
        super().__init__(path)
        self.how, self.child = how, child

    def emit(self, arr: pa.Array, active: np.ndarray | None, rows: Rows, out: Out) -> None:
        if self.how == "decode":
            arr = arr.dictionary_decode()
        elif self.how == "storage":
            arr = arr.storage
        else:
            arr = arr.cast(self.how)
        self.child.emit(arr, active, rows, out)

    def py(self, value: Any, row: int) -> Any:
        return self.child.py(value, row)


# -- the compiler ---------------------------------------------------------------------------


def _is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _is_binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t))


def _is_integer(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t))


def _normalised(t: pa.DataType) -> pa.DataType | None:
    """The type an Arrow column is cast to first, or None."""
    if pa.types.is_string_view(t):
        return pa.large_string()
    if pa.types.is_binary_view(t):
        return pa.large_binary()
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_decimal32(t) or pa.types.is_decimal64(t) or (pa.types.is_decimal256(t) and t.precision <= 38):
        return pa.decimal128(t.precision, t.scale)
    return None


def _mismatch(node: Any, t: pa.DataType, path: str, names: dict[str, dict], expected: str) -> AvroEncodeError:
    return AvroEncodeError(path, f"the schema's {describe(node, names)} cannot be written from Arrow {t}; "
                                 f"expected {expected}")


def _leaf(node: Any, kind: str, info: dict, t: pa.DataType, path: str, names: dict[str, dict]) -> Node:
    logical = logical_type(node, names)  # None where the logical type does not apply (Avro ignores it)
    if kind == "boolean":
        if pa.types.is_boolean(t):
            return BooleanNode(path)
        raise _mismatch(node, t, path, names, "bool")
    if kind in ("int", "long"):
        if logical is not None and logical.name in _UNITS:
            unit = _UNITS[logical.name]
            timing = logical.name.startswith("time-")
            accepted = (pa.types.is_date32(t) or pa.types.is_date64(t)) if unit == "day" else \
                pa.types.is_time(t) if timing else pa.types.is_timestamp(t)
            if accepted or _is_integer(t):
                return IntNode(path, kind == "int", unit, logical.name)
            wanted = "date32" if unit == "day" else "time32/time64" if timing else "timestamp"
            raise _mismatch(node, t, path, names, f"{wanted} or an integer type")
        if _is_integer(t):
            return IntNode(path, kind == "int", None, kind)
        raise _mismatch(node, t, path, names, "an integer type")
    if kind in ("float", "double"):
        if pa.types.is_floating(t) or _is_integer(t):
            return FloatNode(path, 4 if kind == "float" else 8)
        raise _mismatch(node, t, path, names, "a floating point or integer type")
    size = info.get("size") if kind == "fixed" else None
    if logical is not None and logical.name == "decimal":  # on bytes or fixed
        if pa.types.is_decimal128(t):
            return DecimalNode(path, logical.precision, logical.scale, size)
        raise _mismatch(node, t, path, names, f"decimal128({logical.precision}, {logical.scale})")
    if kind == "bytes":
        if _is_binary(t) or _is_string(t):
            return BytesNode(path, text=False)
        raise _mismatch(node, t, path, names, "binary or large_binary")
    if kind == "fixed":
        assert isinstance(size, int)
        if (_is_binary(t) and not pa.types.is_fixed_size_binary(t)) or \
                (pa.types.is_fixed_size_binary(t) and t.byte_width == size):
            return FixedNode(path, size, str(info["name"]))
        raise _mismatch(node, t, path, names, f"binary (values of {size} bytes)")
    if kind == "string":
        if _is_string(t):
            return BytesNode(path, text=True)
        raise _mismatch(node, t, path, names, "string or large_string")
    if kind == "enum":
        if _is_string(t):
            return EnumNode(path, list(info["symbols"]), str(info["name"]), t)
        raise _mismatch(node, t, path, names, "string (the symbol)")
    raise _mismatch(node, t, path, names, "null")


def _record(info: dict, node: Any, t: pa.DataType, path: str, names: dict[str, dict], per_row: list[str]) -> Node:
    if not pa.types.is_struct(t):
        raise _mismatch(node, t, path, names, "a struct")
    arrow = [t.field(i).name for i in range(t.num_fields)]
    twice = sorted({a for a in arrow if arrow.count(a) > 1})
    if twice:
        raise AvroEncodeError(path, f"the Arrow struct has two fields named {twice[0]!r}")
    schema_names = [f["name"] for f in info["fields"]]
    unknown = [a for a in arrow if a not in schema_names]
    if unknown:
        hint = {a: s for a in unknown for s in schema_names if s.lower() == a.lower() and s not in arrow}
        raise AvroEncodeError(path, "the Arrow struct has field(s) " + ", ".join(repr(a) for a in unknown)
                              + f" that the record {info['name']} does not (its fields: {', '.join(schema_names)})"
                              + (f"; names are case-sensitive: {hint}" if hint else ""))
    fields: list[tuple[str, int | None, Any]] = []
    for f in info["fields"]:
        sub = _join(path, f["name"])
        if f["name"] in arrow:
            index = arrow.index(f["name"])
            fields.append((f["name"], index, compile_node(f["type"], t.field(index).type, sub, names, per_row)))
        elif "default" in f:
            datum = json_value(f["type"], f["default"], names)
            fields.append((f["name"], None, (_write(parse_schema(inline(f["type"], names)), datum), datum)))
        else:
            raise AvroEncodeError(sub, f"not in the Arrow struct, and it has no default in the record {info['name']}")
    return RecordNode(path, fields)


def _union(node: list, t: pa.DataType, path: str, names: dict[str, dict], per_row: list[str]) -> Node:
    layout = union_layout(node, names)  # Spark's Arrow form of the union, as arrow_type lays it out
    kinds = [resolve(b, names)[0] for b in node]
    null_index = kinds.index("null") if "null" in kinds else None
    others = [i for i, slot in enumerate(layout.slot_of) if slot >= 0]
    if layout.kind == "null":
        assert null_index is not None
        return NullOnlyNode(path, null_index)
    if pa.types.is_null(t) and null_index is not None:  # every value null
        return NullableNode(path, null_index, others[0], "", None)
    if len(others) == 1:
        i = others[0]
        if null_index is None:
            return BranchNode(path, i, branch_name(node[i], names), compile_node(node[i], t, path, names, per_row))
        return NullableNode(path, null_index, i, branch_name(node[i], names),
                            compile_node(node[i], t, path, names, per_row))
    if layout.kind == "single":  # int and long, or float and double: Spark's one column
        integers = layout.slot_nodes[0] == "long"
        if not (_is_integer(t) or (not integers and pa.types.is_floating(t))):
            raise _mismatch(node, t, path, names, "an integer type" if integers else "a floating point type")
        return NumberUnionNode(path, null_index, {kinds[i]: i for i in others})
    if _is_string(t):
        per_row.append(path)
        return JsonNode(path, node, names)
    if not pa.types.is_struct(t) or t.num_fields != len(others):
        raise _mismatch(node, t, path, names, f"struct<member0..member{len(others) - 1}> (one field per non-null "
                                              "branch, in order)")
    members = []
    for k, i in enumerate(others):
        members.append(compile_node(node[i], t.field(k).type, _join(path, t.field(k).name), names, per_row))
    return StructUnionNode(path, null_index, others, [branch_name(node[i], names) for i in others], members,
                           [t.field(k).name for k in range(t.num_fields)])


def compile_node(node: Any, t: pa.DataType, path: str, names: dict[str, dict], per_row: list[str]) -> Node:
    """The plan node writing ``node`` (resolved form) from Arrow columns of type ``t``;
    the paths of per-row nodes are added to ``per_row``."""
    if isinstance(t, pa.BaseExtensionType):
        return ConvertNode(path, "storage", compile_node(node, t.storage_type, path, names, per_row))
    if pa.types.is_dictionary(t):
        return ConvertNode(path, "decode", compile_node(node, t.value_type, path, names, per_row))
    target = _normalised(t)
    if target is not None:
        return ConvertNode(path, target, compile_node(node, target, path, names, per_row))
    kind, info = resolve(node, names)
    if kind == "union":
        return _union(node, t, path, names, per_row)
    if pa.types.is_null(t):
        return NullNode(path) if kind == "null" else AllNullNode(path)
    if kind == "null":
        raise _mismatch(node, t, path, names, "null")
    if kind in ("record", "error", "array", "map") and _is_string(t):
        per_row.append(path)
        return JsonNode(path, node, names)
    if kind in ("record", "error"):
        return _record(info, node, t, path, names, per_row)
    if kind == "array":
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return ArrayNode(path, compile_node(info["items"], t.value_type, path + "[]", names, per_row))
        raise _mismatch(node, t, path, names, "a list")
    if kind == "map":
        if pa.types.is_map(t) and _is_string(t.key_type):
            return MapNode(path, BytesNode(path + "{key}", text=True),
                           compile_node(info["values"], t.item_type, path + "{}", names, per_row))
        raise _mismatch(node, t, path, names, "map<string, ...>")
    return _leaf(node, kind, info, t, path, names)


__all__ = ["ArrayNode", "BranchNode", "ConvertNode", "JsonNode", "MapNode", "NullOnlyNode", "NullableNode",
           "NumberUnionNode", "RecordNode", "StructUnionNode", "branch_name", "compile_node", "describe", "inline",
           "json_value", "resolve"]
