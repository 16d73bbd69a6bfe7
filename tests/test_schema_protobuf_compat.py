"""broker.schema.protobuf_compat: Confluent's Protobuf compatibility rules, each checked
both ways (``new.backward_errors(old)`` is BACKWARD, ``old.backward_errors(new)``
FORWARD), on schemas parsed by broker.schema.protobuf.
"""

from __future__ import annotations

import re

import pytest

from broker.schema.base import ParsedSchema, SchemaReference
from broker.schema.protobuf import parse
from broker.schema.protobuf_compat import COMPATIBLE_CHANGES, Difference, differences


def proto3(body: str, package: str = "shop") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


def proto2(body: str) -> str:
    return f'syntax = "proto2";\npackage shop;\n{body}\n'


def error_types(new, old) -> list[tuple[str, str]]:
    """(errorType, path) of each message of ``new.backward_errors(old)``."""
    found = []
    for message in new.backward_errors(old):
        match = re.fullmatch(r'\{errorType:"(\w+)", description:"(.*)"\}', message)
        assert match, message
        path = re.search(r"'(#/[^']*)'", match.group(2))
        found.append((match.group(1), path.group(1) if path else ""))
    return found


def both_ways(old_text: str, new_text: str, **refs) -> tuple[list, list]:
    old = parse(old_text, refs.get("old_refs", ()), refs.get("old_resolved", {}))
    new = parse(new_text, refs.get("new_refs", ()), refs.get("new_resolved", {}))
    return error_types(new, old), error_types(old, new)


# -- fields added and removed ---------------------------------------------------------------


def test_a_field_added_or_removed_is_compatible_in_proto3() -> None:
    old = proto3("message Order { string id = 1; }")
    new = proto3("message Order { string id = 1; int64 total = 2; }")
    assert both_ways(old, new) == ([], [])
    kinds = {d.type for d in differences(parse(old).compat_files(), parse(new).compat_files())}
    assert kinds == {"FIELD_ADDED"}


def test_a_required_field_added_breaks_backward_and_removed_breaks_forward() -> None:
    old = proto2("message Order { optional string id = 1; }")
    new = proto2("message Order { optional string id = 1; required int64 total = 2; }")
    backward, forward = both_ways(old, new)
    assert backward == [("REQUIRED_FIELD_ADDED", "#/Order/2")]
    assert forward == [("REQUIRED_FIELD_REMOVED", "#/Order/2")]
    # an optional one either way is fine
    assert both_ways(old, proto2("message Order { optional string id = 1; optional int64 total = 2; }")) == ([], [])


def test_a_required_field_in_an_edition_counts_as_required() -> None:
    old = 'edition = "2023"; package shop; message Order { string id = 1; }'
    new = ('edition = "2023"; package shop; message Order { string id = 1; '
           "int64 total = 2 [features.field_presence = LEGACY_REQUIRED]; }")
    assert both_ways(old, new) == ([("REQUIRED_FIELD_ADDED", "#/Order/2")], [("REQUIRED_FIELD_REMOVED", "#/Order/2")])


# -- types -------------------------------------------------------------------------------------


COMPATIBLE_SCALARS = [("int32", "uint32"), ("int32", "int64"), ("uint64", "bool"), ("int64", "uint32"),
                      ("sint32", "sint64"), ("string", "bytes"), ("fixed32", "sfixed32"), ("fixed64", "sfixed64"),
                      ("int32", "Kind")]
INCOMPATIBLE_SCALARS = [("int32", "sint32"), ("int32", "string"), ("float", "double"), ("fixed32", "fixed64"),
                        ("int32", "fixed32"), ("string", "int64"), ("bytes", "sint64"), ("Kind", "string"),
                        ("sfixed64", "double")]
ENUM = "enum Kind { KIND_UNSPECIFIED = 0; BIG = 1; }"


@pytest.mark.parametrize("a, b", COMPATIBLE_SCALARS)
def test_scalars_of_one_group_are_compatible(a, b) -> None:
    assert both_ways(proto3(f"message M {{ {a} v = 1; }} {ENUM}"), proto3(f"message M {{ {b} v = 1; }} {ENUM}")) \
        == ([], [])


@pytest.mark.parametrize("a, b", INCOMPATIBLE_SCALARS)
def test_scalars_of_different_groups_are_not(a, b) -> None:
    backward, forward = both_ways(proto3(f"message M {{ {a} v = 1; }} {ENUM}"),
                                  proto3(f"message M {{ {b} v = 1; }} {ENUM}"))
    assert backward == forward == [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]


def test_a_field_number_reused_with_another_name_and_type() -> None:
    backward, forward = both_ways(proto3("message Order { string id = 1; string note = 2; }"),
                                  proto3("message Order { string id = 1; int64 count = 2; }"))
    assert backward == forward == [("FIELD_SCALAR_KIND_CHANGED", "#/Order/2")]
    # the rename alone is compatible
    assert both_ways(proto3("message Order { string note = 2; }"), proto3("message Order { string text = 2; }")) \
        == ([], [])


