"""JSON Schema parsing for the Schema Registry (broker/schema/json_schema.py): each draft
(with one invalid schema per draft, checked against its meta-schema), ``$schema``
spellings, boolean schemas, identity (whitespace and key order) and ``normalize``,
references across schemas (validation through the ``$ref``, URL and relative names,
missing and cyclic references), every bad-input case (all ``InvalidSchemaError``, also
under hypothesis), and ``validate``.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.schema import parse_schema
from broker.schema.base import InvalidSchemaError, ParsedSchema, SchemaReference
from broker.schema.json_schema import MAX_DEPTH, JsonSchema, parse

D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"


def schema(document: object, references: dict[str, object] | None = None) -> JsonSchema:
    refs = references or {}
    return parse(json.dumps(document), [SchemaReference(name, name.split(".")[0], 1) for name in refs],
                 {name: json.dumps(text) for name, text in refs.items()})


def invalid(text: str, references=(), resolved=None) -> str:
    with pytest.raises(InvalidSchemaError) as caught:
        parse(text, references, resolved or {})
    return str(caught.value)


# --- drafts ---

DRAFTS = [
    # (draft, schema using what the draft adds, a valid document, an invalid one)
    ("draft-04", {"$schema": D4, "id": "http://example.com/p.json", "type": "object",
                  "properties": {"n": {"type": "number", "maximum": 10, "exclusiveMaximum": True}}},
     {"n": 9.5}, {"n": 10}),
    ("draft-06", {"$schema": D6, "$id": "http://example.com/p.json", "propertyNames": {"maxLength": 3},
                  "properties": {"n": {"exclusiveMaximum": 10}, "c": {"const": "x"}}},
     {"n": 9, "c": "x"}, {"long_name": 1}),
    ("draft-07", {"$schema": D7, "if": {"properties": {"kind": {"const": "a"}}},
                  "then": {"required": ["a"]}, "else": {"required": ["b"]}},
     {"kind": "a", "a": 1}, {"kind": "a", "b": 1}),
    ("2019-09", {"$schema": D2019, "$defs": {"n": {"$anchor": "num", "type": "number"}},
                 "properties": {"n": {"$ref": "#num"}, "m": {"type": "integer"}}, "dependentRequired": {"n": ["m"]},
                 "unevaluatedProperties": False},
     {"n": 1.5, "m": 2}, {"n": 1}),
    ("2020-12", {"$schema": D2020, "type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
                 "items": False},
     ["a", 1], ["a", 1, 2]),
]


@pytest.mark.parametrize(("draft", "document", "valid", "not_valid"), DRAFTS, ids=[d[0] for d in DRAFTS])
def test_each_draft_parses_and_validates_with_its_own_rules(draft, document, valid, not_valid):
    parsed = schema(document)
    assert parsed.schema_type == "JSON" and parsed.draft.name == draft
    assert parsed.validate(valid) == []
    assert parsed.validate(not_valid) != []
    if draft == "2019-09":  # the anchor, dependentRequired and unevaluatedProperties are applied
        assert parsed.validate({"n": 1}) == ["$: 'm' is a dependency of 'n'"]
        assert parsed.validate({"n": "x", "m": 1}) == ["$.n: 'x' is not of type 'number'"]
        assert parsed.validate({"z": 1})[0].startswith("$: Unevaluated properties are not allowed")


INVALID_PER_DRAFT = [
    (D4, {"properties": {"a": True}}, "draft-04", "#/properties/a", "is not of type 'object'"),
    (D6, {"exclusiveMinimum": True}, "draft-06", "#/exclusiveMinimum", "is not of type 'number'"),
    (D7, {"if": 5}, "draft-07", "#/if", "is not of type"),
    (D2019, {"dependentRequired": {"a": "b"}}, "2019-09", "#/dependentRequired/a", "is not of type 'array'"),
    (D2020, {"prefixItems": {"type": "string"}}, "2020-12", "#/prefixItems", "is not of type 'array'"),
]


@pytest.mark.parametrize(("url", "document", "draft", "where", "why"), INVALID_PER_DRAFT,
                         ids=[d[2] for d in INVALID_PER_DRAFT])
def test_one_invalid_schema_per_draft_names_draft_and_pointer(url, document, draft, where, why):
    message = invalid(json.dumps({"$schema": url, **document}))
    assert f"({draft})" in message and f"at '{where}'" in message and why in message


def test_the_same_schema_is_valid_in_one_draft_and_not_in_another():
    # booleans as subschemas arrived in draft 6; a numeric exclusiveMaximum too
    schema({"$schema": D6, "properties": {"a": True}, "exclusiveMaximum": 3})
    assert "draft-04" in invalid(json.dumps({"$schema": D4, "exclusiveMaximum": 3}))


@pytest.mark.parametrize(("url", "draft"), [
    (None, "draft-07"), ("http://json-schema.org/draft-07/schema", "draft-07"),
    ("https://json-schema.org/draft-07/schema#", "draft-07"), ("http://json-schema.org/schema#", "draft-04"),
    ("https://json-schema.org/draft-04/schema", "draft-04"), ("http://json-schema.org/draft-06/schema", "draft-06"),
    ("https://json-schema.org/draft/2019-09/schema#", "2019-09"),
    ("http://json-schema.org/draft/2020-12/schema", "2020-12"),
    # unknown dialects and draft 3 are read as draft 7, as Confluent's registry does
    ("https://example.com/my-dialect", "draft-07"), ("http://json-schema.org/draft-03/schema#", "draft-07"),
])
def test_schema_keyword_spellings(url, draft):
    document = {"type": "string"} if url is None else {"$schema": url, "type": "string"}
    assert schema(document).draft.name == draft


def test_default_draft_is_7_and_checks_draft_7_rules():
    parsed = schema({"if": {"type": "string"}, "then": {"minLength": 2}})
    assert parsed.validate("a") and parsed.validate("ab") == [] and parsed.validate(5) == []


def test_boolean_schemas():
    anything, nothing = parse("true"), parse(" false ")
    assert anything.canonical_string() == "true" and nothing.canonical_string() == "false"
    assert anything.validate({"x": [1, None]}) == []
    assert nothing.validate(1) == ["$: False schema does not allow 1"]
    assert nothing.backward_errors(anything)  # everything to nothing
    assert anything.backward_errors(nothing) == []


def test_parse_schema_of_the_package_dispatches_json():
    parsed = parse_schema("JSON", '{"type": "string"}')
    assert isinstance(parsed, JsonSchema) and parsed.canonical_string() == '{"type":"string"}'


# --- identity and normalize ---

def test_whitespace_does_not_change_identity():
    a = parse('{"type": "object",\n  "properties": {"a": {"type": "string"}}}')
    b = parse('{"type":"object","properties":{"a":{"type":"string"}}}')
    assert a.canonical_string() == b.canonical_string() == '{"type":"object","properties":{"a":{"type":"string"}}}'
    assert a == b and hash(a) == hash(b) and a.identity() == ("JSON", a.canonical_string(), ())


def test_key_order_is_kept_by_the_canonical_string_and_sorted_by_normalize():
    a = parse('{"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}')
    b = parse('{"properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "type": "object"}')
    assert a != b  # as Confluent: key order is kept, so these are two schemas
    assert a.normalize() == b.normalize()
    assert a.normalize().canonical_string() == \
        '{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}'
    assert a.normalize().normalize() == a.normalize()


def test_normalize_sorts_inside_values_and_keeps_array_order():
    parsed = schema({"enum": [{"z": 1, "a": 2}, "b", "a"], "default": {"y": [3, 1], "x": None}, "required": ["b", "a"]})
    assert parsed.normalize().canonical_string() == \
        '{"default":{"x":null,"y":[3,1]},"enum":[{"a":2,"z":1},"b","a"],"required":["b","a"]}'


def test_normalize_sorts_and_deduplicates_references():
    refs = [SchemaReference("b.json", "b", 2), SchemaReference("a.json", "a", 1), SchemaReference("b.json", "b", 2)]
    text = '{"properties": {"a": {"$ref": "a.json"}, "b": {"$ref": "b.json"}}}'
    parsed = parse(text, refs, {"a.json": '{"type": "string"}', "b.json": '{"type": "integer"}'})
    assert parsed.references == tuple(refs)
    assert parsed.normalize().references == (refs[1], refs[0])
    assert parsed.normalize().validate({"a": "x", "b": "y"}) == ["$.b: 'y' is not of type 'integer'"]


def test_values_keep_their_json_form():
    parsed = parse('{"maximum": 1.0, "minimum": 1, "multipleOf": 1E2, "const": "caf\\u00e9 \\ud83d\\ude00"}')
    assert parsed.canonical_string() == '{"maximum":1.0,"minimum":1,"multipleOf":100.0,"const":"café 😀"}'


def test_references_are_part_of_identity():
    text = '{"$ref": "a.json"}'
    one = parse(text, [SchemaReference("a.json", "a", 1)], {"a.json": '{"type": "string"}'})
    two = parse(text, [SchemaReference("a.json", "a", 2)], {"a.json": '{"type": "string"}'})
    assert one.canonical_string() == two.canonical_string() and one != two


def test_document_is_a_copy():
    parsed = schema({"type": "object", "properties": {"a": {"type": "string"}}})
    parsed.document["properties"]["a"]["type"] = "integer"
    assert parsed.validate({"a": "x"}) == [] and parsed.document["properties"]["a"] == {"type": "string"}


# --- references ---

ADDRESS = {"$id": "https://example.com/schemas/address.schema.json", "type": "object",
           "properties": {"street": {"type": "string"}, "country": {"$ref": "country.json"}},
           "required": ["street"]}
COUNTRY = {"type": "string", "enum": ["FR", "DE"]}


def test_validation_goes_through_a_reference_to_another_schema():
    customer = schema({"type": "object", "properties": {"name": {"type": "string"},
                                                        "address": {"$ref": "address.schema.json"}}},
                      {"address.schema.json": ADDRESS, "country.json": COUNTRY})
    assert customer.validate({"name": "n", "address": {"street": "s", "country": "FR"}}) == []
    assert customer.validate({"name": "n", "address": {"country": "FR"}}) == \
        ["$.address: 'street' is a required property"]
    # address names country.json relative to its own $id: found by the name it ends with
    assert customer.validate({"address": {"street": "s", "country": "XX"}}) == \
        ["$.address.country: 'XX' is not one of ['FR', 'DE']"]


def test_a_reference_named_by_url_and_resolved_against_the_root_id():
    by_url = schema({"properties": {"a": {"$ref": "https://example.com/schemas/address.schema.json"}}},
                    {"https://example.com/schemas/address.schema.json": ADDRESS, "country.json": COUNTRY})
    assert by_url.validate({"a": {}}) == ["$.a: 'street' is a required property"]
    relative = schema({"$id": "https://example.com/schemas/customer.json",
                       "properties": {"a": {"$ref": "address.schema.json"}}},
                      {"address.schema.json": ADDRESS, "country.json": COUNTRY})
    assert relative.validate({"a": {"street": 1}}) == ["$.a.street: 1 is not of type 'string'"]
    dotted = schema({"properties": {"a": {"$ref": "./country.json"}}}, {"country.json": COUNTRY})
    assert dotted.validate({"a": "US"}) == ["$.a: 'US' is not one of ['FR', 'DE']"]


def test_a_reference_into_a_fragment_of_another_schema():
    defs = {"definitions": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}}
    parsed = schema({"properties": {"zip": {"$ref": "defs.json#/definitions/zip"}}}, {"defs.json": defs})
    assert parsed.validate({"zip": "75001"}) == [] and len(parsed.validate({"zip": "7500"})) == 1


def test_references_of_every_draft_mix():
    parsed = schema({"$schema": D2020, "properties": {"a": {"$ref": "old.json"}}},
                    {"old.json": {"$schema": D4, "type": "integer", "maximum": 3, "exclusiveMaximum": True}})
    assert parsed.validate({"a": 2}) == [] and parsed.validate({"a": 3}) != []


def test_a_ref_to_a_meta_schema_needs_no_network():
    parsed = schema({"properties": {"s": {"$ref": "http://json-schema.org/draft-07/schema#"}}})
    assert parsed.validate({"s": {"type": "string"}}) == [] and parsed.validate({"s": {"type": 5}}) != []


def test_internal_pointers_and_anchors_resolve():
    parsed = schema({"definitions": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/definitions/a"},
                                                                              "y": {"$ref": "#"}}})
    assert parsed.validate({"x": "s", "y": {"x": "t"}}) == [] and parsed.validate({"y": {"x": 1}}) != []


def test_a_missing_reference_is_named():
    message = invalid('{"properties": {"a": {"$ref": "address.json"}}}')
    assert "'address.json'" in message and "'#/properties/a'" in message and "does not resolve" in message
    assert "neither a referenced schema" in message
    assert "'#/definitions/nope'" in invalid('{"properties": {"a": {"$ref": "#/definitions/nope"}}}')
    assert "points to nothing" in invalid('{"$ref": "#/definitions/nope"}')
    assert "'#nope'" in invalid(json.dumps({"$schema": D2019, "$ref": "#nope"}))
    dangling = {"$schema": D2020, "items": {"$dynamicRef": "#meta"}}
    assert "The $dynamicRef '#meta' at '#/items'" in invalid(json.dumps(dangling))


def test_a_missing_reference_inside_a_referenced_schema_names_that_schema():
    message = invalid('{"$ref": "a.json"}', [SchemaReference("a.json", "a", 1)],
                      {"a.json": '{"properties": {"b": {"$ref": "b.json"}}}'})
    assert "'b.json'" in message and "the referenced schema 'a.json'" in message


def test_a_reference_without_its_resolved_text():
    message = invalid('{"$ref": "a.json"}', [SchemaReference("a.json", "a-value", 3)], {})
    assert "'a.json'" in message and "'a-value'" in message and "not resolved" in message


def test_references_that_refer_back_do_not_hang():
    a = {"type": "object", "properties": {"b": {"$ref": "b.json"}, "name": {"type": "string"}}}
    b = {"type": "object", "properties": {"a": {"$ref": "a.json"}, "n": {"type": "integer"}}}
    parsed = schema({"$ref": "a.json"}, {"a.json": a, "b.json": b})
    assert parsed.validate({"b": {"a": {"b": {"a": {"name": "x"}}}}}) == []
    assert parsed.validate({"b": {"a": {"b": {"n": "x"}}}}) == ["$.b.a.b.n: 'x' is not of type 'integer'"]
    assert parsed.backward_errors(parsed) == []


def test_dynamic_references_resolve():
    recursive = schema({"$schema": D2019, "$recursiveAnchor": True, "type": "object",
                        "properties": {"next": {"$recursiveRef": "#"}, "v": {"type": "integer"}}})
    assert recursive.validate({"next": {"next": {"v": 1}}}) == [] and recursive.validate({"next": {"v": "x"}}) != []
    dynamic = schema({"$schema": D2020, "$dynamicAnchor": "node", "type": "object",
                      "properties": {"next": {"$dynamicRef": "#node"}, "v": {"type": "integer"}}})
    assert dynamic.validate({"next": {"next": {"v": 1}}}) == [] and dynamic.validate({"next": {"v": "x"}}) != []


def test_recursive_schemas_are_fine():
    tree = schema({"type": "object", "properties": {"value": {"type": "integer"},
                                                    "children": {"type": "array", "items": {"$ref": "#"}}}})
    assert tree.validate({"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}) == []
    assert tree.validate({"children": [{"children": [{"value": "x"}]}]}) == \
        ["$.children[0].children[0].value: 'x' is not of type 'integer'"]


@pytest.mark.parametrize("document", [
    {"$ref": "#"},
    {"anyOf": [{"type": "string"}, {"$ref": "#"}]},
    {"definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"allOf": [{"$ref": "#/definitions/a"}]}},
     "properties": {"x": {"$ref": "#/definitions/a"}}},
    {"$schema": D2020, "$defs": {"a": {"not": {"$ref": "#/$defs/a"}}}, "items": {"$ref": "#/$defs/a"}},
    {"if": {"$ref": "#"}},
])
def test_a_cycle_that_never_reaches_a_value_is_refused(document):
    assert "validation would never end" in invalid(json.dumps(document))


def test_a_cycle_of_references_between_schemas_is_refused():
    message = invalid('{"$ref": "a.json"}', [SchemaReference("a.json", "a", 1), SchemaReference("b.json", "b", 1)],
                      {"a.json": '{"$ref": "b.json"}', "b.json": '{"$ref": "a.json"}'})
    assert "validation would never end" in message


def test_siblings_of_a_ref_are_not_applied_before_2019():
    # draft 7 ignores keywords beside $ref (so no cycle here); 2019-09 applies them
    schema({"definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"type": "string"}},
            "properties": {"x": {"$ref": "#/definitions/a", "allOf": [{"$ref": "#/properties/x"}]}}})
    parsed = schema({"$schema": D2019, "properties": {"x": {"$ref": "#/$defs/s", "maxLength": 2}},
                     "$defs": {"s": {"type": "string"}}})
    assert parsed.validate({"x": "abc"}) != [] and parsed.validate({"x": 1}) != []


# --- bad input ---

@pytest.mark.parametrize(("text", "why"), [
    ("", "Invalid JSON"), ("{", "Invalid JSON"), ('{"type": "string",}', "Invalid JSON"),
    ("{'type': 'string'}", "Invalid JSON"), ('{"type": "string"} x', "Extra data"), ("\ufeff{}", "Invalid JSON"),
    ('{"maximum": NaN}', "NaN is not a JSON number"), ('{"maximum": Infinity}', "Infinity is not a JSON number"),
    ('{"maximum": 1e999}', "out of range"), ('{"maximum": ' + "9" * 5000 + "}", "Exceeds the limit"),
    ('{"const": "\\ud800"}', "lone UTF-16 surrogate"),
    ("[]", "expected an object or a boolean at the root, found an array"),
    ('"string"', "found a string"), ("1", "found a number"), ("null", "found null"),
    ('{"type": "strin"}', "at '#/type'"), ('{"type": 5}', "at '#/type'"),
    ('{"minLength": -1}', "at '#/minLength'"), ('{"required": "a"}', "at '#/required'"),
    ('{"required": ["a", "a"]}', "non-unique"), ('{"pattern": "(("}', "is not a 'regex'"),
    ('{"properties": {"a": {"pattern": "[a-"}}}', "at '#/properties/a/pattern'"),
    ('{"properties": []}', "at '#/properties'"), ('{"enum": 5}', "at '#/enum'"),
    ('{"$schema": 5}', "at '#/$schema'"), ('{"$ref": 5}', "at '#/$ref'"),
    ('{"multipleOf": 0}', "at '#/multipleOf'"), ('{"items": [5]}', "at '#/items'"),
    ("[" * 5000 + "]" * 5000, "nested"), ('{"not":' * (MAX_DEPTH + 1) + "{}" + "}" * (MAX_DEPTH + 1), "nested"),
])
def test_bad_input_is_an_invalid_schema_error(text, why):
    assert why in invalid(text)


def test_bad_arguments_are_invalid_schema_errors():
    assert "not bytes" in invalid(b'{"type": "string"}')  # type: ignore[arg-type]
    assert "Invalid reference" in invalid("{}", ["a.json"])  # type: ignore[list-item]
    assert "the referenced schema 'a.json'" in invalid('{"$ref": "a.json"}', [SchemaReference("a.json", "a", 1)],
                                                       {"a.json": "{not json"})
    assert "found an array" in invalid('{"$ref": "a.json"}', [SchemaReference("a.json", "a", 1)], {"a.json": "[1]"})
    assert "in the referenced schema 'a.json' at '#/type'" in invalid(
        '{"$ref": "a.json"}', [SchemaReference("a.json", "a", 1)], {"a.json": '{"type": "text"}'})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["type", "properties", "items", "required", "$ref", "enum", "allOf", "not", "minimum",
                         "pattern", "additionalProperties", "$schema", "x"]) | st.text(max_size=3), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_any_json_value_parses_or_is_an_invalid_schema_error(value):
    try:
        parsed = parse(json.dumps(value))
    except InvalidSchemaError as e:
        assert str(e)
    else:
        assert isinstance(parsed, JsonSchema) and parsed.backward_errors(parsed) == []
        assert parsed.validate(value) is not None


VALID_TEXT = json.dumps({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3},
                                                          "b": {"$ref": "#/definitions/b"}},
                         "definitions": {"b": {"enum": [1, 2]}}, "required": ["a"]})


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_text_is_an_invalid_schema_error_or_a_schema(data):
    text = VALID_TEXT
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(text)))
        if data.draw(st.booleans()):
            text = text[:at] + data.draw(st.sampled_from(list('{}[]",:0\\ a#/$'))) + text[at:]
        else:
            text = text[:at] + text[at + 1:]
    try:
        parse(text)
    except InvalidSchemaError as e:
        assert str(e)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_any_text_parses_or_is_an_invalid_schema_error(text):
    try:
        parse(text)
    except InvalidSchemaError:
        pass


# --- validate ---

PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "minLength": 1}, "age": {"type": "integer", "minimum": 0},
    "email": {"type": "string", "format": "email"}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name"], "additionalProperties": False}


def test_validate_lists_every_error_with_its_path():
    parsed = schema(PERSON)
    assert parsed.validate({"name": "a", "age": 3, "tags": ["x"]}) == []
    errors = parsed.validate({"age": -1, "tags": ["x", 2], "extra": True})
    assert sorted(errors) == sorted([
        "$: 'name' is a required property",
        "$: Additional properties are not allowed ('extra' was unexpected)",
        "$.age: -1 is less than the minimum of 0",
        "$.tags[1]: 2 is not of type 'string'",
    ])
    assert parsed.validate("not an object") == ["$: 'not an object' is not of type 'object'"]


def test_validate_checks_formats():
    parsed = schema(PERSON)
    assert parsed.validate({"name": "a", "email": "a@example.com"}) == []
    assert parsed.validate({"name": "a", "email": "nope"}) == ["$.email: 'nope' is not a 'email'"]
    dates = schema({"type": "string", "format": "date"})
    assert dates.validate("2024-02-29") == [] and dates.validate("2024-02-30") != []


def test_validate_reports_a_document_too_deep_for_a_recursive_schema():
    nested: object = 1
    for _ in range(3000):
        nested = [nested]
    errors = schema({"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#"}}]}).validate(nested)
    assert errors == ["$: the document is nested too deeply to validate"]


def test_validator_is_a_jsonschema_validator_with_references():
    parsed = schema({"properties": {"c": {"$ref": "country.json"}}}, {"country.json": COUNTRY})
    validator = parsed.validator()
    assert validator.is_valid({"c": "FR"}) and not validator.is_valid({"c": "US"})
    assert type(validator).__name__ == "Draft7Validator"


def test_a_parsed_schema_is_shared_between_threads():
    from concurrent.futures import ThreadPoolExecutor

    customer = schema(PERSON)
    older = schema({"type": "object", "properties": {"name": {"type": "string"}}})
    documents = [{"name": "a", "age": i} if i % 2 else {"age": "x"} for i in range(200)]
    expected = [customer.validate(d) for d in documents]
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(customer.validate, documents)) == expected
        assert set(map(tuple, pool.map(customer.backward_errors, [older] * 50))) == \
            {tuple(customer.backward_errors(older))}


class OtherFormat(ParsedSchema):
    """A schema of another type, for the type check."""

    schema_type = "AVRO"

    def canonical_string(self) -> str:
        return '"string"'

    def normalize(self) -> ParsedSchema:
        return self

    def backward_errors(self, previous: ParsedSchema) -> list[str]:
        return []


def test_a_previous_schema_of_another_type_is_one_break():
    assert schema({"type": "string"}).backward_errors(OtherFormat()) == \
        ["the schema type changed from AVRO to JSON"]
