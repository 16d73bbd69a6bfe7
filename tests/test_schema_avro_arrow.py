"""The Arrow form of Avro schemas (broker.schema.avro_arrow): Spark's ``from_avro`` mapping
(SchemaConverters) rule by rule, its errors (a decimal above 38 digits, recursion), the
recursion depth, and the conversion of defaults and values."""

from __future__ import annotations

import datetime
import decimal
import json

import pyarrow as pa
import pytest

from broker.schema.avro import named_types, parse
from broker.schema.avro_arrow import (
    AvroArrowError,
    Branch,
    TypeMapper,
    ValueConverter,
    arrow_type,
    json_text,
    union_layout,
)

UTC = pa.timestamp("us", tz="UTC")
NTZ = pa.timestamp("us")


def of(schema) -> pa.DataType:
    return arrow_type(parse(json.dumps(schema)))


def field_of(schema) -> pa.Field:
    """The Arrow field of a record field of type ``schema``."""
    return of({"type": "record", "name": "R", "fields": [{"name": "f", "type": schema}]})[0]


@pytest.mark.parametrize(("avro", "arrow"), [
    ("null", pa.null()), ("boolean", pa.bool_()), ("int", pa.int32()), ("long", pa.int64()),
    ("float", pa.float32()), ("double", pa.float64()), ("bytes", pa.binary()), ("string", pa.string()),
    ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, pa.string()),
    ({"type": "fixed", "name": "F", "size": 3}, pa.binary()),
    ({"type": "array", "items": "long"}, pa.list_(pa.field("element", pa.int64(), nullable=False))),
    ({"type": "array", "items": ["null", "long"]}, pa.list_(pa.field("element", pa.int64()))),
    ({"type": "map", "values": "string"}, pa.map_(pa.string(), pa.field("value", pa.string(), nullable=False))),
    ({"type": "map", "values": ["string", "null"]}, pa.map_(pa.string(), pa.field("value", pa.string()))),
])
def test_primitives_and_complex_types(avro, arrow) -> None:
    assert of(avro) == arrow


def test_records_are_structs_whose_fields_are_nullable_only_for_unions_with_null() -> None:
    assert of({"type": "record", "name": "R", "namespace": "ns", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": ["null", "string"]},
        {"name": "c", "type": ["string", "null"]}, {"name": "d", "type": "null"},
        {"name": "e", "type": ["null", "int", "string"]}, {"name": "f", "type": ["int", "string"]},
        {"name": "g", "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "double"}]}}]}) == \
        pa.struct([pa.field("a", pa.int32(), nullable=False), pa.field("b", pa.string()),
                   pa.field("c", pa.string()), pa.field("d", pa.null()),
                   pa.field("e", pa.struct([pa.field("member0", pa.int32()), pa.field("member1", pa.string())])),
                   pa.field("f", pa.struct([pa.field("member0", pa.int32()), pa.field("member1", pa.string())]),
                            nullable=False),
                   pa.field("g", pa.struct([pa.field("x", pa.float64(), nullable=False)]), nullable=False)])


@pytest.mark.parametrize(("union", "arrow", "nullable"), [
    (["null", "string"], pa.string(), True),
    (["string", "null"], pa.string(), True),
    (["long"], pa.int64(), False),
    (["int", "long"], pa.int64(), False),
    (["long", "null", "int"], pa.int64(), True),
    (["float", "double"], pa.float64(), False),
    (["null", "double", "float"], pa.float64(), True),
    (["null"], pa.null(), True),
    (["int", "double"], pa.struct([pa.field("member0", pa.int32()), pa.field("member1", pa.float64())]), False),
    (["null", "int", "long", "string"],
     pa.struct([pa.field("member0", pa.int32()), pa.field("member1", pa.int64()), pa.field("member2", pa.string())]),
     True),
    ([{"type": "long", "logicalType": "timestamp-millis"}, "int"], pa.int64(), False),  # Spark: types only
])
def test_unions(union, arrow, nullable) -> None:
    field = field_of(union)
    assert field.type == arrow and field.nullable == nullable


@pytest.mark.parametrize(("avro", "arrow"), [
    ({"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}, pa.decimal128(10, 2)),
    ({"type": "bytes", "logicalType": "decimal", "precision": 38}, pa.decimal128(38, 0)),
    ({"type": "fixed", "name": "D", "size": 16, "logicalType": "decimal", "precision": 38, "scale": 38},
     pa.decimal128(38, 38)),
    ({"type": "int", "logicalType": "date"}, pa.date32()),
    ({"type": "int", "logicalType": "time-millis"}, pa.int32()),
    ({"type": "long", "logicalType": "time-micros"}, pa.int64()),
    ({"type": "long", "logicalType": "timestamp-millis"}, UTC),
    ({"type": "long", "logicalType": "timestamp-micros"}, UTC),
    ({"type": "long", "logicalType": "timestamp-nanos"}, UTC),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, NTZ),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, NTZ),
    ({"type": "long", "logicalType": "local-timestamp-nanos"}, NTZ),
    ({"type": "string", "logicalType": "uuid"}, pa.string()),
    ({"type": "fixed", "name": "Dur", "size": 12, "logicalType": "duration"}, pa.binary()),
    # a logical type on the wrong type, or unknown, is ignored (Avro's rule)
    ({"type": "long", "logicalType": "date"}, pa.int64()),
    ({"type": "string", "logicalType": "timestamp-millis"}, pa.string()),
    ({"type": "int", "logicalType": "my-own"}, pa.int32()),
    ({"type": "fixed", "name": "NotDur", "size": 8, "logicalType": "duration"}, pa.binary()),
])
def test_logical_types(avro, arrow) -> None:
    assert of(avro) == arrow
    assert field_of(["null", avro]).type == arrow


def test_a_decimal_above_38_digits_is_an_error_naming_the_field() -> None:
    schema = {"type": "record", "name": "Money", "fields": [
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 39, "scale": 2}}]}
    with pytest.raises(AvroArrowError, match=r"Money\.amount.*precision 39") as caught:
        of(schema)
    assert isinstance(caught.value, ValueError)
    with pytest.raises(AvroArrowError, match="precision 40"):
        of({"type": "fixed", "name": "Big", "size": 20, "logicalType": "decimal", "precision": 40})


