"""Tests of broker/log/unified_log.py and broker/log/local_log.py: leader appends, reads by
isolation level, ListOffsets, boundaries (log start offset, HW, LSO, recovery point),
rolling (segment.bytes, segment.ms + jitter, full index, R16), retention, DeleteRecords,
the flush policy, I/O errors taking the log dir offline, truncation (R12), transactions
(R13) and idempotence (I1, I2, I4, I7) at the log level. MockTime everywhere."""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import pytest

from broker.log import files
from broker.log.clock import MockTime
from broker.log.config import LogConfig
from broker.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    LogOffsetOutOfRangeError,
    OffsetOverflowError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordListTooLargeError,
)
from broker.log.scheduler import Scheduler
from broker.log.txn_index import AbortedTxn
from broker.log.unified_log import (
    EARLIEST_TIMESTAMP,
    HIGH_WATERMARK,
    LATEST_TIMESTAMP,
    LOG_END,
    MAX_TIMESTAMP,
    TXN_COMMITTED,
    UnifiedLog,
)
from broker.log.validator import AppendOrigin
from broker.record import batch as rb
from broker.record.batch import decode_batch, encode_batch, ensure_valid, iter_batch_headers
from broker.record.control import ControlRecordType, encode_end_txn_marker_batch

INT32_MAX = 2**31 - 1


def config(**props) -> LogConfig:
    return LogConfig.from_props({k.replace("_", "."): v for k, v in props.items()})


class Env:
    """A log directory with a MockTime and a deterministic scheduler."""

    def __init__(self, tmp_path: Path, **props) -> None:
        self.time = MockTime()
        self.scheduler = Scheduler(self.time)
        self.dir = tmp_path / "topic-0"
        self.config = config(**props)

    def open(self, **kw) -> UnifiedLog:
        kw.setdefault("config", self.config)
        cfg = kw.pop("config")
        return UnifiedLog.create(self.dir, cfg, time=self.time, scheduler=self.scheduler, **kw)

    def batch(self, *values, ts=None, key=None, **kw) -> bytes:
        ts = self.time.milliseconds() if ts is None else ts
        return encode_batch([(key, v, ts) for v in values], **kw)


def read_records(ulog: UnifiedLog, start: int = 0, isolation: str = LOG_END):
    """(offset, value, timestamp) of every record from ``start`` up to the bound."""
    out = []
    offset = start
    while True:
        info = ulog.read(offset, 1 << 20, isolation)
        data = info.records.read_bytes()
        if not data:
            return out
        for pos, header in iter_batch_headers(data):
            _, records = decode_batch(data, pos)
            out.extend((r.offset, r.value, r.timestamp) for r in records if r.offset >= start)
            offset = header.next_offset
        if offset >= ulog.log_end_offset:
            return out


# --- append and read ---

def test_append_assigns_contiguous_offsets_and_reads_whole_batches(tmp_path):
    env = Env(tmp_path)
    ulog = env.open()
    first = ulog.append_as_leader(env.batch(b"a", b"b", b"c"), leader_epoch=3)
    second = ulog.append_as_leader(bytearray(env.batch(b"d")), leader_epoch=3)
    assert (first.first_offset, first.last_offset, second.first_offset) == (0, 2, 3)
    assert ulog.log_end_offset == 4 and ulog.high_watermark == 4 and ulog.last_stable_offset == 4
    assert [r[1] for r in read_records(ulog)] == [b"a", b"b", b"c", b"d"]
    # reading from the middle of a batch returns the whole batch containing the offset
    info = ulog.read(1, 10, LOG_END, min_one_message=True)
    headers = list(iter_batch_headers(info.records.read_bytes()))
    assert headers[0][1].base_offset == 0 and info.first_entry_incomplete is False
    assert info.records.size_in_bytes >= headers[0][1].size_in_bytes > 10  # at least one batch
    assert info.fetch_offset_metadata.relative_position_in_segment == 0
    assert ulog.read(1, 10, LOG_END, min_one_message=False).records.size_in_bytes == 10
    assert ulog.read(4, 100).records.size_in_bytes == 0
    with pytest.raises(LogOffsetOutOfRangeError):
        ulog.read(5, 100)
    # every stored batch carries the leader epoch and a valid CRC
    data = ulog.active_segment.log.path.read_bytes()
    for pos, header in iter_batch_headers(data):
        ensure_valid(data, pos)
        assert header.partition_leader_epoch == 3
    assert ulog.leader_epoch_cache.epoch_entries() == [(3, 0)]
    ulog.close()


