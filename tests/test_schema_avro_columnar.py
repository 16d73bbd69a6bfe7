"""The columnar Avro decoder (broker.schema.avro_columnar) against a row-at-a-time
reference: fastavro's ``schemaless_reader(buf, writer, reader)``, its values converted here
to the Arrow type of the reader (``reference``), then ``pyarrow.array``.

Generated: record schemas of primitives, nullable unions, general unions, merged int/long
and float/double unions, enums, fixed, arrays and maps (of primitives and of records),
nested records and logical types; data written by fastavro's ``schemaless_writer``;
readers made from the writer by resolution rules (fields added with defaults, removed,
reordered, renamed with an alias, promoted, made nullable; enum symbols removed with a
default). The columnar decode equals the reference, row for row, on both the vectorised
and the fallback path.

Corrupted payloads (truncated, a byte flipped, bytes appended): the rows left alone decode
as before and are not bad; a corrupted row is bad exactly when fastavro (over the schema
without logical types, so that only the encoding is judged) fails on it or leaves bytes
unread, except for what the decoder refuses and fastavro takes (``STRICTER``); when it is
not bad its value is fastavro's. A row decodes the same alone and in a batch, and the
row path (``vectorised=False``) marks the same rows and gives the same values.

Hand-made payloads: each kind of bad record and its reason, array and map blocks of every
count and sign, long arrays in a few records (walked item by item), empty records and
items of no bytes, union branches resolved and merged, decimals of every length, logical
types, recursive records (expanded, then JSON), the input forms; a batch of 100k records.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import math
import random
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.record.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from broker.schema.avro import PRIMITIVES, AvroSchema, named_types, parse
from broker.schema.avro_arrow import AvroArrowError, arrow_type
from broker.schema.avro_columnar import DecodeResult, decode, plan_for

# What the decoder refuses and fastavro reads (a record's reason starts with one of these)
STRICTER = ("a union branch index out of range", "an enum index out of range", "an int varint longer than 5",
            "a boolean byte other than 0 and 1", "a varint longer than 10 bytes")

MILLIS = (-62135596800000, 253402300799999)  # datetime's range, in ms since the epoch
DAYS = (-719162, 2932896)
EXACT = decimal.Context(prec=100)


# ---------------------------------------------------------------------------------------
# The reference: fastavro's values as Arrow takes them


def kind(node, names) -> str:
    if isinstance(node, list):
        return "union"
    if isinstance(node, dict):
        return node["type"]
    if node in PRIMITIVES:
        return node
    return {"error": "record"}.get(names[node]["type"], names[node]["type"])


def attrs(node, names) -> dict:
    if isinstance(node, dict):
        return node
    return names[node] if isinstance(node, str) and node not in PRIMITIVES else {}


def logical(node, names) -> str | None:
    return attrs(node, names).get("logicalType")


def members(node, names) -> tuple[list[int], str | None]:
    """A union's non-null branches, and "long"/"double" when Spark merges them."""
    others = [i for i, b in enumerate(node) if kind(b, names) != "null"]
    kinds = {kind(node[i], names) for i in others}
    if len(others) == 2 and kinds in ({"int", "long"}, {"float", "double"}):
        return others, "long" if "int" in kinds else "double"
    return others, None


# Python type of a value fastavro read -> the Avro types that hold it (named types come as
# (name, value) pairs: return_named_type)
PY_KINDS = {bool: ("boolean",), int: ("int", "long"), float: ("float", "double"), str: ("string",),
            bytes: ("bytes",), list: ("array",), dict: ("map",), decimal.Decimal: ("bytes",),
            datetime.datetime: ("long",), datetime.date: ("int",), datetime.time: ("int", "long"),
            uuid.UUID: ("string",)}


def branch_of(node, names, value) -> int:
    if value is None:
        return next(i for i, b in enumerate(node) if kind(b, names) == "null")
    if isinstance(value, tuple):
        return node.index(value[0])
    kinds = PY_KINDS[type(value)]
    found = [i for i, b in enumerate(node) if kind(b, names) in kinds]
    if found:
        return found[0]
    named = {str: "enum", bytes: "fixed", dict: "record", decimal.Decimal: "fixed"}[type(value)]
    return next(i for i, b in enumerate(node) if kind(b, names) == named)  # fastavro: a named type, untagged


def reference(node, names, value, raw: bool = False):
    """fastavro's value (``raw``: read over schemas without logical types) of a reader
    node, as ``pyarrow.array`` takes it for Spark's Arrow type of the node. ValueError
    for what has no Arrow form (an int past 32 bits, a decimal past its precision)."""
    k = kind(node, names)
    if k == "union":
        others, merged = members(node, names)
        if value is None:
            return None
        b = branch_of(node, names, value)
        if isinstance(value, tuple):
            value = value[1]
        if merged:
            return reference(merged, names, value, raw)
        if len(others) == 1:
            return reference(node[b], names, value, raw)
        return {f"member{s}": reference(node[i], names, value, raw) if i == b else None
                for s, i in enumerate(others)}
    if k == "record":
        return {f["name"]: reference(f["type"], names, value[f["name"]], raw) for f in names[node]["fields"]}
    if k == "array":
        return [reference(node["items"], names, v, raw) for v in value]
    if k == "map":
        return [(key, reference(node["values"], names, v, raw)) for key, v in value.items()]
    lt = logical(node, names)
    if lt == "decimal" and k in ("bytes", "fixed"):
        a = attrs(node, names)
        if raw:
            unscaled = int.from_bytes(value, "big", signed=True)
            if abs(unscaled) >= 10 ** a["precision"]:
                raise ValueError("decimal beyond its precision")
            return decimal.Decimal(unscaled).scaleb(-a.get("scale", 0), context=EXACT)
        return value
    if k == "string":
        if isinstance(value, bytes):
            return value.decode()
        return str(value)  # a uuid as its string
    if k == "int":
        if isinstance(value, datetime.time):
            return (value.hour * 3600 + value.minute * 60 + value.second) * 1000 + value.microsecond // 1000
        if isinstance(value, int) and not INT32_MIN <= value <= INT32_MAX:
            raise ValueError("int beyond 32 bits")
        return value
    if k == "long":
        if isinstance(value, datetime.time):
            return (value.hour * 3600 + value.minute * 60 + value.second) * 1000000 + value.microsecond
        if isinstance(value, int) and lt and "timestamp" in lt:
            micros = value * 1000 if lt.endswith("millis") else value // 1000 if lt.endswith("nanos") else value
            if not INT64_MIN <= micros <= INT64_MAX:
                raise ValueError("timestamp beyond int64 microseconds")
            return micros
        return value
    if k in ("float", "double") and isinstance(value, int):
        return float(value)
    if k in ("bytes", "fixed") and isinstance(value, str):
        return value.encode("latin-1")  # a default as fastavro fills it
    return value