def test_a_field_changing_kind() -> None:
    old = proto3("message Order { int32 line = 2; } message Line { string sku = 1; }")
    new = proto3("message Order { Line line = 2; } message Line { string sku = 1; }")
    assert both_ways(old, new) == ([("FIELD_KIND_CHANGED", "#/Order/2")], [("FIELD_KIND_CHANGED", "#/Order/2")])
    as_map = proto3("message Order { map<string, int32> line = 2; } message Line { string sku = 1; }")
    assert both_ways(new, as_map) == ([("FIELD_KIND_CHANGED", "#/Order/2")], [("FIELD_KIND_CHANGED", "#/Order/2")])


def test_a_map_compares_its_key_and_value() -> None:
    old = proto3("message Order { map<string, int32> counts = 2; }")
    assert both_ways(old, proto3("message Order { map<string, int64> counts = 2; }")) == ([], [])
    assert both_ways(old, proto3("message Order { map<string, string> counts = 2; }")) == \
        ([("FIELD_SCALAR_KIND_CHANGED", "#/Order/2")], [("FIELD_SCALAR_KIND_CHANGED", "#/Order/2")])
    assert both_ways(old, proto3("message Order { map<int32, int32> counts = 2; }")) == \
        ([("FIELD_SCALAR_KIND_CHANGED", "#/Order/2")], [("FIELD_SCALAR_KIND_CHANGED", "#/Order/2")])


def test_a_message_field_changing_to_another_message() -> None:
    old = proto3("message Order { Line item = 1; } message Line { string sku = 1; } message Item { string sku = 1; }")
    new = proto3("message Order { Item item = 1; } message Line { string sku = 1; } message Item { string sku = 1; }")
    assert both_ways(old, new) == ([("FIELD_NAMED_TYPE_CHANGED", "#/Order/1")],
                                   [("FIELD_NAMED_TYPE_CHANGED", "#/Order/1")])
    # the same message spelled another way is the same type
    same = proto3("message Order { .shop.Line item = 1; } message Line { string sku = 1; } "
                  "message Item { string sku = 1; }")
    assert both_ways(old, same) == ([], [])


def test_a_numeric_label_change_breaks_and_a_string_one_does_not() -> None:
    old = proto3("message M { optional int32 n = 1; optional string s = 2; }")
    new = proto3("message M { repeated int32 n = 1; repeated string s = 2; }")
    assert both_ways(old, new) == ([("FIELD_NUMERIC_LABEL_CHANGED", "#/M/1")],
                                   [("FIELD_NUMERIC_LABEL_CHANGED", "#/M/1")])
    found = {d.type for d in differences(parse(old).compat_files(), parse(new).compat_files())}
    assert "FIELD_STRING_OR_BYTES_LABEL_CHANGED" in found
    # proto3's implicit label is not a written one: Confluent does not compare it
    assert both_ways(proto3("message M { int32 n = 1; }"), proto3("message M { repeated int32 n = 1; }")) == ([], [])


# -- messages and enums -------------------------------------------------------------------


def test_a_message_removed_breaks_backward_and_added_is_fine() -> None:
    old = proto3("message Order { string id = 1; } message Refund { string id = 1; }")
    new = proto3("message Order { string id = 1; }")
    assert both_ways(old, new) == ([("MESSAGE_REMOVED", "#/Refund")], [])
    nested_old = proto3("message Order { message Line { string sku = 1; } }")
    nested_new = proto3("message Order { }")
    assert both_ways(nested_old, nested_new) == ([("MESSAGE_REMOVED", "#/Order/Line")], [])


def test_messages_moved_are_compatible() -> None:
    old = proto3("message A { string a = 1; } message B { string b = 1; }")
    new = proto3("message B { string b = 1; } message A { string a = 1; }")
    assert both_ways(old, new) == ([], [])
    assert {d.type for d in differences(parse(old).compat_files(), parse(new).compat_files())} == {"MESSAGE_MOVED"}


def test_enum_symbols_added_removed_or_renamed_are_compatible() -> None:
    old = proto3("message M { Kind k = 1; } enum Kind { A = 0; B = 1; C = 2; }")
    new = proto3("message M { Kind k = 1; } enum Kind { A = 0; BEE = 1; D = 3; }")
    assert both_ways(old, new) == ([], [])
    kinds = sorted((d.type, d.path) for d in differences(parse(old).compat_files(), parse(new).compat_files()))
    assert kinds == [("ENUM_CONST_ADDED", "#/Kind/3"), ("ENUM_CONST_CHANGED", "#/Kind/1"),
                     ("ENUM_CONST_REMOVED", "#/Kind/2")]
    assert both_ways(proto3("message M {} enum Gone { G = 0; }"), proto3("message M {}")) == ([], [])


