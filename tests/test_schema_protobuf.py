"""broker.schema.protobuf and protobuf_text: parsing both forms of a Protobuf schema, one
identity for both, the .proto rendering (protoc round trips), references, message
indexes, the serialized form, normalisation and bad input.

The base64 descriptors are built the way confluent-kafka's ``ProtobufSerializer`` builds
them: ``_schema_to_str(message_class.DESCRIPTOR.file)`` of a message class (here built at
run time from protoc's descriptors, as generated code's classes are), its imports
registered as references named ``dep.name``.
"""

from __future__ import annotations

import base64
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.schema import parse_schema
from broker.schema.base import InvalidSchemaError, SchemaReference
from broker.schema.protobuf import (
    DEFAULT_NAME,
    ProtobufSchema,
    compile_files,
    decode_descriptor,
    parse,
    render_file,
    well_known_files,
)

try:  # confluent-kafka's own helpers, when its schema-registry extras are installed
    from confluent_kafka.schema_registry.common.protobuf import _create_index_array, _schema_to_str, _str_to_proto
except ImportError:  # the same three lines of confluent_kafka/schema_registry/common/protobuf.py
    def _schema_to_str(file_descriptor):
        return base64.standard_b64encode(file_descriptor.serialized_pb).decode("ascii")

    def _str_to_proto(name, schema_str):
        proto = descriptor_pb2.FileDescriptorProto.FromString(base64.standard_b64decode(schema_str.encode("ascii")))
        proto.name = name
        return proto

    def _create_index_array(msg_desc):
        path, current = [], msg_desc
        while current.containing_type is not None:
            path.insert(0, list(current.containing_type.nested_types).index(current))
            current = current.containing_type
        path.insert(0, list(msg_desc.file.message_types_by_name).index(current.name))
        return path


F = descriptor_pb2.FieldDescriptorProto

COMMON = """
syntax = "proto3";
package kafkalog.schema_test;

// a comment the canonical form drops
message Money {
  string currency = 1;
  int64 units = 2;
}
"""

ORDER = """
syntax = "proto3";
package kafkalog.schema_test;

import "kafkalog_schema_test/common.proto";
import "google/protobuf/timestamp.proto";

option java_package = "io.kafkalog.test";

message Order {
  int64 id = 1;
  Money total = 2;
  google.protobuf.Timestamp created = 3;
  map<string, Line> lines = 4;
  message Line {
    string sku = 1;
    uint32 quantity = 2 [deprecated = true];
  }
  optional string note = 5;
  oneof payment {
    string card = 6;
    Money cash = 7;
  }
  Status status = 8;
  enum Status {
    STATUS_UNSPECIFIED = 0;
    PAID = 1;
  }
  reserved 20 to 29;
  reserved "legacy";
}

message Refund {
  Order order = 1;
  repeated int32 line_numbers = 2;
}
"""