def same(a, b) -> bool:
    """Equal values, NaN equal to NaN (damaged floats are often NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def storage(type_: pa.DataType) -> pa.DataType:
    """The type with dates and timestamps as their integers (damaged ones pass Python's)."""
    if pa.types.is_timestamp(type_):
        return pa.int64()
    if pa.types.is_date32(type_):
        return pa.int32()
    if pa.types.is_struct(type_):  # nullable: under a null row pyarrow's own children hold nulls
        return pa.struct([pa.field(f.name, storage(f.type)) for f in type_])
    if pa.types.is_map(type_):
        return pa.map_(type_.key_type, pa.field("value", storage(type_.item_type)))
    if pa.types.is_list(type_):
        return pa.list_(pa.field("element", storage(type_.value_type)))
    return type_


def plain(array: pa.Array) -> list:
    return array.cast(storage(array.type)).to_pylist()


def strip_logical(obj):
    if isinstance(obj, dict):
        return {k: strip_logical(v) for k, v in obj.items() if k != "logicalType"}
    if isinstance(obj, list):
        return [strip_logical(v) for v in obj]
    return obj


def write(schema: AvroSchema, values: list) -> list[bytes]:
    out = []
    for v in values:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema.parsed, v)
        out.append(buf.getvalue())
    return out


def expected(writer: AvroSchema, reader: AvroSchema, payloads: list[bytes]) -> pa.Array:
    names = named_types(reader)
    rows = [reference(reader.root, names, fastavro.schemaless_reader(io.BytesIO(p), writer.parsed, reader.parsed,
                                                                     return_named_type=True)) for p in payloads]
    return pa.array(rows, arrow_type(reader))


def check(result: DecodeResult, want: pa.Array) -> None:
    assert result.array.type == want.type
    assert not result.bad.any(), result.errors
    assert result.errors == []
    assert result.array.to_pylist() == want.to_pylist()
    result.array.validate(full=True)


# ---------------------------------------------------------------------------------------
# Generated schemas and data


