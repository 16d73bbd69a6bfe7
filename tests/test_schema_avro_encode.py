"""The column-wise Avro encoder (broker.schema.avro_encode) against fastavro.

(a) Generated record schemas (primitives, enums, fixed, decimals on bytes and fixed, dates,
times, timestamps of every unit, uuids, nullable unions either way round, general unions
as struct<member0..>, Spark's merged int/long and float/double unions, arrays and maps of
all of these and of records, nested records) and Arrow data of the types Spark's
``from_avro`` mapping gives them: every payload is byte for byte what fastavro's
``schemaless_writer`` writes for the same row (union values in fastavro's tuple notation),
the row-at-a-time path (``encode_per_row``) gives the same bytes, fastavro's
``schemaless_reader`` reads each payload to its end, and the columnar decoder
(``avro_columnar``) reads the payloads back to the input array, whose ``arrow_type`` form
encodes to the same bytes.

(b) Each bad row names its field and its first bad row, on both paths; the Arrow types a
schema cannot take are refused naming the field; fuzzing pairs of unrelated schemas and
data raises nothing but ``AvroEncodeError``.

(c) The framing prefix, tombstones, empty arrays, sliced and chunked input, defaults of
fields the struct lacks, garbage under null parents, Spark's other Arrow types (units,
time zones, narrow integers, large and view strings, dictionaries), the per-row JSON
node of recursive types against the vectorised path, the plan cache.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import pickle
import uuid
from dataclasses import dataclass
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.record.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from broker.schema import framing
from broker.schema.avro import parse
from broker.schema.avro_arrow import arrow_type, json_text
from broker.schema.avro_columnar import decode
from broker.schema.avro_encode import AvroEncodeError, encode, encode_per_row, plan

UTC = datetime.UTC
NS = "test.ns"
SETTINGS = settings(max_examples=250, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _fastavro(schema: Any, value: Any) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, value)
    return buf.getvalue()


# -- generated schemas and data --------------------------------------------------------------


@dataclass
class Case:
    """One generated Avro type: its schema (JSON), the Arrow type of its data, a strategy
    of (fastavro value, Arrow value) pairs, and its name in fastavro's tuple notation."""

    schema: Any
    arrow: pa.DataType
    values: st.SearchStrategy
    name: str


