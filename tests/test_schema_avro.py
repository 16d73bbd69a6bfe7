"""The Avro schema format (broker.schema.avro, broker.schema.avro_compat): parsing and its
errors, the canonical string (identity), the normal form and fingerprints, references,
and each compatibility rule both ways with Confluent's message, its errorType and path.
fastavro is the reference where it has one (Parsing Canonical Form, fingerprints,
reading data written with one schema with another)."""

from __future__ import annotations

import hashlib
import io
import json
import re

import fastavro
import pytest
from fastavro.schema import to_parsing_canonical_form
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.schema.avro import MAX_DEPTH, AvroSchema, named_types, parse
from broker.schema.base import AVRO, InvalidSchemaError, ParsedSchema, SchemaReference

# --- helpers ------------------------------------------------------------------------------


def record(*fields, name="R", namespace=None, **extra) -> str:
    schema = {"type": "record", "name": name, "fields": list(fields), **extra}
    if namespace is not None:
        schema["namespace"] = namespace
    return json.dumps(schema)


def field(name, type_, **extra) -> dict:
    return {"name": name, "type": type_, **extra}


def breaks(new: str, old: str) -> list[tuple[str, str, str]]:
    """(errorType, path, additionalInfo) of new.backward_errors(old), from the messages."""
    out = []
    for message in parse(new).backward_errors(parse(old)):
        m = re.fullmatch(r"\{errorType:'(\w+)', description:'(.*)', additionalInfo:'(.*)'\}", message)
        assert m, message
        path = re.search(r"path '([^']*)'", m.group(2))
        assert path, message
        out.append((m.group(1), path.group(1), m.group(3)))
    return out


def roundtrip(writer: AvroSchema, reader: AvroSchema, datum):
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, writer.parsed, datum)
    buf.seek(0)
    return fastavro.schemaless_reader(buf, writer.parsed, reader.parsed)


# --- parsing ------------------------------------------------------------------------------


def test_a_record_parses_with_everything_kept() -> None:
    s = parse(record(field("id", "long"), field("tags", {"type": "map", "values": "string"}, default={}),
                     namespace="com.acme", doc="An order"))
    assert s.schema_type == AVRO and s.name == "com.acme.R" and s.references == ()
    assert s.canonical_string() == (
        '{"type":"record","name":"R","namespace":"com.acme","doc":"An order","fields":[{"name":"id","type":'
        '"long"},{"name":"tags","type":{"type":"map","values":"string"},"default":{}}]}')
    assert isinstance(s, ParsedSchema) and s == parse(s.canonical_string()) and hash(s) == hash(parse(
        s.canonical_string()))


@pytest.mark.parametrize("text, canonical", [
    ('"string"', '"string"'),
    ('{"type": "int"}', '"int"'),
    ('["null", "string"]', '["null","string"]'),
    ('{"type": "array", "items": "long"}', '{"type":"array","items":"long"}'),
    ('{"type": "long", "logicalType": "timestamp-millis"}', '{"type":"long","logicalType":"timestamp-millis"}'),
    ('{"type": "bytes", "scale": 2, "precision": 4, "logicalType": "decimal"}',
     '{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}'),
    ('{"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "B"}',
     '{"type":"enum","name":"E","symbols":["A","B"],"default":"B"}'),
    ('{"type": "fixed", "name": "a.F", "size": 16, "logicalType": "uuid"}',
     '{"type":"fixed","name":"F","namespace":"a","size":16,"logicalType":"uuid"}'),
    ('{"type": "error", "name": "Oops", "fields": []}', '{"type":"error","name":"Oops","fields":[]}'),
    ('[{"type": "enum", "name": "A", "symbols": ["X"]}, {"type": "enum", "name": "B", "symbols": ["X"]}, "A"]', None),
    ('[{"type": "map", "values": "int"}, {"type": "array", "items": "int"}, {"type": "string", "x": 1}]',
     '[{"type":"map","values":"int"},{"type":"array","items":"int"},{"type":"string","x":1}]'),
])
def test_top_level_schemas_of_every_kind(text: str, canonical: str | None) -> None:
    if canonical is None:  # a named type twice in a union: its second use is a duplicate branch
        with pytest.raises(InvalidSchemaError, match=r"two branches of type 'A' \(at /2\)"):
            parse(text)
        parse(text[:text.rindex(", ")] + "]")
        return
    s = parse(text)
    assert s.canonical_string() == canonical
    assert parse(canonical).canonical_string() == canonical


def test_the_canonical_string_is_avro_javas_to_string() -> None:
    # Avro Java's Schema.toString() of this text (attribute order, namespaces relative to
    # the enclosing type, a reference in the same namespace by simple name, props last)
    text = """{"fields": [
        {"type": "string", "name": "first_name", "doc": "the first name"},
        {"name": "accounts", "type": {"type": "array", "items": {"fields": [
            {"name": "iban", "type": "string"},
            {"name": "kind", "type": {"name": "AccountType", "type": "enum", "symbols": ["SAVINGS", "CHECKING"]}}
        ], "name": "Account", "type": "record", "aliases": ["OldAccount"]}}},
        {"name": "other", "type": ["null", "Account"], "default": null, "x-owner": "team"},
        {"name": "elsewhere", "type": {"type": "record", "name": "Outside", "namespace": "", "fields": []}}
    ], "namespace": "com.acme", "name": "Customer", "type": "record"}"""
    assert parse(text).canonical_string() == (
        '{"type":"record","name":"Customer","namespace":"com.acme","fields":['
        '{"name":"first_name","type":"string","doc":"the first name"},'
        '{"name":"accounts","type":{"type":"array","items":{"type":"record","name":"Account","fields":['
        '{"name":"iban","type":"string"},'
        '{"name":"kind","type":{"type":"enum","name":"AccountType","symbols":["SAVINGS","CHECKING"]}}],'
        '"aliases":["OldAccount"]}}},'
        '{"name":"other","type":["null","Account"],"default":null,"x-owner":"team"},'
        '{"name":"elsewhere","type":{"type":"record","name":"Outside","namespace":"","fields":[]}}]}')


