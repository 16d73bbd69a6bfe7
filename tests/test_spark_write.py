"""Tests of the batch sink ``df.write.format("kafkalog")`` (spark_kafkalog/writers/: common.py,
batch.py, __init__.py) through a real local SparkSession (local[2,4]: task retries on) and a
broker subprocess: round trips read back with the ``kafkalog`` source and with
confluent-kafka's Consumer (every codec, keys, nulls, headers, timestamps, explicit
partitions, topic from a column and from the option), column and option errors raised
before any record is sent, the commit messages and the driver's log line, and the
failure scenarios C1 (a task retried after a partial write: at-least-once, duplicates
confined to the failed attempt's rows) and C2 (abort gets None for the failed task and
commit is not called) of RELIABILITY.md."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from pathlib import Path

import pytest
from chispa import assert_df_equality

from broker.client.producer.murmur2 import partition_for_key  # noqa: E402
from spark_kafkalog.writers import (  # noqa: E402
    KafkaLogCommitMessage,
    KafkaLogWriteError,
    commit_summary,
)
from tests.support.spark_write import (  # noqa: E402
    RECORD_OPTION,
    SOURCE_NAME,
    consume,
    read_topic,
    recorded,
    unique_topic,
    wait_written,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
HEADERS_DDL = "array<struct<key:string,value:binary>>"
T0 = 1_700_000_000_000


def writer(df, broker, **options):
    w = df.write.format(SOURCE_NAME).mode("append").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        w = w.option(k.replace("_", "."), v)
    return w


def sample_df(spark, n: int = 200):
    """Keys (some null), values (some null, some empty), headers (some null, some with a
    null value), timestamps; id kept in the value to join back."""
    return spark.range(n).selectExpr(
        "id",
        "CASE WHEN id % 5 = 0 THEN NULL ELSE CAST(concat('key-', id) AS BINARY) END AS key",
        "CASE WHEN id % 7 = 3 THEN NULL WHEN id % 11 = 4 THEN CAST('' AS BINARY) "
        "ELSE CAST(concat('value-', id, '-', repeat('x', CAST(id % 37 AS INT))) AS BINARY) END AS value",
        "CASE WHEN id % 3 = 0 THEN NULL WHEN id % 3 = 1 THEN array() ELSE "
        "array(named_struct('key', 'h1', 'value', CAST(concat('a', id) AS BINARY)), "
        "named_struct('key', 'h2', 'value', CAST(NULL AS BINARY))) END AS headers",
        f"timestamp_millis({T0} + id * 1000) AS timestamp")


# -- round trips ---------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(wspark, sink_broker, codec):
    topic = unique_topic(f"rt-{codec}")
    df = sample_df(wspark)
    writer(df.drop("id"), sink_broker, topic=topic, kafka_compression_type=codec).save()

    got = read_topic(wspark, sink_broker, topic)
    # An empty header list is written as a record without headers, which reads back null.
    expected = df.selectExpr("key", "value",
                             "CASE WHEN size(headers) = 0 THEN NULL ELSE headers END AS headers",
                             "timestamp", "0 AS timestampType")
    assert_df_equality(got.select("key", "value", "headers", "timestamp", "timestampType"),
                       expected, ignore_row_order=True, ignore_nullable=True,
                       ignore_column_order=False)
    assert got.selectExpr("count(distinct partition, offset)").first()[0] == 200

    consumed = consume(sink_broker, topic, expect=200)
    assert len(consumed) == 200
    rows = {T0 + r["id"] * 1000: r for r in (row.asDict() for row in df.collect())}
    assert sorted(rows) == sorted(rec["timestamp"] for rec in consumed)
    for rec in consumed:
        row = rows[rec["timestamp"]]
        assert (rec["key"], rec["value"]) == (row["key"], row["value"])
        assert (rec["headers"] or []) == [(h["key"], h["value"]) for h in (row["headers"] or [])]


def test_string_key_and_value(wspark, sink_broker):
    topic = unique_topic("strings")
    df = wspark.range(50).selectExpr("concat('k', id) AS key", "concat('v', id) AS value")
    writer(df, sink_broker, topic=topic).save()
    got = read_topic(wspark, sink_broker, topic).selectExpr("CAST(key AS STRING) key",
                                                            "CAST(value AS STRING) value")
    assert_df_equality(got, df, ignore_row_order=True, ignore_nullable=True)


def test_explicit_partitions_and_topic_column(wspark, sink_broker):
    """Rows go to their partition column's value; null partitions to murmur2 of the key
    (Kafka's default partitioner); the topic column spreads rows over two topics."""
    t1, t2 = unique_topic("pa"), unique_topic("pb")
    df = wspark.range(300).selectExpr(
        f"CASE WHEN id % 2 = 0 THEN '{t1}' ELSE '{t2}' END AS topic",
        "CAST(concat('key-', id) AS BINARY) AS key",
        "CAST(concat('v', id) AS BINARY) AS value",
        "CASE WHEN id % 3 = 0 THEN NULL ELSE CAST(id % 3 AS INT) END AS partition")
    writer(df, sink_broker).save()
    for topic, parity in ((t1, 0), (t2, 1)):
        got = read_topic(wspark, sink_broker, topic).select("key", "value", "partition")
        want = wspark.createDataFrame(
            [(b"key-%d" % i, b"v%d" % i, i % 3 if i % 3 else partition_for_key(b"key-%d" % i, 3))
             for i in range(parity, 300, 2)], "key binary, value binary, partition int")
        assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)
        # The confluent-kafka consumer sees the same.
        consumed = consume(sink_broker, topic, expect=150)
        assert sorted((r["key"], r["value"], r["partition"]) for r in consumed) == \
            sorted(tuple(r) for r in want.collect())


