"""A Kafka log directory holding legacy message sets is served fully, end to end (R17,
KIP-724: Kafka 4 stopped writing magic 0 and 1, never reading them).

The directory (``tests/support/legacy_logdir.py``) is written by an independent encoder,
kafka-python's record builders, as a Kafka broker stored what producers sent: magic 0 and
magic 1 messages, plain and in gzip, snappy and lz4 wrappers (absolute inner offsets at
magic 0, relative at magic 1, the wrapper carrying the last offset and, at magic 1, the
largest timestamp or the broker's LogAppendTime), then RecordBatch v2 (every codec, zstd
included), null keys and values, several segments and partitions, about 2400 records, and
nothing else: no index, no checkpoint, no meta.properties, no clean-shutdown marker (the
topics are adopted from their partition directories, ``broker/server/metadata.py``).

One real broker (``python -m broker``) starts on it for the whole module; then:

* recovery truncates nothing (no "Truncated" in the broker's output), every ``.log`` keeps
  its bytes, and the ``.index`` / ``.timeindex`` files are rebuilt with exactly the entries
  Kafka's recovery derives from the entries' positions, last offsets and timestamps;
* librdkafka (confluent-kafka) and kafka-python consumers read every record from offset 0
  of each partition with its offset, key, value and timestamp (type and value; magic 0
  has none, a LogAppendTime wrapper's records carry the wrapper's time);
* ListOffsets by timestamp (librdkafka's offsets_for_times) lands on the right record
  inside magic 1 wrappers, skips magic 0 records (no timestamp), finds LogAppendTime
  entries;
* DeleteRecords to an offset inside a magic 0 and a magic 1 wrapper: consumers from the
  earliest offset get exactly the records from that offset on, before and after a clean
  restart of the broker (which truncates nothing either);
* ``kafkalog dump-log --print-data-log`` prints every entry and every record offset;
* Spark in direct mode reads the same directory (a copy taken before the broker started,
  and the broker's own directory from offsets inside wrappers, and by timestamp).
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import time
from pathlib import Path
from typing import NamedTuple

import confluent_kafka
import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.record import MemoryRecords

from broker.record.entries import iter_entry_headers
from spark_kafkalog.cli.main import main
from tests.support.broker import BrokerProcess
from tests.support.legacy_logdir import (
    CODEC_NAMES,
    CREATE_TIME,
    GZIP,
    LEGACY_TOPIC,
    LOG_APPEND_TIME,
    LZ4,
    NONE,
    SNAPPY,
    T0,
    TRIM_TOPIC,
    ZSTD,
    LegacyLogDir,
    PartitionWriter,
    Rec,
    Segment,
    write_legacy_logdir,
)

INDEX_INTERVAL = 1024  # log.index.interval.bytes: several index entries per segment
OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position
TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
LEGACY_PARTITIONS = [(LEGACY_TOPIC, p) for p in range(3)]


class Started(NamedTuple):
    broker: BrokerProcess
    written: LegacyLogDir
    pristine: Path  # a copy of the directory taken before the broker started
    files_at_start: dict[str, bytes]  # every written .log, read right after startup


@pytest.fixture(scope="module")
def legacy(tmp_path_factory) -> Started:
    workdir = tmp_path_factory.mktemp("legacy-dir")
    written = write_legacy_logdir(workdir / "kafka-logs")  # BrokerProcess's log.dirs
    pristine = workdir / "pristine"
    shutil.copytree(written.root, pristine)
    broker = BrokerProcess(workdir, {"log.index.interval.bytes": str(INDEX_INTERVAL)}, name="legacy")
    broker.start()
    try:
        at_start = {name: (written.root / name).read_bytes() for name in written.files()}
        yield Started(broker, written, pristine, at_start)
    finally:
        code = broker.stop()
    assert code == 0, broker.stderr_text()[-3000:]


# --- the independent writer ----------------------------------------------------------------

def test_the_directory_is_what_a_kafka_broker_stored(legacy):
    """kafka-python's reader reads every written segment back to the expected records,
    every CRC valid; the layout covers every magic and codec, several segments and
    partitions, null keys and values, and holds nothing but .log files."""
    written = legacy.written
    kinds = set()
    for writer in written.partitions.values():
        got = []
        assert len([s for s in writer.segments if s.data]) >= 2
        for segment in writer.segments:
            records = MemoryRecords(bytes(segment.data))
            while (batch := records.next_batch()) is not None:
                assert batch.validate_crc()
                got.extend((r.offset, r.key, r.value, r.timestamp) for r in batch)
            kinds.update((e.magic, e.codec) for e in segment.entries)
        assert got == [(r.offset, r.key, r.value, r.timestamp) for r in writer.records]
    assert kinds >= {(m, c) for m in (0, 1) for c in (NONE, GZIP, SNAPPY, LZ4)} | {(2, c) for c in (NONE, ZSTD)}
    records = written.records
    assert len(records) > 2000
    assert any(r.key is None for r in records) and any(r.value is None for r in records)
    assert {r.timestamp_type for r in records} == {None, CREATE_TIME, LOG_APPEND_TIME}
    assert sorted(p.name for p in legacy.pristine.rglob("*") if p.is_file()) == \
        sorted(name.split("/")[1] for name in written.files())


# --- recovery ------------------------------------------------------------------------------

def test_recovery_truncates_nothing_and_keeps_every_log_byte(legacy):
    """R17: no recovery truncates; every .log file keeps its exact size and bytes."""
    broker, written = legacy.broker, legacy.written
    output = broker.stdout_text() + broker.stderr_text()
    assert "Truncated" not in output, [line for line in output.splitlines() if "Truncated" in line]
    assert "Traceback" not in output
    expected = written.files()
    assert legacy.files_at_start == expected
    for name, data in expected.items():
        if name.startswith(f"{LEGACY_TOPIC}-"):  # the trim partitions may lose segments to DeleteRecords
            assert (written.root / name).read_bytes() == data, name
    topics = json.loads((written.root / "kafkalog-topics.json").read_text())["topics"]
    assert {t: v["partitions"] for t, v in topics.items()} == {LEGACY_TOPIC: 3, TRIM_TOPIC: 2}


def expected_index_entries(segment: Segment, interval: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The (relative offset, position) and (timestamp, relative offset) entries Kafka's
    LogSegment.recover derives: an offset entry (the entry's last offset) for each entry
    starting more than ``interval`` bytes after the last indexed one, a time entry beside it
    when the largest timestamp grew, and a last time entry for the largest timestamp."""
    base = segment.base_offset
    offsets, times = [], []
    last_indexed, max_ts, max_ts_offset, time_last = 0, -1, base, -1
    for entry in segment.entries:
        if entry.max_timestamp > max_ts:
            max_ts, max_ts_offset = entry.max_timestamp, entry.last_offset
        if entry.position - last_indexed > interval:
            offsets.append((entry.last_offset - base, entry.position))
            if max_ts > time_last:
                times.append((max_ts, max_ts_offset - base))
                time_last = max_ts
            last_indexed = entry.position
    if max_ts > time_last:
        times.append((max_ts, max_ts_offset - base))
    return offsets, times