def _pairs(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return strategy.map(lambda v: (v, v))


def _datetimes(aware: bool, step_us: int) -> st.SearchStrategy:
    moments = st.datetimes(min_value=datetime.datetime(1700, 1, 1), max_value=datetime.datetime(2250, 1, 1))

    def shape(dt: datetime.datetime) -> datetime.datetime:
        dt = dt.replace(microsecond=dt.microsecond // step_us * step_us)
        return dt.replace(tzinfo=UTC) if aware else dt

    return moments.map(shape)


class Names:
    def __init__(self) -> None:
        self.count = 0

    def next(self, prefix: str) -> tuple[str, str]:
        self.count += 1
        return f"{prefix}{self.count}", f"{NS}.{prefix}{self.count}"


def _leaf(draw: Any, names: Names) -> Case:
    kind = draw(st.sampled_from([
        "boolean", "int", "long", "float", "double", "string", "bytes", "enum", "fixed", "decimal", "decimal-fixed",
        "date", "time-millis", "time-micros", "timestamp-millis", "timestamp-micros", "timestamp-nanos",
        "local-timestamp-millis", "local-timestamp-micros", "uuid"]))
    if kind == "boolean":
        return Case("boolean", pa.bool_(), _pairs(st.booleans()), "boolean")
    if kind == "int":
        return Case("int", pa.int32(), _pairs(st.integers(INT32_MIN, INT32_MAX)), "int")
    if kind == "long":
        return Case("long", pa.int64(), _pairs(st.integers(INT64_MIN, INT64_MAX)), "long")
    if kind == "float":
        return Case("float", pa.float32(), _pairs(st.floats(width=32, allow_nan=False)), "float")
    if kind == "double":
        return Case("double", pa.float64(), _pairs(st.floats(allow_nan=False)), "double")
    if kind == "string":
        return Case("string", pa.string(), _pairs(st.text(max_size=12)), "string")
    if kind == "bytes":
        return Case("bytes", pa.binary(), _pairs(st.binary(max_size=12)), "bytes")
    if kind == "enum":
        name, full = names.next("E")
        symbols = draw(st.lists(st.from_regex(r"[A-Z][A-Z0-9_]{0,4}", fullmatch=True), min_size=1, max_size=5,
                                unique=True))
        return Case({"type": "enum", "name": name, "symbols": symbols}, pa.string(),
                    _pairs(st.sampled_from(symbols)), full)
    if kind == "fixed":
        name, full = names.next("F")
        size = draw(st.integers(0, 6))
        return Case({"type": "fixed", "name": name, "size": size}, pa.binary(),
                    _pairs(st.binary(min_size=size, max_size=size)), full)
    if kind in ("decimal", "decimal-fixed"):
        if kind == "decimal":
            precision = draw(st.integers(1, 38))
            schema: dict = {"type": "bytes"}
            branch = "bytes"
        else:
            name, branch = names.next("D")
            size = draw(st.integers(1, 16))
            max_digits = len(str(2 ** (8 * size - 1) - 1)) - 1
            precision = draw(st.integers(1, min(38, max_digits)))
            schema = {"type": "fixed", "name": name, "size": size}
        scale = draw(st.integers(0, precision))
        schema.update(logicalType="decimal", precision=precision, scale=scale)
        limit = 10 ** precision - 1
        decimals = st.integers(-limit, limit).map(lambda u: decimal.Decimal(f"{u}e-{scale}"))
        return Case(schema, pa.decimal128(precision, scale), _pairs(decimals), branch)
    if kind == "date":
        return Case({"type": "int", "logicalType": "date"}, pa.date32(), _pairs(st.dates()), "int")
    if kind == "time-millis":
        return Case({"type": "int", "logicalType": "time-millis"}, pa.int32(),
                    _pairs(st.integers(0, 86_400_000 - 1)), "int")
    if kind == "time-micros":
        return Case({"type": "long", "logicalType": "time-micros"}, pa.int64(),
                    _pairs(st.integers(0, 86_400_000_000 - 1)), "long")
    if kind in ("timestamp-millis", "timestamp-micros"):
        unit = draw(st.sampled_from(["ms", "us", "ns"]))  # Spark's is us; the others are accepted too
        step = 1000 if kind == "timestamp-millis" or unit == "ms" else 1
        return Case({"type": "long", "logicalType": kind}, pa.timestamp(unit, tz="UTC"),
                    _pairs(_datetimes(True, step)), "long")
    if kind == "timestamp-nanos":  # fastavro has no conversion for it: the reference is the long
        micros = st.integers(-(1 << 52), 1 << 52)
        return Case({"type": "long", "logicalType": kind}, pa.timestamp("us", tz="UTC"),
                    micros.map(lambda us: (us * 1000, us)), "long")
    if kind.startswith("local-timestamp"):
        step = 1000 if kind.endswith("millis") else 1
        return Case({"type": "long", "logicalType": kind}, pa.timestamp("us"), _pairs(_datetimes(False, step)),
                    "long")
    return Case({"type": "string", "logicalType": "uuid"}, pa.string(), _pairs(st.uuids().map(str)), "string")


def _record(draw: Any, names: Names, depth: int, top: bool = False) -> Case:
    name, full = names.next("R")
    fields = [(f"f{i}", _case(draw, names, depth - 1)) for i in range(draw(st.integers(1, 5 if top else 3)))]
    schema = {"type": "record", "name": name, "fields": [{"name": f, "type": c.schema} for f, c in fields]}
    if top:
        schema["namespace"] = NS
    arrow = pa.struct([(f, c.arrow) for f, c in fields])

    def row(parts: tuple) -> tuple[dict, dict]:
        return ({f: p[0] for (f, _), p in zip(fields, parts)}, {f: p[1] for (f, _), p in zip(fields, parts)})

    return Case(schema, arrow, st.tuples(*[c.values for _, c in fields]).map(row), full)


def _union_of(draw: Any, names: Names, depth: int) -> Case:
    members: list[Case] = []
    for _ in range(draw(st.integers(2, 3))):
        case = _case(draw, names, depth - 1, union_member=True)
        taken = {m.name for m in members}
        if case.name in taken or {case.name, *taken} >= {"int", "long"} or {case.name, *taken} >= {"float", "double"}:
            continue
        members.append(case)
    nullable = draw(st.booleans())
    if len(members) < 2:  # a nullable single member, then
        inner = members[0]
        first = draw(st.booleans())
        schema = ["null", inner.schema] if first else [inner.schema, "null"]
        values = st.one_of(st.just((None, None)), inner.values.map(lambda p: ((inner.name, p[0]), p[1])))
        return Case(schema, inner.arrow, values, "union")
    schema = [m.schema for m in members]
    if nullable:
        schema.insert(draw(st.integers(0, len(schema))), "null")
    arrow = pa.struct([(f"member{k}", m.arrow) for k, m in enumerate(members)])

    def branch(k: int) -> st.SearchStrategy:
        def pair(p: tuple) -> tuple:
            return (members[k].name, p[0]), {f"member{j}": (p[1] if j == k else None) for j in range(len(members))}
        return members[k].values.map(pair)

    options = [branch(k) for k in range(len(members))] + ([st.just((None, None))] if nullable else [])
    return Case(schema, arrow, st.one_of(options), "union")


def _case(draw: Any, names: Names, depth: int, union_member: bool = False) -> Case:
    shapes = ["leaf", "leaf", "leaf"] + (["record", "array", "map"] if depth > 0 else [])
    if depth > 0 and not union_member:
        shapes += ["nullable", "union", "merged"]
    shape = draw(st.sampled_from(shapes))
    if shape == "leaf":
        return _leaf(draw, names)
    if shape == "record":
        return _record(draw, names, depth)
    if shape == "array":
        item = _case(draw, names, depth - 1)
        return Case({"type": "array", "items": item.schema}, pa.list_(item.arrow),
                    st.lists(item.values, max_size=4).map(lambda ps: ([p[0] for p in ps], [p[1] for p in ps])),
                    "array")
    if shape == "map":
        value = _case(draw, names, depth - 1)
        entries = st.dictionaries(st.text(max_size=4), value.values, max_size=3)
        return Case({"type": "map", "values": value.schema}, pa.map_(pa.string(), value.arrow),
                    entries.map(lambda d: ({k: p[0] for k, p in d.items()}, [(k, p[1]) for k, p in d.items()])),
                    "map")
    if shape == "nullable":
        inner = _case(draw, names, depth - 1, union_member=True)
        schema = ["null", inner.schema] if draw(st.booleans()) else [inner.schema, "null"]
        values = st.one_of(st.just((None, None)), inner.values.map(lambda p: ((inner.name, p[0]), p[1])))
        return Case(schema, inner.arrow, values, "union")
    if shape == "union":
        return _union_of(draw, names, depth)
    # Spark's merged unions: fastavro picks the branch itself (int when it fits and comes first)
    pair = draw(st.sampled_from([["int", "long"], ["long", "int"], ["float", "double"], ["double", "float"]]))
    if draw(st.booleans()):
        pair.insert(draw(st.integers(0, 2)), "null")
    numbers = st.integers(INT64_MIN, INT64_MAX) if "int" in pair else st.floats(allow_nan=False)
    arrow = pa.int64() if "int" in pair else pa.float64()
    values = _pairs(st.one_of(st.none(), numbers) if "null" in pair else numbers)
    return Case(pair, arrow, values, "union")


@st.composite
def schemas_and_rows(draw: Any) -> tuple[Any, pa.DataType, list, list]:
    top = _record(draw, Names(), draw(st.integers(1, 3)), top=True)
    rows = draw(st.lists(top.values, min_size=draw(st.sampled_from([0, 1, 4, 10])), max_size=16))
    return top.schema, top.arrow, [r for r, _ in rows], [a for _, a in rows]


@given(schemas_and_rows())
@SETTINGS
def test_every_payload_is_fastavros_bytes(generated: tuple) -> None:
    schema_json, arrow, reference, data = generated
    schema = parse(json.dumps(schema_json))
    array = pa.array(data, arrow)
    prefix = framing.encode(framing.SchemaId(7), b"", with_indexes=False)  # Confluent's magic byte and id
    result = encode(array, schema, prefix=prefix)
    assert isinstance(result.payloads, pa.BinaryArray) and len(result) == len(data)
    assert result.per_row == ()
    payloads = result.payloads.to_pylist()
    for row, (payload, expected) in enumerate(zip(payloads, reference)):
        assert framing.decode(payload, with_indexes=False) == (framing.SchemaId(7), 5)
        assert payload[5:] == _fastavro(schema.parsed, expected), row
        buf = io.BytesIO(payload[5:])
        fastavro.schemaless_reader(buf, schema.parsed)
        assert buf.tell() == len(payload) - 5
    assert encode_per_row(array, schema, prefix=prefix).payloads.to_pylist() == payloads
    if len(data) > 2:  # a slice: offsets into every child
        assert encode(array.slice(1, len(data) - 2), schema, prefix=prefix).payloads.to_pylist() == payloads[1:-1]


@given(schemas_and_rows())
@SETTINGS
def test_the_columnar_decoder_reads_the_payloads_back(generated: tuple) -> None:
    schema_json, arrow, _, data = generated
    schema = parse(json.dumps(schema_json))
    array = pa.array(data, arrow)
    payloads = encode(array, schema).payloads
    decoded = decode(payloads, schema)
    assert not decoded.bad.any(), decoded.errors
    # timestamps of other units than Spark's microseconds come back in microseconds
    assert decoded.array.to_pylist() == array.to_pylist()
    # arrow_type's own types (what a Spark read gives) encode to the same bytes
    assert decoded.array.type == arrow_type(schema)
    assert encode(decoded.array, schema).payloads.equals(payloads)


# -- errors ------------------------------------------------------------------------------------


def _schema(fields: list) -> Any:
    return parse(json.dumps({"type": "record", "name": "Row", "namespace": NS, "fields": fields}))


def _raises(array: pa.Array, schema: Any, path: str, row: int | None, words: str) -> None:
    for fn in (encode, encode_per_row):
        with pytest.raises(AvroEncodeError) as caught:
            fn(array, schema)
        assert caught.value.path == path and caught.value.row == row, (fn.__name__, str(caught.value))
        assert words in str(caught.value)
        assert path in str(caught.value) and (row is None or f"row {row}" in str(caught.value))


def test_a_null_where_the_schema_has_no_null_branch_names_the_field_and_row() -> None:
    schema = _schema([{"name": "a", "type": "long"},
                      {"name": "inner", "type": {"type": "record", "name": "In", "fields": [
                          {"name": "s", "type": "string"}]}},
                      {"name": "xs", "type": {"type": "array", "items": "int"}}])
    t = pa.struct([("a", pa.int64()), ("inner", pa.struct([("s", pa.string())])), ("xs", pa.list_(pa.int32()))])
    ok = {"a": 1, "inner": {"s": "x"}, "xs": [1]}
    _raises(pa.array([ok, ok, {**ok, "a": None}], t), schema, "a", 2, "no null branch")
    _raises(pa.array([ok, {**ok, "inner": {"s": None}}], t), schema, "inner.s", 1, "no null branch")
    _raises(pa.array([ok, ok, ok, {**ok, "inner": None}], t), schema, "inner", 3, "no null branch")
    # an item: the row is the top-level row holding it
    _raises(pa.array([ok, {**ok, "xs": []}, {**ok, "xs": [1, 2]}, {**ok, "xs": [3, None]}], t), schema, "xs[]", 3,
            "no null branch")
    _raises(pa.array([ok, None], t), schema, "", 1, "no null branch")


def test_values_the_schema_cannot_hold_name_the_field_and_row() -> None:
    schema = _schema([
        {"name": "i", "type": "int"},
        {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
        {"name": "f", "type": {"type": "fixed", "name": "Three", "size": 3}},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}},
        {"name": "df", "type": {"type": "fixed", "name": "Two", "size": 2, "logicalType": "decimal",
                                "precision": 4, "scale": 0}},
        {"name": "u", "type": ["null", "int", "string"]},
        {"name": "v", "type": ["int", "string"]},
        {"name": "m", "type": {"type": "map", "values": {"type": "enum", "name": "Two2", "symbols": ["A"]}}},
    ])
    t = pa.struct([("i", pa.int64()), ("e", pa.string()), ("f", pa.binary()), ("d", pa.decimal128(10, 2)),
                   ("df", pa.decimal128(4, 0)),
                   ("u", pa.struct([("member0", pa.int32()), ("member1", pa.string())])),
                   ("v", pa.struct([("member0", pa.int32()), ("member1", pa.string())])),
                   ("m", pa.map_(pa.string(), pa.string()))])
    ok = {"i": 1, "e": "RED", "f": b"abc", "d": decimal.Decimal("12.34"), "df": decimal.Decimal(-9999),
          "u": {"member0": 1, "member1": None}, "v": {"member0": None, "member1": "x"}, "m": [("k", "A")]}
    assert len(encode(pa.array([ok], t), schema)) == 1
    _raises(pa.array([ok, {**ok, "i": INT32_MAX + 1}], t), schema, "i", 1, "does not fit Avro's int")
    _raises(pa.array([ok, ok, {**ok, "e": "BLUE"}], t), schema, "e", 2, "'BLUE' is not a symbol of the enum")
    _raises(pa.array([{**ok, "f": b"ab"}], t), schema, "f", 0, "2 bytes, but the fixed")
    _raises(pa.array([ok, {**ok, "d": decimal.Decimal("123.45")}], t), schema, "d", 1, "more than 4 digits")
    _raises(pa.array([ok, {**ok, "df": decimal.Decimal(10000)}], pa.struct([*list(t)[:4], ("df", pa.decimal128(5, 0)),
                                                                        *list(t)[5:]])), schema, "df", 1,
            "more than 4 digits")
    _raises(pa.array([ok, {**ok, "u": {"member0": 1, "member1": "y"}}], t), schema, "u", 1, "several members")
    _raises(pa.array([ok, {**ok, "v": {"member0": None, "member1": None}}], t), schema, "v", 1,
            "none of the union struct's members")
    _raises(pa.array([ok, ok, {**ok, "m": [("k", "A"), ("j", "B")]}], t), schema, "m{}", 2, "'B' is not a symbol")
    # a union with null: no member set, or a null struct, is the null branch
    nulls = encode(pa.array([{**ok, "u": {"member0": None, "member1": None}}, {**ok, "u": None}], t), schema)
    assert nulls.payloads[0] == nulls.payloads[1]


def test_a_decimal_of_another_scale_is_rescaled_when_exact() -> None:
    schema = _schema([{"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6,
                                             "scale": 2}}])
    t = pa.struct([("d", pa.decimal128(5, 1))])
    fine = pa.array([{"d": decimal.Decimal("1234.5")}, {"d": decimal.Decimal("-0.1")}], t)
    expected = [_fastavro(schema.parsed, {"d": decimal.Decimal(v)}) for v in ("1234.50", "-0.10")]
    assert encode(fine, schema).payloads.to_pylist() == expected
    assert encode_per_row(fine, schema).payloads.to_pylist() == expected
    t3 = pa.struct([("d", pa.decimal128(6, 3))])
    _raises(pa.array([{"d": decimal.Decimal("1.250")}, {"d": decimal.Decimal("1.255")}], t3), schema, "d", 1,
            "decimal places")


