"""Confluent's wire framing (broker/schema/framing.py), byte for byte against confluent-kafka's
own serde: its ``SchemaId`` (``id_to_bytes``, ``guid_to_bytes``, ``from_bytes``), its
``prefix_schema_id_serializer`` / ``header_schema_id_serializer`` /
``dual_schema_id_deserializer``, and its Avro and Protobuf serializers run against the
broker's registry; then malformed frames (every one a ``FramingError`` naming the
problem) and round trips under hypothesis.
"""

from __future__ import annotations

import io
import uuid

import pytest
from confluent_kafka.schema_registry import (
    dual_schema_id_deserializer,
    header_schema_id_serializer,
    prefix_schema_id_serializer,
)
from confluent_kafka.schema_registry.common.serde import SchemaId as CkSchemaId
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.schema import framing
from broker.schema.framing import FramingError, SchemaId

GUID = uuid.UUID("0f8d3a6c-2b1e-4c5d-9e7f-112233445566")
PAYLOAD = b"\x02hi\x00payload"


def ck(schema_type: str = "AVRO", id: int | None = None, guid: uuid.UUID | None = None,
       indexes: list[int] | None = None) -> CkSchemaId:
    return CkSchemaId(schema_type, id, None if guid is None else str(guid), indexes)


# --- bytes, against confluent-kafka's SchemaId ---

@pytest.mark.parametrize("schema_id", [0, 1, 7, 255, 256, 65536, 2**31 - 1])
def test_magic_0_is_confluents(schema_id):
    ours = framing.encode(SchemaId(schema_id), PAYLOAD, with_indexes=False)
    assert ours == ck(id=schema_id).id_to_bytes() + PAYLOAD
    assert ours[:5] == b"\x00" + schema_id.to_bytes(4, "big")
    assert framing.decode(ours, with_indexes=False) == (SchemaId(schema_id), 5)


def test_magic_1_is_confluents():
    ours = framing.encode(SchemaId(guid=GUID), PAYLOAD, with_indexes=False)
    assert ours == ck(guid=GUID).guid_to_bytes() + PAYLOAD == b"\x01" + GUID.bytes + PAYLOAD
    assert framing.decode(ours, with_indexes=False) == (SchemaId(guid=GUID), 17)
    # an id with both: magic 0 by default, 1 when asked (what the header serializer writes)
    both = SchemaId(5, GUID)
    assert framing.encode(both, b"", with_indexes=False) == b"\x00\x00\x00\x00\x05"
    assert framing.encode(both, b"", with_indexes=False, magic=1) == b"\x01" + GUID.bytes


@pytest.mark.parametrize("indexes", [[0], [1], [0, 0], [1, 0], [3, 2, 1], [63], [64], [200, 5000, 70000]])
def test_protobuf_message_indexes_are_confluents(indexes):
    ours = framing.encode(SchemaId(9, message_indexes=tuple(indexes)), PAYLOAD, with_indexes=True)
    assert ours == ck("PROTOBUF", id=9, indexes=indexes).id_to_bytes() + PAYLOAD
    guid = framing.encode(SchemaId(guid=GUID, message_indexes=tuple(indexes)), PAYLOAD, with_indexes=True)
    assert guid == ck("PROTOBUF", guid=GUID, indexes=indexes).guid_to_bytes() + PAYLOAD
    for data in (ours, guid):
        parsed, offset = framing.decode(data, with_indexes=True)
        assert parsed.message_indexes == tuple(indexes) and data[offset:] == PAYLOAD
        theirs = ck("PROTOBUF")
        rest = theirs.from_bytes(io.BytesIO(data))
        assert theirs.message_indexes == indexes and rest.read() == PAYLOAD


def test_the_first_message_is_one_zero_byte():
    assert framing.encode(SchemaId(1), b"", with_indexes=True) == b"\x00\x00\x00\x00\x01\x00"
    assert framing.encode(SchemaId(1, message_indexes=(0,)), b"", with_indexes=True) == b"\x00\x00\x00\x00\x01\x00"
    # [1, 0]: count 2 and the indexes, zigzag: 04 02 00
    assert framing.encode(SchemaId(1, message_indexes=(1, 0)), b"", with_indexes=True)[5:] == b"\x04\x02\x00"
    # the long form of [0] (count 1, index 0) reads as [0] too
    assert framing.decode(b"\x00\x00\x00\x00\x01\x02\x00", with_indexes=True) == (SchemaId(1, message_indexes=(0,)), 7)


def test_decode_reads_what_confluent_kafka_writes():
    for theirs in (ck(id=42), ck(guid=GUID)):
        data = (theirs.id_to_bytes() if theirs.id is not None else theirs.guid_to_bytes()) + PAYLOAD
        parsed, offset = framing.decode(data, with_indexes=False)
        assert (parsed.id, parsed.guid, data[offset:]) == (theirs.id, theirs.guid, PAYLOAD)


# --- the id serializers and the header ---