def test_order_within_partition_is_input_order(wspark, sink_broker):
    """One task writing one partition: offsets follow the input order."""
    topic = unique_topic("order")
    df = wspark.range(0, 5000, 1, 1).selectExpr("CAST(id AS STRING) AS value", "0 AS partition")
    writer(df, sink_broker, topic=topic).save()
    got = read_topic(wspark, sink_broker, topic).selectExpr("offset", "CAST(value AS STRING) v")
    ids = [int(r.v) for r in got.orderBy("offset").collect()]
    assert ids == list(range(5000))


def test_topic_option_wins_over_column(wspark, sink_broker):
    topic = unique_topic("opt")
    df = wspark.range(10).selectExpr("'elsewhere' AS topic", "CAST(id AS STRING) AS value")
    writer(df, sink_broker, topic=topic).save()
    assert read_topic(wspark, sink_broker, topic).count() == 10
    assert not (sink_broker.log_dir / "elsewhere-0").exists()


def test_null_topic_fails_the_task(wspark, sink_broker, tmp_path):
    """The writer's own failure: the error names the cause, and a note says what the
    attempt had written (here nothing: the first batch fails)."""
    df = wspark.range(0, 4, 1, 1).selectExpr("CAST(NULL AS STRING) AS topic",
                                             "CAST(id AS STRING) AS value")
    with pytest.raises(Exception, match="null topic present in the data"):
        writer(df, sink_broker, **{RECORD_OPTION: str(tmp_path)}).save()
    events = recorded(tmp_path)
    errors = [e for e in events if e[0] == "task-error"]
    assert len(errors) == 4  # every attempt
    assert all(e[2][1] == [f"kafkalog sink: Spark partition 0 attempt {i} failed after writing "
                           "0 records: nothing; a retry writes them again (at-least-once)"]
               for i, e in enumerate(errors))
    assert [e[0] for e in events if e[0] != "task-error"] == ["abort"]


def test_copy_a_read_dataframe(wspark, sink_broker):
    """A DataFrame read with the source (offset and timestampType included) writes to
    another topic as it is: same keys, values, headers, timestamps and partitions."""
    src, dst = unique_topic("copy-src"), unique_topic("copy-dst")
    writer(sample_df(wspark).drop("id"), sink_broker, topic=src).save()
    read = read_topic(wspark, sink_broker, src)
    writer(read, sink_broker, topic=dst).save()
    cols = ["key", "value", "headers", "timestamp", "partition"]
    assert_df_equality(read_topic(wspark, sink_broker, dst).select(cols), read.select(cols),
                       ignore_row_order=True, ignore_nullable=True)


def test_batch_headers_in_a_batch_write(wspark, sink_broker):
    topic = unique_topic("bh")
    df = wspark.range(0, 100, 1, 2).selectExpr(
        "CAST(id AS STRING) AS value",
        "array(named_struct('key', 'own', 'value', CAST('x' AS BINARY))) AS headers")
    writer(df, sink_broker, topic=topic, kafkalog_writeBatchHeaders="true").save()
    recs = consume(sink_broker, topic, expect=100)
    seen = set()
    for r in recs:
        h = r["headers"]
        assert h[0] == ("own", b"x")
        assert [k for k, _ in h[1:]] == ["kafkalog.partition", "kafkalog.attempt", "kafkalog.seq"]
        d = dict(h[1:])
        seen.add((int(d["kafkalog.partition"]), int(d["kafkalog.seq"])))
        assert d["kafkalog.attempt"] == b"0"
    assert seen == {(p, s) for p in range(2) for s in range(50)}


