"""Tests of the streaming sink ``df.writeStream.format("kafkalog")`` (spark_kafkalog/writers/:
stream.py, common.py) through a real local SparkSession and a broker subprocess: a file
stream and a rate stream stopped and restarted from their checkpoints (every input row
present; duplicates only from the replayed micro-batch, identified exactly by the
``kafkalog.*`` batch headers), commit and abort with their batch ids (RELIABILITY.md C2:
``batchId`` increases by 1 per micro-batch, abort gets None for the failed task and commit
is not called for that batch), complete mode, and Spark's refusal of update mode with the
foreachBatch route that works meanwhile."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest

from spark_kafkalog.writers import KafkaLogCommitMessage  # noqa: E402
from tests.support.spark_write import (  # noqa: E402
    RECORD_OPTION,
    SOURCE_NAME,
    consume,
    read_topic,
    recorded,
    unique_topic,
)
from tests.support.waits import wait_until  # noqa: E402

ROWS_PER_FILE = 100


def write_file(directory: Path, index: int, bad_id: int | None = None) -> None:
    """File ``index`` holds ids [index*100, index*100+100) (one id replaced by
    ``bad_id``)."""
    rows = [{"id": i, "payload": f"p{i}-" + "z" * (i % 17)}
            for i in range(index * ROWS_PER_FILE, (index + 1) * ROWS_PER_FILE)]
    if bad_id is not None:
        rows[50]["id"] = bad_id
    tmp = directory / f".f{index:04d}.tmp"
    tmp.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    # The file source takes files in modification-time order: make it the index order.
    stamp = 1_700_000_000 + index
    os.utime(tmp, (stamp, stamp))
    tmp.rename(directory / f"f{index:04d}.json")


def file_stream(spark, directory: Path):
    return (spark.readStream.format("json").schema("id long, payload string")
            .option("maxFilesPerTrigger", 1).load(str(directory)))


def sink(df, broker, topic: str, checkpoint: Path, record_to: Path, **options):
    w = (df.writeStream.format(SOURCE_NAME)
         .option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", topic)
         .option("checkpointLocation", str(checkpoint))
         .option(RECORD_OPTION, str(record_to)))
    for k, v in options.items():
        w = w.option(k, v)
    return w


def headers_of(rec: dict) -> dict[str, str]:
    return {k: v.decode() for k, v in (rec["headers"] or []) if k.startswith("kafkalog.")}


def test_file_stream_restart_replays_one_batch_identified_by_headers(wspark, sink_broker, tmp_path):
    """Run 1 writes micro-batches 0-2 (one file each); the commit log entry of batch 2 is
    removed, as if the driver died after the sink wrote it and before Spark recorded it;
    run 2 replays batch 2 from the checkpoint, then writes 3 and 4."""
    topic = unique_topic("fstream")
    src, chk, rec = tmp_path / "in", tmp_path / "chk", tmp_path / "rec"
    for d in (src, rec):
        d.mkdir()
    for i in range(3):
        write_file(src, i)
    df = file_stream(wspark, src).selectExpr("CAST(id AS STRING) AS key", "payload AS value")

    q = sink(df, sink_broker, topic, chk, rec, **{"kafkalog.writeBatchHeaders": "true"}) \
        .trigger(availableNow=True).start()
    q.awaitTermination(120)
    assert q.exception() is None
    query_id = q.id
    run1 = [(k, b) for k, b, _ in recorded(rec)]
    assert run1 == [("commit", 0), ("commit", 1), ("commit", 2)]  # batchId +1 each
    (chk / "commits" / "2").unlink()
    (chk / "commits" / ".2.crc").unlink(missing_ok=True)
    for i in range(3, 5):
        write_file(src, i)

    q = sink(df, sink_broker, topic, chk, rec, **{"kafkalog.writeBatchHeaders": "true"}) \
        .trigger(availableNow=True).start()
    q.awaitTermination(120)
    assert q.exception() is None and q.id == query_id
    events = recorded(rec)
    assert [(k, b) for k, b, _ in events] == run1 + [("commit", 2), ("commit", 3), ("commit", 4)]
    for _kind, batch_id, messages in events:
        assert all(isinstance(m, KafkaLogCommitMessage) and m.batch_id == batch_id
                   and m.query_id == str(query_id) for m in messages)

    total = 5 * ROWS_PER_FILE
    records = consume(sink_broker, topic, expect=total + ROWS_PER_FILE)
    ids = Counter(int(r["key"]) for r in records)
    assert set(ids) == set(range(total))  # every input row is present
    dups = {i for i, c in ids.items() if c > 1}
    assert dups == set(range(2 * ROWS_PER_FILE, 3 * ROWS_PER_FILE))  # the replayed batch's rows
    assert all(ids[i] == 2 for i in dups)
    for r in records:
        h = headers_of(r)
        assert h["kafkalog.queryId"] == str(query_id)
        assert int(h["kafkalog.batchId"]) == int(r["key"]) // ROWS_PER_FILE
    # A consumer deduplicating on (queryId, batchId, partition, seq) gets each row once.
    first: dict[tuple, int] = {}
    for r in sorted(records, key=lambda r: (r["partition"], r["offset"])):
        h = headers_of(r)
        first.setdefault((h["kafkalog.queryId"], h["kafkalog.batchId"], h["kafkalog.partition"],
                          h["kafkalog.seq"]), int(r["key"]))
    assert sorted(first.values()) == list(range(total))
    # The sink's own read path agrees.
    assert read_topic(wspark, sink_broker, topic).count() == total + ROWS_PER_FILE


def test_rate_stream_stopped_and_restarted(wspark, sink_broker, tmp_path):
    """A rate stream stopped twice mid-flight: every value present; any duplicate is from a
    replayed micro-batch and carries the same (batchId, partition, seq) as its twin."""
    topic = unique_topic("rate")
    chk, rec = tmp_path / "chk", tmp_path / "rec"
    rec.mkdir()
    df = (wspark.readStream.format("rate").option("rowsPerSecond", 400).option("numPartitions", 2)
          .load().selectExpr("CAST(value AS STRING) AS value"))
    for batches in (4, 3):  # each run is stopped mid-flight, once it committed that many micro-batches
        q = sink(df, sink_broker, topic, chk, rec, **{"kafkalog.writeBatchHeaders": "true"}) \
            .trigger(processingTime="500 milliseconds").start()
        target = len(list(rec.glob("*-commit-*.pkl"))) + batches
        wait_until(lambda q=q, target=target: q.exception() is None and q.isActive
                   and len(list(rec.glob("*-commit-*.pkl"))) >= target,
                   120, lambda q=q, n=batches: f"the query never committed {n} micro-batches: {q.exception()}",
                   interval=0.2)
        q.stop()
    commits = [b for k, b, _ in recorded(rec) if k == "commit"]
    assert commits and all(b2 == b1 + 1 or b2 <= b1 for b1, b2 in zip(commits, commits[1:]))
    records = consume(sink_broker, topic)
    values = Counter(int(r["value"]) for r in records)
    assert len(values) > 100
    assert set(values) == set(range(max(values) + 1))  # no gaps
    twins: dict[int, set] = {}
    for r in records:
        h = headers_of(r)
        twins.setdefault(int(r["value"]), set()).add(
            (h["kafkalog.batchId"], h["kafkalog.partition"], h["kafkalog.seq"]))
    assert all(len(keys) == 1 for keys in twins.values())  # duplicates are exact replays
    print(f"rate: {len(records)} records, {len(values)} values, "
          f"{sum(c - 1 for c in values.values())} duplicates, commits {commits}")


def test_C2_stream_abort_gets_none_and_batch_is_not_committed(wspark, sink_broker, tmp_path):
    topic = unique_topic("sabort")
    src, chk, rec = tmp_path / "in", tmp_path / "chk", tmp_path / "rec"
    for d in (src, rec):
        d.mkdir()
    write_file(src, 0)
    write_file(src, 1, bad_id=-1)
    df = file_stream(wspark, src).selectExpr(
        "CAST(id AS STRING) AS key",
        "CASE WHEN id < 0 THEN raise_error('bad row in the input') ELSE payload END AS value")
    q = sink(df, sink_broker, topic, chk, rec).trigger(availableNow=True).start()
    with pytest.raises(Exception, match="bad row in the input"):
        q.awaitTermination(120)
    events = recorded(rec)
    assert [(k, b) for k, b, _ in events if k != "task-error"] == [("commit", 0), ("abort", 1)]
    # the failed task's message (None) reaches the abort; a retried attempt's own
    # task-error record may land after it
    assert [e[2] for e in events if e[0] == "abort"] == [[None]]
    assert not (chk / "commits" / "1").exists()
    # Each of the 4 attempts raised in the writer (the row failed while being fed to it),
    # with a note telling what it had written (the last ones may finish after the abort).
    deadline = time.monotonic() + 15
    while len([e for e in events if e[0] == "task-error"]) < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
        events = recorded(rec)
    notes = [e[2][1] for e in events if e[0] == "task-error"]
    assert len(notes) == 4 and all(
        len(n) == 1 and "(micro-batch 1 of query " in n[0] and " failed after writing " in n[0]
        for n in notes)


def test_complete_mode_appends_the_whole_result_each_trigger(wspark, sink_broker, tmp_path):
    topic = unique_topic("complete")
    src, chk, rec = tmp_path / "in", tmp_path / "chk", tmp_path / "rec"
    for d in (src, rec):
        d.mkdir()
    write_file(src, 0)
    write_file(src, 1)
    df = (file_stream(wspark, src).selectExpr("CAST(floor(id / 50) AS INT) AS bucket")
          .groupBy("bucket").count()
          .selectExpr("CAST(bucket AS STRING) AS key", "CAST(count AS STRING) AS value"))
    q = sink(df, sink_broker, topic, chk, rec).outputMode("complete").trigger(availableNow=True).start()
    q.awaitTermination(120)
    assert q.exception() is None
    got = sorted((r["key"], r["value"]) for r in consume(sink_broker, topic, expect=6))
    # Batch 0: buckets 0, 1 (file 0); batch 1: buckets 0-3 (the whole table again).
    assert got == sorted([(b"0", b"50"), (b"1", b"50")] * 2 + [(b"2", b"50"), (b"3", b"50")])


def test_update_mode_refused_by_spark_and_foreach_batch_route(wspark, sink_broker, tmp_path):
    """Spark 4.x refuses update mode for every Python data source sink (its
    PythonWriteBuilder lacks SupportsStreamingUpdateAsAppend); foreachBatch with the batch
    sink works in update mode."""
    topic = unique_topic("update")
    src = tmp_path / "in"
    src.mkdir()
    write_file(src, 0)
    agg = (file_stream(wspark, src).selectExpr("id % 3 AS k").groupBy("k").count()
           .selectExpr("CAST(k AS STRING) AS key", "CAST(count AS STRING) AS value"))
    q = (agg.writeStream.format(SOURCE_NAME).outputMode("update")
         .option("kafka.bootstrap.servers", sink_broker.bootstrap).option("topic", topic)
         .option("checkpointLocation", str(tmp_path / "chk1")).trigger(availableNow=True).start())
    with pytest.raises(Exception, match="does not support Update mode"):
        q.awaitTermination(120)

    bootstrap = sink_broker.bootstrap

    def each(batch_df, batch_id):
        (batch_df.write.format(SOURCE_NAME).mode("append")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())

    q = (agg.writeStream.outputMode("update").foreachBatch(each)
         .option("checkpointLocation", str(tmp_path / "chk2")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    got = sorted((r["key"], r["value"]) for r in consume(sink_broker, topic, expect=3))
    assert got == [(b"0", b"34"), (b"1", b"33"), (b"2", b"33")]