RICH_PROTO2 = r"""
syntax = "proto2";
package acme.rich;
import "google/protobuf/descriptor.proto";
import public "google/protobuf/timestamp.proto";
option java_package = "com.acme.rich";
option java_multiple_files = true;
option optimize_for = SPEED;
option (file_owner) = "team-x";

extend google.protobuf.FileOptions { optional string file_owner = 51000; }
extend google.protobuf.FieldOptions {
  optional Meta meta = 51001;
  repeated int32 tags = 51002;
  optional double weight = 51003;
  optional float ratio = 51004;
  optional bytes blob = 51005;
  optional Color tint = 51006;
}
extend google.protobuf.OneofOptions { optional string oneof_note = 51007; }
message Meta { optional string doc = 1; repeated string labels = 2; map<string, string> params = 3; }
enum Color {
  option allow_alias = true;
  RED = 0; CRIMSON = 0 [deprecated = true]; GREEN = 1; BLUE = 2;
  reserved 10 to 20, 30; reserved "PURPLE";
}
message Order {
  option deprecated = true;
  required int64 id = 1 [(meta) = { doc: "the id" labels: ["a", "b"] params { key: "k" value: "v" } }];
  optional string name = 2 [default = "x\"y\n\tz é", (tags) = 1, (tags) = 2];
  optional bytes raw = 3 [default = "\001\377ab"];
  optional double price = 4 [default = inf, (weight) = 0.1, (ratio) = 0.1, (blob) = "\000\001", (tint) = BLUE];
  optional float f = 5 [default = -1.5e10];
  optional Color color = 6 [default = GREEN];
  optional bool flag = 7 [default = true, deprecated = true];
  repeated int32 nums = 8 [packed = true];
  repeated sint64 snums = 9 [packed = false];
  map<string, Line> lines = 10;
  message Early { optional int32 e = 1; }
  map<int32, Color> colors = 11 [deprecated = true];
  optional group Result = 12 { optional string url = 13; optional int32 rank = 14 [default = -7]; }
  oneof payment {
    option (oneof_note) = "pay";
    string card = 20;
    int64 cash = 21 [json_name = "cashMoney"];
    group Voucher = 22 { optional string code = 23; }
  }
  optional string my_field_name = 24 [json_name = "myFieldName"];
  optional double nan_default = 25 [default = nan];
  optional int32 weird_json = 26 [json_name = "w_j"];
  optional uint64 big = 27 [default = 18446744073709551615];
  optional sfixed32 neg = 28 [default = -2147483648];
  message Line { optional string sku = 1; optional Line sub = 2; }
  enum Local { L0 = 0; L1 = 1; }
  extensions 100 to 199, 300;
  extensions 1000 to max;
  reserved 40 to 49, 60;
  reserved "old_one", "old_two";
  extend Order { optional int32 nested_ext = 150; }
  optional Local local = 29;
  optional google.protobuf.Timestamp at = 30;
}
extend Order {
  optional string ext_a = 101; repeated int32 ext_b = 102; optional group ExtGroup = 103 { optional int32 g = 1; }
}
message Empty {}
service Shop {
  option deprecated = true;
  rpc Get (Order) returns (Order);
  rpc Stream (stream Order) returns (stream Empty) { option idempotency_level = NO_SIDE_EFFECTS; }
}
"""

RICH_PROTO3 = """
syntax = "proto3";
package a.b;
import "google/protobuf/any.proto";
import "google/protobuf/descriptor.proto";
option go_package = "x/y";
extend google.protobuf.MessageOptions { optional string label = 50000; repeated string more = 50001; }
extend google.protobuf.EnumValueOptions { string alias = 50002; }
message A {
  option (label) = "a";
  option (more) = "x";
  option (more) = "y";
  optional int32 maybe = 1;
  repeated string names = 2;
  map<string, A> kids = 3;
  map<int64, E> codes = 4;
  oneof choice { A one = 5; string two = 6 [deprecated = true]; }
  optional string also = 7;
  google.protobuf.Any any = 8;
  bytes data = 9 [json_name = "DATA"];
  reserved 100 to max;
  reserved "gone";
  enum E { option allow_alias = true; E0 = 0; E1 = 1 [(alias) = "one"]; E1B = 1; }
  message Deep { message Deeper { message Deepest { repeated Deep d = 1; } } }
}
enum Top { TOP_UNSPECIFIED = 0; reserved 5, 7 to max; reserved "OLD"; }
service S { rpc Call (stream A) returns (stream A); rpc Plain (A) returns (A) {} }
"""

EDITION_2023 = """
edition = "2023";
package ed;
option features.field_presence = IMPLICIT;
message M {
  int32 a = 1 [features.field_presence = LEGACY_REQUIRED];
  M2 g = 2 [features.message_encoding = DELIMITED];
  message M2 { int32 x = 1; }
  repeated int32 p = 3 [features.repeated_field_encoding = EXPANDED];
  string s = 4 [features.field_presence = EXPLICIT];
  map<string, int32> m = 5;
  oneof o { int32 c = 6; string d = 7; }
  reserved 10, 12 to 20;
  reserved foo, bar;
  extensions 100 to 200;
}
enum E { option features.enum_type = CLOSED; A = 0; B = 1; reserved C; }
"""

EDITION_2024 = """
edition = "2024";
package ed24;
export message M { int32 a = 1; local message N { string z = 1; } }
local enum E { A = 0; }
"""