def test_names_and_namespaces_resolve_per_the_specification() -> None:
    s = parse(record(field("a", {"type": "enum", "name": "E", "symbols": ["X"]}),
                     field("b", "E"), field("c", "com.acme.E"),
                     field("d", {"type": "fixed", "name": "other.F", "size": 1}), field("e", "other.F"),
                     name="R", namespace="com.acme"))
    types = named_types(s)
    assert sorted(types) == ["com.acme.E", "com.acme.R", "other.F"]
    assert [f["type"] for f in types["com.acme.R"]["fields"]] == ["com.acme.E"] * 3 + ["other.F"] * 2
    assert '"name":"c","type":"E"' in s.canonical_string()  # same namespace: simple name
    assert '"name":"e","type":"other.F"' in s.canonical_string()
    # a dotted name sets the namespace, a nested type inherits it
    assert named_types(parse(record(field("x", {"type": "enum", "name": "In", "symbols": ["A"]}),
                                    name="a.b.Out", namespace="ignored")))["a.b.In"]["type"] == "enum"


def test_named_types_and_root_are_copies() -> None:
    s = parse(record(field("a", "int")))
    named_types(s)["R"]["fields"].clear()
    root = s.root
    assert root == "R" and named_types(s)["R"]["fields"] == [{"name": "a", "type": "int"}]


@pytest.mark.parametrize("text, message", [
    ("", "not valid JSON"),
    ("{", "not valid JSON"),
    ('{"type": "record", "name": "R", "fields": []', "not valid JSON"),
    ('{"type": "double", "x": NaN}', "not valid JSON"),
    ('{"type": "double", "x": Infinity}', "not valid JSON"),
    ('{"type": "double", "x": 1e999}', "out of range"),
    ("5", "not a schema"),
    ("null", "not a schema"),
    ("true", "not a schema"),
    ('"strin"', "unknown type 'strin'"),
    ('"record"', 'written as an object'),
    ('{"name": "R"}', 'needs a "type"'),
    ('{"type": {"type": "int"}}', '"type" must be a type name'),
    ('{"type": ["null", "int"]}', '"type" must be a type name'),
    ('{"type": "Unknown"}', "unknown type 'Unknown'"),
    ('{"type": "record", "fields": []}', 'needs a "name"'),
    ('{"type": "record", "name": 5, "fields": []}', 'needs a "name"'),
    ('{"type": "record", "name": "1R", "fields": []}', "invalid name '1R'"),
    ('{"type": "record", "name": "a-b", "fields": []}', "invalid name"),
    ('{"type": "record", "name": "", "fields": []}', "invalid name"),
    ('{"type": "record", "name": "a.", "fields": []}', "invalid name"),
    ('{"type": "record", "name": "R", "namespace": "a..b", "fields": []}', "invalid namespace"),
    ('{"type": "record", "name": "R", "namespace": 7, "fields": []}', '"namespace" must be a string'),
    ('{"type": "record", "name": "int", "fields": []}', "named after the primitive type 'int'"),
    ('{"type": "record", "name": "R"}', 'needs "fields"'),
    ('{"type": "record", "name": "R", "fields": {}}', 'needs "fields"'),
    ('{"type": "record", "name": "R", "fields": ["int"]}', "a field must be an object"),
    ('{"type": "record", "name": "R", "fields": [{"type": "int"}]}', "invalid field name"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a b", "type": "int"}]}', "invalid field name"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a"}]}', "needs a \"type\""),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "long"}]}',
     "two fields named 'a'"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "order": "up"}]}', '"order"'),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "aliases": "b"}]}', '"aliases"'),
    ('{"type": "record", "name": "R", "doc": 5, "fields": []}', '"doc" must be a string'),
    ('{"type": "record", "name": "R", "aliases": ["1x"], "fields": []}', "invalid alias"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": {"type": "record", "name": "R", '
     '"fields": []}}]}', "'R' is defined twice"),
    ('{"type": "enum", "name": "E"}', 'needs "symbols"'),
    ('{"type": "enum", "name": "E", "symbols": ["A", "1B"]}', "invalid enum symbol"),
    ('{"type": "enum", "name": "E", "symbols": ["A", 2]}', "invalid enum symbol"),
    ('{"type": "enum", "name": "E", "symbols": ["A", "A"]}', "a symbol twice"),
    ('{"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}', "not one of its symbols"),
    ('{"type": "fixed", "name": "F"}', 'needs a "size"'),
    ('{"type": "fixed", "name": "F", "size": -1}', 'needs a "size"'),
    ('{"type": "fixed", "name": "F", "size": "4"}', 'needs a "size"'),
    ('{"type": "fixed", "name": "F", "size": true}', 'needs a "size"'),
    ('{"type": "fixed", "name": "F", "size": 2147483648}', 'needs a "size"'),
    ('{"type": "array"}', 'needs "items"'),
    ('{"type": "map"}', 'needs "values"'),
    ('{"type": "array", "items": "nope"}', "unknown type 'nope'"),
    ('["null", ["int"]]', "cannot contain a union"),
    ('["int", "int"]', "two branches of type 'int'"),
    ('[{"type": "array", "items": "int"}, {"type": "array", "items": "long"}]', "two branches of type 'array'"),
    ('{"type": "bytes", "logicalType": "decimal", "precision": -1}', "fastavro rejects"),
    ('{"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 3}', "fastavro rejects"),
    ('{"type": "fixed", "name": "D", "size": 2, "logicalType": "decimal", "precision": 9}', "fastavro rejects"),
    ('{"type": "record", "name": "R", "doc": "\\ud800", "fields": []}', "unpaired surrogate"),
])
def test_invalid_schemas(text: str, message: str) -> None:
    with pytest.raises(InvalidSchemaError, match=re.escape(message)):
        parse(text)


