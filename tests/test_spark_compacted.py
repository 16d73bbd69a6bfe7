"""Reading compacted topics (issue 15, the Spark side): offsets with gaps are not data loss.

A real broker subprocess compacts its topics with its own cleaner (small segments, a short
``log.cleaner.backoff.ms``); the data are produced by confluent-kafka with random keys,
updates and tombstones, and every delivered offset is remembered as the model. Then:

* the range readers of both modes (``DirectRangeReader`` on the broker's log directory,
  ``NetworkRangeReader`` over the wire) read many ranges [a, b) of the cleaned log with
  failOnDataLoss=true, ranges that start, end or lie wholly inside removed offsets,
  empty ones and ranges whose last batch reaches past their end: each returns exactly
  the records that exist in it, with no data-loss error;
* Spark batch reads in both modes, split in tiny pieces (``maxRecordsPerPartition``) so
  that many tasks read ranges with no record at all;
* the snapshot read (``kafkalog.snapshot``) against a model (latest value per key,
  tombstones removing keys), before and after cleaning, in both modes;
* streaming: a query reads while the producer writes and the cleaner compacts behind it,
  and a query restarted from a checkpoint whose offset was removed by cleaning;
* direct mode listing a directory in the middle of the cleaner's segment swap, and a
  cleaned log of committed and aborted transactions (in-process: the broker has no
  transaction coordinator, so no network-mode variant).

To compare reads with each other the cleaner is then stopped: the broker is restarted
with ``log.cleaner.enable=false`` once each partition was cleaned.
"""

from __future__ import annotations

import random
import time
import uuid
from pathlib import Path

import pytest

CLEANED_CONFIG = {"cleanup.policy": "compact", "internal.segment.bytes": "1024",
                  "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"}


def _uid() -> str:
    return uuid.uuid4().hex[:6]


def _create_topic(broker, topic: str, partitions: int, config: dict | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                  config=config or {})])[topic].result(30)


class Model:
    """What was produced: offset -> (key, value) per partition, as the broker assigned."""

    def __init__(self) -> None:
        self.records: dict[int, dict[int, tuple[bytes, bytes | None]]] = {}

    def add(self, partition: int, offset: int, key: bytes, value: bytes | None) -> None:
        self.records.setdefault(partition, {})[offset] = (key, value)

    def latest(self, partition: int | None = None, end: dict[int, int] | None = None) -> dict:
        """(partition, key) -> value of the latest record below ``end[p]``, tombstones
        removing keys."""
        out: dict = {}
        for p, recs in sorted(self.records.items()):
            if partition is not None and p != partition:
                continue
            for off in sorted(recs):
                if end is not None and off >= end[p]:
                    break
                key, value = recs[off]
                if value is None:
                    out.pop((p, key), None)
                else:
                    out[(p, key)] = value
        return out