def _without_empty_options(file: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    """``file`` without empty ``options`` blocks (``rpc X(A) returns (B) {}`` has one, and
    source-retention options leave one behind): they mean nothing, and ``.proto`` text
    cannot say "empty options"."""
    copy = descriptor_pb2.FileDescriptorProto.FromString(file.SerializeToString())

    def walk(message) -> None:
        for field, value in message.ListFields():
            if field.message_type is None:
                continue
            repeated = field.label == F.LABEL_REPEATED if hasattr(field, "label") else field.is_repeated
            for one in (value if repeated else [value]):
                walk(one)
            if field.name == "options" and not repeated and value.ByteSize() == 0:
                message.ClearField("options")

    walk(copy)
    return copy


def _message_class(files: list[descriptor_pb2.FileDescriptorProto], full_name: str):
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def _serializer_registration(cls) -> tuple[str, list[SchemaReference], dict[str, str]]:
    """What confluent-kafka's ProtobufSerializer registers for ``cls``: the base64 file,
    and each import but the well-known ones as a reference named by its file name (its
    own registration, base64 too)."""
    references, resolved = [], {}

    def visit(file) -> None:
        for dependency in file.dependencies:
            if dependency.name.startswith(("google/protobuf/", "google/type/", "confluent/")):
                continue
            visit(dependency)
            resolved[dependency.name] = _schema_to_str(dependency)

    visit(cls.DESCRIPTOR.file)
    for dependency in cls.DESCRIPTOR.file.dependencies:
        if dependency.name in resolved:
            references.append(SchemaReference(dependency.name, dependency.name.replace("/", "-"), 1))
    return _schema_to_str(cls.DESCRIPTOR.file), references, resolved


@pytest.fixture(scope="module")
def order_files() -> list[descriptor_pb2.FileDescriptorProto]:
    return compile_files({"kafkalog_schema_test/common.proto": COMMON, "kafkalog_schema_test/order.proto": ORDER},
                         [], "kafkalog_schema_test/order.proto")


REFS = [SchemaReference("kafkalog_schema_test/common.proto", "common-value", 1)]
RESOLVED = {"kafkalog_schema_test/common.proto": COMMON}


# -- one identity for both forms ----------------------------------------------------------


def test_proto_text_and_the_serializers_descriptor_are_one_schema(order_files) -> None:
    cls = _message_class(order_files, "kafkalog.schema_test.Order")
    text_b64, references, resolved = _serializer_registration(cls)
    assert [r.name for r in references] == ["kafkalog_schema_test/common.proto"]

    from_descriptor = parse(text_b64, references, resolved)
    from_text = parse(ORDER, references, RESOLVED)

    assert from_descriptor.canonical_string() == from_text.canonical_string()
    assert from_descriptor == from_text and hash(from_descriptor) == hash(from_text)
    assert from_descriptor.file_descriptor == from_text.file_descriptor
    assert from_descriptor.formatted("serialized") == from_text.formatted("serialized")
    assert from_text.schema_type == "PROTOBUF"
    # the canonical text is .proto: comments gone, every type fully qualified
    canonical = from_text.canonical_string()
    assert canonical.startswith('syntax = "proto3";\npackage kafkalog.schema_test;\n')
    assert "map<string, .kafkalog.schema_test.Order.Line> lines = 4;" in canonical
    assert "optional string note = 5;" in canonical and "_note" not in canonical
    assert "LinesEntry" not in canonical
    # the registered dependency reads the same in both forms too
    assert parse(resolved["kafkalog_schema_test/common.proto"]) == parse(COMMON)


def test_a_hand_built_descriptor_is_the_schema_its_text_describes() -> None:
    # no json_name, no syntax-specific cleanup: what a descriptor built in code looks like
    customer = descriptor_pb2.FileDescriptorProto(name="somewhere/customer.proto", package="shop", syntax="proto3")
    message = customer.message_type.add(name="Customer")
    message.field.add(name="full_name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    message.field.add(name="tags", number=2, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    text = 'syntax = "proto3"; package shop; message Customer { string full_name = 1; repeated string tags = 2; }'
    encoded = base64.b64encode(customer.SerializeToString()).decode()
    assert parse(encoded) == parse(text)
    assert parse(encoded).file_descriptor.message_type[0].field[0].json_name == "fullName"


def test_comments_layout_spelling_and_file_name_are_not_identity() -> None:
    plain = parse('syntax = "proto3"; package p; message A { B b = 1; message B { int32 x = 1; } }')
    spelled = parse('''
        syntax = "proto3";
        package p;
        /* block comment */
        message A {
          .p.A.B b = 1;  // fully qualified
          message B {
            int32 x = 1;
          }
        }''')
    assert plain == spelled
    renamed = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(plain.formatted("serialized")))
    renamed.name = "elsewhere/other_name.proto"
    assert parse(base64.b64encode(renamed.SerializeToString()).decode()) == plain
    assert plain.file_descriptor.name == DEFAULT_NAME
    # an option, a default, a reserved range each make another schema
    assert parse('syntax = "proto3"; package p; option java_package = "x"; '
                 'message A { B b = 1; message B { int32 x = 1; } }') != plain
    assert parse('syntax = "proto3"; package p; message A { B b = 1; message B { int32 x = 1; } reserved 9; }') != plain
    assert parse('syntax = "proto2"; message A { optional int32 x = 1 [default = 5]; }') != \
        parse('syntax = "proto2"; message A { optional int32 x = 1; }')


# -- rendering: protoc compiles the canonical text into an equal descriptor ---------------


@pytest.mark.parametrize("text", [ORDER, RICH_PROTO2, RICH_PROTO3, EDITION_2023, EDITION_2024],
                         ids=["order", "proto2", "proto3", "edition2023", "edition2024"])
def test_the_canonical_text_compiles_to_an_equal_descriptor(text) -> None:
    sources = {**RESOLVED, "main.proto": text}
    original = compile_files(sources, [], "main.proto")[-1]
    schema = parse(text, REFS if "common.proto" in text else (), RESOLVED if "common.proto" in text else {})
    again = compile_files({**sources, "main.proto": schema.canonical_string()}, [], "main.proto")[-1]
    assert _without_empty_options(again) == _without_empty_options(original)
    # and the canonical text is a fixed point
    assert parse(schema.canonical_string(), schema.references, RESOLVED).canonical_string() == \
        schema.canonical_string()


def test_the_rich_proto2_file_keeps_what_it_says() -> None:
    canonical = parse(RICH_PROTO2).canonical_string()
    for expected in [
        'import public "google/protobuf/timestamp.proto";',
        'option (.acme.rich.file_owner) = "team-x";',
        'required int64 id = 1 [(.acme.rich.meta) = { doc: "the id" labels: "a" labels: "b" '
        'params { key: "k" value: "v" } }];',
        'optional string name = 2 [default = "x\\"y\\n\\tz é", (.acme.rich.tags) = 1, (.acme.rich.tags) = 2];',
        'optional bytes raw = 3 [default = "\\001\\377ab"];',
        "(.acme.rich.ratio) = 0.1",
        "repeated sint64 snums = 9 [packed = false];",
        "map<int32, .acme.rich.Color> colors = 11 [deprecated = true];",
        "optional group Result = 12 {",
        'int64 cash = 21 [json_name = "cashMoney"];',
        'optional int32 weird_json = 26 [json_name = "w_j"];',
        "optional string my_field_name = 24;",  # its json_name is the default one
        "optional double nan_default = 25 [default = nan];",
        "extensions 100 to 199;",
        'reserved "old_one", "old_two";',
        "reserved 10 to 20, 30;",
        "extend .acme.rich.Order {",
        "rpc Stream (stream .acme.rich.Order) returns (stream .acme.rich.Empty) {",
        "option idempotency_level = NO_SIDE_EFFECTS;",
        "message Empty {}",
    ]:
        assert expected in canonical, expected


def test_every_well_known_file_round_trips() -> None:
    names = sorted(well_known_files())
    assert "google/protobuf/descriptor.proto" in names and "google/protobuf/timestamp.proto" in names
    for name in names:
        files = compile_files({}, [], name)
        file = files[-1]
        text = render_file(files, file)
        again = compile_files({name: text}, files[:-1], name)[-1]
        assert _without_empty_options(again) == _without_empty_options(file), name


def test_nested_messages_keep_their_place_among_map_entries_and_groups() -> None:
    text = '''syntax = "proto2"; package n;
        message M {
          message First { optional int32 a = 1; }
          map<string, string> one = 1;
          message Second { optional int32 b = 1; }
          optional group Third = 2 { optional int32 c = 3; }
          map<int32, int32> two = 4;
          message Fourth { optional int32 d = 1; }
        }'''
    original = compile_files({"m.proto": text}, [], "m.proto")[-1]
    schema = parse(text)
    order = [m.name for m in original.message_type[0].nested_type]
    assert order == ["First", "OneEntry", "Second", "Third", "TwoEntry", "Fourth"]
    assert [m.name for m in schema.file_descriptor.message_type[0].nested_type] == order
    assert schema.message_index("n.M.Fourth") == [0, 5]


# -- references ---------------------------------------------------------------------------


def test_an_import_of_a_registered_file_and_a_well_known_type() -> None:
    schema = parse(ORDER, REFS, RESOLVED)
    assert schema.references == tuple(REFS)
    assert [d.name for d in schema.dependencies] == ["kafkalog_schema_test/common.proto",
                                                     "google/protobuf/timestamp.proto"]
    serialized = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.formatted("serialized")))
    assert list(serialized.dependency) == ["kafkalog_schema_test/common.proto", "google/protobuf/timestamp.proto"]
    money = schema.pool().FindMessageTypeByName("kafkalog.schema_test.Money")
    assert [f.name for f in money.fields] == ["currency", "units"]
    # references are part of the identity
    assert parse(ORDER, [SchemaReference("kafkalog_schema_test/common.proto", "common-value", 2)], RESOLVED) != schema


