"""Tests of the exactly-once sink (``kafkalog.exactlyOnce=true``, spark_kafkalog/writers/
exactly_once.py, broker/client/txn_completion.py) against a broker subprocess: fencing of an
older attempt by a newer one with the same transactional id and the driver's commit of a
transaction it did not open (no Spark job: the task body is called as a task would); a
batch write whose task fails once after sending part of its rows (exactly the input rows
visible to read_committed readers: confluent-kafka, the network reader, direct mode;
duplicates without the option); a job failing for good (nothing visible, the LSO freed by
the driver's abort); a streaming query whose driver dies between the tasks' writes and the
commit, then a replay of a micro-batch that was committed (every row exactly once); a typed
Avro write whose task fails once (every record once, as ``AvroDeserializer`` reads it)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from broker.client.errors import KafkaError
from spark_kafkalog.writers import parse_write_options
from spark_kafkalog.writers.common import SinkColumns, TaskInfo
from spark_kafkalog.writers.exactly_once import KafkaLogCommitError, commit_transactions
from spark_kafkalog.writers.exactly_once import write_task_transactional as write_task
from tests.support.spark_write import (
    KILL_OPTION,
    RECORD_OPTION,
    SOURCE_NAME,
    consume,
    read_topic,
    recorded,
    unique_topic,
    wait_written,
)

EOS = {"kafkalog.exactlyOnce": "true"}


def _options(broker, topic: str, write_id: str = "fence0001"):
    opts = parse_write_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic, **EOS})
    return dataclasses.replace(opts, write_id=write_id)


def _batch(tag: str, n: int = 50) -> pa.RecordBatch:
    return pa.record_batch([pa.array([f"{tag}-{i:03d}".encode() for i in range(n)], pa.binary())],
                           names=["value"])


def test_newer_attempt_fences_the_older_and_the_driver_commits(sink_broker):
    """Attempt 0 sends a batch; attempt 1 (same transactional id) runs to its end meanwhile;
    attempt 0's next send is refused (fenced) and its task fails. The driver commits
    attempt 1's transaction from its commit message alone; the fenced attempt's message
    cannot be committed."""
    topic = unique_topic("eos-fence")
    opts = _options(sink_broker, topic)
    cols = SinkColumns(value=0, names=("value",))
    newer = {}

    def older_input():
        yield _batch("a1")
        newer["msg"] = write_task(opts, cols, iter([_batch("b")]), streaming=False,
                                  info=TaskInfo(partition=0, attempt=1))
        yield _batch("a2")

    with pytest.raises(KafkaError, match="PRODUCER_FENCED|INVALID_PRODUCER_EPOCH"):
        write_task(opts, cols, older_input(), streaming=False, info=TaskInfo(partition=0, attempt=0))
    b = newer["msg"]
    assert b.transactional_id == "kafkalog-sink-fence0001-p0" and b.records == 50
    assert b.producer_epoch >= 1  # bumped past the older attempt's
    assert consume(sink_broker, topic) == []  # open: nothing visible yet

    stale = dataclasses.replace(b, producer_epoch=b.producer_epoch - 1)
    with pytest.raises(KafkaLogCommitError, match="PRODUCER_FENCED"):
        commit_transactions(opts, [stale])
    assert "1 transactions, 50 records" in commit_transactions(opts, [b])
    assert "1 transactions" in commit_transactions(opts, [b])  # a retried commit is harmless
    got = consume(sink_broker, topic, expect=50)
    assert sorted(r["value"] for r in got) == [f"b-{i:03d}".encode() for i in range(50)]
    everything = consume(sink_broker, topic, isolation="read_uncommitted", expect=100)
    assert len(everything) == 100  # a1's 50 are in the log, aborted; a2 was never sent
    assert {r["value"][:2] for r in everything} == {b"a1", b"b-"}


# -- batch writes through Spark ------------------------------------------------------------

FAIL_AT = 300
ROWS = 2000  # 1000 per Spark partition


def _failing_input(spark, marker_dir: Path, always: bool, bootstrap: str, topic: str):
    """As test_spark_write's: partition 0's first attempt (every attempt with ``always``)
    hands FAIL_AT rows of 2 KiB on, waits (bounded) until the writer got one of them into
    ``topic``, then raises."""

    def gen(batches):
        import time as _time

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


def _write(df, broker, topic: str, **options):
    w = (df.write.format(SOURCE_NAME).mode("append").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", topic))
    for k, v in options.items():
        w = w.option(k, v)
    return w


def _network_ids(spark, broker, topic: str) -> Counter:
    rows = (spark.read.format("kafkalog").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic).option("kafka.isolation.level", "read_committed").load()
            .selectExpr("CAST(key AS STRING) k").collect())
    return Counter(int(r.k) for r in rows)


def _direct_ids(spark, broker, topic: str) -> Counter:
    rows = read_topic(spark, broker, topic, include_headers=False).selectExpr("CAST(key AS STRING) k").collect()
    return Counter(int(r.k) for r in rows)


def test_task_retry_writes_each_row_once(wspark, sink_broker, tmp_path):
    """The failed attempt's rows are in the log, aborted: read_committed readers (confluent-
    kafka, the network reader, direct mode through the .txnindex) see each input row once;
    the same failure without exactlyOnce leaves duplicates."""
    eos_topic, plain_topic = unique_topic("eos-retry"), unique_topic("plain-retry")
    rec = tmp_path / "rec"
    rec.mkdir()
    wspark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        (tmp_path / "eos").mkdir()
        _write(_failing_input(wspark, tmp_path / "eos", False, sink_broker.bootstrap, eos_topic), sink_broker,
               eos_topic, **EOS, **{RECORD_OPTION: str(rec)}).save()
        (tmp_path / "plain").mkdir()
        _write(_failing_input(wspark, tmp_path / "plain", False, sink_broker.bootstrap, plain_topic), sink_broker,
               plain_topic).save()
    finally:
        wspark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert (tmp_path / "eos" / "failed-0").exists() and (tmp_path / "plain" / "failed-0").exists()
    (kind, _, messages), = recorded(rec)
    assert kind == "commit"
    by_part = {m.spark_partition: m for m in messages}
    assert by_part[0].attempt >= 1 and by_part[0].records == 1000
    assert by_part[0].transactional_id.endswith("-p0") and by_part[1].transactional_id.endswith("-p1")

    expected = Counter(range(ROWS))
    in_log = consume(sink_broker, eos_topic, isolation="read_uncommitted", expect=ROWS + 1, timeout=10)
    assert len(in_log) > ROWS  # the failed attempt's records are there, aborted
    assert Counter(int(r["key"]) for r in consume(sink_broker, eos_topic, expect=ROWS)) == expected
    assert _network_ids(wspark, sink_broker, eos_topic) == expected
    assert _direct_ids(wspark, sink_broker, eos_topic) == expected

    plain = Counter(int(r["key"]) for r in consume(sink_broker, plain_topic, expect=ROWS + 1))
    assert set(plain) == set(range(ROWS)) and any(c > 1 for c in plain.values())  # duplicates


def test_job_failing_for_good_leaves_nothing_visible(wspark, sink_broker, tmp_path):
    """Every attempt of partition 0 fails: the driver's abort aborts partition 1's
    transaction and fences partition 0's id (its last attempt's open transaction is
    aborted now, not at transaction.timeout.ms): nothing is visible and the LSO is free."""
    topic = unique_topic("eos-abort")
    rec = tmp_path / "rec"
    rec.mkdir()
    wspark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        with pytest.raises(Exception, match="injected failure after a partial write"):
            _write(_failing_input(wspark, tmp_path, True, sink_broker.bootstrap, topic), sink_broker, topic,
                   **EOS, **{RECORD_OPTION: str(rec)}).save()
    finally:
        wspark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    events = recorded(rec)
    assert [e[0] for e in events] == ["abort"]
    in_log = consume(sink_broker, topic, isolation="read_uncommitted", expect=1000, timeout=10)
    assert len(in_log) >= 1000  # partition 1's rows and the failed attempts' are in the log
    assert consume(sink_broker, topic) == []
    assert _network_ids(wspark, sink_broker, topic) == Counter()
    assert _direct_ids(wspark, sink_broker, topic) == Counter()
    # Every transaction is complete: a later committed write is visible at once (an open
    # one would hold the LSO back until transaction.timeout.ms).
    _write(wspark.range(10).selectExpr("CAST(id AS STRING) key", "CAST(id AS STRING) value"),
           sink_broker, topic, **EOS).save()
    assert sorted(_network_ids(wspark, sink_broker, topic)) == list(range(10))


# -- streams -------------------------------------------------------------------------------

PER_FILE = 100


def _file(directory: Path, index: int) -> None:
    rows = [{"id": i, "payload": f"p{i}"} for i in range(index * PER_FILE, (index + 1) * PER_FILE)]
    tmp = directory / f".f{index:04d}.tmp"
    tmp.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    stamp = 1_700_000_000 + index
    os.utime(tmp, (stamp, stamp))
    tmp.rename(directory / f"f{index:04d}.json")


def test_stream_killed_before_commit_and_replayed_writes_each_row_once(wspark, sink_broker, tmp_path):
    """Run 1: micro-batches 0 and 1 commit; batch 2's tasks write, then the driver "dies"
    (the test source's ``test.dieAtCommitOfBatch``: its commit and abort fail without
    reaching the brokers), so batch 2's transaction stays open. Run 2 replays batch 2 (its
    InitProducerId aborts the open transaction), writes it again and commits, then batch
    3; batch 3's entry in Spark's commit log is then removed, as if the driver died after
    the sink's commit. Run 3 replays batch 3: already committed, nothing written; then
    batch 4. Every row is visible exactly once."""
    topic = unique_topic("eos-stream")
    src, chk, rec = tmp_path / "in", tmp_path / "chk", tmp_path / "rec"
    for d in (src, rec):
        d.mkdir()
    for i in range(3):
        _file(src, i)
    df = (wspark.readStream.format("json").schema("id long, payload string").option("maxFilesPerTrigger", 1)
          .load(str(src)).selectExpr("CAST(id AS STRING) AS key", "payload AS value"))

    def run(**extra):
        w = (df.writeStream.format(SOURCE_NAME).option("kafka.bootstrap.servers", sink_broker.bootstrap)
             .option("topic", topic).option("checkpointLocation", str(chk)).option(RECORD_OPTION, str(rec)))
        for k, v in {**EOS, **extra}.items():
            w = w.option(k, v)
        q = w.trigger(availableNow=True).start()
        try:
            q.awaitTermination(180)
        except Exception as e:  # noqa: BLE001 (the query's failure, checked by the caller)
            return e
        finally:
            q.stop()
        return q.exception()

    failure = run(**{"test.dieAtCommitOfBatch": "2"})
    assert failure is not None and "Writing job failed" in str(failure)
    assert [(k, b) for k, b, _ in recorded(rec)] == [("commit", 0), ("commit", 1), ("commit", 2), ("abort", 2)]
    # batch 2's records are in the log, in an open transaction that read_committed readers wait behind
    assert len(consume(sink_broker, topic, isolation="read_uncommitted", expect=300, timeout=10)) == 300
    assert len(consume(sink_broker, topic)) == 200

    _file(src, 3)
    assert run() is None
    (chk / "commits" / "3").unlink()
    (chk / "commits" / ".3.crc").unlink(missing_ok=True)
    _file(src, 4)
    assert run() is None
    events = [(k, b) for k, b, _ in recorded(rec)]
    assert events[4:] == [("commit", 2), ("commit", 3), ("commit", 3), ("commit", 4)]
    replayed = recorded(rec)[6][2]
    assert all(m.already_committed and m.records == 0 for m in replayed)

    expected = Counter(range(5 * PER_FILE))
    assert Counter(int(r["key"]) for r in consume(sink_broker, topic, expect=5 * PER_FILE)) == expected
    assert _network_ids(wspark, sink_broker, topic) == expected
    assert _direct_ids(wspark, sink_broker, topic) == expected
    # the log holds batch 2 twice (the first copy aborted), batch 3 once
    assert len(consume(sink_broker, topic, isolation="read_uncommitted", expect=600, timeout=10)) == 600


@pytest.mark.parametrize("options, message", [
    ({"kafkalog.exactlyOnce": "true", "kafka.acks": "1"}, "kafka.acks.*transactional producer"),
    ({"kafkalog.exactlyOnce": "true", "kafka.enable.idempotence": "false"}, "transactional producer"),
    ({"kafka.transactional.id": "t"}, "kafkalog.transactionalIdPrefix"),
    ({"kafkalog.exactlyOnce": "yes"}, "kafkalog.exactlyOnce: 'yes' is not valid; use true or false"),
    ({"kafkalog.exactlyOnce": "true", "kafkalog.transactionalIdPrefix": " "}, "must not be empty"),
])
def test_exactly_once_options_refused(options, message):
    from spark_kafkalog.writers import KafkaLogWriteError
    with pytest.raises(KafkaLogWriteError, match=message):
        parse_write_options({"kafka.bootstrap.servers": "h:1", "topic": "t", **options})


def test_stream_whose_every_task_fails_is_fenced_at_once_via_the_checkpoint(wspark, sink_broker, tmp_path):
    """A micro-batch whose only task dies for good (its Python worker exits: no cleanup, as
    when an executor is lost) after sending part of its rows: no task finished, so no
    commit message names the query id; the driver's abort reads it from
    ``<checkpointLocation>/metadata`` and fences the task's transactional id, so its open
    transaction is aborted now (not at transaction.timeout.ms): the last stable offset of
    every partition is back at the high watermark when the query has failed."""
    from confluent_kafka.admin import AdminClient

    from spark_kafkalog.writers.exactly_once import query_id_from_checkpoint
    from tests.support.broker import RawClient
    from tests.support.txn_protocol import fetch_partition

    topic = unique_topic("eos-stream-fail")
    src, chk, rec = tmp_path / "in", tmp_path / "chk", tmp_path / "rec"
    for d in (src, rec):
        d.mkdir()
    _file(src, 0)

    wspark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
    try:
        df = (wspark.readStream.format("json").schema("id long, payload string").load(str(src))
              .selectExpr("CAST(id AS STRING) AS key", "payload AS value"))
        q = (df.writeStream.format(SOURCE_NAME).option("kafka.bootstrap.servers", sink_broker.bootstrap)
             .option("topic", topic).option("checkpointLocation", str(chk)).option(RECORD_OPTION, str(rec))
             .option(KILL_OPTION, "50").option("kafkalog.exactlyOnce", "true")
             .option("kafka.transaction.timeout.ms", "600000").trigger(availableNow=True).start())
        with pytest.raises(Exception, match="(?i)python worker|crashed|exited|Writing job"):  # noqa: B017
            q.awaitTermination(180)
        q.stop()
    finally:
        wspark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    events = [(k, b) for k, b, _ in recorded(rec)]
    assert [e for e in events if e[0] in ("commit", "abort")] == [("abort", 0)], events
    assert query_id_from_checkpoint(str(chk)) == q.id
    assert len(consume(sink_broker, topic, isolation="read_uncommitted", expect=50, timeout=10)) >= 50
    partitions = AdminClient({"bootstrap.servers": sink_broker.bootstrap}).list_topics(topic, timeout=10) \
        .topics[topic].partitions
    with RawClient(sink_broker.host, sink_broker.port) as raw:
        for p in partitions:  # fenced and aborted now: with a 10-minute timeout nothing else would
            part = fetch_partition(raw, topic, p)
            assert part.last_stable_offset == part.high_watermark, (p, part.last_stable_offset, part.high_watermark)
    assert consume(sink_broker, topic) == []


def test_typed_avro_write_whose_task_fails_once_leaves_each_record_once(wspark, tmp_path):
    """A typed write (``valueFormat=avro``, the schema registered by the write) with the
    exactly-once sink, whose partition-0 task fails once after part of its rows reached
    the topic: read_committed, ``AvroDeserializer`` reads every row exactly once."""
    from confluent_kafka import DeserializingConsumer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import StringDeserializer

    from tests.support.broker import BrokerProcess

    broker = BrokerProcess(tmp_path / "broker", {"schema.registry.listeners": "http://127.0.0.1:0",
                                                 "num.partitions": "3"}, name="eos-typed")
    broker.start()
    try:
        topic = unique_topic("eos-typed")
        bootstrap = broker.bootstrap

        def gen(batches):
            import time as _time

            from pyspark import TaskContext
            tc = TaskContext.get()
            fail = tc.partitionId() == 0 and tc.attemptNumber() == 0
            since_ms = int(_time.time() * 1000)
            sent = 0
            for b in batches:
                for s in range(0, b.num_rows, 100):
                    if fail and sent >= FAIL_AT:
                        wait_written(bootstrap, topic, since_ms, below=FAIL_AT)
                        (tmp_path / f"failed-{tc.attemptNumber()}").touch()
                        raise RuntimeError("injected failure after a partial write")
                    ids = b.column(0).slice(s, 100).to_pylist()
                    sent += len(ids)
                    value = pa.StructArray.from_arrays(
                        [pa.array(ids, pa.int64()), pa.array([f"n-{i}" for i in ids]),
                         pa.array(["." * 2040] * len(ids))], names=["id", "name", "note"])
                    yield pa.record_batch([pa.array([str(i) for i in ids]), value], names=["key", "value"])

        df = wspark.range(0, ROWS, 1, 2).mapInArrow(
            gen, "key string, value struct<id: bigint, name: string, note: string>")
        # the writer's input in batches of 100 rows of 2 KiB (full producer batches, sent at
        # once), so that rows reach the topic before the failure
        wspark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
        try:
            rec = tmp_path / "rec"
            rec.mkdir()
            (_write(df, broker, topic, **EOS, **{RECORD_OPTION: str(rec)}).option("valueFormat", "avro")
             .option("schema.registry.url", broker.schema_registry_url).save())
        finally:
            wspark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
        assert (tmp_path / "failed-0").exists()
        (kind, _, messages), = recorded(rec)
        assert kind == "commit" and {m.spark_partition: m.attempt >= 1 for m in messages}[0]
        consumer = DeserializingConsumer({
            "bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "isolation.level": "read_committed",
            "key.deserializer": StringDeserializer(),
            "value.deserializer": AvroDeserializer(SchemaRegistryClient({"url": broker.schema_registry_url}))})
        consumer.subscribe([topic])
        seen: Counter = Counter()
        try:
            idle = 0
            while idle < 10:
                msg = consumer.poll(1.0)
                if msg is None:
                    idle += 1 if sum(seen.values()) >= ROWS else 0
                    continue
                assert msg.error() is None, msg.error()
                assert msg.value() == {"id": int(msg.key()), "name": f"n-{msg.key()}", "note": "." * 2040}
                seen[int(msg.key())] += 1
        finally:
            consumer.close()
        assert seen == Counter(range(ROWS))
    finally:
        broker.kill()