class Names:
    def __init__(self, resolvable: bool = False) -> None:
        self.n = 0
        self.resolvable = resolvable

    def __call__(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"


# A generated type is (schema JSON, sampler): the sampler draws a value for fastavro's
# writer from a random.Random, edge values often (boundaries, empty, non-ASCII, infinities)
Sampler = Callable[[random.Random], Any]

LEAVES = ("boolean", "int", "long", "float", "double", "bytes", "string", "enum", "fixed", "date", "time-millis",
          "time-micros", "timestamp-millis", "timestamp-micros", "timestamp-nanos", "local-timestamp-millis",
          "local-timestamp-micros", "local-timestamp-nanos", "uuid", "decimal-bytes", "decimal-fixed", "duration")
COMPOSITES = ("record", "array", "map", "nullable", "nullable", "union", "merged")
LONG_RANGES = {"timestamp-millis": MILLIS, "local-timestamp-millis": MILLIS,
               "timestamp-micros": (MILLIS[0] * 1000, MILLIS[1] * 1000),
               "local-timestamp-micros": (MILLIS[0] * 1000, MILLIS[1] * 1000),
               "time-micros": (0, 86399999999), "timestamp-nanos": (INT64_MIN, INT64_MAX),
               "local-timestamp-nanos": (INT64_MIN, INT64_MAX)}
TEXT = "aZ09 _-é€😀\u0000\u07ff\uffff"


def integers(low: int, high: int) -> Sampler:
    edges = [low, high, *(v for v in (0, 1, -1, 63, 64, -65, 8191, 8192) if low <= v <= high)]
    return lambda rng: rng.choice(edges) if rng.random() < 0.3 else rng.randint(low, high) if rng.random() < 0.5 \
        else max(low, min(high, rng.randint(-(2 ** rng.randint(0, 62)), 2 ** rng.randint(0, 62))))


def floats(width: int) -> Sampler:
    edges = [0.0, -0.0, 1.5, math.inf, -math.inf, 3.4e38 if width == 32 else 1.7e308, 1e-45 if width == 32 else 5e-324]
    cast = (lambda v: float(np.float32(v))) if width == 32 else float
    return lambda rng: rng.choice(edges) if rng.random() < 0.3 else cast(rng.uniform(-1e6, 1e6))


def text(rng: random.Random, most: int = 8) -> str:
    return "".join(rng.choice(TEXT) for _ in range(rng.randint(0, most)))


def binary(rng: random.Random, size: int | None = None) -> bytes:
    return rng.randbytes(rng.randint(0, 8) if size is None else size)


def _digits(size: int) -> int:
    return int(math.floor(math.log10(2 ** (8 * size - 1) - 1)))


def decimals(precision: int, scale: int) -> Sampler:
    unscaled = integers(-(10 ** precision) + 1, 10 ** precision - 1)
    return lambda rng: decimal.Decimal(unscaled(rng)).scaleb(-scale, context=EXACT)


@st.composite
def leaf(draw, names: Names, kind_: str):
    simple: dict[str, Sampler] = {
        "boolean": lambda rng: rng.random() < 0.5, "int": integers(INT32_MIN, INT32_MAX),
        "long": integers(INT64_MIN, INT64_MAX), "float": floats(32), "double": floats(64), "bytes": binary,
        "string": text}
    if kind_ in simple:
        return kind_, simple[kind_]
    if kind_ == "enum":
        symbols = draw(st.lists(st.sampled_from(["A", "B", "C", "D", "E"]), min_size=1, max_size=5, unique=True))
        return {"type": "enum", "name": names("E"), "symbols": symbols}, lambda rng: rng.choice(symbols)
    if kind_ in ("fixed", "duration"):
        size = 12 if kind_ == "duration" else draw(st.integers(0, 6))
        node = {"type": "fixed", "name": names("F"), "size": size}
        if kind_ == "duration":
            node["logicalType"] = "duration"
        return node, lambda rng: binary(rng, size)
    if kind_ == "date":
        return {"type": "int", "logicalType": "date"}, integers(*DAYS)
    if kind_ == "time-millis":
        return {"type": "int", "logicalType": "time-millis"}, integers(0, 86399999)
    if kind_ == "uuid":
        return {"type": "string", "logicalType": "uuid"}, lambda rng: str(uuid.UUID(int=rng.getrandbits(128)))
    if kind_ in LONG_RANGES:
        return {"type": "long", "logicalType": kind_}, integers(*LONG_RANGES[kind_])
    if kind_ == "decimal-bytes":
        precision = draw(st.integers(1, 38))
        scale = draw(st.integers(0, precision))
        return ({"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale},
                decimals(precision, scale))
    size = draw(st.integers(1, 16))
    precision = draw(st.integers(1, min(38, _digits(size))))
    scale = draw(st.integers(0, precision))
    return ({"type": "fixed", "name": names("X"), "size": size, "logicalType": "decimal", "precision": precision,
             "scale": scale}, decimals(precision, scale))


# union branch families: a union holds at most one of each (its values then say which branch)
FAMILY = {"boolean": "boolean", "int": "int", "long": "int", "float": "float", "double": "float", "bytes": "bytes",
          "string": "string", "array": "array", "map": "map"}


def family_of(choice: str, resolvable: bool) -> str | None:
    family = FAMILY.get(choice)
    if resolvable and family in ("string", "float"):  # see ``reader_of``
        return {"string": "bytes", "float": "int"}[family]
    return family


def _items(sample: Sampler, most: int) -> Sampler:
    """Lists of up to ``most`` values, and now and then a long one (walked item by item)."""
    def draw(rng: random.Random) -> list:
        n = rng.randint(17, 40) if rng.random() < 0.04 else rng.choice([0, 1, rng.randint(0, most)])
        return [sample(rng) for _ in range(n)]
    return draw


@st.composite
def avro_type(draw, names: Names, depth: int, *, allow_union: bool = True):
    composite = depth > 0 and draw(st.booleans())
    kind_ = draw(st.sampled_from(COMPOSITES if allow_union else ("record", "array", "map"))) if composite else \
        draw(st.sampled_from(LEAVES))
    if kind_ in LEAVES:
        return draw(leaf(names, kind_))
    if kind_ == "record":
        return draw(record(names, depth - 1))
    if kind_ in ("array", "map"):
        inner, sample = draw(avro_type(names, depth - 1))
        if kind_ == "array":
            return {"type": "array", "items": inner}, _items(sample, 5)
        pairs = _items(lambda rng: (text(rng, 3), sample(rng)), 4)
        return {"type": "map", "values": inner}, lambda rng: dict(pairs(rng))
    if kind_ == "nullable":
        inner, sample = draw(avro_type(names, depth - 1, allow_union=False))
        return (["null", inner] if draw(st.booleans()) else [inner, "null"]), \
            lambda rng: None if rng.random() < 0.3 else sample(rng)
    if kind_ == "merged":
        pair = draw(st.sampled_from([["int", "long"], ["long", "int"], ["float", "double"], ["double", "float"]]))
        if draw(st.booleans()):
            pair = draw(st.permutations(["null", *pair]))
        samplers = {"int": integers(INT32_MIN, INT32_MAX), "long": integers(INT64_MIN, INT64_MAX),
                    "float": floats(32), "double": floats(64), "null": lambda rng: None}
        chosen = [samplers[b] for b in pair]
        return list(pair), lambda rng: rng.choice(chosen)(rng)
    # a general union: branches of different families, values tagged with their branch for
    # fastavro's writer (else it takes the first branch the value fits, a fixed for bytes)
    families: set[str] = set()
    branches: list[Any] = []
    samplers: list[Sampler] = []
    if draw(st.booleans()):
        branches.append("null")
        samplers.append(lambda rng: None)
    # (no logical types on unnamed branches: fastavro's writer tries their conversions on any value)
    for choice in draw(st.lists(st.sampled_from(["boolean", "int", "long", "float", "double", "bytes", "string",
                                                 "enum", "fixed", "record", "array", "map", "decimal-fixed"]),
                                min_size=2, max_size=4)):
        family = family_of(choice, names.resolvable)
        if family is not None and family in families:
            continue
        if family is not None:
            families.add(family)
        if choice in ("record", "array", "map"):
            node, sample = draw(_composite(names, choice, depth - 1))
        else:
            node, sample = draw(leaf(names, choice))
        tag = node if isinstance(node, str) else node.get("name", node["type"])  # fastavro's writer: that branch
        sample = (lambda s, t: lambda rng: (t, s(rng)))(sample, tag)
        branches.append(node)
        samplers.append(sample)
    for extra, sample in (("string", text), ("boolean", lambda rng: rng.random() < 0.5)):
        if len(branches) < 2 and family_of(extra, names.resolvable) not in families:
            branches.append(extra)
            samplers.append(sample)
    return branches, lambda rng: rng.choice(samplers)(rng)


@st.composite
def _composite(draw, names: Names, choice: str, depth: int):
    if choice == "record":
        return draw(record(names, max(depth, 0)))
    inner, sample = draw(avro_type(names, max(depth, 0), allow_union=False))
    if choice == "array":
        return {"type": "array", "items": inner}, _items(sample, 3)
    pairs = _items(lambda rng: (text(rng, 3), sample(rng)), 3)
    return {"type": "map", "values": inner}, lambda rng: dict(pairs(rng))


@st.composite
def record(draw, names: Names, depth: int, min_fields: int = 1, max_fields: int = 4):
    count = draw(st.integers(min_fields, max_fields))
    fields, samplers = [], {}
    for i in range(count):
        node, sample = draw(avro_type(names, depth))
        fields.append({"name": f"f{i}", "type": node})
        samplers[f"f{i}"] = sample
    return ({"type": "record", "name": names("R"), "fields": fields},
            lambda rng: {name: sample(rng) for name, sample in samplers.items()})


@st.composite
def datasets(draw, depth: int = 2, max_rows: int = 40, resolvable: bool = False):
    """(a record schema's JSON, rows for it): the schema drawn by hypothesis, the rows from
    a random generator whose state it draws (many rows at little cost)."""
    names = Names(resolvable)
    schema_json, sample = draw(record(names, depth, 1, 5))
    rng = random.Random(draw(st.integers(0, 2 ** 32)))
    rows = [sample(rng) for _ in range(rng.choice([0, 1, rng.randint(2, max_rows), max_rows]))]
    return schema_json, rows


# ---------------------------------------------------------------------------------------
# Readers made from the writer by resolution rules

DEFAULTS = [("int", 7), ("long", -3), ("string", "dflt"), ("boolean", True), ("double", 1.5),
            (["null", "string"], None), ({"type": "array", "items": "int"}, [1, 2]),
            ({"type": "map", "values": "long"}, {"k": 4})]
# (no bytes to string: generated bytes are not UTF-8; no long to float: the decoder converts
# a long to a float32 at once, as Avro Java does, fastavro through a double, rounding twice)
PROMOTE = {"int": ["long", "float", "double"], "long": ["double"], "float": ["double"], "string": ["bytes"]}


@st.composite
def reader_of(draw, writer_json: dict):
    """A reader of the writer's data. The writer's unions hold no two branches one of which
    promotes to the other (string and bytes, an int or long and a float or double):
    fastavro resolves a writer branch to the first reader branch it promotes to, where Avro
    Java (and the decoder) takes the branch of its own type."""
    fields = []
    for f in writer_json["fields"]:
        action = draw(st.sampled_from(["keep", "keep", "drop", "promote", "nullable", "alias", "enum"]))
        f = dict(f)
        if action == "drop":
            continue
        if action == "promote" and isinstance(f["type"], str) and f["type"] in PROMOTE:
            f["type"] = draw(st.sampled_from(PROMOTE[f["type"]]))
        elif action == "nullable" and not isinstance(f["type"], list):
            f["type"] = ["null", f["type"]] if draw(st.booleans()) else [f["type"], "null"]
        elif action == "alias":
            f = {**f, "name": f"{f['name']}_renamed", "aliases": [f["name"]]}
        elif action == "enum" and isinstance(f["type"], dict) and f["type"].get("type") == "enum":
            symbols = f["type"]["symbols"]
            kept = draw(st.lists(st.sampled_from(symbols), min_size=1, unique=True))
            f["type"] = {**f["type"], "symbols": kept, "default": kept[0]}
        fields.append(f)
    for i in range(draw(st.integers(0, 2))):
        node, default = draw(st.sampled_from(DEFAULTS))
        fields.append({"name": f"added{i}", "type": node, "default": default})
    fields = draw(st.permutations(fields))
    if not fields:
        fields = [{"name": "added_only", "type": "int", "default": 1}]
    return {**writer_json, "fields": list(fields)}


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.data_too_large])


