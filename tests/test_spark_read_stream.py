"""Streaming reads of the kafkalog source (spark_kafkalog/readers/stream.py, the streaming
parts of options.py) through real Spark structured streaming queries, in
direct mode (the shared broker's log directory, or logs written with the broker's
UnifiedLog) and network mode (the shared broker over the wire), with data produced by
confluent-kafka:

- Trigger.AvailableNow reads exactly what the topic held when the query started, split
  into micro-batches by maxOffsetsPerTrigger (progress: rows per batch, offsets JSON);
  restarted from its checkpoint after more data was produced it reads exactly the new
  records once (parquet sink: counts and distinct offsets);
- startingOffsets earliest / JSON (-1, -2, an offset) / latest (a running query);
- partitions and topics created mid-stream (CreatePartitions, subscribePattern) are read
  from their earliest offset;
- failOnDataLoss true / false after DeleteRecords (network) or a raised log start offset
  (direct), on restart from a checkpoint;
- endingOffsets refused; the stream options' parsing; the reader's offsets, read limits,
  AvailableNow target and minOffsetsPerTrigger driven directly (no Spark) on a log.

The planning functions streams use (offsets JSON, rateLimit, stream_ranges) are tested
on their own in tests/test_spark_planning.py.
"""

from __future__ import annotations

import json
import pickle
import uuid
from pathlib import Path

import pytest

from broker.log import files  # noqa: E402
from spark_kafkalog.errors import KafkaDataLossError  # noqa: E402
from spark_kafkalog.options import KafkaLogOptionError, parse_options  # noqa: E402
from spark_kafkalog.readers.stream import KafkaLogStreamReader  # noqa: E402
from tests.support.spark import LogWriter

pytestmark = pytest.mark.timeout(300)


# --- helpers ---

def _uid() -> str:
    return uuid.uuid4().hex[:6]


def _admin(broker):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _create_topic(broker, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic
    admin = _admin(broker)  # kept alive until the future is done
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)


def _produce(broker, topic: str, counts: dict[int, int], *, first: int = 0,
             one_per_batch: bool = False) -> None:
    """``counts[p]`` records to partition p, values ``p<p>-<i>`` with i from ``first``;
    every third record has headers."""
    import confluent_kafka as ck
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0 if one_per_batch else 5})
    for p, n in counts.items():
        for i in range(first, first + n):
            headers = [("i", str(i).encode()), ("n", None)] if i % 3 == 0 else None
            producer.produce(topic, key=b"k%d" % i, value=b"p%d-%d" % (p, i), partition=p, headers=headers)
            if one_per_batch:
                producer.flush(10)
    assert producer.flush(30) == 0


def _stream(spark, source, **options):
    """``source``: a broker (network mode) or a log directory (direct mode)."""
    reader = spark.readStream.format("kafkalog")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    if isinstance(source, (str, Path)):
        return reader.load(str(source))
    return reader.option("kafka.bootstrap.servers", source.bootstrap).load()