def test_the_package_changing_breaks_both_ways() -> None:
    old = proto3("message M { string a = 1; }", package="shop.v1")
    new = proto3("message M { string a = 1; }", package="shop.v2")
    assert both_ways(old, new) == ([("PACKAGE_CHANGED", "#/")], [("PACKAGE_CHANGED", "#/")])


# -- oneofs ------------------------------------------------------------------------------------


def test_a_oneof_member_added_is_compatible_and_removed_is_not() -> None:
    old = proto3("message M { oneof pay { string card = 1; string iban = 2; } }")
    new = proto3("message M { oneof pay { string card = 1; string iban = 2; int64 cash = 3; } }")
    assert both_ways(old, new) == ([], [("ONEOF_FIELD_REMOVED", "#/M/pay/3")])


def test_fields_moved_into_a_oneof() -> None:
    old = proto3("message M { string card = 1; string iban = 2; }")
    one = proto3("message M { oneof pay { string card = 1; int64 cash = 3; } string iban = 2; }")
    # one field into a new oneof: no new exclusivity; the other way, the oneof's new
    # member is gone while the oneof's other member stays
    assert both_ways(old, one) == ([], [("ONEOF_FIELD_REMOVED", "#/M/pay/3")])
    both = proto3("message M { oneof pay { string card = 1; string iban = 2; } }")
    backward, forward = both_ways(old, both)
    assert backward == [("MULTIPLE_FIELDS_MOVED_TO_ONEOF", "#/M/pay")]
    assert forward == []  # moved out to top-level fields: compatible
    assert "ONEOF_FIELD_MOVED_TO_TOP_LEVEL" in {
        d.type for d in differences(parse(both).compat_files(), parse(old).compat_files())}


def test_a_field_moved_into_an_existing_oneof() -> None:
    old = proto3("message M { oneof pay { string card = 1; } string iban = 2; }")
    new = proto3("message M { oneof pay { string card = 1; string iban = 2; } }")
    assert both_ways(old, new) == ([("FIELD_MOVED_TO_EXISTING_ONEOF", "#/M/pay")], [])


def test_a_whole_oneof_deleted_is_compatible_and_a_renamed_one_still_compares_members() -> None:
    old = proto3("message M { string id = 9; oneof pay { string card = 1; string iban = 2; } }")
    assert both_ways(old, proto3("message M { string id = 9; }")) == ([], [])
    renamed = proto3("message M { string id = 9; oneof payment { string card = 1; int64 iban = 2; } }")
    # reported where the field is in the reading schema
    assert both_ways(old, renamed) == ([("FIELD_SCALAR_KIND_CHANGED", "#/M/payment/2")],
                                       [("FIELD_SCALAR_KIND_CHANGED", "#/M/pay/2")])


# -- references ------------------------------------------------------------------------------


HOME_V1 = proto3("message Home { int32 device = 1; bool on = 2; }", package="dev")
HOME_V2 = proto3("message Home { string device = 1; bool on = 2; }", package="dev")
USES_HOME = proto3('import "home.proto";\nmessage Report { dev.Home home = 1; }')


def test_a_referenced_type_changing_between_versions() -> None:
    v1 = parse(USES_HOME, [SchemaReference("home.proto", "home", 1)], {"home.proto": HOME_V1})
    v2 = parse(USES_HOME, [SchemaReference("home.proto", "home", 2)], {"home.proto": HOME_V2})
    expected = [("FIELD_SCALAR_KIND_CHANGED", "#/Home/1"), ("FIELD_NAMED_TYPE_CHANGED", "#/Report/1")]
    assert error_types(v2, v1) == expected and error_types(v1, v2) == expected
    # one subject and version on both sides: not compared again
    same = parse(USES_HOME, [SchemaReference("home.proto", "home", 1)], {"home.proto": HOME_V1})
    assert error_types(same, v1) == []


def test_a_message_moved_into_an_import() -> None:
    local = parse(proto3("message Report { Home home = 1; } message Home { int32 device = 1; bool on = 2; }"))
    local_dev = proto3("message Home { int32 device = 1; bool on = 2; }", package="dev")
    imported = parse(proto3('import "home.proto";\nmessage Report { dev.Home home = 1; }'),
                     [SchemaReference("home.proto", "home", 1)], {"home.proto": local_dev})
    assert error_types(imported, local) == [("MESSAGE_REMOVED", "#/Home")]
    assert error_types(local, imported) == []