def index_entries(path: Path, entry: struct.Struct) -> list[tuple[int, int]]:
    """The entries of an index file, without the active segment's preallocated zeros (an
    all-zero entry is never a real one: the first entry is past index.interval.bytes)."""
    data = path.read_bytes()
    return [e for e in entry.iter_unpack(data[:len(data) - len(data) % entry.size]) if e != (0, 0)]


def test_indexes_are_rebuilt_from_the_legacy_entries(legacy):
    written = legacy.written
    checked = 0
    for writer in written.partitions.values():
        directory = written.root / f"{writer.topic}-{writer.partition}"
        for segment in writer.segments:
            stem = directory / segment.name.removesuffix(".log")
            offset_index, time_index = stem.with_suffix(".index"), stem.with_suffix(".timeindex")
            assert offset_index.exists() and time_index.exists(), stem
            offsets, times = expected_index_entries(segment, INDEX_INTERVAL)
            where = f"{writer.topic}-{writer.partition}/{segment.name}"
            assert index_entries(offset_index, OFFSET_ENTRY) == offsets, where
            assert index_entries(time_index, TIME_ENTRY) == times, where
            if any(e.position > INDEX_INTERVAL for e in segment.entries):  # an entry past the interval
                assert offsets and offset_index.stat().st_size > 0, where
                if any(e.magic > 0 for e in segment.entries):
                    assert times and time_index.stat().st_size > 0, where
                checked += 1
    assert checked >= 10


