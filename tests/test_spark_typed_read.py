"""Typed Spark reads of Avro values (``spark_kafkalog.formats``), against the real broker and
its Schema Registry, compared with confluent-kafka's own deserializer.

One topic, written by confluent-kafka's ``AvroSerializer``: records of a v1 schema, ten
values that are not Avro of any registered schema (wrong magic byte, unknown id and GUID,
truncated frames and payloads), records of a compatible v2 (a field added with a
default, one removed), and v2 records whose schema id is in a record header
(``header_schema_id_serializer``). Read with ``valueFormat=avro`` (reader: the latest
version, v2) and ``keyFormat=string``:

- network mode, PERMISSIVE: every row's value equals what ``AvroDeserializer`` with the v2
  reader schema decodes, its ``valueSchemaId`` the id the record was written with, and
  the ten bad values are null with their exact bytes in ``_corrupt_value``;
- DROPMALFORMED leaves exactly the ten out; FAILFAST fails naming the first bad offset;
- direct mode, with the schemas read from the log directory's ``_schemas`` (no registry
  URL), gives the same DataFrame as network mode; so do direct mode with the URL, a copy
  of the log directory on an S3-protocol server (moto) read without the URL, and a
  stitched read;
- a snapshot read (``kafkalog.snapshot=true``) of a compacted topic: the latest record of
  each key decoded, tombstones removing keys, a bad latest value kept aside.

Spark jobs cost seconds each: few queries, several assertions per query.
"""

from __future__ import annotations

import json
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient, header_schema_id_serializer
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.broker import BrokerProcess

V1 = json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": [
    {"name": "name", "type": "string"},
    {"name": "age", "type": "int"},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
]})
V2 = json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": [
    {"name": "name", "type": "string"},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
    {"name": "email", "type": ["null", "string"], "default": None},
]})
BAD = 10


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory):
    # small index files: the log directory is copied to an object store whole
    broker = BrokerProcess(tmp_path_factory.mktemp("typed"), {"schema.registry.listeners": "http://127.0.0.1:0",
                                                               "log.index.size.max.bytes": "65536"},
                           name="typed")
    broker.start()
    yield broker
    broker.kill()


def _garbage(v1_frame: bytes, v1_id: int) -> list[bytes]:
    return [
        b"",                                                  # no magic byte
        b"\x00",                                              # magic 0, no id
        b"\x00\x00\x00",                                      # id cut short
        b"\x07garbage",                                       # unknown magic byte
        b"\x00" + struct.pack(">I", 987654) + b"\x02a\x02",  # an id the registry does not hold
        v1_frame[:-4],                                        # the payload cut short
        b"\x01" + b"\x05" * 5,                                # magic 1, GUID cut short
        b"\x01" + uuid.uuid4().bytes + b"\x02a\x02",          # a GUID the registry does not hold
        b'{"name": "json"}',                                  # JSON, not framed Avro
        b"\x00" + struct.pack(">I", v1_id) + b"\xff" * 12,    # a varint that never ends
    ]


@pytest.fixture(scope="module")
def avro_topic(registry_broker):
    """The topic (2 partitions; the bad values all in partition 0) and the records
    written: (partition, key, value bytes, headers)."""
    topic = f"users-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": registry_broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(30)
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap, "linger.ms": 5})
    ctx = SerializationContext(topic, MessageField.VALUE)
    v1 = AvroSerializer(sr, V1)
    frames = [v1({"name": f"user-{i}", "age": i, "tags": [f"t{i}"] * (i % 3)}, ctx) for i in range(30)]
    v1_id = struct.unpack(">I", frames[0][1:5])[0]
    written = [(i % 2, f"k{i}", frame, None) for i, frame in enumerate(frames)]
    written += [(0, f"bad{i}", value, None) for i, value in enumerate(_garbage(frames[0], v1_id))]
    v2 = AvroSerializer(sr, V2)
    for i in range(30):
        value = None if i == 7 else {"name": f"new-{i}", "tags": ["x"], "email": None if i % 4 else f"u{i}@x"}
        written.append((i % 2, None if i == 3 else f"n{i}", None if value is None else v2(value, ctx), None))
    in_headers = AvroSerializer(sr, V2, conf={"schema.id.serializer": header_schema_id_serializer})
    for i in range(5):
        headers: list = []
        payload = in_headers({"name": f"hdr-{i}", "tags": [], "email": "h"},
                             SerializationContext(topic, MessageField.VALUE, headers))
        written.append((1, f"h{i}", payload, headers))
    for partition, key, value, headers in written:
        producer.produce(topic, key=None if key is None else key.encode(), value=value, partition=partition,
                         headers=headers)
    assert producer.flush(30) == 0
    return topic, written