@SETTINGS
@given(datasets())
def test_columnar_equals_fastavro_reference(data) -> None:
    schema_json, rows = data
    writer = parse(json.dumps(schema_json))
    payloads = write(writer, rows)
    want = expected(writer, writer, payloads)
    array = pa.array(payloads, pa.binary())
    check(decode(array, writer), want)
    check(decode(array, writer, vectorised=False), want)


@SETTINGS
@given(st.data())
def test_columnar_equals_fastavro_with_a_resolved_reader(data) -> None:
    schema_json, rows = data.draw(datasets(depth=1, resolvable=True))
    reader_json = data.draw(reader_of(schema_json))
    writer, reader = parse(json.dumps(schema_json)), parse(json.dumps(reader_json))
    assert reader.backward_errors(writer) == []
    payloads = write(writer, rows)
    want = expected(writer, reader, payloads)
    array = pa.array(payloads, pa.binary())
    check(decode(array, writer, reader), want)
    check(decode(array, writer, reader, vectorised=False), want)


def _oracle(payload: bytes, raw_writer, reader: AvroSchema) -> tuple[bool, object]:
    """(fastavro reads it, its value): fastavro over the schema without logical types."""
    buf = io.BytesIO(payload)
    try:
        value = fastavro.schemaless_reader(buf, raw_writer, None, return_named_type=True)
        if buf.tell() != len(payload):
            return False, None
        converted = reference(reader.root, named_types(reader), value, raw=True)
        pa.array([converted], arrow_type(reader))
        return True, converted
    except Exception:  # fastavro's errors on damaged data are of many types
        return False, None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_corrupted_payloads_mark_exactly_the_bad_rows(data) -> None:
    schema_json, rows = data.draw(datasets(depth=2, max_rows=6))
    if not rows:
        return
    writer = parse(json.dumps(schema_json))
    payloads = write(writer, rows)
    damaged = list(payloads)
    touched = data.draw(st.sets(st.integers(0, len(rows) - 1), min_size=1))
    for i in touched:
        p = damaged[i]
        op = data.draw(st.sampled_from(["truncate", "flip", "append"]))
        if op == "truncate" and p:
            damaged[i] = p[:data.draw(st.integers(0, len(p) - 1))]
        elif op == "flip" and p:
            at = data.draw(st.integers(0, len(p) - 1))
            damaged[i] = p[:at] + bytes([p[at] ^ data.draw(st.integers(1, 255))]) + p[at + 1:]
        else:
            damaged[i] = p + data.draw(st.binary(min_size=1, max_size=3))
    result = decode(pa.array(damaged, pa.binary()), writer)
    result.array.validate(full=True)
    rows_path = decode(pa.array(damaged, pa.binary()), writer, vectorised=False)
    assert rows_path.bad.tolist() == result.bad.tolist()
    assert same(plain(rows_path.array), plain(result.array))
    want = plain(expected(writer, writer, payloads))
    got = plain(result.array)
    raw_writer = fastavro.parse_schema(strip_logical(json.loads(writer.formatted("resolved"))))
    for i in range(len(rows)):
        if i not in touched:
            assert not result.bad[i] and got[i] == want[i]
            continue
        readable, value = _oracle(damaged[i], raw_writer, writer)
        if not readable:
            assert result.bad[i], (i, damaged[i])
        elif result.bad[i]:
            assert result.reason(i).startswith(STRICTER), result.reason(i)
        else:
            assert same(got[i], plain(pa.array([value], arrow_type(writer)))[0])
        if result.bad[i]:
            assert got[i] is None and result.reason(i)
        alone = decode(pa.array([damaged[i]], pa.binary()), writer)
        assert bool(alone.bad[0]) == bool(result.bad[i])
        assert same(plain(alone.array)[0], got[i])
    bad = np.flatnonzero(result.bad)
    assert result.errors == ([] if not bad.size else [(int(bad[0]), result.errors[0][1])])
    if bad.size:
        assert result.errors[0][1].startswith(f"record {bad[0]}: {result.reason(int(bad[0]))}")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=10))
def test_random_bytes_never_raise(payloads) -> None:
    schema = parse(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": ["null", "string", "long", {"type": "array", "items": "double"}]},
        {"name": "b", "type": {"type": "map", "values": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}}},
        {"name": "c", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "d", "type": "boolean"}]}))
    result = decode(pa.array(payloads, pa.binary()), schema)
    assert len(result.array) == len(payloads)
    result.array.validate(full=True)
    assert [v is None for v in result.array.to_pylist()] == result.bad.tolist()


# ---------------------------------------------------------------------------------------
# Hand-made payloads: each kind of bad record, blocks, inputs


