"""Protobuf messages as Arrow (``broker.schema.protobuf_arrow``): the type of every field
kind as Spark's ``from_protobuf`` maps it, recursion per ``recursive.fields.max.depth``,
Spark's null for fields that are not set, unsigned and enum corner cases, reading one
message as another by field name, and, with hypothesis, that any bytes decode to a row or
a bad row, never an exception.
"""

from __future__ import annotations

from functools import cache

import pyarrow as pa
import pytest
from google.protobuf import message_factory
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.schema import parse_schema
from broker.schema.base import InvalidSchemaError
from broker.schema.protobuf_arrow import arrow_type, decode

PROTO = """
syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/any.proto";
enum Color { RED = 0; GREEN = 1; }
message Item { string sku = 1; double price = 2; }
message All {
  int32 i32 = 1; sint32 s32 = 2; sfixed32 sf32 = 3; uint32 u32 = 4; fixed32 f32 = 5;
  int64 i64 = 6; sint64 s64 = 7; sfixed64 sf64 = 8; uint64 u64 = 9; fixed64 f64 = 10;
  float fl = 11; double db = 12; bool b = 13; string s = 14; bytes by = 15; Color color = 16;
  repeated int32 nums = 17; map<string, Item> items = 18; Item item = 19;
  google.protobuf.Timestamp ts = 20; google.protobuf.Duration dur = 21;
  google.protobuf.Int64Value wrapped = 22; google.protobuf.Struct extra = 23; google.protobuf.Any any = 24;
  oneof choice { string a = 25; int64 c = 26; }
  optional int32 opt = 27;
}
message Tree { string name = 1; repeated Tree children = 2; }
message Later { int64 i64 = 1; string s = 2; double added = 3; }
"""


@cache
def schema():
    return parse_schema("PROTOBUF", PROTO)


def message(name: str):
    return message_factory.GetMessageClass(schema().pool().FindMessageTypeByName(name))


def test_types_follow_sparks_mapping():
    t = arrow_type(schema().pool().FindMessageTypeByName("t.All"))
    assert {f.name: str(f.type) for f in t} == {
        **dict.fromkeys(("i32", "s32", "sf32", "u32", "f32"), "int32"),
        **dict.fromkeys(("i64", "s64", "sf64", "u64", "f64", "c"), "int64"),
        "fl": "float", "db": "double", "b": "bool", "s": "string", "by": "binary", "color": "string",
        "nums": "list<element: int32 not null>",
        "items": "map<string, struct<sku: string, price: double>>", "item": "struct<sku: string, price: double>",
        "ts": "timestamp[us, tz=UTC]", "dur": "duration[us]", "wrapped": "int64", "extra": "string", "any": "string",
        "a": "string", "opt": "int32"}
    tree = schema().pool().FindMessageTypeByName("t.Tree")
    with pytest.raises(InvalidSchemaError, match="recursive reference.*t.Tree.children"):
        arrow_type(tree)
    assert str(arrow_type(tree, recursive_depth=1)) == "struct<name: string>"
    assert str(arrow_type(tree, recursive_depth=2)) == \
        "struct<name: string, children: list<element: struct<name: string> not null>>"
    with pytest.raises(InvalidSchemaError, match="above 10"):
        arrow_type(tree, recursive_depth=11)


def test_values_nulls_and_corner_cases():
    cls = message("t.All")
    full = cls(i32=-1, u32=4294967295, u64=2**64 - 1, f32=2**31, fl=0.5, s="x", by=b"\x00", color=1, nums=[1, 2],
               a="chosen", opt=0)
    full.items["k"].sku = "s"
    full.item.price = 2.5
    full.ts.seconds, full.ts.nanos = 1, 2000
    full.dur.seconds = -1
    full.wrapped.value = 0
    full.extra.update({"q": [1, "z"]})
    full.any.Pack(message("t.Item")(sku="packed"))
    unknown_enum = cls()
    unknown_enum.ParseFromString(b"\x80\x01\x07")  # color = 7, a number the enum does not declare
    t = arrow_type(cls.DESCRIPTOR)
    got = decode(pa.array([full.SerializeToString(), cls().SerializeToString(), None,
                           unknown_enum.SerializeToString()]), cls.DESCRIPTOR, t)
    rows = got.array.to_pylist()
    assert not got.bad.any() and got.errors == {}
    first = rows[0]
    assert (first["i32"], first["u32"], first["u64"], first["f32"]) == (-1, -1, -1, -2**31)  # Java's reading
    assert (first["color"], first["nums"], first["items"], first["item"]) == ("GREEN", [1, 2], [("k", {
        "sku": "s", "price": None})], {"sku": None, "price": 2.5})
    assert first["ts"].timestamp() == 1.000002 and first["dur"].total_seconds() == -1
    assert first["wrapped"] == 0 and first["opt"] == 0  # set, so not null, though zero
    assert first["extra"] == '{"q": [1.0, "z"]}' and '"sku": "packed"' in first["any"]
    assert (first["a"], first["c"], first["i64"], first["s32"], first["b"]) == ("chosen", None, None, None, None)
    assert rows[1] == dict.fromkeys(rows[1]) and rows[2] is None  # nothing set: every field null (Spark)
    assert rows[3]["color"] == "UNKNOWN_ENUM_VALUE_Color_7"


def test_a_message_is_read_as_another_by_field_name():
    later = message("t.Later")
    t = arrow_type(later.DESCRIPTOR)
    got = decode(pa.array([message("t.All")(i64=5, s="x", db=1.0).SerializeToString()]),
                 message("t.All").DESCRIPTOR, t)
    assert got.array.to_pylist() == [{"i64": 5, "s": "x", "added": None}]
    # a value of another kind than the reader's field: that row is bad, with why
    clash = pa.struct([pa.field("s", pa.struct([pa.field("x", pa.int32())]))])
    got = decode(pa.array([later(s="x").SerializeToString(), later().SerializeToString(), None]),
                 later.DESCRIPTOR, clash)
    assert got.bad.tolist() == [True, False, False] and "does not fit" in got.errors[0]
    # a map read as a list: the writer's message cannot be read as the reader's at all
    every = message("t.All")
    got = decode(pa.array([b"", None]), every.DESCRIPTOR, pa.struct([pa.field("items", pa.list_(pa.int32()))]))
    assert got.bad.tolist() == [True, False] and "map field t.All.items" in got.errors[0]


def test_bad_bytes_are_bad_rows():
    cls = message("t.All")
    got = decode(pa.array([b"\xff\xff\xff", b"\x0a\x05ab", cls(s="ok").SerializeToString()]), cls.DESCRIPTOR,
                 arrow_type(cls.DESCRIPTOR))
    assert got.bad.tolist() == [True, True, False]
    assert "not a t.All message" in got.errors[0] and got.array.to_pylist()[2]["s"] == "ok"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40) | st.none(), max_size=20))
def test_any_bytes_decode_without_raising(payloads):
    cls = message("t.All")
    t = arrow_type(cls.DESCRIPTOR)
    got = decode(pa.array(payloads, pa.binary()), cls.DESCRIPTOR, t)
    assert got.array.type == t and len(got.array) == len(payloads)
    for i, payload in enumerate(payloads):
        assert (got.array[i].is_valid) == (payload is not None and not got.bad[i])
        assert bool(got.bad[i]) == (i in got.errors)
