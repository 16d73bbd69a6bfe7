"""Typed Spark reads of Avro (``valueFormat=avro``, ``keyFormat=avro``) for every Avro type
and logical type, against confluent-kafka's ``AvroDeserializer``.

One topic, written by confluent-kafka's ``AvroSerializer`` against the broker's Schema
Registry: Avro record keys, and values covering nested types (a record in a record in a
record, arrays and maps of records, a map of arrays, an array of maps, an enum, a fixed,
``["null", record]``, ``["null", "string", "long"]``, a union of a record, an enum, a fixed,
a map and a double, ``[int, long]`` and ``[float, double]``, arrays and maps of nullable
values, bytes, float, boolean), every logical type (decimal on bytes and on fixed, uuid on
string and on fixed(16), date, time-millis, time-micros, timestamp-millis / -micros /
-nanos, local-timestamp-millis / -micros / -nanos, duration), alone and inside arrays, maps
and unions, at their edges (epoch, before 1970, far future, the long's limits where the
type allows them), and default values (records written with a first version that lacks
the defaulted fields, read with the latest). The latest version's records come in the
three framings: the id in the 5-byte prefix, magic 1 and the GUID in the prefix, the GUID
in a record header.

- network mode, the session time zone set to UTC: the Spark schema is the documented
  mapping (docs/spark/formats.md, ``broker.schema.avro_arrow``), and every row's key and
  value equal, field by field, what ``AvroDeserializer`` decodes (the latest version as
  the reader schema) after ``_as_spark`` (fastavro's Python values in Spark's form);
  ``valueSchemaId`` / ``keySchemaId`` are the registered ids whatever the framing;
- direct mode on the broker's log directory, with the registry URL, gives the same rows;
- the decoder alone (``broker.schema.avro_columnar``, columnar and row paths, no Spark)
  on fastavro-written payloads equals fastavro's reader, including values pyspark's
  collect cannot show, and refuses what Spark's ``from_avro`` refuses (a decimal beyond
  its precision, a timestamp-millis beyond int64 microseconds).
"""
from __future__ import annotations

import datetime as dt
import io
import json
import struct
import time
import uuid
from decimal import Decimal

import fastavro
import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient, header_schema_id_serializer
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from broker.schema.avro import parse as parse_avro
from broker.schema.avro_columnar import decode
from tests.support.broker import BrokerProcess

INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
UTC = dt.UTC


def _ts(kind: str) -> dict:
    return {"type": "long", "logicalType": kind}


ITEM = {"type": "record", "name": "Item", "fields": [{"name": "sku", "type": "string"},
                                                     {"name": "qty", "type": "int"}]}