@pytest.mark.parametrize("field,name", [(MessageField.KEY, "__key_schema_id"),
                                        (MessageField.VALUE, "__value_schema_id")])
@pytest.mark.parametrize("schema_type,indexes", [("AVRO", None), ("PROTOBUF", [2, 1])])
def test_header_serializer_is_confluents(field, name, schema_type, indexes):
    headers: list = []
    ctx = SerializationContext("t", field, headers)
    out = header_schema_id_serializer(PAYLOAD, ctx, ck(schema_type, id=3, guid=GUID, indexes=indexes))
    assert out == PAYLOAD
    ours = framing.schema_id_header(SchemaId(3, GUID, None if indexes is None else tuple(indexes)),
                                    is_key=field == MessageField.KEY, with_indexes=indexes is not None)
    assert [ours] == headers and ours[0] == name
    found = framing.find_schema_id(headers, is_key=field == MessageField.KEY, with_indexes=indexes is not None)
    assert found == SchemaId(guid=GUID, message_indexes=None if indexes is None else tuple(indexes))
    # the dual reader takes the header and the whole payload
    assert framing.decode_dual(PAYLOAD, headers, is_key=field == MessageField.KEY,
                               with_indexes=indexes is not None) == (found, 0)
    theirs = ck(schema_type)
    assert dual_schema_id_deserializer(PAYLOAD, ctx, theirs).read() == PAYLOAD and theirs.guid == GUID


def test_prefix_serializer_and_dual_reader_agree():
    ctx = SerializationContext("t", MessageField.VALUE, [])
    data = prefix_schema_id_serializer(PAYLOAD, ctx, ck(id=77))
    assert data == framing.encode(SchemaId(77), PAYLOAD, with_indexes=False)
    # no header: the prefix; the key's header does not count for the value
    headers = [framing.schema_id_header(SchemaId(guid=GUID), is_key=True, with_indexes=False)]
    assert framing.decode_dual(data, headers, is_key=False, with_indexes=False) == (SchemaId(77), 5)
    assert framing.decode_dual(data, {"__value_schema_id": None}, is_key=False, with_indexes=False) == (SchemaId(77), 5)
    assert framing.find_schema_id(None, is_key=False, with_indexes=False) is None


def test_a_header_with_bytes_after_the_id_is_refused():
    value = b"\x01" + GUID.bytes + b"x"
    with pytest.raises(FramingError, match="1 bytes after the schema id"):
        framing.find_schema_id([("__value_schema_id", value)], is_key=False, with_indexes=False)


# --- bad input ---

@pytest.mark.parametrize("data,message", [
    (b"", "no magic byte"),
    (b"\x02\x00\x00\x00\x01", "unknown magic byte 0x02"),
    (b"{\"a\": 1}", "unknown magic byte 0x7b"),
    (b"\x00\x00\x01", "truncated frame: 3 bytes, a magic-0 frame starts with 5"),
    (b"\x01" + bytes(10), "truncated frame: 11 bytes, a magic-1 frame starts with 17"),
    (b"\x00\xff\xff\xff\xff", "schema id -1 is negative"),
])
def test_malformed_frames(data, message):
    with pytest.raises(FramingError, match=message):
        framing.decode(data, with_indexes=False)


@pytest.mark.parametrize("tail,message", [
    (b"", "truncated or invalid message indexes"),
    (b"\x01", "invalid message index count -1"),
    (b"\x06\x02", "3 message indexes announced, 1 bytes left"),
    (b"\x04\x02\x80", "truncated or invalid message indexes"),
    (b"\x02\x80", "truncated or invalid message indexes"),
    (b"\x02\xff\xff\xff\xff\xff\x01", "truncated or invalid message indexes"),
    (b"\x02\x03", "invalid message index -2"),
])
def test_malformed_message_indexes(tail, message):
    with pytest.raises(FramingError, match=message):
        framing.decode(b"\x00\x00\x00\x00\x01" + tail, with_indexes=True)


@pytest.mark.parametrize("kwargs,message", [
    ({}, "needs an id or a guid"),
    ({"id": -1}, "not an int from 0"),
    ({"id": 2**31}, "not an int from 0"),
    ({"id": True}, "not an int from 0"),
    ({"id": "1"}, "not an int from 0"),
    ({"guid": "not-a-uuid"}, "is not a UUID"),
    ({"id": 1, "message_indexes": ()}, "cannot be empty"),
    ({"id": 1, "message_indexes": (-1,)}, "message index -1"),
])
def test_bad_schema_ids(kwargs, message):
    with pytest.raises(FramingError, match=message):
        SchemaId(**kwargs)


def test_encode_refuses_what_it_cannot_write():
    with pytest.raises(FramingError, match="magic byte 0 needs a schema id"):
        framing.encode(SchemaId(guid=GUID), b"", with_indexes=False, magic=0)
    with pytest.raises(FramingError, match="magic byte 1 needs a schema guid"):
        framing.encode(SchemaId(1), b"", with_indexes=False, magic=1)
    with pytest.raises(FramingError, match="unknown magic byte 2"):
        framing.encode(SchemaId(1), b"", with_indexes=False, magic=2)
    with pytest.raises(FramingError, match="only with_indexes=True"):
        framing.encode(SchemaId(1, message_indexes=(1,)), b"", with_indexes=False)
    assert SchemaId(guid=str(GUID)).guid == GUID


