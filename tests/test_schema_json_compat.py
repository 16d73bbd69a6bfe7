"""JSON Schema compatibility (broker/schema/json_schema_compat.py), Confluent's rules: each
rule checked both ways (old -> new, then new -> old), asserting the difference type and the
JSON path of every break; ``$ref``s followed (within a schema, across referenced schemas,
recursive ones); the message format; and a hypothesis property: when generated object
schemas are judged compatible, every document generated valid for the old schema
validates against the new one.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.schema.base import SchemaReference
from broker.schema.json_schema import JsonSchema, parse
from broker.schema.json_schema_compat import COMPATIBLE, Difference, differences

D4 = "http://json-schema.org/draft-04/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"
MESSAGE = re.compile(r"^\{errorType:'([A-Z_]+)', description:'(.*)'\}$")


def schema(document: object, references: dict[str, object] | None = None) -> JsonSchema:
    refs = references or {}
    return parse(json.dumps(document), [SchemaReference(name, name.split(".")[0], 1) for name in refs],
                 {name: json.dumps(text) for name, text in refs.items()})


def breaks(old: object, new: object, old_refs=None, new_refs=None) -> list[tuple[str, str]]:
    """(errorType, path) of each message of reading data written with ``old`` using ``new``."""
    found = []
    for message in schema(new, new_refs).backward_errors(schema(old, old_refs)):
        match = MESSAGE.match(message)
        assert match and "The schemas differ" not in message and "{" not in match.group(2), message
        path = re.search(r"path '([^']*)'", match.group(2))
        found.append((match.group(1), path.group(1) if path else ""))
    return found


def obj(properties: dict, required=(), **more) -> dict:
    return {"type": "object", "properties": properties, **({"required": list(required)} if required else {}), **more}


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}
CLOSED = {"additionalProperties": False}

# (name, old, new, breaks old -> new, breaks new -> old)
RULES = [
    # properties and content models
    ("property added to an open content model", obj({"a": STR}), obj({"a": STR, "b": INT}),
     [("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "#/properties/b")], []),
    ("property with an empty schema added to an open model", obj({"a": STR}), obj({"a": STR, "b": {}}), [], []),
    ("optional property added to a closed content model", obj({"a": STR}, **CLOSED),
     obj({"a": STR, "b": INT}, **CLOSED), [], [("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/properties/b")]),
    ("required property added to a closed content model", obj({"a": STR}, **CLOSED),
     obj({"a": STR, "b": INT}, ["b"], **CLOSED),
     [("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "#/properties/b")],
     [("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/properties/b")]),
    ("required property with a default added to a closed model", obj({"a": STR}, **CLOSED),
     obj({"a": STR, "b": {"type": "integer", "default": 0}}, ["b"], **CLOSED),
     [], [("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/properties/b")]),
    ("property with false removed from a closed model", obj({"a": STR, "b": False}, **CLOSED),
     obj({"a": STR}, **CLOSED), [], []),
    ("property covered by a partially open model", obj({"a": STR}, additionalProperties=STR),
     obj({"a": STR, "b": STR}, additionalProperties=STR), [], []),
    ("property not covered by a partially open model", obj({"a": STR}, additionalProperties=STR),
     obj({"a": STR, "b": INT}, additionalProperties=STR),
     [("TYPE_CHANGED", "#/properties/b"),
      ("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/properties/b")],
     [("TYPE_CHANGED", "#/properties/b"),
      ("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/properties/b")]),
    ("property covered by patternProperties", obj({"a": STR}, patternProperties={"^x_": INT}, **CLOSED),
     obj({"a": STR, "x_b": INT}, patternProperties={"^x_": INT}, **CLOSED), [], []),
    ("additionalProperties false added", obj({"a": STR}), obj({"a": STR}, **CLOSED),
     [("ADDITIONAL_PROPERTIES_REMOVED", "#/additionalProperties")], []),
    ("additionalProperties narrowed by a schema", obj({"a": STR}), obj({"a": STR}, additionalProperties=STR),
     [("ADDITIONAL_PROPERTIES_NARROWED", "#/additionalProperties")], []),
    ("additionalProperties schema changed", obj({}, additionalProperties=STR), obj({}, additionalProperties=INT),
     [("TYPE_CHANGED", "#/additionalProperties")], [("TYPE_CHANGED", "#/additionalProperties")]),
    ("required property added", obj({"a": STR}), obj({"a": STR}, ["a"]),
     [("REQUIRED_ATTRIBUTE_ADDED", "#/required/a")], []),
    ("required property with a default added", obj({"a": STR}), obj({"a": {"type": "string", "default": ""}}, ["a"]),
     [], []),
    ("maxProperties", obj({}, maxProperties=5), obj({}, maxProperties=3),
     [("MAX_PROPERTIES_DECREASED", "#/maxProperties")], []),
    ("minProperties added", obj({}), obj({}, minProperties=1), [("MIN_PROPERTIES_ADDED", "#/minProperties")], []),
    ("dependency array extended", obj({}, dependencies={"a": ["b"]}), obj({}, dependencies={"a": ["b", "c"]}),
     [("DEPENDENCY_ARRAY_EXTENDED", "#/dependencies/a")], []),
    ("dependency schema added", obj({}), obj({}, dependencies={"a": {"required": ["b"]}}),
     [("DEPENDENCY_SCHEMA_ADDED", "#/dependencies/a")], []),
    # types
    ("type changed", obj({"a": STR}), obj({"a": INT}), [("TYPE_CHANGED", "#/properties/a")],
     [("TYPE_CHANGED", "#/properties/a")]),
    ("integer extended to number", obj({"a": INT}), obj({"a": NUM}), [], [("TYPE_NARROWED", "#/properties/a")]),
    ("type extended with null", obj({"a": STR}), obj({"a": {"type": ["string", "null"]}}), [],
     [("TYPE_CHANGED", "#/properties/a")]),
    ("type array extended", {"type": ["string", "integer"]}, {"type": ["string", "integer", "null"]}, [],
     [("SUM_TYPE_NARROWED", "#/")]),
    ("anything to empty schema", obj({"a": STR}), {}, [], [("TYPE_CHANGED", "#/")]),
    ("true to false", True, False, [("TYPE_CHANGED", "#/")], []),
    # enums and const
    ("enum value added", {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, [], [("ENUM_ARRAY_NARROWED", "#/enum")]),
    ("enum values changed", {"enum": ["a", "b"]}, {"enum": ["a", "c"]}, [("ENUM_ARRAY_CHANGED", "#/enum")],
     [("ENUM_ARRAY_CHANGED", "#/enum")]),
    ("enum of numbers, 1 and 1.0 are one value", {"enum": [1, 2]}, {"enum": [2.0, 1.0]}, [], []),
    ("enum true is not 1", {"enum": [True]}, {"enum": [1]}, [("ENUM_ARRAY_CHANGED", "#/enum")],
     [("ENUM_ARRAY_CHANGED", "#/enum")]),
    ("typed enum value added", {"type": "string", "enum": ["a"]}, {"type": "string", "enum": ["a", "b"]}, [],
     [("COMBINED_TYPE_SUBSCHEMAS_CHANGED", "#/")]),
    ("enum removed", {"type": "string", "enum": ["a"]}, STR, [], [("TYPE_CHANGED", "#/")]),
    ("const changed", {"const": "a"}, {"const": "b"}, [("ENUM_ARRAY_CHANGED", "#/const")],
     [("ENUM_ARRAY_CHANGED", "#/const")]),
    # strings
    ("maxLength added", STR, {"type": "string", "maxLength": 5}, [("MAX_LENGTH_ADDED", "#/maxLength")], []),
    ("maxLength decreased", {"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 3},
     [("MAX_LENGTH_DECREASED", "#/maxLength")], []),
    ("minLength added", STR, {"type": "string", "minLength": 1}, [("MIN_LENGTH_ADDED", "#/minLength")], []),
    ("minLength increased", {"type": "string", "minLength": 1}, {"type": "string", "minLength": 2},
     [("MIN_LENGTH_INCREASED", "#/minLength")], []),
    ("pattern added", STR, {"type": "string", "pattern": "^a"}, [("PATTERN_ADDED", "#/pattern")], []),
    ("pattern changed", {"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"},
     [("PATTERN_CHANGED", "#/pattern")], [("PATTERN_CHANGED", "#/pattern")]),
    # numbers
    ("maximum added", NUM, {"type": "number", "maximum": 5}, [("MAXIMUM_ADDED", "#/maximum")], []),
    ("maximum decreased", {"type": "number", "maximum": 5}, {"type": "number", "maximum": 4.5},
     [("MAXIMUM_DECREASED", "#/maximum")], []),
    ("minimum added", NUM, {"type": "number", "minimum": 0}, [("MINIMUM_ADDED", "#/minimum")], []),
    ("minimum increased", {"type": "integer", "minimum": 0}, {"type": "integer", "minimum": 1},
     [("MINIMUM_INCREASED", "#/minimum")], []),
    ("exclusiveMaximum decreased", {"type": "number", "exclusiveMaximum": 5}, {"type": "number", "exclusiveMaximum": 4},
     [("EXCLUSIVE_MAXIMUM_DECREASED", "#/exclusiveMaximum")], []),
    ("exclusiveMinimum added", NUM, {"type": "number", "exclusiveMinimum": 0},
     [("EXCLUSIVE_MINIMUM_ADDED", "#/exclusiveMinimum")], []),
    # draft 4's boolean makes the maximum exclusive; as for draft 6's keywords, the two limits
    # are compared one by one (so an exclusive maximum becoming an inclusive one is a break)
    ("draft 4 exclusive maximum", {"$schema": D4, "type": "number", "maximum": 5},
     {"$schema": D4, "type": "number", "maximum": 5, "exclusiveMaximum": True},
     [("EXCLUSIVE_MAXIMUM_ADDED", "#/exclusiveMaximum")], [("MAXIMUM_ADDED", "#/maximum")]),
    ("multipleOf expanded", {"type": "number", "multipleOf": 0.5}, {"type": "number", "multipleOf": 10},
     [("MULTIPLE_OF_EXPANDED", "#/multipleOf")], []),
    ("multipleOf changed", {"type": "integer", "multipleOf": 4}, {"type": "integer", "multipleOf": 6},
     [("MULTIPLE_OF_CHANGED", "#/multipleOf")], [("MULTIPLE_OF_CHANGED", "#/multipleOf")]),
    ("multipleOf same value, another spelling", {"multipleOf": 0.5}, {"multipleOf": 0.50}, [], []),
    # arrays
    ("item type changed", {"type": "array", "items": STR}, {"type": "array", "items": INT},
     [("TYPE_CHANGED", "#/items")], [("TYPE_CHANGED", "#/items")]),
    ("items added", {"type": "array"}, {"type": "array", "items": STR}, [("SCHEMA_ADDED", "#/items")], []),
    ("item types extended", {"type": "array", "items": INT}, {"type": "array", "items": {"anyOf": [INT, STR]}}, [],
     [("TYPE_CHANGED", "#/items")]),
    ("tuple item added to an open array", {"type": "array", "items": [STR]}, {"type": "array", "items": [STR, INT]},
     [("ITEM_ADDED_TO_OPEN_CONTENT_MODEL", "#/items/1")], []),
    ("tuple item added to a closed array", {"type": "array", "items": [STR], "additionalItems": False},
     {"type": "array", "items": [STR, INT], "additionalItems": False},
     [], [("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/items/1")]),
    ("tuple item not covered by additionalItems", {"type": "array", "items": [STR], "additionalItems": STR},
     {"type": "array", "items": [STR, INT], "additionalItems": STR},
     [("TYPE_CHANGED", "#/items/1"), ("ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/items/1")],
     [("TYPE_CHANGED", "#/items/1"), ("ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/items/1")]),
    ("additionalItems false added", {"type": "array", "items": [STR]},
     {"type": "array", "items": [STR], "additionalItems": False},
     [("ADDITIONAL_ITEMS_REMOVED", "#/additionalItems")], []),
    ("2020-12 prefixItems item added to a closed array",
     {"$schema": D2020, "type": "array", "prefixItems": [STR], "items": False},
     {"$schema": D2020, "type": "array", "prefixItems": [STR, INT], "items": False},
     [], [("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/items/1")]),
    ("maxItems decreased", {"type": "array", "maxItems": 3}, {"type": "array", "maxItems": 2},
     [("MAX_ITEMS_DECREASED", "#/maxItems")], []),
    ("minItems added", {"type": "array"}, {"type": "array", "minItems": 1}, [("MIN_ITEMS_ADDED", "#/minItems")], []),
    ("uniqueItems added", {"type": "array"}, {"type": "array", "uniqueItems": True},
     [("UNIQUE_ITEMS_ADDED", "#/uniqueItems")], []),
    ("2019-09 maxContains", {"$schema": D2019, "type": "array", "contains": STR, "maxContains": 3},
     {"$schema": D2019, "type": "array", "contains": STR, "maxContains": 2},
     [("MAX_CONTAINS_DECREASED", "#/maxContains")], []),
    # combined schemas
    ("oneOf branch added", {"oneOf": [STR, INT]}, {"oneOf": [STR, INT, {"type": "null"}]}, [],
     [("SUM_TYPE_NARROWED", "#/")]),
    ("anyOf branch changed", {"anyOf": [STR, INT]}, {"anyOf": [STR, {"type": "boolean"}]},
     [("COMBINED_TYPE_SUBSCHEMAS_CHANGED", "#/")], [("COMBINED_TYPE_SUBSCHEMAS_CHANGED", "#/")]),
    ("anyOf branch narrowed inside", {"anyOf": [STR, {"type": "integer", "maximum": 5}]},
     {"anyOf": [STR, {"type": "integer", "maximum": 3}]},
     [("COMBINED_TYPE_SUBSCHEMAS_CHANGED", "#/")], []),
    ("oneOf to anyOf", {"oneOf": [STR, INT]}, {"anyOf": [STR, INT]}, [], [("COMBINED_TYPE_CHANGED", "#/")]),
    ("allOf branch added", {"allOf": [obj({"a": STR})]}, {"allOf": [obj({"a": STR}), {"required": ["a"]}]},
     [("PRODUCT_TYPE_EXTENDED", "#/")], []),
    ("schema to a oneOf holding it", obj({"a": STR}), {"oneOf": [obj({"a": STR}), INT]}, [], [("TYPE_CHANGED", "#/")]),
    ("duplicates collapse", {"anyOf": [STR, STR, INT]}, {"anyOf": [INT, STR]}, [], []),
    ("not narrowed", {"not": {"type": ["string", "integer"]}}, {"not": STR}, [], [("NOT_TYPE_EXTENDED", "#/not")]),
    # titles, descriptions and defaults may change
    ("annotations", {"type": "string", "title": "a", "description": "x", "default": "d", "$id": "urn:a"},
     {"type": "string", "title": "b", "description": "y", "default": "e", "$id": "urn:b"}, [], []),
    ("Kafka Connect decimals", {"type": "string", "connect.type": "bytes"}, {"type": "number", "connect.type": "bytes"},
     [], []),
    # $refs followed
    ("change behind a $ref", {"definitions": {"a": STR}, "properties": {"x": {"$ref": "#/definitions/a"}}},
     {"definitions": {"a": INT}, "properties": {"x": {"$ref": "#/definitions/a"}}},
     [("TYPE_CHANGED", "#/properties/x")], [("TYPE_CHANGED", "#/properties/x")]),
    ("inline to $ref and back", {"properties": {"x": {"type": "string", "maxLength": 3}}},
     {"definitions": {"a": {"type": "string", "maxLength": 3}}, "properties": {"x": {"$ref": "#/definitions/a"}}},
     [], []),
]


@pytest.mark.parametrize(("name", "old", "new", "forward", "backward"), RULES, ids=[r[0] for r in RULES])
def test_rule_both_ways(name, old, new, forward, backward):
    assert breaks(old, new) == forward
    assert breaks(new, old) == backward


def test_identical_schemas_are_compatible():
    for _, old, new, _, _ in RULES:
        assert breaks(old, old) == [] and breaks(new, new) == []


def test_an_unmatched_subschema_is_named():
    [message] = schema({"anyOf": [STR, {"type": "boolean"}]}).backward_errors(schema({"anyOf": [STR, INT]}))
    assert "at path '#/' are not all matched by compatible ones: no match for anyOf/1 of the old schema" in message


def test_message_names_the_type_and_path_and_reads_as_a_sentence():
    old, new = schema(obj({"x": STR})), schema(obj({"x": STR}, ["x"]))
    assert new.backward_errors(old) == ["{errorType:'REQUIRED_ATTRIBUTE_ADDED', description:'The new schema has a "
                                        "required property 'x' at path '#/required/x' that the old schema does not "
                                        "have'}"]
    [message] = schema({"type": "string", "maxLength": 3}).backward_errors(schema({"type": "string", "maxLength": 8}))
    assert message == ("{errorType:'MAX_LENGTH_DECREASED', description:'The value at path '#/maxLength' is 3 in the "
                       "new schema, less than 8 in the old schema'}")
    [message] = schema(obj({"a": INT})).backward_errors(schema(obj({"a": STR})))
    assert "'#/properties/a' is integer in the new schema but string in the old schema" in message


def test_every_break_is_reported_once():
    old = obj({"a": STR, "b": {"type": "integer", "maximum": 9}, "c": {"enum": [1, 2]}})
    new = obj({"a": INT, "b": {"type": "integer", "maximum": 5}, "c": {"enum": [1]}, "d": STR}, ["a"], **CLOSED)
    assert sorted(breaks(old, new)) == sorted([
        ("REQUIRED_ATTRIBUTE_ADDED", "#/required/a"), ("TYPE_CHANGED", "#/properties/a"),
        ("MAXIMUM_DECREASED", "#/properties/b/maximum"), ("ENUM_ARRAY_NARROWED", "#/properties/c/enum"),
        ("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "#/properties/d"),
        ("ADDITIONAL_PROPERTIES_REMOVED", "#/additionalProperties")])


def test_full_compatibility_is_both_directions():
    old, new = schema(obj({"a": STR})), schema(obj({"a": STR, "b": {}}))
    assert new.backward_errors(old) == [] and old.backward_errors(new) == []
    narrower = schema(obj({"a": {"type": "string", "maxLength": 2}}))
    assert narrower.backward_errors(old) and old.backward_errors(narrower) == []


def test_differences_include_the_compatible_ones():
    found = differences(schema(obj({"a": INT}, title="t")).model(), schema(obj({"a": NUM}, title="u")).model())
    assert [(d.type, d.json_path, d.compatible) for d in found] == [
        ("TITLE_CHANGED", "#/", True), ("TYPE_EXTENDED", "#/properties/a", True)]
    assert "TYPE_EXTENDED" in COMPATIBLE and "TYPE_NARROWED" not in COMPATIBLE


LIMITS = ["MAX_LENGTH", "MIN_LENGTH", "MAXIMUM", "MINIMUM", "EXCLUSIVE_MAXIMUM", "EXCLUSIVE_MINIMUM", "MAX_PROPERTIES",
          "MIN_PROPERTIES", "MAX_ITEMS", "MIN_ITEMS", "MAX_CONTAINS", "MIN_CONTAINS"]
INCOMPATIBLE = [
    "TYPE_CHANGED", "TYPE_NARROWED", "SCHEMA_ADDED", *(f"{k}_ADDED" for k in LIMITS), "PATTERN_ADDED",
    "MULTIPLE_OF_ADDED", *(f"{k}_DECREASED" for k in LIMITS if k.startswith(("MAX", "EXCLUSIVE_MAX"))),
    *(f"{k}_INCREASED" for k in LIMITS if k.startswith(("MIN", "EXCLUSIVE_MIN"))), "PATTERN_CHANGED",
    "MULTIPLE_OF_EXPANDED", "MULTIPLE_OF_CHANGED", "REQUIRED_ATTRIBUTE_ADDED", "DEPENDENCY_ARRAY_ADDED",
    "DEPENDENCY_ARRAY_EXTENDED", "DEPENDENCY_ARRAY_CHANGED", "DEPENDENCY_SCHEMA_ADDED", "ADDITIONAL_PROPERTIES_REMOVED",
    "ADDITIONAL_PROPERTIES_NARROWED", "UNEVALUATED_PROPERTIES_REMOVED", "UNEVALUATED_PROPERTIES_NARROWED",
    "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "UNIQUE_ITEMS_ADDED", "ADDITIONAL_ITEMS_REMOVED",
    "ADDITIONAL_ITEMS_NARROWED", "UNEVALUATED_ITEMS_REMOVED", "UNEVALUATED_ITEMS_NARROWED",
    "ITEM_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ENUM_ARRAY_NARROWED", "ENUM_ARRAY_CHANGED", "COMBINED_TYPE_CHANGED", "PRODUCT_TYPE_EXTENDED", "SUM_TYPE_NARROWED",
    "COMBINED_TYPE_SUBSCHEMAS_CHANGED", "NOT_TYPE_EXTENDED",
]


@pytest.mark.parametrize("kind", INCOMPATIBLE)
def test_every_incompatible_type_has_its_own_message(kind):
    difference = Difference(kind, ("properties", "x"), 1, 2)
    assert not difference.compatible
    match = MESSAGE.match(difference.message())
    assert match and match.group(1) == kind and "#/properties/x" in match.group(2)
    assert "The schemas differ" not in match.group(2) and "{" not in match.group(2)


# --- references across schemas, recursion ---

ADDRESS = obj({"street": STR, "zip": STR}, ["street"])


def test_a_change_in_a_referenced_schema_is_seen_through_the_ref():
    customer = obj({"name": STR, "address": {"$ref": "address.json"}})
    stricter = dict(ADDRESS, required=["street", "zip"])
    assert breaks(customer, customer, {"address.json": ADDRESS}, {"address.json": stricter}) == \
        [("REQUIRED_ATTRIBUTE_ADDED", "#/properties/address/required/zip")]
    assert breaks(customer, customer, {"address.json": stricter}, {"address.json": ADDRESS}) == []


def test_moving_a_definition_to_another_subject_is_compatible():
    inline = obj({"address": ADDRESS})
    referenced = obj({"address": {"$ref": "https://example.com/address.json"}})
    assert breaks(inline, referenced, None, {"https://example.com/address.json": ADDRESS}) == []


def test_references_that_refer_back_are_compared():
    a = obj({"b": {"$ref": "b.json"}, "n": INT})
    b = obj({"a": {"$ref": "a.json"}})
    changed = obj({"b": {"$ref": "b.json"}, "n": STR})
    assert breaks({"$ref": "a.json"}, {"$ref": "a.json"}, {"a.json": a, "b.json": b}, {"a.json": a, "b.json": b}) == []
    # the change is seen at the top, and again where a.json comes back through b.json
    assert breaks({"$ref": "a.json"}, {"$ref": "a.json"}, {"a.json": a, "b.json": b},
                  {"a.json": changed, "b.json": b}) == [("TYPE_CHANGED", "#/properties/b/properties/a/properties/n"),
                                                        ("TYPE_CHANGED", "#/properties/n")]


TREE = {"type": "object", "properties": {"value": INT, "children": {"type": "array", "items": {"$ref": "#"}}}}


def test_recursive_schemas():
    assert breaks(TREE, TREE) == []
    wider = json.loads(json.dumps(TREE).replace('"integer"', '"number"'))
    assert breaks(TREE, wider) == []
    assert breaks(wider, TREE) == [("TYPE_NARROWED", "#/properties/value"),
                                   ("TYPE_NARROWED", "#/properties/children/items/properties/value")]
    # the recursion itself becomes different: children's items are now only numbers
    flat = {"type": "object", "properties": {"value": INT, "children": {"type": "array", "items": NUM}}}
    assert breaks(TREE, flat) == [("TYPE_CHANGED", "#/properties/children/items")]


def test_dynamic_references_are_followed():
    def linked(value: dict) -> dict:
        return {"$schema": D2020, "$dynamicAnchor": "node", "type": "object",
                "properties": {"next": {"$dynamicRef": "#node"}, "v": value}}

    assert breaks(linked(INT), linked(NUM)) == []
    assert sorted(breaks(linked(NUM), linked(INT))) == [("TYPE_NARROWED", "#/properties/next/properties/v"),
                                                        ("TYPE_NARROWED", "#/properties/v")]


def trade(id_type: str = "string") -> dict:
    """Twelve definitions, each with two oneOfs of all twelve: a pathological union."""
    names = ["Asset", "Basket", "Swap", "Bond", "Option", "Future", "Forward", "Loan", "Repo", "Equity", "Index", "Leg"]

    def union():
        return {"oneOf": [{"$ref": f"#/definitions/{n}"} for n in names]}

    definitions = {n: obj({"id": STR, "underlying": union(), "reference": union()}) for n in names}
    definitions["Asset"]["properties"]["id"] = {"type": id_type}
    return obj({"tradeId": STR, "product": union()}, definitions=definitions)


def test_recursive_unions_are_compared_quickly():
    started = time.monotonic()
    assert breaks(trade(), trade()) == []
    assert ("COMBINED_TYPE_SUBSCHEMAS_CHANGED", "#/properties/product") in breaks(trade(), trade("number"))
    assert time.monotonic() - started < 10


def test_an_incompatibility_behind_a_recursive_union_is_not_masked():
    # T0 -> T2 -> T0 is a cycle through singleton oneOfs; the root is oneOf[T0, T1]
    def recursive(id_type, target):
        return obj({"id": {"type": id_type}, "ref": {"oneOf": [{"$ref": f"#/definitions/{target}"}]}})

    def document(t0, t1):
        return obj({"root": {"oneOf": [{"$ref": "#/definitions/T0"}, {"$ref": "#/definitions/T1"}]}},
                   definitions={"T0": recursive(t0, "T2"), "T1": recursive(t1, "T2"), "T2": recursive("integer", "T0")})

    assert breaks(document("integer", "boolean"), document("boolean", "number"))
    assert breaks(document("integer", "boolean"), document("integer", "boolean")) == []


def test_deeply_nested_schemas_compare_without_recursion_errors():
    old: dict = STR
    for _ in range(31):
        old = obj({"a": old})
    new = json.loads(json.dumps(old).replace('"string"', '"integer"'))
    [(kind, path)] = breaks(old, new)
    assert kind == "TYPE_CHANGED" and path == "#" + "/properties/a" * 31


# --- the property: compatible means every old document is a new document ---

NAMES = ["a", "b", "c", "d", "e"]
json_leaf = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3)
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=2) |
                          st.dictionaries(st.sampled_from(NAMES), inner, max_size=2), max_leaves=4)


@st.composite
def leaf_schemas(draw) -> dict:
    kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "null", "enum"]))
    if kind == "string":
        out: dict = {"type": "string"}
        low = draw(st.none() | st.integers(0, 3))
        high = draw(st.none() | st.integers(low or 0, 6))
        out.update({k: v for k, v in (("minLength", low), ("maxLength", high)) if v is not None})
        return out
    if kind in ("integer", "number"):
        out = {"type": kind}
        low = draw(st.none() | st.integers(-10, 5))
        high = draw(st.none() | st.integers(low if low is not None else -10, 10))
        out.update({k: v for k, v in (("minimum", low), ("maximum", high)) if v is not None})
        step = draw(st.sampled_from([2, 3, 4]))
        if kind == "integer" and draw(st.booleans()) and _multiples(low, high, step):
            out["multipleOf"] = step
        return out
    if kind == "enum":
        return {"type": "string", "enum": draw(st.lists(st.sampled_from(["x", "y", "z"]), min_size=1, unique=True))}
    return {"type": kind}


def object_schemas(depth: int = 1):
    def build(draw) -> dict:
        names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4))
        properties = {n: draw(property_schemas(depth)) for n in names}
        out: dict = {"type": "object", "properties": properties}
        required = [n for n in names if draw(st.booleans())]
        if required:
            out["required"] = required
        additional = draw(st.sampled_from(["open", "closed", "schema"]))
        if additional == "closed":
            out["additionalProperties"] = False
        elif additional == "schema":
            out["additionalProperties"] = draw(leaf_schemas())
        return out
    return st.composite(build)()


def property_schemas(depth: int):
    options = [leaf_schemas(), leaf_schemas().map(lambda s: {"anyOf": [s, {"type": "null"}]})]
    if depth > 0:
        options.append(object_schemas(depth - 1))
        options.append(leaf_schemas().map(lambda s: {"type": "array", "items": s}))
    return st.one_of(options)


@st.composite
def mutated(draw, old: dict, depth: int = 1) -> dict:
    """The old object schema after a few random edits, compatible or not."""
    new = json.loads(json.dumps(old))
    for _ in range(draw(st.integers(1, 3))):
        properties = new["properties"]
        edit = draw(st.sampled_from(["add", "remove", "require", "unrequire", "retype", "widen", "narrow",
                                     "additional", "nested"]))
        names = list(properties)
        if edit == "add":
            name = draw(st.sampled_from(NAMES))
            properties[name] = draw(property_schemas(depth))
        elif edit == "remove" and names:
            name = draw(st.sampled_from(names))
            del properties[name]
            if name in new.get("required", []):
                new["required"].remove(name)
        elif edit == "require" and names:
            new["required"] = list(dict.fromkeys(new.get("required", []) + [draw(st.sampled_from(names))]))
        elif edit == "unrequire" and new.get("required"):
            new["required"].remove(draw(st.sampled_from(new["required"])))
        elif edit == "retype" and names:
            properties[draw(st.sampled_from(names))] = draw(property_schemas(depth))
        elif edit in ("widen", "narrow") and names:
            prop = properties[draw(st.sampled_from(names))]
            target = prop["anyOf"][0] if "anyOf" in prop else prop
            widen = edit == "widen"
            for keyword in ("minLength", "maxLength", "minimum", "maximum", "multipleOf"):
                if keyword in target and draw(st.booleans()):
                    if widen and draw(st.booleans()):
                        del target[keyword]
                    else:
                        step = -1 if (keyword.startswith("min")) == widen else 1
                        target[keyword] = max(1 if keyword == "multipleOf" else 0, target[keyword] + step)
            if "enum" in target:
                if widen:
                    target["enum"] = list(dict.fromkeys(target["enum"] + [draw(st.sampled_from(["x", "y", "w"]))]))
                elif len(target["enum"]) > 1:
                    target["enum"] = target["enum"][1:]
            if target.get("type") in ("integer", "number"):
                target["type"] = "number" if widen else "integer"
        elif edit == "additional":
            choice = draw(st.sampled_from(["open", "closed", "schema"]))
            new.pop("additionalProperties", None)
            if choice == "closed":
                new["additionalProperties"] = False
            elif choice == "schema":
                new["additionalProperties"] = draw(leaf_schemas())
        elif edit == "nested" and names:
            name = draw(st.sampled_from(names))
            if properties[name].get("type") == "object":
                properties[name] = draw(mutated(properties[name], 0))
    if not new.get("required"):
        new.pop("required", None)
    return new


def _bounds(low: int | None, high: int | None) -> tuple[int, int]:
    """Finite bounds for generated numbers: the schema's, or some around them."""
    if low is None:
        low = min(high, 0) - 5 if high is not None else -5
    if high is None:
        high = max(low, 0) + 5
    return low, high


