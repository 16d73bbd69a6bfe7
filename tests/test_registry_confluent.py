"""The broker's Schema Registry (``broker.server.registry``) driven by confluent-kafka's own
``SchemaRegistryClient`` and serializers, against the real broker in a subprocess.

Covered: ids and identity (the same schema gets one id under every subject, GUIDs), a
compatible v2 accepted and an incompatible v3 refused with 409, configs and modes round
tripping (READONLY refuses writes, IMPORT takes given ids), soft then hard deletes as
Confluent's registry answers them, everything unchanged after a restart, the Avro,
Protobuf (with an import and a well-known type) and JSON Schema serializers round-tripping
records through the broker, ``_schemas`` refused to producers, and ``dump-log`` showing
its records readably.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.schema_registry import (
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    record_subject_name_strategy,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.broker import BrokerProcess

REGISTRY = {"schema.registry.listeners": "http://127.0.0.1:0", "num.partitions": "1"}

USER_V1 = json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": [
    {"name": "name", "type": "string"},
    {"name": "age", "type": "int"},
]})
# v2: a field added with a default, one removed: BACKWARD compatible
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": [
    {"name": "name", "type": "string"},
    {"name": "email", "type": ["null", "string"], "default": None},
]})
# v3: a field added without a default: not BACKWARD compatible
USER_V3 = json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": [
    {"name": "name", "type": "string"},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "country", "type": "string"},
]})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("registry"), REGISTRY, name="registry")
    broker.start()
    yield broker
    broker.kill()


def client(broker: BrokerProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": broker.schema_registry_url})


def test_the_same_schema_gets_one_id_under_every_subject(registry_broker):
    sr = client(registry_broker)
    subject = unique("users-value")
    first = sr.register_schema_full_response(subject, Schema(USER_V1, "AVRO"))
    again = client(registry_broker).register_schema_full_response(subject, Schema(USER_V1, "AVRO"))
    assert again.schema_id == first.schema_id and again.version == first.version == 1
    # whitespace and key order do not make another schema
    spaced = json.dumps(json.loads(USER_V1), indent=4)
    other = client(registry_broker).register_schema_full_response(unique("other-value"), Schema(spaced, "AVRO"))
    assert other.schema_id == first.schema_id
    assert first.guid and other.guid == first.guid
    fetched = client(registry_broker).get_schema(first.schema_id)
    assert json.loads(fetched.schema_str) == json.loads(USER_V1)
    by_guid = client(registry_broker).get_schema_by_guid(first.guid)
    assert json.loads(by_guid.schema_str) == json.loads(USER_V1)
    # a default changed is another schema: a new id, the highest plus one
    changed = json.loads(USER_V1)
    changed["fields"][1]["default"] = 7
    third = client(registry_broker).register_schema(unique("third-value"), Schema(json.dumps(changed), "AVRO"))
    assert third > first.schema_id
    assert sr.get_subjects().count(subject) == 1
    versions = sr.get_schema_versions(first.schema_id)
    assert {(v.subject, v.version) for v in versions} >= {(subject, 1)}


def test_a_compatible_v2_is_accepted_and_an_incompatible_v3_refused(registry_broker):
    sr = client(registry_broker)
    subject = unique("evolve-value")
    id1 = sr.register_schema(subject, Schema(USER_V1, "AVRO"))
    assert sr.test_compatibility(subject, Schema(USER_V2, "AVRO"))
    id2 = sr.register_schema(subject, Schema(USER_V2, "AVRO"))
    assert id2 != id1
    assert sr.get_latest_version(subject).version == 2
    assert not sr.test_compatibility(subject, Schema(USER_V3, "AVRO"))
    with pytest.raises(SchemaRegistryError) as refused:
        sr.register_schema(subject, Schema(USER_V3, "AVRO"))
    assert refused.value.http_status_code == 409
    assert "country" in refused.value.error_message
    assert sr.get_versions(subject) == [1, 2]
    # verbose says what broke
    req = urllib.request.Request(
        f"{registry_broker.schema_registry_url}/compatibility/subjects/{subject}/versions/latest?verbose=true",
        data=json.dumps({"schema": USER_V3}).encode(), method="POST",
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    answer = json.loads(urllib.request.urlopen(req, timeout=10).read())
    assert answer["is_compatible"] is False
    assert any("READER_FIELD_MISSING_DEFAULT_VALUE" in m and "country" in m for m in answer["messages"])
    # NONE lets it through
    sr.set_compatibility(subject, "NONE")
    assert sr.register_schema(subject, Schema(USER_V3, "AVRO")) > id2


def test_configs_and_modes_round_trip(registry_broker):
    sr = client(registry_broker)
    subject = unique("config-value")
    sr.register_schema(subject, Schema(USER_V1, "AVRO"))
    assert sr.get_compatibility() in ("BACKWARD", "FULL", "NONE")
    sr.set_compatibility(subject, "FULL_TRANSITIVE")
    assert sr.get_compatibility(subject) == "FULL_TRANSITIVE"
    with pytest.raises(SchemaRegistryError) as none:
        sr.get_compatibility(unique("never"))
    assert none.value.error_code in (40401, 40408)
    assert sr.update_mode(subject, "READONLY") == "READONLY"
    assert sr.get_mode(subject) == "READONLY"
    with pytest.raises(SchemaRegistryError) as readonly:
        sr.register_schema(subject, Schema(USER_V2, "AVRO"))
    assert readonly.value.error_code == 42205
    assert sr.delete_mode(subject) == "READONLY"
    assert sr.register_schema(subject, Schema(USER_V1, "AVRO")) > 0  # writable again (already there)
    # IMPORT takes the ids it is given
    imported = unique("import-value")
    sr.update_mode(imported, "IMPORT", force=True)
    schema = json.dumps({"type": "record", "name": unique("Imp").replace("-", "_"), "fields": []})
    body = json.dumps({"schema": schema, "id": 900001, "version": 7}).encode()
    req = urllib.request.Request(f"{registry_broker.schema_registry_url}/subjects/{imported}/versions",
                                 data=body, method="POST", headers={"Content-Type": "application/json"})
    answer = json.loads(urllib.request.urlopen(req, timeout=10).read())
    assert answer["id"] == 900001 and answer["version"] == 7
    assert sr.get_schema(900001).schema_str == schema.replace(" ", "")


def test_soft_then_hard_delete_behave_as_confluents(registry_broker):
    sr = client(registry_broker)
    subject = unique("delete-value")
    sid = sr.register_schema(subject, Schema(USER_V1, "AVRO"))
    sr.register_schema(subject, Schema(USER_V2, "AVRO"))
    with pytest.raises(SchemaRegistryError) as not_soft:
        sr.delete_subject(subject, permanent=True)
    assert not_soft.value.error_code == 40405
    assert sr.delete_version(subject, 1) == 1
    assert sr.get_versions(subject) == [2]
    assert sr.delete_subject(subject) == [2]
    assert subject not in sr.get_subjects()
    with pytest.raises(SchemaRegistryError) as gone:
        sr.get_latest_version(subject)
    assert gone.value.error_code == 40401
    # the soft-deleted subject is still listed with deleted=true, and the id still resolves
    assert subject in sr.get_subjects(deleted=True)
    assert json.loads(sr.get_schema(sid).schema_str) == json.loads(USER_V1)
    with pytest.raises(SchemaRegistryError) as twice:
        sr.delete_subject(subject)
    assert twice.value.error_code == 40404
    assert sr.delete_subject(subject, permanent=True) == [1, 2]
    assert subject not in sr.get_subjects(deleted=True)
    # a new registration starts again at version 1
    assert client(registry_broker).register_schema_full_response(subject, Schema(USER_V1, "AVRO")).version == 1


def test_ids_guids_and_versions_survive_a_restart(tmp_path):
    broker = BrokerProcess(tmp_path / "b", REGISTRY).start()
    try:
        sr = client(broker)
        a = sr.register_schema_full_response("a-value", Schema(USER_V1, "AVRO"))
        b = sr.register_schema_full_response("a-value", Schema(USER_V2, "AVRO"))
        sr.set_compatibility("a-value", "FORWARD")
        sr.register_schema("gone-value", Schema(USER_V1, "AVRO"))
        sr.delete_subject("gone-value")
        broker.restart()
        sr = client(broker)
        assert sr.get_latest_version("a-value").version == 2
        assert sr.get_version("a-value", 1).schema_id == a.schema_id
        assert sr.get_version("a-value", 2).schema_id == b.schema_id
        assert sr.get_schema_by_guid(b.guid).schema_str == sr.get_schema(b.schema_id).schema_str
        assert sr.get_compatibility("a-value") == "FORWARD"
        assert sr.get_subjects() == ["a-value"]
        # the next id continues after the highest
        assert sr.register_schema("c-value", Schema(USER_V3, "AVRO")) == b.schema_id + 1
    finally:
        broker.stop()


def _round_trip(broker: BrokerProcess, topic: str, serializer, deserializer, values: list) -> list:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(topic, serializer(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out: list = []
    try:
        for _ in range(60):
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                if len(out) == len(values):
                    break
                continue
            out.append(deserializer(msg.value(), SerializationContext(topic, MessageField.VALUE)))
            if len(out) == len(values):
                break
    finally:
        consumer.close()
    return out


def test_the_avro_serializer_round_trips_through_the_broker(registry_broker):
    sr = client(registry_broker)
    topic = unique("avro")
    values = [{"name": f"user{i}", "age": i} for i in range(20)]
    ser = AvroSerializer(sr, USER_V1)
    de = AvroDeserializer(client(registry_broker))
    assert _round_trip(registry_broker, topic, ser, de, values) == values
    assert sr.get_latest_version(f"{topic}-value").schema.schema_type == "AVRO"


def test_a_record_name_strategy_producer_and_a_default_deserializer(registry_broker):
    """The producer registers under the record's name (RecordNameStrategy); the consumer's
    deserializer, on its default strategy, asks for the id with ``?subject=<topic>-value``,
    a subject that does not hold it. As Confluent's registry, the subject names the context
    to look in (the default one here), not a filter: the schema is found. A subject of
    another context finds nothing."""
    sr = client(registry_broker)
    topic = unique("by-record")
    values = [{"name": f"user{i}", "age": i} for i in range(5)]
    ser = AvroSerializer(sr, USER_V1, conf={"subject.name.strategy": record_subject_name_strategy})
    de = AvroDeserializer(client(registry_broker))
    assert _round_trip(registry_broker, topic, ser, de, values) == values
    schema_id = sr.get_latest_version("com.example.User").schema_id
    base = registry_broker.schema_registry_url
    for path in (f"/schemas/ids/{schema_id}?subject={topic}-value", f"/schemas/ids/{schema_id}?subject=none",
                 f"/schemas/ids/{schema_id}/schema?subject=none"):
        with urllib.request.urlopen(base + path, timeout=10) as answer:
            assert answer.status == 200, path
    with urllib.request.urlopen(f"{base}/schemas/ids/{schema_id}/subjects?subject=none", timeout=10) as answer:
        assert "com.example.User" in json.loads(answer.read())
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(f"{base}/schemas/ids/{schema_id}?subject=:.other:x", timeout=10)
    assert raised.value.code == 404 and json.loads(raised.value.read())["error_code"] == 40403


def test_the_json_serializer_round_trips_through_the_broker(registry_broker):
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
                         "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
                         "required": ["id"]})
    topic = unique("json")
    values = [{"id": i, "item": f"thing {i}"} for i in range(10)]
    ser = JSONSerializer(schema, client(registry_broker))
    de = JSONDeserializer(schema)
    assert _round_trip(registry_broker, topic, ser, de, values) == values
    latest = client(registry_broker).get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "JSON"
    with pytest.raises(Exception, match="id"):  # the serializer validates: a document the schema refuses
        ser({"item": "no id"}, SerializationContext(topic, MessageField.VALUE))


def test_the_protobuf_serializer_with_an_import_and_a_well_known_type(registry_broker):
    from tests.support.registry_protobuf import order_classes

    order_cls = order_classes()
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    sr = client(registry_broker)
    topic = unique("proto")
    ser = ProtobufSerializer(order_cls, sr, {"use.deprecated.format": False})
    de = ProtobufDeserializer(order_cls, {"use.deprecated.format": False})
    values = []
    for i in range(5):
        m = order_cls(id=i)
        m.customer.name = f"c{i}"
        m.created.seconds = 1700000000 + i
        values.append(m)
    back = _round_trip(registry_broker, topic, ser, de, values)
    assert back == values
    latest = sr.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF"
    # the import was registered as a reference; the well-known type was not
    refs = latest.schema.references
    assert [r.name for r in refs] == ["kafkalog_test/customer.proto"]
    assert "import \"google/protobuf/timestamp.proto\"" in latest.schema.schema_str
    # the .proto text of the same file registers as the same schema (one id)
    again = sr.register_schema(f"{topic}-value", Schema(latest.schema.schema_str, "PROTOBUF",
                                                        [SchemaReference(r.name, r.subject, r.version)
                                                         for r in refs]))
    assert again == latest.schema_id


def test_clients_cannot_produce_to_the_registry_topic(registry_broker):
    client(registry_broker).register_schema(unique("x-value"), Schema(USER_V1, "AVRO"))
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap, "message.send.max.retries": 0})
    errors = []
    producer.produce("_schemas", key=b'{"keytype":"NOOP","magic":0}', value=None,
                     on_delivery=lambda err, msg: errors.append(err))
    producer.flush(20)
    assert errors and errors[0] is not None
    assert errors[0].code() in (KafkaException, 44) or "POLICY" in errors[0].name() or errors[0].code() == 44


def test_dump_log_shows_the_registry_records_readably(registry_broker):
    subject = unique("dump-value")
    client(registry_broker).register_schema(subject, Schema(USER_V1, "AVRO"))
    segments = sorted((registry_broker.log_dir / "_schemas-0").glob("*.log"))
    out = subprocess.run([sys.executable, "-m", "spark_kafkalog.cli", "dump-log", "--files", str(segments[0]),
                          "--print-data-log"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f'"keytype":"SCHEMA","subject":"{subject}","version":1,"magic":1' in out.stdout
    assert '\\"name\\":\\"age\\",\\"type\\":\\"int\\"' in out.stdout  # the schema, a JSON string


def _get(broker: BrokerProcess, path: str):
    with urllib.request.urlopen(f"{broker.schema_registry_url}{path}", timeout=10) as r:
        return json.loads(r.read())


def test_json_schema_references_across_subjects(registry_broker):
    sr = client(registry_broker)
    address = json.dumps({"$id": "address.json", "type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]})
    addr_subject = unique("address")
    sr.register_schema(addr_subject, Schema(address, "JSON"))
    person = json.dumps({"type": "object", "properties": {"name": {"type": "string"},
                                                           "home": {"$ref": "address.json"}}})
    refs = [SchemaReference("address.json", addr_subject, 1)]
    pid = sr.register_schema(unique("person-value"), Schema(person, "JSON", refs))
    assert _get(registry_broker, f"/subjects/{addr_subject}/versions/1/referencedby") == [pid]
    fetched = _get(registry_broker, f"/schemas/ids/{pid}")
    assert fetched["schemaType"] == "JSON" and fetched["references"][0]["subject"] == addr_subject
    # a referenced version cannot be deleted
    with pytest.raises(SchemaRegistryError) as referenced:
        sr.delete_version(addr_subject, 1)
    assert referenced.value.error_code == 42206
    # the reference must resolve: a $ref to a name with no reference is refused
    with pytest.raises(SchemaRegistryError) as missing:
        sr.register_schema(unique("person-value"), Schema(person, "JSON"))
    assert missing.value.error_code == 42201


def test_protobuf_is_answered_as_proto_text_or_serialized(registry_broker):
    import base64

    from google.protobuf import descriptor_pb2

    sr = client(registry_broker)
    proto = ('syntax = "proto3";\npackage kafkalog.fmt;\n\n'
             'message Reading {\n  double value = 1;\n  string unit = 2;\n}\n')
    sid = sr.register_schema(unique("reading-value"), Schema(proto, "PROTOBUF"))
    text = _get(registry_broker, f"/schemas/ids/{sid}")["schema"]
    assert "message Reading" in text and "double value = 1;" in text
    serialized = _get(registry_broker, f"/schemas/ids/{sid}?format=serialized")["schema"]
    fd = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert fd.package == "kafkalog.fmt" and [f.name for f in fd.message_type[0].field] == ["value", "unit"]
    # the serialized form registers as the same schema
    assert sr.register_schema(unique("reading2-value"), Schema(serialized, "PROTOBUF")) == sid
    # normalize=true stores the normal form (Confluent's: the Parsing Canonical Form's layout
    # with defaults and docs kept), one schema for texts that differ only in layout
    a = json.dumps({"type": "record", "name": "Norm", "namespace": "n.s", "fields": [
        {"name": "x", "type": "int", "doc": "one", "default": 1}]})
    b = json.dumps({"fields": [{"default": 1, "type": "int", "doc": "one", "name": "x"}], "type": "record",
                    "name": "n.s.Norm"})
    na = sr.register_schema(unique("norm-value"), Schema(a, "AVRO"), normalize_schemas=True)
    assert sr.register_schema(unique("norm-value"), Schema(b, "AVRO"), normalize_schemas=True) == na
    from broker.schema import parse_schema

    stored = sr.get_schema(na).schema_str
    assert stored == parse_schema("AVRO", a).normalize().canonical_string()
    assert json.loads(stored)["fields"][0]["default"] == 1