def _available_now(df, out: Path, checkpoint: Path):
    """Run ``df`` to a parquet sink with Trigger.AvailableNow; the finished query."""
    q = (df.writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    q.awaitTermination()
    assert q.exception() is None
    return q


def _batches(q) -> list[tuple[int, dict, dict, dict]]:
    """(rows, start offsets, end offsets, latest offsets) of every micro-batch of ``q``."""
    out = []
    for p in q.recentProgress:
        src = p["sources"][0]
        start = json.loads(src["startOffset"]) if src["startOffset"] else None
        latest = json.loads(src["latestOffset"]) if src["latestOffset"] else None
        out.append((p["numInputRows"], start, json.loads(src["endOffset"]), latest))
    return out


def _offsets(spark, out: Path) -> list[tuple[int, int]]:
    rows = spark.read.parquet(str(out)).select("partition", "offset").collect()
    return sorted((r.partition, r.offset) for r in rows)


# --- Trigger.AvailableNow, maxOffsetsPerTrigger, restart from the checkpoint ---

@pytest.mark.parametrize("mode", ["direct", "network"])
def test_available_now_in_batches_then_resumes_exactly_once(spark, kafka_broker, tmp_path, mode):
    topic = f"st-avail-{mode}-{_uid()}"
    _create_topic(kafka_broker, topic, 2)
    _produce(kafka_broker, topic, {0: 60, 1: 60})
    source = kafka_broker.log_dir if mode == "direct" else kafka_broker
    out, chk = tmp_path / "out", tmp_path / "chk"

    def stream():
        return _stream(spark, source, subscribe=topic, startingOffsets="earliest",
                       maxOffsetsPerTrigger=50, includeHeaders="true")

    q = _available_now(stream(), out, chk)
    batches = _batches(q)
    assert [b[0] for b in batches] == [50, 50, 20]
    assert [b[2] for b in batches] == [{topic: {"0": 25, "1": 25}}, {topic: {"0": 50, "1": 50}},
                                       {topic: {"0": 60, "1": 60}}]
    assert batches[-1][3] == {topic: {"0": 60, "1": 60}}  # reportLatestOffset
    rows = sorted((r.partition, r.offset, r.key, r.value, r.topic,
                   None if r.headers is None else [(h.key, h.value) for h in r.headers])
                  for r in spark.read.parquet(str(out)).collect())
    assert rows == [(p, i, b"k%d" % i, b"p%d-%d" % (p, i), topic,
                     [("i", str(i).encode()), ("n", None)] if i % 3 == 0 else None)
                    for p in (0, 1) for i in range(60)]

    # more data, then the same query again from its checkpoint: only the new records
    _produce(kafka_broker, topic, {0: 15, 1: 5}, first=60)
    q = _available_now(stream(), out, chk)
    batches = _batches(q)
    assert [b[0] for b in batches] == [20]
    assert batches[0][1] == {topic: {"0": 60, "1": 60}}
    assert batches[0][2] == {topic: {"0": 75, "1": 65}}
    assert _offsets(spark, out) == [(0, i) for i in range(75)] + [(1, i) for i in range(65)]

    if mode == "network":
        # nothing new: no micro-batch reads anything (a no-data progress may be reported)
        q = _available_now(stream(), out, chk)
        assert all(rows == 0 and start == end for rows, start, end, _ in _batches(q))
        assert len(_offsets(spark, out)) == 140


# --- startingOffsets ---

def test_starting_offsets_json_and_latest(spark, kafka_broker, tmp_path):
    # (earliest: the AvailableNow test above; -2 and timestamps: the reader test below)
    topic = f"st-start-{_uid()}"
    _create_topic(kafka_broker, topic, 3)
    _produce(kafka_broker, topic, {0: 20, 1: 20, 2: 4})

    spec = json.dumps({topic: {"0": 5, "1": -1}})
    q = _available_now(_stream(spark, kafka_broker, assign=json.dumps({topic: [0, 1]}), startingOffsets=spec),
                       tmp_path / "j", tmp_path / "j-chk")
    assert _offsets(spark, tmp_path / "j") == [(0, i) for i in range(5, 20)]
    assert [b[0] for b in _batches(q)] == [15]  # no limit: one micro-batch

    # latest (the default, here spelled out): a running query sees only what comes after
    # it started. The loop waits for the records (processAllAvailable may return for a
    # trigger that began before they were produced); it is bounded and asserts no time.
    name = f"latest_{_uid()}"
    q = (_stream(spark, kafka_broker, subscribe=topic, startingOffsets="latest")
         .writeStream.format("memory").queryName(name).start())
    try:
        q.processAllAvailable()
        _produce(kafka_broker, topic, {0: 3, 1: 2, 2: 1}, first=20)
        got = []
        for _ in range(50):
            q.processAllAvailable()
            got = sorted((r.partition, r.offset) for r in spark.table(name).collect())
            if len(got) >= 6:
                break
        assert got == [(0, 20), (0, 21), (0, 22), (1, 20), (1, 21), (2, 4)]
    finally:
        q.stop()


# --- partitions that appear mid-stream ---

def test_new_partitions_and_topics_are_read_from_earliest(spark, kafka_broker, tmp_path):
    from confluent_kafka.admin import NewPartitions

    prefix = f"st-new-{_uid()}"
    a, b = f"{prefix}-a", f"{prefix}-b"
    _create_topic(kafka_broker, a, 1)
    _produce(kafka_broker, a, {0: 5})
    out, chk = tmp_path / "out", tmp_path / "chk"

    def stream():
        return _stream(spark, kafka_broker, subscribePattern=f"{prefix}-.*", startingOffsets="latest")

    # latest at start: an empty first micro-batch puts {a: {0: 5}} in the checkpoint, so
    # that the next run reads what came in between
    q = _available_now(stream(), out, chk)
    assert [(b[0], b[2]) for b in _batches(q)] == [(0, {a: {"0": 5}})]
    _produce(kafka_broker, a, {0: 2}, first=5)

    admin = _admin(kafka_broker)
    admin.create_partitions([NewPartitions(a, 3)])[a].result(30)
    _create_topic(kafka_broker, b, 1)
    _produce(kafka_broker, a, {1: 4, 2: 1}, first=0)
    _produce(kafka_broker, b, {0: 3})
    _produce(kafka_broker, a, {0: 1}, first=7)
    q = _available_now(stream(), out, chk)
    assert _batches(q)[-1][2] == {a: {"0": 8, "1": 4, "2": 1}, b: {"0": 3}}
    rows = sorted((r.topic, r.partition, r.offset, r.value)
                  for r in spark.read.parquet(str(out)).collect())
    assert rows == sorted([(a, 0, i, b"p0-%d" % i) for i in range(5, 8)]
                          + [(a, 1, i, b"p1-%d" % i) for i in range(4)] + [(a, 2, 0, b"p2-0")]
                          + [(b, 0, i, b"p0-%d" % i) for i in range(3)])


# --- failOnDataLoss ---

def test_network_data_loss_on_restart(spark, kafka_broker, tmp_path):
    import confluent_kafka as ck

    topic = f"st-loss-{_uid()}"
    _create_topic(kafka_broker, topic, 1)
    _produce(kafka_broker, topic, {0: 10}, one_per_batch=True)
    out, chk = tmp_path / "out", tmp_path / "chk"
    _available_now(_stream(spark, kafka_broker, subscribe=topic, startingOffsets="earliest"), out, chk)
    assert _offsets(spark, out) == [(0, i) for i in range(10)]

    _produce(kafka_broker, topic, {0: 30}, first=10, one_per_batch=True)
    admin = _admin(kafka_broker)
    for f in admin.delete_records([ck.TopicPartition(topic, 0, 25)]).values():
        f.result(30)
    q = (_stream(spark, kafka_broker, subscribe=topic).writeStream.format("parquet")
         .option("path", str(out)).option("checkpointLocation", str(chk))
         .trigger(availableNow=True).start())
    with pytest.raises(Exception, match=rf"Could not read records in offset \[10, 25\) for topic "
                                        rf"partition {topic}-0"):
        q.awaitTermination()
    assert _offsets(spark, out) == [(0, i) for i in range(10)]  # nothing committed

    _available_now(_stream(spark, kafka_broker, subscribe=topic, failOnDataLoss="false"), out, chk)
    assert _offsets(spark, out) == [(0, i) for i in range(10)] + [(0, i) for i in range(25, 40)]


def test_direct_data_loss_after_segments_were_deleted(spark, tmp_path):
    w = LogWriter(tmp_path / "logs")  # 4 KiB segments: about 15 of these batches each
    for i in range(60):
        w.append("loss", 0, [(None, b"%d-" % i + b"x" * 200, 1000 + i)])
    w.close()
    # retention deletes the two oldest segments
    segments = sorted((w.root / "loss-0").glob("*.log"))
    for seg in segments[:2]:
        for path in seg.parent.glob(seg.stem + ".*"):
            path.unlink()
    log_start = files.offset_from_file_name(segments[2].name)
    assert 10 < log_start < 60
    out, chk = tmp_path / "out", tmp_path / "chk"

    def stream(**options):
        return _stream(spark, w.root, subscribe="loss", startingOffsets='{"loss":{"0":10}}', **options)

    q = stream().writeStream.format("parquet").option("path", str(out)) \
        .option("checkpointLocation", str(chk)).trigger(availableNow=True).start()
    with pytest.raises(Exception, match=rf"Could not read records in offset \[10, {log_start}\) for "
                                        "topic partition loss-0"):
        q.awaitTermination()
    # the failed micro-batch again, from the checkpoint, without failing on data loss
    _available_now(stream(failOnDataLoss="false"), out, chk)
    assert _offsets(spark, out) == [(0, i) for i in range(log_start, 60)]


# --- options ---

def test_ending_offsets_refused_for_streams_and_latest_start_for_batches(spark, tmp_path):
    w = LogWriter(tmp_path / "logs")
    w.append("t", 0, [(None, b"x", 1000)])
    w.close()
    # load() (DataSource.schema) cannot tell a stream from a batch read: the rules of
    # each apply when the query starts or is planned
    df = _stream(spark, w.root, subscribe="t", endingOffsets="latest")
    q = df.writeStream.format("memory").queryName(f"ending_{_uid()}").trigger(availableNow=True).start()
    with pytest.raises(Exception, match="ending offset not valid in streaming queries"):
        q.awaitTermination()
    df = spark.read.format("kafkalog").option("subscribe", "t").option("startingOffsets", "latest") \
        .load(str(w.root))
    with pytest.raises(Exception, match="starting offset can't be latest for batch queries"):
        df.count()


def test_stream_option_rules():
    base = {"subscribe": "t", "path": "/logs"}

    def parse(**kw):
        return parse_options({**base, **kw}, streaming=True)

    o = parse()
    assert o.streaming and o.starting.kind == "latest"
    assert o.max_offsets_per_trigger is None and o.min_offsets_per_trigger is None
    assert o.max_trigger_delay_ms == 15 * 60 * 1000
    assert parse(startingOffsets="earliest").starting.kind == "earliest"
    assert parse(startingOffsets='{"t":{"0":-1,"1":4}}').starting.offsets == {("t", 0): -1, ("t", 1): 4}
    o = parse(maxOffsetsPerTrigger="100", minOffsetsPerTrigger="10", maxTriggerDelay="30s")
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (100, 10, 30_000)
    assert parse(maxTriggerDelay="250").max_trigger_delay_ms == 250
    assert parse(maxTriggerDelay="2h").max_trigger_delay_ms == 7_200_000
    for key, message in [("endingOffsets", "ending offset not valid in streaming queries"),
                         ("endingTimestamp", "ending timestamp not valid in streaming queries"),
                         ("endingOffsetsByTimestamp", "ending timestamp not valid in streaming queries")]:
        with pytest.raises(KafkaLogOptionError, match=message):
            parse(**{key: '{"t":{"0":1}}' if "By" in key else "1"})
    with pytest.raises(KafkaLogOptionError, match=r"minOffsetPerTrigger\(10\) is higher than the "
                                                  r"maxOffsetsPerTrigger\(5\)"):
        parse(maxOffsetsPerTrigger="5", minOffsetsPerTrigger="10")
    with pytest.raises(KafkaLogOptionError, match="maxTriggerDelay: 'soon' is not valid; use a duration"):
        parse(maxTriggerDelay="soon")
    with pytest.raises(KafkaLogOptionError, match="maxOffsetsPerTrigger: '0' is not valid; use a positive"):
        parse(maxOffsetsPerTrigger="0")
    # load() checks the shared rules only; the batch rules stay for batch reads
    assert parse_options({**base, "startingOffsets": "latest"}, streaming=None).include_headers is False
    with pytest.raises(KafkaLogOptionError, match="can't be latest for batch queries"):
        parse_options({**base, "startingOffsets": "latest"})
    with pytest.raises(KafkaLogOptionError, match=r"Unknown option 'maxOffsetPerTrigger' for the kafkalog "
                                                  r"source; did you mean 'maxOffsetsPerTrigger'\?"):
        parse_options({**base, "maxOffsetPerTrigger": "5"}, streaming=None)


# --- the reader driven directly (the calls pyspark makes), no Spark ---

def test_reader_offsets_limits_and_available_now_target(tmp_path):
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

    w = LogWriter(tmp_path / "logs")
    for p in (0, 1):
        for i in range(4):
            w.append("t", p, [(None, b"v", 1000 + 10 * i + j) for j in range(5)])  # 20 per partition

    def reader(**kw):
        return KafkaLogStreamReader(parse_options({"subscribe": "t", "path": str(w.root), **kw},
                                                  streaming=True))

    r = reader()
    assert isinstance(r.getDefaultReadLimit(), ReadAllAvailable)
    # latest, marked so that a new query's first micro-batch always runs
    assert r.initialOffset() == {"t": {"0": 20, "1": 20}, "kafkalog:initial": True}
    assert reader(startingOffsets="earliest").initialOffset()["t"] == {"0": 0, "1": 0}
    assert reader(startingTimestamp="1025").initialOffset()["t"] == {"0": 15, "1": 15}
    assert reader(startingOffsets='{"t":{"0":-2,"1":7}}').initialOffset()["t"] == {"0": 0, "1": 7}
    assert r.latestOffset(r.initialOffset(), ReadAllAvailable()) == {"t": {"0": 20, "1": 20}}
    assert r.partitions(r.initialOffset(), {"t": {"0": 20, "1": 20}}) == []
    start = {"t": {"0": 0, "1": 0}}
    assert r.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 20, "1": 20}}
    assert r.reportLatestOffset() == {"t": {"0": 20, "1": 20}}
    assert r.latestOffset(start, ReadMaxRows(8)) == {"t": {"0": 4, "1": 4}}

    # splitting within a micro-batch, and the ranges stay inside [start, end)
    parts = reader(minPartitions="4").partitions(start, {"t": {"0": 10, "1": 20}})
    assert len(parts) == 4
    assert sorted((p.partition, o) for p in parts for o in range(p.start, p.end)) == \
        [(0, o) for o in range(10)] + [(1, o) for o in range(20)]
    parts = reader(maxRecordsPerPartition="6").partitions({"t": {"0": 4, "1": 20}}, {"t": {"0": 20, "1": 20}})
    assert [(p.start, p.end) for p in parts] == [(4, 9), (9, 14), (14, 20)]
    assert reader().partitions(start, start) == []

    # maxOffsetsPerTrigger is the default limit; AvailableNow stops at its target
    r = reader(maxOffsetsPerTrigger="30")
    assert r.getDefaultReadLimit() == ReadMaxRows(30)
    r.prepareForTriggerAvailableNow()
    for p in (0, 1):
        w.append("t", p, [(None, b"late", 2000)])  # after the target: not read
    w.append("u", 0, [(None, b"other topic", 2000)])
    end = r.latestOffset(start, ReadMaxRows(30))
    assert end == {"t": {"0": 15, "1": 15}}
    end = r.latestOffset(end, ReadMaxRows(30))
    assert end == {"t": {"0": 20, "1": 20}}
    assert r.latestOffset(end, ReadMaxRows(30)) == end  # target reached: no more batches
    assert r.reportLatestOffset() == {"t": {"0": 20, "1": 20}}

    # minOffsetsPerTrigger: the first trigger goes; then wait for enough records (the
    # delay is an hour, never reached here)
    r = reader(minOffsetsPerTrigger="5", maxTriggerDelay="1h")
    assert r.getDefaultReadLimit() == ReadMinRows(5)
    now = {"t": {"0": 21, "1": 21}}
    assert r.latestOffset({"t": {"0": 20, "1": 20}}, ReadMinRows(5)) == now
    assert r.latestOffset(now, ReadMinRows(5)) == now
    w.append("t", 0, [(None, b"more", 3000) for _ in range(3)])
    assert r.latestOffset(now, ReadMinRows(5)) == now  # 3 waiting < 5
    w.append("t", 1, [(None, b"more", 3000) for _ in range(2)])
    assert r.latestOffset(now, ReadMinRows(5)) == {"t": {"0": 24, "1": 23}}
    assert r.latestOffset(now, ReadAllAvailable()) == {"t": {"0": 24, "1": 23}}  # Trigger.Once

    # data loss planned on the driver, named; a pickled reader carries no connection
    files.write_offset_checkpoint(w.root / files.LOG_START_OFFSET_CHECKPOINT_FILE, {("t", 0): 12})
    with pytest.raises(KafkaDataLossError, match=r"\[4, 12\) for topic partition t-0"):
        reader().partitions({"t": {"0": 4, "1": 4}}, {"t": {"0": 20, "1": 20}})
    parts = reader(failOnDataLoss="false").partitions({"t": {"0": 4, "1": 4}}, {"t": {"0": 20, "1": 20}})
    assert [(p.partition, p.start, p.end) for p in parts] == [(0, 12, 20), (1, 4, 20)]
    with pytest.raises(KafkaDataLossError, match=r"Partition t-1's offset was changed from 30 to 20"):
        reader().partitions({"t": {"0": 20, "1": 30}}, {"t": {"0": 20, "1": 20}})
    with pytest.raises(KafkaDataLossError, match=r"\{gone-0\} are gone"):
        reader().partitions({"t": {"0": 20}, "gone": {"0": 1}}, {"t": {"0": 21}})
    assert pickle.loads(pickle.dumps(r))._network is None
    w.close()