FIELDS_V1 = [
    {"name": "id", "type": "long"},
    {"name": "outer", "type": {"type": "record", "name": "Outer", "fields": [
        {"name": "label", "type": "string"},
        {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
            {"name": "score", "type": "float"}, {"name": "ok", "type": "boolean"},
            {"name": "raw", "type": "bytes"}]}}]}},
    {"name": "items", "type": {"type": "array", "items": ITEM}},
    {"name": "by_name", "type": {"type": "map", "values": "Item"}},
    {"name": "tag_lists", "type": {"type": "map", "values": {"type": "array", "items": "string"}}},
    {"name": "list_maps", "type": {"type": "array", "items": {"type": "map", "values": "long"}}},
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
    {"name": "md5", "type": {"type": "fixed", "name": "MD5", "size": 16}},
    {"name": "maybe", "type": ["null", "Item"], "default": None},
    {"name": "choice", "type": ["null", "string", "long"], "default": None},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "b", "type": "boolean"},
    {"name": "bs", "type": "bytes"},
    {"name": "dec_bytes", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}},
    {"name": "dec_fixed", "type": {"type": "fixed", "name": "Dec38", "size": 16, "logicalType": "decimal",
                                   "precision": 38, "scale": 10}},
    {"name": "uuid_str", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "uuid_fixed", "type": {"type": "fixed", "name": "Uuid16", "size": 16, "logicalType": "uuid"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "t_ms", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "t_us", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "ts_ms", "type": _ts("timestamp-millis")},
    {"name": "ts_us", "type": _ts("timestamp-micros")},
    {"name": "ts_ns", "type": _ts("timestamp-nanos")},
    {"name": "lts_ms", "type": _ts("local-timestamp-millis")},
    {"name": "lts_us", "type": _ts("local-timestamp-micros")},
    {"name": "lts_ns", "type": _ts("local-timestamp-nanos")},
    {"name": "dur", "type": {"type": "fixed", "name": "Duration", "size": 12, "logicalType": "duration"}},
    # unions of named types and containers, merged numeric unions, logical types inside
    # arrays, maps and unions
    {"name": "mix", "type": ["null", "Item", "Color", "MD5", {"type": "map", "values": "int"}, "double"]},
    {"name": "num", "type": ["null", "int", "long"]},
    {"name": "real", "type": ["float", "double"]},
    {"name": "sparse", "type": {"type": "array", "items": ["null", "long"]}},
    {"name": "opt_items", "type": {"type": "map", "values": ["null", "Item"]}},
    {"name": "ts_list", "type": {"type": "array", "items": _ts("timestamp-millis")}},
    {"name": "lts_map", "type": {"type": "map", "values": _ts("local-timestamp-millis")}},
    {"name": "time_list", "type": {"type": "array", "items": {"type": "int", "logicalType": "time-millis"}}},
    {"name": "opt_ts", "type": ["null", _ts("timestamp-micros")]},
    {"name": "opt_dec", "type": ["null", "Dec38"]},
    {"name": "dec_map", "type": {"type": "map", "values": {"type": "bytes", "logicalType": "decimal",
                                                            "precision": 9, "scale": 3}}},
    {"name": "opt_uuid", "type": ["null", {"type": "string", "logicalType": "uuid"}]},
    {"name": "opt_date", "type": [{"type": "int", "logicalType": "date"}, "null"]},
]
# the latest version: v1 and fields with defaults (records of v1 read them)
DEFAULTED = [
    {"name": "d_int", "type": "int", "default": 7},
    {"name": "d_str", "type": "string", "default": "dflt"},
    {"name": "d_arr", "type": {"type": "array", "items": "long"}, "default": [1, 2]},
    {"name": "d_rec", "type": {"type": "record", "name": "Point", "fields": [
        {"name": "x", "type": "double"}, {"name": "y", "type": ["null", "double"], "default": None}]},
     "default": {"x": 1.5, "y": None}},
    {"name": "d_enum", "type": "Color", "default": "GREEN"},
    {"name": "d_union", "type": ["null", "string"], "default": None},
    {"name": "d_bytes", "type": "bytes", "default": "\u00ff\u0001"},
    {"name": "d_ts", "type": _ts("timestamp-millis"), "default": 1000},
    {"name": "d_map", "type": {"type": "map", "values": "Item"}, "default": {"a": {"sku": "x", "qty": 1}}},
    {"name": "d_choice", "type": ["string", "null", "long"], "default": "z"},
    {"name": "d_dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
     "default": "\u00ff\u0000"},
    {"name": "d_date", "type": {"type": "int", "logicalType": "date"}, "default": 19000},
    {"name": "d_uuid", "type": {"type": "string", "logicalType": "uuid"},
     "default": "00000000-0000-0000-0000-00000000000a"},
]


def _schema(fields: list) -> str:
    return json.dumps({"type": "record", "name": "Everything", "namespace": "types", "fields": fields})


V1, V2 = _schema(FIELDS_V1), _schema(FIELDS_V1 + DEFAULTED)
KEY = json.dumps({"type": "record", "name": "Key", "namespace": "types", "fields": [
    {"name": "n", "type": "long"}, {"name": "s", "type": "string"}]})

