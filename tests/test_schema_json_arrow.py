"""JSON documents as Arrow (``broker.schema.json_arrow``) and the shared row builder
(``broker.schema.arrow_rows``): the type of each JSON Schema construct, ``$ref``s within a
document and to another subject, recursion per ``recursive.fields.max.depth``, decoding by
property name with Spark's string rule (a JSON string as is, anything else as its JSON
text), values that do not fit, and, with hypothesis, that any bytes decode to a row or a
bad row, never an exception.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.schema import SchemaReference, parse_schema
from broker.schema.arrow_rows import rows_to_array
from broker.schema.base import InvalidSchemaError
from broker.schema.json_arrow import arrow_type, decode, record_name

DOC = {
    "title": "Order", "type": "object",
    "properties": {
        "id": {"type": "integer"}, "price": {"type": "number"}, "paid": {"type": "boolean"}, "note": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}}, "loose": {"type": "array"},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "bag": {"type": "object"}, "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "maybe": {"type": ["null", "string"]}, "opt": {"anyOf": [{"type": "null"}, {"type": "integer"}]},
        "status": {"enum": ["NEW", "PAID"]}, "anything": {}, "pair": {"type": "array", "items": [{"type": "string"}]},
        "ship": {"$ref": "#/definitions/Address"},
        "both": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}},
                           {"type": "object", "properties": {"b": {"type": "integer"}}}]},
        "customer": {"$ref": "customer.json"},
    },
    "definitions": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}}},
}
CUSTOMER = {"type": "object", "properties": {"name": {"type": "string"}}}


def order_schema():
    return parse_schema("JSON", json.dumps(DOC), [SchemaReference("customer.json", "customer", 1)],
                        {"customer.json": json.dumps(CUSTOMER)})


def test_types_follow_the_mapping():
    t = arrow_type(order_schema())
    assert {f.name: str(f.type) for f in t} == {
        "id": "int64", "price": "double", "paid": "bool", "note": "string", "tags": "list<item: string>",
        "loose": "list<item: string>", "counts": "map<string, int64>", "bag": "string", "either": "string",
        "maybe": "string", "opt": "int64", "status": "string", "anything": "string", "pair": "string",
        "ship": "struct<city: string>", "both": "struct<a: string, b: int64>", "customer": "struct<name: string>"}
    assert record_name(order_schema()) == "Order"
    assert record_name(parse_schema("JSON", '{"type": "string"}')) is None
    assert arrow_type(parse_schema("JSON", '{"type": "integer"}')) == pa.int64()
    assert arrow_type(parse_schema("JSON", "true")) == pa.string()


def test_recursion_follows_the_depth():
    tree = parse_schema("JSON", json.dumps({"type": "object", "properties": {
        "name": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#"}}}}))
    with pytest.raises(InvalidSchemaError, match="recursive reference.*#/properties/kids/items"):
        arrow_type(tree)
    assert str(arrow_type(tree, recursive_depth=1)) == "struct<name: string>"
    assert str(arrow_type(tree, recursive_depth=2)) == "struct<name: string, kids: list<item: struct<name: string>>>"
    with pytest.raises(InvalidSchemaError, match="above 10"):
        arrow_type(tree, recursive_depth=11)


def test_documents_decode_by_property_name():
    t = arrow_type(order_schema())
    doc = {"id": 2.0, "price": 3, "paid": True, "note": "n", "tags": ["a"], "loose": [1, "x", {"k": None}],
           "counts": {"a": 1}, "bag": {"z": [1]}, "either": "s", "maybe": None, "opt": 4, "status": "NEW",
           "anything": [1, 2], "pair": ["p"], "ship": {"city": "c", "zip": 1}, "both": {"a": "x", "b": 2},
           "customer": {"name": "c"}, "unknown": "skipped"}
    got = decode(pa.array([json.dumps(doc).encode(), b"{}", None, json.dumps({"either": 5}).encode()]), t)
    assert not got.bad.any()
    first = got.array.to_pylist()[0]
    assert first == {**{k: v for k, v in doc.items() if k != "unknown"}, "id": 2, "price": 3.0,
                     "loose": ["1", "x", '{"k":null}'], "counts": [("a", 1)], "bag": '{"z":[1]}',
                     "anything": "[1,2]", "pair": '["p"]', "ship": {"city": "c"}}
    assert got.array.to_pylist()[1] == dict.fromkeys(first) and got.array.to_pylist()[2] is None
    assert got.array.to_pylist()[3]["either"] == "5"


@pytest.mark.parametrize("text, why", [
    (b"{", "not a JSON document"), (b"\xff", "not a JSON document"), (b"[1]", "expected an object, got an array"),
    (b'{"id": "1"}', "expected an integer, got a string"), (b'{"id": 1.5}', "expected an integer"),
    (b'{"paid": 1}', "expected a boolean, got a number"), (b'{"price": true}', "expected a number, got a boolean"),
    (b'{"tags": "a"}', "expected an array, got a string"), (b'{"counts": [1]}', "expected an object, got an array"),
    (b'{"id": 100000000000000000000}', "does not fit"),
])
def test_documents_that_do_not_fit_are_bad_rows(text, why):
    got = decode(pa.array([text, b'{"id": 1}']), arrow_type(order_schema()))
    assert got.bad.tolist() == [True, False]
    assert why in got.errors[0]
    assert got.array.to_pylist()[0] is None and got.array.to_pylist()[1]["id"] == 1


def test_rows_to_array_sets_aside_only_what_does_not_fit():
    bad = np.zeros(3, dtype=bool)
    errors: dict[int, str] = {}
    array = rows_to_array([1, 2**70, None], pa.int64(), bad, errors)
    assert array.to_pylist() == [1, None, None] and bad.tolist() == [False, True, False] and list(errors) == [1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=30) | st.none() | st.builds(
    lambda v: json.dumps(v).encode(), st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                                                   lambda c: st.lists(c, max_size=3) |
                                                   st.dictionaries(st.sampled_from(list(DOC["properties"])), c,
                                                                   max_size=4), max_leaves=8)), max_size=15))
def test_any_bytes_decode_without_raising(payloads):
    t = arrow_type(order_schema())
    got = decode(pa.array(payloads, pa.binary()), t)
    assert got.array.type == t and len(got.array) == len(payloads)
    for i, payload in enumerate(payloads):
        assert got.array[i].is_valid == (payload not in (None, b"null") and not got.bad[i])
        assert bool(got.bad[i]) == (i in got.errors)