def test_recursive_referenced_types_end() -> None:
    tree_v1 = proto3("message Node { repeated Node kids = 1; int32 v = 2; }", package="t")
    tree_v2 = proto3("message Node { repeated Node kids = 1; string v = 2; }", package="t")
    text = proto3('import "tree.proto";\nmessage Forest { t.Node root = 1; repeated t.Node more = 2; }')
    v1 = parse(text, [SchemaReference("tree.proto", "tree", 1)], {"tree.proto": tree_v1})
    v2 = parse(text, [SchemaReference("tree.proto", "tree", 2)], {"tree.proto": tree_v2})
    # Node's own kids field is not compared again while Node is (the cycle ends there)
    assert error_types(v2, v1) == [("FIELD_SCALAR_KIND_CHANGED", "#/Node/2"),
                                   ("FIELD_NAMED_TYPE_CHANGED", "#/Forest/1"),
                                   ("FIELD_NAMED_TYPE_CHANGED", "#/Forest/2")]
    # two types referring to each other, one of them changing
    pair_v1 = proto3("message A { B b = 1; int32 x = 2; } message B { A a = 1; }", package="t")
    pair_v2 = proto3("message A { B b = 1; string x = 2; } message B { A a = 1; }", package="t")
    text = proto3('import "pair.proto";\nmessage Top { t.A a = 1; t.B b = 2; }')
    v1 = parse(text, [SchemaReference("pair.proto", "pair", 1)], {"pair.proto": pair_v1})
    v2 = parse(text, [SchemaReference("pair.proto", "pair", 2)], {"pair.proto": pair_v2})
    errors = error_types(v2, v1)
    assert ("FIELD_SCALAR_KIND_CHANGED", "#/A/2") in errors
    assert ("FIELD_NAMED_TYPE_CHANGED", "#/Top/1") in errors and ("FIELD_NAMED_TYPE_CHANGED", "#/Top/2") in errors
    assert ("FIELD_NAMED_TYPE_CHANGED", "#/B/1") in errors  # B reached from Top, A compared inside it


# -- messages, determinism, other schema types --------------------------------------------


def test_the_message_is_confluents() -> None:
    old = parse(proto3("message Order { string id = 1; int32 n = 2; }"))
    new = parse(proto3("message Order { string id = 1; string n = 2; }"))
    assert new.backward_errors(old) == [
        "{errorType:\"FIELD_SCALAR_KIND_CHANGED\", description:\"The kind of a SCALAR field at path '#/Order/2' "
        "in the new schema does not match its kind in the old schema\"}"]
    difference = Difference("FIELD_SCALAR_KIND_CHANGED", "#/Order/2")
    assert "in the old schema does not match its kind in the new schema" in difference.description("old", "new")
    assert not difference.compatible and Difference("FIELD_ADDED", "#/Order/3").compatible


def test_every_difference_type_has_a_description() -> None:
    from broker.schema import protobuf_compat
    kinds = {v for k, v in vars(protobuf_compat).items() if k.isupper() and isinstance(v, str)}
    assert COMPATIBLE_CHANGES < kinds
    for kind in kinds:
        assert "#/X" in Difference(kind, "#/X").description()


def test_differences_are_deterministic_and_listed_once() -> None:
    old = parse(proto3("message A { int32 a = 1; int32 b = 2; string c = 3; } message B {} message C {}"))
    new = parse(proto3("message A { string a = 1; sint32 b = 2; int32 c = 3; }"))
    first = differences(old.compat_files(), new.compat_files())
    assert first == differences(old.compat_files(), new.compat_files())
    assert len(first) == len(set(first))
    assert [(d.type, d.path) for d in first if not d.compatible] == [
        ("FIELD_SCALAR_KIND_CHANGED", "#/A/1"), ("FIELD_SCALAR_KIND_CHANGED", "#/A/2"),
        ("FIELD_SCALAR_KIND_CHANGED", "#/A/3"), ("MESSAGE_REMOVED", "#/B"), ("MESSAGE_REMOVED", "#/C")]


def test_a_schema_is_compatible_with_its_other_forms() -> None:
    text = proto3("message Order { string id = 1; map<string, int32> m = 2; oneof o { int32 x = 3; } }")
    schema = parse(text)
    assert schema.backward_errors(parse(schema.formatted("serialized"))) == []
    assert schema.normalize().backward_errors(schema) == []
    assert differences(schema.compat_files(), schema.compat_files()) == []


class _AvroLike(ParsedSchema):
    """Another schema type, as the registry hands one in."""

    schema_type = "AVRO"

    def canonical_string(self) -> str:
        return '"string"'

    def normalize(self) -> ParsedSchema:
        return self

    def backward_errors(self, previous: ParsedSchema) -> list[str]:
        return []


def test_a_previous_schema_of_another_type_is_one_break() -> None:
    errors = parse(proto3("message M {}")).backward_errors(_AvroLike())
    assert errors == ["the schema type changed from AVRO to PROTOBUF"]
