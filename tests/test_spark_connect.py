"""The ``kafkalog`` source through Spark Connect: a client session
(``SparkSession.builder.remote``, pyspark's Spark Connect client over gRPC) reads and writes
typed Avro and binary topics of the real broker, and the results equal what confluent-kafka
reads and writes.

The Spark Connect job runs in a process of its own (tests/support/connect_job.py: the
suite's classic session owns this process's SparkContext). confluent-kafka's
``AvroSerializer`` writes v1 records, a compatible v2 (a field added with a default) and
two values that are not Avro; the job reads them with ``valueFormat=avro`` in network mode,
in direct mode (schemas from the log directory's ``_schemas``) and as an ``availableNow``
stream. Checks: the value struct's type is the latest version's; each row's value equals
what ``AvroDeserializer`` with the v2 reader schema decodes, and its ``valueSchemaId`` the
id the record was written with; the two bad values are null with their bytes in
``_corrupt_value`` (with the id their frame names, if any); the three reads are equal.
The job's typed write is read back by ``DeserializingConsumer`` with ``AvroDeserializer`` (the schema registered under
``<topic>-value`` as ``connect.Reading``), its binary write by a plain consumer.

About 30 s: the Connect server's start and five Spark jobs.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, DeserializingConsumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext, StringDeserializer

from tests.support.broker import BrokerProcess

REPO = Path(__file__).resolve().parent.parent
V1 = json.dumps({"type": "record", "name": "Reading", "namespace": "sensors", "fields": [
    {"name": "device", "type": "string"}, {"name": "celsius", "type": "double"}]})
V2 = json.dumps({"type": "record", "name": "Reading", "namespace": "sensors", "fields": [
    {"name": "device", "type": "string"}, {"name": "celsius", "type": "double"},
    {"name": "unit", "type": "string", "default": "C"}]})
BAD = [b"\x07not avro", b"\x00\x00\x0f\x42\x40"]


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("connect"), {"schema.registry.listeners": "http://127.0.0.1:0",
                                                                 "num.partitions": "1"}, name="connect")
    broker.start()
    yield broker
    broker.kill()


def _consume(broker: BrokerProcess, topic: str, count: int, **conf) -> list:
    """(offset, key, value) of ``count`` records of ``topic``, in offset order."""
    factory = DeserializingConsumer if "value.deserializer" in conf else Consumer
    consumer = factory({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                        "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})
    consumer.subscribe([topic])
    out: list = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return sorted(out, key=lambda m: m[0])


def test_typed_and_binary_reads_and_writes_through_spark_connect(registry_broker, tmp_path):
    broker = registry_broker
    topic, typed_out, binary_out = (f"{p}-{uuid.uuid4().hex[:6]}" for p in ("readings", "typed-out", "binary-out"))
    sr = SchemaRegistryClient({"url": broker.schema_registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    v1, v2 = AvroSerializer(sr, V1), AvroSerializer(sr, V2)
    values = [v1({"device": f"d{i % 3}", "celsius": 20 + i / 2}, ctx) for i in range(6)]
    values += BAD
    values += [v2({"device": f"d{i % 3}", "celsius": -i / 3, "unit": "K" if i % 2 else "C"}, ctx)
               for i in range(6)]
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    conf = {"bootstrap": broker.bootstrap, "registry": broker.schema_registry_url, "log_dir": str(broker.log_dir),
            "topic": topic, "typed_out": typed_out, "binary_out": binary_out}
    proc = subprocess.run([sys.executable, "-m", "tests.support.connect_job", json.dumps(conf)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["session"] == "pyspark.sql.connect.session.SparkSession"
    assert result["schema"] == "struct<device:string,celsius:double,unit:string>"

    # what confluent-kafka decodes with the same reader schema, and the ids in the frames
    reader = AvroDeserializer(sr, V2)
    expected = []
    for offset, raw in enumerate(values):
        if raw in BAD:  # the id a frame names is reported even when no schema has it
            framed = raw[:1] == b"\x00" and len(raw) >= 5
            expected.append([offset, None, struct.unpack(">I", raw[1:5])[0] if framed else None, raw.hex()])
        else:
            expected.append([offset, reader(raw, ctx), struct.unpack(">I", raw[1:5])[0], None])
    assert result["network"] == expected
    assert result["direct"] == expected
    assert result["stream"] == expected
    assert {row[2] for row in expected if row[3] is None} == {
        sr.get_latest_version(f"{topic}-value").schema_id, sr.get_version(f"{topic}-value", 1).schema_id}

    typed = _consume(broker, typed_out, 20, **{"key.deserializer": StringDeserializer(),
                                               "value.deserializer": AvroDeserializer(sr)})
    assert sorted((k, v) for _, k, v in typed) == sorted(
        (str(i), {"id": i, "name": f"n-{i}", "score": i / 4}) for i in range(20))
    assert json.loads(sr.get_latest_version(f"{typed_out}-value").schema.schema_str)["name"] == "Reading"
    binary = _consume(broker, binary_out, 7)
    assert sorted((k, v) for _, k, v in binary) == sorted((str(i).encode(), f"v-{i}".encode()) for i in range(7))
