"""Tests of broker/log/index.py: OffsetIndex, TimeIndex, LazyIndex (byte layout, search,
preallocation and trimming, reopen after a crash, sanity checks, R16 overflow)."""

from __future__ import annotations

import bisect
import os
import random
import struct
import sys
import threading

import pytest

from broker.log.errors import CorruptIndexError, OffsetOverflowError
from broker.log.index import (
    IndexFullError,
    InvalidOffsetError,
    LazyIndex,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)

BASE = 45


@pytest.fixture
def frequent_switches():
    """Switch threads every few microseconds so that races are actually exercised."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def offset_index(tmp_path, base=BASE, max_size=30 * 8, name="x.index"):
    return OffsetIndex(tmp_path / name, base, max_size)


def time_index(tmp_path, base=BASE, max_size=30 * 12, name="x.timeindex"):
    return TimeIndex(tmp_path / name, base, max_size)


def raw_entries(path, fmt):
    data = path.read_bytes()
    size = struct.calcsize(fmt)
    return [struct.unpack_from(fmt, data, i) for i in range(0, len(data) - size + 1, size)]


# --- OffsetIndex ---

def test_new_index_is_preallocated_rounded_down_and_trimmed_on_close(tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", BASE, 100)
    assert (tmp_path / "a.index").stat().st_size == 96
    assert idx.max_entries == 12 and idx.entries == 0 and not idx.is_full()
    idx.append(BASE + 3, 100)
    idx.append(BASE + 9, 4000)
    idx.close()
    path = tmp_path / "a.index"
    assert path.stat().st_size == 16
    assert path.read_bytes() == struct.pack(">iiii", 3, 100, 9, 4000)
    t = TimeIndex(tmp_path / "a.timeindex", BASE, 100)
    assert (tmp_path / "a.timeindex").stat().st_size == 96
    t.maybe_append(1000, BASE + 3)
    t.close()
    assert (tmp_path / "a.timeindex").read_bytes() == struct.pack(">qi", 1000, 3)


def test_max_index_size_smaller_than_an_entry_is_rejected(tmp_path):
    with pytest.raises(ValueError):
        OffsetIndex(tmp_path / "a.index", 0, 7)
    assert not (tmp_path / "a.index").exists()


def test_lookup_returns_greatest_entry_at_or_below_target(tmp_path):
    idx = offset_index(tmp_path)
    assert idx.lookup(BASE + 100) == OffsetPosition(BASE, 0)  # empty
    entries = [(BASE + 2 * i + 1, 10 * i + 7) for i in range(20)]
    for o, p in entries:
        idx.append(o, p)
    for target in range(BASE - 3, BASE + 50):
        below = [e for e in entries if e[0] <= target]
        expected = below[-1] if below else (BASE, 0)
        assert idx.lookup(target) == expected
    assert idx.entry(3) == entries[3]
    with pytest.raises(IndexError):
        idx.entry(20)
    assert idx.last_offset == entries[-1][0]


def test_lookup_matches_bisect_across_the_warm_section(tmp_path):
    rng = random.Random(7)
    n = 5000  # warm section = 1024 entries for the offset index, 682 for the time index
    idx = OffsetIndex(tmp_path / "big.index", 0, n * 8)
    tix = TimeIndex(tmp_path / "big.timeindex", 0, (n + 1) * 12)
    offsets, positions, stamps = [], [], []
    o = p = ts = 0
    for _ in range(n):
        o += rng.randint(1, 5)
        p += rng.randint(1, 500)
        ts += rng.randint(1, 9)
        idx.append(o, p)
        tix.maybe_append(ts, o)
        offsets.append(o)
        positions.append(p)
        stamps.append(ts)
    assert idx.is_full()
    for target in [rng.randint(-5, o + 5) for _ in range(3000)] + offsets[:5] + offsets[-5:]:
        i = bisect.bisect_right(offsets, target) - 1
        assert idx.lookup(target) == ((offsets[i], positions[i]) if i >= 0 else (0, 0))
    for target in [rng.randint(-5, ts + 5) for _ in range(3000)]:
        i = bisect.bisect_right(stamps, target) - 1
        assert tix.lookup(target) == ((stamps[i], offsets[i]) if i >= 0 else (-1, 0))


def test_append_rejects_out_of_order_and_full(tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", BASE, 3 * 8)
    idx.append(BASE + 5, 10)
    with pytest.raises(InvalidOffsetError):
        idx.append(BASE + 5, 20)
    with pytest.raises(InvalidOffsetError):
        idx.append(BASE + 4, 20)
    idx.append(BASE + 6, 20)
    idx.append(BASE + 7, 30)
    assert idx.is_full()
    with pytest.raises(IndexFullError):
        idx.append(BASE + 8, 40)
    assert idx.entries == 3


def test_r16_relative_offset_overflow_raises_and_writes_nothing(tmp_path):
    base = 10_000_000_000
    idx = OffsetIndex(tmp_path / "a.index", base, 10 * 8)
    tix = TimeIndex(tmp_path / "a.timeindex", base, 10 * 12)
    assert idx.can_append_offset(base + 2**31 - 1)
    assert not idx.can_append_offset(base + 2**31)
    assert not idx.can_append_offset(base - 1)
    with pytest.raises(OffsetOverflowError):
        idx.append(base + 2**31, 1)
    with pytest.raises(OffsetOverflowError):
        idx.append(base - 1, 1)
    with pytest.raises(OffsetOverflowError):
        tix.maybe_append(5, base + 2**31)
    assert idx.entries == 0 and tix.entries == 0
    idx.append(base + 2**31 - 1, 1)
    assert idx.lookup(base + 2**31 - 1) == (base + 2**31 - 1, 1)
    idx.close()
    assert raw_entries(tmp_path / "a.index", ">ii") == [(2**31 - 1, 1)]


def test_truncate_to_three_cases(tmp_path):
    idx = offset_index(tmp_path)
    for i in range(1, 10):
        idx.append(BASE + 10 * i, 100 * i)
    idx.truncate_to(BASE + 95)  # no exact entry: keep entries <= 90
    assert idx.entries == 9 and idx.last_offset == BASE + 90
    idx.truncate_to(BASE + 50)  # exact entry: drop it and the rest
    assert idx.entries == 4 and idx.last_offset == BASE + 40
    idx.truncate_to(BASE + 45)
    assert idx.entries == 4
    idx.truncate_to(BASE)  # nothing <= target
    assert idx.entries == 0 and idx.last_offset == BASE
    idx.append(BASE + 1, 5)  # appends continue after truncation
    assert idx.lookup(BASE + 3) == (BASE + 1, 5)
    idx.truncate()
    assert idx.entries == 0


def test_fetch_upper_bound_offset(tmp_path):
    idx = offset_index(tmp_path)
    for i in range(1, 6):
        idx.append(BASE + i, i * 100)
    assert idx.fetch_upper_bound_offset(OffsetPosition(BASE, 0), 250) == (BASE + 3, 300)
    assert idx.fetch_upper_bound_offset(OffsetPosition(BASE, 0), 300) == (BASE + 3, 300)
    assert idx.fetch_upper_bound_offset(OffsetPosition(BASE, 0), 50) == (BASE + 1, 100)
    assert idx.fetch_upper_bound_offset(OffsetPosition(BASE + 4, 400), 200) is None


def test_reopen_trimmed_index_counts_file_size(tmp_path):
    idx = offset_index(tmp_path)
    for i in range(1, 8):
        idx.append(BASE + i, i * 10)
    idx.close()
    again = OffsetIndex(tmp_path / "x.index", BASE, 30 * 8)
    assert again.entries == 7 and again.max_entries == 7 and again.is_full()
    assert again.last_offset == BASE + 7
    again.sanity_check()
    again.resize(30 * 8)  # the log layer does this for the active segment
    assert not again.is_full()
    again.append(BASE + 8, 80)
    assert again.lookup(BASE + 100) == (BASE + 8, 80)


def test_reopen_after_crash_ignores_the_preallocated_zero_tail(tmp_path):
    idx = offset_index(tmp_path)
    tix = time_index(tmp_path)
    for i in range(1, 6):
        idx.append(BASE + i, i * 10)
        tix.maybe_append(1000 + i, BASE + i)
    idx.flush()
    tix.flush()
    idx.close_handler()  # a crash: nothing trimmed
    tix.close_handler()
    assert (tmp_path / "x.index").stat().st_size == 30 * 8
    again = offset_index(tmp_path)
    tagain = time_index(tmp_path)
    # Kafka would count 30 entries here; the zero tail is not an entry
    assert again.entries == 5 and again.last_offset == BASE + 5
    assert tagain.entries == 5 and tagain.last_entry == (1005, BASE + 5)
    again.append(BASE + 6, 60)
    tagain.maybe_append(1006, BASE + 6)
    assert again.lookup(BASE + 10) == (BASE + 6, 60)
    assert tagain.lookup(5000) == (1006, BASE + 6)


def test_reopen_drops_a_torn_last_entry(tmp_path):
    idx = offset_index(tmp_path)
    for i in range(1, 6):
        idx.append(BASE + i, i * 10)
    idx.close_handler()
    with open(tmp_path / "x.index", "r+b") as f:  # a torn 6th entry: offset goes backwards
        f.seek(5 * 8)
        f.write(struct.pack(">ii", 2, 0))
    again = offset_index(tmp_path)
    assert again.entries == 5 and again.last_offset == BASE + 5


def test_sanity_check(tmp_path):
    (tmp_path / "bad.index").write_bytes(b"  ")  # two spaces (R3)
    idx = OffsetIndex(tmp_path / "bad.index", BASE, 80)
    assert idx.entries == 0
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    (tmp_path / "neg.index").write_bytes(struct.pack(">ii", -4, 10))
    assert OffsetIndex(tmp_path / "neg.index", BASE, 80).entries == 0  # not a valid entry
    (tmp_path / "t.timeindex").write_bytes(struct.pack(">qiqi", 500, 1, 400, 2))
    t = TimeIndex(tmp_path / "t.timeindex", BASE, 120)
    # the tail entry goes backwards in time, so open() keeps only the first one
    assert t.entries == 1
    t.sanity_check()
    (tmp_path / "u.timeindex").write_bytes(struct.pack(">qi", 5, 1) + b"\x01")
    with pytest.raises(CorruptIndexError):
        TimeIndex(tmp_path / "u.timeindex", BASE, 120).sanity_check()


def test_sanity_check_last_offset_below_base(tmp_path):
    idx = offset_index(tmp_path)
    idx.append(BASE + 1, 10)
    idx.append(BASE + 2, 20)
    # simulate a corrupt entry count (as Kafka counts a file) with a negative last entry
    from broker.log import index as index_module
    with open(idx.file, "r+b") as f:  # the mapping is read-only: write the file
        f.seek(8)
        f.write(index_module.OFFSET_ENTRY.pack(-3, 30))
    idx._on_entries_changed()
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()


# --- TimeIndex ---

def test_time_index_maybe_append_semantics(tmp_path):
    t = TimeIndex(tmp_path / "t.timeindex", BASE, 4 * 12)
    assert t.last_entry == (-1, BASE)
    assert t.lookup(10) == (-1, BASE)
    t.maybe_append(100, BASE + 2)
    t.maybe_append(100, BASE + 2)  # same entry again (close after roll): ignored
    t.maybe_append(100, BASE + 3)  # same timestamp: ignored
    assert t.entries == 1
    with pytest.raises(InvalidOffsetError):
        t.maybe_append(150, BASE + 1)  # offset going back
    with pytest.raises(InvalidOffsetError):
        t.maybe_append(90, BASE + 5)  # timestamp going back
    t.maybe_append(200, BASE + 5)
    t.maybe_append(300, BASE + 6)
    assert t.is_full()  # 3 of 4 slots: the last one is reserved
    with pytest.raises(IndexFullError):
        t.maybe_append(400, BASE + 7)
    t.maybe_append(400, BASE + 7, skip_full_check=True)
    assert t.entries == 4
    with pytest.raises(IndexFullError):
        t.maybe_append(500, BASE + 8, skip_full_check=True)
    t.maybe_append(400, BASE + 7, skip_full_check=True)  # no-op, no error
    assert t.lookup(99) == (-1, BASE)
    assert t.lookup(100) == (100, BASE + 2)
    assert t.lookup(250) == (200, BASE + 5)
    assert t.lookup(10**12) == (400, BASE + 7)
    assert t.entry(1) == TimestampOffset(200, BASE + 5)


def test_time_index_truncate_to_by_offset(tmp_path):
    t = time_index(tmp_path)
    for i in range(1, 10):
        t.maybe_append(1000 * i, BASE + 10 * i)
    t.truncate_to(BASE + 55)
    assert t.entries == 5 and t.last_entry == (5000, BASE + 50)
    t.truncate_to(BASE + 50)
    assert t.entries == 4 and t.last_entry == (4000, BASE + 40)
    t.truncate_to(0)
    assert t.entries == 0 and t.last_entry == (-1, BASE)
    t.maybe_append(7, BASE + 1)
    assert t.lookup(7) == (7, BASE + 1)


def test_resize_reset_rename_delete(tmp_path):
    idx = offset_index(tmp_path)
    for i in range(1, 4):
        idx.append(BASE + i, i)
    idx.trim_to_valid_size()
    assert idx.length == 24 and idx.is_full()
    assert idx.lookup(BASE + 2) == (BASE + 2, 2)
    idx.reset()
    assert idx.entries == 0 and idx.length == 30 * 8
    idx.append(BASE + 9, 9)
    idx.rename_to(tmp_path / "y.index.deleted")
    assert idx.file == tmp_path / "y.index.deleted" and not (tmp_path / "x.index").exists()
    idx.append(BASE + 10, 10)
    assert idx.lookup(BASE + 10) == (BASE + 10, 10)
    assert idx.delete_if_exists() is True
    assert not idx.file.exists()
    assert idx.lookup(BASE + 10) == (BASE, 0)  # a closed index answers "no entry"
    with pytest.raises(ValueError):
        idx.append(BASE + 11, 11)


def test_readers_see_only_published_entries_while_a_writer_appends(tmp_path, frequent_switches):
    idx = OffsetIndex(tmp_path / "c.index", 0, 20000 * 8)
    stop = threading.Event()
    errors = []

    def reader():
        rng = random.Random(threading.get_ident())
        while not stop.is_set():
            n = idx.entries
            target = rng.randint(0, 2 * max(n, 1) + 2)
            o, p = idx.lookup(target)
            # entries are (2k+1 -> 10k); the lookup is a published one or the default
            if not ((o, p) == (0, 0) or (o % 2 == 1 and p == 10 * (o // 2) and o <= target)):
                errors.append((target, o, p))

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for k in range(20000):
        idx.append(2 * k + 1, 10 * k)
    stop.set()
    for t in threads:
        t.join()
    assert errors == []


# --- LazyIndex ---

def test_lazy_index_creates_the_file_on_first_use(tmp_path):
    lazy = LazyIndex.for_offset(tmp_path / "l.index", BASE, 80)
    assert not lazy.is_loaded and not (tmp_path / "l.index").exists()
    lazy.rename_to(tmp_path / "l.index.swap")  # nothing to rename yet
    assert not (tmp_path / "l.index.swap").exists()
    idx = lazy.get()
    assert lazy.get() is idx and (tmp_path / "l.index.swap").stat().st_size == 80
    idx.append(BASE + 1, 1)
    lazy.rename_to(tmp_path / "l.index")
    assert lazy.file == tmp_path / "l.index" and (tmp_path / "l.index").exists()
    lazy.close()
    assert (tmp_path / "l.index").stat().st_size == 8
    assert lazy.delete_if_exists() is True
    assert not (tmp_path / "l.index").exists()
    unloaded = LazyIndex.for_time(tmp_path / "m.timeindex", BASE, 120)
    assert unloaded.delete_if_exists() is False


def test_readers_survive_concurrent_remaps(tmp_path, frequent_switches):
    idx = OffsetIndex(tmp_path / "r.index", 0, 4096 * 8)
    tix = TimeIndex(tmp_path / "r.timeindex", 0, 4096 * 12)
    stop = threading.Event()
    errors = []

    def reader():
        rng = random.Random(threading.get_ident())
        while not stop.is_set():
            try:
                t = rng.randint(0, 5000)
                o, p = idx.lookup(t)
                if o > t or p != (o * 3 if o else p):
                    errors.append(("offset", t, o, p))
                ts, off = tix.lookup(t)
                if ts > t:
                    errors.append(("time", t, ts, off))
            except Exception as exc:  # a reader must never see an unmapped buffer
                errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for th in threads:
        th.start()
    rng = random.Random(11)
    for _ in range(25):
        n = rng.randint(1, 3000)
        for k in range(1, n):
            idx.append(k, 3 * k)
            tix.maybe_append(k, k)
        idx.trim_to_valid_size()  # shrink the file under the readers
        tix.trim_to_valid_size()
        idx.resize(4096 * 8)
        tix.resize(4096 * 12)
        cut = rng.randint(0, n)
        idx.truncate_to(cut)
        tix.truncate_to(cut)
        idx.reset()
        tix.reset()
    stop.set()
    for th in threads:
        th.join()
    assert errors == []
    idx.close()
    tix.close()


def test_an_append_to_an_index_whose_file_turned_read_only_raises_instead_of_sigbus(tmp_path):
    """E6 at the index level: once the file is immutable (root obeys it; a file system
    remounted read-only behaves alike), an append must fail with an OSError (the log dir
    then goes offline), never a write through the mapping, which the kernel answers with
    SIGBUS and which would kill the broker. Run in a child process: without the fix the
    child dies of SIGBUS (exit -7) instead of printing the error."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from tests.test_reliability_faults import _chattr, _immutable_works

    if shutil.which("chattr") is None or not _immutable_works(tmp_path):
        pytest.skip("chattr +i is refused here")
    script = f"""
import subprocess
from broker.log.index import OffsetIndex, TimeIndex
for index, append in ((OffsetIndex({str(tmp_path / "0.index")!r}, 0, 4096 * 8), lambda i: i.append(1, 100)),
                      (TimeIndex({str(tmp_path / "0.timeindex")!r}, 0, 4096 * 12), lambda i: i.maybe_append(10, 1))):
    index.flush()  # clean pages: a mapped write would need the file system's write fault
    subprocess.run(["chattr", "+i", str(index._file)], check=True)
    try:
        append(index)
        print("appended")
    except OSError as exc:
        print("refused", exc.errno)
"""
    try:
        child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                               cwd=str(Path(__file__).resolve().parent.parent))
    finally:
        _chattr("-i", tmp_path)
    assert child.returncode == 0, (child.returncode, child.stderr[-2000:])
    assert child.stdout.split() == ["refused", "1", "refused", "1"], child.stdout  # EPERM, both indexes


