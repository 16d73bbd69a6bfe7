"""Tests of broker/log/segment.py (LogSegment, FileRecords) and broker/log/clock.py:
sparse indexes checked byte by byte, R1/R2/R3/R4/R12/R13/R15/R16 at the segment level,
reads, rolling, recovery hooks, file lifecycle, and interoperability with kafka-python's
record reader."""

from __future__ import annotations

import random
import struct
import sys
import tempfile
import threading
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import files
from broker.log.clock import MockTime, SystemTime
from broker.log.config import LogConfig
from broker.log.epoch_cache import EpochEntry, LeaderEpochFileCache
from broker.log.errors import CorruptIndexError, InvalidRecordError, OffsetOverflowError
from broker.log.segment import (
    FetchDataInfo,
    LogOffsetMetadata,
    LogSegment,
    MemoryRecords,
    RollParams,
)
from broker.log.txn_index import AbortedTxn
from broker.record.batch import decode_batch, encode_batch, iter_batch_headers
from broker.record.control import ControlRecordType, encode_end_txn_marker_batch, parse_end_txn_marker

T0 = 1_600_000_000_000


@pytest.fixture
def frequent_switches():
    """Switch threads every few microseconds so that races are actually exercised."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def make_batch(offset, count=1, ts=None, value=b"value", epoch=-1, **kw):
    ts = T0 + offset * 10 if ts is None else ts
    records = [(b"key-%d" % (offset + i), value, ts + i) for i in range(count)]
    return encode_batch(records, base_offset=offset, partition_leader_epoch=epoch, **kw)


def append(seg, data):
    headers = [h for _, h in iter_batch_headers(data)]
    top = max(headers, key=lambda h: h.max_timestamp)
    seg.append(headers[-1].last_offset, top.max_timestamp, top.last_offset, data)


def open_segment(directory, base=0, interval=1, time=None, **kw):
    return LogSegment.open(directory, base, index_interval_bytes=interval,
                           time=time or MockTime(), **kw)


def log_headers(seg):
    """(position, header) of every batch of the .log (tests only: reads the whole file)."""
    return list(iter_batch_headers(seg.log.path.read_bytes()))


def raw_index(seg):
    n = seg.offset_index.entries
    data = seg.offset_index_file.read_bytes()
    return [struct.unpack_from(">ii", data, 8 * i) for i in range(n)]


def raw_time_index(seg):
    n = seg.time_index.entries
    data = seg.time_index_file.read_bytes()
    return [struct.unpack_from(">qi", data, 12 * i) for i in range(n)]


def expected_entries(headers, interval, base):
    """The sparse-index rule, independently: (offset entries, time entries)."""
    offsets, times = [], []
    since = 0
    max_ts, max_off = -1, base
    last_ts = -1
    for pos, h in headers:
        if h.max_timestamp > max_ts:
            max_ts, max_off = h.max_timestamp, h.last_offset
        if since > interval:
            offsets.append((h.last_offset - base, pos))
            if max_ts > last_ts:
                times.append((max_ts, max_off - base))
                last_ts = max_ts
            since = 0
        since += h.size_in_bytes
    return offsets, times


def fill(seg, n, start=0, count=1, rng=None, ts_fn=None):
    offset = start
    for _i in range(n):
        c = rng.randint(1, 4) if rng else count
        value = b"x" * (rng.randint(0, 300) if rng else 20)
        ts = ts_fn(offset) if ts_fn else None
        append(seg, make_batch(offset, c, ts=ts, value=value))
        offset += c
    return offset


# --- sparse indexes, byte by byte ---

@pytest.mark.parametrize("interval", [0, 1, 150, 700])
def test_index_entries_point_at_real_batches(tmp_path, interval):
    base = 1000
    seg = open_segment(tmp_path, base, interval=interval)
    rng = random.Random(interval)
    # timestamps go up and down so that "largest so far" matters
    end = fill(seg, 60, start=base, rng=rng, ts_fn=lambda o: T0 + rng.randint(0, 5000))
    headers = log_headers(seg)
    by_pos = {pos: h for pos, h in headers}
    exp_offsets, exp_times = expected_entries(headers, interval, base)
    assert raw_index(seg) == exp_offsets
    assert raw_time_index(seg) == exp_times
    assert len(exp_offsets) > 0
    for rel, pos in raw_index(seg):
        assert by_pos[pos].last_offset == base + rel
    for ts, rel in raw_time_index(seg):
        upto = [h for _, h in headers if h.last_offset <= base + rel]
        assert max(h.max_timestamp for h in upto) == ts
        assert any(h.last_offset == base + rel and h.max_timestamp == ts for h in upto)
    # still preallocated while active
    assert seg.offset_index_file.stat().st_size == files_size(seg.offset_index.max_index_size, 8)
    seg.on_become_inactive_segment()
    n, m = seg.offset_index.entries, seg.time_index.entries
    assert seg.offset_index_file.stat().st_size == 8 * n
    assert seg.time_index_file.stat().st_size == 12 * m
    top = max((h for _, h in headers), key=lambda h: h.max_timestamp)
    ts, rel = raw_time_index(seg)[-1]
    assert (ts, base + rel) == (top.max_timestamp, top.last_offset)  # the final entry
    seg.close()
    again = open_segment(tmp_path, base, interval=interval, file_already_exists=True)
    assert again.offset_index.entries == n and again.time_index.entries == m
    assert again.read_next_offset() == end
    again.close()


def files_size(max_index_size, entry):
    return entry * (max_index_size // entry)


def test_recovered_indexes_equal_the_appended_ones(tmp_path):
    seg = open_segment(tmp_path, 0, interval=300)
    rng = random.Random(3)
    fill(seg, 80, rng=rng, ts_fn=lambda o: T0 + rng.randint(0, 9999))
    seg.on_become_inactive_segment()
    index_bytes = seg.offset_index_file.read_bytes()
    time_bytes = seg.time_index_file.read_bytes()
    assert seg.recover() == 0
    assert seg.offset_index_file.read_bytes() == index_bytes
    assert seg.time_index_file.read_bytes() == time_bytes
    seg.close()


# --- R15: sparse-index properties ---

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 400), st.integers(0, 10_000)),
                        min_size=1, max_size=50),
       interval=st.integers(0, 2000))
def test_r15_sparse_index_properties(batches, interval):
    with tempfile.TemporaryDirectory() as d:
        base = 500
        seg = open_segment(Path(d), base, interval=interval)
        offset = base
        for count, size, ts in batches:
            append(seg, make_batch(offset, count, ts=T0 + ts, value=b"v" * size))
            offset += count
        headers = log_headers(seg)
        max_batch = max(h.size_in_bytes for _, h in headers)
        entries = raw_index(seg)
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(entries, entries[1:]))
        times = raw_time_index(seg)
        assert all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(times, times[1:]))
        for t in range(base, offset):
            below = [(base + r, p) for r, p in entries if base + r <= t]
            expected = below[-1] if below else (base, 0)
            looked_up = seg.offset_index.lookup(t)
            assert looked_up == expected
            found = seg.translate_offset(t)
            holder = next(h for _, h in headers if h.base_offset <= t <= h.last_offset)
            assert found.offset == holder.last_offset
            assert found.position - looked_up.position <= interval + max_batch
        seg.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 400), st.integers(0, 10_000)),
                        min_size=1, max_size=40),
       interval=st.integers(0, 2000), cuts=st.lists(st.integers(0, 40), max_size=4))
def test_many_batch_appends_index_as_one_batch_appends(batches, interval, cuts):
    """The fast path: a many-batch ``append`` writes its index entries with one pwrite
    per index (``append_many``); the files equal those of one ``append`` per batch."""
    datas, offset = [], 500
    for count, size, ts in batches:
        datas.append(make_batch(offset, count, ts=T0 + ts, value=b"v" * size))
        offset += count
    bounds = sorted({0, len(datas), *(min(c, len(datas)) for c in cuts)})
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "one").mkdir()
        (Path(d) / "many").mkdir()
        one = open_segment(Path(d) / "one", 500, interval=interval)
        many = open_segment(Path(d) / "many", 500, interval=interval)
        for data in datas:
            append(one, data)
        for lo, hi in zip(bounds, bounds[1:]):
            append(many, b"".join(datas[lo:hi]))
        assert raw_index(many) == raw_index(one)
        assert raw_time_index(many) == raw_time_index(one)
        assert many.read_max_timestamp_and_offset_so_far() == one.read_max_timestamp_and_offset_so_far()
        assert many.log.path.read_bytes() == one.log.path.read_bytes()
        one.close()
        many.close()


# --- R1: torn tail ---

def test_r1_torn_tail_recovery(tmp_path):
    rng = random.Random(1)
    for trial in range(10):
        d = tmp_path / f"trial-{trial}"
        d.mkdir()
        seg = open_segment(d, 0, interval=1)
        positions = []
        for i in range(20):
            positions.append(seg.size)
            append(seg, make_batch(i))
        full = seg.size
        k = rng.randrange(20)
        start = positions[k] + rng.randint(0, 15)
        with open(seg.log.path, "r+b") as f:
            f.seek(start)
            f.write(rng.randbytes(full - start))
        cut = seg.recover()
        assert cut == full - positions[k] > 0
        assert seg.log.path.stat().st_size == positions[k] == seg.size
        assert [h.last_offset for _, h in log_headers(seg)] == list(range(k))
        assert seg.read_next_offset() == k
        assert all(pos < seg.size for _, pos in raw_index(seg))
        seg.resize_indexes(seg.offset_index.max_index_size)
        append(seg, make_batch(k))
        assert seg.read(k, 1).records.last_batch().last_offset == k
        seg.close()


# --- R2: junk after a clean close ---

def test_r2_junk_after_clean_close_is_cut_and_records_survive(tmp_path):
    rng = random.Random(2)
    seg = open_segment(tmp_path, 0, interval=100)
    end = fill(seg, 30, count=3)
    seg.close()
    before = Path(seg.log.path).read_bytes()
    with open(tmp_path / "00000000000000000000.log", "ab") as f:
        f.write(rng.randbytes(rng.randint(1, 1024)))
    with open(tmp_path / "00000000000000000000.index", "ab") as f:
        f.write(rng.randbytes(rng.randint(1, 1024)))
    seg = open_segment(tmp_path, 0, interval=100, file_already_exists=True)
    assert seg.recover() > 0
    assert seg.log.path.read_bytes() == before
    assert seg.read_next_offset() == end
    records = [r for h, rs in _decode_all(seg) for r in rs]
    assert [r.offset for r in records] == list(range(end))
    assert all(r.key == b"key-%d" % r.offset for r in records)
    seg.close()


def _decode_all(seg):
    data = seg.log.path.read_bytes()
    return [decode_batch(data, pos) for pos, _ in iter_batch_headers(data)]


# --- R3 / R4: corrupt and missing indexes ---

def _write_timestamped(directory, n=30):
    seg = open_segment(directory, 0, interval=1)
    for i in range(n):
        append(seg, make_batch(i, ts=T0 + i * 10))
    seg.close()


def _assert_r3(seg, n=30):
    for i in range(n):
        assert seg.read(i, 1).records.last_batch().last_offset == i
        assert seg.find_offset_by_timestamp(T0 + i * 10).offset == i
        if i + 1 < n:
            assert seg.find_offset_by_timestamp(T0 + i * 10 + 1).offset == i + 1
    assert seg.find_offset_by_timestamp(T0 - 5) == (T0, 0, None)  # before everything: the base
    assert seg.find_offset_by_timestamp(T0 + n * 10) is None


@pytest.mark.parametrize("garbage", ["random", "two-spaces"])
def test_r3_corrupt_indexes_are_rebuilt(tmp_path, garbage):
    _write_timestamped(tmp_path)
    rng = random.Random(3)
    for name in ("00000000000000000000.index", "00000000000000000000.timeindex"):
        data = rng.randbytes(rng.randint(1, 700)) if garbage == "random" else b"  "
        (tmp_path / name).write_bytes(data)
    seg = open_segment(tmp_path, 0, interval=1, file_already_exists=True)
    if garbage == "two-spaces":
        with pytest.raises(CorruptIndexError):
            seg.sanity_check(check_indexes=True)
    assert seg.recover() == 0
    seg.sanity_check(check_indexes=True)
    assert seg.offset_index.entries > 0
    _assert_r3(seg)
    seg.close()


def test_r4_missing_indexes_are_rebuilt(tmp_path):
    _write_timestamped(tmp_path)
    for name in ("00000000000000000000.index", "00000000000000000000.timeindex"):
        (tmp_path / name).unlink()
    seg = open_segment(tmp_path, 0, interval=1, file_already_exists=True)
    with pytest.raises(FileNotFoundError):
        seg.sanity_check()
    assert seg.recover() == 0
    assert seg.offset_index.entries > 0 and seg.time_index.entries > 0
    _assert_r3(seg)
    seg.close()


# --- R12: truncation ---

def test_r12_truncate_to_after_reopen(tmp_path):
    seg = open_segment(tmp_path, 0, interval=1)
    positions = []
    for i in range(100):
        positions.append(seg.size)
        append(seg, make_batch(i))
    seg.close()
    seg = open_segment(tmp_path, 0, interval=1, file_already_exists=True)
    size = seg.size
    assert seg.truncate_to(3) == size - positions[3]
    assert seg.size == positions[3] == seg.log.path.stat().st_size
    assert seg.read_next_offset() == 3
    assert [rel for rel, _ in raw_index(seg)] == [1, 2]
    assert all(rel < 3 for _, rel in raw_time_index(seg))
    assert seg.offset_index.length == 8 * (seg.offset_index.max_index_size // 8)  # active again
    assert seg.max_timestamp_so_far() == T0 + 20
    append(seg, make_batch(3))
    assert seg.read(3, 1).records.last_batch().last_offset == 3
    assert seg.read_next_offset() == 4
    assert seg.truncate_to(1000) == 0  # past the end: nothing
    remaining = seg.size
    assert seg.truncate_to(0) == remaining and seg.size == 0
    assert seg.read_next_offset() == 0 and seg.offset_index.entries == 0
    seg.close()


def test_truncate_to_inside_a_batch_removes_the_whole_batch(tmp_path):
    seg = open_segment(tmp_path, 0, interval=1)
    append(seg, make_batch(0, count=5))
    append(seg, make_batch(5, count=5))
    append(seg, make_batch(10, count=5))
    seg.truncate_to(7)
    assert seg.read_next_offset() == 5
    seg.close()


# --- R16: offset overflow ---

def test_r16_offset_overflow_forces_a_roll_and_never_wraps(tmp_path):
    base = 50
    seg = open_segment(tmp_path, base, interval=1)
    append(seg, make_batch(base))
    size = seg.size
    too_far = base + 2**31
    with pytest.raises(OffsetOverflowError):
        append(seg, make_batch(too_far - 1, count=2))  # last offset base + 2**31
    with pytest.raises(OffsetOverflowError):
        append(seg, make_batch(base - 10))  # below the base
    assert seg.size == size and seg.read_next_offset() == base + 1
    params = dict(max_segment_ms=10**9, max_segment_bytes=10**9, max_timestamp_in_messages=T0,
                  messages_size=100, now=0)
    assert seg.should_roll(RollParams(max_offset_in_messages=too_far, **params))
    assert not seg.should_roll(RollParams(max_offset_in_messages=too_far - 1, **params))
    append(seg, make_batch(too_far - 1))  # the largest relative offset that fits
    assert raw_index(seg)[-1][0] == 2**31 - 1
    assert seg.read_next_offset() == too_far
    assert not seg.has_overflow()
    seg.close()


# --- rolling ---

def test_should_roll_on_size_time_jitter_and_full_index(tmp_path):
    time = MockTime()
    seg = open_segment(tmp_path, 0, interval=0, time=time, roll_jitter_ms=100)

    def params(**kw):
        p = dict(max_segment_ms=1000, max_segment_bytes=10_000, max_timestamp_in_messages=T0,
                 max_offset_in_messages=1, messages_size=100, now=time.milliseconds())
        p.update(kw)
        return RollParams(**p)

    assert not seg.should_roll(params(max_timestamp_in_messages=T0 + 10**9))  # empty: no time roll
    append(seg, make_batch(0, ts=T0))
    assert not seg.should_roll(params(max_timestamp_in_messages=T0 + 900))
    assert seg.should_roll(params(max_timestamp_in_messages=T0 + 901))  # 1000 - jitter 100
    assert seg.should_roll(params(messages_size=10_000 - seg.size + 1))
    assert not seg.should_roll(params(messages_size=10_000 - seg.size))
    seg.close()
    # without record timestamps the creation time (from the clock) counts
    d = tmp_path / "no-ts"
    d.mkdir()
    seg = open_segment(d, 0, interval=0, time=time)
    append(seg, make_batch(0, ts=-1))
    time.sleep(1000)
    assert not seg.should_roll(params(now=time.milliseconds(), max_timestamp_in_messages=-1))
    time.sleep(1)
    assert seg.should_roll(params(now=time.milliseconds(), max_timestamp_in_messages=-1))
    seg.close()
    # a full index rolls
    d = tmp_path / "small"
    d.mkdir()
    seg = open_segment(d, 0, interval=0, max_index_size=3 * 12)
    assert not seg.should_roll(params())
    for i in range(3):
        append(seg, make_batch(i))
    assert seg.time_index.is_full() and seg.should_roll(params())
    seg.close()


def test_clocks():
    t = MockTime(auto_tick_ms=0, current_time_ms=5, current_hi_res_time_ns=7)
    assert (t.milliseconds(), t.nanoseconds()) == (5, 7)
    t.sleep(10)
    assert (t.milliseconds(), t.nanoseconds()) == (15, 10_000_007)
    ticking = MockTime(auto_tick_ms=2, current_time_ms=0)
    assert [ticking.milliseconds() for _ in range(3)] == [2, 4, 6]
    with pytest.raises(ValueError):
        t.set_current_time_ms(1)
    real = SystemTime()
    assert real.milliseconds() > 1_600_000_000_000 and real.nanoseconds() <= real.nanoseconds()


# --- reads ---

def test_read_semantics(tmp_path):
    seg = open_segment(tmp_path, 100, interval=50)
    sizes = []
    for i in range(10):
        data = make_batch(100 + 3 * i, count=3, value=b"z" * 40)
        sizes.append(len(data))
        append(seg, data)
    info = seg.read(104, 1)  # the batch holding 104 (103..105), whole, even above max_size
    assert isinstance(info, FetchDataInfo)
    assert info.fetch_offset_metadata == LogOffsetMetadata(104, 100, sizes[0])
    assert info.records.size_in_bytes == sizes[1] and not info.first_entry_incomplete
    assert [h.base_offset for _, h in info.records.batches()] == [103]
    info = seg.read(104, 10, min_one_message=False)
    assert info.records.size_in_bytes == 10 and info.first_entry_incomplete
    assert seg.read(104, 0, min_one_message=False).records.size_in_bytes == 0
    info = seg.read(100, 10**6)
    assert info.records.size_in_bytes == seg.size
    assert info.records.read_bytes() == seg.log.path.read_bytes()
    assert info.records.fileno() == seg.log.fileno() and info.records.position == 0
    info = seg.read(100, 10**6, max_position=sizes[0] + sizes[1])
    assert [h.base_offset for _, h in info.records.batches()] == [100, 103]
    assert seg.read(130, 100) is None  # past the end
    assert seg.read(99, 100).fetch_offset_metadata.relative_position_in_segment == 0
    with pytest.raises(ValueError):
        seg.read(100, -1)
    assert seg.fetch_upper_bound_offset(seg.offset_index.lookup(100), 1) is not None
    assert FetchDataInfo.empty(7).records.size_in_bytes == 0
    seg.close()


def test_find_offset_by_timestamp_uses_records_and_starting_offset(tmp_path):
    seg = open_segment(tmp_path, 0, interval=1)
    stamps = [50, 10, 70, 30, 90, 60]
    for i, ts in enumerate(stamps):
        append(seg, make_batch(i, ts=T0 + ts))
    assert seg.find_offset_by_timestamp(T0 + 40).offset == 0
    assert seg.find_offset_by_timestamp(T0 + 60).offset == 2
    assert seg.find_offset_by_timestamp(T0 + 40, starting_offset=3).offset == 4
    assert seg.find_offset_by_timestamp(T0 + 91) is None
    seg.close()


def test_concurrent_readers_while_appending(tmp_path, frequent_switches):
    seg = open_segment(tmp_path, 0, interval=64)
    stop = threading.Event()
    errors = []

    def reader():
        rng = random.Random(threading.get_ident())
        while not stop.is_set():
            leo = seg.read_next_offset()
            if leo == 0:
                continue
            t = rng.randrange(leo)
            info = seg.read(t, 1)
            header = info.records.last_batch() if info is not None else None
            if header is None or not header.base_offset <= t <= header.last_offset:
                errors.append((t, header))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for th in threads:
        th.start()
    offset = 0
    for i in range(1500):
        append(seg, make_batch(offset, count=2, value=b"q" * (i % 50)))
        offset += 2
    stop.set()
    for th in threads:
        th.join()
    assert errors == []
    seg.close()


# --- recovery hooks: epochs, producer state, R13 ---

def test_recover_assigns_epochs_and_calls_the_hook(tmp_path):
    seg = open_segment(tmp_path, 0, interval=1)
    epochs = [0, 0, 2, 2, 2, 5, 3, 5]
    for i, e in enumerate(epochs):
        append(seg, make_batch(i, epoch=e))
    cache = LeaderEpochFileCache(tmp_path / files.LEADER_EPOCH_CHECKPOINT_FILE, fsync=False)
    seen = []

    def on_batch(header, batch):
        assert len(batch) == header.size_in_bytes
        seen.append((header.base_offset, bytes(batch[:8])))
        return None

    assert seg.recover(on_batch, cache) == 0
    assert [o for o, _ in seen] == list(range(8))
    assert all(raw == struct.pack(">q", o) for o, raw in seen)
    assert cache.epoch_entries() == [EpochEntry(0, 0), EpochEntry(2, 2), EpochEntry(5, 5)]
    seg.close()


def test_r13_recover_transaction_index(tmp_path):
    pid1, pid2, epoch = 5, 10, 0
    seg = open_segment(tmp_path, 100, interval=1)
    append(seg, make_batch(100, count=2, producer_id=pid1, producer_epoch=epoch, base_sequence=0,
                           is_transactional=True))
    append(seg, make_batch(102, count=2, producer_id=pid2, producer_epoch=epoch, base_sequence=0,
                           is_transactional=True))
    append(seg, make_batch(104, count=2))
    append(seg, encode_end_txn_marker_batch(ControlRecordType.ABORT, producer_id=pid2, producer_epoch=epoch,
                                            coordinator_epoch=0, timestamp=T0, base_offset=106))
    append(seg, encode_end_txn_marker_batch(ControlRecordType.COMMIT, producer_id=pid1, producer_epoch=epoch,
                                            coordinator_epoch=0, timestamp=T0, base_offset=107))

    ongoing = {}  # a minimal stand-in for the producer state manager
    map_end = []

    def on_batch(header, batch):
        aborted = None
        if header.is_control:
            _, records = decode_batch(batch)
            marker = parse_end_txn_marker(records[0].key, records[0].value)
            first = ongoing.pop(header.producer_id)
            lso = min(ongoing.values(), default=header.last_offset + 1)
            if marker.type == ControlRecordType.ABORT:
                aborted = AbortedTxn(header.producer_id, first, header.last_offset, lso)
        elif header.is_transactional:
            ongoing.setdefault(header.producer_id, header.base_offset)
        map_end.append(header.next_offset)
        return aborted

    assert seg.recover(on_batch) == 0
    assert map_end[-1] == 108
    assert seg.txn_index.all_aborted_txns() == [AbortedTxn(pid2, 102, 106, 100)]
    assert seg.collect_aborted_txns(100, 108).aborted_transactions == [AbortedTxn(pid2, 102, 106, 100)]
    assert seg.recover(on_batch=lambda h, b: None) == 0  # recovery resets the txn index
    assert seg.txn_index.all_aborted_txns() == []
    seg.close()


def test_recover_cuts_a_batch_with_non_increasing_offsets(tmp_path):
    seg = open_segment(tmp_path, 0, interval=1)
    append(seg, make_batch(0))
    append(seg, make_batch(1))
    good = seg.size
    seg.log.append(make_batch(1))  # bypasses the segment: a duplicate offset on disk
    total = seg.size
    assert seg.recover() == total - good
    assert seg.size == good and seg.read_next_offset() == 2
    seg.close()


def test_append_rejects_partial_batches(tmp_path):
    seg = open_segment(tmp_path, 0)
    data = make_batch(0)
    with pytest.raises(InvalidRecordError):
        seg.append(0, T0, 0, data + data[:20])
    with pytest.raises(InvalidRecordError):
        seg.append(0, T0, 0, b"\x00" * 70)
    assert seg.size == 0
    seg.append(0, T0, 0, MemoryRecords(data))
    assert seg.read_next_offset() == 1
    seg.close()


# --- memory stays bounded ---

def test_recovery_and_scans_do_not_read_the_whole_segment(tmp_path):
    seg = open_segment(tmp_path, 0, interval=4096)
    value = bytes(random.Random(5).randbytes(60_000))
    for i in range(150):  # ~9 MB
        append(seg, make_batch(i, value=value))
    assert seg.size > 8_000_000
    tracemalloc.start()
    try:
        assert seg.recover() == 0
        assert seg.read_next_offset() == 150
        seg.find_offset_by_timestamp(T0 + 149 * 10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3_000_000
    seg.close()


# --- files ---

def test_kafka_python_reads_our_log_file(tmp_path):
    from kafka.record import MemoryRecords as KafkaMemoryRecords

    seg = open_segment(tmp_path, 0, interval=1)
    append(seg, make_batch(0, count=3))
    append(seg, make_batch(3, count=2, compression=1))  # gzip
    append(seg, make_batch(5, count=1, value=b""))
    seg.close()
    records = KafkaMemoryRecords((tmp_path / "00000000000000000000.log").read_bytes())
    got = []
    while (batch := records.next_batch()) is not None:
        got += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
    stamps = [T0, T0 + 1, T0 + 2, T0 + 30, T0 + 31, T0 + 50]
    assert got == [(o, stamps[o], b"key-%d" % o, b"value" if o < 5 else b"") for o in range(6)]


def test_change_suffixes_delete_and_preallocate(tmp_path):
    seg = open_segment(tmp_path, 7, preallocate=True, init_file_size=1 << 20)
    assert seg.log.path.stat().st_size == 1 << 20 and seg.size == 0
    append(seg, make_batch(7))
    append(seg, make_batch(8))
    seg.change_file_suffixes("", files.DELETED_FILE_SUFFIX)
    assert seg.has_suffix(".deleted")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["00000000000000000007.index.deleted", "00000000000000000007.log.deleted",
                     "00000000000000000007.timeindex.deleted"]
    assert seg.read(8, 1).records.last_batch().last_offset == 8  # still readable
    with pytest.raises(ValueError):
        seg.change_file_suffixes(".swap", "")
    seg.change_file_suffixes(".deleted", "")
    seg.on_become_inactive_segment()
    assert seg.log.path.stat().st_size == seg.size  # preallocated tail trimmed
    seg.set_last_modified(1_500_000_000_000)
    assert seg.last_modified == 1_500_000_000_000
    seg.delete_if_exists()
    assert seg.deleted() and list(tmp_path.iterdir()) == []


def test_preallocated_segment_after_a_crash_recovers_the_zero_tail(tmp_path):
    seg = open_segment(tmp_path, 0, preallocate=True, init_file_size=64 * 1024)
    for i in range(5):
        append(seg, make_batch(i))
    written = seg.size
    seg.flush()
    seg.close_handlers()  # a crash: nothing trimmed
    seg = open_segment(tmp_path, 0, file_already_exists=True)
    assert seg.size == 64 * 1024
    assert seg.recover() == 64 * 1024 - written
    assert seg.read_next_offset() == 5
    seg.close()
    LogSegment.delete_files(tmp_path, 0)
    assert list(tmp_path.iterdir()) == []


def test_open_takes_values_from_a_log_config(tmp_path):
    config = LogConfig.from_props({"index.interval.bytes": 1, "segment.index.bytes": 80,
                                   "segment.jitter.ms": 100, "segment.ms": 1000})
    seg = LogSegment.open(tmp_path, 0, config, time=MockTime())
    assert seg.index_interval_bytes == 1 and 0 <= seg.roll_jitter_ms < 100
    assert seg.offset_index.max_entries == 10 and seg.time_index.max_entries == 6
    seg.close()
    (tmp_path / "plain").mkdir()
    plain = LogSegment.open(tmp_path / "plain", 5, LogConfig.from_props({}), roll_jitter_ms=7)
    assert plain.roll_jitter_ms == 7 and plain.index_interval_bytes == 4096
    plain.delete_if_exists()