def test_a_reference_to_a_type_in_another_namespace_needs_its_full_name() -> None:
    text = json.dumps({"type": "record", "name": "Outer", "namespace": "a", "fields": [
        field("x", {"type": "record", "name": "Inner", "namespace": "b", "fields": []}), field("y", "Inner")]})
    with pytest.raises(InvalidSchemaError, match=r"unknown type 'a.Inner' \(at /fields/1/type\)"):
        parse(text)
    assert named_types(parse(text.replace('"type": "Inner"', '"type": "b.Inner"')))["a.Outer"]["fields"][1] == {
        "name": "y", "type": "b.Inner"}


def test_attributes_of_another_kind_of_schema_are_dropped() -> None:
    # Avro Java keeps no doc, name or symbols on a primitive, an array or a map
    assert parse('{"type": "string", "doc": "\\ud800", "name": "x"}').canonical_string() == '"string"'
    assert parse('{"type": "array", "items": "int", "symbols": [], "size": 1, "x": 1}').canonical_string() == (
        '{"type":"array","items":"int","x":1}')
    assert parse(record(field("a", "int"), size=3, items="int")).canonical_string() == (
        '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}')


def test_nesting_is_bounded() -> None:
    def nested(depth: int) -> str:  # ``depth`` schemas, one inside the other
        text = '"int"'
        for _ in range(depth - 1):
            text = f'{{"type": "array", "items": {text}}}'
        return text

    assert parse(nested(MAX_DEPTH)).canonical_string().count("array") == MAX_DEPTH - 1
    with pytest.raises(InvalidSchemaError, match=f"nested more than {MAX_DEPTH} deep"):
        parse(nested(MAX_DEPTH + 1))
    with pytest.raises(InvalidSchemaError, match="nested too deeply"):
        parse("[" * 100_000)
    with pytest.raises(InvalidSchemaError, match="must be a string"):
        parse(b'"int"')  # type: ignore[arg-type]


# --- defaults ----------------------------------------------------------------------------

ENUM = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
FIXED = {"type": "fixed", "name": "F", "size": 2}
POINT = {"type": "record", "name": "P", "fields": [field("x", "int"), field("y", "int", default=0)]}


@pytest.mark.parametrize("type_, default", [
    ("null", None), ("boolean", False), ("int", -2**31), ("int", 2**31 - 1), ("long", 2**63 - 1),
    ("float", 1), ("double", 2.5), ("double", "NaN"), ("float", "1.5"), ("string", "x"), ("bytes", "\u00ff"),
    (ENUM, "B"), (FIXED, "ab"), ({"type": "array", "items": "int"}, [1, 2]),
    ({"type": "map", "values": ENUM}, {"k": "A"}), (POINT, {"x": 1}), (POINT, {"x": 1, "y": 2, "z": "ignored"}),
    (["null", "string"], None), (["string", "null"], "s"), ({"type": "long", "logicalType": "timestamp-millis"}, 0),
])
def test_valid_defaults(type_, default) -> None:
    s = parse(record(field("f", type_, default=default)))
    assert named_types(s)["R"]["fields"][0]["default"] == default


@pytest.mark.parametrize("type_, default", [
    ("null", 0), ("boolean", "true"), ("int", 2**31), ("int", 1.0), ("int", True), ("long", 2**63),
    ("long", "1"), ("float", True), ("double", "one"), ("double", None), ("string", 1), ("bytes", None),
    (ENUM, "C"), (ENUM, 0), (FIXED, "abc"), (FIXED, "\u0100b"), ({"type": "array", "items": "int"}, ["1"]),
    ({"type": "array", "items": "int"}, {}), ({"type": "map", "values": "int"}, {"k": "v"}),
    ({"type": "map", "values": "int"}, []), (POINT, {"y": 1}), (POINT, [1]), (["null", "string"], "s"),
    (["string", "null"], None), ([], None), ({"type": "string", "x": 1}, 5),
])
def test_invalid_defaults(type_, default) -> None:
    with pytest.raises(InvalidSchemaError, match="the default .* of field 'f' does not match its type") as e:
        parse(record(field("f", type_, default=default)))
    assert "(at /fields/0)" in str(e.value)
    if isinstance(type_, list) and type_:
        assert "first branch" in str(e.value)


def test_a_recursive_record_default_is_checked_through_the_recursion() -> None:
    node = {"type": "record", "name": "Node", "fields": [
        field("v", "int"), field("next", ["null", "Node"], default=None)]}
    parse(record(field("head", node, default={"v": 1, "next": None})))
    with pytest.raises(InvalidSchemaError, match="does not match"):
        parse(record(field("head", node, default={"v": 1, "next": {"v": 2}})))  # union default: its first branch