def test_i12_invalid_batches_append_nothing(tmp_path):
    env = Env(tmp_path, max_message_bytes=200)
    ulog = env.open()
    ulog.append_as_leader(env.batch(b"ok"))
    control = encode_end_txn_marker_batch(ControlRecordType.COMMIT, producer_id=1, producer_epoch=0,
                                          coordinator_epoch=0, timestamp=env.time.milliseconds())
    bad_delta = bytearray(env.batch(b"x", b"y"))
    struct.pack_into(">i", bad_delta, 23, 5)
    struct.pack_into(">I", bad_delta, 17, rb.compute_crc(bad_delta, 0, len(bad_delta)))
    bad_crc = bytearray(env.batch(b"z"))
    bad_crc[-1] ^= 0xFF
    cases = [(control, InvalidRecordError), (bad_delta, InvalidRecordError),
             (bad_crc, CorruptRecordError), (env.batch(b"v" * 300), RecordBatchTooLargeError),
             (env.batch(b"ok") + env.batch(b"ok")[:-3], CorruptRecordError)]
    for data, error in cases:
        before = bytes(data)
        with pytest.raises(error):
            ulog.append_as_leader(data)
        assert bytes(data) == before
    assert ulog.log_end_offset == 1 and ulog.active_segment.size == len(env.batch(b"ok"))
    ulog.close()


def test_batch_larger_than_segment_bytes_is_refused(tmp_path):
    env = Env(tmp_path, segment_bytes=100)
    ulog = env.open()
    with pytest.raises(RecordListTooLargeError):  # RECORD_LIST_TOO_LARGE, as Kafka's UnifiedLog.append
        ulog.append_as_leader(env.batch(b"v" * 200))
    assert ulog.log_end_offset == 0
    ulog.close()


def test_log_append_time_topic_stamps_the_broker_time(tmp_path):
    env = Env(tmp_path, message_timestamp_type="LogAppendTime")
    ulog = env.open()
    env.time.sleep(5000)
    now = env.time.milliseconds()
    info = ulog.append_as_leader(env.batch(b"a", b"b", ts=now - 4000))
    assert info.log_append_time == now and info.max_timestamp == now
    data = ulog.active_segment.log.path.read_bytes()
    header, records = decode_batch(data)
    assert header.timestamp_type == rb.LOG_APPEND_TIME and header.max_timestamp == now
    assert [r.timestamp for r in records] == [now, now]
    assert ulog.fetch_offset_by_timestamp(now).offset == 0
    ulog.close()


# --- rolling ---

def test_roll_on_segment_bytes_trims_old_indexes_and_snapshots_at_each_roll(tmp_path):
    env = Env(tmp_path, segment_bytes=1024, index_interval_bytes=1, segment_index_bytes=4096)
    ulog = env.open()
    size = len(env.batch(b"v" * 100))
    for _i in range(30):
        ulog.append_as_leader(env.batch(b"v" * 100))
    segments = ulog.segments
    assert len(segments) > 3
    assert all(s.size <= 1024 for s in segments) and all(s.size > 1024 - size for s in segments[:-1])
    bases = [s.base_offset for s in segments]
    for seg in segments[:-1]:
        assert seg.offset_index_file.stat().st_size == 8 * seg.offset_index.entries
        assert seg.time_index_file.stat().st_size == 12 * seg.time_index.entries
    active = segments[-1]
    assert active.offset_index_file.stat().st_size == 4096
    assert active.time_index_file.stat().st_size == 4092
    snapshots = sorted(files.offset_from_file_name(p.name) for p in env.dir.glob("*.snapshot"))
    assert snapshots == bases[1:]
    assert [r[0] for r in read_records(ulog)] == list(range(30))
    ulog.close()


def test_roll_on_segment_ms_with_jitter(tmp_path):
    env = Env(tmp_path, segment_ms=10_000, segment_jitter_ms=4_000)
    ulog = env.open()
    ulog.append_as_leader(env.batch(b"first"))
    jitter = ulog.active_segment.roll_jitter_ms
    assert 0 <= jitter < 4_000
    env.time.sleep(10_000 - jitter)
    ulog.append_as_leader(env.batch(b"not yet"))
    assert ulog.num_segments == 1
    env.time.sleep(1)
    ulog.append_as_leader(env.batch(b"rolled"))
    assert [s.base_offset for s in ulog.segments] == [0, 2]
    # the empty active segment never rolls on time alone
    env.time.sleep(100_000)
    ulog.roll()
    assert ulog.active_segment.size == 0
    assert ulog.flush_if_due() is False
    ulog.close()