# Spark's types of V2's fields (docs/spark/formats.md: "Spark types", Avro)
ITEM_T = "struct<sku:string,qty:int>"
SPARK_TYPE = ("struct<id:bigint,outer:struct<label:string,inner:struct<score:float,ok:boolean,raw:binary>>,"
              f"items:array<{ITEM_T}>,by_name:map<string,{ITEM_T}>,tag_lists:map<string,array<string>>,"
              "list_maps:array<map<string,bigint>>,color:string,md5:binary,"
              f"maybe:{ITEM_T},choice:struct<member0:string,member1:bigint>,f:float,d:double,b:boolean,"
              "bs:binary,dec_bytes:decimal(20,4),dec_fixed:decimal(38,10),uuid_str:string,uuid_fixed:binary,"
              "day:date,t_ms:int,t_us:bigint,ts_ms:timestamp,ts_us:timestamp,ts_ns:timestamp,"
              "lts_ms:timestamp_ntz,lts_us:timestamp_ntz,lts_ns:timestamp_ntz,dur:binary,"
              "mix:struct<member0:struct<sku:string,qty:int>,member1:string,member2:binary,"
              "member3:map<string,int>,member4:double>,num:bigint,real:double,sparse:array<bigint>,"
              f"opt_items:map<string,{ITEM_T}>,ts_list:array<timestamp>,lts_map:map<string,timestamp_ntz>,"
              "time_list:array<int>,opt_ts:timestamp,opt_dec:decimal(38,10),dec_map:map<string,decimal(9,3)>,"
              "opt_uuid:string,opt_date:date,"
              "d_int:int,d_str:string,d_arr:array<bigint>,d_rec:struct<x:double,y:double>,d_enum:string,"
              "d_union:string,d_bytes:binary,d_ts:timestamp,d_map:map<string,struct<sku:string,qty:int>>,"
              "d_choice:struct<member0:string,member1:bigint>,d_dec:decimal(5,2),d_date:date,d_uuid:string>")

# (timestamp-millis, timestamp-micros, timestamp-nanos) at the edges: the epoch, before 1970,
# far future, the limits Python's datetime and the long allow (pyspark's collect turns a
# timestamp into a local datetime: 0001-01-01T00:00Z is out of its range, a day later is not)
EDGE_TS = [
    (0, 0, 0),
    (-1, -1, -1),
    (-2208988800000, -2208988800000001, -1234567891),                  # 1900-01-01 and before
    (253402300799999, 253402300799999999, INT64_MAX),                   # 9999-12-31T23:59:59.999..., 2262
    (-62135510400000, -62135510400000000, INT64_MIN),                   # 0001-01-02, 1677
    (1700000000123, 1700000000123456, 1700000000123456789),
]