# --- identity -----------------------------------------------------------------------------

BASE = {"type": "record", "name": "Order", "namespace": "com.acme", "doc": "An order", "fields": [
    {"name": "id", "type": "long", "doc": "the id"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
     "default": "\u0000"},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"], "default": "NEW"}},
    {"name": "meta", "type": {"type": "map", "values": "string"}, "default": {"b": "2", "a": "1"},
     "x-a": {"z": 1, "y": [2, {"q": 1, "p": 2}]}, "x-b": "two"},
]}


def reorder(obj):
    if isinstance(obj, dict):
        return {k: reorder(obj[k]) for k in reversed(list(obj))}
    if isinstance(obj, list):
        return [reorder(v) for v in obj]
    return obj


def test_whitespace_and_key_order_do_not_change_the_identity() -> None:
    a = parse(json.dumps(BASE))
    b = parse(json.dumps(reorder(BASE), indent=4))
    assert a.canonical_string() == b.canonical_string() and a == b and hash(a) == hash(b)
    redundant = json.loads(json.dumps(BASE))
    redundant["fields"][2]["type"]["namespace"] = "com.acme"  # the enclosing namespace, spelled out
    redundant["fields"][0]["type"] = {"type": "long"}
    redundant["fields"][0]["order"] = "ASCENDING"
    redundant["name"], redundant["namespace"] = "com.acme.Order", "ignored.when.the.name.is.full"
    assert parse(json.dumps(redundant)) == a


@pytest.mark.parametrize("change", [
    lambda s: s["fields"][1].update(default="\u0001"),
    lambda s: s.update(doc="An Order"),
    lambda s: s["fields"][0].update(doc="the ID"),
    lambda s: s["fields"][3].update({"x-b": "three"}),
    lambda s: s["fields"][3]["x-a"].update(z=2),
    lambda s: s["fields"][3].update(default={"a": "1"}),
    lambda s: s["fields"][2]["type"].pop("default"),
    lambda s: s["fields"][0].update(order="descending"),
    lambda s: s["fields"][0].update(aliases=["ident"]),
    lambda s: s.update(aliases=["Purchase"]),
    lambda s: s["fields"][1]["type"].update(scale=3),
    lambda s: s["fields"][2]["type"].update(namespace="other"),
    lambda s: s.update({"x-c": None}),
    lambda s: s["fields"].reverse(),
])
def test_a_default_doc_property_or_name_changes_the_identity(change) -> None:
    changed = json.loads(json.dumps(BASE))
    change(changed)
    assert parse(json.dumps(changed)) != parse(json.dumps(BASE))


def test_properties_and_defaults_are_written_with_sorted_keys() -> None:
    c = parse(json.dumps(BASE)).canonical_string()
    assert '"default":{"a":"1","b":"2"},"x-a":{"y":[2,{"p":2,"q":1}],"z":1},"x-b":"two"' in c
    assert '"type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2},"default":"\\u0000"' in c


def test_non_ascii_text_is_kept_unescaped() -> None:
    s = parse(record(field("f", "string", doc="größe 📦", default="ü")))
    assert '"doc":"größe 📦","default":"ü"' in s.canonical_string()


# --- normal form, Parsing Canonical Form, fingerprints --------------------------------------

PLAIN = {"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
    {"name": "id", "type": {"type": "long"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "namespace": "x",
                                                          "fields": [{"name": "sku", "type": "string"}]}}},
    {"name": "again", "type": ["null", "x.Line", {"type": "fixed", "name": "H", "size": 4}]},
]}


def test_the_normal_form_of_a_plain_schema_is_the_parsing_canonical_form() -> None:
    s = parse(json.dumps(PLAIN))
    pcf = to_parsing_canonical_form(fastavro.parse_schema(PLAIN))
    assert s.normalize().canonical_string() == pcf == s.parsing_canonical_form()
    assert pcf.startswith('{"name":"com.acme.Order","type":"record","fields":[{"name":"id","type":"long"}')
    assert s.normalize().normalize() == s.normalize()


def test_the_normal_form_keeps_what_has_a_meaning() -> None:
    s = parse(json.dumps(BASE))
    n = s.normalize()
    assert n.canonical_string() == (
        '{"name":"com.acme.Order","type":"record","fields":[{"name":"id","type":"long","doc":"the id"},'
        '{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2},'
        '"default":"\\u0000"},{"name":"status","type":{"name":"com.acme.Status","type":"enum","symbols":'
        '["NEW","PAID"],"default":"NEW"}},{"name":"meta","type":{"type":"map","values":"string"},"default":'
        '{"a":"1","b":"2"},"x-a":{"y":[2,{"p":2,"q":1}],"z":1},"x-b":"two"}],"doc":"An order"}')
    assert n.normalize().canonical_string() == n.canonical_string()
    assert parse(n.canonical_string()).normalize() == n
    assert n.backward_errors(s) == [] and s.backward_errors(n) == []
    assert n.parsing_canonical_form() == s.parsing_canonical_form()


def test_aliases_and_field_order_in_the_normal_form() -> None:
    s = parse(record(field("a", "int", aliases=["z", "b"], order="ignore"), name="R", namespace="n",
                     aliases=["Q", "o.P"]))
    assert s.normalize().canonical_string() == (
        '{"name":"n.R","type":"record","fields":[{"name":"a","type":"int","order":"ignore","aliases":["b","z"]}],'
        '"aliases":["n.Q","o.P"]}')
    assert '"aliases":["Q","o.P"]' in s.canonical_string()  # canonical: as written, relative to the namespace