def test_roll_when_an_index_is_full(tmp_path):
    env = Env(tmp_path, segment_index_bytes=36, index_interval_bytes=0)
    ulog = env.open()
    for i in range(12):
        env.time.sleep(1)
        ulog.append_as_leader(env.batch(b"%d" % i))
    assert ulog.num_segments > 2
    for seg in ulog.segments:
        assert seg.offset_index.entries <= 4 and seg.time_index.entries <= 3
    assert [r[0] for r in read_records(ulog)] == list(range(12))
    ulog.close()


def _delta_batch(last_offset_delta: int, ts: int) -> bytes:
    record = rb.encode_record(0, 0, b"k", b"v")
    return rb.build_batch(record, count=1, last_offset_delta=last_offset_delta, base_timestamp=ts,
                          max_timestamp=ts)


def test_r16_offset_overflow_forces_a_roll_and_never_wraps(tmp_path):
    env = Env(tmp_path, index_interval_bytes=0)
    ulog = env.open()
    now = env.time.milliseconds()
    ulog.append_as_leader(env.batch(b"zero"))
    # a batch whose last offset is 2**31 relative to base 0: the log rolls at its first offset
    info = ulog.append_as_leader(_delta_batch(INT32_MAX, now), origin=AppendOrigin.COORDINATOR)
    assert (info.first_offset, info.last_offset) == (1, 1 + INT32_MAX)
    assert [s.base_offset for s in ulog.segments] == [0, 1]
    nxt = ulog.append_as_leader(env.batch(b"after"))
    assert nxt.first_offset == INT32_MAX + 2
    assert [s.base_offset for s in ulog.segments] == [0, 1, INT32_MAX + 2]
    for seg in ulog.segments:
        for n in range(seg.offset_index.entries):
            assert 0 <= seg.offset_index.entry(n).offset - seg.base_offset <= INT32_MAX
    # below the roll decision, the segment refuses (nothing written) rather than wrap
    leo, size = ulog.log_end_offset, ulog.size
    base = ulog.active_segment.base_offset
    rogue = bytearray(env.batch(b"rogue"))
    rb.write_base_offset(rogue, 0, base + INT32_MAX + 1)
    with pytest.raises(OffsetOverflowError):
        ulog.local_log.append(base + INT32_MAX + 1, now, base + INT32_MAX + 1, rogue)
    assert ulog.log_end_offset == leo and ulog.size == size
    assert ulog.append_as_leader(env.batch(b"still fine")).first_offset == leo
    ulog.close()


def test_kafka_6388_rolling_onto_an_empty_active_segment_recreates_it(tmp_path):
    env = Env(tmp_path)
    ulog = env.open()
    ulog.append_as_leader(env.batch(b"a"))
    ulog.roll()
    empty = ulog.active_segment
    again = ulog.roll()
    assert again is not empty and again.base_offset == 1 and ulog.num_segments == 2
    assert ulog.append_as_leader(env.batch(b"b")).first_offset == 1
    ulog.close()


# --- idempotence and transactions ---

def idem(env, seq, *values, pid=7, epoch=0, **kw):
    return env.batch(*(values or (b"v%d" % seq,)), producer_id=pid, producer_epoch=epoch,
                     base_sequence=seq, **kw)


def test_i1_i2_i4_duplicates_and_gaps_at_the_log_level(tmp_path):
    env = Env(tmp_path)
    ulog = env.open()
    offsets = [ulog.append_as_leader(idem(env, seq)).first_offset for seq in range(6)]
    assert offsets == list(range(6))
    leo = ulog.log_end_offset
    for seq in range(1, 6):  # the last 5 batches: original offsets, nothing appended
        info = ulog.append_as_leader(idem(env, seq))
        assert (info.first_offset, info.last_offset) == (seq, seq)
    assert ulog.log_end_offset == leo
    with pytest.raises(OutOfOrderSequenceError):  # the 6th oldest
        ulog.append_as_leader(idem(env, 0))
    with pytest.raises(OutOfOrderSequenceError):  # a gap
        ulog.append_as_leader(idem(env, 8))
    assert ulog.log_end_offset == leo
    assert ulog.append_as_leader(idem(env, 6)).first_offset == leo
    ulog.close()


