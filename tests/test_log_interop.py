"""Interoperability of the files the log writes (F10 for the storage engine):

- kafka-python's record reader (``kafka.record.MemoryRecords`` / ``DefaultRecordBatch``), an
  independent decoder, parses every ``.log`` file the log wrote, batch by batch, with valid
  CRCs and our offsets, timestamps, keys, values, leader epochs and producer fields, for
  every codec;
- the ``.index`` and ``.timeindex`` files are checked byte by byte against the entries
  derived from a scan of the ``.log`` (batch positions, last offsets, max timestamps) with
  Kafka's sparse rule: an entry for a batch that starts more than index.interval.bytes
  after the last indexed batch, a time entry only when the largest timestamp grew, the
  final time entry written when the segment rolls or closes. Inactive segments' indexes
  hold exactly their entries; the active one's tail is the preallocated zeros.
- the directory holds exactly Kafka's file names.
"""

from __future__ import annotations

import re
import struct

import pytest

from broker.log.clock import MockTime
from broker.log.config import LogConfig
from broker.log.scheduler import Scheduler
from broker.log.unified_log import UnifiedLog
from broker.record.batch import decode_batch, encode_batch, iter_batch_headers

CODECS = [0, 1, 2, 3, 4]  # none, gzip, snappy, lz4, zstd