def zz(n: int) -> bytes:
    """Avro's zigzag varint of ``n``."""
    z = (n << 1) ^ (n >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


def s(text: str) -> bytes:
    raw = text.encode()
    return zz(len(raw)) + raw


FLAT = parse(json.dumps({"type": "record", "name": "Flat", "fields": [
    {"name": "id", "type": "long"}, {"name": "n", "type": "int"}, {"name": "name", "type": "string"},
    {"name": "opt", "type": ["null", "string"], "default": None},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
    {"name": "flag", "type": "boolean"}, {"name": "x", "type": "double"}]}))


def flat(id_=1, n=2, name="ok", opt=b"\x00", kind_=b"\x00", flag=b"\x01", x=b"\x00" * 8) -> bytes:
    return zz(id_) + zz(n) + s(name) + opt + kind_ + flag + x


@pytest.mark.parametrize(("payload", "reason"), [
    (flat()[:-3], "truncated"),
    (flat() + b"\x00", "trailing bytes after the value"),
    (flat(opt=zz(2)), "a union branch index out of range"),
    (flat(opt=zz(-1)), "a union branch index out of range"),
    (flat(kind_=zz(2)), "an enum index out of range"),
    (flat(kind_=zz(-1)), "an enum index out of range"),
    (zz(1) + zz(2) + zz(-3) + b"abc", "a negative length"),
    (zz(1) + zz(2) + zz(100) + b"abc", "a length of more bytes than the record has left"),
    (b"\xff" * 10 + b"\x01", "a varint longer than 10 bytes"),
    (b"\xff" * 9 + b"\x02", "a varint longer than 10 bytes"),
    (zz(1) + zz(INT32_MAX + 1), "an int varint longer than 5 bytes"),
    (zz(1) + b"\x82\x80\x80\x80\x80\x00", "an int varint longer than 5 bytes"),
    (zz(1) + zz(2) + zz(3) + b"\xed\xb3\xbf" + flat()[5:], "a string that is not UTF-8"),  # a surrogate
    (zz(1) + zz(2) + zz(2) + b"\xc3\x28" + flat()[5:], "a string that is not UTF-8"),
    (flat(flag=b"\x02"), "a boolean byte other than 0 and 1"),
    (b"", "truncated"),
])
def test_bad_records_are_marked_with_their_reason(payload, reason) -> None:
    good = flat()
    result = decode(pa.array([good, payload, good], pa.binary()), FLAT)
    assert result.bad.tolist() == [False, True, False]
    rows = result.array.to_pylist()
    assert rows[1] is None and rows[0] == rows[2] == {"id": 1, "n": 2, "name": "ok", "opt": None, "kind": "A",
                                                      "flag": True, "x": 0.0}
    if reason is not None:
        assert result.reason(1).startswith(reason), result.reason(1)
    assert result.errors[0][0] == 1 and result.errors[0][1].startswith(f"record 1: {result.reason(1)} (at byte ")
    assert result.reason(0) is None


def test_an_unknown_enum_symbol_takes_the_readers_default_or_fails() -> None:
    writer = parse('{"type":"enum","name":"E","symbols":["A","B","C"]}')
    with_default = parse('{"type":"enum","name":"E","symbols":["C","A","Z"],"default":"Z"}')
    without = parse('{"type":"enum","name":"E","symbols":["C","A"]}')
    payloads = pa.array([zz(0), zz(1), zz(2)], pa.binary())
    assert decode(payloads, writer, with_default).array.to_pylist() == ["A", "Z", "C"]
    result = decode(payloads, writer, without)
    assert result.bad.tolist() == [False, True, False] and result.array.to_pylist() == ["A", None, "C"]
    assert "lacks" in result.reason(1)


def test_unresolvable_data_fails_the_records_reaching_it() -> None:
    writer = parse('{"type":"record","name":"R","fields":[{"name":"a","type":["null","int"]}]}')
    reader = parse('{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}')
    result = decode(pa.array([zz(1) + zz(5), zz(0)], pa.binary()), writer, reader)
    assert result.array.to_pylist() == [{"a": 5}, None] and result.bad.tolist() == [False, True]
    assert "null" in result.reason(1)
    missing = parse('{"type":"record","name":"R","fields":[{"name":"b","type":"int"}]}')
    result = decode(pa.array([zz(1) + zz(5)], pa.binary()), writer, missing)
    assert result.bad.tolist() == [True] and "has no default" in result.reason(0)
    string_reader = parse('{"type":"record","name":"R","fields":[{"name":"a","type":"string"}]}')
    result = decode(pa.array([zz(1) + zz(5), zz(0)], pa.binary()), writer, string_reader)
    assert result.bad.tolist() == [True, True]


def test_array_blocks_of_any_count_and_sign() -> None:
    schema = parse('{"type":"array","items":"long"}')
    strings = parse('{"type":"map","values":"string"}')
    payloads = [
        zz(0),
        zz(2) + zz(1) + zz(2) + zz(1) + zz(3) + zz(0),  # two blocks
        zz(-2) + zz(2) + zz(7) + zz(-8) + zz(0),  # a negative count, then the block's size
        zz(3) + zz(1) + zz(300) + zz(-70000) + zz(-1) + zz(1) + zz(5) + zz(0),
    ]
    result = decode(pa.array(payloads, pa.binary()), schema)
    assert result.array.to_pylist() == [[], [1, 2, 3], [7, -8], [1, 300, -70000, 5]]
    assert result.array.type == pa.list_(pa.field("element", pa.int64(), nullable=False))
    maps = [zz(1) + s("k") + s("v") + zz(-1) + zz(4) + s("é") + s("w") + zz(0), zz(0)]
    result = decode(pa.array(maps, pa.binary()), strings)
    assert result.array.to_pylist() == [[("k", "v"), ("é", "w")], []]
    nested = parse('{"type":"array","items":{"type":"array","items":"long"}}')
    inner = zz(-2) + zz(2) + zz(1) + zz(-2) + zz(1) + zz(3) + zz(0)  # blocks of 2 and 1 items
    payload = zz(30) + inner * 30 + zz(0)  # one long array: its items are walked one by one
    assert decode(pa.array([payload, zz(1) + inner + zz(0)], pa.binary()), nested).array.to_pylist() == [
        [[1, -2, 3]] * 30, [[1, -2, 3]]]
    too_many = decode(pa.array([zz(1000) + zz(1) + zz(0)], pa.binary()), schema)
    assert too_many.bad.tolist() == [True] and "block count" in too_many.reason(0)


def test_arrays_of_records_with_nested_arrays_and_unions() -> None:
    schema = parse(json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"},
            {"name": "tags", "type": {"type": "array", "items": ["null", "string", "long"]}},
            {"name": "qty", "type": ["null", "int"]}]}}},
        {"name": "meta", "type": {"type": "map", "values": {"type": "array", "items": "Line"}}}]}))
    rng = np.random.default_rng(5)
    rows = []
    for i in range(300):
        lines = [{"sku": f"s{i}-{j}", "tags": [None if t % 3 == 0 else (f"t{t}" if t % 3 == 1 else t * 1000)
                                               for t in range(int(rng.integers(0, 4)))],
                  "qty": None if j % 2 else j} for j in range(int(rng.integers(0, 5)))]
        rows.append({"lines": lines, "meta": {f"m{k}": lines[:k] for k in range(int(rng.integers(0, 3)))}})
    payloads = write(schema, rows)
    want = expected(schema, schema, payloads)
    check(decode(pa.array(payloads, pa.binary()), schema), want)
    check(decode(pa.array(payloads, pa.binary()), schema, vectorised=False), want)


def test_union_branches_merge_into_one_reader_branch() -> None:
    writer = parse(json.dumps({"type": "record", "name": "W", "fields": [
        {"name": "n", "type": ["int", "long", "string", "null"]},
        {"name": "r", "type": [{"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]},
                               {"type": "record", "name": "B", "fields": [{"name": "x", "type": "long"}]}]}]}))
    reader = parse(json.dumps({"type": "record", "name": "W", "fields": [
        {"name": "n", "type": ["null", "long", "bytes"]},
        {"name": "r", "type": {"type": "record", "name": "A", "fields": [{"name": "x", "type": "double"}]}}]}))
    rows = [{"n": 1, "r": ("A", {"x": 1})}, {"n": 2 ** 40, "r": ("B", {"x": 2 ** 40})},
            {"n": "txt", "r": ("A", {"x": -1})}, {"n": None, "r": ("B", {"x": 3})}]
    result = decode(pa.array(write(writer, rows), pa.binary()), writer, reader)
    assert not result.bad.any(), result.errors
    assert result.array.to_pylist() == [
        {"n": {"member0": 1, "member1": None}, "r": {"x": 1.0}},
        {"n": {"member0": 2 ** 40, "member1": None}, "r": {"x": float(2 ** 40)}},
        {"n": {"member0": None, "member1": b"txt"}, "r": {"x": -1.0}},
        {"n": None, "r": {"x": 3.0}}]


def test_a_reader_union_takes_avro_javas_best_branch() -> None:
    writer = parse('{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"float"}]}')
    reader = parse(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": ["null", "string", "long", "int"]},  # int itself, not the promotion to long
        {"name": "b", "type": ["string", "double", "null"]}]}))
    result = decode(pa.array([zz(-5) + b"\x00\x00\xc0\x3f"], pa.binary()), writer, reader)
    assert result.array.to_pylist() == [{"a": {"member0": None, "member1": None, "member2": -5},
                                         "b": {"member0": None, "member1": 1.5}}]