def test_i3_i5_i6_overlap_epochs_and_wraparound_at_the_log_level(tmp_path):
    from broker.log.errors import InvalidProducerEpochError

    env = Env(tmp_path)
    ulog = env.open()
    ulog.append_as_leader(idem(env, 0, b"a", b"b", b"c"))  # sequences 0..2
    leo = ulog.log_end_offset
    with pytest.raises(OutOfOrderSequenceError):  # I3: starts inside the previous batch
        ulog.append_as_leader(idem(env, 1, b"x", b"y", b"z"))
    ulog.append_as_leader(idem(env, 0, b"new epoch", epoch=1))  # I5: a new epoch at seq 0
    with pytest.raises(InvalidProducerEpochError):
        ulog.append_as_leader(idem(env, 3, epoch=0))
    with pytest.raises(OutOfOrderSequenceError):
        ulog.append_as_leader(idem(env, 5, epoch=2))  # a new epoch must start at 0
    assert ulog.log_end_offset == leo + 1
    # I6: 2**31-1 is followed by 0, not by 1
    ulog.append_as_leader(idem(env, INT32_MAX, pid=8))
    with pytest.raises(OutOfOrderSequenceError):
        ulog.append_as_leader(idem(env, 1, pid=8))
    assert ulog.append_as_leader(idem(env, 0, pid=8)).first_offset == leo + 2
    ulog.close()


def test_r1_torn_tail_is_cut_on_unclean_reopen(tmp_path):
    import random

    rng = random.Random(1)
    for trial in range(10):
        env = Env(tmp_path / str(trial))
        ulog = env.open()
        positions = []
        for i in range(20):
            positions.append(ulog.active_segment.size)
            ulog.append_as_leader(env.batch(b"record-%d" % i))
        path = ulog.active_segment.log.path
        ulog.close_handlers()
        k = rng.randrange(20)
        cut = positions[k] + rng.randrange(16)
        data = bytearray(path.read_bytes())
        data[cut:] = os.urandom(len(data) - cut)
        path.write_bytes(bytes(data))
        reopened = env.open(last_shutdown_clean=False)
        assert [r[0] for r in read_records(reopened)] == list(range(k))
        assert reopened.load_stats.truncated_bytes > 0
        assert reopened.active_segment.size == positions[k]
        assert reopened.append_as_leader(env.batch(b"next")).first_offset == k
        reopened.close()


def test_i7_dedup_across_an_unclean_restart(tmp_path):
    env = Env(tmp_path, segment_bytes=600)
    ulog = env.open()
    for seq in range(10):  # several segments, snapshots at each roll
        ulog.append_as_leader(idem(env, seq, b"x" * 60))
    last = idem(env, 10, b"last")
    original = ulog.append_as_leader(bytearray(last))
    rp = ulog.active_segment.base_offset
    ulog.close_handlers()  # SIGKILL after the ack: no snapshot at the end, no marker
    for recovery_point in (rp, 0):
        reopened = env.open(last_shutdown_clean=False, recovery_point=recovery_point)
        assert reopened.log_end_offset == original.last_offset + 1
        info = reopened.append_as_leader(bytearray(last))
        assert (info.first_offset, info.last_offset) == (original.first_offset, original.last_offset)
        assert reopened.log_end_offset == original.last_offset + 1
        assert [r[1] for r in read_records(reopened)][-1] == b"last"
        reopened.close_handlers()