def test_timestamps_that_overflow_the_schemas_unit_name_the_row() -> None:
    schema = _schema([{"name": "t", "type": {"type": "long", "logicalType": "timestamp-nanos"}}])
    t = pa.struct([("t", pa.timestamp("s", tz="UTC"))])
    arr = pa.array([{"t": 0}, {"t": -10**9}, {"t": 10**10}], t)
    _raises(arr, schema, "t", 2, "does not fit a long")
    assert encode(arr.slice(0, 2), schema).payloads.to_pylist() == [b"\x00", _fastavro("long", -10**18)]


def test_types_the_schema_cannot_take_are_refused_naming_the_field() -> None:
    schema = _schema([{"name": "a", "type": "long"}, {"name": "b", "type": "string"}])
    cases = [
        (pa.struct([("a", pa.string()), ("b", pa.string())]), "a", "expected an integer type"),
        (pa.struct([("a", pa.int64()), ("b", pa.binary())]), "b", "expected string"),
        (pa.struct([("a", pa.int64())]), "b", "not in the Arrow struct, and it has no default"),
        (pa.struct([("a", pa.int64()), ("b", pa.string()), ("c", pa.int8())]), "", "'c'"),
        (pa.struct([("A", pa.int64()), ("b", pa.string())]), "", "case-sensitive"),
        (pa.int64(), "", "expected a struct"),
    ]
    for t, path, words in cases:
        with pytest.raises(AvroEncodeError) as caught:
            encode(pa.array([], t), schema)
        assert caught.value.path == path and caught.value.row is None and words in str(caught.value), str(caught.value)
    union = _schema([{"name": "u", "type": ["int", "string", "boolean"]}])
    with pytest.raises(AvroEncodeError, match="member0..member2"):
        encode(pa.array([], pa.struct([("u", pa.struct([("member0", pa.int32())]))])), union)
    with pytest.raises(AvroEncodeError, match="AvroSchema"):
        encode(pa.array([1]), json.dumps({"type": "long"}))  # type: ignore[arg-type]
    with pytest.raises(AvroEncodeError, match="pyarrow Array"):
        encode([1, 2], parse('"long"'))  # type: ignore[arg-type]


