"""Tests of broker/log/loader.py through ``UnifiedLog.create``: leftovers and interrupted
segment replaces (R5), junk after a clean close (R2), corrupt and missing indexes (R3, R4),
the recovery point (R6), the clean-shutdown marker (R7), recovery only after the recovery
point from a producer snapshot (R8), corrupt snapshots (R9) and snapshot flush failures
(R11) at the log level, truncation at the first invalid byte with later segments deleted,
a log start offset past the log end, and each producer's dedup window after an unclean
restart (I7: the last five batches after the newest snapshot)."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from broker.log import files
from broker.log.clock import MockTime
from broker.log.config import LogConfig
from broker.log.errors import KafkaStorageError
from broker.log.scheduler import Scheduler
from broker.log.segment import LogSegment
from broker.log.unified_log import UnifiedLog
from broker.record.batch import decode_batch, encode_batch, ensure_valid, iter_batch_headers


def config(**props) -> LogConfig:
    return LogConfig.from_props({k.replace("_", "."): v for k, v in props.items()})


class Env:
    def __init__(self, tmp_path: Path, **props) -> None:
        self.time = MockTime()
        self.scheduler = Scheduler(self.time)
        self.dir = tmp_path / "topic-0"
        self.config = config(**props)

    def open(self, clean: bool = True, recovery_point: int = 0, **kw) -> UnifiedLog:
        return UnifiedLog.create(self.dir, kw.pop("config", self.config), time=self.time,
                                 scheduler=self.scheduler, last_shutdown_clean=clean,
                                 recovery_point=recovery_point, **kw)

    def batch(self, value: bytes, key: bytes | None = None, ts: int | None = None, **kw) -> bytes:
        ts = self.time.milliseconds() if ts is None else ts
        return encode_batch([(key, value, ts)], **kw)


def all_records(ulog: UnifiedLog):
    """(offset, key, value, timestamp) of every record, checking every CRC on the way."""
    out = []
    for seg in ulog.segments:
        data = seg.log.path.read_bytes()
        end = 0
        for pos, header in iter_batch_headers(data):
            ensure_valid(data, pos)
            _, records = decode_batch(data, pos)
            out.extend((r.offset, r.key, r.value, r.timestamp) for r in records)
            end = pos + header.size_in_bytes
        assert end == len(data), f"{seg} has bytes after its last batch"
    offsets = [r[0] for r in out]
    assert offsets == sorted(set(offsets)), "an offset appears twice or out of order"
    return out


def index_summary(seg: LogSegment):
    oi, ti = seg.offset_index, seg.time_index
    last_oi = oi.entry(oi.entries - 1) if oi.entries else None
    return oi.entries, last_oi, ti.last_entry


# --- R5: leftovers and interrupted replaces ---

def test_r5_orphan_indexes_and_deleted_files_are_removed(tmp_path):
    env = Env(tmp_path)
    ulog = env.open()
    ulog.append_as_leader(env.batch(b"a"))
    ulog.close()
    for suffix in (files.INDEX_FILE_SUFFIX, files.TIME_INDEX_FILE_SUFFIX, files.TXN_INDEX_FILE_SUFFIX):
        files.segment_file(env.dir, 5, suffix).write_bytes(b"\0" * 16)
    (env.dir / "00000000000000000003.log.deleted").write_bytes(b"junk")
    (env.dir / "00000000000000000003.index.deleted").write_bytes(b"junk")
    (env.dir / "leader-epoch-checkpoint.tmp").write_bytes(b"half")
    ulog = env.open()
    names = sorted(p.name for p in env.dir.iterdir())
    assert not any(n.startswith("00000000000000000005") for n in names)
    assert not any(n.endswith((".deleted", ".tmp")) for n in names)
    assert [r[2] for r in all_records(ulog)] == [b"a"]
    ulog.close()


def _three_segments(env: Env) -> list:
    ulog = env.open()
    for i in range(30):
        if i in (10, 20):
            ulog.roll()
        ulog.append_as_leader(env.batch(b"value-%d" % i, key=b"key-%d" % i))
    assert [s.base_offset for s in ulog.segments] == [0, 10, 20]
    records = all_records(ulog)
    ulog.close()
    return records


def _write_cleaned_segment(env: Env) -> None:
    """The new segment of a replace of [0, 10) + [10, 20): the same batches in one file,
    with its indexes, all with the .cleaned suffix."""
    data = files.log_file(env.dir, 0).read_bytes() + files.log_file(env.dir, 10).read_bytes()
    files.log_file(env.dir, 0, files.CLEANED_FILE_SUFFIX).write_bytes(data)
    seg = LogSegment.open(env.dir, 0, env.config, file_already_exists=True, file_suffix=files.CLEANED_FILE_SUFFIX)
    assert seg.recover() == 0
    seg.close()


def _rename(env: Env, base: int, old: str, new: str, only=None) -> None:
    for suffix in only or (files.LOG_FILE_SUFFIX, files.INDEX_FILE_SUFFIX, files.TIME_INDEX_FILE_SUFFIX):
        src = files.segment_file(env.dir, base, suffix, old)
        if src.exists():
            src.rename(files.segment_file(env.dir, base, suffix, new))


CRASH_POINTS = {
    # name: (steps after the .cleaned files are written, expected segment bases)
    "cleaned": ([], [0, 10, 20]),
    "swap": ([("swap",)], [0, 20]),
    "old_partially_deleted": ([("swap",), ("delete_old", 0)], [0, 20]),
    "swap_partially_renamed": ([("swap",), ("delete_old", 0), ("delete_old", 10), ("live_log",)], [0, 20]),
    "before_old_files_deleted": ([("swap",), ("delete_old", 0), ("delete_old", 10), ("live_all",)], [0, 20]),
}


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("crash_point", sorted(CRASH_POINTS))
def test_r5_crash_at_each_step_of_a_segment_replace(tmp_path, crash_point, clean):
    env = Env(tmp_path, index_interval_bytes=1)
    before = _three_segments(env)
    _write_cleaned_segment(env)
    steps, expected_bases = CRASH_POINTS[crash_point]
    for step in steps:
        if step[0] == "swap":
            _rename(env, 0, files.CLEANED_FILE_SUFFIX, files.SWAP_FILE_SUFFIX)
        elif step[0] == "delete_old":
            _rename(env, step[1], "", files.DELETED_FILE_SUFFIX)
        elif step[0] == "live_log":
            _rename(env, 0, files.SWAP_FILE_SUFFIX, "", only=[files.LOG_FILE_SUFFIX])
        elif step[0] == "live_all":
            _rename(env, 0, files.SWAP_FILE_SUFFIX, "")
    ulog = env.open(clean=clean, recovery_point=30 if clean else 0)
    assert [s.base_offset for s in ulog.segments] == expected_bases
    after = all_records(ulog)
    assert {r[1] for r in after} == {r[1] for r in before}
    assert after == before
    leftovers = [p.name for p in env.dir.iterdir()
                 if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    assert leftovers == []
    assert ulog.append_as_leader(env.batch(b"next")).first_offset == 30
    ulog.close()


def test_r5_swap_files_of_an_incomplete_split_are_dropped(tmp_path):
    env = Env(tmp_path)
    before = _three_segments(env)
    # a split left a .swap above the smallest .cleaned file: both go, the old segments stay
    shutil.copy(files.log_file(env.dir, 20), files.log_file(env.dir, 20, files.SWAP_FILE_SUFFIX))
    shutil.copy(files.log_file(env.dir, 10), files.log_file(env.dir, 10, files.CLEANED_FILE_SUFFIX))
    ulog = env.open(clean=True, recovery_point=30)
    assert [s.base_offset for s in ulog.segments] == [0, 10, 20]
    assert all_records(ulog) == before
    ulog.close()


# --- R2, R3, R4: damaged files ---

def test_r2_junk_after_a_clean_close_is_cut_and_records_survive(tmp_path):
    rng = random.Random(2)
    for trial in range(5):
        env = Env(tmp_path / str(trial), segment_bytes=2000, index_interval_bytes=100)
        ulog = env.open()
        for i in range(60):
            env.time.sleep(1)
            ulog.append_as_leader(env.batch(b"v-%d" % i * rng.randint(1, 5), key=b"k%d" % i))
        before = all_records(ulog)
        active = ulog.active_segment
        log_path, index_path = active.log.path, active.offset_index_file
        ulog.close()
        with open(log_path, "ab") as f:
            f.write(os.urandom(rng.randint(1, 1024)))
        with open(index_path, "ab") as f:
            f.write(os.urandom(rng.randint(1, 1024)))
        ulog = env.open(clean=False, recovery_point=30)
        assert ulog.log_end_offset == 60
        assert all_records(ulog) == before
        assert ulog.append_as_leader(env.batch(b"next")).first_offset == 60
        ulog.close()


# ids and values fixed at collection: parallel workers (pytest-xdist) must collect the same tests
@pytest.mark.parametrize("garbage", [b"  ", random.Random(3).randbytes(100)], ids=["two-spaces", "random"])
def test_r3_corrupt_indexes_are_rebuilt(tmp_path, garbage):
    env = Env(tmp_path, segment_bytes=1000, index_interval_bytes=1)
    ulog = env.open()
    t0 = env.time.milliseconds() - 10_000
    for i in range(30):
        ulog.append_as_leader(env.batch(b"v", ts=t0 + 10 * i))
    ulog.close()
    for path in list(env.dir.glob("*.index")) + list(env.dir.glob("*.timeindex")):
        path.write_bytes(garbage)
    ulog = env.open(clean=False)
    for i in range(30):
        first = next(iter(ulog.read(i, 1).records.batches()))[1]
        assert first.last_offset == i
        assert ulog.fetch_offset_by_timestamp(t0 + 10 * i).offset == i
        assert ulog.fetch_offset_by_timestamp(t0 + 10 * i - 9).offset == i
    ulog.close()


def test_r4_missing_indexes_are_rebuilt_even_after_a_clean_shutdown(tmp_path):
    env = Env(tmp_path, segment_bytes=1000, index_interval_bytes=1)
    ulog = env.open()
    t0 = env.time.milliseconds() - 10_000
    for i in range(30):
        ulog.append_as_leader(env.batch(b"v", ts=t0 + 10 * i))
    n = ulog.num_segments
    ulog.close()
    for path in list(env.dir.glob("*.index")) + list(env.dir.glob("*.timeindex")):
        path.unlink()
    ulog = env.open(clean=True, recovery_point=30)
    assert len(ulog.load_stats.recovered_segments) == n
    assert all(s.offset_index.entries > 0 for s in ulog.segments)
    for i in range(30):
        assert next(iter(ulog.read(i, 1).records.batches()))[1].last_offset == i
        assert ulog.fetch_offset_by_timestamp(t0 + 10 * i).offset == i
    ulog.close()


def test_corruption_truncates_at_the_first_invalid_byte_and_deletes_later_segments(tmp_path):
    env = Env(tmp_path)
    _three_segments(env)
    path = files.log_file(env.dir, 10)
    data = bytearray(path.read_bytes())
    positions = [pos for pos, _ in iter_batch_headers(data)]
    data[positions[4] + 70] ^= 0xFF  # inside the 5th batch's records: CRC mismatch
    path.write_bytes(bytes(data))
    ulog = env.open(clean=False, recovery_point=5)
    assert ulog.load_stats.recovered_segments == [0, 10]
    assert ulog.load_stats.deleted_segments == [20]
    assert ulog.load_stats.truncated_bytes == len(data) - positions[4]
    assert ulog.log_end_offset == 14 and ulog.recovery_point == 5
    assert [r[0] for r in all_records(ulog)] == list(range(14))
    assert not files.log_file(env.dir, 20).exists()
    assert ulog.append_as_leader(env.batch(b"next")).first_offset == 14
    ulog.close()


def test_log_start_offset_checkpoint_past_the_log_end_restarts_empty(tmp_path):
    env = Env(tmp_path)
    _three_segments(env)
    ulog = env.open(clean=True, recovery_point=30, log_start_offset=1000)
    assert [s.base_offset for s in ulog.segments] == [1000]
    assert (ulog.log_start_offset, ulog.log_end_offset) == (1000, 1000)
    assert ulog.leader_epoch_cache.epoch_entries() == []
    assert ulog.append_as_leader(env.batch(b"x")).first_offset == 1000
    ulog.close()


# --- R6, R7, R8 ---

def test_r6_recovery_point(tmp_path):
    env = Env(tmp_path, index_interval_bytes=1)
    size = len(env.batch(b"x" * 100))
    env.config = config(index_interval_bytes=1, segment_bytes=7 * size)
    ulog = env.open()
    for i in range(100):
        env.time.sleep(1)
        ulog.append_as_leader(env.batch(b"%03d" % i * 33 + b"x"))
    assert len(ulog.active_segment.log.path.read_bytes()) <= 7 * size
    leo = ulog.log_end_offset
    ulog.close()
    clean = env.open(clean=True, recovery_point=leo)
    a = (clean.log_end_offset, [index_summary(s) for s in clean.segments])
    assert clean.recovery_point == leo and clean.load_stats.recovered_segments == []
    clean.close()
    unclean = env.open(clean=False, recovery_point=10)
    b = (unclean.log_end_offset, [index_summary(s) for s in unclean.segments])
    assert a == b
    assert unclean.load_stats.recovered_segments == [s.base_offset for s in unclean.segments if s.base_offset >= 7]
    assert unclean.recovery_point == 10
    unclean.append_as_leader(env.batch(b"more"))
    assert unclean.recovery_point == 10  # only an actual flush moves it
    unclean.flush()
    assert unclean.recovery_point == unclean.log_end_offset == leo + 1
    unclean.close()


def test_r7_clean_shutdown_marker_means_no_segment_is_recovered(tmp_path, monkeypatch):
    env = Env(tmp_path, segment_bytes=500)
    ulog = env.open()
    for i in range(20):
        ulog.append_as_leader(env.batch(b"v%d" % i, producer_id=3, producer_epoch=0, base_sequence=i))
    leo = ulog.log_end_offset
    ulog.close()
    assert files.producer_snapshot_file(env.dir, leo).exists()
    calls = []
    real_recover = LogSegment.recover
    monkeypatch.setattr(LogSegment, "recover",
                        lambda self, *a, **kw: (calls.append(self.base_offset), real_recover(self, *a, **kw))[1])
    ulog = env.open(clean=True, recovery_point=leo)
    assert calls == [] and ulog.load_stats.recovered_segments == [] == ulog.load_stats.replayed_segments
    assert ulog.log_end_offset == leo
    assert ulog.append_as_leader(env.batch(b"v19", producer_id=3, producer_epoch=0,
                                           base_sequence=19)).first_offset == 19  # still a duplicate
    ulog.close_handlers()
    ulog = env.open(clean=False, recovery_point=0)
    assert calls == [s.base_offset for s in ulog.segments]
    ulog.close()


def _producer_log(env: Env, n: int = 60) -> UnifiedLog:
    ulog = env.open()
    for i in range(n):
        ulog.append_as_leader(env.batch(b"%d" % i, producer_id=9, producer_epoch=0, base_sequence=i))
    return ulog


def test_r8_only_segments_after_the_recovery_point_are_scanned(tmp_path):
    env = Env(tmp_path, segment_bytes=64 * 10)
    ulog = _producer_log(env, 101)
    bases = [s.base_offset for s in ulog.segments]
    assert len(bases) >= 5
    rp_segment, after_rp = bases[-4], bases[-3]
    before_rp = [b for b in bases if b < rp_segment]
    ulog.producer_state_manager.delete_snapshots_before(bases[-2])
    ulog.close()
    # no snapshot at or below the recovery point segment: the whole prefix is replayed
    ulog = env.open(clean=False, recovery_point=rp_segment)
    assert ulog.load_stats.replayed_segments == before_rp
    assert ulog.load_stats.recovered_segments == bases[-4:]
    assert ulog.append_as_leader(env.batch(b"100", producer_id=9, producer_epoch=0,
                                           base_sequence=100)).first_offset == 100
    ulog.producer_state_manager.delete_snapshots_before(rp_segment)
    ulog.close()
    # a snapshot at the recovery point segment: nothing before it is read
    assert files.producer_snapshot_file(env.dir, rp_segment).exists()
    ulog = env.open(clean=False, recovery_point=rp_segment + 1)
    assert ulog.load_stats.replayed_segments == []
    assert ulog.load_stats.recovered_segments == bases[-4:]
    assert after_rp in ulog.load_stats.recovered_segments
    assert ulog.append_as_leader(env.batch(b"100", producer_id=9, producer_epoch=0,
                                           base_sequence=100)).first_offset == 100
    ulog.close()


@pytest.mark.parametrize("damage", ["empty", "half", "zeros"])
def test_r9_corrupt_latest_snapshot_falls_back_to_the_previous_one(tmp_path, damage):
    env = Env(tmp_path, segment_bytes=64 * 10)
    ulog = _producer_log(env, 40)
    last = ulog.active_segment.base_offset
    ulog.close_handlers()  # crash: the newest snapshot is the one of the last roll
    path = files.producer_snapshot_file(env.dir, last)
    data = path.read_bytes()
    path.write_bytes({"empty": b"", "half": data[:len(data) // 2], "zeros": b"\0" * 37}[damage])
    ulog = env.open(clean=False, recovery_point=last)
    assert ulog.load_stats.replayed_segments  # replayed from the older snapshot
    assert ulog.append_as_leader(env.batch(b"39", producer_id=9, producer_epoch=0,
                                           base_sequence=39)).first_offset == 39
    assert ulog.append_as_leader(env.batch(b"40", producer_id=9, producer_epoch=0,
                                           base_sequence=40)).first_offset == 40
    ulog.close()


def test_r11_snapshot_flush_failure_does_not_advance_the_recovery_point(tmp_path, monkeypatch):
    env = Env(tmp_path)
    ulog = _producer_log(env, 5)
    import broker.log.unified_log as ul

    def broken(path):
        raise OSError(5, "fsync of the snapshot failed")

    monkeypatch.setattr(ul, "_fsync_file", broken)
    ulog.roll()
    env.scheduler.run_pending()
    assert ulog.recovery_point == 0 and ulog.is_offline
    with pytest.raises(KafkaStorageError):
        ulog.append_as_leader(env.batch(b"5", producer_id=9, producer_epoch=0, base_sequence=5))
    ulog.close_handlers()
    monkeypatch.undo()
    ulog = env.open(clean=False, recovery_point=0)
    assert not list(env.dir.glob("*.tmp"))
    assert ulog.append_as_leader(env.batch(b"4", producer_id=9, producer_epoch=0,
                                           base_sequence=4)).first_offset == 4
    ulog.close()


# --- the dedup window across an unclean restart (I7, issue 19) ---

def _five_batches(env: Env, ulog: UnifiedLog, pid: int, first_seq: int) -> list[tuple[bytes, int]]:
    out = []
    for seq in range(first_seq, first_seq + 5):
        batch = env.batch(b"%d" % seq, producer_id=pid, producer_epoch=0, base_sequence=seq)
        out.append((batch, ulog.append_as_leader(batch).first_offset))
    return out


@pytest.mark.parametrize("recovery_point", ["zero", "active-segment", "missing-index"])
def test_i7_a_crash_keeps_the_five_batch_window_replayed_from_the_log(tmp_path, recovery_point):
    """A producer's last five batches, all after the newest snapshot on disk when the
    process dies (the client had them in flight), are each a duplicate after the unclean
    restart: the recovery pass's own snapshot at the log end (one batch per producer, the
    snapshot format's limit) must not replace the state the replay of the log rebuilds.
    Found by tests/test_reliability_crash_loops.py (I7 whole-system): before the fix the
    first four were answered OUT_OF_ORDER_SEQUENCE_NUMBER."""
    env = Env(tmp_path, segment_bytes=64 * 10)
    ulog = _producer_log(env, 20)  # rolls: snapshots at the segment bases
    ulog.append_as_leader(env.batch(b"other", producer_id=5, producer_epoch=0, base_sequence=0))
    window = _five_batches(env, ulog, 9, 20)
    last_roll = ulog.active_segment.base_offset
    assert last_roll <= window[0][1], "the window must be after the newest snapshot"
    leo = ulog.log_end_offset
    ulog.close_handlers()  # SIGKILL: no snapshot at the log end, no marker
    if recovery_point == "missing-index":  # the active segment is recovered by pass 3
        files.offset_index_file(env.dir, last_roll).unlink()
    ulog = env.open(clean=False, recovery_point=0 if recovery_point == "zero" else last_roll)
    assert ulog.load_stats.recovered_segments
    for batch, offset in window:
        info = ulog.append_as_leader(batch)
        assert (info.first_offset, ulog.log_end_offset) == (offset, leo)
    assert ulog.append_as_leader(env.batch(b"25", producer_id=9, producer_epoch=0,
                                           base_sequence=25)).first_offset == leo
    ulog.close()


def test_i7_a_window_before_the_newest_snapshot_keeps_only_its_last_batch(tmp_path):
    """The limit Kafka shares: a snapshot holds one batch per producer, so of a window
    split by a roll only the batches after the roll's snapshot and the last one before it
    (the one in the snapshot) are duplicates after a crash; an older one is
    OUT_OF_ORDER_SEQUENCE_NUMBER, never appended again."""
    from broker.log.errors import OutOfOrderSequenceError

    env = Env(tmp_path, segment_bytes=64 * 10)
    ulog = _producer_log(env, 7)
    window = _five_batches(env, ulog, 9, 7)
    roll = ulog.active_segment.base_offset
    assert window[1][1] < roll <= window[-1][1], [o for _, o in window]
    in_snapshot = max(o for _, o in window if o < roll)
    leo = ulog.log_end_offset
    ulog.close_handlers()
    ulog = env.open(clean=False, recovery_point=0)
    for batch, offset in window:
        if offset >= in_snapshot:
            assert ulog.append_as_leader(batch).first_offset == offset
        else:
            with pytest.raises(OutOfOrderSequenceError):
                ulog.append_as_leader(batch)
        assert ulog.log_end_offset == leo
    ulog.close()