def test_r13_transaction_index_and_last_stable_offset_at_the_log_level(tmp_path):
    env = Env(tmp_path, index_interval_bytes=1)
    ulog = env.open()
    ulog.truncate_fully_and_start_at(100)
    pid1, pid2 = 5, 10
    now = env.time.milliseconds()

    def txn(pid, *values):
        return env.batch(*values, producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)

    def marker(kind, pid):
        return encode_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                           timestamp=now)

    assert ulog.append_as_leader(txn(pid1, b"a", b"b")).first_offset == 100
    assert ulog.last_stable_offset == 100 and ulog.high_watermark == 102
    assert ulog.read(100, 1 << 20, TXN_COMMITTED).records.size_in_bytes == 0
    ulog.append_as_leader(txn(pid2, b"c", b"d"))
    ulog.append_as_leader(env.batch(b"e", b"f"))
    ulog.append_as_leader(marker(ControlRecordType.ABORT, pid2), origin=AppendOrigin.COORDINATOR)
    assert ulog.last_stable_offset == 100
    ulog.append_as_leader(marker(ControlRecordType.COMMIT, pid1), origin=AppendOrigin.COORDINATOR)
    assert ulog.last_stable_offset == 108 == ulog.log_end_offset
    expected = [AbortedTxn(pid2, 102, 106, 100)]
    assert ulog.active_segment.txn_index.all_aborted_txns() == expected
    info = ulog.read(100, 1 << 20, TXN_COMMITTED)
    assert info.aborted_transactions == [(pid2, 102)]
    assert [h.base_offset for _, h in info.records.batches()] == [100, 102, 104, 106, 107]
    assert ulog.read(100, 1 << 20, LOG_END).aborted_transactions is None
    ulog.close_handlers()
    recovered = env.open(last_shutdown_clean=False, recovery_point=100, log_start_offset=100)
    assert recovered.load_stats.recovered_segments == [100]
    assert recovered.active_segment.txn_index.all_aborted_txns() == expected
    assert recovered.last_stable_offset == 108
    assert recovered.read(100, 1 << 20, TXN_COMMITTED).aborted_transactions == [(pid2, 102)]
    recovered.close()


def test_reads_bounded_by_high_watermark_and_open_transactions(tmp_path):
    env = Env(tmp_path)
    ulog = env.open()
    for i in range(5):
        ulog.append_as_leader(env.batch(b"%d" % i))
    ulog.update_high_watermark(3)
    assert [r[0] for r in read_records(ulog, 0, HIGH_WATERMARK)] == [0, 1, 2]
    assert ulog.read(3, 100, HIGH_WATERMARK).records.size_in_bytes == 0
    assert ulog.maybe_increment_high_watermark(ulog.log_end_offset_metadata) is not None
    assert ulog.high_watermark == 5
    ulog.append_as_leader(env.batch(b"t", producer_id=1, producer_epoch=0, base_sequence=0,
                                    is_transactional=True))
    ulog.append_as_leader(env.batch(b"after"))
    assert ulog.last_stable_offset == 5 and ulog.high_watermark == 7
    assert [r[0] for r in read_records(ulog, 0, TXN_COMMITTED)] == [0, 1, 2, 3, 4]
    assert [r[0] for r in read_records(ulog, 0, HIGH_WATERMARK)] == list(range(7))
    ulog.close()


# --- ListOffsets ---

def test_offset_for_timestamp_earliest_latest_and_max(tmp_path):
    env = Env(tmp_path, segment_bytes=300, index_interval_bytes=1)
    ulog = env.open()
    t0 = env.time.milliseconds() - 100_000
    stamps = [t0 + 10 * i for i in range(20)]
    stamps[7] = t0 + 5_000  # the maximum, in the middle
    for ts in stamps:
        ulog.append_as_leader(env.batch(b"v", ts=ts), leader_epoch=2)
    assert ulog.num_segments > 2
    assert ulog.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == (0, -1, 2)
    assert ulog.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == (20, -1, 2)
    assert ulog.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (7, t0 + 5_000, 2)
    assert ulog.fetch_offset_by_timestamp(t0) == (0, t0, 2)
    assert ulog.fetch_offset_by_timestamp(t0 + 31) == (4, t0 + 40, 2)
    assert ulog.fetch_offset_by_timestamp(t0 + 80) == (7, t0 + 5_000, 2)
    assert ulog.fetch_offset_by_timestamp(t0 + 6_000) is None
    ulog.maybe_increment_log_start_offset(5)
    assert ulog.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 5
    assert ulog.fetch_offset_by_timestamp(t0).offset == 5
    ulog.close()


# --- boundaries, retention, DeleteRecords ---

def test_delete_records_advances_the_log_start_offset(tmp_path):
    env = Env(tmp_path, segment_bytes=300)
    ulog = env.open()
    for i in range(20):
        ulog.append_as_leader(env.batch(b"%d" % i))
    bases = [s.base_offset for s in ulog.segments]
    with pytest.raises(LogOffsetOutOfRangeError):
        ulog.maybe_increment_log_start_offset(21)
    target = bases[2] + 1
    assert ulog.maybe_increment_log_start_offset(target) is True
    assert ulog.maybe_increment_log_start_offset(target - 1) is False
    assert ulog.log_start_offset == target
    with pytest.raises(LogOffsetOutOfRangeError):
        ulog.read(target - 1, 100)
    assert read_records(ulog, target)[0][0] == target
    assert ulog.delete_old_segments() == 2
    assert ulog.segments[0].base_offset == bases[2] and ulog.log_start_offset == target
    ulog.close()