def produce(broker, topic: str, model: Model, rng: random.Random, n: int, *, partitions: int = 2,
            keys: int = 12, tombstones: float = 0.15, per_batch: int = 1) -> None:
    """``n`` records with random keys (at most ``per_batch`` per batch: a batch larger
    than the 1 KiB segments would be refused), every value unique, some tombstones."""
    import confluent_kafka as ck
    # per_batch > 1: runs of per_batch records to one partition, each sent by a flush
    # (a long linger keeps them queued until then), so each run is one batch
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0 if per_batch == 1 else 10000,
                            "batch.num.messages": per_batch})
    errors: list = []

    def delivered(err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            model.add(msg.partition(), msg.offset(), msg.key(), msg.value())

    partition = 0
    for i in range(n):
        if i % per_batch == 0:
            if per_batch > 1 and i:
                producer.flush(30)
            partition = rng.randrange(partitions)
        key = b"key-%d" % rng.randrange(keys)
        value = None if rng.random() < tombstones else b"value-%d-%s" % (i, _uid().encode())
        producer.produce(topic, key=key, value=value, partition=partition, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0 and errors == []


def wait_cleaned(broker, topic: str, partitions: int, times: int = 1) -> None:
    """Wait (bounded) until the broker logged ``times`` cleanings of every partition."""
    for _ in range(1200):
        text = broker.stdout_text() + broker.stderr_text()
        if all(text.count(f"cleaned log {topic}-{p}") >= times for p in range(partitions)):
            return
        time.sleep(0.05)
    raise AssertionError(f"the broker's cleaner never cleaned {topic} {times} time(s)")


def existing_offsets(log_dir: Path, topic: str, partition: int, batches: list | None = None) -> list[int]:
    """The offsets of the data records in the partition's files (control records left
    out); ``batches`` gets (base offset, last offset, record offsets) of every batch."""
    from broker.log.reader import PartitionReader
    from broker.record.batch import iter_batches
    reader = PartitionReader(log_dir / f"{topic}-{partition}")
    try:
        out = []
        for seg in reader.segment_ranges(reader.log_start_offset, reader.log_end_offset):
            data = seg.path.read_bytes()[seg.start_position:seg.end_position]
            for header, recs in iter_batches(data):
                if not header.is_control:
                    out += [r.offset for r in recs]
                    if batches is not None:
                        batches.append((header.base_offset, header.last_offset, [r.offset for r in recs]))
        return out
    finally:
        reader.close()


@pytest.fixture(scope="module")
def compacted(tmp_path_factory):
    """A broker whose topic ``topic`` (2 partitions) was produced to and cleaned, then
    restarted with the cleaner off; (broker, topic, model, log end offsets)."""
    from tests.support.broker import BrokerProcess
    broker = BrokerProcess(tmp_path_factory.mktemp("compacted"), {"log.cleaner.backoff.ms": "20"})
    broker.start()
    try:
        topic = f"compacted-{_uid()}"
        _create_topic(broker, topic, 2, CLEANED_CONFIG)
        model = Model()
        # batches of several records: the cleaner keeps a batch's offsets (base and last)
        # when it removes some of its records, so batches reach past their last record
        # in two rounds, each cleaned: the second cleaning removes the tombstones too
        rng = random.Random(15)
        produce(broker, topic, model, rng, 200, per_batch=4)
        wait_cleaned(broker, topic, 2, times=1)
        produce(broker, topic, model, rng, 200, per_batch=4)
        wait_cleaned(broker, topic, 2, times=2)
        broker.stop()
        broker.overrides["log.cleaner.enable"] = "false"
        broker.start()
        yield broker, topic, model
    finally:
        if broker.alive():
            broker.stop()


# --- the range readers: every kind of range over a cleaned log ---

def _ranges(present: list[int], log_end: int, rng: random.Random) -> list[tuple[int, int]]:
    """Ranges that start, end or lie in gaps, empty ones, and whole ones."""
    present_set = set(present)
    gaps = [o for o in range(log_end) if o not in present_set]
    out = {(0, log_end), (0, 0), (log_end, log_end)}
    for g in gaps[:40]:
        out |= {(g, g + 1), (0, g), (g, log_end), (max(g - 3, 0), g), (g, min(g + 5, log_end))}
    for _ in range(60):
        a = rng.randrange(log_end + 1)
        out.add((a, rng.randrange(a, log_end + 1)))
    return sorted(out)


@pytest.mark.parametrize("mode", ["direct", "network", "network-read_committed"])
def test_range_readers_read_gaps_without_data_loss(compacted, mode):
    from spark_kafkalog.readers.direct import DirectRangeReader
    from spark_kafkalog.readers.network import NetworkRangeReader
    broker, topic, model = compacted
    if mode == "direct":
        reader = DirectRangeReader(broker.log_dir, include_headers=False, max_bytes_per_batch=64 * 1024,
                                   fail_on_data_loss=True)
    else:
        params = {"bootstrap.servers": broker.bootstrap}
        if mode.endswith("read_committed"):
            params["isolation.level"] = "read_committed"
        reader = NetworkRangeReader(params, include_headers=False,
                                    max_bytes_per_batch=64 * 1024, fail_on_data_loss=True)
    rng = random.Random(7)
    for p in (0, 1):
        batches: list = []
        present = existing_offsets(broker.log_dir, topic, p, batches)
        log_end = max(model.records[p]) + 1
        assert len(present) < len(model.records[p]) - 20, "the cleaner removed records"
        # batches whose last records were cleaned away (their last offset stays): how many
        # there are depends on when the cleaner ran; the ranges below cover them when present
        assert present[-1] == log_end - 1, "the active segment keeps the last record"
        cut = [(base, last, recs) for base, last, recs in batches if recs and recs[-1] < last]
        extra = {(base, recs[-1] + 1) for base, _, recs in cut}            # ends inside the batch
        extra |= {(recs[-1] + 1, last + 1) for _, last, recs in cut}      # its removed tail only
        extra |= {(recs[0], recs[-1] + 1) for _, _, recs in cut}
        for a, b in sorted(set(_ranges(present, log_end, rng)) | extra):
            rows = [r for batch in reader.read(topic, p, a, b) for r in batch.to_pylist()]
            assert [r["offset"] for r in rows] == [o for o in present if a <= o < b], (p, a, b)
            for r in rows:
                assert (r["key"], r["value"]) == model.records[p][r["offset"]]


# --- Spark batch reads ---

def _read(spark, broker, topic: str, mode: str, **options):
    reader = spark.read.format("kafkalog").option("subscribe", topic)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    if mode == "direct":
        return reader.load(str(broker.log_dir))
    return reader.option("kafka.bootstrap.servers", broker.bootstrap).load()


@pytest.mark.parametrize("mode", ["direct", "network"])
def test_spark_reads_a_cleaned_topic_in_tiny_ranges(spark, compacted, mode):
    broker, topic, model = compacted
    present = {p: existing_offsets(broker.log_dir, topic, p) for p in (0, 1)}
    # pieces of 6 offsets: many hold no record at all, many end on a removed offset
    df = _read(spark, broker, topic, mode, failOnDataLoss="true", maxRecordsPerPartition=6)
    rows = df.select("partition", "offset", "key", "value").collect()
    assert sorted((r.partition, r.offset) for r in rows) == \
        sorted((p, o) for p in (0, 1) for o in present[p])
    for r in rows:
        assert (r.key, r.value) == model.records[r.partition][r.offset]
    latest: dict = {}
    for r in sorted(rows, key=lambda r: (r.partition, r.offset)):
        if r.value is None:
            latest.pop((r.partition, r.key), None)
        else:
            latest[(r.partition, r.key)] = r.value
    assert latest == model.latest()


@pytest.mark.parametrize("mode", ["direct", "network"])
def test_spark_ranges_ending_on_removed_offsets(spark, compacted, mode):
    """Explicit offsets that were removed by cleaning as the start and the end of a read."""
    import json
    broker, topic, model = compacted
    present = {p: existing_offsets(broker.log_dir, topic, p) for p in (0, 1)}
    bounds = {}
    for p in (0, 1):
        gone = [o for o in range(present[p][-1]) if o not in set(present[p])]
        bounds[p] = (gone[0], gone[len(gone) // 2])  # both removed
    start = json.dumps({topic: {str(p): s for p, (s, _) in bounds.items()}})
    end = json.dumps({topic: {str(p): e for p, (_, e) in bounds.items()}})
    rows = _read(spark, broker, topic, mode, startingOffsets=start, endingOffsets=end,
                 failOnDataLoss="true").select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        (p, o) for p in (0, 1) for o in present[p] if bounds[p][0] <= o < bounds[p][1])
    # a range wholly inside a gap: no rows, no error
    for p in (0, 1):
        gone = [o for o in range(present[p][-1]) if o not in set(present[p])]
        g = gone[-1]
        start = json.dumps({topic: {str(q): (g if q == p else 0) for q in (0, 1)}})
        end = json.dumps({topic: {str(q): (g + 1 if q == p else 0) for q in (0, 1)}})
        assert _read(spark, broker, topic, mode, startingOffsets=start, endingOffsets=end,
                     failOnDataLoss="true").count() == 0


# --- direct mode on a live broker: a directory listed in the middle of a segment swap ---

class _Crash(BaseException):
    """Stops the cleaner at a step of its segment swap, as a crash would (BaseException:
    the cleaner's own cleanup does not run), leaving the directory as a reader may list
    it at that moment."""


@pytest.mark.parametrize("step", ["swap", "delete"])
def test_direct_mode_lists_a_directory_in_the_middle_of_a_swap(tmp_path, step):
    """The cleaner renames ``.cleaned`` -> ``.swap``, the old segments -> ``.deleted``, then
    ``.swap`` -> ``.log``: a direct read listing the directory between those steps sees
    the cleaned segment under its ``.swap`` name and must read it (Kafka's recovery reads
    a ``.swap`` as the live segment), not miss its offsets nor report them lost."""
    from broker.log.cleaner.manager import CleanerConfig, LogCleaner
    from broker.log.config import LogConfig
    from broker.log.unified_log import UnifiedLog
    from broker.record.batch import encode_batch
    from spark_kafkalog.planning import check_range
    from spark_kafkalog.readers.direct import DirectOffsetReader, DirectRangeReader

    config = LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": 400,
                                   "min.cleanable.dirty.ratio": 0.01, "file.delete.delay.ms": 60000})
    root = tmp_path / "logs"
    ulog = UnifiedLog.create(root / "t-0", config)
    model = Model()
    now = int(time.time() * 1000)
    for i in range(40):
        key, value = b"k%d" % (i % 4), b"v%d" % i
        info = ulog.append_as_leader(encode_batch([(key, value, now)]))
        model.add(0, info.first_offset, key, value)
    ulog.roll()
    ulog.flush()

    def hook(name: str) -> None:
        if name == step:
            raise _Crash(name)

    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20, backoff_ms=1),
                         lambda: {("t", 0): ulog}, crash_hook=hook)
    with pytest.raises(_Crash):
        cleaner.do_one_cleaning()
    names = sorted(p.name for p in (root / "t-0").iterdir())
    assert any(n.endswith(".log.swap") for n in names), names
    try:
        offsets = DirectOffsetReader(root)
        earliest = offsets.earliest_offsets([("t", 0)])[("t", 0)]
        latest = offsets.latest_offsets([("t", 0)])[("t", 0)]
        offsets.close()
        assert (earliest, latest) == (0, 40)
        assert check_range(("t", 0), 0, 40, earliest, latest, True) == (0, 40)
        reader = DirectRangeReader(root, include_headers=False, max_bytes_per_batch=64 * 1024,
                                   fail_on_data_loss=True)
        rows = [r for b in reader.read("t", 0, 0, 40) for r in b.to_pylist()]
        got = [r["offset"] for r in rows]
        assert got == sorted(set(got)) and got[-1] == 39
        for r in rows:
            assert (r["key"], r["value"]) == model.records[0][r["offset"]]
        latest_seen = {}
        for r in rows:
            latest_seen[(0, r["key"])] = r["value"]
        assert latest_seen == model.latest()
        if step == "delete":
            assert len(rows) < 40  # the old segments are gone: the cleaned one was read
    finally:
        ulog.close()