def test_fingerprints_are_fastavros_of_the_parsing_canonical_form() -> None:
    s = parse(json.dumps(PLAIN))
    pcf = s.parsing_canonical_form()
    assert s.fingerprint() == fastavro.schema.fingerprint(pcf, "CRC-64-AVRO")
    assert s.fingerprint_sha256() == hashlib.sha256(pcf.encode()).hexdigest() == s.fingerprint("SHA-256")
    assert s.fingerprint("md5") == hashlib.md5(pcf.encode()).hexdigest()
    assert parse(json.dumps(reorder(PLAIN))).fingerprint() == s.fingerprint()
    assert parse('"int"').fingerprint() != parse('"long"').fingerprint()
    # Avro's test data (schema-tests.txt): the 64-bit fingerprint of "null", its bytes little-endian
    null = parse('"null"').fingerprint()
    assert int.from_bytes(bytes.fromhex(null), "little", signed=True) == 7195948357588979594
    with pytest.raises(ValueError, match="Unknown schema fingerprint algorithm"):
        s.fingerprint("nope")


def test_formatted() -> None:
    s = parse(json.dumps(BASE))
    assert s.formatted() == s.formatted("") == s.formatted("serialized") == s.canonical_string()
    assert s.formatted("resolved") == s.canonical_string()  # no references: nothing to inline


# --- references ---------------------------------------------------------------------------

ADDRESS = json.dumps({"type": "record", "name": "Address", "namespace": "com.acme", "fields": [
    field("street", "string"), field("country", {"type": "enum", "name": "Country", "symbols": ["NL", "FR"]})]})
GEO = json.dumps({"type": "record", "name": "Geo", "namespace": "geo", "fields": [
    field("address", "com.acme.Address"), field("lat", "double")]})
ADDRESS_REF = SchemaReference("com.acme.Address", "address-value", 1)
GEO_REF = SchemaReference("geo.Geo", "geo-value", 3)


def customer(*fields) -> str:
    return record(*fields, name="Customer", namespace="com.acme")


def test_a_record_using_a_referenced_type() -> None:
    text = customer(field("home", "Address"), field("work", ["null", "com.acme.Address"], default=None),
                    field("country", "Country"))
    s = parse(text, [ADDRESS_REF], {"com.acme.Address": ADDRESS})
    assert s.references == (ADDRESS_REF,)
    assert s.canonical_string() == (
        '{"type":"record","name":"Customer","namespace":"com.acme","fields":[{"name":"home","type":"Address"},'
        '{"name":"work","type":["null","Address"],"default":null},{"name":"country","type":"Country"}]}')
    resolved = s.formatted("resolved")
    assert resolved.startswith('{"type":"record","name":"Customer","namespace":"com.acme","fields":[{"name":'
                               '"home","type":{"type":"record","name":"Address","fields":[')
    assert resolved.count('"name":"Address"') == 1 and json.loads(resolved)
    assert parse(resolved).formatted("resolved") == resolved
    assert sorted(named_types(s)) == ["com.acme.Address", "com.acme.Country", "com.acme.Customer"]
    assert s.normalize().canonical_string().count("com.acme.Address") == 2  # by name, not inlined
    # fastavro's parsed form is self-contained: it writes and reads data on its own
    datum = {"home": {"street": "Main", "country": "NL"}, "work": None, "country": "FR"}
    assert roundtrip(s, s, datum) == datum
    # the same schema text with other references is another schema
    assert s != parse(text, [SchemaReference("com.acme.Address", "address-value", 2)],
                      {"com.acme.Address": ADDRESS})


def test_references_resolve_transitively_dependencies_first() -> None:
    refs = {"com.acme.Address": ADDRESS, "geo.Geo": GEO}
    s = parse(customer(field("where", "geo.Geo")), [GEO_REF], refs)
    assert s.canonical_string().endswith('"fields":[{"name":"where","type":"geo.Geo"}]}')
    assert '"name":"Geo","namespace":"geo"' in s.formatted("resolved")
    with pytest.raises(InvalidSchemaError, match="referenced schema 'geo.Geo' is invalid: unknown type "
                                                 "'com.acme.Address'.*cyclic reference"):
        parse(customer(field("where", "geo.Geo")), [GEO_REF], dict(reversed(refs.items())))


def test_top_level_union_and_bare_reference_with_references() -> None:
    refs = {"com.acme.Address": ADDRESS}
    union = parse('["null", "com.acme.Address"]', [ADDRESS_REF], refs)
    assert union.canonical_string() == '["null","com.acme.Address"]'
    assert roundtrip(union, union, {"street": "s", "country": "NL"}) == {"street": "s", "country": "NL"}
    bare = parse('"com.acme.Address"', [ADDRESS_REF], refs)
    assert bare.name == "com.acme.Address" and bare.canonical_string() == '"com.acme.Address"'
    assert bare.normalize().canonical_string() == '"com.acme.Address"'
    assert json.loads(bare.formatted("resolved"))["fields"][0] == {"name": "street", "type": "string"}