# --- consumers -----------------------------------------------------------------------------

CK_TIMESTAMP_TYPES = {None: confluent_kafka.TIMESTAMP_NOT_AVAILABLE, CREATE_TIME: confluent_kafka.TIMESTAMP_CREATE_TIME,
                      LOG_APPEND_TIME: confluent_kafka.TIMESTAMP_LOG_APPEND_TIME}


def ck_expected(records: list[Rec]) -> list[tuple]:
    """librdkafka's view: a magic 0 message has (TIMESTAMP_NOT_AVAILABLE, 0)."""
    return [(r.topic, r.partition, r.offset, r.key, r.value,
             (CK_TIMESTAMP_TYPES[r.timestamp_type], 0 if r.timestamp is None else r.timestamp)) for r in records]


def ck_consume(bootstrap: str, tps: list[TopicPartition], client_id: str, timeout: float = 60.0) -> list[tuple]:
    """Every message of ``tps`` up to their end (partition EOF), as ck_expected's tuples."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": client_id, "client.id": client_id,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True})
    got, at_end = [], set()
    try:
        consumer.assign(tps)
        deadline = time.monotonic() + timeout
        while len(at_end) < len(tps):
            assert time.monotonic() < deadline, f"{len(got)} messages, at the end of {at_end}"
            for m in consumer.consume(1000, 0.5):
                if m.error() is not None:
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    at_end.add((m.topic(), m.partition()))
                    continue
                got.append((m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.timestamp()))
    finally:
        consumer.close()
    return sorted(got, key=lambda g: (g[0], g[1], g[2]))


def kp_expected(records: list[Rec]) -> list[tuple]:
    return [(r.topic, r.partition, r.offset, r.key, r.value, r.timestamp, r.timestamp_type) for r in records]


def kp_consume(bootstrap: str, start: dict[tuple[str, int], int | None], client_id: str,
               timeout: float = 60.0) -> list[tuple]:
    """Every record of each (topic, partition) from ``start`` (None: the beginning) to the
    end offset, as kp_expected's tuples."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id=client_id, group_id=None,
                             enable_auto_commit=False)
    got = []
    try:
        tps = [KafkaTopicPartition(t, p) for t, p in start]
        consumer.assign(tps)
        for tp in tps:
            if start[(tp.topic, tp.partition)] is None:
                consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, start[(tp.topic, tp.partition)])
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"{len(got)} records"
            for records in consumer.poll(500).values():
                got.extend((r.topic, r.partition, r.offset, r.key, r.value, r.timestamp,
                            r.timestamp_type) for r in records)
    finally:
        consumer.close()
    return sorted(got, key=lambda g: (g[0], g[1], g[2]))


def test_confluent_consumer_reads_every_record(legacy):
    records = [r for tp in LEGACY_PARTITIONS for r in legacy.written.of(*tp)]
    got = ck_consume(legacy.broker.bootstrap, [TopicPartition(t, p, 0) for t, p in LEGACY_PARTITIONS], "legacy-ck")
    assert len(got) == len(records)
    assert got == ck_expected(records)


def test_kafka_python_consumer_reads_every_record(legacy):
    records = [r for tp in LEGACY_PARTITIONS for r in legacy.written.of(*tp)]
    got = kp_consume(legacy.broker.bootstrap, {tp: 0 for tp in LEGACY_PARTITIONS}, "legacy-kp")
    assert len(got) == len(records)
    assert got == kp_expected(records)


# --- ListOffsets by timestamp ----------------------------------------------------------------

def first_at_or_after(records: list[Rec], target: int) -> int:
    """Kafka's answer: the first offset whose timestamp is at least ``target``, else -1."""
    return next((r.offset for r in records if r.timestamp is not None and r.timestamp >= target), -1)