# --- the snapshot read (kafkalog.snapshot) ---

def test_latest_by_key_matches_a_model():
    """``LatestByKey`` on random keys, updates, tombstones and keyless records, fed in
    batches of random sizes, with compactions forced often."""
    import pyarrow as pa

    from broker.record.columnar import arrow_schema
    from spark_kafkalog.snapshot import LatestByKey
    schema = arrow_schema(False)
    for seed in range(20):
        rng = random.Random(seed)
        records = []
        keys = rng.choice([1, 5, 50])
        for i in range(rng.randrange(0, 400)):
            key = None if rng.random() < 0.05 else b"k%d" % rng.randrange(keys)
            value = None if rng.random() < 0.2 else b"v%d" % i
            records.append({"offset": i * 2 + seed % 2, "timestamp": i, "timestamp_type": 0,
                            "key": key, "value": value})  # offsets with gaps, as after cleaning
        model: dict = {}
        for r in records:
            if r["key"] is None:
                continue
            if r["value"] is None:
                model.pop(r["key"], None)
            else:
                model[r["key"]] = r
        latest = LatestByKey(compact_rows=rng.choice([1, 4, 1000]))
        at = 0
        while at < len(records):
            n = rng.randrange(1, 40)
            latest.add(pa.RecordBatch.from_pylist(records[at:at + n], schema=schema))
            at += n
        got = [r for b in latest.rows(max_rows_per_batch=rng.choice([1, 7, 1000])) for r in b.to_pylist()]
        assert got == sorted(model.values(), key=lambda r: r["offset"]), seed
        assert len(latest.latest) == len(model)