def test_read_committed_micro_batches_wait_for_the_open_transaction(tmp_path):
    """Direct mode with kafka.isolation.level=read_committed: each micro-batch ends at the
    last stable offset, so an open transaction holds the stream back at its first offset
    (later plain records wait too, as with a read_committed consumer) until its marker is
    in the files; an aborted one is then skipped, a committed one read."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    w = LogWriter(tmp_path / "logs")
    w.append("t", 0, [(None, b"a", 1000), (None, b"b", 1000)])  # 0, 1
    r = KafkaLogStreamReader(parse_options({"subscribe": "t", "path": str(w.root), "startingOffsets": "earliest",
                                            "kafka.isolation.level": "read_committed"}, streaming=True))
    start = r.initialOffset()
    assert start["t"] == {"0": 0}
    assert r.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 2}}
    w.append("t", 0, [(None, b"t1", 1000)], producer_id=7, transactional=True)  # 2, open
    w.append("t", 0, [(None, b"c", 1000)])  # 3
    held = r.latestOffset({"t": {"0": 2}}, ReadAllAvailable())
    assert held == {"t": {"0": 2}}  # the open transaction's first offset
    w.end_txn("t", 0, 7, commit=True, timestamp=1000)  # 4
    assert r.latestOffset(held, ReadAllAvailable()) == {"t": {"0": 5}}
    # Spark's default (read_uncommitted) never waits
    plain = KafkaLogStreamReader(parse_options({"subscribe": "t", "path": str(w.root)}, streaming=True))
    w.append("t", 0, [(None, b"t2", 1000)], producer_id=8, transactional=True)  # 5, open
    assert plain.latestOffset({"t": {"0": 5}}, ReadAllAvailable()) == {"t": {"0": 6}}
    assert r.latestOffset({"t": {"0": 5}}, ReadAllAvailable()) == {"t": {"0": 5}}
    w.close()


# --- kafkalog.commitOffsetsToGroup ---

def _group_offsets(broker, group: str) -> dict:
    from broker.client.consumer.group_offsets import list_group_offsets

    return {(tp.topic, tp.partition): o for tp, o in
            list_group_offsets({"bootstrap.servers": broker.bootstrap}, group).items()}


def test_commit_offsets_to_group_option_rules(caplog):
    network = {"subscribe": "t", "kafka.bootstrap.servers": "localhost:9092"}
    o = parse_options({**network, "kafkalog.commitOffsetsToGroup": " g1 "}, streaming=True)
    assert o.commit_offsets_to_group == "g1"
    assert parse_options(network, streaming=True).commit_offsets_to_group is None
    assert parse_options({**network, "KAFKALOG.COMMITOFFSETSTOGROUP": "g"}, streaming=True).commit_offsets_to_group \
        == "g"  # option names are case-insensitive
    with pytest.raises(KafkaLogOptionError, match="'kafkalog.commitOffsetsToGroup' needs 'kafka.bootstrap.servers'"):
        parse_options({"subscribe": "t", "path": "/logs", "kafkalog.commitOffsetsToGroup": "g"}, streaming=True)
    with pytest.raises(KafkaLogOptionError, match="'kafkalog.commitOffsetsToGroup' is empty"):
        parse_options({**network, "kafkalog.commitOffsetsToGroup": " "}, streaming=True)
    with caplog.at_level("WARNING", logger="spark_kafkalog"):
        o = parse_options({**network, "kafkalog.commitOffsetsToGroup": "g"})  # a batch read: ignored
    assert o.commit_offsets_to_group is None
    assert "kafkalog.commitOffsetsToGroup option ignored in batch queries" in caplog.text


def test_reader_commit_to_group_and_failures_are_warnings(kafka_broker, caplog):
    """``commit(end)`` as pyspark calls it on the driver: the end offsets land in the group
    (the initialOffset marker left out); against an unreachable broker, or a commit the
    broker refuses, a warning and no exception."""
    import socket

    topic, group = f"st-commit-{_uid()}", f"st-g-{_uid()}"
    _create_topic(kafka_broker, topic, 2)
    options = {"subscribe": topic, "kafka.bootstrap.servers": kafka_broker.bootstrap,
               "kafkalog.commitOffsetsToGroup": group}
    reader = KafkaLogStreamReader(parse_options(options, streaming=True))
    try:
        reader.commit({topic: {"0": 0, "1": 0}, "kafkalog:initial": True})
        assert _group_offsets(kafka_broker, group) == {(topic, 0): 0, (topic, 1): 0}
        reader.commit({topic: {"0": 7, "1": 3}})
        assert _group_offsets(kafka_broker, group) == {(topic, 0): 7, (topic, 1): 3}
        # latestOffset's start is a finished micro-batch's end: committed too (the last
        # batch of an AvailableNow run gets no commit() call from Spark)
        from pyspark.sql.streaming.datasource import ReadAllAvailable
        reader.latestOffset({topic: {"0": 9, "1": 4}}, ReadAllAvailable())
        assert _group_offsets(kafka_broker, group) == {(topic, 0): 9, (topic, 1): 4}
        with caplog.at_level("WARNING", logger="spark_kafkalog"):
            reader.commit({f"{topic}-gone": {"0": 1}})  # UNKNOWN_TOPIC_OR_PARTITION from the broker
        assert f"committing the micro-batch's end offsets to group '{group}' failed" in caplog.text
        assert "UNKNOWN_TOPIC_OR_PARTITION" in caplog.text
    finally:
        reader.stop()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    caplog.clear()
    unreachable = KafkaLogStreamReader(parse_options(
        {**options, "kafka.bootstrap.servers": f"127.0.0.1:{port}", "kafka.default.api.timeout.ms": "1000"},
        streaming=True))
    with caplog.at_level("WARNING", logger="spark_kafkalog"):
        unreachable.commit({topic: {"0": 1}})
    unreachable.stop()
    assert "the query goes on" in caplog.text


def test_available_now_commits_end_offsets_to_the_group(spark, kafka_broker, tmp_path, capsys):
    """A real query: after Trigger.AvailableNow the group holds the last micro-batch's end
    offsets, and ``kafkalog groups --describe`` shows lag 0; more data shows as lag."""
    from spark_kafkalog.cli.main import main

    topic, group = f"st-group-{_uid()}", f"st-query-{_uid()}"
    _create_topic(kafka_broker, topic, 2)
    _produce(kafka_broker, topic, {0: 30, 1: 12})
    df = _stream(spark, kafka_broker, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=20,
                 **{"kafkalog.commitOffsetsToGroup": group})
    q = _available_now(df, tmp_path / "out", tmp_path / "chk")
    batches = _batches(q)
    assert sum(b[0] for b in batches) == 42 and len(batches) >= 3
    assert batches[-1][2] == {topic: {"0": 30, "1": 12}}
    assert _group_offsets(kafka_broker, group) == {(topic, 0): 30, (topic, 1): 12}
    capsys.readouterr()
    assert main(["groups", "--bootstrap-server", kafka_broker.bootstrap, "--describe", "--group", group]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert rows == [[group, topic, "0", "30", "30", "0", "-", "-", "-"],
                    [group, topic, "1", "12", "12", "0", "-", "-", "-"]]
    _produce(kafka_broker, topic, {0: 5}, first=30)
    assert main(["groups", "--bootstrap-server", kafka_broker.bootstrap, "--describe", "--group", group]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert rows[0] == [group, topic, "0", "30", "35", "5", "-", "-", "-"]