def test_retention_ms_deletes_whole_old_segments_after_the_delay(tmp_path):
    env = Env(tmp_path, segment_bytes=300, retention_ms=60_000, file_delete_delay_ms=1_000)
    ulog = env.open()
    old = env.time.milliseconds()
    for i in range(10):
        ulog.append_as_leader(env.batch(b"old%d" % i, ts=old))
    env.time.sleep(120_000)
    ulog.roll()
    for i in range(3):
        ulog.append_as_leader(env.batch(b"new%d" % i))
    old_segments = ulog.segments[:-1]
    assert len(old_segments) >= 2
    slice_before = ulog.read(0, 1 << 20).records  # an in-flight fetch of an old segment
    deleted = ulog.delete_old_segments()
    assert deleted == len(old_segments)
    assert ulog.log_start_offset == 10 == ulog.segments[0].base_offset
    assert sorted(p.name for p in env.dir.glob("*.deleted"))  # renamed, not yet gone
    assert slice_before.read_bytes()  # still readable until file.delete.delay.ms
    env.time.sleep(1_000)
    env.scheduler.run_pending()
    assert not list(env.dir.glob("*.deleted"))
    assert [r[1] for r in read_records(ulog, 10)] == [b"new0", b"new1", b"new2"]
    ulog.close()


def test_retention_when_every_segment_expires_rolls_a_new_active_segment(tmp_path):
    env = Env(tmp_path, segment_bytes=300, retention_ms=1_000)
    ulog = env.open()
    for i in range(6):
        ulog.append_as_leader(env.batch(b"%d" % i))
    env.time.sleep(5_000)
    n = ulog.num_segments
    assert ulog.delete_old_segments() == n
    assert ulog.num_segments == 1 and ulog.active_segment.size == 0
    assert ulog.log_start_offset == ulog.log_end_offset == 6
    assert ulog.append_as_leader(env.batch(b"next")).first_offset == 6
    ulog.close()


def test_retention_bytes_deletes_the_oldest_segments(tmp_path):
    env = Env(tmp_path, segment_bytes=300, retention_bytes=700)
    ulog = env.open()
    for i in range(30):
        ulog.append_as_leader(env.batch(b"%02d" % i))
    before = ulog.size
    sizes = [s.size for s in ulog.segments]
    assert ulog.delete_old_segments() > 0
    assert ulog.size <= 700 < ulog.size + sizes[0]
    assert before - ulog.size == sum(sizes[:len(sizes) - ulog.num_segments])
    assert ulog.log_start_offset == ulog.segments[0].base_offset
    ulog.close()


# --- durability ---

def test_flush_messages_one_fsyncs_before_the_append_returns(tmp_path, monkeypatch):
    calls = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd)))
    env = Env(tmp_path, flush_messages=1)
    ulog = env.open()
    for i in range(3):
        calls.clear()
        ulog.append_as_leader(env.batch(b"%d" % i))
        assert calls, "no fsync before the append returned"
        assert ulog.recovery_point == ulog.log_end_offset == i + 1
    ulog.close()
    lazy = Env(tmp_path / "lazy")
    ulog = lazy.open()
    ulog.append_as_leader(lazy.batch(b"x"))  # the first one writes leader-epoch-checkpoint
    calls.clear()
    ulog.append_as_leader(lazy.batch(b"y"))
    assert calls == [] and ulog.recovery_point == 0
    ulog.flush()
    assert calls and ulog.recovery_point == 2
    ulog.close()


def test_flush_ms_and_the_asynchronous_flush_of_a_rolled_segment(tmp_path):
    env = Env(tmp_path, flush_ms=1_000)
    ulog = env.open()
    ulog.append_as_leader(env.batch(b"a"))
    assert ulog.flush_if_due() is False and ulog.recovery_point == 0
    env.time.sleep(1_000)
    assert ulog.flush_if_due() is True and ulog.recovery_point == 1
    ulog.append_as_leader(env.batch(b"b"))
    ulog.roll()
    assert ulog.recovery_point == 1  # only at an actual flush
    env.scheduler.run_pending()
    assert ulog.recovery_point == 2
    ulog.close()