def _consumed(broker: BrokerProcess, topic: str, count: int) -> dict[tuple[int, int], tuple]:
    """(partition, offset) -> (key, value as AvroDeserializer(V2) gives it or None,
    whether it failed, raw value): what confluent-kafka reads."""
    sr = SchemaRegistryClient({"url": broker.schema_registry_url})
    deserializer = AvroDeserializer(sr, V2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    out: dict[tuple[int, int], tuple] = {}
    deadline = time.monotonic() + 60
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            raw = msg.value()
            value, failed = None, False
            if raw is not None:
                try:
                    value = deserializer(raw, SerializationContext(topic, MessageField.VALUE, msg.headers()))
                except Exception:  # noqa: BLE001 - the bad values: confluent-kafka refuses them too
                    failed = True
            key = msg.key().decode() if msg.key() is not None else None
            out[(msg.partition(), msg.offset())] = (key, value, failed, raw)
    finally:
        consumer.close()
    return out


def _read(spark, broker, topic, *, where: str = "network", url: bool = True, **options):
    """A typed read in network mode, direct mode (``where="direct"``: the broker's log
    directory; an ``s3://`` URI: its copy on the object store) or stitched mode."""
    reader = spark.read.format("kafkalog").option("subscribe", topic).option("valueFormat", "avro") \
        .option("keyFormat", "string")
    if url:
        reader = reader.option("schema.registry.url", broker.schema_registry_url)
    for k, v in options.items():
        reader = reader.option(k, v)
    if where == "network":
        return reader.option("kafka.bootstrap.servers", broker.bootstrap).load()
    if where == "stitched":
        return reader.option("kafka.bootstrap.servers", broker.bootstrap).load(str(broker.log_dir))
    return reader.load(str(broker.log_dir) if where == "direct" else where)


def _plain(value):
    """A Spark Row as plain Python (structs as dicts)."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def test_avro_values_equal_confluent_kafka_and_bad_ones_are_kept_aside(spark, registry_broker, avro_topic):
    topic, written = avro_topic
    expected = _consumed(registry_broker, topic, len(written))
    assert len(expected) == len(written)
    assert sum(failed for _, _, failed, _ in expected.values()) == BAD

    df = _read(spark, registry_broker, topic)
    assert df.schema["value"].dataType.simpleString() == "struct<name:string,tags:array<string>,email:string>"
    assert df.columns[7:] == ["valueSchemaId", "_corrupt_key", "_corrupt_value"]
    rows = {(r.partition, r.offset): r for r in df.collect()}
    assert rows.keys() == expected.keys()
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    ids = {v.version: v.schema_id for v in (sr.get_version(f"{topic}-value", n) for n in (1, 2))}
    for at, (key, value, failed, raw) in expected.items():
        row = rows[at]
        assert row.key == key, at
        assert _plain(row.value) == value, at
        if failed:  # the id the frame names, when it has one
            assert row._corrupt_value == raw, at
            assert row.valueSchemaId in (None, ids[1], 987654), at
        else:
            assert row._corrupt_value is None, at
            assert row.valueSchemaId == (None if raw is None else ids[2] if value and value["name"][:3] in
                                         ("new", "hdr") else ids[1]), at
    corrupt = sorted(r._corrupt_value for r in rows.values() if r._corrupt_value is not None)
    assert corrupt == sorted(raw for _, _, failed, raw in expected.values() if failed)

    # DROPMALFORMED: exactly the bad records left out; FAILFAST: the first one named
    dropped = _read(spark, registry_broker, topic, mode="DROPMALFORMED")
    assert "_corrupt_value" not in dropped.columns
    assert dropped.count() == len(written) - BAD
    first_bad = min(o for (p, o), (_, _, failed, _) in expected.items() if failed and p == 0)
    with pytest.raises(Exception, match=rf"offset {first_bad} of topic {topic} partition 0"):
        _read(spark, registry_broker, topic, mode="FAILFAST").collect()


def test_direct_object_store_and_stitched_reads_equal_network_mode(spark, registry_broker, avro_topic, moto_s3):
    topic, _ = avro_topic
    network = _read(spark, registry_broker, topic)
    want = sorted(network.collect(), key=lambda r: (r.partition, r.offset))
    uri = moto_s3.upload(registry_broker.log_dir, f"typed/{uuid.uuid4().hex[:6]}/kafka-logs")
    for where, options in (
            ("direct", {"url": False}),  # no registry URL: the schemas from the _schemas partition beside the topic
            ("direct", {}),  # with the URL the registry is asked, for the same result
            (uri, {"url": False, **moto_s3.options}),  # a copy on an object store, _schemas included
            ("stitched", {})):  # the store read for what the brokers no longer hold (nothing here), the rest fetched
        df = _read(spark, registry_broker, topic, where=where, **options)
        assert df.schema == network.schema, where
        assert sorted(df.collect(), key=lambda r: (r.partition, r.offset)) == want, where


def test_a_typed_snapshot_read_of_a_compacted_topic(spark, registry_broker):
    """``kafkalog.snapshot=true`` with ``valueFormat=avro`` on a compacted topic: the latest
    record of each key, decoded (v1 and v2 writers resolved to v2), a tombstone removing its
    key, and a key whose latest value is not Avro kept aside in ``_corrupt_value``."""
    topic = f"profiles-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": registry_broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, config={"cleanup.policy": "compact"})])[topic].result(30)
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    v1, v2 = AvroSerializer(sr, V1), AvroSerializer(sr, V2)
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap})
    updates = [("a", v1({"name": "a1", "age": 1, "tags": []}, ctx)),
               ("b", v1({"name": "b1", "age": 2, "tags": []}, ctx)),
               ("a", v2({"name": "a2", "tags": ["x"], "email": "a@x"}, ctx)),
               ("c", v1({"name": "c1", "age": 3, "tags": []}, ctx)), ("c", None),
               ("d", v2({"name": "d1", "tags": [], "email": None}, ctx)), ("d", b"\x09 not avro"),
               ("b", v1({"name": "b2", "age": 5, "tags": ["y"]}, ctx))]
    for key, value in updates:
        producer.produce(topic, key=key.encode(), value=value)
    assert producer.flush(30) == 0
    rows = (_read(spark, registry_broker, topic, **{"kafkalog.snapshot": "true"})
            .select("key", "value", "_corrupt_value").collect())
    assert {r.key: (_plain(r.value), r._corrupt_value) for r in rows} == {
        "a": ({"name": "a2", "tags": ["x"], "email": "a@x"}, None),
        "b": ({"name": "b2", "tags": ["y"], "email": None}, None),
        "d": (None, b"\x09 not avro")}


def test_direct_mode_with_the_broker_stopped_equals_network_mode(spark, registry_broker, avro_topic):
    """Last of the module: the broker stopped (cleanly), direct mode reads its log
    directory, schemas from ``_schemas`` and no registry at all, and gives network mode's
    rows."""
    topic, _ = avro_topic
    network = _read(spark, registry_broker, topic)
    want = sorted(network.collect(), key=lambda r: (r.partition, r.offset))
    assert registry_broker.stop() == 0
    df = _read(spark, registry_broker, topic, where="direct", url=False)
    assert df.schema == network.schema
    assert sorted(df.collect(), key=lambda r: (r.partition, r.offset)) == want