def test_transitive_references_either_form() -> None:
    base = 'syntax = "proto3"; package t; message Base { string id = 1; }'
    middle = 'syntax = "proto3"; package t; import "t/base.proto"; message Middle { Base base = 1; }'
    top = 'syntax = "proto3"; package t; import "t/middle.proto"; message Top { Middle middle = 1; }'
    refs = [SchemaReference("t/middle.proto", "middle", 1)]
    as_text = parse(top, refs, {"t/base.proto": base, "t/middle.proto": middle})
    assert [d.name for d in as_text.dependencies] == ["t/base.proto", "t/middle.proto"]
    with pytest.raises(InvalidSchemaError, match="import 't/base.proto' not found"):
        parse(top, refs, {"t/middle.proto": middle})
    middle_b64 = parse(middle, [SchemaReference("t/base.proto", "base", 1)],
                       {"t/base.proto": base}).formatted("serialized")
    as_descriptor = parse(top, refs, {"t/base.proto": parse(base).formatted("serialized"),
                                      "t/middle.proto": middle_b64})
    assert as_descriptor == as_text
    mixed = parse(top, refs, {"t/base.proto": base, "t/middle.proto": middle_b64})  # a descriptor importing a text
    assert mixed == as_text


def test_custom_options_defined_in_a_reference_are_kept_in_both_forms() -> None:
    options = '''syntax = "proto3"; package opts; import "google/protobuf/descriptor.proto";
        message Rule { string expr = 1; }
        extend google.protobuf.FieldOptions { Rule rule = 61000; string pii = 61001; }'''
    text = '''syntax = "proto3"; package user; import "opts/options.proto";
        message User { string email = 1 [(opts.pii) = "email", (opts.rule) = { expr: "size > 3" }]; }'''
    refs = [SchemaReference("opts/options.proto", "options", 1)]
    schema = parse(text, refs, {"opts/options.proto": options})
    assert 'string email = 1 [(.opts.rule) = { expr: "size > 3" }, (.opts.pii) = "email"];' in \
        schema.canonical_string()
    as_b64 = parse(schema.formatted("serialized"), refs,
                   {"opts/options.proto": parse(options).formatted("serialized")})
    assert as_b64 == schema