def test_a_missing_reference() -> None:
    with pytest.raises(InvalidSchemaError, match=r"reference 'com.acme.Address' \(subject 'address-value', "
                                                 r"version 1\) is not resolved"):
        parse(customer(field("home", "Address")), [ADDRESS_REF], {})
    with pytest.raises(InvalidSchemaError, match=r"unknown type 'com.acme.Address' \(at /fields/0/type\)"):
        parse(customer(field("home", "Address")))


def test_invalid_references() -> None:
    with pytest.raises(InvalidSchemaError, match=r"referenced schema 'com.acme.Address' is invalid: the record "
                                                 r"'com.acme.Address' has two fields named 'a' \(at /fields/1\)$"):
        parse('"int"', [], {"com.acme.Address": record(field("a", "int"), field("a", "int"), name="com.acme.Address")})
    with pytest.raises(InvalidSchemaError, match="referenced schema 'com.acme.Address' is not valid JSON"):
        parse(customer(field("home", "Address")), [ADDRESS_REF], {"com.acme.Address": "{"})
    with pytest.raises(InvalidSchemaError, match="referenced schema 'x' must be a string"):
        parse('"int"', [], {"x": None})  # type: ignore[dict-item]
    with pytest.raises(InvalidSchemaError, match="'com.acme.Address' is defined twice"):
        parse(record(field("a", "int"), name="Address", namespace="com.acme"), [ADDRESS_REF],
              {"com.acme.Address": ADDRESS})


def test_the_normal_form_sorts_and_deduplicates_references() -> None:
    refs = {"com.acme.Address": ADDRESS, "geo.Geo": GEO}
    s = parse(customer(field("where", "geo.Geo"), field("home", "Address")), [GEO_REF, ADDRESS_REF, GEO_REF], refs)
    assert s.normalize().references == (ADDRESS_REF, GEO_REF)


# --- compatibility ------------------------------------------------------------------------

def test_the_message_is_confluents() -> None:
    new = record(field("a", "int"), field("x", "string"))
    assert parse(new).backward_errors(parse(record(field("a", "int")))) == [
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'x' at path '/fields/1' in the "
        "new schema has no default value and is missing in the old schema', additionalInfo:'x'}"]


def test_a_forward_check_words_the_message_the_other_way() -> None:
    old, new = parse(record(field("a", "int"), field("x", "string"))), parse(record(field("a", "int")))
    (brk,) = old.incompatibilities(new)  # FORWARD: the old schema reads the new one's data
    assert brk.message("old", "new") == (
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'x' at path '/fields/1' in the "
        "old schema has no default value and is missing in the new schema', additionalInfo:'x'}")
    assert str(brk) == brk.message() == old.backward_errors(new)[0]


def test_added_and_removed_fields() -> None:
    old = record(field("a", "int"))
    without_default = record(field("a", "int"), field("x", "string"))
    with_default = record(field("a", "int"), field("x", "string", default=""))
    assert breaks(without_default, old) == [("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1", "x")]
    assert breaks(old, without_default) == []  # a writer field the reader lacks is skipped
    assert breaks(with_default, old) == [] and breaks(old, with_default) == []


def test_field_aliases() -> None:
    old = record(field("a", "int"))
    renamed = record(field("b", "int"))
    aliased = record(field("b", "int", aliases=["a"]))
    assert breaks(renamed, old) == [("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/0", "b")]
    assert breaks(aliased, old) == []
    assert breaks(old, aliased) == [("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/0", "a")]  # one way only
    assert roundtrip(parse(old), parse(aliased), {"a": 5}) == {"b": 5}
    # both a field of the name and one of an alias: the field of the name
    assert breaks(record(field("a", "long", aliases=["b"])), record(field("b", "string"), field("a", "int"))) == []