# --- round trips and fuzz ---

ids = st.builds(SchemaId,
                id=st.integers(0, 2**31 - 1) | st.none(),
                guid=st.uuids(),
                message_indexes=st.none() | st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=6).map(tuple))


@settings(max_examples=300, deadline=None)
@given(ids, st.binary(max_size=20), st.booleans())
def test_round_trip(schema_id, payload, use_guid):
    with_indexes = schema_id.message_indexes is not None
    magic = 1 if use_guid or schema_id.id is None else 0
    data = framing.encode(schema_id, payload, with_indexes=with_indexes, magic=magic)
    parsed, offset = framing.decode(data, with_indexes=with_indexes)
    assert data[offset:] == payload
    assert parsed == SchemaId(schema_id.id if magic == 0 else None, schema_id.guid if magic == 1 else None,
                              schema_id.message_indexes)
    theirs = CkSchemaId("PROTOBUF" if with_indexes else "AVRO")
    assert theirs.from_bytes(io.BytesIO(data)).read() == payload
    assert (theirs.id, theirs.guid) == (parsed.id, parsed.guid)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40), st.booleans())
def test_any_bytes_decode_or_raise_framing_error(data, with_indexes):
    try:
        schema_id, offset = framing.decode(data, with_indexes=with_indexes)
    except FramingError as exc:
        assert str(exc)
        return
    assert 5 <= offset <= len(data)
    again = framing.encode(schema_id, data[offset:], with_indexes=with_indexes, magic=data[0])
    assert framing.decode(again, with_indexes=with_indexes) == (schema_id, len(again) - (len(data) - offset))


# --- confluent-kafka's serializers against the broker's registry ---

AVRO_SCHEMA = '{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}'
PROTO_SCHEMA = """syntax = "proto3";
package framing.test;
message First { string a = 1; }
message Outer {
  message Inner { string name = 1; }
  Inner inner = 1;
}
"""


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory):
    from tests.support.broker import BrokerProcess

    broker = BrokerProcess(tmp_path_factory.mktemp("framing-registry"),
                           {"schema.registry.listeners": "http://127.0.0.1:0"}, name="framing")
    broker.start()
    yield broker.schema_registry_url
    broker.stop()


def _proto_classes(tmp_path):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from grpc_tools import protoc

    (tmp_path / "framing_test.proto").write_text(PROTO_SCHEMA)
    out = tmp_path / "framing_test.desc"
    assert protoc.main(["protoc", f"-I{tmp_path}", f"--descriptor_set_out={out}",
                        str(tmp_path / "framing_test.proto")]) == 0
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for proto in files.file:
        pool.Add(proto)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"framing.test.{name}"))
            for name in ("First", "Outer.Inner")}


def test_confluent_avro_serializer_through_the_registry(registry_url):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    client = SchemaRegistryClient({"url": registry_url})
    ser = AvroSerializer(client, AVRO_SCHEMA)
    ctx = SerializationContext("framing-avro", MessageField.VALUE)
    data = ser({"name": "ann"}, ctx)
    schema_id = client.get_latest_version("framing-avro-value").schema_id
    assert data == framing.encode(SchemaId(schema_id), b"\x06ann", with_indexes=False)
    # the GUID form, in a header
    headers: list = []
    hser = AvroSerializer(client, AVRO_SCHEMA, conf={"schema.id.serializer": header_schema_id_serializer})
    hctx = SerializationContext("framing-avro", MessageField.VALUE, headers)
    assert hser({"name": "ann"}, hctx) == b"\x06ann"
    found = framing.find_schema_id(headers, is_key=False, with_indexes=False)
    assert found is not None and found.guid is not None
    assert client.get_schema_by_guid(str(found.guid)).schema_str is not None
    assert AvroDeserializer(client)(data, ctx) == {"name": "ann"}


def test_confluent_protobuf_serializer_through_the_registry(registry_url, tmp_path):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    client = SchemaRegistryClient({"url": registry_url})
    classes = _proto_classes(tmp_path)
    conf = {"use.deprecated.format": False}
    for name, indexes in (("First", (0,)), ("Outer.Inner", (1, 0))):
        cls = classes[name]
        ser = ProtobufSerializer(cls, client, conf)
        ctx = SerializationContext(f"framing-proto-{name}", MessageField.VALUE)
        msg = cls(**({"a": "x"} if name == "First" else {"name": "x"}))
        data = ser(msg, ctx)
        parsed, offset = framing.decode(data, with_indexes=True)
        assert parsed.message_indexes == indexes
        assert data[offset:] == msg.SerializeToString()
        assert data == framing.encode(parsed, msg.SerializeToString(), with_indexes=True)