def test_offsets_for_times_in_magic_1_wrappers(legacy):
    records = legacy.written.of(LEGACY_TOPIC, 1)
    by_offset = {r.offset: r for r in records}
    wrapped = [e for s in legacy.written.partitions[(LEGACY_TOPIC, 1)].segments for e in s.entries
               if e.codec != NONE and e.magic == 1]
    middle = [e.first_offset + (e.last_offset - e.first_offset) // 2 for e in wrapped[:6]]
    appended = [r for r in records if r.timestamp_type == LOG_APPEND_TIME]
    lat_wrapper_ts = appended[0].timestamp
    targets = ([T0 - 1, T0]
               + [by_offset[o].timestamp for o in middle]  # a record inside a wrapper
               + [by_offset[o].timestamp - 3 for o in middle[::2]]  # between two records
               + [lat_wrapper_ts, lat_wrapper_ts + 1, records[-1].timestamp, records[-1].timestamp + 1])
    expected = [first_at_or_after(records, ts) for ts in targets]
    assert expected[2:2 + len(middle)] == middle and expected[-1] == -1
    assert expected[2 + len(middle) + 3] == appended[0].offset
    # partition 2: magic 0 (no timestamps) until a v2 batch
    records_2 = legacy.written.of(LEGACY_TOPIC, 2)
    first_v2 = next(r.offset for r in records_2 if r.magic == 2)
    consumer = Consumer({"bootstrap.servers": legacy.broker.bootstrap, "group.id": "legacy-times",
                         "client.id": "legacy-times"})
    try:
        found = [consumer.offsets_for_times([TopicPartition(LEGACY_TOPIC, 1, ts)], 10)[0] for ts in targets]
        assert [tp.error for tp in found] == [None] * len(targets)
        assert [tp.offset for tp in found] == expected
        (on_2,) = consumer.offsets_for_times([TopicPartition(LEGACY_TOPIC, 2, T0)], 10)
        assert on_2.offset == first_v2 == first_at_or_after(records_2, T0) > 0
    finally:
        consumer.close()


# --- DeleteRecords ---------------------------------------------------------------------------

def test_delete_records_into_the_middle_of_a_wrapper(legacy):
    """trim-0: a magic 0 gzip wrapper at 80..99 (second segment); trim-1: a magic 1 lz4
    wrapper at 20..39 (first segment). After DeleteRecords to 90 and 27, consumers from the
    earliest offset get exactly the records from there on (the broker serves the whole
    wrapper, the clients drop the records below their fetch offset), also after a clean
    restart. The other tests read the broker's address when they run: the restart is
    harmless to them."""
    written, bootstrap = legacy.written, legacy.broker.bootstrap
    targets = {(TRIM_TOPIC, 0): 90, (TRIM_TOPIC, 1): 27}
    for (topic, p), offset in targets.items():
        (entry,) = [e for s in written.partitions[(topic, p)].segments for e in s.entries
                    if e.first_offset < offset <= e.last_offset]
        assert entry.codec != NONE and entry.magic == p
    records = [r for tp in targets for r in written.of(*tp)]
    # everything is there before
    assert ck_consume(bootstrap, [TopicPartition(t, p, 0) for t, p in targets], "trim-before") == ck_expected(records)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(t, p, o) for (t, p), o in targets.items()])
    for tp, future in futures.items():
        assert future.result(30).low_watermark == targets[(tp.topic, tp.partition)]
    kept = [r for r in records if r.offset >= targets[(r.topic, r.partition)]]
    got = ck_consume(bootstrap, [TopicPartition(t, p, confluent_kafka.OFFSET_BEGINNING) for t, p in targets],
                     "trim-after-ck")
    assert got == ck_expected(kept)
    assert kp_consume(bootstrap, dict.fromkeys(targets), "trim-after-kp") == kp_expected(kept)
    assert watermarks(bootstrap, targets) == {tp: (o, written.partitions[tp].next_offset) for tp, o in targets.items()}
    # a clean restart (the shutdown marker, the log-start-offset checkpoint) keeps it all
    broker = legacy.broker
    broker.restart()
    assert "Truncated" not in broker.stdout_text() + broker.stderr_text()
    assert watermarks(broker.bootstrap, targets) == \
        {tp: (o, written.partitions[tp].next_offset) for tp, o in targets.items()}
    got = ck_consume(broker.bootstrap, [TopicPartition(t, p, confluent_kafka.OFFSET_BEGINNING) for t, p in targets],
                     "trim-restarted-ck")
    assert got == ck_expected(kept)
    for name, data in written.files().items():
        if name.startswith(f"{LEGACY_TOPIC}-"):
            assert (written.root / name).read_bytes() == data, name