def _value(i: int) -> dict:
    """Record i: fastavro's Python values (the serializer's input)."""
    ms, us, ns = EDGE_TS[i % len(EDGE_TS)]
    sign = "-" if i % 2 else ""
    item = {"sku": f"s{i}", "qty": i}
    return {
        "id": [0, INT64_MAX, INT64_MIN, -1][i % 4] if i < 4 else i,
        "outer": {"label": f"o{i}", "inner": {"score": i / 4, "ok": bool(i % 2), "raw": bytes([i, 0, 255])}},
        "items": [{"sku": f"a{j}", "qty": -j} for j in range(i % 3)],
        "by_name": {f"k{j}": {"sku": f"m{j}", "qty": j} for j in range(i % 3)},
        "tag_lists": {"x": [], "y": [f"t{i}", ""]} if i % 2 else {},
        "list_maps": [{}, {"a": INT64_MIN, "b": i}] if i % 2 else [],
        "color": ["RED", "GREEN", "BLUE"][i % 3],
        "md5": bytes(range(i, i + 16)),
        "maybe": None if i % 3 == 0 else item,
        "choice": [None, f"c{i}", INT64_MAX, -i][i % 4],
        "f": [0.0, -1.5, 3.25e38, float("inf")][i % 4],
        "d": [0.0, -2.5e-308, 1.7976931348623157e308, float("-inf")][i % 4],
        "b": i % 2 == 0,
        "bs": b"" if i % 3 == 0 else bytes([255 - i]) * i,
        # Decimal from text: arithmetic would round to the context's 28 digits
        "dec_bytes": Decimal(sign + ["0.0000", "1234567890123456.7891", "9999999999999999.9999", "0.0001"][i % 4]),
        "dec_fixed": Decimal(sign + ["0E-10", "9999999999999999999999999999.9999999999", "-0.0000000001",
                                     "12345678901234567890.1234567890"][i % 4]),  # i % 4 == 2: no sign
        "uuid_str": uuid.UUID(int=(i * 0x1234567890ABCDEF) % 2**128),
        "uuid_fixed": uuid.UUID(int=2**128 - 1 - i).bytes,
        "day": [dt.date(1970, 1, 1), dt.date(1969, 12, 31), dt.date(1, 1, 1), dt.date(9999, 12, 31),
                dt.date(1582, 10, 4), dt.date(2024, 2, 29)][i % 6],
        "t_ms": [dt.time(0), dt.time(23, 59, 59, 999000), dt.time(12, 30, 1, 5000)][i % 3],
        "t_us": [dt.time(0), dt.time(23, 59, 59, 999999), dt.time(0, 0, 0, 1)][i % 3],
        "ts_ms": ms, "ts_us": us, "ts_ns": ns, "lts_ms": ms, "lts_us": us, "lts_ns": ns,
        "dur": struct.pack("<III", i, 2 * i, 2**32 - 1 - i),
        "mix": [None, item, "BLUE", bytes(16), {"a": -i, "b": 2**31 - 1}, -0.5][i % 6],
        "num": [None, 2**31 - 1, 2**31, INT64_MIN][i % 4],
        "real": [1.5, 1e300][i % 2],
        "sparse": [None, i, None, INT64_MAX][: i % 5],
        "opt_items": {"n": None, "i": item} if i % 2 else {},
        "ts_list": [dt.datetime.fromtimestamp(ms / 1000, UTC), dt.datetime(1969, 7, 20, 20, 17, 40, tzinfo=UTC)],
        "lts_map": {"x": dt.datetime(1960, 2, 29, 12, 0, 0, 123000), "y": dt.datetime(2999, 1, 1)} if i % 2 else {},
        "time_list": [dt.time(0, 0, 0, 1000 * i), dt.time(23, 59, 59)],
        "opt_ts": None if i % 3 == 1 else dt.datetime(1900, 1, 1, 0, 0, 0, i, tzinfo=UTC),
        "opt_dec": None if i % 2 else Decimal(sign + "12345678901234567890123456.7890123456"),
        "dec_map": {"min": Decimal("-999999.999"), "max": Decimal("999999.999"), "one": Decimal(sign + "0.001")},
        "opt_uuid": None if i % 2 else uuid.UUID(int=i),
        "opt_date": None if i % 3 == 2 else dt.date(1969, 1, i + 1),
        "d_int": -i, "d_str": f"given-{i}", "d_arr": [INT64_MAX] * (i % 2), "d_rec": {"x": -i / 2, "y": i * 1.0},
        "d_enum": "BLUE", "d_union": None if i % 2 else f"u{i}", "d_bytes": bytes([i]),
        "d_ts": dt.datetime(2000, 1, 1, tzinfo=UTC), "d_map": {}, "d_choice": [None, "w", -7][i % 3],
        "d_dec": Decimal(sign + "999.99"), "d_date": dt.date(2000, 1, 1), "d_uuid": uuid.UUID(int=2**128 - 1),
    }


def _v1(i: int) -> dict:
    return {k: v for k, v in _value(i).items() if not k.startswith("d_") or k == "d"}


# ---------------------------------------------------------------------------------------
# fastavro's Python values -> Spark's