# -- commit messages and the driver's summary ------------------------------------------------

def test_commit_messages_and_log_line(wspark, sink_broker, tmp_path):
    topic = unique_topic("commit")
    df = wspark.range(0, 1000, 1, 2).selectExpr(
        "CAST(id AS STRING) AS key", "CAST(repeat('v', 20) AS BINARY) AS value")
    wspark.conf.set("spark.sql.pyspark.worker.logging.enabled", "true")
    try:
        writer(df, sink_broker, topic=topic, **{RECORD_OPTION: str(tmp_path)}).save()
        logs = [r.msg for r in wspark.tvf.python_worker_logs()
                .filter("logger = 'spark_kafkalog.writers'").collect()]
    finally:
        wspark.conf.unset("spark.sql.pyspark.worker.logging.enabled")
    (kind, batch_id, messages), = recorded(tmp_path)
    assert kind == "commit" and batch_id is None
    assert sorted(m.spark_partition for m in messages) == [0, 1]
    for m in messages:
        assert isinstance(m, KafkaLogCommitMessage)
        assert m.attempt == 0 and m.records == 500 and m.bytes == 500 * 20 + sum(
            len(str(i)) for i in range(m.spark_partition * 500, m.spark_partition * 500 + 500))
        assert m.producer_id >= 0 and m.producer_epoch >= 0
        assert sum(r.count for r in m.ranges) == 500
        assert all(r.topic == topic and 0 <= r.first_offset <= r.last_offset for r in m.ranges)
    assert messages[0].producer_id != messages[1].producer_id
    # The ranges match the log: every offset of every partition is accounted for.
    per_part = Counter()
    for m in messages:
        for r in m.ranges:
            per_part[r.partition] += r.count
    read = read_topic(wspark, sink_broker, topic).groupBy("partition").count().collect()
    assert {r.partition: r["count"] for r in read} == dict(per_part)
    line = commit_summary(messages)
    assert line.startswith("kafkalog write committed: 1000 records, ")
    assert line in logs, logs


# -- errors before anything is sent ----------------------------------------------------------

@pytest.mark.parametrize("select, message", [
    (["CAST(id AS STRING) AS key"], "Required attribute 'value' not found"),
    (["id AS value"],
     "value attribute type must be a string or binary, but column 'value' is bigint"),
    (["'v' AS value", "id AS key"],
     "key attribute type must be a string or binary, but column 'key' is bigint"),
    (["'v' AS value", "CAST(id AS BIGINT) AS partition"],
     "partition attribute type must be an int, but column 'partition' is bigint"),
    (["'v' AS value", "array('a') AS headers"],
     "headers attribute type must be array<struct<key:string,value:binary>>, "
     "but column 'headers' is array<string>"),
    (["'v' AS value", "id AS timestamp"],
     "timestamp attribute type must be a timestamp (the record's CreateTime), "
     "but column 'timestamp' is bigint"),
    (["'v' AS value", "id AS Extra"], "column 'Extra' (bigint) is not written by the kafkalog sink"),
])
def test_bad_columns_fail_before_sending(wspark, sink_broker, select, message):
    topic = unique_topic("bad")
    df = wspark.range(3).selectExpr(*select)
    with pytest.raises(Exception, match=re.escape(message)):
        writer(df, sink_broker, topic=topic).save()
    assert not list(sink_broker.log_dir.glob(f"{topic}-*"))  # not even created


def test_topic_missing(wspark, sink_broker):
    with pytest.raises(Exception, match="topic option required when no 'topic' attribute"):
        writer(wspark.range(1).selectExpr("'v' AS value"), sink_broker).save()
    with pytest.raises(Exception, match="topic attribute type must be a string, but column 'topic' is int"):
        writer(wspark.range(1).selectExpr("'v' AS value", "1 AS topic"), sink_broker).save()


@pytest.mark.parametrize("options, message", [
    ({"kafka.key.serializer": "x"}, "Kafka option 'key.serializer' is not supported"),
    ({"kafka.value.serializer": "x"}, "Kafka option 'value.serializer' is not supported"),
    ({"kafka.no.such.setting": "1"}, "kafka.no.such.setting"),
    ({"kafka.linger.ms": "soon"}, "kafka.linger.ms"),
    ({"kafka.acks": "1", "kafka.enable.idempotence": "true"}, "kafka.acks"),
    ({"subscribe": "t"}, "unknown option 'subscribe' for the kafkalog sink; valid options: "),
    ({"kafkalog.writeBatchHeaders": "yes"}, "kafkalog.writeBatchHeaders: 'yes' is not valid; use true or false"),
])
def test_bad_options(wspark, sink_broker, options, message):
    w = writer(wspark.range(1).selectExpr("'v' AS value"), sink_broker, topic="never-written")
    for k, v in options.items():
        w = w.option(k, v)
    with pytest.raises(Exception, match=message):
        w.save()
    assert not list(sink_broker.log_dir.glob("never-written-*"))