@pytest.mark.parametrize("length", [0, 1, 5, 16, 17, 20])
def test_decimals_of_any_length(length) -> None:
    schema = parse('{"type":"bytes","logicalType":"decimal","precision":38,"scale":3}')
    values = [0, 1, -1, 127, -128, 10 ** 37, -(10 ** 38) + 1, 2 ** 100, -(2 ** 100)]
    payloads, want = [], []
    for v in values:
        raw = v.to_bytes(max(length, (v.bit_length() + 8) // 8), "big", signed=True)
        if v == 0 and length == 0:
            raw = b""
        payloads.append(zz(len(raw)) + raw)
        want.append(decimal.Decimal(v).scaleb(-3, context=EXACT))
    result = decode(pa.array(payloads, pa.binary()), schema)
    assert not result.bad.any(), result.errors
    assert result.array.to_pylist() == want
    over = (10 ** 38).to_bytes(17, "big", signed=True)
    not_extended = b"\x01" + (5).to_bytes(16, "big", signed=True)
    result = decode(pa.array([zz(17) + over, zz(17) + not_extended], pa.binary()), schema)
    assert result.bad.tolist() == [True, True] and "more than 38 digits" in result.reason(0)


def test_logical_types_convert() -> None:
    schema = parse(json.dumps({"type": "record", "name": "T", "fields": [
        {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "ns", "type": {"type": "long", "logicalType": "timestamp-nanos"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tod", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "dec", "type": {"type": "fixed", "name": "D", "size": 4, "logicalType": "decimal",
                                 "precision": 9, "scale": 2}}]}))
    payload = zz(1500) + zz(-1501) + zz(7) + zz(19000) + zz(1000) + s("not-a-uuid") + (-12345).to_bytes(4, "big",
                                                                                                       signed=True)
    result = decode(pa.array([payload, zz(2 ** 62) + payload[2:]], pa.binary()), schema)
    utc = datetime.UTC
    assert result.array.to_pylist()[0] == {
        "ms": datetime.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=utc),
        "ns": datetime.datetime(1969, 12, 31, 23, 59, 59, 999998, tzinfo=utc),
        "local": datetime.datetime(1970, 1, 1, 0, 0, 0, 7), "day": datetime.date(2022, 1, 8), "tod": 1000,
        "id": "not-a-uuid", "dec": decimal.Decimal("-123.45")}
    assert result.bad.tolist() == [False, True] and "timestamp beyond" in result.reason(1)


RECURSIVE = parse(json.dumps({"type": "record", "name": "Node", "fields": [
    {"name": "value", "type": "int"},
    {"name": "next", "type": ["null", "Node"], "default": None},
    {"name": "kids", "type": {"type": "array", "items": "Node"}}]}))


def _chain(depth: int, value: int = 0) -> dict:
    return {"value": value, "next": None if depth == 0 else _chain(depth - 1, value + 1),
            "kids": [] if depth < 2 else [{"value": -value, "next": None, "kids": []}]}


def _cut(node: dict | None, levels: int):
    if node is None:
        return None
    if levels == 0:
        return json.dumps(node, separators=(",", ":"))
    return {"value": node["value"], "next": _cut(node["next"], levels - 1),
            "kids": [_cut(k, levels - 1) for k in node["kids"]]}


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_recursive_records_expand_then_become_json(depth) -> None:
    rows = [_chain(k, 10 * k) for k in range(5)]
    payloads = pa.array(write(RECURSIVE, rows), pa.binary())
    result = decode(payloads, RECURSIVE, recursive_depth=depth)
    assert not result.bad.any(), result.errors
    assert result.array.type == arrow_type(RECURSIVE, recursive_depth=depth)
    assert result.array.to_pylist() == [_cut(r, depth) for r in rows]
    assert decode(payloads, RECURSIVE, recursive_depth=depth, vectorised=False).array.equals(result.array)
    with pytest.raises(AvroArrowError, match="recursive"):
        decode(payloads, RECURSIVE)


def test_a_recursive_writer_field_the_reader_lacks_is_skipped() -> None:
    reader = parse('{"type":"record","name":"Node","fields":[{"name":"value","type":"int"}]}')
    rows = [_chain(k, k) for k in range(6)]
    result = decode(pa.array(write(RECURSIVE, rows), pa.binary()), RECURSIVE, reader)
    assert result.array.to_pylist() == [{"value": k} for k in range(6)]
    deep = zz(1) + (zz(1) + zz(1)) * 140 + zz(0) + zz(0) * 141  # 141 levels of "next"
    result = decode(pa.array([deep], pa.binary()), RECURSIVE, reader)
    assert result.bad.tolist() == [True] and "nested more than" in result.reason(0)


def test_inputs_empty_one_null_sliced_large_chunked_and_offsets() -> None:
    one = flat()
    want = {"id": 1, "n": 2, "name": "ok", "opt": None, "kind": "A", "flag": True, "x": 0.0}
    empty = decode(pa.array([], pa.binary()), FLAT)
    assert len(empty.array) == 0 and empty.array.type == arrow_type(FLAT) and empty.bad.size == 0
    assert decode(pa.array([one], pa.binary()), FLAT).array.to_pylist() == [want]
    with_null = decode(pa.array([one, None, one], pa.binary()), FLAT)
    assert with_null.array.to_pylist() == [want, None, want] and not with_null.bad.any()
    sliced = pa.array([b"junk", one, one + b"x"], pa.binary()).slice(1, 1)
    assert decode(sliced, FLAT).array.to_pylist() == [want]
    assert decode(pa.array([one, one], pa.large_binary()), FLAT).array.to_pylist() == [want, want]
    chunked = pa.chunked_array([pa.array([one]), pa.array([one])], pa.binary())
    assert decode(chunked, FLAT).array.to_pylist() == [want, want]
    offsets = np.array([0, len(one), 2 * len(one)], np.int64)
    assert decode((offsets, one * 2), FLAT).array.to_pylist() == [want, want]
    assert decode((offsets, np.frombuffer(one * 2, np.uint8)), FLAT).array.to_pylist() == [want, want]
    with pytest.raises(ValueError, match="offsets"):
        decode((np.array([0, 100]), one), FLAT)
    with pytest.raises(TypeError):
        decode([one], FLAT)
    with pytest.raises(TypeError):
        decode(pa.array(["text"]), FLAT)


def test_top_level_non_records() -> None:
    for text, payloads, want in [
        ('"string"', [s("a"), s("bc")], ["a", "bc"]),
        ('["null","long"]', [zz(0), zz(1) + zz(-9)], [None, -9]),
        ('{"type":"array","items":["null","double"]}', [zz(1) + zz(0) + zz(0)], [[None]]),
        ('"null"', [b"", b""], [None, None]),
    ]:
        schema = parse(text)
        result = decode(pa.array(payloads, pa.binary()), schema)
        assert result.array.to_pylist() == want and not result.bad.any()
    result = decode(pa.array([zz(1) + zz(3), zz(4)], pa.binary()), parse('["null","long"]'))
    assert result.bad.tolist() == [False, True] and result.array.to_pylist() == [3, None]


def test_plans_are_compiled_once_per_pair() -> None:
    reader = parse(FLAT.canonical_string().replace('"name":"name"', '"name":"other","default":"d"'))
    assert plan_for(FLAT, FLAT) is plan_for(parse(FLAT.canonical_string()), FLAT)
    assert plan_for(FLAT, reader) is not plan_for(FLAT, FLAT)
    assert plan_for(FLAT, FLAT, vectorised=False) is not plan_for(FLAT, FLAT)


def test_a_flat_record_of_100k_rows_decodes_quickly() -> None:
    schema = parse(json.dumps({"type": "record", "name": "Wide", "fields": [
        {"name": f"l{i}", "type": "long"} for i in range(3)] + [
        {"name": f"s{i}", "type": "string"} for i in range(3)] + [
        {"name": "d", "type": "double"}, {"name": "o", "type": ["null", "string"]},
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "e", "type": {"type": "enum", "name": "K", "symbols": ["A", "B", "C"]}}]}))
    rows = [{"l0": i, "l1": -i * 1000, "l2": i ** 3, "s0": f"name-{i}", "s1": "x" * (i % 7), "s2": "€",
             "d": i / 3, "o": None if i % 4 else str(i), "t": 1700000000000 + i, "e": "ABC"[i % 3]}
            for i in range(1000)]
    payloads = write(schema, rows) * 100
    array = pa.array(payloads, pa.binary())
    result = decode(array, schema)  # ~30 ms here: not asserted, the file's time shows it
    assert not result.bad.any() and len(result.array) == 100_000
    assert result.array.slice(99_000, 1000).to_pylist() == expected(schema, schema, payloads[:1000]).to_pylist()