# -- message indexes, the pool, the serialized form ----------------------------------------


def test_message_indexes_match_confluents(order_files) -> None:
    schema = parse(ORDER, REFS, RESOLVED)
    cls = _message_class(order_files, "kafkalog.schema_test.Order")
    pool = cls.DESCRIPTOR.file.pool
    assert schema.message_names() == ["kafkalog.schema_test.Order", "kafkalog.schema_test.Order.LinesEntry",
                                      "kafkalog.schema_test.Order.Line", "kafkalog.schema_test.Refund"]
    for name in schema.message_names():
        expected = _create_index_array(pool.FindMessageTypeByName(name))
        assert schema.message_index(name) == expected
        assert schema.message_descriptor(expected).full_name == name
    assert schema.message_index(".kafkalog.schema_test.Order.Line") == [0, 1]
    assert schema.message_descriptor([]).full_name == "kafkalog.schema_test.Order"
    with pytest.raises(IndexError):
        schema.message_descriptor([2])
    with pytest.raises(IndexError):
        schema.message_descriptor([0, 7])
    with pytest.raises(KeyError):
        schema.message_index("kafkalog.schema_test.Nope")


def test_a_message_written_with_the_class_reads_with_the_registered_schema(order_files) -> None:
    cls = _message_class(order_files, "kafkalog.schema_test.Order")
    message = cls(id=7, note="n", card="4111")
    message.lines["a"].sku = "sku-1"
    message.total.units = 12
    schema = parse(ORDER, REFS, RESOLVED)
    # the registry's pool
    index = schema.message_index("kafkalog.schema_test.Order")
    reader = message_factory.GetMessageClass(schema.message_descriptor(index))
    decoded = reader.FromString(message.SerializeToString())
    assert decoded.id == 7 and decoded.note == "n" and decoded.card == "4111"
    assert decoded.lines["a"].sku == "sku-1" and decoded.total.units == 12
    # what confluent-kafka's deserializer builds from format=serialized
    pool = descriptor_pool.DescriptorPool()
    pool.Add(schema.dependencies[1])  # the well-known timestamp.proto (its client has it built in)
    pool.Add(_str_to_proto("kafkalog_schema_test/common.proto", parse(COMMON).formatted("serialized")))
    pool.Add(_str_to_proto("default", schema.formatted("serialized")))
    their = message_factory.GetMessageClass(pool.FindMessageTypeByName("kafkalog.schema_test.Order"))
    assert their.FromString(message.SerializeToString()).lines["a"].sku == "sku-1"