def _multiples(low: int | None, high: int | None, step: int) -> bool:
    low, high = _bounds(low, high)
    return -(-low // step) <= high // step


def values(schema_: dict):
    """Documents valid for one of the generated schemas."""
    if "anyOf" in schema_:
        return st.one_of([values(s) for s in schema_["anyOf"]])
    if "enum" in schema_:
        return st.sampled_from(schema_["enum"])
    kind = schema_.get("type")
    if kind == "string":
        return st.text(min_size=schema_.get("minLength", 0), max_size=schema_.get("maxLength", 6))
    if kind in ("integer", "number"):
        low, high = _bounds(schema_.get("minimum"), schema_.get("maximum"))
        step = schema_.get("multipleOf", 1)
        integers = st.integers(-(-low // step), high // step).map(lambda k: k * step)
        if kind == "integer":
            return integers
        return integers | st.floats(low, high, allow_nan=False, allow_infinity=False, width=32)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(values(schema_["items"]), max_size=3)
    return objects(schema_)


@st.composite
def objects(draw, schema_: dict) -> dict:
    properties = schema_["properties"]
    document = {}
    for name, sub in properties.items():
        if name in schema_.get("required", []) or draw(st.booleans()):
            document[name] = draw(values(sub))
    additional = schema_.get("additionalProperties", True)
    for name in NAMES:
        if name not in properties and additional is not False and draw(st.booleans()):
            document[name] = draw(json_value if additional is True else values(additional))
    return document


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_compatible_means_every_old_document_validates_against_the_new_schema(data):
    old_document = data.draw(object_schemas())
    new_document = data.draw(mutated(old_document).filter(lambda d: d != old_document))
    old, new = schema(old_document), schema(new_document)
    compatible = new.backward_errors(old) == []
    for _ in range(5):
        document = data.draw(objects(old_document))
        assert old.validate(document) == [], (old_document, document)
        if compatible:
            assert new.validate(document) == [], (old_document, new_document, document)


@settings(max_examples=100, deadline=None)
@given(object_schemas())
def test_a_schema_is_compatible_with_itself_and_its_normal_form(document):
    parsed = schema(document)
    assert parsed.backward_errors(parsed) == []
    assert parsed.normalize().backward_errors(parsed) == [] and parsed.backward_errors(parsed.normalize()) == []