def test_bootstrap_servers_required_and_path_refused(wspark, sink_broker):
    df = wspark.range(1).selectExpr("'v' AS value")
    with pytest.raises(Exception, match="'kafka.bootstrap.servers' must be specified"):
        df.write.format(SOURCE_NAME).mode("append").option("topic", "t").save()
    with pytest.raises(Exception, match="not to a path"):
        writer(df, sink_broker, topic="t").save(str(sink_broker.log_dir))


def test_overwrite_is_refused(wspark, sink_broker):
    df = wspark.range(1).selectExpr("'v' AS value")
    with pytest.raises(Exception, match="cannot overwrite: a Kafka log is append-only"):
        writer(df, sink_broker, topic="t").mode("overwrite").save()


def test_options_unit():
    """Option parsing without Spark: defaults, pass-through, case-insensitive keys."""
    from spark_kafkalog.writers import parse_write_options
    o = parse_write_options({"kafka.bootstrap.servers": "h:1", "TOPIC": "t",
                             "kafka.compression.type": "zstd", "kafka.batch.size": "1000",
                             "checkpointlocation": "/x"})
    assert o.topic == "t" and o.bootstrap_servers == "h:1"
    assert o.producer_config["compression.type"] == "zstd"
    assert o.producer_config["batch.size"] == "1000"
    assert o.producer_config["linger.ms"] == "5"
    # the sink's bulk default when the user sets no batch.size (writers/common.py)
    assert parse_write_options({"kafka.bootstrap.servers": "h:1"}).producer_config["batch.size"] == "1000000"
    with pytest.raises(KafkaLogWriteError, match="partitioner.class"):
        parse_write_options({"kafka.bootstrap.servers": "h:1", "kafka.partitioner.class": "x"})


# -- failure scenarios (RELIABILITY.md C1, C2) ---------------------------------------------

FAIL_AT = 300  # rows of partition 0 its first attempt passes on before failing
ROWS = 2000    # 1000 per partition


def _failing_input(spark, marker_dir: Path, always: bool, bootstrap: str, topic: str):
    """ROWS rows of 2-KiB values in 2 partitions, made by mapInArrow in batches of 100;
    partition 0's first attempt (every attempt with ``always``) hands FAIL_AT rows on,
    waits until the writer got one of them into ``topic`` (bounded), then raises. (The values are large so that the
    rows get through the workers' 64-KiB stream buffers before the failure.)"""

    def gen(batches):
        import time as _time

        import pyarrow as pa
        from pyspark import TaskContext
        tc = TaskContext.get()
        fail = tc.partitionId() == 0 and (always or tc.attemptNumber() == 0)
        since_ms = int(_time.time() * 1000)
        sent = 0
        for b in batches:
            for s in range(0, b.num_rows, 100):
                ids = b.column(0).slice(s, 100)
                if fail and sent >= FAIL_AT:
                    wait_written(bootstrap, topic, since_ms, below=FAIL_AT)
                    (marker_dir / f"failed-{tc.attemptNumber()}").touch()
                    raise RuntimeError("injected failure after a partial write")
                values = pa.array([b"%08d" % i + b"." * 2040 for i in ids.to_pylist()], pa.binary())
                sent += len(ids)
                yield pa.record_batch([ids, values], names=["id", "value"])
    return (spark.range(0, ROWS, 1, 2).mapInArrow(gen, "id long, value binary")
            .selectExpr("CAST(id AS STRING) AS key", "value"))