def test_the_error_survives_pickling() -> None:
    error = AvroEncodeError("a.b", "null, but ...", 3)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.path, copy.row, str(copy)) == ("a.b", 3, str(error)) and isinstance(copy, ValueError)


_FUZZ_TYPES = st.sampled_from([pa.int8(), pa.int64(), pa.uint64(), pa.float32(), pa.string(), pa.binary(),
                               pa.bool_(), pa.decimal128(5, 2), pa.date32(), pa.timestamp("s"), pa.null(),
                               pa.list_(pa.int32()), pa.map_(pa.string(), pa.int64()),
                               pa.struct([("member0", pa.int64()), ("member1", pa.string())])])


@given(schemas_and_rows(), st.data())
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_unrelated_data_raises_only_avro_encode_error(generated: tuple, data: st.DataObject) -> None:
    schema_json, arrow, _, rows = generated
    schema = parse(json.dumps(schema_json))
    # each field given another type, or nulls, or its own data
    fields = []
    for i in range(arrow.num_fields):
        choice = data.draw(st.sampled_from(["own", "other", "nulls"]))
        f = arrow.field(i)
        fields.append((f.name, data.draw(_FUZZ_TYPES) if choice == "other" else f.type, choice))
    n = len(rows)
    columns = []
    for i, (_, t, choice) in enumerate(fields):
        if choice == "own":
            columns.append(pa.array([r[arrow.field(i).name] for r in rows], t))
        elif choice == "nulls":
            columns.append(pa.nulls(n, t))
        else:
            values = data.draw(st.lists(st.none(), min_size=n, max_size=n))
            columns.append(pa.array(values, t))
    array = pa.StructArray.from_arrays(columns, [name for name, _, _ in fields]) if fields else pa.array([], arrow)
    for fn in (encode, encode_per_row):
        try:
            fn(array, schema)
        except AvroEncodeError:
            pass