def test_formatted_serialized_and_unknown_formats() -> None:
    schema = parse(ORDER, REFS, RESOLVED)
    serialized = schema.formatted("serialized")
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized, validate=True))
    assert file.name == DEFAULT_NAME and file.package == "kafkalog.schema_test"
    assert parse(serialized, REFS, RESOLVED) == schema
    assert schema.formatted("") == schema.formatted("resolved") == schema.canonical_string()
    assert decode_descriptor(serialized) == file
    assert decode_descriptor(ORDER) is None


def test_parse_schema_dispatches_here() -> None:
    schema = parse_schema("protobuf", COMMON)
    assert isinstance(schema, ProtobufSchema) and schema == parse(COMMON)


# -- normalisation -------------------------------------------------------------------------


def test_normalize_sorts_imports_options_and_reserved_and_keeps_declarations() -> None:
    deps = {"z.proto": 'syntax = "proto3"; package z; message Z {}',
            "a.proto": 'syntax = "proto3"; package a; message A {}'}
    refs = [SchemaReference("z.proto", "z", 1), SchemaReference("a.proto", "a", 1)]
    one = parse('''syntax = "proto3"; package n; import "z.proto"; import "a.proto";
        option java_package = "j"; option go_package = "g"; option cc_enable_arenas = true;
        message Second { reserved 9, 7; reserved "d", "c"; z.Z z = 1; a.A a = 2; map<string, int32> m = 3; }
        message First { int32 x = 2; int32 y = 1; }''', refs, deps)
    other = parse('''syntax = "proto3"; package n; import "a.proto"; import "z.proto";
        option cc_enable_arenas = true; option go_package = "g"; option java_package = "j";
        message Second { reserved 7, 9; reserved "c", "d"; z.Z z = 1; a.A a = 2; map<string, int32> m = 3; }
        message First { int32 x = 2; int32 y = 1; }''', refs, deps)
    assert one != other
    normal = one.normalize()
    assert normal == other.normalize()
    text = normal.canonical_string()
    assert text.index('import "a.proto"') < text.index('import "z.proto"')
    assert text.index("option cc_enable_arenas") < text.index("option go_package") < text.index("option java_package")
    assert 'reserved 7, 9;\n  reserved "c", "d";' in text
    # declarations stay: message indexes and field order are the client's
    assert normal.message_names() == one.message_names()
    assert text.index("int32 x = 2;") < text.index("int32 y = 1;")
    assert normal.normalize() == normal