def test_arrays_of_values_of_no_bytes_and_empty_records() -> None:
    nulls = parse('{"type":"array","items":"null"}')
    result = decode(pa.array([zz(3) + zz(0), zz(0), zz(1 << 30) + zz(0)], pa.binary()), nulls)
    assert result.array.to_pylist()[:2] == [[None, None, None], []]
    assert result.bad.tolist() == [False, False, True] and "block count" in result.reason(2)
    empty = parse(json.dumps({"type": "record", "name": "Outer", "fields": [
        {"name": "e", "type": {"type": "record", "name": "Empty", "fields": []}},
        {"name": "o", "type": ["null", "Empty"]},
        {"name": "many", "type": {"type": "array", "items": "Empty"}}]}))
    payloads = [zz(1) + zz(2) + zz(0), zz(0) + zz(0)]
    result = decode(pa.array(payloads, pa.binary()), empty)
    assert result.array.to_pylist() == [{"e": {}, "o": {}, "many": [{}, {}]}, {"e": {}, "o": None, "many": []}]
    assert decode(pa.array([b"", b""], pa.binary()), parse(
        '{"type":"record","name":"Empty","fields":[]}')).array.to_pylist() == [{}, {}]


def test_checked_values_of_a_known_size_inside_arrays() -> None:
    writer = parse(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "flags", "type": {"type": "array", "items": "boolean"}},
        {"name": "pairs", "type": {"type": "array", "items": [
            "float", {"type": "fixed", "name": "F4", "size": 4}]}},
        {"name": "x", "type": "int"}]}))
    reader = parse('{"type":"record","name":"R","fields":[{"name":"x","type":"int"}]}')
    good = zz(2) + b"\x01\x00" + zz(0) + zz(1) + zz(1) + b"abcd" + zz(0) + zz(7)
    flag_two = zz(2) + b"\x01\x02" + zz(0) + zz(0) + zz(7)
    long_index = zz(0) + zz(1) + b"\x80\x00" + b"\x00\x00\x80\x3f" + zz(0) + zz(7)
    for r in (writer, reader):
        result = decode(pa.array([good, flag_two, long_index], pa.binary()), writer, r)
        assert result.bad.tolist() == [False, True, True], r
        assert "boolean byte" in result.reason(1)
    assert decode(pa.array([good], pa.binary()), writer).array.to_pylist() == [
        {"flags": [True, False], "pairs": [{"member0": None, "member1": b"abcd"}], "x": 7}]


def test_branches_of_records_merge_and_nulls_stay_null() -> None:
    writer = parse(json.dumps({"type": "record", "name": "W", "fields": [{"name": "v", "type": [
        "null", {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"},
                                                         {"name": "s", "type": "string"}]},
        {"type": "record", "name": "B", "fields": [{"name": "x", "type": "long"}]}]}]}))
    reader = parse(json.dumps({"type": "record", "name": "W", "fields": [{"name": "v", "type": [
        "null", {"type": "record", "name": "R", "aliases": ["A"], "fields": [
            {"name": "x", "type": "long"}, {"name": "s", "type": "string", "default": "-"}]}]}]}))
    rows = [{"v": ("A", {"x": 1, "s": "a"})}, {"v": None}, {"v": ("B", {"x": 2})}, {"v": ("A", {"x": 3, "s": "c"})}]
    result = decode(pa.array(write(writer, rows), pa.binary()), writer, reader)
    assert not result.bad.any(), result.errors
    assert result.array.to_pylist() == [{"v": {"x": 1, "s": "a"}}, {"v": None}, {"v": {"x": 2, "s": "-"}},
                                        {"v": {"x": 3, "s": "c"}}]


def test_branch_choice_by_name_alias_and_structure() -> None:
    writer = parse(json.dumps({"type": "record", "name": "W", "fields": [
        {"name": "a", "type": {"type": "record", "name": "old.Point", "fields": [{"name": "x", "type": "int"}]}},
        {"name": "b", "type": {"type": "enum", "name": "old.Color", "symbols": ["RED"]}},
        {"name": "c", "type": {"type": "record", "name": "Shape", "fields": [{"name": "n", "type": "int"}]}},
        {"name": "d", "type": "null"}]}))
    reader = parse(json.dumps({"type": "record", "name": "W", "fields": [
        {"name": "a", "type": ["null", {"type": "record", "name": "Other", "fields": [{"name": "y", "type": "int"}]},
                               {"type": "record", "name": "new.Point", "fields": [{"name": "x", "type": "long"}]}]},
        {"name": "b", "type": ["string", {"type": "enum", "name": "new.Color", "symbols": ["RED", "BLUE"]}]},
        {"name": "c", "type": ["null", "int", {"type": "record", "name": "Form", "fields": [
            {"name": "n", "type": "int"}]}]},
        {"name": "d", "type": ["int", "null"]}]}))
    result = decode(pa.array([zz(5) + zz(0) + zz(9)], pa.binary()), writer, reader)
    assert not result.bad.any(), result.errors
    assert result.array.to_pylist() == [{"a": {"member0": None, "member1": {"x": 5}},
                                         "b": {"member0": None, "member1": "RED"},
                                         "c": {"member0": None, "member1": {"n": 9}}, "d": None}]


