"""Typed Spark writes (``valueFormat`` avro / json / protobuf on ``df.write``), against the real
broker and its Schema Registry, read back with confluent-kafka's own deserializers.

- Avro: a DataFrame with a struct ``value`` (and a null value: a tombstone) is written with
  the schema derived as Spark's ``to_avro`` derives it, registered under ``<topic>-value``;
  ``DeserializingConsumer`` with ``AvroDeserializer`` reads back the rows; a second write
  of the same DataFrame adds no schema version; a subject whose latest version (registered
  by confluent-kafka, another record name) maps to the DataFrame's type is used as it is.
- An incompatible DataFrame (``name`` an int where the BACKWARD subject has a string) fails
  the job on the driver with the registry's 409 message, and the topic's end offsets stay.
- ``kafkalog.exactlyOnce=true``: the same, read_committed; ``df.writeStream`` too.
- Two record types in one topic under RecordNameStrategy and TopicRecordNameStrategy:
  registered under the record's full name (``<topic>-<full name>``), read back by
  ``AvroDeserializer`` and by a typed read as one member per record type.
- JSON (schema derived, ``JSONDeserializer``) and Protobuf (``use.latest.version``, a
  schema registered beforehand, decoded with the message's class).
- Bad options fail on the driver, naming the option (and, with hypothesis, nothing but
  ``KafkaLogWriteError`` comes out of any mix of them); a row the writer schema cannot take
  fails naming the column and the row (``formats.encode``, no Spark).
- Property (hypothesis): the Avro schema derived from any Spark type parses and maps back to
  that type, and the encoder compiles for it.

Spark jobs cost seconds each: a few writes, several assertions each.
"""

from __future__ import annotations

import json
import struct
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, DeserializingConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext, StringDeserializer

from spark_kafkalog.writers.common import KafkaLogWriteError, parse_write_options
from tests.support.broker import BrokerProcess

ROWS = [(f"k{i}", (f"user-{i}", i, [f"t{i}"] * (i % 3), i / 4)) for i in range(12)]
VALUE_TYPE = "STRUCT<name: STRING, age: INT, tags: ARRAY<STRING>, score: DOUBLE>"


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("typedw"), {"schema.registry.listeners": "http://127.0.0.1:0"},
                           name="typedw")
    broker.start()
    yield broker
    broker.kill()


def _topic(broker: BrokerProcess, prefix: str, partitions: int = 2) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)
    return topic


def _frame(spark, with_tombstone: bool = True):
    rows = list(ROWS) + ([("gone", None)] if with_tombstone else [])
    return spark.createDataFrame(rows, f"key STRING, value {VALUE_TYPE}")


def _write(df, broker, topic, **options):
    writer = (df.write.format("kafkalog").mode("append").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("topic", topic).option("schema.registry.url", broker.schema_registry_url))
    for k, v in options.items():
        writer = writer.option(k, v)
    writer.save()


def _consume(broker, topic, count, deserializer, *, committed: bool = False) -> dict[str, object]:
    """key -> value as ``deserializer`` gives it (None: a tombstone), and every frame's id."""
    consumer = DeserializingConsumer({
        "bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "key.deserializer": StringDeserializer(), "value.deserializer": deserializer,
        "isolation.level": "read_committed" if committed else "read_uncommitted"})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])  # no group join
    got: list[tuple[str, object]] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    assert len(got) == count, got
    return dict(got)


def _raw_values(broker, topic, count) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
    out: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None and msg.value() is not None:
                out.append(msg.value())
    finally:
        consumer.close()
    return out


