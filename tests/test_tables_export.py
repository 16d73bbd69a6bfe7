"""Exactly-once incremental exports of a topic to Iceberg and Delta tables
(``spark_kafkalog.tables.job``) with real Spark, against the real broker, read back with
pyiceberg's scan and deltalake's reader.

Covered, for both formats: a first export of a topic of three partitions (records with
keys, nulls and headers) holds every (partition, offset) exactly once with its bytes, and
the offsets stored in the table's commit equal the topic's end offsets; a second run after
more records adds exactly those; a run with nothing new adds nothing and commits no data;
two exporters at once on one table (threads of one Spark session) hold every record once;
a partition added to the topic is picked up; direct mode (the log directory) continues a
table network mode began. Iceberg: a topic deleted and created again (a new topic id) is
refused, then restarted from its earliest offsets when asked. A typed Avro topic becomes
a table of typed columns whose schema gains the field a compatible v2 adds.

Spark jobs cost seconds each: few exports, several assertions each.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from spark_kafkalog.tables.base import TopicIdMismatchError
from spark_kafkalog.tables.job import export_table
from tests.support.tables import check_table, create_topic, end_offsets, produce_numbered, table_rows


@pytest.fixture(scope="module")
def broker(table_broker):
    return table_broker


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
def test_export_is_exactly_once_and_incremental(spark, broker, tmp_path, fmt):
    topic = f"tbl-{fmt}-{uuid.uuid4().hex[:6]}"
    create_topic(broker, topic)
    produce_numbered(broker, topic, 0, 3000)
    table = str(tmp_path / "table")
    first = export_table(spark, topic=topic, table=table, fmt=fmt, bootstrap_servers=broker.bootstrap)
    assert first.records == 3000 and first.offsets_before is None
    assert first.offsets_after.topic_id is not None
    check_table(fmt, table, topic, broker)
    rows = table_rows(fmt, table, topic)
    assert rows.column_names[:8] == ["topic", "partition", "offset", "timestamp", "timestampType", "key", "value",
                                     "headers"]

    produce_numbered(broker, topic, 3000, 500)
    second = export_table(spark, topic=topic, table=table, fmt=fmt, bootstrap_servers=broker.bootstrap)
    assert second.records == 500 and second.offsets_before == first.offsets_after
    check_table(fmt, table, topic, broker)

    # nothing new: nothing added, the offsets as they were
    third = export_table(spark, topic=topic, table=table, fmt=fmt, bootstrap_servers=broker.bootstrap)
    assert third.records == 0 and third.files == 0 and third.offsets_after == second.offsets_after

    # a partition added to the topic; direct mode (the log directory) goes on from the table
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    produce_numbered(broker, topic, 3500, 400, partitions=4)
    deadline = time.monotonic() + 30
    while sum(end_offsets(broker, topic, 4).values()) < 3900 and time.monotonic() < deadline:
        time.sleep(0.1)  # scenario: the produce is acknowledged; the watermarks follow at once
    fourth = export_table(spark, topic=topic, table=table, fmt=fmt, path=str(broker.log_dir))
    assert fourth.records == 400 and fourth.partitions[3] == 100
    check_table(fmt, table, topic, broker, partitions=4)


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
def test_two_exporters_at_once_hold_every_record_once(spark, broker, tmp_path, fmt):
    topic = f"tbl-race-{fmt}-{uuid.uuid4().hex[:6]}"
    create_topic(broker, topic)
    produce_numbered(broker, topic, 0, 2000)
    table = str(tmp_path / "table")
    results, errors = [], []

    def run():
        try:
            results.append(export_table(spark, topic=topic, table=table, fmt=fmt, bootstrap_servers=broker.bootstrap))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert errors == []
    check_table(fmt, table, topic, broker)
    assert sum(r.records for r in results) >= 2000


def test_a_recreated_topic_is_refused_then_restarted_on_request(spark, broker, tmp_path):
    topic = f"tbl-again-{uuid.uuid4().hex[:6]}"
    create_topic(broker, topic)
    produce_numbered(broker, topic, 0, 30)
    table = str(tmp_path / "table")
    first = export_table(spark, topic=topic, table=table, fmt="iceberg", bootstrap_servers=broker.bootstrap)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 30
    while True:
        try:
            create_topic(broker, topic)
            break
        except Exception:  # noqa: BLE001 - the deletion completes asynchronously
            assert time.monotonic() < deadline
            time.sleep(0.2)  # scenario: waiting for the topic deletion to finish
    produce_numbered(broker, topic, 100, 9)
    with pytest.raises(TopicIdMismatchError, match="deleted and created again"):
        export_table(spark, topic=topic, table=table, fmt="iceberg", bootstrap_servers=broker.bootstrap)
    again = export_table(spark, topic=topic, table=table, fmt="iceberg", bootstrap_servers=broker.bootstrap,
                         on_new_topic_id="restart")
    assert again.records == 9 and again.offsets_after.topic_id != first.offsets_after.topic_id
    assert table_rows("iceberg", table, topic).num_rows == 39


V1 = json.dumps({"type": "record", "name": "Reading", "namespace": "t", "fields": [
    {"name": "device", "type": "string"}, {"name": "celsius", "type": "double"},
    {"name": "offset", "type": "long"}]})
V2 = json.dumps({"type": "record", "name": "Reading", "namespace": "t", "fields": [
    {"name": "device", "type": "string"}, {"name": "celsius", "type": "double"},
    {"name": "offset", "type": "long"}, {"name": "unit", "type": ["null", "string"], "default": None}]})


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
def test_a_typed_topic_becomes_typed_columns_that_evolve(spark, broker, tmp_path, fmt):
    topic = f"tbl-avro-{fmt}-{uuid.uuid4().hex[:6]}"
    create_topic(broker, topic, 1)
    sr = SchemaRegistryClient({"url": broker.schema_registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    v1 = AvroSerializer(sr, V1)
    for i in range(5):
        producer.produce(topic, value=v1({"device": f"d{i}", "celsius": i / 2, "offset": 100 + i}, ctx))
    producer.produce(topic, value=b"not avro")
    assert producer.flush(30) == 0
    table = str(tmp_path / "table")
    typed = {"value_format": "avro", "schema_registry_url": broker.schema_registry_url}
    assert export_table(spark, topic=topic, table=table, fmt=fmt, bootstrap_servers=broker.bootstrap,
                        **typed).records == 6
    rows = table_rows(fmt, table, topic)
    # the value's fields are columns; its "offset" clashes with Kafka's: value_offset
    assert {"device", "celsius", "value_offset", "valueSchemaId", "_corrupt_value"} <= set(rows.column_names)
    assert "value" not in rows.column_names and "unit" not in rows.column_names
    got = sorted(zip(rows.column("offset").to_pylist(), rows.column("device").to_pylist(),
                     rows.column("value_offset").to_pylist(), rows.column("_corrupt_value").to_pylist(), strict=True))
    assert got == [(i, f"d{i}", 100 + i, None) for i in range(5)] + [(5, None, None, b"not avro")]

    v2 = AvroSerializer(sr, V2)
    producer.produce(topic, value=v2({"device": "new", "celsius": 1.0, "offset": 7, "unit": "K"}, ctx))
    assert producer.flush(30) == 0
    assert export_table(spark, topic=topic, table=table, fmt=fmt, bootstrap_servers=broker.bootstrap,
                        **typed).records == 1
    rows = table_rows(fmt, table, topic)
    units = dict(zip(rows.column("offset").to_pylist(), rows.column("unit").to_pylist(), strict=True))
    assert units == {0: None, 1: None, 2: None, 3: None, 4: None, 5: None, 6: "K"}


def test_the_kafkalog_export_command_with_a_table(spark, broker, tmp_path, capsys):
    """``kafkalog export --format delta --table ...`` (in this process: the command uses the
    active session), then again with --compact and --expire: nothing added, the offsets
    kept; and the command's refusals of options a table does not take."""
    from spark_kafkalog.cli.main import main

    topic = f"tbl-cli-{uuid.uuid4().hex[:6]}"
    create_topic(broker, topic)
    produce_numbered(broker, topic, 0, 300)
    table = str(tmp_path / "delta")
    args = ["export", "--topic", topic, "--format", "delta", "--table", table, "--bootstrap-servers",
            broker.bootstrap, "--no-progress"]
    assert main(args) == 0
    assert "Exported 300 records" in capsys.readouterr().out
    produce_numbered(broker, topic, 300, 30)
    assert main([*args, "--compact", "--expire", "--retention-ms", "1"]) == 0
    out = capsys.readouterr().out
    assert "Exported 30 records" in out and "Compacted" in out and "files vacuumed" in out
    check_table("delta", table, topic, broker)
    for extra, message in ((["--output", str(tmp_path / "o")], "not both"),
                           (["--starting-offsets", "latest"], "not with a table"),
                           (["--catalog-uri", "sqlite:///x.db"], "Iceberg's")):
        assert main([*args, *extra]) != 0
        assert message in capsys.readouterr().err
    assert main(["export", "--topic", topic, "--format", "csv", "--table", table, "--output", str(tmp_path / "c"),
                 "--bootstrap-servers", broker.bootstrap]) != 0
    assert "for --format iceberg or delta" in capsys.readouterr().err
    assert main(["export", "--topic", f"{topic},other", "--format", "iceberg", "--table", str(tmp_path / "i"),
                 "--bootstrap-servers", broker.bootstrap]) != 0
    assert "one topic per table" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["iceberg"])