def _snapshot(spark, broker, topic, mode, **options):
    df = _read(spark, broker, topic, mode, **{"kafkalog.snapshot": "true", **options})
    rows = df.collect()
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    got = {(r.partition, r.key): r.value for r in rows}
    assert len(got) == len(rows), "one row per key"
    return rows, got


@pytest.mark.parametrize("mode", ["direct", "network"])
def test_snapshot_of_a_cleaned_topic(spark, compacted, mode):
    broker, topic, model = compacted
    rows, got = _snapshot(spark, broker, topic, mode)
    assert got == model.latest()
    for r in rows:  # the winning record, all its columns
        assert r.topic == topic and (r.key, r.value) == model.records[r.partition][r.offset]


@pytest.fixture(scope="module")
def uncleaned(compacted):
    """A second compacted topic on the same broker, whose cleaner is off by now: every
    record (updates, tombstones) is still in the log."""
    broker, _, _ = compacted
    topic = f"uncleaned-{_uid()}"
    _create_topic(broker, topic, 2, CLEANED_CONFIG)
    model = Model()
    produce(broker, topic, model, random.Random(16), 300, keys=30, tombstones=0.25)
    return broker, topic, model


@pytest.mark.parametrize("mode", ["direct", "network"])
def test_snapshot_as_of_the_end_of_the_range(spark, uncleaned, mode):
    import json
    broker, topic, model = uncleaned
    for p in (0, 1):
        assert existing_offsets(broker.log_dir, topic, p) == sorted(model.records[p])
    rows, got = _snapshot(spark, broker, topic, mode)
    assert got == model.latest()
    # filters: on partition taken over (whole partitions); on offset applied to the
    # snapshot's rows, not to the records it is computed from (that would bring back the
    # older value of a key updated at or past the cut)
    from tests.support.spark import pushdown
    cut = max(r.offset for r in rows if r.partition == 0)
    key = next(r.key for r in rows if (r.partition, r.offset) == (0, cut))
    assert sum(1 for o, (k, _) in model.records[0].items() if k == key and o < cut), "an older value"
    for enabled in (False, True):
        with pushdown(spark, enabled):
            df = _read(spark, broker, topic, mode, **{"kafkalog.snapshot": "true"})
            one = df.where("partition = 1").collect()
            assert {(r.partition, r.key): r.value for r in one} == model.latest(partition=1)
            df = _read(spark, broker, topic, mode, **{"kafkalog.snapshot": "true"})
            early = df.where(f"partition = 0 AND offset < {cut}").collect()
            assert sorted(r.offset for r in early) == \
                sorted(r.offset for r in rows if r.partition == 0 and r.offset < cut)
    rng = random.Random(3)
    end = {p: rng.randrange(1, max(model.records[p]) + 1) for p in (0, 1)}
    _, got = _snapshot(spark, broker, topic, mode,
                       endingOffsets=json.dumps({topic: {str(p): e for p, e in end.items()}}))
    assert got == model.latest(end=end)