def test_flush_fsyncs_through_the_write_descriptor_and_tolerates_a_file_moved_away(tmp_path, monkeypatch):
    """The mapping is read-only, so ``flush`` fsyncs the file: the descriptor the appends
    wrote through, or (nothing appended by this instance) the file opened afresh; a file
    renamed or deleted under it (a segment being deleted) is nothing to flush, not an
    I/O error that would take the log dir offline."""
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    idx = offset_index(tmp_path)
    idx.append(BASE + 1, 10)
    idx.flush()
    assert synced == [idx._write_fd]
    idx.close()
    reopened = offset_index(tmp_path)
    assert reopened.lookup(BASE + 1) == (BASE + 1, 10)
    reopened.flush()  # nothing written by this instance: the file itself
    assert len(synced) == 2
    reopened.file.rename(tmp_path / "moved")  # behind the index's back
    reopened.flush()
    assert len(synced) == 2
    reopened.close_handler()


def test_append_many_checks_everything_before_writing(tmp_path):
    """``append_many``: one pwrite of entries that ``append`` / ``maybe_append`` would take
    one by one; a bad entry anywhere, or too little room, writes none of them."""
    idx = OffsetIndex(tmp_path / "0.index", 0, max_index_size=8 * 8)
    idx.append_many([(3, 10), (7, 40)])
    assert [idx.entry(i) for i in range(idx.entries)] == [(3, 10), (7, 40)]
    for bad in ([(8, 50), (8, 60)], [(9, 50), (6, 60)], [(9, -1)], [(i + 20, i * 8 + 100) for i in range(7)]):
        with pytest.raises((InvalidOffsetError, IndexFullError, ValueError)):
            idx.append_many(bad)
        assert idx.entries == 2 and idx.last_offset == 7
    idx.append_many([(9, 50)] + [(10 + i, 60 + i) for i in range(5)])
    assert idx.entries == 8 and idx.is_full()
    idx.close()
    tix = TimeIndex(tmp_path / "0.timeindex", 0, max_index_size=12 * 5)
    tix.append_many([(100, 1), (200, 1), (300, 4)])
    assert tix.last_entry == (300, 4)
    for bad in ([(300, 5)], [(400, 3)], [(400, 5), (500, 6)]):  # equal ts, older offset, past is_full
        with pytest.raises((InvalidOffsetError, IndexFullError)):
            tix.append_many(bad)
        assert tix.entries == 3 and tix.last_entry == (300, 4)
    tix.append_many([(400, 5)])
    assert tix.is_full() and [tix.entry(i) for i in range(tix.entries)] == [(100, 1), (200, 1), (300, 4), (400, 5)]
    tix.close()