def test_a_task_failing_mid_write_leaves_no_partial_data(spark, tmp_path, fmt):
    """A task that fails after it wrote rows (a batch in the middle of the partition has a
    bad CRC, failOnDataLoss=true): the export fails, the table holds no row and no offset
    of it, no file of the failed run is referenced; with the log repaired, the next run
    holds every record once."""
    from broker.record.batch import RECORDS_OFFSET, iter_batch_headers
    from spark_kafkalog.tables.base import TableError
    from spark_kafkalog.tables.targets import open_target
    from tests.support.spark import LogWriter

    root, topic = tmp_path / "logs", "failing"
    writer = LogWriter(root, segment_bytes=1 << 20)
    for b in range(40):
        writer.append(topic, 0, [(b"k%d" % i, b"v%d-" % i + bytes(200), 1_700_000_000_000 + i)
                                 for i in range(b * 50, b * 50 + 50)])
    writer.close()
    log_path = sorted((root / f"{topic}-0").glob("*.log"))[0]
    original = log_path.read_bytes()
    damaged = bytearray(original)
    pos = next(p for p, h in iter_batch_headers(original) if h.base_offset == 1500)
    damaged[pos + RECORDS_OFFSET + 7] ^= 0xFF  # the CRC no longer matches
    log_path.write_bytes(bytes(damaged))
    table = str(tmp_path / "table")
    args = dict(topic=topic, table=table, fmt=fmt, path=str(root), options={"maxBytesPerBatch": "65536"})

    with pytest.raises(TableError, match=r"KafkaDataLossError: .*offset \[1500, 1550\) .*failing-0"):
        export_table(spark, **args)
    target = open_target(fmt, table, topic=topic)
    state = target.load()
    assert state.offsets is None and not state.files
    written = {str(p) for p in (tmp_path / "table").rglob("*.parquet")}
    assert written, "the failed task wrote no file before it failed"

    log_path.write_bytes(original)
    result = export_table(spark, **args)
    assert result.records == 2000
    rows = table_rows(fmt, table, topic)
    assert sorted(rows.column("offset").to_pylist()) == list(range(2000))
    state = target.load()
    assert dict(state.offsets.next_offsets) == {0: 2000}
    assert not {f.removeprefix("file://") for f in state.files} & written