def test_snapshot_option_rules(spark, tmp_path):
    from spark_kafkalog.options import KafkaLogOptionError, parse_options
    base = {"subscribe": "t", "path": str(tmp_path)}
    assert parse_options({**base, "kafkalog.snapshot": "true"}).snapshot is True
    assert parse_options(base).snapshot is False
    with pytest.raises(KafkaLogOptionError, match="not valid in streaming queries"):
        parse_options({**base, "kafkalog.snapshot": "true"}, streaming=True)
    for option in ("minPartitions", "maxRecordsPerPartition"):
        with pytest.raises(KafkaLogOptionError, match="cannot be used with 'kafkalog.snapshot'"):
            parse_options({**base, "kafkalog.snapshot": "true", option: "4"})
    with pytest.raises(KafkaLogOptionError, match="kafkalog.snapshot: 'yes' is not valid; use true or false"):
        parse_options({**base, "kafkalog.snapshot": "yes"})


# --- streaming through cleaning ---

STREAM_CONFIG = {**CLEANED_CONFIG, "delete.retention.ms": "86400000"}  # tombstones stay readable


def _cleanings(broker, topic: str) -> int:
    return (broker.stdout_text() + broker.stderr_text()).count(f"cleaned log {topic}-")


def _stream(spark, broker, topic: str, mode: str, **options):
    reader = spark.readStream.format("kafkalog").option("subscribe", topic) \
        .option("startingOffsets", "earliest").option("failOnDataLoss", "true")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    if mode == "direct":
        return reader.load(str(broker.log_dir))
    return reader.option("kafka.bootstrap.servers", broker.bootstrap).load()