def test_io_error_takes_the_log_dir_offline(tmp_path, monkeypatch):
    env = Env(tmp_path)
    ulog = env.open()
    ulog.append_as_leader(env.batch(b"kept"))

    def broken(*args):
        raise OSError(errno.EIO, "Input/output error")

    with monkeypatch.context() as m:
        m.setattr(os, "pwrite", broken)
        with pytest.raises(KafkaStorageError):
            ulog.append_as_leader(env.batch(b"lost"))
    assert ulog.is_offline
    assert ulog.local_log.failure_channel.offline_log_dirs() == [str(tmp_path.absolute())]
    with pytest.raises(KafkaStorageError):  # the disk is "back", the dir stays offline
        ulog.append_as_leader(env.batch(b"refused"))
    with pytest.raises(KafkaStorageError):
        ulog.read(0, 100)
    with pytest.raises(KafkaStorageError):
        ulog.roll()
    assert ulog.log_end_offset == 1
    ulog.close_handlers()
    reopened = Env(tmp_path).open(last_shutdown_clean=False)
    assert [r[1] for r in read_records(reopened)] == [b"kept"]
    reopened.close()


def test_io_error_on_fsync_is_a_storage_error_and_keeps_the_recovery_point(tmp_path, monkeypatch):
    env = Env(tmp_path, flush_messages=1)
    ulog = env.open()
    ulog.append_as_leader(env.batch(b"a"))

    def broken(fd):
        raise OSError(errno.EIO, "fsync failed")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(KafkaStorageError):
        ulog.append_as_leader(env.batch(b"b"))
    assert ulog.recovery_point == 1 and ulog.is_offline
    ulog.close_handlers()


# --- truncation ---

def test_r12_truncate_after_reopen(tmp_path):
    env = Env(tmp_path, segment_bytes=400, index_interval_bytes=1)
    ulog = env.open()
    for i in range(100):
        ulog.append_as_leader(env.batch(b"%d" % i))
    assert ulog.num_segments > 1
    ulog.close()
    ulog = env.open(last_shutdown_clean=True, recovery_point=100)
    assert ulog.truncate_to(3) is True
    assert ulog.num_segments == 1 and ulog.log_end_offset == 3 and ulog.high_watermark == 3
    seg = ulog.active_segment
    assert [seg.offset_index.entry(n).offset for n in range(seg.offset_index.entries)] == [1, 2]
    assert all(seg.time_index.entry(n).offset < 3 for n in range(seg.time_index.entries))
    assert ulog.append_as_leader(env.batch(b"three")).first_offset == 3
    assert ulog.truncate_to(10) is False
    env.scheduler.run_pending()
    assert sorted(p.name for p in env.dir.glob("*.log")) == [files.log_file(env.dir, 0).name]
    ulog.close()


def test_truncate_fully_and_start_at(tmp_path):
    env = Env(tmp_path)
    ulog = env.open()
    for i in range(3):
        ulog.append_as_leader(env.batch(b"%d" % i))
    ulog.truncate_fully_and_start_at(50)
    assert (ulog.log_start_offset, ulog.log_end_offset, ulog.high_watermark) == (50, 50, 50)
    assert ulog.recovery_point == 50 and [s.base_offset for s in ulog.segments] == [50]
    assert ulog.append_as_leader(env.batch(b"x")).first_offset == 50
    ulog.close()
    reopened = env.open(last_shutdown_clean=True, log_start_offset=50, recovery_point=51)
    assert [r[0] for r in read_records(reopened, 50)] == [50]
    reopened.close()


# --- concurrency ---

def test_readers_never_block_on_the_writer_lock(tmp_path):
    import threading

    env = Env(tmp_path)
    ulog = env.open()
    ulog.append_as_leader(env.batch(b"a"))
    held, release = threading.Event(), threading.Event()

    def slow_writer():
        with ulog._lock:  # a writer stuck inside the partition lock (e.g. a slow disk)
            held.set()
            release.wait(10)

    thread = threading.Thread(target=slow_writer)
    thread.start()
    assert held.wait(5)
    try:
        assert read_records(ulog)[0][1] == b"a"
        assert ulog.read(0, 100, HIGH_WATERMARK).records.size_in_bytes > 0
        assert ulog.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 0
        assert (ulog.log_end_offset, ulog.high_watermark, ulog.last_stable_offset) == (1, 1, 1)
    finally:
        release.set()
        thread.join()
    ulog.close()