def _end_offsets(broker, topic, partitions: int = 2) -> list[int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ends"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)]
    finally:
        consumer.close()


def _expected() -> dict[str, object]:
    out: dict[str, object] = {k: {"name": v[0], "age": v[1], "tags": v[2], "score": v[3]} for k, v in ROWS}
    out["gone"] = None
    return out


def test_avro_values_read_back_by_confluent_kafka_and_a_second_write_registers_nothing(spark, registry_broker):
    topic = _topic(registry_broker, "avro")
    df = _frame(spark)
    _write(df, registry_broker, topic, valueFormat="avro")
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    subject = f"{topic}-value"
    assert sr.get_versions(subject) == [1]
    registered = sr.get_latest_version(subject)
    schema = json.loads(registered.schema.schema_str)
    # Spark's to_avro: topLevelRecord, nullable fields as [T, "null"]
    assert schema["name"] == "topLevelRecord"
    assert [f["type"] for f in schema["fields"]] == [["string", "null"], ["int", "null"],
                                                    [{"type": "array", "items": ["string", "null"]}, "null"],
                                                    ["double", "null"]]
    assert _consume(registry_broker, topic, len(ROWS) + 1, AvroDeserializer(sr)) == _expected()
    frames = _raw_values(registry_broker, topic, len(ROWS))
    assert {f[:5] for f in frames} == {b"\x00" + struct.pack(">I", registered.schema_id)}

    # the same DataFrame again: the same schema, no new version
    _write(df, registry_broker, topic, valueFormat="avro")
    assert sr.get_versions(subject) == [1]
    assert sum(_end_offsets(registry_broker, topic)) == 2 * (len(ROWS) + 1)

    # a subject whose latest version (another record name, registered by confluent-kafka)
    # maps to the DataFrame's type: used as it is, nothing registered
    other = _topic(registry_broker, "avro-latest")
    theirs = json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": [
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "age", "type": ["null", "int"], "default": None},
        {"name": "tags", "type": ["null", {"type": "array", "items": ["null", "string"]}], "default": None},
        {"name": "score", "type": ["null", "double"], "default": None}]})
    their_id = sr.register_schema(f"{other}-value", Schema(theirs, "AVRO"))
    _write(_frame(spark, with_tombstone=False), registry_broker, other, valueFormat="avro")
    assert sr.get_versions(f"{other}-value") == [1]
    frames = _raw_values(registry_broker, other, len(ROWS))
    assert {f[:5] for f in frames} == {b"\x00" + struct.pack(">I", their_id)}
    expected = _expected()
    del expected["gone"]
    assert _consume(registry_broker, other, len(ROWS), AvroDeserializer(sr)) == expected