# -- input shapes ------------------------------------------------------------------------------

SIMPLE = {"type": "record", "name": "Simple", "namespace": NS, "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "note", "type": ["null", "string"]}]}
SIMPLE_T = pa.struct([("id", pa.int64()), ("name", pa.string()), ("note", pa.string())])
SIMPLE_ROWS = [{"id": i * 1000 - 5, "name": "n" * (i % 7), "note": None if i % 3 else f"x{i}"} for i in range(50)]


def _simple_expected(rows: list, prefix: bytes = b"") -> list[bytes]:
    parsed = parse(json.dumps(SIMPLE)).parsed
    return [prefix + _fastavro(parsed, r) for r in rows]


def test_prefix_empty_arrays_slices_and_chunks() -> None:
    schema = parse(json.dumps(SIMPLE))
    arr = pa.array(SIMPLE_ROWS, SIMPLE_T)
    assert encode(arr, schema, prefix=b"\x00\x00\x00\x01\x02").payloads.to_pylist() == \
        _simple_expected(SIMPLE_ROWS, b"\x00\x00\x00\x01\x02")
    for empty in (encode(arr.slice(0, 0), schema), encode(pa.array([], SIMPLE_T), schema, prefix=b"\x00")):
        assert len(empty) == 0 and empty.payloads.type == pa.binary()
    assert encode(arr.slice(7, 20), schema).payloads.to_pylist() == _simple_expected(SIMPLE_ROWS[7:27])
    chunked = pa.chunked_array([arr.slice(0, 10), arr.slice(10)])
    assert encode(chunked, schema).payloads.to_pylist() == _simple_expected(SIMPLE_ROWS)
    batch = pa.RecordBatch.from_struct_array(arr)
    assert encode(batch, schema).payloads.to_pylist() == _simple_expected(SIMPLE_ROWS)
    assert encode(pa.Table.from_batches([batch]), schema).payloads.to_pylist() == _simple_expected(SIMPLE_ROWS)


def test_tombstones_give_null_payloads() -> None:
    schema = parse(json.dumps(SIMPLE))
    rows = [SIMPLE_ROWS[1], None, SIMPLE_ROWS[2]]
    for fn in (encode, encode_per_row):
        payloads = fn(pa.array(rows, SIMPLE_T), schema, prefix=b"\x00", tombstones=True).payloads.to_pylist()
        assert payloads == [_simple_expected(rows[:1], b"\x00")[0], None, _simple_expected(rows[2:], b"\x00")[0]]


def test_string_and_binary_flavours_spark_may_hand_over() -> None:
    schema = _schema([{"name": "s", "type": "string"}, {"name": "b", "type": "bytes"},
                      {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
                      {"name": "i", "type": "int"}, {"name": "l", "type": "long"}, {"name": "d", "type": "double"},
                      {"name": "f", "type": "float"}])
    rows = [{"s": "héllo", "b": b"\x00\xff", "e": "B", "i": 3, "l": 7, "d": 2.0, "f": 0.5},
            {"s": "", "b": b"", "e": "A", "i": 100, "l": 30000, "d": -1.0, "f": 3.0}]
    expected = [_fastavro(schema.parsed, r) for r in rows]
    flavours = [
        [("s", pa.large_string()), ("b", pa.large_binary()), ("e", pa.large_string()), ("i", pa.int8()),
         ("l", pa.int16()), ("d", pa.float32()), ("f", pa.float64())],
        [("s", pa.string_view()), ("b", pa.binary_view()), ("e", pa.dictionary(pa.int8(), pa.string())),
         ("i", pa.uint16()), ("l", pa.uint64()), ("d", pa.int64()), ("f", pa.float16())],
    ]
    for fields in flavours:
        t = pa.struct(fields)
        columns = [pa.array([r[name] for r in rows]).cast(kind) if not pa.types.is_dictionary(kind)
                   else pa.array([r[name] for r in rows]).dictionary_encode().cast(kind) for name, kind in fields]
        arr = pa.StructArray.from_arrays(columns, [name for name, _ in fields])
        assert arr.type == t
        assert encode(arr, schema).payloads.to_pylist() == expected, fields
        assert encode_per_row(arr, schema).payloads.to_pylist() == expected, fields
    big = pa.StructArray.from_arrays([pa.array([INT64_MAX + 1], pa.uint64())], ["l"])
    _raises(big, _schema([{"name": "l", "type": "long"}]), "l", 0, "does not fit a long")


def test_fixed_size_binary_columns_under_nulls() -> None:
    schema = _schema([{"name": "f", "type": ["null", {"type": "fixed", "name": "F2", "size": 2}]},
                      {"name": "b", "type": ["bytes", "null"]}])
    values = [b"ab", None, b"cd", None]
    column = pa.array(values, pa.binary(2))
    assert column.buffers()[1].size == 8  # the null rows hold bytes underneath
    arr = pa.StructArray.from_arrays([column, column], ["f", "b"])
    expected = [_fastavro(schema.parsed, {"f": None if v is None else (f"{NS}.F2", v),
                                          "b": None if v is None else ("bytes", v)}) for v in values]
    assert encode(arr, schema).payloads.to_pylist() == expected
    assert encode_per_row(arr, schema).payloads.to_pylist() == expected
    with pytest.raises(AvroEncodeError, match="values of 2 bytes"):
        encode(pa.StructArray.from_arrays([pa.nulls(4, pa.binary(3)), column], ["f", "b"]), schema)


def test_timestamps_of_any_unit_and_zone_and_dates_and_times() -> None:
    schema = _schema([{"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
                      {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
                      {"name": "lms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
                      {"name": "day", "type": {"type": "int", "logicalType": "date"}},
                      {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
                      {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}}])
    moment = datetime.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)  # floors to ...999 ms
    local = moment.replace(tzinfo=None)
    reference = {"ms": moment, "us": moment, "lms": local, "day": datetime.date(1969, 12, 31),
                 "tm": datetime.time(1, 2, 3, 4567), "tu": datetime.time(1, 2, 3, 4567)}
    expected = _fastavro(schema.parsed, reference)
    columns = {
        "ms": pa.array([moment], pa.timestamp("ns", tz="America/New_York")),
        "us": pa.array([moment], pa.timestamp("us", tz="Asia/Kolkata")),
        "lms": pa.array([local], pa.timestamp("us")),
        "day": pa.array([datetime.date(1969, 12, 31)], pa.date64()),
        "tm": pa.array([datetime.time(1, 2, 3, 4567)], pa.time64("us")),
        "tu": pa.array([datetime.time(1, 2, 3, 4567)], pa.time64("ns")),
    }
    arr = pa.StructArray.from_arrays(list(columns.values()), list(columns))
    assert encode(arr, schema).payloads.to_pylist() == [expected]
    assert encode_per_row(arr, schema).payloads.to_pylist() == [expected]
    # a naive timestamp for timestamp-millis is taken as UTC; integers as the schema's unit
    naive = pa.StructArray.from_arrays([pa.array([local], pa.timestamp("us")), pa.array([-1], pa.int64()),
                                        pa.array([-1]), pa.array([-1], pa.int32()), pa.array([4], pa.int32()),
                                        pa.array([5])], list(columns))
    got = encode(naive, schema).payloads[0].as_py()
    assert got == _fastavro(schema.parsed, {"ms": moment, "us": -1, "lms": -1, "day": -1, "tm": 4, "tu": 5})
    assert encode_per_row(naive, schema).payloads[0].as_py() == got


def test_defaults_fill_fields_the_struct_lacks() -> None:
    schema = _schema([
        {"name": "id", "type": "long"},
        {"name": "n", "type": "int", "default": 42},
        {"name": "u", "type": ["string", "null"], "default": "dflt"},
        {"name": "b", "type": "bytes", "default": "\u00ff\u0001"},
        {"name": "r", "type": {"type": "record", "name": "Inner", "fields": [
            {"name": "x", "type": "double"}, {"name": "y", "type": ["null", "long"], "default": None}]},
         "default": {"x": 1.5}},
        {"name": "a", "type": {"type": "array", "items": "int"}, "default": [1, 2]},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["P", "Q"]}, "default": "Q"},
    ])
    arr = pa.array([{"id": 1}, {"id": -2}], pa.struct([("id", pa.int64())]))
    expected = [_fastavro(schema.parsed, {"id": i, "n": 42, "u": "dflt", "b": b"\xff\x01", "r": {"x": 1.5, "y": None},
                                          "a": [1, 2], "e": "Q"}) for i in (1, -2)]
    assert encode(arr, schema).payloads.to_pylist() == expected
    assert encode_per_row(arr, schema).payloads.to_pylist() == expected


def test_garbage_under_null_parents_is_neither_written_nor_checked() -> None:
    schema = _schema([{"name": "r", "type": ["null", {"type": "record", "name": "In", "fields": [
        {"name": "s", "type": "string"}, {"name": "i", "type": "int"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
        {"name": "xs", "type": {"type": "array", "items": "long"}}]}]}])
    inner_t = pa.struct([("s", pa.string()), ("i", pa.int64()), ("e", pa.string()), ("xs", pa.list_(pa.int64()))])
    # children hold values (a null, an int out of range, an unknown symbol, items) under the null rows
    children = [pa.array(["kept", "garbage", None]), pa.array([1, INT64_MAX, None]), pa.array(["A", "Z", None]),
                pa.array([[1, 2], [3, 4, 5], None], pa.list_(pa.int64()))]
    validity = pa.array([True, False, False])
    inner = pa.StructArray.from_arrays(children, fields=list(inner_t), mask=pa.compute.invert(validity))
    arr = pa.StructArray.from_arrays([inner], ["r"])
    expected = [_fastavro(schema.parsed, {"r": {"s": "kept", "i": 1, "e": "A", "xs": [1, 2]}}),
                _fastavro(schema.parsed, {"r": None}), _fastavro(schema.parsed, {"r": None})]
    assert encode(arr, schema).payloads.to_pylist() == expected
    assert encode_per_row(arr, schema).payloads.to_pylist() == expected


def test_arrays_and_maps_of_records_and_unions_at_depth() -> None:
    item = {"type": "record", "name": "Item", "fields": [
        {"name": "k", "type": "string"},
        {"name": "v", "type": ["null", "int", {"type": "record", "name": "P", "fields": [{"name": "q",
                                                                                          "type": "float"}]}]},
        {"name": "tags", "type": {"type": "map", "values": {"type": "array", "items": ["null", "boolean"]}}}]}
    schema = _schema([{"name": "items", "type": {"type": "array", "items": item}},
                      {"name": "by", "type": {"type": "map", "values": {"type": "array", "items": "test.ns.Item"}}}])
    item_t = pa.struct([("k", pa.string()),
                        ("v", pa.struct([("member0", pa.int32()), ("member1", pa.struct([("q", pa.float32())]))])),
                        ("tags", pa.map_(pa.string(), pa.list_(pa.bool_())))])
    t = pa.struct([("items", pa.list_(item_t)), ("by", pa.map_(pa.string(), pa.list_(item_t)))])

    def one(i: int) -> tuple[dict, dict]:
        branch = i % 3
        ref = {"k": f"k{i}", "v": None if branch == 0 else ("int", i) if branch == 1 else (f"{NS}.P", {"q": i / 4}),
               "tags": {f"t{j}": [None if (i + j) % 2 else True, False][: j % 3] for j in range(i % 3)}}
        arrow = {**ref, "v": None if branch == 0 else {"member0": i if branch == 1 else None,
                                                       "member1": {"q": i / 4} if branch == 2 else None},
                 "tags": list(ref["tags"].items())}
        return ref, arrow

    rows_ref, rows_arrow = [], []
    for r in range(30):
        items = [one(r * 5 + j) for j in range(r % 4)]
        groups = {f"g{j}": [one(r + j + 100) for _ in range(j)] for j in range(r % 3)}
        rows_ref.append({"items": [a for a, _ in items], "by": {k: [a for a, _ in v] for k, v in groups.items()}})
        rows_arrow.append({"items": [b for _, b in items], "by": [(k, [b for _, b in v]) for k, v in groups.items()]})
    arr = pa.array(rows_arrow, t)
    expected = [_fastavro(schema.parsed, r) for r in rows_ref]
    assert encode(arr, schema).payloads.to_pylist() == expected
    assert encode(arr.slice(3, 20), schema).payloads.to_pylist() == expected[3:23]
    assert encode_per_row(arr, schema).payloads.to_pylist() == expected


RECURSIVE = {"type": "record", "name": "Node", "namespace": NS, "fields": [
    {"name": "value", "type": "long"},
    {"name": "label", "type": ["null", "bytes"]},
    {"name": "children", "type": {"type": "array", "items": "Node"}}]}


def _tree(depth: int, key: int) -> dict:
    kids = [_tree(depth - 1, key * 3 + k) for k in range(key % 3)] if depth else []
    return {"value": key, "label": None if key % 2 else bytes([key % 256, 255]), "children": kids}


def test_recursive_types_cut_to_json_take_the_per_row_path_with_the_same_bytes() -> None:
    schema = parse(json.dumps(RECURSIVE))
    trees = [_tree(3, s) for s in range(1, 12)]
    expected = [_fastavro(schema.parsed, t) for t in trees]
    deep = arrow_type(schema, recursive_depth=5)  # holds the whole trees: the JSON level stays empty
    cut = arrow_type(schema, recursive_depth=2)  # the grandchildren are JSON text

    def shape(tree: dict, t: pa.DataType) -> Any:
        if pa.types.is_string(t):
            return json_text(tree)
        kids = t.field("children").type.value_type
        return {"value": tree["value"], "label": tree["label"], "children": [shape(c, kids) for c in tree["children"]]}

    whole = encode(pa.array([shape(t, deep) for t in trees], deep), schema)
    assert whole.per_row == (".".join(["children[]"] * 5),) and whole.payloads.to_pylist() == expected
    cut_result = encode(pa.array([shape(t, cut) for t in trees], cut), schema)
    assert cut_result.per_row == ("children[].children[]",)
    assert cut_result.payloads.to_pylist() == expected
    assert encode_per_row(pa.array([shape(t, cut) for t in trees], cut), schema).payloads.to_pylist() == expected
    # what the columnar decoder reads at that depth encodes back to the same bytes
    read = decode(cut_result.payloads, schema, recursive_depth=2).array
    assert read.type == cut and encode(read, schema).payloads.to_pylist() == expected
    bad = pa.array([shape(trees[0], cut), {"value": 1, "label": None, "children": [{
        "value": 2, "label": None, "children": ["{not json"]}]}], cut)
    _raises(bad, schema, "children[].children[]", 1, "not the JSON of a record")
    wrong = pa.array([shape(trees[0], cut), {"value": 1, "label": None, "children": [{
        "value": 2, "label": None, "children": ['{"value": "x", "label": null, "children": []}']}]}], cut)
    _raises(wrong, schema, "children[].children[]", 1, "not the JSON of a record")


def test_plans_are_cached_per_schema_and_arrow_type() -> None:
    schema = parse(json.dumps(SIMPLE))
    assert plan(schema, SIMPLE_T) is plan(parse(json.dumps(SIMPLE)), SIMPLE_T)
    other = pa.struct([("id", pa.int32()), ("name", pa.string()), ("note", pa.string())])
    assert plan(schema, other) is not plan(schema, SIMPLE_T)


def test_many_rows_and_long_values() -> None:
    rng = np.random.default_rng(5)
    n = 20_000
    ids = rng.integers(INT64_MIN, INT64_MAX, n, endpoint=True)
    names = [("x" * int(k)) for k in rng.integers(0, 300, n)]
    notes = [None if k % 4 == 0 else "é" * int(k % 90) for k in range(n)]
    arr = pa.StructArray.from_arrays([pa.array(ids), pa.array(names), pa.array(notes)], ["id", "name", "note"])
    rows = [{"id": int(i), "name": s, "note": t} for i, s, t in zip(ids, names, notes)]
    assert encode(arr, parse(json.dumps(SIMPLE))).payloads.to_pylist() == _simple_expected(rows)


def test_uuid_strings_are_not_checked() -> None:
    schema = _schema([{"name": "id", "type": {"type": "string", "logicalType": "uuid"}}])
    values = [str(uuid.UUID(int=7)), "not-a-uuid"]
    arr = pa.StructArray.from_arrays([pa.array(values)], ["id"])
    assert encode(arr, schema).payloads.to_pylist() == [_fastavro("string", v) for v in values]