def _spark_time(value: dt.datetime) -> dt.datetime:
    """An aware datetime as pyspark's collect gives a TimestampType: naive, in this
    process's local time (``datetime.fromtimestamp`` of the micros)."""
    micros = (value - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1)
    return dt.datetime.fromtimestamp(micros // 10**6).replace(microsecond=micros % 10**6)


def _ntz(micros: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)


def _holds(schema, value, names: dict) -> bool:
    """Whether fastavro's ``value`` is of the union branch ``schema`` (how the writer picked it)."""
    node = names.get(schema, schema) if isinstance(schema, str) else schema
    kind = node["type"] if isinstance(node, dict) else node
    if kind == "record":
        return isinstance(value, dict) and value.keys() == {f["name"] for f in node["fields"]}
    if kind == "enum":
        return value in node["symbols"]
    if kind == "fixed":
        return isinstance(value, bytes) and len(value) == node["size"]
    return isinstance(value, {"map": dict, "array": list, "string": str, "bytes": bytes, "boolean": bool,
                              "int": int, "long": int, "float": float, "double": float}[kind])


def _as_spark(schema, value, names: dict, zoned=_spark_time):
    """fastavro's decoded value of an Avro ``schema`` node as Spark returns it (the
    documented mapping):

    - records -> dicts of their fields; maps, arrays, enums (str), Decimal, date, bytes
      (fixed, duration, uuid on fixed), numbers as they are;
    - ``[null, T]`` -> T or None; ``[int, long]`` / ``[float, double]`` (with null or not)
      -> the number; other unions -> ``{member0..N}`` with the branch the value is of set
      (``_holds``), None when the value is null (Spark's struct is null then);
    - time-millis / time-micros (a ``datetime.time``) -> the int of the day's milliseconds /
      microseconds; timestamp-millis / -micros (an aware datetime) -> ``zoned`` of it
      (``_spark_time``: as pyspark's collect gives it); local-timestamp-millis / -micros
      (naive) as they are; the -nanos ones (fastavro leaves them longs) floored to
      microseconds; uuid (a ``UUID``) -> str;
    - a field's default, which fastavro returns as the schema's JSON (a long for a
      timestamp, an int for a date, a string of code points U+0000-U+00FF for bytes and a
      decimal's bytes): as Avro (and Spark) read it, the logical type applied.
    """
    if isinstance(schema, str) and schema in names:
        schema = names[schema]
    if isinstance(schema, list):
        others = [b for b in schema if b != "null"]
        if value is None:
            return None
        if len(others) == 1 or {json.dumps(b) for b in others} in ({'"int"', '"long"'}, {'"float"', '"double"'}):
            return _as_spark(others[0] if len(others) == 1 else "double", value, names, zoned)
        taken = next(s for s, b in enumerate(others) if _holds(b, value, names))
        return {f"member{s}": _as_spark(b, value, names, zoned) if s == taken else None
                for s, b in enumerate(others)}
    kind, logical = (schema["type"], schema.get("logicalType")) if isinstance(schema, dict) else (schema, None)
    if kind in ("bytes", "fixed") and isinstance(value, str):  # a default
        value = value.encode("latin-1")
    if kind == "record":
        return {f["name"]: _as_spark(f["type"], value[f["name"]], names, zoned) for f in schema["fields"]}
    if kind == "array":
        return [_as_spark(schema["items"], v, names, zoned) for v in value]
    if kind == "map":
        return {k: _as_spark(schema["values"], v, names, zoned) for k, v in value.items()}
    if logical == "decimal" and isinstance(value, bytes):  # a default
        return Decimal(int.from_bytes(value, "big", signed=True)).scaleb(-schema.get("scale", 0))
    if logical == "date" and isinstance(value, int):  # a default
        return dt.date(1970, 1, 1) + dt.timedelta(days=value)
    if logical == "time-millis":
        return (value.hour * 3600 + value.minute * 60 + value.second) * 1000 + value.microsecond // 1000
    if logical == "time-micros":
        return (value.hour * 3600 + value.minute * 60 + value.second) * 10**6 + value.microsecond
    if logical in ("timestamp-millis", "timestamp-micros"):
        if isinstance(value, int):  # a default
            value = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(
                microseconds=value * (1000 if logical == "timestamp-millis" else 1))
        return zoned(value)
    if logical == "timestamp-nanos":
        return zoned(dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=value // 1000))
    if logical == "local-timestamp-nanos":
        return _ntz(value // 1000)
    if logical == "uuid" and kind == "string":
        return str(value)
    return value


def _names(schema) -> dict:
    """Named types of a parsed schema, by short name (this file's names are unique)."""
    out: dict = {}

    def walk(node):
        if isinstance(node, list):
            for b in node:
                walk(b)
        elif isinstance(node, dict):
            if "name" in node and node["type"] in ("record", "enum", "fixed"):
                out[node["name"]] = node
            for f in node.get("fields", []):
                walk(f["type"])
            for k in ("items", "values"):
                if k in node:
                    walk(node[k])
    walk(schema)
    return out


# ---------------------------------------------------------------------------------------
# the topic, confluent-kafka's reading, Spark's


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("avrotypes"), {"schema.registry.listeners": "http://127.0.0.1:0"},
                           name="avrotypes")
    broker.start()
    yield broker
    broker.kill()


FRAMINGS = ("v1", "id", "guid", "header")  # the writer version / framing of records 6k .. 6k+5
PER = 6


@pytest.fixture(scope="module")
def avro_topic(registry_broker):
    """The topic (one partition) and its records in offset order: (framing, key dict,
    value dict as written)."""
    topic = f"types-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": registry_broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(30)
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    serializers = {
        "v1": AvroSerializer(sr, V1),
        "id": AvroSerializer(sr, V2),
        "guid": AvroSerializer(sr, V2, conf={"schema.id.serializer": lambda payload, ctx, sid:
                                             sid.guid_to_bytes() + payload}),
        "header": AvroSerializer(sr, V2, conf={"schema.id.serializer": header_schema_id_serializer}),
    }
    keys = AvroSerializer(sr, KEY)
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap, "linger.ms": 5})
    written = []
    for n, framing in enumerate(FRAMINGS):
        for i in range(n * PER, (n + 1) * PER):
            value = _v1(i) if framing == "v1" else _value(i)
            key = {"n": [INT64_MIN, INT64_MAX, 0][i % 3] if i < 3 else -i, "s": f"key-{i}" * (i % 2)}
            headers: list = []
            payload = serializers[framing](value, SerializationContext(topic, MessageField.VALUE, headers))
            producer.produce(topic, key=keys(key, SerializationContext(topic, MessageField.KEY)), value=payload,
                             headers=headers or None, partition=0)
            written.append((framing, key, value))
    assert producer.flush(30) == 0
    return topic, written