# -- bad input -----------------------------------------------------------------------------


def _deep_descriptor(depth: int) -> str:
    root = descriptor_pb2.DescriptorProto(name="A")
    current = root
    for i in range(depth):
        current = current.nested_type.add(name=f"N{i}")
    return base64.b64encode(descriptor_pb2.FileDescriptorProto(name="d", syntax="proto3", message_type=[root])
                            .SerializeToString()).decode()


def _undefined_type_descriptor() -> str:
    file = descriptor_pb2.FileDescriptorProto(name="x.proto", syntax="proto3")
    file.message_type.add(name="A").field.add(name="f", number=1, type=F.TYPE_MESSAGE, type_name=".Nope",
                                              label=F.LABEL_OPTIONAL)
    return base64.b64encode(file.SerializeToString()).decode()


@pytest.mark.parametrize("text, message", [
    ('syntax = "proto3"; message A { strin x = 1; }', 'default:1:32: "strin" is not defined'),
    ('syntax = "proto3"; message A { int32 x = 0; }', "Field numbers must be positive integers"),
    ('syntax = "proto3"; message A { int32 x = 1; int32 y = 1; }', "has already been used"),
    ('syntax = "proto3"; import "other.proto"; message A { Other o = 1; }', "import 'other.proto' not found"),
    ("QUJDREVGRw==", "the text is base64, but not of a FileDescriptorProto"),
    ("", "empty"),
    ("  \n\t ", "empty"),
    ("x" * 1_000_000, "Expected top-level statement"),
    ("message A {" * 50_000, "recursion limit"),
    ("\x00\x01\x02\xff", "Invalid control characters"),
    ('syntax = "proto3"; message A { string s = 1 [json_name = "\ud800"]; }', "not valid Unicode"),
    (_undefined_type_descriptor(), '"\\.Nope" is not defined'),
    (_deep_descriptor(90), "recursion limit"),
    ('syntax = "proto4";', 'Unrecognized syntax identifier "proto4"'),
])
def test_bad_schemas_are_invalid_schema_errors(text, message) -> None:
    with pytest.raises(InvalidSchemaError, match=message.replace("(", r"\(")) as caught:
        parse(text)
    assert caught.value.error_code == 42201
    assert "/tmp" not in str(caught.value)  # protoc's temporary directories stay out


OPTIONS_SOURCE = """syntax = "proto2";
package opt;
import "google/protobuf/descriptor.proto";
message Meta { optional string doc = 1; map<string, string> params = 3; }
extend google.protobuf.FileOptions { optional string owner = 51000; }
extend google.protobuf.FieldOptions { optional Meta meta = 51001; }
option (owner) = "team-x";
message M { optional int32 a = 1 [(meta) = { doc: "d" params { key: "k" value: "v" } }]; }
"""


def test_descriptors_that_would_crash_protoc_or_the_runtime_are_invalid_schemas() -> None:
    compiled = compile_files({"o.proto": OPTIONS_SOURCE}, [], "o.proto")[-1]
    # the (owner) option's value no longer fits its type: protoc, handed this descriptor,
    # aborts the process on a failed check
    retyped = descriptor_pb2.FileDescriptorProto()
    retyped.CopyFrom(compiled)
    owner = next(e for e in retyped.extension if e.name == "owner")
    owner.type, owner.type_name = F.TYPE_MESSAGE, ".opt.Meta"
    with pytest.raises(InvalidSchemaError, match="malformed options"):
        parse(base64.b64encode(retyped.SerializeToString()).decode())
    # a map entry whose key is not field 1: protobuf's runtime crashes printing the
    # (meta) option's params with it
    misnumbered = descriptor_pb2.FileDescriptorProto()
    misnumbered.CopyFrom(compiled)
    entry = next(m for m in misnumbered.message_type if m.name == "Meta").nested_type[0]
    entry.field[0].number = 7
    with pytest.raises(InvalidSchemaError, match="map_entry should not be set explicitly"):
        parse(base64.b64encode(misnumbered.SerializeToString()).decode())
    # the untouched descriptor is fine, its options kept
    assert '(.opt.meta) = { doc: "d" params { key: "k" value: "v" } }' in \
        parse(base64.b64encode(compiled.SerializeToString()).decode()).canonical_string()


