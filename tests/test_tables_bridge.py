"""Bridge reads (``kafkalog.table``, ``spark_kafkalog.readers.bridge``): a topic's Iceberg or
Delta table plus the live log after the offsets its latest commit stores, as one read of the
``kafkalog`` source, against the real broker and real tables written by the export.

Covered, for both formats: a bridge read returns exactly what a plain read of the whole log
returns (every column, headers included), each (partition, offset) once, in network and stitched mode;
after DeleteRecords removed offsets the table holds, the bridge still returns them (the
table's rows come from the table) while a plain read no longer can; direct mode (the log
directory) bridges too. The commit is pinned when the read is planned: an export
committing between planning and reading changes nothing (no offset twice, none skipped).
Streaming: an AvailableNow query reads the table and the log once, and restarted from its
checkpoint after more records arrive, reads only those. A typed read of a raw table decodes
the table's bytes as it decodes the log's. A table whose values a typed export flattened
into columns is refused with a message saying why; option misuse is refused when the read
is loaded.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from spark_kafkalog.options import KafkaLogOptionError, parse_options
from spark_kafkalog.readers.batch import KafkaLogBatchReader
from spark_kafkalog.tables.job import export_table
from tests.support.tables import create_topic, produce_numbered

COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "timestampType", "headers")


@pytest.fixture(scope="module")
def broker(table_broker):
    return table_broker


def _topic(broker, partitions: int = 3) -> str:
    topic = f"bridge-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic, partitions)
    return topic


def _reader(spark, broker, topic: str, table: str | None = None, fmt: str | None = None, direct: bool = False,
            stitched: bool = False):
    r = spark.read.format("kafkalog").option("subscribe", topic).option("includeHeaders", "true")
    if direct or stitched:  # stitched: the log directory stands for the cluster's remote storage
        r = r.option("path", str(broker.log_dir))
    if not direct:
        r = r.option("kafka.bootstrap.servers", broker.bootstrap)
    if table is not None:
        r = r.option("kafkalog.table", table)
    if fmt is not None:
        r = r.option("kafkalog.table.format", fmt)
    return r


def _keyed(rows) -> dict[tuple[int, int], tuple]:
    """(partition, offset) -> the row's columns; fails on a (partition, offset) seen twice."""
    seen = Counter((r["partition"], r["offset"]) for r in rows)
    assert not [k for k, n in seen.items() if n > 1]
    return {(r["partition"], r["offset"]): tuple(
        (tuple((h["key"], bytes(h["value"])) for h in r[c]) if r[c] is not None else None) if c == "headers"
        else r[c] for c in COLUMNS) for r in rows}


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
def test_a_bridge_read_is_the_table_then_the_log(spark, broker, tmp_path, fmt) -> None:
    topic = _topic(broker)
    table = str(tmp_path / "table")
    produce_numbered(broker, topic, 0, 600)
    first = export_table(spark, topic=topic, table=table, fmt=fmt, bootstrap_servers=broker.bootstrap)
    assert first.records == 600
    produce_numbered(broker, topic, 600, 300)

    plain = _keyed(_reader(spark, broker, topic).load().collect())
    bridged = _keyed(_reader(spark, broker, topic, table).load().collect())
    assert len(plain) == 900
    assert [(k, plain[k][5:], bridged.get(k, ())[5:]) for k in plain if bridged.get(k) != plain[k]][:3] == []
    if fmt == "iceberg":  # stitched mode plans the log part as network mode does
        assert _keyed(_reader(spark, broker, topic, table, stitched=True).load().collect()) == plain

    # The table's rows come from the table: records the log no longer holds are still there.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cut = {p: first.offsets_after.next_offsets[p] - 50 for p in range(3)}
    futures = admin.delete_records([TopicPartition(topic, p, o) for p, o in cut.items()])
    for f in futures.values():
        f.result(30)
    after_delete = _keyed(_reader(spark, broker, topic, table, fmt).load().collect())
    assert after_delete == plain
    trimmed = _reader(spark, broker, topic).option("failOnDataLoss", "false").load().count()
    assert trimmed == 900 - sum(cut.values())

    if fmt == "delta":  # direct mode bridges the same table with the log directory's files
        direct = _keyed(_reader(spark, broker, topic, table, direct=True).load().collect())
        assert direct == plain


def test_the_commit_is_pinned_when_the_read_is_planned(spark, broker, tmp_path) -> None:
    """An export commits between planning and reading: the planned read still returns each
    offset once (the files and offsets of the commit it planned with)."""
    topic = _topic(broker)
    table = str(tmp_path / "table")
    produce_numbered(broker, topic, 0, 300)
    export_table(spark, topic=topic, table=table, fmt="iceberg", bootstrap_servers=broker.bootstrap)
    produce_numbered(broker, topic, 300, 150)
    options = parse_options({"subscribe": topic, "kafka.bootstrap.servers": broker.bootstrap,
                             "kafkalog.table": table, "includeHeaders": "true"})
    reader = KafkaLogBatchReader(options)
    planned = reader.partitions()
    assert any(type(p).__name__ == "TableFileInputPartition" for p in planned)
    moved = export_table(spark, topic=topic, table=table, fmt="iceberg", bootstrap_servers=broker.bootstrap)
    assert moved.records == 150                      # the table now holds what the plan reads from the log
    produce_numbered(broker, topic, 450, 60)                 # and the log has more than the plan's end
    seen: Counter = Counter()
    for part in planned:
        for batch in reader.read(part):
            seen.update(zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist(), strict=True))
    assert max(seen.values()) == 1 and sum(seen.values()) == 450