def _consumed(broker: BrokerProcess, topic: str, count: int) -> list[tuple]:
    """(offset, key, value, headers, raw value) as confluent-kafka's AvroDeserializer decodes them
    (reader schemas: the key schema, the values' latest version; ids and GUIDs found by
    ``dual_schema_id_deserializer``, its default)."""
    sr = SchemaRegistryClient({"url": broker.schema_registry_url})
    values, keys = AvroDeserializer(sr, V2), AvroDeserializer(sr, KEY)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    out = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            value = values(msg.value(), SerializationContext(topic, MessageField.VALUE, msg.headers()))
            key = keys(msg.key(), SerializationContext(topic, MessageField.KEY, msg.headers()))
            out.append((msg.offset(), key, value, msg.headers(), msg.value()))
    finally:
        consumer.close()
    return sorted(out, key=lambda r: r[0])


def _plain(value):
    """A Spark Row as plain Python (structs as dicts)."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _read(spark, broker, topic, direct: bool = False):
    reader = spark.read.format("kafkalog").option("subscribe", topic).option("valueFormat", "avro") \
        .option("keyFormat", "avro").option("schema.registry.url", broker.schema_registry_url)
    if direct:
        return reader.load(str(broker.log_dir))
    return reader.option("kafka.bootstrap.servers", broker.bootstrap).load()


@pytest.fixture
def utc_session(spark):
    """The Spark session with its time zone set to UTC for the test, then restored."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    yield spark
    spark.conf.set("spark.sql.session.timeZone", before)


