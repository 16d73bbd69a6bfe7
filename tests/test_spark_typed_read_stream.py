"""Typed streaming reads (``spark_kafkalog.formats`` with ``spark.readStream``), against the
real broker and its Schema Registry.

A query reading Avro values starts while the subject has one version; a second version
(a field added with a default) is registered and written after the first micro-batch.
The query keeps running and decodes the new records with the reader schema it started
with (each micro-batch loads the subject's versions afresh), as confluent-kafka's
``AvroDeserializer`` with that reader schema does; a bad value lands in
``_corrupt_value``. A direct-mode AvailableNow query over the broker's log directory, with
the schemas read from its ``_schemas`` partition and the reader pinned to version 1
(``valueSchema=version:1``), gives the same rows.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.broker import BrokerProcess

V1 = json.dumps({"type": "record", "name": "Reading", "namespace": "iot", "fields": [
    {"name": "sensor", "type": "string"}, {"name": "value", "type": "double"}]})
V2 = json.dumps({"type": "record", "name": "Reading", "namespace": "iot", "fields": [
    {"name": "sensor", "type": "string"}, {"name": "value", "type": "double"},
    {"name": "unit", "type": ["null", "string"], "default": None}]})


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("typed-stream"),
                           {"schema.registry.listeners": "http://127.0.0.1:0", "num.partitions": "1"},
                           name="typed-stream")
    broker.start()
    yield broker
    broker.kill()


def _produce(broker, values) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for topic, value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def _expected(broker, topic, count: int) -> dict[int, dict | None]:
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": broker.schema_registry_url}), V1)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    out: dict[int, dict | None] = {}
    deadline = time.monotonic() + 60
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            try:
                out[msg.offset()] = deserializer(msg.value(), SerializationContext(topic, MessageField.VALUE))
            except Exception:  # noqa: BLE001 - the bad value
                out[msg.offset()] = None
    finally:
        consumer.close()
    return out


def test_a_stream_keeps_decoding_when_a_new_version_appears(spark, registry_broker, tmp_path):
    topic = f"readings-{uuid.uuid4().hex[:6]}"
    url = registry_broker.schema_registry_url
    sr = SchemaRegistryClient({"url": url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    v1 = AvroSerializer(sr, V1)
    _produce(registry_broker, [(topic, v1({"sensor": f"s{i}", "value": i / 2}, ctx)) for i in range(5)])

    name = f"typed_{uuid.uuid4().hex[:6]}"
    stream = (spark.readStream.format("kafkalog").option("kafka.bootstrap.servers", registry_broker.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("valueFormat", "avro").option("schema.registry.url", url).load())
    query = stream.writeStream.format("memory").queryName(name).start()
    try:
        query.processAllAvailable()
        assert spark.table(name).count() == 5
        v2 = AvroSerializer(sr, V2)
        _produce(registry_broker, [(topic, v2({"sensor": f"t{i}", "value": -i, "unit": "C"}, ctx)) for i in range(5)]
                 + [(topic, b"\x00\x00\x00\x7f\x7fbad")])
        rows = []
        for _ in range(50):  # bounded: processAllAvailable may end a trigger begun before the records came
            query.processAllAvailable()
            rows = spark.table(name).collect()
            if len(rows) >= 11:
                break
        assert query.isActive and query.exception() is None
    finally:
        query.stop()
    expected = _expected(registry_broker, topic, 11)
    got = {r.offset: (None if r.value is None else r.value.asDict()) for r in rows}
    assert got == expected
    ids = {r.offset: r.valueSchemaId for r in rows}
    assert ids[0] == sr.get_version(f"{topic}-value", 1).schema_id
    assert ids[5] == sr.get_version(f"{topic}-value", 2).schema_id
    assert [r.offset for r in rows if r._corrupt_value is not None] == [10]

    # direct mode, AvailableNow, the schemas from the log directory's _schemas partition;
    # the reader schema pinned to version 1 (latest would now be v2)
    out = f"typed_direct_{uuid.uuid4().hex[:6]}"
    direct = (spark.readStream.format("kafkalog").option("subscribe", topic).option("startingOffsets", "earliest")
              .option("valueFormat", "avro").option("valueSchema", "version:1").load(str(registry_broker.log_dir)))
    q = (direct.writeStream.format("memory").queryName(out)
         .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert {r.offset: (None if r.value is None else r.value.asDict()) for r in spark.table(out).collect()} == expected