def _caught_up(q, want: dict[int, int], topic: str) -> bool:
    import json
    for p in q.recentProgress[::-1]:
        end = p["sources"][0]["endOffset"]
        if end:
            got = json.loads(end) if isinstance(end, str) else end
            return all(got.get(topic, {}).get(str(part)) == off for part, off in want.items())
    return False


def _check_increasing(q, topic: str) -> None:
    """Each micro-batch starts where the previous one ended, offsets never going back."""
    import json
    previous = None
    for p in q.recentProgress:
        src = p["sources"][0]
        if not src["endOffset"]:
            continue
        start = json.loads(src["startOffset"]) if src["startOffset"] else None
        end = json.loads(src["endOffset"])
        start = {k: v for k, v in (start or {}).get(topic, {}).items()}
        end = end.get(topic, {})
        if previous is not None:
            assert start == previous
        assert all(end[k] >= v for k, v in start.items())
        previous = end


def _delivered(spark, out: Path) -> list:
    return sorted((r.partition, r.offset, r.key, r.value) for r in
                   spark.read.parquet(str(out)).select("partition", "offset", "key", "value").collect())


def _check_delivered(rows: list, model: Model) -> None:
    """Each offset at most once, each row the record produced at its offset, and the
    rows folded in offset order give the latest value of every key."""
    assert len({(p, o) for p, o, _, _ in rows}) == len(rows), "an offset delivered twice"
    folded: dict = {}
    for p, o, k, v in rows:
        assert (k, v) == model.records[p][o]
        if v is None:
            folded.pop((p, k), None)
        else:
            folded[(p, k)] = v
    assert folded == model.latest()


@pytest.mark.parametrize("mode", ["direct", "network"])
def test_stream_reads_while_the_cleaner_compacts_behind(spark, broker_factory, tmp_path, mode):
    broker = broker_factory({"log.cleaner.backoff.ms": "20"})
    topic = f"stream-{_uid()}"
    _create_topic(broker, topic, 2, STREAM_CONFIG)
    model = Model()
    rng = random.Random(21)
    produce(broker, topic, model, rng, 100)
    out, chk = tmp_path / "out", tmp_path / "chk"
    q = (_stream(spark, broker, topic, mode, maxOffsetsPerTrigger=40)
         .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(chk))
         .trigger(processingTime="100 milliseconds").start())
    try:
        before = _cleanings(broker, topic)
        for _ in range(6):
            produce(broker, topic, model, rng, 80)
            want = {p: max(recs) + 1 for p, recs in model.records.items()}
            for _ in range(1200):  # bounded wait for the outcome
                assert q.exception() is None, q.exception()
                if _caught_up(q, want, topic):
                    break
                time.sleep(0.05)
            else:
                raise AssertionError(f"the query never reached {want}: {q.lastProgress}")
        assert q.exception() is None
        assert _cleanings(broker, topic) > before, "the cleaner compacted while the query ran"
    finally:
        q.stop()
    _check_increasing(q, topic)
    rows = _delivered(spark, out)
    _check_delivered(rows, model)