def test_what_does_not_resolve_fails_only_the_records_reaching_it() -> None:
    writer = parse(json.dumps({"type": "record", "name": "W", "fields": [
        {"name": "u", "type": ["int", "string"]},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}},
        {"name": "n", "type": ["null", "boolean"]}]}))
    reader = parse(json.dumps({"type": "record", "name": "W", "fields": [
        {"name": "u", "type": ["null", "long"]},
        {"name": "f", "type": ["null", {"type": "fixed", "name": "F", "size": 2}]},
        {"name": "n", "type": ["null", "boolean"]}]}))
    payloads = [zz(0) + zz(4) + b"ab" + zz(0), zz(1) + s("x") + b"ab" + zz(1) + b"\x01"]
    result = decode(pa.array(payloads, pa.binary()), writer, reader)
    assert result.array.to_pylist() == [{"u": 4, "f": b"ab", "n": None}, None]
    assert result.bad.tolist() == [False, True] and "no branch" in result.reason(1)
    resized = parse(writer.canonical_string().replace('"size":2', '"size":3'))
    result = decode(pa.array(payloads[:1], pa.binary()), writer, resized)
    assert result.bad.tolist() == [True] and "of 2 bytes" in result.reason(0)
    for text in ('"string"', '["null","string"]', '"null"'):
        result = decode(pa.array([zz(4)], pa.binary()), parse('"int"'), parse(text))
        assert result.bad.tolist() == [True], text
    assert decode(pa.array([b""], pa.binary()), parse('"null"'), parse('["null","int"]')).array.to_pylist() == [None]
    assert decode(pa.array([zz(0)], pa.binary()), parse('["null","int"]'), parse('"null"')).array.to_pylist() == [None]
    only_null = decode(pa.array([zz(0), zz(0)], pa.binary()), parse('["null"]'))
    assert only_null.array.type == pa.null() and not only_null.bad.any()


def test_the_fallback_fails_what_fastavro_refuses_in_a_recursive_value() -> None:
    schema = parse(json.dumps({"type": "record", "name": "T", "fields": [
        {"name": "name", "type": "string"}, {"name": "child", "type": ["null", "T"]}]}))
    good = s("a") + zz(1) + s("b") + zz(1) + s("c") + zz(0)
    bad_text = s("a") + zz(1) + s("b") + zz(1) + zz(1) + b"\xff" + zz(0)
    for vectorised in (True, False):
        result = decode(pa.array([good, bad_text], pa.binary()), schema, recursive_depth=2, vectorised=vectorised)
        assert result.array.to_pylist() == [{"name": "a", "child": {"name": "b", "child": '{"name":"c","child":null}'}},
                                            None]
        assert result.bad.tolist() == [False, True] and "UnicodeDecodeError" in result.reason(1)


RICH_ITEM = {"type": "record", "name": "Item", "fields": [
    {"name": "sku", "type": "string"}, {"name": "n", "type": "int"}, {"name": "big", "type": "long"},
    {"name": "ok", "type": "boolean"}, {"name": "w", "type": "double"},
    {"name": "c", "type": {"type": "enum", "name": "Colour", "symbols": ["RED", "GREEN"]}},
    {"name": "tag", "type": ["null", "string", {"type": "fixed", "name": "Two", "size": 2}]},
    {"name": "parts", "type": {"type": "array", "items": "int"}},
    {"name": "attrs", "type": {"type": "map", "values": ["null", "bytes"]}}]}


def _rich(i: int, j: int) -> dict:
    return {"sku": f"s{i}-{j}-" + "é" * (j % 3), "n": j - 50, "big": (j - 20) * 10 ** 12, "ok": j % 2 == 0,
            "w": j / 7, "c": ["RED", "GREEN"][j % 2], "tag": [None, f"t{j}", ("Two", b"ab")][j % 3],
            "parts": list(range(j % 4)), "attrs": {f"a{k}": (None if k % 2 else b"v" * k) for k in range(j % 3)}}


def test_long_arrays_in_a_few_records_walk_item_by_item() -> None:
    schema = parse(json.dumps({"type": "record", "name": "Doc", "fields": [
        {"name": "id", "type": "int"},
        {"name": "items", "type": {"type": "array", "items": RICH_ITEM}},
        {"name": "words", "type": {"type": "map", "values": "string"}},
        {"name": "skipped", "type": {"type": "array", "items": "Item"}}]}))
    reader = parse(json.dumps({"type": "record", "name": "Doc", "fields": [
        {"name": "id", "type": "int"}, {"name": "items", "type": {"type": "array", "items": RICH_ITEM}},
        {"name": "words", "type": {"type": "map", "values": "string"}}]}))
    rows = [{"id": i, "items": [_rich(i, j) for j in range(120 if i in (3, 40) else i % 4)],
             "words": {f"w{k}": "x" * (k % 5) for k in range(200 if i == 7 else i % 3)},
             "skipped": [_rich(i, j) for j in range(60 if i == 41 else 1)]} for i in range(60)]
    payloads = write(schema, rows)
    array = pa.array(payloads, pa.binary())
    check(decode(array, schema), expected(schema, schema, payloads))
    check(decode(array, schema, reader), expected(schema, reader, payloads))
    # damage inside a long array: each is found, with the reason the vectorised rounds give
    long_row = payloads[3]
    at = long_row.index(b"s3-100-")  # item 100's sku; its enum follows sku, n, big, ok and w
    enum_at = at - 1 + len(s("s3-100-é")) + len(zz(50)) + len(zz(80 * 10 ** 12)) + 1 + 8
    assert long_row[enum_at] == 0  # RED
    cases = {
        "an enum index out of range": long_row[:enum_at] + zz(5) + long_row[enum_at + 1:],
        "a string that is not UTF-8": long_row[:at] + b"\xff" + long_row[at + 1:],
        "a negative length": long_row[:at - 1] + zz(-7) + long_row[at:],
        "a boolean byte other than 0 and 1": long_row[:enum_at - 9] + b"\x07" + long_row[enum_at - 8:],
    }
    for reason, damaged in cases.items():
        result = decode(pa.array([payloads[0], damaged, payloads[7]], pa.binary()), schema)
        assert result.bad.tolist() == [False, True, False], reason
        assert result.reason(1).startswith(reason), (reason, result.reason(1))
        assert result.array.to_pylist()[2] == expected(schema, schema, [payloads[7]]).to_pylist()[0]


def test_decodes_in_many_threads_at_once_share_one_plan() -> None:
    rows = [_rich(i, j) for i in range(3) for j in range(40)]
    item = parse(json.dumps(RICH_ITEM))
    array = pa.array(write(item, rows), pa.binary())
    want = decode(array, item).array
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: decode(array, item).array, range(16)))
    assert all(r.equals(want) for r in results)
    as_union = parse(json.dumps(["null", RICH_ITEM]))  # a reader union at the top
    assert decode(array, item, as_union).array.to_pylist() == want.to_pylist()