def test_an_incompatible_dataframe_fails_before_sending_with_the_409_message(spark, registry_broker):
    topic = _topic(registry_broker, "avro-incompat")
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    subject = f"{topic}-value"
    sr.set_compatibility(subject, "BACKWARD")
    v1 = json.dumps({"type": "record", "name": "topLevelRecord", "fields": [{"name": "name", "type": "string"}]})
    serializer = AvroSerializer(sr, v1)
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap})
    for i in range(3):
        producer.produce(topic, value=serializer({"name": f"n{i}"}, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    before = _end_offsets(registry_broker, topic)
    assert sum(before) == 3

    df = spark.createDataFrame([(1,), (2,)], "name INT").selectExpr("struct(name) AS value")
    with pytest.raises(Exception) as raised:
        _write(df, registry_broker, topic, valueFormat="avro")
    message = str(raised.value)
    assert "incompatible with an earlier schema" in message, message
    assert "KafkaLogWriteError" in message and subject in message, message
    assert _end_offsets(registry_broker, topic) == before
    assert sr.get_versions(subject) == [1]

    # auto.register.schemas=false: the derived schema must be registered already
    with pytest.raises(Exception, match="not registered under subject"):
        _write(df, registry_broker, topic, valueFormat="avro", **{"auto.register.schemas": "false"})
    assert _end_offsets(registry_broker, topic) == before


def test_exactly_once_typed_write_of_logical_types_maps_and_nested_records(spark, registry_broker):
    import datetime
    from decimal import Decimal

    topic = _topic(registry_broker, "avro-eos")
    utc = datetime.UTC
    rows = [(f"k{i}", (datetime.datetime(2026, 1, 2, 3, 4, 5, i, tzinfo=utc), datetime.date(2026, 1, 1 + i),
                       Decimal(f"{i}.25"), {"a": i, "b": None} if i % 2 else {}, (i * 10**12, None)))
            for i in range(6)]
    df = spark.createDataFrame(rows, "key STRING, value STRUCT<ts: TIMESTAMP, day: DATE, amount: DECIMAL(10,2), "
                                     "attrs: MAP<STRING, INT>, inner: STRUCT<x: BIGINT, y: STRING>>")
    _write(df, registry_broker, topic, valueFormat="avro", recordName="Shipment", recordNamespace="shop",
           **{"kafkalog.exactlyOnce": "true"})
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    schema = json.loads(sr.get_latest_version(f"{topic}-value").schema.schema_str)
    assert (schema["name"], schema["namespace"]) == ("Shipment", "shop")
    inner = next(f for f in schema["fields"] if f["name"] == "inner")
    assert (inner["type"][0]["name"], inner["type"][0]["namespace"]) == ("inner", "shop.Shipment")
    got = _consume(registry_broker, topic, len(rows), AvroDeserializer(sr), committed=True)
    assert got == {k: {"ts": ts, "day": day, "amount": amount, "attrs": attrs, "inner": {"x": x, "y": y}}
                   for k, (ts, day, amount, attrs, (x, y)) in rows}


def test_stream_typed_write(spark, registry_broker, tmp_path):
    topic = _topic(registry_broker, "avro-stream")
    source = tmp_path / "in"
    source.mkdir()
    (source / "rows.json").write_text("\n".join(
        json.dumps({"key": k, "value": {"name": v[0], "age": v[1], "tags": v[2], "score": v[3]}}) for k, v in ROWS))
    query = (spark.readStream.schema(f"key STRING, value {VALUE_TYPE}").json(str(source))
             .writeStream.format("kafkalog").option("kafka.bootstrap.servers", registry_broker.bootstrap)
             .option("topic", topic).option("valueFormat", "avro")
             .option("schema.registry.url", registry_broker.schema_registry_url)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    assert query.awaitTermination(120)
    assert query.exception() is None
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    assert sr.get_versions(f"{topic}-value") == [1]
    expected = _expected()
    del expected["gone"]
    assert _consume(registry_broker, topic, len(ROWS), AvroDeserializer(sr)) == expected


def test_json_values_read_back_by_confluent_kafka(spark, registry_broker):
    topic = _topic(registry_broker, "json")
    _write(_frame(spark), registry_broker, topic, valueFormat="json")
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    registered = sr.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "JSON"
    assert json.loads(registered.schema.schema_str)["title"] == "topLevelRecord"
    assert _consume(registry_broker, topic, len(ROWS) + 1, JSONDeserializer(None, schema_registry_client=sr)) \
        == _expected()


PROTO = """syntax = "proto3";
package example;
message Other { string x = 1; }
message User {
  string name = 1;
  int32 age = 2;
  repeated string tags = 3;
  double score = 4;
}
"""


def test_protobuf_values_with_the_latest_version(spark, registry_broker):
    from google.protobuf import json_format, message_factory

    from broker.schema import parse_schema

    topic = _topic(registry_broker, "proto")
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    schema_id = sr.register_schema(f"{topic}-value", Schema(PROTO, "PROTOBUF"))
    df = _frame(spark)
    with pytest.raises(Exception, match="use.latest.version=true"):  # never a derived .proto
        _write(df, registry_broker, topic, valueFormat="protobuf")
    _write(df, registry_broker, topic, valueFormat="protobuf", valueMessageName="example.User",
           **{"use.latest.version": "true"})
    assert sr.get_versions(f"{topic}-value") == [1]
    cls = message_factory.GetMessageClass(parse_schema("PROTOBUF", PROTO).message_descriptor([1]))  # type: ignore[attr-defined]
    frames = _raw_values(registry_broker, topic, len(ROWS))
    head = b"\x00" + struct.pack(">I", schema_id) + b"\x02\x02"  # message indexes [1]: count 1, index 1
    assert all(f.startswith(head) for f in frames)
    got = sorted((json_format.MessageToDict(cls.FromString(f[len(head):]), preserving_proto_field_name=True)
                  for f in frames), key=lambda d: d.get("age", 0))
    want = [{k: v for k, v in {"name": n, "age": a, "tags": t, "score": s}.items() if v not in (0, [], 0.0)}
            for _, (n, a, t, s) in ROWS]
    assert got == want


def test_bad_typed_write_options_name_the_option():
    base = {"kafka.bootstrap.servers": "localhost:9092", "topic": "t"}
    with pytest.raises(KafkaLogWriteError, match="auto.register.schemas: 'yes' is not valid"):
        parse_write_options({**base, "valueFormat": "avro", "schema.registry.url": "http://x",
                             "auto.register.schemas": "yes"})
    with pytest.raises(KafkaLogWriteError, match="valueFormat: 'xml' is not valid"):
        parse_write_options({**base, "valueFormat": "xml"})
    with pytest.raises(KafkaLogWriteError, match="needs the Schema Registry"):
        parse_write_options({**base, "valueFormat": "avro"})
    with pytest.raises(KafkaLogWriteError, match="are for typed writes"):
        parse_write_options({**base, "use.latest.version": "true"})
    with pytest.raises(KafkaLogWriteError, match="names several subjects"):
        parse_write_options({**base, "valueFormat": "avro", "schema.registry.url": "http://x",
                             "valueSubject": "a,b"})
    assert parse_write_options({**base, "valueFormat": "string"}).typed is None
    # an unreachable registry: one line, on the driver
    from pyspark.sql.types import IntegerType, StructField, StructType

    from spark_kafkalog.formats.write_schema import TypedWriteError, resolve_typed_write
    typed = parse_write_options({**base, "valueFormat": "avro", "schema.registry.url": "http://127.0.0.1:1",
                                 "schema.registry.max.retries": "0"}).typed
    columns = StructType([StructField("value", StructType([StructField("a", IntegerType())]))])
    # (the sink raises it as its KafkaLogWriteError, as the 409 test shows)
    with pytest.raises(TypedWriteError, match="could not be resolved: no schema registry of"):
        resolve_typed_write(typed, columns, "t")


def _spark_types():
    from hypothesis import strategies as st
    from pyspark.sql import types as T

    names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
    leaves = st.sampled_from([T.BooleanType(), T.IntegerType(), T.LongType(), T.FloatType(), T.DoubleType(),
                              T.StringType(), T.BinaryType(), T.DateType(), T.TimestampType(),
                              T.DecimalType(10, 2), T.DecimalType(38, 0)])

    def structs(children):
        return st.lists(st.tuples(names, children, st.booleans()), min_size=1, max_size=4,
                        unique_by=lambda f: f[0].lower()).map(
            lambda fs: T.StructType([T.StructField(n, t, nullable) for n, t, nullable in fs]))

    return st.recursive(leaves, lambda children: st.one_of(
        st.builds(T.ArrayType, children, st.booleans()),
        st.builds(lambda v, n: T.MapType(T.StringType(), v, n), children, st.booleans()),
        structs(children)), max_leaves=8).flatmap(lambda t: structs(st.just(t)))


def test_derived_avro_schemas_read_back_as_the_spark_type():
    """Property: to_avro's schema of any Spark type parses, and maps back (from_avro's
    mapping) to the same Spark type, nullability aside; and the encoder compiles for the
    type's Arrow form."""
    from hypothesis import given, settings
    from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type

    from broker.schema import parse_schema
    from broker.schema.avro_arrow import arrow_type
    from broker.schema.avro_encode import plan
    from spark_kafkalog.formats.write_schema import to_avro_schema

    @settings(max_examples=60, deadline=None)
    @given(_spark_types())
    def check(data_type):
        parsed = parse_schema("AVRO", json.dumps(to_avro_schema(data_type)))
        assert from_arrow_type(arrow_type(parsed)).simpleString() == data_type.simpleString()
        plan(parsed, to_arrow_type(data_type, timezone="UTC"))

    check()


def test_typed_write_options_never_raise_anything_else():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    keys = st.sampled_from(["valueFormat", "keyFormat", "valueFraming", "valueSubject", "subject.name.strategy",
                            "valueSchema", "valueMessageName", "auto.register.schemas", "use.latest.version",
                            "recordName", "recordNamespace", "schema.registry.url",
                            "schema.registry.request.timeout.ms", "schema.registry.nonsense"])
    values = st.one_of(st.sampled_from(["avro", "protobuf", "json", "string", "true", "false", "none", "latest",
                                        "version:2", "id:x", "", "a,b", "http://r:8081", "-1"]), st.text(max_size=8))

    @settings(max_examples=200, deadline=None)
    @given(st.dictionaries(keys, values, max_size=5))
    def check(options):
        try:
            parse_write_options({"kafka.bootstrap.servers": "localhost:9092", "topic": "t", **options})
        except KafkaLogWriteError:
            pass

    check()


def test_rows_the_writer_schema_cannot_take_name_the_column_and_row():
    import pyarrow as pa

    from spark_kafkalog.formats.encode import TypedEncodeError, encode_column
    from spark_kafkalog.formats.registry import CatalogEntry
    from spark_kafkalog.formats.write_schema import FieldEncoding

    avro = json.dumps({"type": "record", "name": "R", "fields": [{"name": "n", "type": "int"}]})
    rows = pa.array([{"n": 1}, {"n": None}, None], pa.struct([pa.field("n", pa.int64())]))
    encoding = FieldEncoding(False, "avro", CatalogEntry(7, None, "AVRO", avro))
    with pytest.raises(TypedEncodeError, match=r"column value: .*row 1"):
        encode_column(rows, encoding)
    good = encode_column(rows.slice(0, 1), encoding)
    assert good.to_pylist() == [b"\x00\x00\x00\x00\x07\x02"]  # framed id 7, zigzag 1
    # a null row is a tombstone, never framed; framing none: the bare payload
    bare = FieldEncoding(False, "avro", CatalogEntry(None, None, "AVRO", avro), framing="none")
    assert encode_column(pa.array([{"n": 2}, None], rows.type), bare).to_pylist() == [b"\x04", None]

    json_schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}})
    encoding = FieldEncoding(True, "json", CatalogEntry(8, None, "JSON", json_schema))
    with pytest.raises(TypedEncodeError, match=r"column key, row 1: .*maximum"):
        encode_column(pa.array([{"n": 1}, {"n": 9}], rows.type), encoding)
    framed = encode_column(pa.array([{"n": 1}], rows.type), encoding)
    assert framed.to_pylist() == [b"\x00\x00\x00\x00\x08" + b'{"n":1}']

    encoding = FieldEncoding(False, "protobuf", CatalogEntry(9, None, "PROTOBUF", PROTO), message_indexes=(1,))
    with pytest.raises(TypedEncodeError, match=r"column value, row 0: not a example.User message"):
        encode_column(pa.array([{"nope": 1}], pa.struct([pa.field("nope", pa.int64())])), encoding)