@pytest.mark.parametrize("name", ["../escape.proto", "/abs.proto", "a//b.proto", "a\\b.proto", "", "./x.proto"])
def test_reference_names_must_be_import_paths(name) -> None:
    with pytest.raises(InvalidSchemaError, match="not a valid import path"):
        parse('syntax = "proto3"; import "ok.proto"; message A { O o = 1; }', [SchemaReference(name, "s", 1)],
              {name: 'syntax = "proto3"; message O {}'})


def test_bad_references_are_invalid_schema_errors() -> None:
    text = 'syntax = "proto3"; import "dep.proto"; message A { D d = 1; }'
    with pytest.raises(InvalidSchemaError, match="reference 'dep.proto' is empty"):
        parse(text, [], {"dep.proto": " "})
    with pytest.raises(InvalidSchemaError, match="dep.proto:1:"):
        parse(text, [], {"dep.proto": "message D {"})
    with pytest.raises(InvalidSchemaError, match="cannot be stored under its name"):
        parse(text, [], {"dep.proto": 'syntax = "proto3"; message D {}', "dep.proto/x.proto": "syntax = 'proto3';"})
    with pytest.raises(InvalidSchemaError, match='dep.proto:.*"\\.Nope" is not defined'):
        parse(text, [], {"dep.proto": _undefined_type_descriptor()})


def test_import_cycles_are_invalid_schema_errors() -> None:
    def file(name: str, imports: str) -> str:
        proto = descriptor_pb2.FileDescriptorProto(name=name, syntax="proto3", dependency=[imports])
        proto.message_type.add(name=name.split(".")[0].upper())
        return base64.b64encode(proto.SerializeToString()).decode()

    main = 'syntax = "proto3"; import "a.proto"; message M {}'
    with pytest.raises(InvalidSchemaError, match="part of an import cycle"):
        parse(main, [], {"a.proto": file("a.proto", "b.proto"), "b.proto": file("b.proto", "a.proto")})
    with pytest.raises(InvalidSchemaError, match="recursively imports itself"):
        parse(main, [], {"a.proto": 'syntax = "proto3"; import "b.proto";',
                         "b.proto": 'syntax = "proto3"; import "a.proto";'})


def test_protoc_messages_do_not_reach_stderr(capfd) -> None:
    with pytest.raises(InvalidSchemaError):
        parse('syntax = "proto3"; message A { strin x = 1; }')
    parse("message NoSyntax { optional int32 x = 1; }")  # protoc warns about the missing syntax
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_any_text_parses_or_is_an_invalid_schema_error(text) -> None:
    try:
        schema = parse(text)
    except InvalidSchemaError:
        return
    assert parse(schema.canonical_string()) == schema


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400))
def test_any_base64_parses_or_is_an_invalid_schema_error(raw) -> None:
    try:
        parse(base64.b64encode(raw).decode())
    except InvalidSchemaError:
        pass


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_corrupted_descriptors_parse_or_are_invalid_schema_errors(data) -> None:
    raw = bytearray(base64.b64decode(parse(ORDER, REFS, RESOLVED).formatted("serialized")))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    try:
        schema = parse(base64.b64encode(bytes(raw)).decode(), REFS, RESOLVED)
    except InvalidSchemaError:
        return
    assert parse(schema.canonical_string(), REFS, RESOLVED) == schema


def test_parsing_from_many_threads() -> None:
    expected = parse(ORDER, REFS, RESOLVED)
    errors: list[BaseException] = []
    lock = threading.Lock()

    def one(i: int) -> ProtobufSchema:
        if i % 3 == 0:
            try:
                parse('syntax = "proto3"; message A { strin x = 1; }')
            except InvalidSchemaError as e:
                with lock:
                    errors.append(e)
        return parse(ORDER if i % 2 else expected.formatted("serialized"), REFS, RESOLVED)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(40)))
    assert all(r == expected for r in results)
    assert len(errors) == 14 and all('"strin" is not defined' in str(e) for e in errors)
    pools = {id(expected.pool()) for _ in range(3)}
    assert len(pools) == 1
