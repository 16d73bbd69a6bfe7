"""Tests of ``kafkalog export --value-format avro`` (spark_kafkalog/cli/export_cmd.py and
spark_kafkalog/jobs/export.py): typed values exported to Parquet, JSON lines and CSV, with
the real broker and its Schema Registry and real Spark.

confluent-kafka's ``AvroSerializer`` writes a topic of records with a nested record, a
``timestamp-millis`` logical type and a nullable string (plus a tombstone and two values
that are not Avro); the export's ``value`` column, read back with pyarrow / json / csv,
must equal what ``AvroDeserializer`` decodes, ``valueSchemaId`` the id the records were
written with, and ``_corrupt_value`` the bytes of the bad ones. Network mode with
``--schema-registry-url``; direct mode without it (the schemas from the log directory's
``_schemas``). Also the one-line errors of the new options (no Spark needed for them).

The Spark jobs run in the shared local[2] test session.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import struct
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from spark_kafkalog.cli.main import main
from spark_kafkalog.jobs.export import ExportError, export, plan_export
from tests.support.broker import BrokerProcess

SCHEMA = json.dumps({"type": "record", "name": "Order", "namespace": "com.example", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
        {"name": "name", "type": "string"},
        {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "city", "type": "string"}, {"name": "zip", "type": "int"}]}}]}},
    {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "items", "type": {"type": "array", "items": "string"}},
]})
N = 20
T0 = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
BAD = [b"\x07not avro", b"\x00" + struct.pack(">I", 987654) + b"\x02"]


def _order(i: int) -> dict:
    return {"id": 1000 + i,
            "customer": {"name": f"c{i}", "address": {"city": f"city-{i % 3}", "zip": 10000 + i}},
            "placed": T0 + dt.timedelta(minutes=i, milliseconds=i),
            "note": None if i % 3 == 0 else f"note {i}",
            "items": [f"sku-{j}" for j in range(i % 4)]}


@pytest.fixture(scope="module")
def typed_topic(tmp_path_factory):
    """(broker, topic, schema id, expected): expected maps (partition, offset) to (key,
    value as AvroDeserializer decodes it, raw bytes when it is not Avro)."""
    broker = BrokerProcess(tmp_path_factory.mktemp("export-typed"),
                           {"schema.registry.listeners": "http://127.0.0.1:0"}, name="export-typed")
    broker.start()
    try:
        topic = f"orders-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(30)
        sr = SchemaRegistryClient({"url": broker.schema_registry_url})
        ctx = SerializationContext(topic, MessageField.VALUE)
        serialize = AvroSerializer(sr, SCHEMA)
        values = [serialize(_order(i), ctx) for i in range(N)] + [None] + BAD
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        offsets: dict[int, int] = {0: 0, 1: 0}
        placed: list[tuple[int, int, str, bytes | None]] = []
        for i, value in enumerate(values):
            partition = i % 2
            producer.produce(topic, key=f"k{i}".encode(), value=value, partition=partition)
            placed.append((partition, offsets[partition], f"k{i}", value))
            offsets[partition] += 1
        assert producer.flush(30) == 0
        deserialize = AvroDeserializer(sr, SCHEMA)
        expected = {}
        for partition, offset, key, raw in placed:
            if raw is None or raw in BAD:
                expected[(partition, offset)] = (key, None, raw if raw in BAD else None)
            else:
                expected[(partition, offset)] = (key, deserialize(raw, ctx), None)
        schema_id = sr.get_latest_version(f"{topic}-value").schema_id
        yield broker, topic, schema_id, expected
    finally:
        broker.kill()


def _utc(value):
    """Timestamps as aware UTC datetimes, nested values walked."""
    if isinstance(value, dict):
        return {k: _utc(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utc(v) for v in value]
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    return value


def _from_json(value):
    """A JSON-decoded value with ``placed`` parsed back to a datetime."""
    if value is None:
        return None
    return {**value, "placed": dt.datetime.fromisoformat(value["placed"]).astimezone(dt.UTC)}


def _check_rows(rows, expected, schema_id, corrupt):
    """rows: (partition, offset) -> (key, value, valueSchemaId, _corrupt_value)."""
    assert rows.keys() == expected.keys()
    for at, (key, value, bad) in expected.items():
        got_key, got_value, got_id, got_corrupt = rows[at]
        assert got_key == key, at
        assert got_value == value, at
        assert got_corrupt == (None if bad is None else corrupt(bad)), at
        if value is not None:
            assert got_id == schema_id, at


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["export", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_parquet_network_mode_value_is_the_decoded_struct(spark, typed_topic, tmp_path, capsys):
    import pyarrow.parquet as pq

    broker, topic, schema_id, expected = typed_topic
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "--topic", topic, "--format", "parquet", "--output", str(out),
                                "--bootstrap-servers", broker.bootstrap, "--value-format", "avro",
                                "--key-format", "string", "--schema-registry-url", broker.schema_registry_url)
    assert code == 0 and err == "", err
    assert stdout.startswith(f"Exported {len(expected)} records ")
    table = pq.read_table(out)
    assert table.column_names == ["key", "value", "topic", "partition", "offset", "timestamp",
                                  "timestampType", "valueSchemaId", "_corrupt_key", "_corrupt_value"]
    assert table.column("_corrupt_key").null_count == table.num_rows  # every key is UTF-8
    value_type = table.schema.field("value").type
    assert value_type.get_field_index("customer") >= 0
    assert value_type.field("customer").type.field("address").type.field("zip").type == "int32"
    rows = {(r["partition"], r["offset"]): (r["key"], _utc(r["value"]), r["valueSchemaId"], r["_corrupt_value"])
            for r in table.to_pylist()}
    _check_rows(rows, expected, schema_id, lambda b: b)


def test_json_lines_and_csv_direct_mode_schemas_from_the_log_directory(spark, typed_topic, tmp_path, capsys):
    broker, topic, schema_id, expected = typed_topic
    out = tmp_path / "json"
    # direct mode, no registry URL: the schemas from the log directory's _schemas
    code, stdout, err = run_cli(capsys, "--topic", topic, "--format", "json", "--output", str(out),
                                "--path", str(broker.log_dir), "--value-format", "avro",
                                "--key-format", "string", "--binary-encoding", "base64")
    assert code == 0 and err == "", err
    rows = {}
    for path in sorted(out.glob("part-*.json")):
        for line in path.read_text(encoding="utf-8").splitlines():
            obj = json.loads(line)
            assert set(obj) == {"key", "value", "topic", "partition", "offset", "timestamp",
                                "timestampType", "valueSchemaId", "_corrupt_key", "_corrupt_value"}
            if obj["value"] is not None:
                assert "note" in obj["value"]  # a null field is written, not left out
            rows[(obj["partition"], obj["offset"])] = (obj["key"], _from_json(obj["value"]),
                                                       obj["valueSchemaId"], obj["_corrupt_value"])
    import base64
    _check_rows(rows, expected, schema_id, lambda b: base64.b64encode(b).decode())

    # CSV cannot hold a struct: the value is JSON text (the library call, same job)
    result = export(spark, topics=topic, fmt="csv", output=str(tmp_path / "csv"), path=str(broker.log_dir),
                    value_format="avro", key_format="string", options={"mode": "DROPMALFORMED"})
    assert result.records == len(expected) - len(BAD)
    csv_rows = {}
    for name in result.files:
        with open(name, newline="", encoding="utf-8") as f:
            for rec in csv.DictReader(f):
                assert "_corrupt_value" not in rec
                csv_rows[(int(rec["partition"]), int(rec["offset"]))] = (
                    rec["key"], _from_json(json.loads(rec["value"])) if rec["value"] else None)
    assert csv_rows == {at: (key, value) for at, (key, value, bad) in expected.items() if bad is None}


def test_typed_option_errors_are_one_line(typed_topic, tmp_path, capsys):
    broker, topic, _, _ = typed_topic
    out = str(tmp_path / "out")
    base = ["--topic", topic, "--format", "parquet", "--output", out]
    cases = [
        (base + ["--bootstrap-servers", broker.bootstrap, "--value-format", "avro"],
         "valueFormat=avro needs the Schema Registry: set schema.registry.url"),
        (base + ["--path", str(broker.log_dir), "--value-format", "avro", "--option", "valueFormat=json"],
         "give --value-format or --option valueFormat=..., not both"),
        (base + ["--path", str(broker.log_dir), "--value-format", "xml"],
         "argument --value-format: invalid choice: 'xml'"),
        (base + ["--path", str(broker.log_dir), "--option", "mode=DROPMALFORMED"],
         "Option 'mode' is for typed reads: set valueFormat or keyFormat"),
        (base + ["--path", str(broker.log_dir), "--value-format", "avro", "--option", "mode=LENIENT"],
         "mode: 'LENIENT' is not valid"),
    ]
    for args, message in cases:
        code, stdout, err = run_cli(capsys, *args)
        lines = err.strip().splitlines()
        assert code != 0 and stdout == "" and len(lines) == 1, (args, err)
        assert message in lines[0], (message, err)
    with pytest.raises(ExportError, match="option 'schema.registry.url' is also given by the export's "
                                          "schema_registry_url argument"):
        plan_export(topic, path=str(broker.log_dir), value_format="avro", schema_registry_url="http://x:1",
                    options={"schema.registry.url": "http://y:1"})
    assert not Path(out).exists()