def test_two_record_types_in_one_topic_under_the_record_strategies(spark, registry_broker):
    """Several record types in one topic: each DataFrame names its record (``recordName``,
    ``recordNamespace``); RecordNameStrategy registers it under its full name and
    TopicRecordNameStrategy under ``<topic>-<full name>``, as Confluent's serializers do;
    ``AvroDeserializer`` reads both types back, and the typed read gives one member per
    record type."""
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    clicks = spark.createDataFrame([(f"c{i}", (f"/p{i}",)) for i in range(3)], "key STRING, value STRUCT<url: STRING>")
    views = spark.createDataFrame([(f"v{i}", (f"page{i}", i)) for i in range(2)],
                                  "key STRING, value STRUCT<page: STRING, ms: BIGINT>")
    for strategy, subject_of in (("RecordNameStrategy", lambda topic, name: name),
                                 ("TopicRecordNameStrategy", lambda topic, name: f"{topic}-{name}")):
        topic = _topic(registry_broker, "mixed-w", partitions=1)
        for df, name in ((clicks, "Click"), (views, "View")):
            _write(df, registry_broker, topic, valueFormat="avro", recordName=name, recordNamespace=f"w{topic[-6:]}",
                   **{"subject.name.strategy": strategy})
        names = [f"w{topic[-6:]}.Click", f"w{topic[-6:]}.View"]
        for name in names:
            assert sr.get_versions(subject_of(topic, name)) == [1], (strategy, name)
        assert f"{topic}-value" not in sr.get_subjects()
        got = _consume(registry_broker, topic, 5, AvroDeserializer(sr))
        assert got == {**{f"c{i}": {"url": f"/p{i}"} for i in range(3)},
                       **{f"v{i}": {"page": f"page{i}", "ms": i} for i in range(2)}}, strategy
        read = (spark.read.format("kafkalog").option("kafka.bootstrap.servers", registry_broker.bootstrap)
                .option("subscribe", topic).option("valueFormat", "avro").option("keyFormat", "string")
                .option("schema.registry.url", registry_broker.schema_registry_url)
                .option("subject.name.strategy", strategy))
        if strategy == "RecordNameStrategy":  # TopicRecordNameStrategy finds <topic>-* itself
            read = read.option("valueSubject", ",".join(names))
        read = read.load()
        rows = {r.key: r.value.asDict(recursive=True) for r in read.collect()}
        assert rows["c1"] == {names[0]: {"url": "/p1"}, names[1]: None}
        assert rows["v1"] == {names[0]: None, names[1]: {"page": "page1", "ms": 1}}
