"""``kafkalog produce`` / ``kafkalog consume`` with Schema Registry formats
(broker/tools/schema_serde.py and its use by console_producer.py / console_consumer.py),
against the REAL broker and its Schema Registry (``schema.registry.listeners``), the
console script in a subprocess (in-process ``main`` for the one-line errors).

Covered, each side against confluent-kafka's own serde:

- produce: Avro (a union of records keeps its branch; keys with ``key.schema``), Protobuf
  (``value.schema.message`` picks the second message: message indexes ``[1]``) and JSON
  Schema values, read back equal by confluent-kafka's ``AvroDeserializer`` /
  ``ProtobufDeserializer`` / ``JSONDeserializer``, framed with the id the registry gave the
  subject; ``value.schema.id``; ``use.latest.version``; ``RecordNameStrategy`` and
  ``TopicRecordNameStrategy`` subjects; an incompatible schema refused (409) with nothing
  sent; ``auto.register=false`` with an unknown schema; a bad line (the records before it
  delivered, nothing after); an unreachable registry;
- consume: values written by confluent-kafka's Avro (magic 0, the GUID in the
  ``__value_schema_id`` header, a magic-1 GUID prefix), Protobuf and JSON serializers
  printed as JSON; ``print.schema.ids`` / ``schema.id.separator`` and ``key.format``;
  a plain-text value, an unknown id and a truncated payload each told on stderr with its
  topic, partition and offset and skipped (exit 1 at the end); ``value.format`` mismatch;
- malformed input under hypothesis: a line never raises anything but ``LineSchemaError``,
  a payload nothing but ``RecordDecodeError``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, header_schema_id_serializer
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.common.serde import SchemaId as CkSchemaId
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.tools.schema_serde import LineSchemaError, RecordDecodeError
from spark_kafkalog.cli.main import main
from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.timeout(120)

SCRIPT = Path(sys.executable).parent / "kafkalog"
USER = json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": [
    {"name": "name", "type": "string"},
    {"name": "age", "type": "int"},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "contact", "type": ["null",
                                {"type": "record", "name": "Phone", "fields": [{"name": "n", "type": "string"}]},
                                {"type": "record", "name": "Mail", "fields": [{"name": "n", "type": "string"}]}],
     "default": None},
]})
# not BACKWARD compatible with USER: a field without a default
USER_BREAKING = json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": [
    {"name": "name", "type": "string"}, {"name": "country", "type": "string"}]})
SHOP_PROTO = """syntax = "proto3";
package shop;

message Item {
  string sku = 1;
  int32 qty = 2;
}

message Order {
  int64 id = 1;
  repeated Item items = 2;
  map<string, string> tags = 3;
}
"""
THING = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Thing", "type": "object",
                    "properties": {"id": {"type": "integer"}, "label": {"type": "string"}}, "required": ["id"]})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("schema-console"),
                      {"schema.registry.listeners": "http://127.0.0.1:0", "num.partitions": "1"}, name="schema-console")
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    """shop.Item and shop.Order, compiled from SHOP_PROTO by protoc (grpcio-tools)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from grpc_tools import protoc

    tmp = tmp_path_factory.mktemp("proto")
    (tmp / "shop.proto").write_text(SHOP_PROTO)
    out = tmp / "shop.desc"
    assert protoc.main(["protoc", f"-I{tmp}", f"--descriptor_set_out={out}", str(tmp / "shop.proto")]) == 0
    pool = descriptor_pool.DescriptorPool()
    for proto in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        pool.Add(proto)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"shop.{n}")) for n in ("Item", "Order")}


class Result:
    def __init__(self, proc: subprocess.CompletedProcess) -> None:
        self.code, self.out, self.err = proc.returncode, proc.stdout, proc.stderr

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    @property
    def errors(self) -> list[str]:
        return [line for line in self.err.splitlines() if not line.startswith("Processed a total")]


def kafkalog(*args: str, input: str | None = None) -> Result:
    return Result(subprocess.run([str(SCRIPT), *args], input=input, capture_output=True, text=True, timeout=60))


