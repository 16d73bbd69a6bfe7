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
  and a query restarted from a checkpoint whose offset was removed by cleaning.

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
            keys: int = 12, tombstones: float = 0.15) -> None:
    """``n`` records with random keys (one per batch: a batch larger than the 1 KiB
    segments would be refused), every value unique, some tombstones."""
    import confluent_kafka as ck
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                            "batch.num.messages": 1})
    errors: list = []

    def delivered(err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            model.add(msg.partition(), msg.offset(), msg.key(), msg.value())

    for i in range(n):
        key = b"key-%d" % rng.randrange(keys)
        value = None if rng.random() < tombstones else b"value-%d-%s" % (i, _uid().encode())
        producer.produce(topic, key=key, value=value, partition=rng.randrange(partitions),
                         on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0 and errors == []


def wait_cleaned(broker, topic: str, partitions: int, times: int = 1) -> None:
    """Wait (bounded) until the broker logged ``times`` cleanings of every partition."""
    for _ in range(600):
        text = broker.stdout_text() + broker.stderr_text()
        if all(text.count(f"cleaned log {topic}-{p}") >= times for p in range(partitions)):
            return
        time.sleep(0.05)
    raise AssertionError(f"the broker's cleaner never cleaned {topic} {times} time(s)")


def existing_offsets(log_dir: Path, topic: str, partition: int) -> list[int]:
    """The offsets of the data records in the partition's files (control records left out)."""
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
        produce(broker, topic, model, random.Random(15), 400)
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


@pytest.mark.parametrize("mode", ["direct", "network"])
def test_range_readers_read_gaps_without_data_loss(compacted, mode):
    from spark_kafkalog.readers.direct import DirectRangeReader
    from spark_kafkalog.readers.network import NetworkRangeReader
    broker, topic, model = compacted
    if mode == "direct":
        reader = DirectRangeReader(broker.log_dir, include_headers=False, max_bytes_per_batch=64 * 1024,
                                   fail_on_data_loss=True)
    else:
        reader = NetworkRangeReader({"bootstrap.servers": broker.bootstrap}, include_headers=False,
                                    max_bytes_per_batch=64 * 1024, fail_on_data_loss=True)
    rng = random.Random(7)
    for p in (0, 1):
        present = existing_offsets(broker.log_dir, topic, p)
        log_end = max(model.records[p]) + 1
        assert len(present) < len(model.records[p]) - 20, "the cleaner removed records"
        assert present[-1] == log_end - 1, "the active segment keeps the last record"
        for a, b in _ranges(present, log_end, rng):
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
    # pieces of 3 offsets: most hold no record at all, many end on a removed offset
    df = _read(spark, broker, topic, mode, failOnDataLoss="true", maxRecordsPerPartition=3)
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