def test_a_streaming_bridge_reads_the_table_once(spark, broker, tmp_path) -> None:
    topic = _topic(broker)
    table = str(tmp_path / "table")
    produce_numbered(broker, topic, 0, 400)
    export_table(spark, topic=topic, table=table, fmt="delta", bootstrap_servers=broker.bootstrap)
    produce_numbered(broker, topic, 400, 200)
    out, chk = tmp_path / "out", tmp_path / "chk"

    def run() -> list:
        stream = (spark.readStream.format("kafkalog").option("kafka.bootstrap.servers", broker.bootstrap)
                  .option("subscribe", topic).option("kafkalog.table", table).load())
        query = (stream.selectExpr("partition", "offset", "CAST(value AS STRING) AS value").writeStream
                 .format("parquet").option("path", str(out)).option("checkpointLocation", str(chk))
                 .trigger(availableNow=True).start())
        query.awaitTermination(240)
        assert query.exception() is None
        return spark.read.parquet(str(out)).collect()

    rows = run()
    offsets = Counter((r["partition"], r["offset"]) for r in rows)
    assert len(offsets) == 600 and max(offsets.values()) == 1
    assert {r["value"] for r in rows} == {f"v{i}" for i in range(600)}
    produce_numbered(broker, topic, 600, 90)
    rows = run()
    offsets = Counter((r["partition"], r["offset"]) for r in rows)
    assert len(offsets) == 690 and max(offsets.values()) == 1


def test_a_typed_read_decodes_the_tables_bytes(spark, broker, tmp_path) -> None:
    """A raw table of JSON values read with valueFormat=json: the table's part and the log's
    decode alike; a typed export's table (values flattened to columns) is refused."""
    topic = _topic(broker, partitions=2)
    table = str(tmp_path / "table")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(200):
        producer.produce(topic, value=json.dumps({"n": i, "name": f"u{i}"}).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    export_table(spark, topic=topic, table=table, fmt="delta", bootstrap_servers=broker.bootstrap)
    for i in range(200, 260):
        producer.produce(topic, value=json.dumps({"n": i, "name": f"u{i}"}).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    df = (_reader(spark, broker, topic, table).option("valueFormat", "json").option("valueFraming", "none")
          .option("valueSchema", '{"type":"object","properties":{"n":{"type":"integer"},'
                                 '"name":{"type":"string"}}}').load())
    rows = df.select("partition", "offset", "value.n", "value.name").collect()
    assert sorted(r["n"] for r in rows) == list(range(260))
    assert all(r["name"] == f"u{r['n']}" for r in rows)

    typed_table = str(tmp_path / "typed")
    export_table(spark, topic=topic, table=typed_table, fmt="delta", bootstrap_servers=broker.bootstrap,
                 options={"valueFormat": "json", "valueFraming": "none",
                          "valueSchema": '{"type":"object","properties":{"n":{"type":"integer"}}}'})
    with pytest.raises(Exception, match="holds no value bytes"):
        _reader(spark, broker, topic, typed_table).load().count()


def test_bridge_option_misuse_is_refused_when_loaded() -> None:
    base = {"kafka.bootstrap.servers": "localhost:9092", "kafkalog.table": "/tmp/t"}
    with pytest.raises(KafkaLogOptionError, match="exactly one topic"):
        parse_options({**base, "subscribe": "a,b"})
    with pytest.raises(KafkaLogOptionError, match="exactly one topic"):
        parse_options({**base, "subscribePattern": "a.*"})
    with pytest.raises(KafkaLogOptionError, match="from the offsets the table holds"):
        parse_options({**base, "subscribe": "a", "startingOffsets": "earliest"})
    with pytest.raises(KafkaLogOptionError, match="cannot be used together"):
        parse_options({**base, "subscribe": "a", "kafkalog.snapshot": "true"})
    with pytest.raises(KafkaLogOptionError, match="kafkalog.table.format"):
        parse_options({**base, "subscribe": "a", "kafkalog.table.format": "hudi"})
    with pytest.raises(KafkaLogOptionError, match="needs 'kafkalog.table'"):
        parse_options({"kafka.bootstrap.servers": "x:1", "subscribe": "a", "kafkalog.table.format": "delta"})
    parsed = parse_options({**base, "subscribe": "a", "kafkalog.table.catalog.uri": "http://rest:8181",
                            "kafkalog.table.catalog.warehouse": "s3://w", "kafkalog.table.storage.aws_region": "x"})
    assert parsed.table is not None and parsed.table.catalog_uri == "http://rest:8181"
    assert dict(parsed.table.catalog_properties) == {"warehouse": "s3://w"}
    assert dict(parsed.table.storage_options) == {"aws_region": "x"}