class _LsoWatchedLog(UnifiedLog):
    """A UnifiedLog that checks, at every store of the high watermark or the first
    unstable offset, what a lock-free reader loading the two right then would take as the
    last stable offset: never past the first offset of a transaction the producer state
    holds open (the stores happen under the writer's lock, after the producer state
    moved)."""

    violations: list

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name not in ("_high_watermark_metadata", "_first_unstable_offset_metadata"):
            return
        psm = self.__dict__.get("producer_state_manager")
        if psm is None or "_first_unstable_offset_metadata" not in self.__dict__:
            return  # still in __init__
        ongoing = psm.ongoing_transactions()
        if ongoing:
            lso = self.last_stable_offset
            first = min(t.first_offset for t in ongoing)
            if lso > first:
                type(self).violations.append((name, lso, first))


def test_h8_a_lock_free_reader_never_sees_an_open_transaction_below_the_last_stable_offset(tmp_path):
    """H8 (read-uncommitted) at the log level: the first unstable offset moves before the
    high watermark on every append, so no read_committed fetch racing the append of a
    transaction's first batch can take a high watermark past it with no first unstable
    offset (CI once saw a read_committed consumer poll an open transaction's records)."""
    _LsoWatchedLog.violations = []
    env = Env(tmp_path)
    ulog = _LsoWatchedLog.create(env.dir, env.config, time=env.time, scheduler=env.scheduler)
    now = env.time.milliseconds()

    def txn(pid, seq, *values):
        return env.batch(*values, producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)

    def marker(kind, pid):
        return encode_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                           timestamp=now)

    ulog.append_as_leader(env.batch(b"plain"))
    ulog.append_as_leader(env.batch(b"i", producer_id=3, producer_epoch=0, base_sequence=0))
    ulog.append_as_leader(env.batch(b"j", producer_id=3, producer_epoch=0, base_sequence=1))  # fused path
    for round_ in range(3):
        first = ulog.append_as_leader(txn(9, 2 * round_, b"t1", b"t2")).first_offset
        assert ulog.last_stable_offset == first
        assert ulog.read(first, 1 << 20, TXN_COMMITTED).records.size_in_bytes == 0
        ulog.append_as_leader(env.batch(b"k", producer_id=3, producer_epoch=0, base_sequence=2 + round_))
        ulog.append_as_leader(marker(ControlRecordType.COMMIT, 9), origin=AppendOrigin.COORDINATOR)
        assert ulog.last_stable_offset == ulog.log_end_offset
    ulog.update_high_watermark(ulog.log_end_offset)
    assert _LsoWatchedLog.violations == []
    ulog.close()


def test_concurrent_readers_see_whole_valid_batches_while_the_writer_rolls_and_deletes(tmp_path):
    import sys
    import threading

    env = Env(tmp_path, segment_bytes=500, retention_bytes=3000, file_delete_delay_ms=0)
    ulog = env.open()
    stop = threading.Event()
    errors = []

    def reader():
        while not stop.is_set():
            hw = ulog.high_watermark
            start = max(ulog.log_start_offset, hw - 20)
            try:
                info = ulog.read(start, 4000, HIGH_WATERMARK)
                data = info.records.read_bytes()
            except (LogOffsetOutOfRangeError, OSError):
                continue  # retention moved the start offset, or a deleted segment was closed
            hw = ulog.high_watermark  # it only grows: what was read lies below it
            expected = None
            for pos, header in iter_batch_headers(data):
                ensure_valid(data, pos)
                if expected is not None and header.base_offset != expected:
                    errors.append(("gap", expected, header.base_offset))
                expected = header.next_offset
                if header.last_offset >= hw:
                    errors.append(("past the high watermark", header.last_offset, hw))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    threads = [threading.Thread(target=reader) for _ in range(2)]
    try:
        for t in threads:
            t.start()
        for i in range(240):
            ulog.append_as_leader(env.batch(b"%04d" % i))
            if i % 30 == 29:
                ulog.delete_old_segments()
                env.scheduler.run_pending()
    finally:
        stop.set()
        for t in threads:
            t.join()
        sys.setswitchinterval(old)
    assert errors == [] and not ulog.is_offline
    assert ulog.log_end_offset == 240 and ulog.log_start_offset > 0
    ulog.close()