def watermarks(bootstrap: str, tps) -> dict[tuple[str, int], tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "legacy-marks"})
    try:
        return {(t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10) for t, p in tps}
    finally:
        consumer.close()


# --- kafkalog dump-log ----------------------------------------------------------------------

RECORD_LINE = re.compile(r"^\| offset: (\d+) (\w+): (-?\d+) keySize: (-?\d+) valueSize: (-?\d+) .*?"
                         r"(?: key: (\S*))?(?: payload: (\S*))?$")
ENTRY_LINE = re.compile(r"^(offset|baseOffset): (\d+) ")


def test_dump_log_prints_every_entry_and_offset(legacy, capsys):
    written = legacy.written
    for topic, p in [(LEGACY_TOPIC, 0), (LEGACY_TOPIC, 2), (TRIM_TOPIC, 1)]:
        writer = written.partitions[(topic, p)]
        logs = [str(written.root / f"{topic}-{p}" / s.name) for s in writer.segments]
        assert main(["dump-log", "--print-data-log", "--files", *logs]) == 0
        out, err = capsys.readouterr()
        assert err == "" and "invalid bytes" not in out
        lines = out.splitlines()
        entries = [line for line in lines if ENTRY_LINE.match(line)]
        expected_entries = [e for s in writer.segments for e in s.entries]
        assert len(entries) == len(expected_entries)
        for line, entry in zip(entries, expected_entries):
            fields = dict(re.findall(r"(\w+): (\S+)", line))
            if entry.magic == 2:
                assert (fields["baseOffset"], fields["lastOffset"]) == (str(entry.first_offset), str(entry.last_offset))
            else:
                assert fields["offset"] == str(entry.last_offset), line  # a legacy entry: its last offset
            assert (fields["magic"], fields["compresscodec"], fields["isvalid"]) == \
                (str(entry.magic), CODEC_NAMES[entry.codec], "true"), line
            assert fields["position"] == str(entry.position), line
        printed = []
        for line in lines:
            if line.startswith("| offset: "):
                m = RECORD_LINE.match(line)
                assert m, line
                offset, ts_type, ts, key_size, value_size, key, value = m.groups()
                printed.append((int(offset), ts_type, int(ts), None if key_size == "-1" else key.encode(),
                                None if value_size == "-1" else value.encode()))
        types = {None: "NoTimestampType", CREATE_TIME: "CreateTime", LOG_APPEND_TIME: "LogAppendTime"}
        assert printed == [(r.offset, types[r.timestamp_type], -1 if r.timestamp is None else r.timestamp,
                            r.key, r.value) for r in writer.records]


# --- Spark, direct mode ------------------------------------------------------------------------

def spark_rows(df) -> list[tuple]:
    rows = df.selectExpr("topic", "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts",
                         "timestampType").collect()
    return sorted((r.topic, r.partition, r.offset, r.key, r.value, r.ts, r.timestampType) for r in rows)


def spark_expected(records: list[Rec]) -> list[tuple]:
    """Spark's Kafka source: a record without a timestamp has -1 (ms) and type -1."""
    return sorted((r.topic, r.partition, r.offset, r.key, r.value, -1 if r.timestamp is None else r.timestamp,
                   -1 if r.timestamp_type is None else r.timestamp_type) for r in records)


def test_spark_direct_mode_reads_the_directory(spark, legacy):
    written = legacy.written
    # the copy taken before the broker started (no index files): every record
    df = spark.read.format("kafkalog").option("subscribe", f"{LEGACY_TOPIC},{TRIM_TOPIC}").load(str(legacy.pristine))
    assert spark_rows(df) == spark_expected(written.records)
    # the broker's own directory (rebuilt indexes), from and to offsets inside wrappers
    starts, ends = {0: 75, 1: 63, 2: 100}, {0: 333, 1: 500, 2: 560}
    df = (spark.read.format("kafkalog").option("subscribe", LEGACY_TOPIC)
          .option("startingOffsets", json.dumps({LEGACY_TOPIC: {str(p): o for p, o in starts.items()}}))
          .option("endingOffsets", json.dumps({LEGACY_TOPIC: {str(p): o for p, o in ends.items()}}))
          .load(str(written.root)))
    assert spark_rows(df) == spark_expected(
        [r for tp in LEGACY_PARTITIONS for r in written.of(*tp) if starts[r.partition] <= r.offset < ends[r.partition]])
    # by timestamp: inside a magic 1 wrapper; past the magic 0 records of partition 2
    records_1 = written.of(LEGACY_TOPIC, 1)
    target = records_1[107].timestamp - 3
    df = (spark.read.format("kafkalog").option("assign", json.dumps({LEGACY_TOPIC: [1, 2]}))
          .option("startingOffsetsByTimestamp", json.dumps({LEGACY_TOPIC: {"1": target, "2": T0}}))
          .load(str(written.root)))
    first_v2 = next(r.offset for r in written.of(LEGACY_TOPIC, 2) if r.magic == 2)
    assert spark_rows(df) == spark_expected([r for r in records_1 if r.offset >= 107]
                                            + [r for r in written.of(LEGACY_TOPIC, 2) if r.offset >= first_v2])


