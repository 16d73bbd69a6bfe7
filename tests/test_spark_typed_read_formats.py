"""Typed Spark reads of Protobuf and JSON Schema values, of several record types in one
topic, and of unframed values (``spark_kafkalog.formats``), against the real broker and its
Schema Registry.

- Protobuf: ``ProtobufSerializer`` writes ``Order`` v1 (scalars, a repeated field, a map,
  a message from a referenced file, a Timestamp, an enum, a oneof) then v2 (a field
  added), plus ten bad values; Spark's rows equal confluent-kafka's decoded messages as
  Protobuf's JSON mapping renders them (fields not set: null), the v1 records with the
  added field null; the bad ones are in ``_corrupt_value``.
- JSON Schema: ``JSONSerializer`` writes v1 then v2 (a property added), plus ten bad
  values; rows equal ``JSONDeserializer``'s documents by property name (a ``oneOf``
  property as a string); FAILFAST and DROPMALFORMED as for Avro.
- RecordNameStrategy and TopicRecordNameStrategy: two Avro record types in one topic read
  as a struct with one member per record; ``valueFraming=none``: plain JSON values read
  with an inline schema and no registry.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import (
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory, timestamp_pb2

from tests.support.broker import BrokerProcess

F = descriptor_pb2.FieldDescriptorProto
BAD = [b"", b"\x00", b"\x00\x00\x00", b"\x07garbage", b"\x00\x00\x0f\x12\x06\x00\x02a", b"\x01\x05\x05",
       b"\x01" + uuid.UUID(int=7).bytes + b"\x00\xff", b"not framed at all", b"\x00\x00\x00\x00\x01\x09\x09", b"\xff"]


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("typed-formats"),
                           {"schema.registry.listeners": "http://127.0.0.1:0", "num.partitions": "1"},
                           name="typed-formats")
    broker.start()
    yield broker
    broker.kill()


def _read(spark, broker, topic, fmt, **options):
    reader = (spark.read.format("kafkalog").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("valueFormat", fmt)
              .option("schema.registry.url", broker.schema_registry_url))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _consume(broker, topic, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    out: list = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None:
                out.append(msg)
    finally:
        consumer.close()
    return sorted(out, key=lambda m: m.offset())


def _plain(value):
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _produce(broker, topic, values) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


# -- Protobuf ------------------------------------------------------------------------------


def _order_class(version: int):
    """``kafkalog.typed.Order`` (``kafkalog_typed/order.proto``, importing ``customer.proto``
    and the well-known Timestamp); v2 adds ``amount``."""
    pool = descriptor_pool.DescriptorPool()
    ts = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(ts)
    pool.Add(ts)
    customer = descriptor_pb2.FileDescriptorProto(name="kafkalog_typed/customer.proto", package="kafkalog.typed",
                                                  syntax="proto3")
    customer.message_type.add(name="Customer").field.add(name="name", number=1, type=F.TYPE_STRING,
                                                         label=F.LABEL_OPTIONAL)
    pool.Add(customer)
    order = descriptor_pb2.FileDescriptorProto(
        name="kafkalog_typed/order.proto", package="kafkalog.typed", syntax="proto3",
        dependency=["kafkalog_typed/customer.proto", "google/protobuf/timestamp.proto"])
    status = order.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="PAID", number=1)
    msg = order.message_type.add(name="Order")
    entry = msg.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    msg.oneof_decl.add(name="choice")
    msg.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    msg.field.add(name="name", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    msg.field.add(name="tags", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    msg.field.add(name="counts", number=4, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                  type_name=".kafkalog.typed.Order.CountsEntry")
    msg.field.add(name="customer", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                  type_name=".kafkalog.typed.Customer")
    msg.field.add(name="created", number=6, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                  type_name=".google.protobuf.Timestamp")
    msg.field.add(name="status", number=7, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                  type_name=".kafkalog.typed.Status")
    msg.field.add(name="note", number=8, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    msg.field.add(name="code", number=9, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL, oneof_index=0)
    if version >= 2:
        msg.field.add(name="amount", number=10, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    pool.Add(order)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("kafkalog.typed.Order"))


def _order(cls, i: int):
    order = cls(id=i, name=f"order-{i}", tags=[f"t{j}" for j in range(i % 3)], status=i % 2)
    for j in range(i % 2):
        order.counts[f"c{j}"] = i + j
    if i % 3:
        order.customer.name = f"cust-{i}"
    if i % 4:
        order.created.seconds, order.created.nanos = 1_700_000_000 + i, 1000 * i
    if i % 2:
        order.note = f"n{i}"
    elif i % 5:
        order.code = i
    if hasattr(order, "amount"):
        order.amount = i / 4
    return order


def _expected_order(message, fields) -> dict:
    """A decoded message as Spark's row should hold it, from Protobuf's JSON mapping (unset
    fields left out -> null)."""
    doc = json_format.MessageToDict(message, preserving_proto_field_name=True)
    out = {name: doc.get(name) for name in fields}
    for name in ("id", "code"):
        out[name] = None if out[name] is None else int(out[name])
    if out["created"] is not None:
        stamp = dt.datetime.strptime(out["created"][:26].rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f")
        out["created"] = stamp
    return out


def test_protobuf_values_equal_confluent_kafka(spark, registry_broker):
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    v1, v2 = _order_class(1), _order_class(2)
    ctx = SerializationContext(topic, MessageField.VALUE)
    values = [ProtobufSerializer(v1, sr, {"use.deprecated.format": False})(_order(v1, i), ctx) for i in range(12)]
    values += BAD
    values += [ProtobufSerializer(v2, sr, {"use.deprecated.format": False})(_order(v2, i), ctx) for i in range(12, 20)]
    _produce(registry_broker, topic, values)

    deserializer = ProtobufDeserializer(v2, {"use.deprecated.format": False})
    fields = [f.name for f in v2.DESCRIPTOR.fields]
    expected = {}
    for msg in _consume(registry_broker, topic, len(values)):
        try:
            expected[msg.offset()] = _expected_order(deserializer(msg.value(), ctx), fields)
        except Exception:  # noqa: BLE001 - the bad values
            expected[msg.offset()] = None
    assert sum(v is None for v in expected.values()) == len(BAD)

    df = _read(spark, registry_broker, topic, "protobuf")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,name:string,tags:array<string>,counts:map<string,int>,customer:struct<name:string>,"
        "created:timestamp,status:string,note:string,code:bigint,amount:double>")
    rows = {r.offset: r for r in df.collect()}
    assert rows.keys() == expected.keys()
    for offset, value in expected.items():
        assert _plain(rows[offset].value) == value, offset
        assert (rows[offset]._corrupt_value is not None) == (value is None), offset
    assert sorted(r._corrupt_value for r in rows.values() if r._corrupt_value is not None) == sorted(BAD)
    assert {rows[o].valueSchemaId for o in range(12)} == {sr.get_version(f"{topic}-value", 1).schema_id}


# -- JSON Schema ---------------------------------------------------------------------------

EVENT_V1 = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Event", "type": "object",
            "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "score": {"type": "number"},
                           "tags": {"type": "array", "items": {"type": "string"}},
                           "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
                           "detail": {"oneOf": [{"type": "string"}, {"type": "object"}]},
                           "place": {"type": "object", "properties": {"city": {"type": "string"}}}}}
EVENT_V2 = {**EVENT_V1, "properties": {**EVENT_V1["properties"], "ok": {"type": "boolean"}}}


def _event(i: int, v2: bool) -> dict:
    doc = {"id": i, "name": f"e{i}", "score": i * 1.5, "tags": ["a"] * (i % 3), "attrs": {"k": i},
           "detail": f"d{i}" if i % 2 else {"x": i}, "place": {"city": f"c{i}"}}
    if i % 5 == 0:
        del doc["place"], doc["score"]
    if v2:
        doc["ok"] = bool(i % 2)
    return doc


def _expected_event(doc: dict | None) -> dict | None:
    if doc is None:
        return None
    out = {name: doc.get(name) for name in EVENT_V2["properties"]}
    if isinstance(out["detail"], dict):  # a oneOf: a JSON string as is, anything else as its JSON text
        out["detail"] = json.dumps(out["detail"], separators=(",", ":"))
    if out["score"] is not None:
        out["score"] = float(out["score"])
    return out


def test_json_values_equal_confluent_kafka(spark, registry_broker):
    topic = f"events-{uuid.uuid4().hex[:6]}"
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    values = [JSONSerializer(json.dumps(EVENT_V1), sr)(_event(i, False), ctx) for i in range(12)] + BAD
    sr.set_compatibility(f"{topic}-value", "NONE")  # a property added to an open model is not BACKWARD
    values += [JSONSerializer(json.dumps(EVENT_V2), sr)(_event(i, True), ctx) for i in range(12, 20)]
    _produce(registry_broker, topic, values)

    deserializer = JSONDeserializer(json.dumps(EVENT_V2))
    expected = {}
    for msg in _consume(registry_broker, topic, len(values)):
        try:
            expected[msg.offset()] = _expected_event(deserializer(msg.value(), ctx))
        except Exception:  # noqa: BLE001 - the bad values
            expected[msg.offset()] = None
    assert sum(v is None for v in expected.values()) == len(BAD)

    df = _read(spark, registry_broker, topic, "json")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,name:string,score:double,tags:array<string>,attrs:map<string,bigint>,detail:string,"
        "place:struct<city:string>,ok:boolean>")
    rows = {r.offset: r for r in df.collect()}
    assert {o: _plain(r.value) for o, r in rows.items()} == expected
    assert sorted(r._corrupt_value for r in rows.values() if r._corrupt_value is not None) == sorted(BAD)

    assert _read(spark, registry_broker, topic, "json", mode="DROPMALFORMED").count() == len(expected) - len(BAD)
    with pytest.raises(Exception, match=rf"offset 12 of topic {topic} partition 0"):
        _read(spark, registry_broker, topic, "json", mode="FAILFAST").collect()


# -- several record types in one topic; unframed values ---------------------------------------

CLICK = json.dumps({"type": "record", "name": "Click", "namespace": "web", "fields": [
    {"name": "url", "type": "string"}]})
VIEW = json.dumps({"type": "record", "name": "View", "namespace": "web", "fields": [
    {"name": "page", "type": "string"}, {"name": "ms", "type": "long"}]})


def test_record_strategies_and_unframed_values(spark, registry_broker):
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    by_record, by_topic_record, plain = (f"{p}-{uuid.uuid4().hex[:6]}" for p in ("mixed", "mixedtr", "plain"))
    for topic, strategy in ((by_record, record_subject_name_strategy),
                            (by_topic_record, topic_record_subject_name_strategy)):
        conf = {"subject.name.strategy": strategy}
        click, view = AvroSerializer(sr, CLICK, conf=conf), AvroSerializer(sr, VIEW, conf=conf)
        ctx = SerializationContext(topic, MessageField.VALUE)
        _produce(registry_broker, topic, [click({"url": "/a"}, ctx), view({"page": "p", "ms": 5}, ctx),
                                          b"\x09bad", click({"url": "/b"}, ctx)])
    want = [{"web.Click": {"url": "/a"}, "web.View": None}, {"web.Click": None, "web.View": {"page": "p", "ms": 5}},
            None, {"web.Click": {"url": "/b"}, "web.View": None}]

    df = _read(spark, registry_broker, by_record, "avro", **{"subject.name.strategy": "RecordNameStrategy",
                                                            "valueSubject": "web.Click,web.View"})
    assert df.schema["value"].dataType.simpleString() == \
        "struct<web.Click:struct<url:string>,web.View:struct<page:string,ms:bigint>>"
    assert [_plain(r.value) for r in df.orderBy("offset").collect()] == want
    # TopicRecordNameStrategy: the topic's subjects <topic>-<record> are found in the registry
    df = _read(spark, registry_broker, by_topic_record, "avro",
               **{"subject.name.strategy": "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"})
    assert [_plain(r.value) for r in df.orderBy("offset").collect()] == want

    # valueFraming=none: plain JSON documents, an inline schema, no registry at all
    _produce(registry_broker, plain, [json.dumps({"id": 1, "name": "a"}).encode(), b"{broken", b'{"id": "x"}'])
    df = (spark.read.format("kafkalog").option("kafka.bootstrap.servers", registry_broker.bootstrap)
          .option("subscribe", plain).option("valueFormat", "json").option("valueFraming", "none")
          .option("valueSchema", json.dumps(EVENT_V1)).load())
    assert "valueSchemaId" in df.columns
    rows = df.orderBy("offset").collect()
    assert rows[0].value.id == 1 and rows[0].value.name == "a" and rows[0].valueSchemaId is None
    assert [r.value for r in rows[1:]] == [None, None]
    assert [r._corrupt_value for r in rows] == [None, b"{broken", b'{"id": "x"}']
    assert struct.calcsize(">I") == 4
