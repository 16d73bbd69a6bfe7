"""Tests of broker/log/epoch_cache.py: LeaderEpochFileCache semantics (after Kafka's
LeaderEpochFileCacheTest) and its leader-epoch-checkpoint file."""

from __future__ import annotations

import threading

import pytest

from broker.log import files
from broker.log.epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
)


@pytest.fixture
def path(tmp_path):
    return tmp_path / files.LEADER_EPOCH_CHECKPOINT_FILE


@pytest.fixture
def cache(path):
    return LeaderEpochFileCache(path, fsync=False)


def test_assign_persists_in_kafkas_format_and_reloads(cache, path):
    assert not path.exists() and cache.latest_epoch is None
    assert cache.assign(2, 6) is True
    assert cache.assign(3, 8) is True
    assert path.read_text() == "0\n2\n2 6\n3 8\n"
    again = LeaderEpochFileCache(path)
    assert again.epoch_entries() == [EpochEntry(2, 6), EpochEntry(3, 8)]
    assert again.latest_epoch == 3 and again.latest_entry() == (3, 8)
    assert again.earliest_entry() == (2, 6)


def test_same_epoch_is_not_reassigned_to_a_later_offset(cache, path):
    cache.assign(2, 6)
    mtime = path.stat().st_mtime_ns
    assert cache.assign(2, 6) is False
    assert cache.assign(2, 7) is False
    assert cache.epoch_entries() == [EpochEntry(2, 6)]
    assert path.stat().st_mtime_ns == mtime  # nothing rewritten


def test_same_epoch_with_an_earlier_offset_replaces_it(cache):
    cache.assign(1, 11)
    cache.assign(1, 5)
    assert cache.epoch_entries() == [EpochEntry(1, 5)]


def test_monotonicity_is_enforced_by_truncating_conflicts(cache):
    cache.assign(1, 5)
    cache.assign(2, 6)
    cache.assign(1, 7)  # an older epoch at a later offset: later epochs go
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.epoch_entries() == [EpochEntry(1, 7)]
    cache.assign(2, 6)  # a newer epoch at an earlier offset: conflicting entries go
    assert cache.epoch_entries() == [EpochEntry(2, 6)]


def test_invalid_entries_are_rejected(cache):
    with pytest.raises(ValueError):
        cache.assign(-1, 5)
    with pytest.raises(ValueError):
        cache.assign(1, -5)


def test_end_offset_for(cache):
    assert cache.end_offset_for(0, 0) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    cache.assign(2, 6)
    cache.assign(4, 11)
    cache.assign(6, 15)
    leo = 20
    assert cache.end_offset_for(UNDEFINED_EPOCH, leo) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.end_offset_for(6, leo) == (6, leo)  # the current epoch ends at the LEO
    assert cache.end_offset_for(2, leo) == (2, 11)
    assert cache.end_offset_for(3, leo) == (2, 11)  # unknown epoch: the largest below it
    assert cache.end_offset_for(5, leo) == (4, 15)
    assert cache.end_offset_for(1, leo) == (1, 6)  # older than all: the first start offset
    assert cache.end_offset_for(7, leo) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_epoch_for_offset_and_neighbours(cache):
    cache.assign(0, 0)
    cache.assign(1, 5)
    cache.assign(3, 10)
    assert [cache.epoch_for_offset(o) for o in (0, 4, 5, 9, 10, 1000)] == [0, 0, 1, 1, 3, 3]
    empty = LeaderEpochFileCache(None)
    assert empty.epoch_for_offset(3) is None
    only_late = LeaderEpochFileCache(None)
    only_late.assign(2, 10)
    assert only_late.epoch_for_offset(5) is None
    assert cache.previous_epoch() == 1 and cache.previous_epoch(1) == 0 and cache.previous_epoch(0) is None
    assert cache.next_epoch(1) == 3 and cache.next_epoch(3) is None and cache.next_epoch(2) == 3
    assert cache.epoch_entry(1) == (1, 5) and cache.epoch_entry(2) is None
    assert cache.previous_entry(3) == (1, 5)


def test_truncate_from_end(cache, path):
    for e, o in ((2, 6), (3, 8), (4, 11)):
        cache.assign(e, o)
    assert cache.truncate_from_end(12) == []
    assert cache.truncate_from_end(9) == [EpochEntry(4, 11)]
    assert cache.epoch_entries() == [EpochEntry(2, 6), EpochEntry(3, 8)]
    assert path.read_text() == "0\n2\n2 6\n3 8\n"
    cache.truncate_from_end(6)
    assert cache.epoch_entries() == []
    cache.assign(5, 3)
    assert cache.truncate_from_end(-1) == []  # undefined end offset: no-op


def test_truncate_from_start(cache, path):
    for e, o in ((2, 6), (3, 8), (4, 11)):
        cache.assign(e, o)
    cache.truncate_from_start(8)  # exclusive: the entry at 8 stays
    assert cache.epoch_entries() == [EpochEntry(3, 8), EpochEntry(4, 11)]
    cache.truncate_from_start(9)
    assert cache.epoch_entries() == [EpochEntry(3, 9), EpochEntry(4, 11)]
    assert path.read_text() == "0\n2\n3 9\n4 11\n"
    cache.truncate_from_start(5)  # below everything: no change
    assert cache.epoch_entries() == [EpochEntry(3, 9), EpochEntry(4, 11)]
    cache.truncate_from_start(20, flush=False)
    assert cache.epoch_entries() == [EpochEntry(4, 20)]
    assert path.read_text() == "0\n2\n3 9\n4 11\n"  # not flushed yet
    cache.flush()
    assert path.read_text() == "0\n1\n4 20\n"


def test_epoch_entries_in_range(cache):
    for e, o in ((2, 6), (3, 8), (4, 11)):
        cache.assign(e, o)
    assert cache.epoch_entries_in_range(7, 11) == [EpochEntry(2, 7), EpochEntry(3, 8)]
    assert cache.epoch_entries() == [EpochEntry(2, 6), EpochEntry(3, 8), EpochEntry(4, 11)]


def test_clear_and_flush_and_with_checkpoint(cache, path, tmp_path):
    cache.assign(1, 0)
    moved = cache.with_checkpoint(tmp_path / "other")
    assert moved.epoch_entries() == [EpochEntry(1, 0)] and not (tmp_path / "other").exists()
    cache.clear_and_flush()
    assert cache.epoch_entries() == [] and path.read_text() == "0\n0\n"
    assert LeaderEpochFileCache(path).epoch_entries() == []


def test_flush_skipped_when_the_directory_is_gone(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    cache = LeaderEpochFileCache(d / files.LEADER_EPOCH_CHECKPOINT_FILE, fsync=False)
    cache.assign(1, 0)
    cache.assign(2, 5)
    (d / files.LEADER_EPOCH_CHECKPOINT_FILE).unlink()
    d.rmdir()
    cache.truncate_from_end(5)  # must not recreate the deleted partition directory
    assert not d.exists()


def test_concurrent_assign_and_read(tmp_path):
    cache = LeaderEpochFileCache(None)
    stop = threading.Event()
    bad = []

    def reader():
        while not stop.is_set():
            entries = cache.epoch_entries()
            if any(a.epoch >= b.epoch or a.start_offset >= b.start_offset for a, b in zip(entries, entries[1:])):
                bad.append(entries)
            cache.end_offset_for(5, 10**9)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for epoch in range(2000):
        cache.assign(epoch, epoch * 3)
    stop.set()
    for t in threads:
        t.join()
    assert bad == [] and len(cache) == 2000