# --- compaction of a legacy partition ---------------------------------------------------------

class KeyedWriter(PartitionWriter):
    """A compacted topic's partition: 13 keys overwritten over and over, no null key."""

    def _content(self, offset: int) -> tuple[bytes | None, bytes | None, int]:
        return b"key-%d" % (offset % 13), b"value-%d" % offset, T0 + 10 * offset


def test_compaction_rewrites_a_legacy_partition_as_v2_and_clients_read_it(tmp_path):
    """The broker's log cleaner on a partition of legacy sets (every magic and codec over
    three segments, a v2 active segment): the cleaned segments hold v2 batches only
    (KIP-724), and confluent-kafka and kafka-python read the latest record of each key
    with its original offset, value and timestamp."""
    w = KeyedWriter("compacted", 0)
    for magic in (0, 1):
        w.legacy(magic, NONE, 30)
        for codec in (GZIP, SNAPPY, LZ4):
            w.legacy(magic, codec, 25)
        w.roll()
    w.v2(GZIP, 20)
    w.roll()
    w.v2(NONE, 5)  # the active segment: never cleaned
    workdir = tmp_path / "broker"
    w.write(workdir / "kafka-logs")
    broker = BrokerProcess(workdir, {"log.cleanup.policy": "compact", "log.cleaner.backoff.ms": "20",
                                     "log.cleaner.min.cleanable.ratio": "0.01"}, name="legacy-compact")
    broker.start()
    try:
        tp = [TopicPartition("compacted", 0, 0)]
        active_base = w.segments[-1].base_offset
        latest = {r.key: r for r in w.records if r.offset < active_base}
        expected = sorted({r.offset: r for r in list(latest.values()) + [r for r in w.records
                                                                         if r.offset >= active_base]}.values(),
                          key=lambda r: r.offset)
        got: list = []
        # Wait for the outcome (bounded), not for a time. The cleaner swaps one group of
        # segments at a time, so a read that overlaps a swap legitimately sees some groups
        # as written and others cleaned: read again until the whole log is the cleaned one.
        for _ in range(600):
            got = ck_consume(broker.bootstrap, tp, "legacy-compact")
            if [(o, k, v) for _, _, o, k, v, _ in got] == [(r.offset, r.key, r.value) for r in expected]:
                break
            time.sleep(0.05)
        assert [(o, k, v) for _, _, o, k, v, _ in got] == [(r.offset, r.key, r.value) for r in expected]
        by_offset = {r.offset: r for r in expected}
        for _, _, offset, _, _, (_, ts) in got:
            if by_offset[offset].timestamp is not None:  # magic 0 has none
                assert ts == by_offset[offset].timestamp
        kp = kp_consume(broker.bootstrap, {("compacted", 0): 0}, "legacy-compact-kp")
        assert [(o, k, v) for _, _, o, k, v, _, _ in kp] == [(r.offset, r.key, r.value) for r in expected]
        # the cleaned segments are v2 only; the untouched active one is as written
        directory = workdir / "kafka-logs" / "compacted-0"
        for path in sorted(directory.glob("*.log")):
            data = path.read_bytes()
            magics = {data[pos + 16] for pos, _ in iter_entry_headers(data)}
            assert magics <= {2}, (path.name, magics)
        assert "cleaned log compacted-0" in broker.stdout_text() + broker.stderr_text()
        assert "Truncated" not in broker.stdout_text() + broker.stderr_text()
    finally:
        assert broker.stop() == 0