@pytest.mark.parametrize("mode", ["direct", "network"])
def test_stream_restarts_from_an_offset_removed_by_cleaning(spark, broker_factory, tmp_path, mode):
    """The checkpoint's next offset was removed by the cleaner (not retention) while the
    query was stopped: no data loss, the query goes on with the next offset that exists."""
    broker = broker_factory({"log.cleaner.backoff.ms": "20"})
    topic = f"restart-{_uid()}"
    _create_topic(broker, topic, 1, STREAM_CONFIG)
    model = Model()
    rng = random.Random(22)
    produce(broker, topic, model, rng, 50, partitions=1, keys=5, tombstones=0)
    out, chk = tmp_path / "out", tmp_path / "chk"

    def run() -> None:
        q = (_stream(spark, broker, topic, mode).writeStream.format("parquet")
             .option("path", str(out)).option("checkpointLocation", str(chk))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        assert q.exception() is None, q.exception()

    run()
    resume = max(model.records[0]) + 1  # where the checkpoint resumes
    first = _delivered(spark, out)
    assert first[-1][1] == resume - 1  # (the cleaner may have removed older ones already)
    # the next records all update the same few keys: the one at `resume` is superseded
    produce(broker, topic, model, rng, 150, partitions=1, keys=5, tombstones=0.1)
    for _ in range(1200):
        try:
            present = existing_offsets(broker.log_dir, topic, 0)
        except FileNotFoundError:  # a segment swapped under the listing: look again
            continue
        if resume not in present:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the cleaner never removed offset {resume}")
    from spark_kafkalog.readers.direct import DirectOffsetReader
    offsets = DirectOffsetReader(broker.log_dir)
    assert offsets.earliest_offsets([(topic, 0)])[(topic, 0)] <= resume, "cleaned, not deleted"
    offsets.close()
    run()
    rows = _delivered(spark, out)
    later = [o for _, o, _, _ in rows if o >= resume]
    assert later and later[0] > resume, "the query went on with the next existing offset"
    _check_delivered(rows, model)


# --- transactions: the cleaner removes aborted data (and later markers), leaving gaps ---

def test_cleaned_transactions_read_without_data_loss(spark, tmp_path):
    """Committed and aborted transactions on a compacted log, cleaned by the real cleaner
    (in-process: this broker has no transaction coordinator, so direct mode only): the
    aborted data and, past delete.retention.ms, their markers are removed, leaving gaps; a
    direct read returns the committed records that remain, with no data loss, folding to
    the latest value of every key."""
    from broker.log.cleaner.manager import CleanerConfig, LogCleaner
    from broker.record.batch import encode_batch
    from tests.support.spark import LogWriter
    writer = LogWriter(tmp_path / "logs", segment_bytes=400, cleanup_policy="compact",
                       min_cleanable_dirty_ratio=0.01, delete_retention_ms=0)
    model = Model()
    rng = random.Random(31)
    now = int(time.time() * 1000)
    for t in range(40):
        records = [(b"key-%d" % rng.randrange(6), b"txn-%d-%d" % (t, i), now) for i in range(3)]
        aborted = t % 3 == 2
        first, _ = writer.append("t", 0, records, producer_id=1000 + t, transactional=True,
                                 keep=not aborted)
        writer.end_txn("t", 0, 1000 + t, commit=not aborted, timestamp=now)
        if not aborted:
            for i, (key, value, _) in enumerate(records):
                model.add(0, first + i, key, value)
    ulog = writer.log("t", 0)
    ulog.roll()
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20, backoff_ms=1), lambda: {("t", 0): ulog})
    cleanings = 0
    while cleanings < 5 and cleaner.do_one_cleaning():
        cleanings += 1
        # a record and a roll: the next pass has a dirty segment, and the horizon moves
        ulog.append_as_leader(encode_batch([(b"key-0", b"filler-%d" % cleanings, now)]))
        model.add(0, ulog.log_end_offset - 1, b"key-0", b"filler-%d" % cleanings)
        ulog.roll()
    assert cleanings >= 2
    ulog.flush()
    present = existing_offsets(writer.root, "t", 0)
    assert len(present) < len(model.records[0]), "the cleaner removed committed records"
    assert set(present) <= set(model.records[0]), "and every aborted record"
    rows = spark.read.format("kafkalog").option("subscribe", "t").option("failOnDataLoss", "true") \
        .option("maxRecordsPerPartition", 4).load(str(writer.root)) \
        .select("partition", "offset", "key", "value").collect()
    delivered = sorted((r.partition, r.offset, r.key, r.value) for r in rows)
    _check_delivered(delivered, model)
    assert [o for _, o, _, _ in delivered] == [o for o in present if o in model.records[0]]
    writer.close()