LIST = {"type": "record", "name": "Node", "fields": [
    {"name": "value", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}


def test_recursion_is_an_error_unless_a_depth_is_given() -> None:
    schema = parse(json.dumps(LIST))
    for depth in (-1, 0):
        with pytest.raises(AvroArrowError, match=r"Node is recursive \(at Node\.next\)"):
            arrow_type(schema, recursive_depth=depth)
    for depth in (16, -2, 1.5):
        with pytest.raises(AvroArrowError, match="recursive_depth"):
            arrow_type(schema, recursive_depth=depth)


@pytest.mark.parametrize("depth", [1, 2, 3, 15])
def test_recursive_records_expand_that_many_levels_then_become_json_text(depth) -> None:
    type_ = arrow_type(parse(json.dumps(LIST)), recursive_depth=depth)
    for _ in range(depth):
        assert [f.name for f in type_] == ["value", "next"] and type_[1].nullable
        type_ = type_[1].type
    assert type_ == pa.string()


def test_mutual_recursion_counts_each_record() -> None:
    schema = parse(json.dumps({"type": "record", "name": "A", "fields": [
        {"name": "b", "type": {"type": "record", "name": "B", "fields": [
            {"name": "a", "type": {"type": "array", "items": "A"}}]}}]}))
    assert arrow_type(schema, recursive_depth=1) == pa.struct([pa.field("b", pa.struct([pa.field(
        "a", pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=False)]), nullable=False)])
    # a record used twice side by side is not recursion
    twice = parse(json.dumps({"type": "record", "name": "P", "fields": [
        {"name": "x", "type": {"type": "record", "name": "Q", "fields": [{"name": "v", "type": "int"}]}},
        {"name": "y", "type": "Q"}]}))
    assert arrow_type(twice) == pa.struct([pa.field("x", pa.struct([pa.field("v", pa.int32(), nullable=False)]),
                                                    nullable=False),
                                           pa.field("y", pa.struct([pa.field("v", pa.int32(), nullable=False)]),
                                                    nullable=False)])


def test_union_layouts() -> None:
    layout = union_layout(["null", "int", "string"], {})
    assert (layout.kind, layout.nullable, layout.slot_of, layout.slot_nodes) == ("struct", True, (-1, 0, 1),
                                                                                 ("int", "string"))
    layout = union_layout(["long", "null", "int"], {})
    assert (layout.kind, layout.slot_of, layout.slot_nodes) == ("single", (0, -1, 0), ("long",))
    assert union_layout(["null"], {}).kind == "null"


def test_defaults_and_values_convert_to_what_arrow_takes() -> None:
    schema = parse(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "b", "type": "bytes", "default": "\u00ff\u0000"},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}, "default": "ab"},
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 1500},
        {"name": "n", "type": {"type": "long", "logicalType": "local-timestamp-nanos"}, "default": -1500},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 2},
         "default": "\u0001\u0000"},
        {"name": "u", "type": ["int", "null"], "default": 3},
        {"name": "g", "type": ["null", "int", "string"], "default": None},
        {"name": "m", "type": {"type": "map", "values": "double"}, "default": {"k": 2}},
        {"name": "nan", "type": "double", "default": "NaN"},
        {"name": "r", "type": {"type": "record", "name": "In", "fields": [
            {"name": "x", "type": "int", "default": 1}, {"name": "y", "type": "string"}]}, "default": {"y": "z"}}]}))
    mapper = TypeMapper(named_types(schema))
    values = ValueConverter(mapper)
    fields = named_types(schema)["R"]["fields"]
    converted = {f["name"]: values.default(f["type"], f["default"]) for f in fields}
    assert converted["b"] == b"\xff\x00" and converted["f"] == b"ab"
    assert converted["t"] == 1500000 and converted["n"] == -2
    assert converted["d"] == decimal.Decimal("2.56") and converted["u"] == 3 and converted["g"] is None
    assert converted["r"] == {"x": 1, "y": "z"} and converted["m"] == [("k", 2.0)]
    assert converted["nan"] != converted["nan"]
    row = pa.array([converted], arrow_type(schema)).to_pylist()[0]
    assert row["t"] == datetime.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=datetime.UTC)
    union = ["null", "int", "string"]
    assert values.convert(union, Branch(2, "s")) == {"member0": None, "member1": "s"}
    assert values.convert(union, 7) == {"member0": 7, "member1": None}
    for node, bad in (("int", 2 ** 31), ("string", b"\xff"), ({"type": "bytes", "logicalType": "decimal",
                                                                "precision": 2}, b"\x01\x00"), ("boolean", 1)):
        with pytest.raises(ValueError):
            values.convert(node, bad)


def test_json_text_of_values() -> None:
    assert json_text({"a": b"\x00\xff", "b": [1.5, float("nan"), float("inf"), -float("inf")], "c": ("ns.E", "X"),
                      "d": Branch(1, {"é": None}), "e": True}) == \
        '{"a":"\\u0000ÿ","b":[1.5,"NaN","Infinity","-Infinity"],"c":"X","d":{"é":null},"e":true}'