def produce(broker: BrokerProcess, topic: str, lines: list[str], *props: str) -> Result:
    argv = ["produce", "--bootstrap-server", broker.bootstrap, "--topic", topic,
            "--property", f"schema.registry.url={broker.schema_registry_url}"]
    for prop in props:
        argv += ["--property", prop]
    return kafkalog(*argv, input="".join(f"{line}\n" for line in lines))


def consume(broker: BrokerProcess, topic: str, count: int, *props: str, flags: tuple[str, ...] = ()) -> Result:
    argv = ["consume", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning",
            "--max-messages", str(count), "--timeout-ms", "10000", "--property",
            f"schema.registry.url={broker.schema_registry_url}", *flags]
    for prop in props:
        argv += ["--property", prop]
    return kafkalog(*argv)


def registry(broker: BrokerProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": broker.schema_registry_url})


def read_raw(broker: BrokerProcess, topic: str) -> list:
    """Every record of partition 0, with confluent-kafka (an independent client)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("verify"),
                         "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        out: list = []
        while len(out) < high - low:
            msg = consumer.poll(5.0)
            assert msg is not None, f"{len(out)} of {high - low} records read"
            if msg.error() is None:
                out.append(msg)
        return out
    finally:
        consumer.close()


def send_raw(broker: BrokerProcess, topic: str, records: list[tuple]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for key, value, headers in records:
        producer.produce(topic, value=value, key=key, headers=headers, partition=0)
    assert producer.flush(30) == 0


def ctx(topic: str, field=MessageField.VALUE, headers=None) -> SerializationContext:
    return SerializationContext(topic, field, headers)


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if not line.startswith("Processed a total")]
    assert len(lines) == 1, err
    return lines[0]


# --- produce -----------------------------------------------------------------------------

def test_avro_values_and_keys_are_read_back_by_confluents_deserializer(broker):
    topic = unique("avro")
    lines = ['"k1"|{"name":"ann","age":31,"email":{"string":"a@example.com"},"contact":{"com.example.Mail":{"n":"a"}}}',
             '"k2"|{"name":"bob","age":7,"email":null,"contact":{"com.example.Phone":{"n":"555"}}}',
             '"k3"|{"name":"cid","age":-1,"email":null,"contact":null}']
    result = produce(broker, topic, lines, f"value.schema={USER}", "parse.key=true", "key.separator=|",
                     'key.schema="string"')
    assert (result.code, result.err) == (0, "")
    sr = registry(broker)
    value_id = sr.get_latest_version(f"{topic}-value").schema_id
    key_id = sr.get_latest_version(f"{topic}-key").schema_id
    records = read_raw(broker, topic)
    assert [m.value()[:5] for m in records] == [b"\x00" + value_id.to_bytes(4, "big")] * 3
    assert [m.key()[:5] for m in records] == [b"\x00" + key_id.to_bytes(4, "big")] * 3
    values = AvroDeserializer(sr, return_record_name=True)
    keys = AvroDeserializer(sr)
    assert [keys(m.key(), ctx(topic, MessageField.KEY)) for m in records] == ["k1", "k2", "k3"]
    assert [values(m.value(), ctx(topic)) for m in records] == [
        {"name": "ann", "age": 31, "email": "a@example.com", "contact": ("com.example.Mail", {"n": "a"})},
        {"name": "bob", "age": 7, "email": None, "contact": ("com.example.Phone", {"n": "555"})},
        {"name": "cid", "age": -1, "email": None, "contact": None},
    ]
    # and kafkalog consume prints them back as they were written (keys decoded too)
    back = consume(broker, topic, 3, "key.format=avro", flags=("--print-key",))
    assert back.code == 0, back.err
    assert back.lines == [f'{line[:4]}\t{json.dumps(json.loads(line[5:]), separators=(",", ":"))}'
                          for line in lines]


def test_protobuf_values_pick_their_message_and_are_read_back(broker, shop):
    topic = unique("proto")
    result = produce(broker, topic, ['{"id":"7","items":[{"sku":"a","qty":2}],"tags":{"k":"v"}}', '{"id":8}'],
                     "value.format=protobuf", f"value.schema={SHOP_PROTO}", "value.schema.message=Order")
    assert (result.code, result.err) == (0, "")
    records = read_raw(broker, topic)
    schema_id = registry(broker).get_latest_version(f"{topic}-value").schema_id
    # magic 0, the id, the message indexes [1] (Order is the second message), the payload
    assert [m.value()[:7] for m in records] == [b"\x00" + schema_id.to_bytes(4, "big") + b"\x02\x02"] * 2
    de = ProtobufDeserializer(shop["Order"], {"use.deprecated.format": False})
    expected = [shop["Order"](id=7, items=[shop["Item"](sku="a", qty=2)], tags={"k": "v"}), shop["Order"](id=8)]
    assert [de(m.value(), ctx(topic)) for m in records] == expected


def test_json_schema_values_are_validated_and_read_back(broker):
    topic = unique("json")
    result = produce(broker, topic, ['{"id": 1, "label": "first"}', '{"id":2}'], "value.format=json",
                     f"value.schema={THING}")
    assert (result.code, result.err) == (0, "")
    de = JSONDeserializer(None, schema_registry_client=registry(broker))
    assert [de(m.value(), ctx(topic)) for m in read_raw(broker, topic)] == [{"id": 1, "label": "first"}, {"id": 2}]
    assert registry(broker).get_latest_version(f"{topic}-value").schema.schema_type == "JSON"
    # a document the schema refuses stops the command at its line; the one before is delivered
    bad = produce(broker, topic, ['{"id":3}', '{"label":"no id"}', '{"id":4}'], "value.format=json",
                  f"value.schema={THING}")
    assert bad.code == 1
    line = one_line(bad.err)
    assert line.startswith("kafkalog produce: error: stdin line 2: the value does not fit its schema (id ")
    assert "'id' is a required property" in line and "the 1 record before it was" in line
    assert [json.loads(m.value()[5:]) for m in read_raw(broker, topic)][2:] == [{"id": 3}]


def test_schema_by_id_latest_version_and_record_name_strategies(broker):
    sr = registry(broker)
    topic = unique("by-id")
    schema_id = sr.register_schema(unique("elsewhere"), Schema(USER, "AVRO"))
    record = '{"name":"ann","age":1,"email":null,"contact":null}'
    assert produce(broker, topic, [record], f"value.schema.id={schema_id}").code == 0
    assert read_raw(broker, topic)[0].value()[:5] == b"\x00" + schema_id.to_bytes(4, "big")
    assert f"{topic}-value" not in sr.get_subjects()  # an id registers nothing
    # the latest version of the subject
    latest_topic = unique("latest")
    latest_id = sr.register_schema(f"{latest_topic}-value", Schema(USER, "AVRO"))
    assert produce(broker, latest_topic, [record], "use.latest.version=true").code == 0
    assert read_raw(broker, latest_topic)[0].value()[:5] == b"\x00" + latest_id.to_bytes(4, "big")
    # the record's full name as the subject, with the topic or not
    named = json.dumps({**json.loads(USER), "name": f"U{uuid.uuid4().hex[:6]}"})
    full = f"com.example.{json.loads(named)['name']}"
    for strategy, subject in (("io.confluent.kafka.serializers.subject.RecordNameStrategy", full),
                              ("TopicRecordNameStrategy", f"{topic}-{full}")):
        result = produce(broker, topic, [record], f"value.schema={named}", f"value.subject.name.strategy={strategy}")
        assert result.code == 0, result.err
        assert sr.get_latest_version(subject).schema_id == int.from_bytes(read_raw(broker, topic)[-1].value()[1:5])


def test_an_incompatible_schema_is_refused_before_anything_is_sent(broker):
    topic = unique("evolve")
    sr = registry(broker)
    sr.register_schema(f"{topic}-value", Schema(USER, "AVRO"))
    sr.set_compatibility(f"{topic}-value", "BACKWARD")
    result = produce(broker, topic, ['{"name":"x","country":"y"}'], f"value.schema={USER_BREAKING}")
    assert result.code == 1
    line = one_line(result.err)
    assert line.startswith(f"kafkalog produce: error: registering the value schema under subject {topic}-value: ")
    assert "country" in line and "(HTTP 409, error code 409)" in line
    assert read_raw(broker, topic) == []
    assert sr.get_versions(f"{topic}-value") == [1]
    # auto.register=false: looked up, not registered
    missing = produce(broker, topic, ['{"name":"x","country":"y"}'], f"value.schema={USER_BREAKING}",
                      "auto.register=false")
    assert missing.code == 1 and "looking up the value schema under subject" in one_line(missing.err)
    assert "(HTTP 404" in missing.err and read_raw(broker, topic) == []


def test_a_bad_avro_line_stops_the_command_after_delivering_the_ones_before(broker):
    topic = unique("bad-line")
    ok = '{"name":"ann","age":1,"email":null,"contact":null}'
    for bad, reason in (('{"name":"bob","age":1,"email":"not in a union","contact":null}', '{"string": "x"}'),
                        ('{"name":"bob","age":3000000000,"email":null,"contact":null}', "expected int"),
                        ("not json", "not JSON")):
        result = produce(broker, topic, [ok, bad, ok], f"value.schema={USER}")
        assert result.code == 1
        line = one_line(result.err)
        assert line.startswith("kafkalog produce: error: stdin line 2: the value does not fit its schema"), line
        assert reason in line and "nothing after it was sent; the 1 record before it was" in line
    assert len(read_raw(broker, topic)) == 3


# --- consume ------------------------------------------------------------------------------

def test_values_written_by_confluents_serializers_print_as_json(broker, shop):
    sr = registry(broker)
    topic = unique("mixed")
    avro = AvroSerializer(sr, USER)
    avro_value = {"name": "ann", "age": 3, "email": "a@x", "contact": ("com.example.Phone", {"n": "5"})}
    framed = avro(avro_value, ctx(topic))
    headers: list = []
    header_framed = AvroSerializer(sr, USER, conf={"schema.id.serializer": header_schema_id_serializer})(
        {"name": "hdr", "age": 4, "email": None, "contact": None}, ctx(topic, headers=headers))
    guid = sr.get_latest_version(f"{topic}-value").guid
    guid_prefixed = CkSchemaId("AVRO", None, guid).guid_to_bytes() + framed[5:]
    proto = ProtobufSerializer(shop["Order"], sr, {"use.deprecated.format": False,
                                                   "subject.name.strategy": lambda c, name: f"{topic}-{name}"})
    order = shop["Order"](id=9, items=[shop["Item"](sku="s")])
    json_ser = JSONSerializer(THING, sr, conf={"subject.name.strategy": lambda c, name: f"{topic}-{name}"})
    send_raw(broker, topic, [
        (b"k0", framed, None),
        (b"k1", header_framed, headers),
        (b"k2", guid_prefixed, None),
        (b"k3", proto(order, ctx(topic)), None),
        (b"k4", json_ser({"id": 5, "label": "\u00e9t\u00e9"}, ctx(topic)), None),
        (b"k5", b"plain text", None),
        (b"k6", b"\x00\x7f\xff\xff\xff" + framed[5:], None),  # an id the registry does not have
        (b"k7", framed[:8], None),  # cut short
        (b"k8", None, None),
    ])
    result = consume(broker, topic, 9, "key.deserializer=org.apache.kafka.common.serialization.StringDeserializer",
                     flags=("--print-key", "--print-offset"))
    assert result.code == 1
    assert result.lines == [
        'Offset:0\tk0\t{"name":"ann","age":3,"email":{"string":"a@x"},"contact":{"com.example.Phone":{"n":"5"}}}',
        'Offset:1\tk1\t{"name":"hdr","age":4,"email":null,"contact":null}',
        'Offset:2\tk2\t{"name":"ann","age":3,"email":{"string":"a@x"},"contact":{"com.example.Phone":{"n":"5"}}}',
        'Offset:3\tk3\t{"id":"9","items":[{"sku":"s","qty":0}],"tags":{}}',
        'Offset:4\tk4\t{"id":5,"label":"\u00e9t\u00e9"}',
        "Offset:8\tk8\tnull",
    ]
    errors = result.errors
    assert errors[:3] == [
        f"kafkalog consume: topic {topic} partition 0 offset 5: cannot deserialize the value: bad frame: unknown "
        "magic byte 0x70: not Confluent-framed data (0x00: schema id, 0x01: schema guid); skipped",
        f"kafkalog consume: topic {topic} partition 0 offset 6: cannot deserialize the value: schema 2147483647 is "
        "not in the registry: " + errors[1].split("is not in the registry: ", 1)[1],
        f"kafkalog consume: topic {topic} partition 0 offset 7: cannot deserialize the value: not Avro data of the "
        "schema " + errors[2].split("not Avro data of the schema ", 1)[1],
    ]
    assert errors[1].endswith("(HTTP 404, error code 40403); skipped")
    assert errors[3] == "kafkalog consume: error: 3 records could not be deserialized (each told above, not printed)"
    assert "Processed a total of 9 messages" in result.err
    # the schema ids, Confluent's layout; value.format asks for Avro: the Protobuf one is refused
    ids = consume(broker, topic, 5, "print.schema.ids=true", "schema.id.separator=:", "value.format=avro")
    avro_id = sr.get_latest_version(f"{topic}-value").schema_id
    proto_id = sr.get_latest_version(f"{topic}-shop.Order").schema_id
    assert ids.lines[:3] == [f"{line.split(chr(9), 2)[2]}:{avro_id}" for line in result.lines[:3]]
    assert ids.errors[0] == (f"kafkalog consume: topic {topic} partition 0 offset 3: cannot deserialize the value: "
                             f"written with a PROTOBUF schema (id {proto_id}), not avro (value.format); skipped")


def test_keys_with_key_format_and_ids(broker):
    sr = registry(broker)
    topic = unique("keys")
    key_ser = AvroSerializer(sr, '"long"')
    value_ser = AvroSerializer(sr, USER)
    send_raw(broker, topic, [
        (key_ser(42, ctx(topic, MessageField.KEY)), value_ser({"name": "a", "age": 1}, ctx(topic)), None),
        (None, value_ser({"name": "b", "age": 2}, ctx(topic)), None)])
    key_id = sr.get_latest_version(f"{topic}-key").schema_id
    value_id = sr.get_latest_version(f"{topic}-value").schema_id
    result = consume(broker, topic, 2, "key.format=avro", "print.schema.ids=true", "print.key=true",
                     "key.separator=|", "schema.id.separator=#")
    assert result.code == 0, result.err
    values = '"email":null,"contact":null}'
    assert result.lines == [f'42#{key_id}|{{"name":"a","age":1,{values}#{value_id}',
                            f'null#null|{{"name":"b","age":2,{values}#{value_id}']


# --- one-line errors ----------------------------------------------------------------------

def test_bad_settings_are_one_line_errors(broker, capsys, monkeypatch):
    import io

    url = f"schema.registry.url={broker.schema_registry_url}"
    base = ["produce", "--bootstrap-server", broker.bootstrap, "--topic", unique("errors"), "--property", url]
    cases = [
        (["--property", "value.shema=x"], "unknown --property value.shema"),
        (["--property", f"key.schema={USER}"], "key.format / key.schema need parse.key=true"),
        (["--property", "value.format=xml", "--property", f"value.schema={USER}"], "value.format=xml: expected one"),
        (["--property", "value.schema={\"type\": \"recrd\"}"], "value.schema: not a valid AVRO schema"),
        (["--property", "value.format=protobuf", "--property", f"value.schema={SHOP_PROTO}", "--property",
          "value.schema.message=Nope"], "value.schema.message=Nope: the schema has no such message"),
        (["--property", "value.format=avro"], "value.format=avro needs value.schema"),
        (["--property", "value.schema.id=x"], "value.schema.id=x: not a schema id"),
        (["--property", "value.schema.file=/nonexistent.avsc"], "value.schema.file=/nonexistent.avsc: no such file"),
        (["--property", f"value.schema={USER}", "--property", "value.subject.name.strategy=Nope"],
         "value.subject.name.strategy=Nope: expected TopicNameStrategy"),
        (["--property", "value.schema=\"string\"", "--property", "schema.registry.ssl.keystore.location=/x.jks"],
         "Java key stores are not read here"),
        (["--property", "value.schema=\"string\"", "--property", "value.subject.name.strategy=RecordNameStrategy"],
         "needs a record name"),
        (["--property", "value.schema=\"string\"", "--property", "ssl.truststore.location=/nonexistent.pem"],
         "ssl.truststore.location"),
        (["--property", "value.schema={\"type\": \"object\"}"], "json for a JSON Schema"),
        (["--property", "value.schema=\"string\"", "--property", "key.serializer=com.example.Mine"],
         "only org.apache.kafka.common.serialization.StringSerializer is taken"),
        (["--property", "value.schema=\"string\"", "--property", "schema.registry.url=http://127.0.0.1:1",
          "--property", "schema.registry.max.retries=0"], "no schema registry of http://127.0.0.1:1 reachable"),
    ]
    for extra, expected in cases:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'"x"\n')))
        code = main(base + extra)
        err = capsys.readouterr().err
        assert code == 1, (extra, err)
        line = one_line(err)
        assert line.startswith("kafkalog produce: error: ") and expected in line, (extra, line)
    consume_base = ["consume", "--bootstrap-server", broker.bootstrap, "--topic", "t", "--property"]
    assert main(consume_base + ["value.format=yaml"]) == 1
    assert "value.format=yaml: expected one of avro, protobuf, json, string" in one_line(capsys.readouterr().err)
    assert main(consume_base + ["print.schema.id=true"]) == 1
    assert "unknown --property print.schema.id " in one_line(capsys.readouterr().err)


def test_an_unreachable_registry_ends_consume_in_one_line(broker):
    topic = unique("unreachable")
    send_raw(broker, topic, [(None, AvroSerializer(registry(broker), '"string"')("x", ctx(topic)), None)])
    result = kafkalog("consume", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning",
                      "--max-messages", "1", "--timeout-ms", "10000", "--property",
                      "schema.registry.url=http://127.0.0.1:1", "--property", "schema.registry.max.retries=0")
    assert result.code == 1 and result.out == ""
    assert one_line(result.err).startswith("kafkalog consume: error: no schema registry of http://127.0.0.1:1 "
                                           "reachable (connection refused)")


# --- malformed input, in-process ------------------------------------------------------------

@pytest.fixture(scope="module")
def serdes(broker):
    from broker.tools.records_format import MessageFormatter
    from broker.tools.schema_serde import ProducerSerdes, SchemaFormatter

    topic = unique("fuzz")
    url = {"schema.registry.url": broker.schema_registry_url}
    avro = ProducerSerdes({**url, "value.schema": USER}, topic, parse_key=False)
    proto = ProducerSerdes({**url, "value.schema": SHOP_PROTO, "value.format": "protobuf",
                            "value.subject.name.strategy": "TopicRecordNameStrategy"}, topic, parse_key=False)
    js = ProducerSerdes({**url, "value.schema": THING, "value.format": "json",
                         "value.subject.name.strategy": "RecordNameStrategy"}, topic, parse_key=False)
    for s in (avro, proto, js):
        s.connect()
    formatter = SchemaFormatter.from_properties(url, MessageFormatter({}))
    yield [s.value for s in (avro, proto, js)], formatter
    for s in (avro, proto, js):
        s.close()
    formatter.close()


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                           st.sampled_from(["name", "age", "email", "contact", "id", "items", "label", "x"]),
                           inner, max_size=4), max_leaves=10)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=st.one_of(JSONISH.map(json.dumps), st.text(max_size=40)), which=st.integers(0, 2))
def test_any_line_is_a_value_or_a_line_error(serdes, line, which):
    serializers, _ = serdes
    try:
        out = serializers[which](line.encode("utf-8", "surrogatepass"))
    except LineSchemaError as exc:
        assert str(exc).startswith("the value ")
    else:
        assert out[:1] == b"\x00" and len(out) >= 5


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tail=st.binary(max_size=30), which=st.integers(0, 3))
def test_any_payload_is_json_or_a_record_error(serdes, tail, which):
    serializers, formatter = serdes
    data = tail if which == 3 else b"\x00" + serializers[which].schema_id.to_bytes(4, "big") + tail
    try:
        text, shown = formatter.decode(data, (), is_key=False, fmt=None)
    except RecordDecodeError as exc:
        assert str(exc)
    else:
        json.loads(text)
        assert shown == str(serializers[which].schema_id)