def build_log(tmp_path, interval: int, segment_bytes: int = 2500) -> tuple[UnifiedLog, list]:
    time = MockTime()
    config = LogConfig.from_props({"segment.bytes": segment_bytes, "index.interval.bytes": interval,
                                   "segment.index.bytes": 4096})
    ulog = UnifiedLog.create(tmp_path / "interop-3", config, time=time, scheduler=Scheduler(time))
    written = []
    t0 = time.milliseconds() - 100_000
    for i in range(60):
        n = 1 + i % 4
        # timestamps mostly grow, sometimes go back (the time index only keeps growth)
        records = [(b"key-%d-%d" % (i, j), b"value-%d-%d" % (i, j) * (1 + i % 7), t0 + 100 * i - 250 * (i % 5 == 4) + j)
                   for j in range(n)]
        kw = {}
        if i % 3 == 0:
            kw = dict(producer_id=42, producer_epoch=1, base_sequence=sum(1 + k % 4 for k in range(i)
                                                                          if k % 3 == 0))
        info = ulog.append_as_leader(encode_batch(records, compression=CODECS[i % len(CODECS)], **kw),
                                     leader_epoch=1 + i // 20)
        written.extend((info.first_offset + j, r[0], r[1], r[2], 1 + i // 20) for j, r in enumerate(records))
    return ulog, written


def test_kafka_python_parses_every_segment_batch_by_batch(tmp_path):
    from kafka.record import MemoryRecords as KafkaMemoryRecords

    ulog, written = build_log(tmp_path, interval=512)
    ulog.close()
    assert ulog.num_segments > 2
    got = []
    for path in sorted((tmp_path / "interop-3").glob("*.log")):
        base = int(path.name.split(".")[0])
        records = KafkaMemoryRecords(path.read_bytes())
        first = True
        count = 0
        while (batch := records.next_batch()) is not None:
            count += 1
            assert batch.magic == 2 and batch.validate_crc()
            if first:
                assert batch.base_offset == base
                first = False
            epoch = batch.leader_epoch
            batch_records = list(batch)
            assert batch.last_offset == batch_records[-1].offset
            got.extend((r.offset, r.key, r.value, r.timestamp, epoch) for r in batch_records)
        assert count == len(list(iter_batch_headers(path.read_bytes()))) > 0
    assert got == written


def scan(path):
    """(position, size, last offset, max timestamp) of each batch of a .log."""
    data = path.read_bytes()
    return [(pos, h.size_in_bytes, h.last_offset, h.max_timestamp) for pos, h in iter_batch_headers(data)]


def expected_indexes(base: int, batches, interval: int, closed: bool) -> tuple[bytes, bytes]:
    index, time_index = [], []
    since_last = 0
    max_ts, max_ts_offset = -1, base
    last_time_entry = -1

    def maybe_time(ts, offset):
        nonlocal last_time_entry
        if ts > last_time_entry:
            time_index.append(struct.pack(">qi", ts, offset - base))
            last_time_entry = ts

    for pos, size, last_offset, ts in batches:
        if ts > max_ts:
            max_ts, max_ts_offset = ts, last_offset
        if since_last > interval:
            index.append(struct.pack(">ii", last_offset - base, pos))
            maybe_time(max_ts, max_ts_offset)
            since_last = 0
        since_last += size
    if closed:
        maybe_time(max_ts, max_ts_offset)
    return b"".join(index), b"".join(time_index)


@pytest.mark.parametrize("interval", [0, 700, 4096])
def test_index_files_match_a_scan_of_the_log_byte_by_byte(tmp_path, interval):
    ulog, _ = build_log(tmp_path, interval=interval)
    directory = tmp_path / "interop-3"
    segments = ulog.segments
    active = segments[-1]
    for seg in segments:
        batches = scan(seg.log.path)
        want_index, want_time = expected_indexes(seg.base_offset, batches, interval, seg is not active)
        index_bytes = seg.offset_index_file.read_bytes()
        time_bytes = seg.time_index_file.read_bytes()
        if seg is active:  # preallocated: entries, then zeros
            assert len(index_bytes) == 4096 and len(time_bytes) == 4092
            assert index_bytes[:len(want_index)] == want_index and not index_bytes[len(want_index):].strip(b"\0")
            assert time_bytes[:len(want_time)] == want_time and not time_bytes[len(want_time):].strip(b"\0")
        else:
            assert index_bytes == want_index
            assert time_bytes == want_time
        # every offset-index entry points at a batch start whose last offset it names
        starts = {pos: last for pos, _, last, _ in batches}
        for rel, pos in struct.iter_unpack(">ii", want_index):
            assert starts[pos] == seg.base_offset + rel
    ulog.close()
    # after a clean close the active segment's indexes are trimmed and get their final entry
    batches = scan(active.log.path)
    want_index, want_time = expected_indexes(active.base_offset, batches, interval, True)
    assert active.offset_index_file.read_bytes() == want_index
    assert active.time_index_file.read_bytes() == want_time
    names = sorted(p.name for p in directory.iterdir())
    pattern = re.compile(r"^\d{20}\.(log|index|timeindex|txnindex|snapshot)$")
    assert all(pattern.match(n) for n in names
               if n not in ("leader-epoch-checkpoint", "partition.metadata")), names
    assert "leader-epoch-checkpoint" in names
    assert (directory / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n2 {}\n3 {}\n".format(
        *[first for first in _epoch_starts(directory)])


def _epoch_starts(directory):
    """First offsets of the batches appended with leader epochs 2 and 3, from the logs."""
    starts = {}
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        for _pos, header in iter_batch_headers(data):
            starts.setdefault(header.partition_leader_epoch, header.base_offset)
    return [starts[2], starts[3]]


def test_recovered_log_reads_the_same_records_as_kafka_python(tmp_path):
    ulog, written = build_log(tmp_path, interval=300)
    ulog.close_handlers()
    time = MockTime()
    recovered = UnifiedLog.create(tmp_path / "interop-3", ulog.config, time=time, scheduler=Scheduler(time),
                                  last_shutdown_clean=False, recovery_point=0)
    got = []
    offset = 0
    while offset < recovered.log_end_offset:
        data = recovered.read(offset, 10_000).records.read_bytes()
        for pos, header in iter_batch_headers(data):
            got.extend((r.offset, r.key, r.value, r.timestamp, header.partition_leader_epoch)
                       for r in decode_batch(data, pos)[1])
            offset = header.next_offset
    assert got == written
    recovered.close()