def test_every_avro_type_equals_confluent_kafka_in_every_framing(utc_session, registry_broker, avro_topic):
    spark, topic, written = utc_session, *avro_topic
    consumed = _consumed(registry_broker, topic, len(written))
    assert [o for o, *_ in consumed] == list(range(len(written)))
    # the framings are what they claim: magic 0 + id, magic 1 + GUID, a bare payload and the GUID
    # in the header
    sr = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    versions = {n: sr.get_version(f"{topic}-value", n) for n in (1, 2)}
    key_id = sr.get_latest_version(f"{topic}-key").schema_id
    guid = b"\x01" + uuid.UUID(versions[2].guid).bytes
    for offset, _, _, headers, raw in consumed:
        header = dict(headers or []).get("__value_schema_id")
        framing = FRAMINGS[offset // PER]
        assert (header == guid) == (framing == "header"), offset
        prefix = {"v1": struct.pack(">bI", 0, versions[1].schema_id),
                  "id": struct.pack(">bI", 0, versions[2].schema_id), "guid": guid, "header": b""}[framing]
        assert raw.startswith(prefix) and (framing == "header") == (raw[0] not in (0, 1)), offset

    v2 = json.loads(V2)
    names = _names(v2)
    df = _read(spark, registry_broker, topic)
    assert df.schema["value"].dataType.simpleString() == SPARK_TYPE
    assert df.schema["key"].dataType.simpleString() == "struct<n:bigint,s:string>"
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [r.offset for r in rows] == list(range(len(written)))
    for row, (offset, key, value, _, _) in zip(rows, consumed, strict=True):
        framing = FRAMINGS[offset // PER]
        assert row._corrupt_value is None and row._corrupt_key is None, offset
        assert row.valueSchemaId == versions[1 if framing == "v1" else 2].schema_id, (offset, framing)
        assert row.keySchemaId == key_id, offset
        assert _plain(row.key) == key, offset
        got, want = _plain(row.value), _as_spark(v2, value, names)
        assert got.keys() == want.keys(), offset
        for field in want:
            assert got[field] == want[field], (offset, framing, field)

    # direct mode on the log directory, the schemas from the registry: the same rows
    direct = _read(spark, registry_broker, topic, direct=True)
    assert direct.schema == df.schema
    assert sorted(direct.collect(), key=lambda r: r.offset) == rows


def _arrow_as_spark(value, type_: pa.DataType):
    """A value of the decoder's Arrow array (``to_pylist``) of ``type_`` as ``_as_spark``
    gives it with ``zoned`` the identity: maps (lists of pairs) as dicts."""
    if value is None:
        return None
    if pa.types.is_struct(type_):
        return {f.name: _arrow_as_spark(value[f.name], f.type) for f in type_}
    if pa.types.is_map(type_):
        return {k: _arrow_as_spark(v, type_.item_type) for k, v in value}
    if pa.types.is_list(type_):
        return [_arrow_as_spark(v, type_.value_type) for v in value]
    return value


def _fastavro(schema: str, value: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(schema)), value)
    return out.getvalue()


@pytest.mark.parametrize("vectorised", [True, False], ids=["columnar", "row"])
def test_decoder_alone_equals_fastavro(vectorised):
    """``broker.schema.avro_columnar.decode`` on fastavro's payloads (v1 resolved to v2 and v2
    itself, plus a 0001-01-01T00:00Z timestamp, out of pyspark's collect's range) equals
    fastavro's reader, field by field; values Spark's ``from_avro`` cannot read are bad
    records."""
    v1, v2 = parse_avro(V1), parse_avro(V2)
    names = _names(json.loads(V2))
    year_one = dict(_value(0), ts_ms=-62135596800000, ts_us=-62135596800000000, lts_us=-62135596800000000)
    for writer, text, values in ((v1, V1, [_v1(i) for i in range(6)]),
                                 (v2, V2, [_value(i) for i in range(6, 12)] + [year_one])):
        payloads = [_fastavro(text, v) for v in values]
        result = decode(pa.array(payloads, pa.binary()), writer, v2, vectorised=vectorised)
        assert not result.bad.any(), result.errors
        parsed_writer, parsed_reader = fastavro.parse_schema(json.loads(text)), fastavro.parse_schema(json.loads(V2))
        for n, (payload, got) in enumerate(zip(payloads, result.array.to_pylist(), strict=True)):
            want = _as_spark(json.loads(V2), fastavro.schemaless_reader(io.BytesIO(payload), parsed_writer,
                                                                        parsed_reader), names, lambda t: t)
            got = _arrow_as_spark(got, result.array.type)
            for field in want:
                assert got[field] == want[field], (text == V1, n, field)
    # bad, as in Spark's from_avro: a fixed decimal of 39 digits (fastavro writes what it is
    # given: unscaled 10**38), a timestamp-millis past int64 microseconds (Spark's
    # millisToMicros overflows); the last millisecond that fits is read
    edges = [_fastavro(V2, dict(_value(6), dec_fixed=Decimal("1E+28"))),
             _fastavro(V2, dict(_value(6), ts_ms=INT64_MAX // 1000 + 1)),
             _fastavro(V2, dict(_value(6), ts_ms=INT64_MIN // 1000 - 1)),
             _fastavro(V2, dict(_value(6), ts_ms=INT64_MAX // 1000))]
    result = decode(pa.array(edges, pa.binary()), v2, v2, vectorised=vectorised)
    assert result.bad.tolist() == [True, True, True, False], result.errors
    assert "decimal" in result.reason(0) and "timestamp" in result.reason(1)
    assert result.array.field("ts_ms")[3].value == INT64_MAX // 1000 * 1000