def test_C1_task_retry_is_at_least_once(wspark, sink_broker, tmp_path):
    topic = unique_topic("c1")
    rec = tmp_path / "rec"
    rec.mkdir()
    wspark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        df = _failing_input(wspark, tmp_path, always=False, bootstrap=sink_broker.bootstrap, topic=topic)
        writer(df, sink_broker, topic=topic, **{RECORD_OPTION: str(rec)}).save()
    finally:
        wspark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert (tmp_path / "failed-0").exists()
    got = read_topic(wspark, sink_broker, topic).selectExpr("CAST(key AS STRING) k").collect()
    ids = Counter(int(r.k) for r in got)
    assert set(ids) == set(range(ROWS))  # count(distinct id) == input count
    dups = {i: c for i, c in ids.items() if c > 1}
    print(f"C1: {len(got)} records for {ROWS} rows, {len(dups)} duplicated")
    # Duplicates come only from the failed attempt: partition 0's first FAIL_AT rows
    # (ids 0..999 are partition 0), each at most once more.
    assert 0 < len(dups) <= FAIL_AT
    assert all(i < FAIL_AT and c == 2 for i, c in dups.items())
    # The job committed; the retried task's message says attempt 1.
    (kind, _, messages), = recorded(rec)
    assert kind == "commit"
    by_part = {m.spark_partition: m for m in messages}
    assert by_part[0].attempt >= 1 and by_part[0].records == 1000
    assert by_part[1].attempt == 0 and by_part[1].records == 1000
    assert "succeeded on a retry" in commit_summary(messages)


def test_C2_abort_gets_none_and_commit_is_not_called(wspark, sink_broker, tmp_path):
    topic = unique_topic("c2")
    rec = tmp_path / "rec"
    rec.mkdir()
    wspark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    wspark.conf.set("spark.sql.pyspark.worker.logging.enabled", "true")
    try:
        df = _failing_input(wspark, tmp_path, always=True, bootstrap=sink_broker.bootstrap, topic=topic)
        with pytest.raises(Exception, match="injected failure after a partial write"):
            writer(df, sink_broker, topic=topic, **{RECORD_OPTION: str(rec)}).save()
        logs = [r.msg for r in wspark.tvf.python_worker_logs()
                .filter("logger = 'spark_kafkalog.writers'").collect()]
    finally:
        wspark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
        wspark.conf.unset("spark.sql.pyspark.worker.logging.enabled")
    events = recorded(rec)
    assert [e[0] for e in events] == ["abort"]  # commit is never called
    _, _, messages = events[0]
    assert len(messages) == 2 and messages[0] is None
    assert isinstance(messages[1], KafkaLogCommitMessage) and messages[1].records == 1000
    assert len(list(tmp_path.glob("failed-*"))) == 4  # every attempt failed
    # What the failed attempts had written stays in the log (pyspark ends the writer's
    # input as if complete when the task fails upstream, so each attempt flushed what it
    # had been given: at most FAIL_AT rows).
    written = read_topic(wspark, sink_broker, topic).count() - 1000
    assert 0 < written <= 4 * FAIL_AT
    abort_lines = [m for m in logs if m.startswith("kafkalog write aborted: 1 of 2 tasks failed")]
    assert len(abort_lines) == 1 and "1000 records, which stay in the log" in abort_lines[0], logs


def test_timestamp_written_as_create_time(wspark, sink_broker):
    topic = unique_topic("ts")
    ts = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.UTC)
    df = wspark.createDataFrame([("a", ts), ("b", None)], "value string, timestamp timestamp")
    before = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
    writer(df, sink_broker, topic=topic).save()
    rows = {r.v: r for r in read_topic(wspark, sink_broker, topic)
            .selectExpr("CAST(value AS STRING) v", "timestamp", "timestampType").collect()}
    assert rows["a"].timestamp.replace(tzinfo=dt.UTC) == ts
    assert rows["b"].timestamp.replace(tzinfo=dt.UTC) >= before  # null: send time
    assert rows["a"].timestampType == 0


def test_the_kafkalog_format_itself_writes_and_streams(wspark, sink_broker, tmp_path):
    """The product's own registration (not the test source): batch write, then a
    streaming write with Trigger.AvailableNow, read back over the network."""
    df = wspark.range(500).selectExpr("cast(id as string) as key", "cast(id as string) as value")
    (df.write.format("kafkalog").mode("append").option("kafka.bootstrap.servers", sink_broker.bootstrap)
     .option("topic", "product-format").save())
    src = tmp_path / "in"
    src.mkdir()
    (src / "part.json").write_text("\n".join(f'{{"value": "s{i}"}}' for i in range(50)))
    query = (wspark.readStream.schema("value string").json(str(src)).writeStream.format("kafkalog")
             .option("kafka.bootstrap.servers", sink_broker.bootstrap).option("topic", "product-format")
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    back = (wspark.read.format("kafkalog").option("kafka.bootstrap.servers", sink_broker.bootstrap)
            .option("subscribe", "product-format").load())
    values = {r.value.decode() for r in back.select("value").collect()}
    assert values == {str(i) for i in range(500)} | {f"s{i}" for i in range(50)}