PROMOTABLE = [("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
              ("float", "double"), ("string", "bytes"), ("bytes", "string")]


@pytest.mark.parametrize("writer, reader", PROMOTABLE)
def test_promotions(writer: str, reader: str) -> None:
    assert breaks(record(field("f", reader)), record(field("f", writer))) == []
    back = breaks(record(field("f", writer)), record(field("f", reader)))
    if (reader, writer) in PROMOTABLE:
        assert back == []
    else:
        assert back == [("TYPE_MISMATCH", "/fields/0/type",
                         f"reader type: {writer.upper()} not compatible with writer type: {reader.upper()}")]


@pytest.mark.parametrize("a, b", [("int", "string"), ("boolean", "int"), ("null", "int"), ("int", "long"),
                                  ("float", "double"), ("string", "int"), ("bytes", "double")])
def test_type_mismatches(a: str, b: str) -> None:
    assert breaks(record(field("f", a)), record(field("f", b))) == [
        ("TYPE_MISMATCH", "/fields/0/type", f"reader type: {a.upper()} not compatible with writer type: "
                                            f"{b.upper()}")]


def test_top_level_and_complex_type_mismatches() -> None:
    assert breaks('"boolean"', '"int"') == [
        ("TYPE_MISMATCH", "/", "reader type: BOOLEAN not compatible with writer type: INT")]
    assert breaks('{"type": "map", "values": "int"}', '{"type": "array", "items": "int"}') == [
        ("TYPE_MISMATCH", "/", "reader type: MAP not compatible with writer type: ARRAY")]
    enum = json.dumps(ENUM)
    assert breaks(enum, record(field("a", "int"), name="E")) == [
        ("TYPE_MISMATCH", "/", "reader type: ENUM not compatible with writer type: RECORD")]


def test_enum_symbols() -> None:
    def schema(symbols, **extra):
        return record(field("e", {"type": "enum", "name": "E", "symbols": symbols, **extra}))

    assert breaks(schema(["A", "B", "C"]), schema(["A", "B"])) == []
    assert breaks(schema(["A"]), schema(["A", "C", "B"])) == [
        ("MISSING_ENUM_SYMBOLS", "/fields/0/type/symbols", "[B, C]")]
    assert breaks(schema(["A"], default="A"), schema(["A", "B"])) == []  # unknown symbols read as the default
    reader = parse(schema(["A", "U"], default="U"))
    assert roundtrip(parse(schema(["A", "B"])), reader, {"e": "B"}) == {"e": "U"}
    message = parse(schema(["A"])).backward_errors(parse(schema(["A", "B"])))[0]
    assert "description:'The new schema is missing enum symbols '[B]' at path '/fields/0/type/symbols' in the " \
           "old schema'" in message


def test_fixed_size_and_names() -> None:
    def schema(size, name="F", **extra):
        return record(field("f", {"type": "fixed", "name": name, "size": size, **extra}))

    assert breaks(schema(8), schema(4)) == [("FIXED_SIZE_MISMATCH", "/fields/0/type/size", "expected: 4, found: 8")]
    assert breaks(schema(4), schema(8)) == [("FIXED_SIZE_MISMATCH", "/fields/0/type/size", "expected: 8, found: 4")]
    assert breaks(schema(4, "G"), schema(4)) == [("NAME_MISMATCH", "/fields/0/type/name", "expected: F")]
    assert breaks(schema(4, "G", aliases=["F"]), schema(4)) == []
    assert breaks(schema(4), schema(4, "G", aliases=["F"])) == [("NAME_MISMATCH", "/fields/0/type/name",
                                                                 "expected: G")]


def test_record_names_aliases_and_namespaces() -> None:
    old = record(field("a", "int"), name="Old", namespace="n")
    assert breaks(record(field("a", "int"), name="New", namespace="n"), old) == [
        ("NAME_MISMATCH", "/name", "expected: n.Old")]
    assert breaks(record(field("a", "int"), name="New", namespace="n", aliases=["Old"]), old) == []
    assert breaks(record(field("a", "int"), name="New", namespace="m", aliases=["n.Old"]), old) == []
    assert breaks(record(field("a", "int"), name="New", namespace="m", aliases=["Old"]), old) == [
        ("NAME_MISMATCH", "/name", "expected: n.Old")]  # the alias is m.Old
    # Avro compares unqualified names: a namespace change alone is compatible (as Avro Java)
    assert breaks(record(field("a", "int"), name="Old", namespace="other"), old) == []
    # the name and the fields are both checked
    assert breaks(record(field("b", "int"), name="New"), record(field("a", "int"), name="Old")) == [
        ("NAME_MISMATCH", "/name", "expected: Old"), ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/0", "b")]
    enum_old = json.dumps({**ENUM, "name": "n.E"})
    assert breaks(json.dumps({**ENUM, "name": "n.E2"}), enum_old) == [("NAME_MISMATCH", "/name",
                                                                       "expected: n.E")]


def test_unions() -> None:
    nullable = record(field("f", ["null", "string"], default=None))
    plain = record(field("f", "string"))
    # a writer union against a non-union reader: each branch, under its index
    assert breaks(plain, nullable) == [
        ("TYPE_MISMATCH", "/fields/0/type/0", "reader type: STRING not compatible with writer type: NULL")]
    # a non-union writer against a reader union: one branch reads it
    assert breaks(nullable, plain) == []
    assert breaks(record(field("f", ["null", "long"])), record(field("f", "int"))) == []  # through a promotion
    assert breaks(nullable, record(field("f", "int"))) == [
        ("MISSING_UNION_BRANCH", "/fields/0/type", "reader union lacking writer type: INT")]
    # union against union: every writer branch
    wide = record(field("f", ["null", "string", "int"], default=None))
    assert breaks(wide, nullable) == []
    assert breaks(nullable, wide) == [
        ("MISSING_UNION_BRANCH", "/fields/0/type/2", "reader union lacking writer type: INT")]
    message = parse(nullable).backward_errors(parse(wide))[0]
    assert "description:'The new schema is missing a type inside a union field at path '/fields/0/type/2' in " \
           "the old schema'" in message
    # a named branch matched by name: a renamed record is a missing branch
    rec = {"type": "record", "name": "A", "fields": [field("x", "int")]}
    assert breaks(record(field("f", ["null", {**rec, "name": "B"}])), record(field("f", ["null", rec]))) == [
        ("MISSING_UNION_BRANCH", "/fields/0/type/1", "reader union lacking writer type: RECORD")]


def test_arrays_and_maps_recurse() -> None:
    def schema(kind, inner):
        key = "items" if kind == "array" else "values"
        return record(field("f", {"type": kind, key: inner}))

    assert breaks(schema("array", "long"), schema("array", "int")) == []
    assert breaks(schema("array", "int"), schema("array", "long")) == [
        ("TYPE_MISMATCH", "/fields/0/type/items", "reader type: INT not compatible with writer type: LONG")]
    assert breaks(schema("map", {"type": "enum", "name": "E", "symbols": ["A"]}),
                  schema("map", {"type": "enum", "name": "E", "symbols": ["A", "B"]})) == [
        ("MISSING_ENUM_SYMBOLS", "/fields/0/type/values/symbols", "[B]")]


def test_nested_records_and_several_breaks() -> None:
    inner_old = {"type": "record", "name": "In", "fields": [field("a", "int"), field("b", "string")]}
    inner_new = {"type": "record", "name": "In", "fields": [field("b", "int"), field("c", "int")]}
    assert breaks(record(field("x", "int"), field("in", inner_new)), record(field("x", "int"),
                                                                           field("in", inner_old))) == [
        ("TYPE_MISMATCH", "/fields/1/type/fields/0/type", "reader type: INT not compatible with writer type: STRING"),
        ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1/type/fields/1", "c")]


def test_a_reader_enum_field_missing_from_the_writer_needs_a_field_default() -> None:
    # the enum's own default is for unknown symbols; Avro Java reports this as a TYPE_MISMATCH
    # of the enum against the writer record, the break is the same
    enum = {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"}
    assert breaks(record(field("a", "int"), field("e", enum)), record(field("a", "int"))) == [
        ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1", "e")]
    assert breaks(record(field("a", "int"), field("e", enum, default="A")), record(field("a", "int"))) == []


def test_logical_types_do_not_change_compatibility() -> None:
    assert breaks(record(field("t", {"type": "long", "logicalType": "timestamp-micros"})),
                  record(field("t", "long"))) == []


def test_a_schema_of_another_type_is_one_break() -> None:
    class JsonSchema(ParsedSchema):  # the interface's other formats, reduced to their type
        schema_type = "JSON"

        def canonical_string(self) -> str:
            return "{}"

        def normalize(self) -> ParsedSchema:
            return self

        def backward_errors(self, previous: ParsedSchema) -> list[str]:
            return []

    assert parse('"int"').backward_errors(JsonSchema()) == ["the schema type changed from JSON to AVRO"]
    assert parse('"int"') != JsonSchema()


# --- recursion ----------------------------------------------------------------------------

LIST = {"type": "record", "name": "Node", "namespace": "ll", "fields": [
    field("value", "int"), field("next", ["null", "Node"], default=None)]}
TREE = {"type": "record", "name": "Tree", "fields": [
    field("children", {"type": "array", "items": "Tree"}), field("label", "string")]}


def test_recursive_records() -> None:
    s = parse(json.dumps(LIST))
    assert s.canonical_string() == ('{"type":"record","name":"Node","namespace":"ll","fields":[{"name":"value",'
                                    '"type":"int"},{"name":"next","type":["null","Node"],"default":null}]}')
    assert s.parsing_canonical_form() == to_parsing_canonical_form(fastavro.parse_schema(LIST))
    assert s.normalize().canonical_string() == s.parsing_canonical_form()[:-3] + ',"default":null}]}'
    assert s.backward_errors(s) == []
    datum = {"value": 1, "next": {"value": 2, "next": None}}
    assert roundtrip(s, s, datum) == datum
    tree = parse(json.dumps(TREE))
    assert tree.backward_errors(tree) == []
    assert roundtrip(tree, tree, {"children": [{"children": [], "label": "b"}], "label": "a"})["label"] == "a"


def test_recursive_records_compare_without_looping() -> None:
    grown = json.loads(json.dumps(LIST))
    grown["fields"].append(field("extra", "string"))
    assert breaks(json.dumps(grown), json.dumps(LIST)) == [
        ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/2", "extra")]  # once, not once per recursion
    grown["fields"][2]["default"] = ""
    assert breaks(json.dumps(grown), json.dumps(LIST)) == []
    assert breaks(json.dumps(LIST), json.dumps(grown)) == []
    promoted = json.loads(json.dumps(LIST))
    promoted["fields"][0]["type"] = "long"
    assert breaks(json.dumps(LIST), json.dumps(promoted)) == [
        ("TYPE_MISMATCH", "/fields/0/type", "reader type: INT not compatible with writer type: LONG")]
    mutual = {"type": "record", "name": "A", "fields": [field("b", ["null", {
        "type": "record", "name": "B", "fields": [field("a", ["null", "A"])]}])]}
    assert parse(json.dumps(mutual)).backward_errors(parse(json.dumps(mutual))) == []


# --- malformed input, fuzzed --------------------------------------------------------------

KEYS = st.sampled_from(["type", "name", "namespace", "fields", "symbols", "items", "values", "size", "default",
                        "doc", "aliases", "order", "logicalType", "precision", "scale", "x"])
WORDS = st.sampled_from(["record", "enum", "fixed", "array", "map", "error", "int", "long", "string", "null",
                         "bytes", "double", "boolean", "float", "R", "a.R", "E", "A", "", "1x", "decimal"])
LEAVES = st.one_of(WORDS, st.integers(-3, 2**40), st.none(), st.booleans(),
                   st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=4))
JSONISH = st.recursive(LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(KEYS, inner, max_size=6)), max_leaves=25)


@settings(max_examples=1500, deadline=None)
@given(JSONISH)
def test_fuzzed_json_is_a_schema_or_an_invalid_schema_error(obj) -> None:
    try:
        s = parse(json.dumps(obj))
    except InvalidSchemaError as e:
        assert str(e)
        return
    c = s.canonical_string()
    assert parse(c).canonical_string() == c
    assert parse(s.formatted("resolved")).canonical_string() == c
    assert s.backward_errors(s) == [] and s.normalize().normalize() == s.normalize()
    assert s.normalize().canonical_string() == parse(s.normalize().canonical_string()).normalize().canonical_string()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_fuzzed_text_is_a_schema_or_an_invalid_schema_error(text: str) -> None:
    try:
        parse(text)
    except InvalidSchemaError:
        pass
