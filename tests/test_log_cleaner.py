"""The log cleaner (issue 15): compaction of cleanup.policy=compact logs (Kafka's LogCleaner).

A property test against a model (key -> latest value), the crash points of a segment
replace (RELIABILITY.md R5: ``.cleaned`` written, ``.swap`` renamed, old segments
``.deleted``, a partial ``.cleaned``, replace done but checkpoint not written), readers that
hold an old segment, producer state, transactions, min/max compaction lag, compact+delete,
the offset map's bound, the checkpoint file, and the LogManager's cleaner thread.
MockTime and a deterministic scheduler; the thread test waits for an outcome, never a time.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import files
from broker.log.cleaner.checkpoint import CLEANER_OFFSET_CHECKPOINT_FILE, CleanerCheckpoints
from broker.log.cleaner.cleaner import group_segments_by_size
from broker.log.cleaner.manager import CleanerConfig, LogCleaner, LogCleanerManager
from broker.log.cleaner.offset_map import BYTES_PER_ENTRY, OffsetMapFullError, SkimpyOffsetMap
from broker.log.cleaner.throttler import Throttler
from broker.log.clock import MockTime
from broker.log.config import LogConfig
from broker.log.manager import LogManager
from broker.log.scheduler import Scheduler
from broker.log.unified_log import UnifiedLog
from broker.record.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    RECORDS_OFFSET,
    crc32c,
    encode_batch,
    iter_batches,
    read_header,
)
from broker.record.control import ControlRecordType, encode_end_txn_marker_batch

TP = ("t", 0)


class SimulatedCrash(BaseException):
    """Raised by a crash hook: a BaseException, so the cleaner's cleanup does not run (as
    after a real crash)."""


class Env:
    def __init__(self, tmp_path: Path, **overrides) -> None:
        self.dir = tmp_path / "t-0"
        self.time = MockTime(current_time_ms=int(time.time() * 1000))  # near the files' mtimes
        self.scheduler = Scheduler(self.time)
        props = {"cleanup.policy": "compact", "segment.bytes": 400, "min.cleanable.dirty.ratio": 0.01,
                 "file.delete.delay.ms": 1000}
        props.update(overrides)
        self.config = LogConfig.from_props(props)
        self.log = self.open()

    def open(self, clean: bool = True) -> UnifiedLog:
        self.log = UnifiedLog.create(self.dir, self.config, time=self.time, scheduler=self.scheduler,
                                     last_shutdown_clean=clean)
        return self.log

    def produce(self, records, **kw) -> None:
        now = self.time.milliseconds()
        self.log.append_as_leader(encode_batch([(k, v, now) for k, v in records], **kw))

    def cleaner(self, crash_hook=None, memory: int = 1 << 20) -> LogCleaner:
        config = CleanerConfig(dedupe_buffer_size=memory, backoff_ms=1)
        return LogCleaner(config, lambda: {TP: self.log}, self.time, crash_hook=crash_hook)

    def crash_and_reopen(self) -> UnifiedLog:
        self.log.close_handlers()
        return self.open(clean=False)

    def finish_deletes(self) -> None:
        self.time.sleep(2000)
        self.scheduler.run_pending()


def read_all(ulog: UnifiedLog) -> list:
    """Every record of the log, in order: (offset, key, value)."""
    out, offset = [], ulog.log_start_offset
    while offset < ulog.log_end_offset:
        data = ulog.read(offset, 1 << 20).records.read_bytes()
        assert data, f"a read at {offset} below the log end {ulog.log_end_offset} returned nothing"
        for header, recs in iter_batches(data):
            out += [(r.offset, r.key, r.value, header.is_control) for r in recs]
            offset = header.next_offset
    return [(o, k, v) for o, k, v, control in out if not control]


def key_map(records) -> dict:
    m: dict = {}
    for _, k, v in records:
        if v is None:
            m.pop(k, None)
        else:
            m[k] = v
    return m


def latest_offsets(records) -> dict:
    return {k: o for o, k, _ in records}


def check_consistent(records, model_records) -> None:
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets strictly increasing, none twice"
    assert set(offsets) <= {o for o, _, _ in model_records}
    assert key_map(records) == key_map(model_records)
    assert set(records) <= set(model_records), "cleaning never changes a record"


ops = st.lists(st.tuples(st.integers(0, 4), st.one_of(st.none(), st.binary(min_size=1, max_size=20)),
                         st.booleans(), st.integers(1, 3),
                         st.sampled_from([None, None, None, ControlRecordType.COMMIT, ControlRecordType.ABORT])),
               min_size=1, max_size=60)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, segment_bytes=st.sampled_from([200, 400, 1200]), compression=st.sampled_from([0, 1]),
       delete_retention_ms=st.sampled_from([0, 86400000]))
def test_cleaning_matches_the_model(tmp_path_factory, ops, segment_bytes, compression,
                                    delete_retention_ms) -> None:
    env = Env(tmp_path_factory.mktemp("p"), **{"segment.bytes": segment_bytes,
                                                 "delete.retention.ms": delete_retention_ms})
    aborted: set[int] = set()
    for pid, (key, value, roll, n, txn) in enumerate(ops):
        recs = [(b"k%d" % ((key + i) % 5), value if i == n - 1 else b"x%d" % i) for i in range(n)]
        if txn is None:
            env.produce(recs, compression=compression)
        else:  # one transaction per producer id, committed or aborted
            first = env.log.log_end_offset
            env.produce(recs, compression=compression, producer_id=pid, producer_epoch=0, base_sequence=0,
                        is_transactional=True)
            if txn == ControlRecordType.ABORT:
                aborted.update(range(first, first + n))
            _end_txn(env, txn, pid)
        if roll:
            env.log.roll()
    env.produce([(b"k0", b"in-active")])
    before = [r for r in read_all(env.log) if r[0] not in aborted]  # what a READ_COMMITTED reader sees
    active = env.log.active_segment
    active_bytes = Path(active.log.path).read_bytes()
    cleaner = env.cleaner()
    cleaned = cleaner.do_one_cleaning()
    assert cleaned == (len(env.log.segments) > 1 and any(s.size for s in env.log.segments[:-1]))
    after_all = read_all(env.log)
    after = [r for r in after_all if r[0] not in aborted]
    check_consistent(after, before)
    end = CleanerCheckpoints().read(env.log.parent_dir).get(TP, 0)
    assert not [r for r in after_all if r[0] in aborted and r[0] < end], "aborted data cleaned away"
    # the latest record of every key is kept; the active segment is untouched
    latest_before, latest_after = latest_offsets(before), latest_offsets(after)
    assert all(latest_before[k] == o for k, o in latest_after.items())
    assert all(latest_after[k] == latest_before[k] for k in key_map(before))
    assert env.log.active_segment is active
    assert Path(active.log.path).read_bytes() == active_bytes
    # only the latest record of each key remains below the checkpoint
    below = [r for r in after if r[0] < end]
    assert len({k for _, k, _ in below}) == len(below)
    # reopening (clean and unclean) gives the same records
    env.finish_deletes()
    env.log.close()
    assert read_all(env.open()) == after_all
    env.log.close_handlers()
    assert read_all(env.open(clean=False)) == after_all
    assert not [p for p in env.dir.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    # a second round over the cleaned section (tombstones and markers may now go when
    # delete.retention.ms is 0): the same READ_COMMITTED view, nothing left open
    env.produce([(b"k1", b"round-2")])
    env.log.roll()
    before2 = before + [(env.log.log_end_offset - 1, b"k1", b"round-2")]
    cleaner = env.cleaner()
    cleaner.do_one_cleaning()
    after2 = [r for r in read_all(env.log) if r[0] not in aborted]
    check_consistent(after2, before2)
    if delete_retention_ms == 0:
        assert not [r for r in after2 if r[0] < end and r[2] is None], "old tombstones gone"
    else:
        latest = latest_offsets(before2)  # a tombstone still the latest of its key stays
        assert all(r in after2 for r in after if r[2] is None and latest[r[1]] == r[0])
    env.log.close_handlers()
    reopened = env.open(clean=False)
    assert [r for r in read_all(reopened) if r[0] not in aborted] == after2
    assert reopened.first_unstable_offset is None
    reopened.close()


def test_tombstones_go_once_past_delete_retention(tmp_path) -> None:
    env = Env(tmp_path, **{"delete.retention.ms": 0})
    for i in range(20):
        env.produce([(b"k%d" % (i % 4), None if i % 5 == 0 or i >= 18 else b"v%d" % i)])
    env.log.roll()
    cleaner = env.cleaner()
    assert cleaner.do_one_cleaning()
    first = read_all(env.log)
    end1 = CleanerCheckpoints().read(env.log.parent_dir)[TP]
    assert any(v is None for _, _, v in first), "first round: tombstones in the dirty section stay"
    for i in range(8):
        env.produce([(b"k9", b"w%d" % i)])
    env.log.roll()
    assert cleaner.do_one_cleaning()
    second = read_all(env.log)
    assert not [r for r in second if r[0] < end1 and r[2] is None]
    assert key_map(second) == key_map(first + [r for r in second if r[0] >= end1])


def test_tombstones_kept_within_delete_retention(tmp_path) -> None:
    env = Env(tmp_path)  # delete.retention.ms: one day
    for i in range(20):
        env.produce([(b"k%d" % (i % 4), None if i % 5 == 0 or i >= 18 else b"v%d" % i)])
    env.log.roll()
    cleaner = env.cleaner()
    assert cleaner.do_one_cleaning()
    env.produce([(b"k9", b"w")] * 1)
    env.log.roll()
    for i in range(8):
        env.produce([(b"k9", b"w%d" % i)])
    env.log.roll()
    assert cleaner.do_one_cleaning()
    assert [r for r in read_all(env.log) if r[2] is None] == [(18, b"k2", None), (19, b"k3", None)]


# --- R5: a crash at each step of the replace ---

def _crash_at(step: str, partial: bool = False):
    def hook(name: str) -> None:
        if name == step:
            if partial:
                for p in Path(hook.dir).glob("*.log.cleaned"):
                    os.truncate(p, p.stat().st_size // 2)
            raise SimulatedCrash(step)
    return hook


@pytest.mark.parametrize("step,partial,replaced", [
    ("cleaned", True, False),   # crash while the .cleaned segment is being written
    ("cleaned", False, False),  # .cleaned written and flushed, not yet renamed
    ("swap", False, True),      # renamed .swap; old segments still live
    ("delete", False, True),    # old segments renamed .deleted; .swap not yet live
])
def test_crash_during_replace_recovers(tmp_path, step, partial, replaced) -> None:
    env = Env(tmp_path)
    for i in range(30):
        env.produce([(b"k%d" % (i % 3), b"v%d" % i)])
    env.log.roll()
    before = read_all(env.log)
    bases = [s.base_offset for s in env.log.segments]
    hook = _crash_at(step, partial)
    hook.dir = env.dir
    with pytest.raises(SimulatedCrash):
        env.cleaner(crash_hook=hook).do_one_cleaning()
    names = {p.name for p in env.dir.iterdir()}
    assert any(n.endswith(".cleaned" if step == "cleaned" else ".swap") for n in names)
    reopened = env.crash_and_reopen()
    after = read_all(reopened)
    check_consistent(after, before)
    assert not [p for p in env.dir.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    if replaced:
        assert len(after) < len(before)
        assert [s.base_offset for s in reopened.segments] == bases  # one group per segment here
    else:
        assert after == before
    # the checkpoint was not written: the next cleaning does the work again, and finishes it
    assert TP not in CleanerCheckpoints().read(reopened.parent_dir)
    assert env.cleaner().do_one_cleaning()
    final = read_all(env.log)
    check_consistent(final, before)
    assert key_map(final) == key_map(before) and len(final) == 3  # the latest of each key


def test_crash_after_replace_before_checkpoint(tmp_path) -> None:
    env = Env(tmp_path)
    for i in range(30):
        env.produce([(b"k%d" % (i % 3), b"v%d" % i)])
    env.log.roll()
    before = read_all(env.log)
    cleaner = env.cleaner()
    ltc = cleaner.manager.grab_filthiest_compacted_log()
    cleaner._cleaners[0].clean(env.log, ltc.first_dirty_offset, ltc.first_uncleanable_offset)
    reopened = env.crash_and_reopen()  # done_cleaning never ran
    after = read_all(reopened)
    check_consistent(after, before)
    assert key_map(after) == key_map(before) and len(after) == 3


# --- readers, producers, transactions ---

def test_reader_of_an_old_segment_keeps_reading(tmp_path) -> None:
    env = Env(tmp_path)
    for i in range(30):
        env.produce([(b"k%d" % (i % 3), b"v%d" % i)])
    env.log.roll()
    info = env.log.read(0, 1 << 20)
    old_bytes = info.records.read_bytes()
    old_path = info.records.path
    assert env.cleaner().do_one_cleaning()
    assert old_path.read_bytes() != old_bytes  # the cleaned segment took the name
    assert info.records.read_bytes() == old_bytes  # the old one: renamed .deleted, still open
    env.finish_deletes()
    assert not list(env.dir.glob("*.deleted"))


def test_idempotent_producer_state_survives_cleaning(tmp_path) -> None:
    env = Env(tmp_path)
    for seq in range(6):
        env.produce([(b"k", b"v%d" % seq)], producer_id=7, producer_epoch=0, base_sequence=seq)
    env.produce([(b"k", b"latest")])  # supersedes every record of producer 7
    env.log.roll()
    assert env.cleaner().do_one_cleaning()
    data = env.log.read(0, 1 << 20).records.read_bytes()
    batches = [(h, recs) for h, recs in iter_batches(data)]
    pid_batches = [h for h, _ in batches if h.producer_id == 7]
    assert len(pid_batches) == 1 and pid_batches[0].records_count == 0  # the last one, emptied
    assert pid_batches[0].base_sequence == 5 and pid_batches[0].base_offset == 5
    env.log.close_handlers()
    ulog = env.open(clean=False)
    entry = ulog.producer_state_manager.last_entry(7)
    assert entry is not None and entry.last_seq == 5
    ulog.append_as_leader(encode_batch([(b"k", b"next", 0)], producer_id=7, producer_epoch=0,
                                       base_sequence=6))
    # no longer the producer's last batch: the next cleaning drops the empty batch
    ulog.roll()
    cleaner = LogCleaner(CleanerConfig(), lambda: {TP: ulog}, env.time)
    assert cleaner.do_one_cleaning()
    headers = [h for seg in ulog.segments for _, h, _ in seg.log.iter_batches()]
    assert [(h.base_offset, h.records_count) for h in headers] == [(7, 1)]


def test_partially_kept_batch_keeps_its_identity(tmp_path) -> None:
    env = Env(tmp_path)
    env.produce([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], producer_id=3, producer_epoch=1,
                base_sequence=0, compression=1)
    env.produce([(b"b", b"2")])
    env.log.roll()
    assert env.cleaner().do_one_cleaning()
    (h, recs), *_ = iter_batches(env.log.read(0, 1 << 20).records.read_bytes())
    assert (h.base_offset, h.last_offset_delta, h.base_sequence, h.producer_id, h.producer_epoch,
            h.compression) == (0, 2, 0, 3, 1, 1)
    assert [(r.offset, r.key) for r in recs] == [(0, b"a"), (2, b"c")]


def _end_txn(env: Env, kind: ControlRecordType, pid: int) -> None:
    env.log.append_as_leader(encode_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0,
                                                         coordinator_epoch=0,
                                                         timestamp=env.time.milliseconds()),
                             origin=_coordinator())


def test_aborted_data_goes_markers_and_committed_data_compact(tmp_path) -> None:
    env = Env(tmp_path)
    env.produce([(b"k", b"old")])                                                        # 0
    env.produce([(b"k", b"aborted"), (b"m", b"aborted")], producer_id=9, producer_epoch=0,
                base_sequence=0, is_transactional=True)                                  # 1-2
    _end_txn(env, ControlRecordType.ABORT, 9)                                            # 3
    env.produce([(b"j", b"1")], producer_id=8, producer_epoch=0, base_sequence=0,
                is_transactional=True)                                                   # 4
    env.produce([(b"j", b"2"), (b"i", b"1")], producer_id=8, producer_epoch=0, base_sequence=1,
                is_transactional=True)                                                   # 5-6
    _end_txn(env, ControlRecordType.COMMIT, 8)                                           # 7
    env.produce([(b"open", b"x")], producer_id=5, producer_epoch=0, base_sequence=0,
                is_transactional=True)                                                   # 8: open
    env.produce([(b"j", b"3")])                                                          # 9
    env.log.roll()
    before = read_all(env.log)
    assert env.cleaner().do_one_cleaning()
    recs = read_all(env.log)
    assert (0, b"k", b"old") in recs, "an aborted write never hides a committed value"
    assert not [r for r in recs if r[2] == b"aborted"]
    assert (4, b"j", b"1") not in recs and (6, b"i", b"1") in recs
    assert (8, b"open", b"x") in recs and (9, b"j", b"3") in recs, "the open transaction is not cleaned"
    check_consistent([r for r in recs if r[2] != b"aborted"], [r for r in before if r[2] != b"aborted"])
    headers = [h for seg in env.log.segments for _, h, _ in seg.log.iter_batches()]
    assert sum(h.is_control for h in headers) == 2  # both markers kept
    assert all(h.is_transactional for h in headers if h.producer_id in (8, 9))
    assert env.log.collect_aborted_transactions(0, env.log.log_end_offset)
    env.log.close_handlers()
    assert read_all(env.open(clean=False)) == recs


def _coordinator():
    from broker.log.validator import AppendOrigin
    return AppendOrigin.COORDINATOR


# --- which log, which offsets ---

def test_active_segment_and_min_compaction_lag(tmp_path) -> None:
    env = Env(tmp_path, **{"min.compaction.lag.ms": 10_000})
    for i in range(10):
        env.produce([(b"k", b"v%d" % i)])
    env.log.roll()
    manager = LogCleanerManager(lambda: {TP: env.log}, env.time)
    assert manager.grab_filthiest_compacted_log() is None  # too young
    env.time.sleep(10_001)
    ltc = manager.grab_filthiest_compacted_log()
    assert ltc is not None and ltc.first_uncleanable_offset == env.log.active_segment.base_offset


def test_max_compaction_lag_forces_cleaning(tmp_path) -> None:
    env = Env(tmp_path, **{"min.cleanable.dirty.ratio": 0.5, "max.compaction.lag.ms": 5_000})
    for i in range(10):
        env.produce([(b"k%d" % i, b"v" * 50)])
    env.log.roll()
    cleaner = env.cleaner()
    assert cleaner.do_one_cleaning()  # everything dirty: ratio 1
    env.produce([(b"k0", b"w")])
    env.log.roll()
    assert cleaner.manager.grab_filthiest_compacted_log() is None  # ratio well below 0.5
    env.time.sleep(5_001)
    assert cleaner.do_one_cleaning()
    assert (0, b"k0", b"v" * 50) not in read_all(env.log)


def test_compact_delete_applies_retention_too(tmp_path) -> None:
    env = Env(tmp_path, **{"cleanup.policy": "compact,delete", "retention.ms": 1000})
    for i in range(10):
        env.produce([(b"k", b"v%d" % i)])
    env.log.roll()
    assert env.cleaner().do_one_cleaning()
    assert len(read_all(env.log)) == 1
    env.time.sleep(5000)
    assert env.log.delete_old_segments() > 0
    assert read_all(env.log) == []


def test_delete_policy_logs_are_not_cleaned(tmp_path) -> None:
    env = Env(tmp_path, **{"cleanup.policy": "delete"})
    for i in range(10):
        env.produce([(b"k", b"v%d" % i)])
    env.log.roll()
    assert not env.cleaner().do_one_cleaning()


def test_a_full_offset_map_cleans_a_prefix(tmp_path) -> None:
    env = Env(tmp_path, **{"segment.bytes": 200})
    for i in range(40):
        env.produce([(b"k%d" % (i % 20), b"v%d" % i)])
    env.log.roll()
    before = read_all(env.log)
    cleaner = env.cleaner(memory=12 * BYTES_PER_ENTRY)  # 12 slots, 10 entries at 0.9
    assert cleaner.do_one_cleaning()
    end = CleanerCheckpoints().read(env.log.parent_dir)[TP]
    assert 0 < end < env.log.active_segment.base_offset
    check_consistent(read_all(env.log), before)
    while cleaner.do_one_cleaning():
        pass
    after = read_all(env.log)
    check_consistent(after, before)
    assert len(after) == 20


# --- parts ---

def test_offset_map_bound_is_kafkas() -> None:
    m = SkimpyOffsetMap(10 * BYTES_PER_ENTRY + 5, load_factor=0.5)
    assert (m.slots, m.max_entries) == (10, 5)
    for i in range(10):
        m.put(b"k%d" % i, i)
    m.put(b"k3", 42)
    assert m.get(b"k3") == 42 and m.get(b"nope") == -1 and m.latest_offset == 42
    with pytest.raises(OffsetMapFullError):
        m.put(b"eleven", 11)
    with pytest.raises(ValueError):
        SkimpyOffsetMap(BYTES_PER_ENTRY - 1)


def test_checkpoint_file_is_kafkas_format(tmp_path) -> None:
    cp = CleanerCheckpoints()
    cp.update(tmp_path, ("b", 3), 99)
    cp.update(tmp_path, ("a", 0), 1234)
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE).read_text() == "0\n2\na 0 1234\nb 3 99\n"
    cp.update(tmp_path, ("b", 3), None)
    assert cp.read(tmp_path) == {("a", 0): 1234}
    (tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE).write_text("garbage")
    assert cp.read(tmp_path) == {}


def test_group_segments_by_size(tmp_path) -> None:
    env = Env(tmp_path, **{"segment.bytes": 300})
    for i in range(20):
        env.produce([(b"k", b"v%d" % i)])
    segs = env.log.segments[:-1]
    assert [len(g) for g in group_segments_by_size(segs, 300, 1 << 20, 20)] == [1] * len(segs)
    groups = group_segments_by_size(segs, 10_000, 1 << 20, 20)
    assert len(groups) == 1 and groups[0] == segs


def test_log_manager_cleaner_thread(tmp_path) -> None:
    manager = LogManager([tmp_path], LogConfig.from_props({"segment.bytes": 300}),
                         cleaner_config=CleanerConfig(backoff_ms=1), initial_task_delay_ms=1 << 30)
    manager.startup()
    try:
        ulog = manager.get_or_create_log("c", 0, LogConfig.from_props(
            {"cleanup.policy": "compact", "segment.bytes": 300, "min.cleanable.dirty.ratio": 0.01}))
        for i in range(30):
            ulog.append_as_leader(encode_batch([(b"k%d" % (i % 2), b"v%d" % i, 0)]))
        ulog.roll()
        done = threading.Event()
        checkpoint = tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE
        # wait for the outcome (bounded), not for a time: the cleaner thread swaps the
        # segments first and writes its checkpoint after, so wait for both
        for _ in range(3000):
            if len(read_all(ulog)) == 2 and checkpoint.exists():
                done.set()
                break
            done.wait(0.01)
        assert len(read_all(ulog)) == 2, f"the cleaner thread never compacted the log: {read_all(ulog)}"
        assert done.is_set(), "the cleaner thread compacted the log but never wrote its checkpoint"
        manager.delete_log("c", 0)
        assert ("c", 0) not in CleanerCheckpoints().read(tmp_path)
    finally:
        manager.shutdown()
    assert files.read_offset_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE) == {}


# --- a real broker ---

def _consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """Every record of partition 0 read by confluent-kafka to the end of the partition."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.monotonic_ns()}",
                                         "enable.auto.commit": False, "enable.partition.eof": True,
                                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        out = []
        for _ in range(600):
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(msg.error())
            out.append((msg.offset(), msg.key(), msg.value()))
        raise AssertionError("never reached the end of the partition")
    finally:
        consumer.close()


def test_real_broker_compacts_and_confluent_kafka_reads_to_the_end(broker_factory) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    broker = broker_factory({"log.cleaner.backoff.ms": "20"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = "compacted"
    futures = admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "internal.segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"})])
    futures[topic].result(30)
    # one record per batch: a batch larger than the segment would be refused
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                                         "batch.num.messages": 1})
    expected, errors = {}, []
    for i in range(200):
        key, value = b"key-%d" % (i % 10), (b"value-%d" % i) * 3
        producer.produce(topic, key=key, value=value, on_delivery=lambda err, msg: err and errors.append(err))
        producer.poll(0)
        expected[key] = value
    assert producer.flush(30) == 0 and errors == []
    produced = 200
    records: list = []
    for _ in range(300):  # wait for the outcome (bounded), not for a time
        records = _consume_all(broker.bootstrap, topic)
        if len(records) < produced // 2:
            break
        time.sleep(0.05)
    assert len(records) < produced // 2, "the broker's cleaner never compacted the topic"
    assert {k: v for _, k, v in records} == expected
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)) and offsets[-1] == produced - 1
    assert "cleaned log compacted-0" in broker.stdout_text() + broker.stderr_text()


def test_throttler_sleeps_to_the_desired_rate() -> None:
    clock = MockTime()
    throttler = Throttler(1000, clock, check_interval_ms=100)
    throttler.maybe_throttle(500)  # within the check interval: nothing
    assert throttler.slept_ms == 0
    clock.sleep(100)
    throttler.maybe_throttle(500)  # 1000 bytes in 100 ms: 10x the rate
    assert throttler.slept_ms == 900
    assert not Throttler(float("inf"), clock).enabled
    with pytest.raises(ValueError):
        Throttler(0, clock)


def test_cleaner_threads_share_a_throttler(tmp_path) -> None:
    env = Env(tmp_path)
    for i in range(40):
        env.produce([(b"k%d" % (i % 3), b"v" * 30)])
    env.log.roll()
    clock = MockTime(auto_tick_ms=10)  # the cleaner's clock: every read moves it
    cleaner = LogCleaner(CleanerConfig(max_io_bytes_per_second=1000), lambda: {TP: env.log}, clock)
    assert cleaner.do_one_cleaning()
    assert cleaner.throttler.slept_ms > 0
    assert not env.cleaner().throttler.enabled  # the default: Kafka's Double.MaxValue


def test_a_failing_log_is_marked_uncleanable(tmp_path) -> None:
    env = Env(tmp_path)
    for i in range(10):
        env.produce([(b"k", b"v%d" % i)])
    env.log.roll()
    first = env.log.segments[0]
    size = read_header(Path(first.log.path).read_bytes(), 0).size_in_bytes
    # the first batch's records replaced by garbage under a valid CRC: the decoder refuses it
    bad = bytearray(Path(first.log.path).read_bytes()[:size])
    bad[RECORDS_OFFSET:] = b"\x7f" * (size - RECORDS_OFFSET)
    struct.pack_into(">I", bad, CRC_OFFSET, crc32c(bytes(bad[ATTRIBUTES_OFFSET:])))
    with open(first.log.path, "r+b") as f:
        f.write(bad)
    before = {p.name: p.read_bytes() for p in env.dir.glob("*.log")}
    cleaner = env.cleaner()
    assert cleaner.do_one_cleaning()  # tried, failed, logged
    assert cleaner.manager.uncleanable_partitions() == {TP}
    assert not cleaner.do_one_cleaning()  # not tried again
    assert [p.name for p in env.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))] == []
    assert {p.name: p.read_bytes() for p in env.dir.glob("*.log")} == before
    cleaner.manager.resume_cleaning(TP)
    assert cleaner.manager.uncleanable_partitions() == set()


def test_reads_and_appends_go_on_while_cleaner_threads_run(tmp_path) -> None:
    env = Env(tmp_path, **{"segment.bytes": 300})
    cleaner = LogCleaner(CleanerConfig(num_threads=2, dedupe_buffer_size=1 << 20, backoff_ms=1),
                         lambda: {TP: env.log}, env.time)
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                recs = read_all(env.log)
                offsets = [o for o, _, _ in recs]
                assert offsets == sorted(set(offsets))
                stop.wait(0.001)  # let the writer and the cleaners have the GIL
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    t = threading.Thread(target=reader)
    cleaner.startup()
    t.start()
    try:
        model = []
        for i in range(100):
            key, value = b"k%d" % (i % 7), b"v%d" % i
            env.produce([(key, value)])
            model.append((i, key, value))
        for _ in range(2000):  # wait for an outcome (bounded), not for a time
            if cleaner.cleanings > 0:
                break
            stop.wait(0.005)
    finally:
        stop.set()
        t.join()
        cleaner.shutdown()
    assert errors == []
    assert cleaner.cleanings > 0
    check_consistent(read_all(env.log), model)


def test_markers_go_once_their_transaction_is_empty_and_past_the_horizon(tmp_path) -> None:
    env = Env(tmp_path, **{"delete.retention.ms": 0})
    txn = {"producer_epoch": 0, "is_transactional": True}
    env.produce([(b"a", b"aborted"), (b"b", b"aborted")], producer_id=9, base_sequence=0, **txn)  # 0-1
    _end_txn(env, ControlRecordType.ABORT, 9)                                                    # 2
    env.produce([(b"z", b"9")], producer_id=9, producer_epoch=0, base_sequence=2)                # 3
    env.produce([(b"j", b"1")], producer_id=8, base_sequence=0, **txn)                           # 4
    _end_txn(env, ControlRecordType.COMMIT, 8)                                                   # 5
    env.produce([(b"j", b"2")], producer_id=8, producer_epoch=0, base_sequence=1)                # 6
    env.produce([(b"k", b"1")], producer_id=7, base_sequence=0, **txn)                           # 7
    _end_txn(env, ControlRecordType.COMMIT, 7)                                                   # 8
    env.produce([(b"k", b"2")])                                                                  # 9
    env.log.roll()
    cleaner = env.cleaner()

    def markers() -> list[int]:
        return [h.base_offset for seg in env.log.segments for _, h, _ in seg.log.iter_batches()
                if h.is_control]

    def horizons() -> dict[int, int]:
        return {h.base_offset: h.delete_horizon_ms for seg in env.log.segments
                for _, h, _ in seg.log.iter_batches() if h.is_control and h.has_delete_horizon}

    def empty_batches() -> list[int]:
        return [h.base_offset for seg in env.log.segments for _, h, _ in seg.log.iter_batches()
                if h.records_count == 0]

    assert cleaner.do_one_cleaning()
    assert markers() == [2, 5, 8], "a pass that met batches of a transaction keeps its marker"
    env.produce([(b"new", b"1")])
    env.log.roll()
    assert cleaner.do_one_cleaning()
    # 2 and 5: their transactions are empty now: this pass stamps their delete horizon
    # (KIP-534) and keeps them; 8 stays unstamped: batch 7, producer 7's last data batch, is
    # kept (empty), so its transaction is not empty (as in Kafka)
    assert markers() == [2, 5, 8]
    assert horizons() == {2: env.time.milliseconds(), 5: env.time.milliseconds()}
    assert empty_batches() == [7]
    env.produce([(b"new", b"2")])
    env.log.roll()
    assert cleaner.do_one_cleaning()
    assert markers() == [8], "past their horizon (delete.retention.ms is 0), 2 and 5 go"
    assert env.log.collect_aborted_transactions(0, env.log.log_end_offset) == []
    recs = read_all(env.log)
    assert key_map(recs) == {b"z": b"9", b"j": b"2", b"k": b"2", b"new": b"2"}
    env.log.close_handlers()
    reopened = env.open(clean=False)
    assert read_all(reopened) == recs
    assert reopened.first_unstable_offset is None, "no transaction left open by a removed marker"
    assert reopened.producer_state_manager.last_entry(7).last_seq == 0


def test_real_broker_compacts_consumer_offsets_and_keeps_committed_offsets(broker_factory) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    broker = broker_factory({"log.cleaner.backoff.ms": "20", "offsets.topic.num.partitions": "1",
                             "offsets.topic.segment.bytes": "600"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("data", 1, 1)])["data"].result(30)
    tp = confluent_kafka.TopicPartition
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g1",
                                         "enable.auto.commit": False})
    try:
        for i in range(1, 61):
            consumer.commit(offsets=[tp("data", 0, i)], asynchronous=False)
    finally:
        consumer.close()
    cleaned = threading.Event()
    for _ in range(600):  # wait for the outcome (bounded), not for a time
        if "cleaned log __consumer_offsets-0" in broker.stdout_text() + broker.stderr_text():
            cleaned.set()
            break
        cleaned.wait(0.05)
    assert cleaned.is_set(), "the broker's cleaner never compacted __consumer_offsets"
    broker.restart()  # the coordinator reloads the groups from the compacted log
    offsets_dir = broker.log_dir / "__consumer_offsets-0"
    assert sum(1 for p in offsets_dir.glob("*.log") for _ in iter_batches(p.read_bytes())) < 60
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g1",
                                         "enable.auto.commit": False})
    try:
        (committed,) = consumer.committed([tp("data", 0)], timeout=30)
        assert committed.offset == 60
    finally:
        consumer.close()


def test_an_io_error_stops_a_cleaning_without_marking_the_log(tmp_path) -> None:
    env = Env(tmp_path)
    for i in range(10):
        env.produce([(b"k", b"v%d" % i)])
    env.log.roll()
    before = read_all(env.log)

    def vanish(step: str) -> None:
        raise FileNotFoundError("a segment deleted by retention meanwhile")

    cleaner = env.cleaner(crash_hook=vanish)
    assert cleaner.do_one_cleaning()
    assert cleaner.manager.uncleanable_partitions() == set()
    assert not [p for p in env.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert read_all(env.log) == before
    assert env.cleaner().do_one_cleaning()  # the next pass cleans it
    assert len(read_all(env.log)) == 1


def test_nothing_to_clean_between_dirty_and_uncleanable_is_not_a_cleaning(tmp_path) -> None:
    env = Env(tmp_path)
    for i in range(10):
        env.produce([(b"k", b"v%d" % i)])
    env.produce([(b"open", b"x")], producer_id=5, producer_epoch=0, base_sequence=0,
                is_transactional=True)  # an open transaction: the first unstable offset
    for i in range(10):
        env.produce([(b"k", b"w%d" % i)])
    env.log.roll()
    cleaner = env.cleaner()
    assert cleaner.do_one_cleaning()
    assert CleanerCheckpoints().read(env.log.parent_dir)[TP] == 10  # stopped at the open txn
    assert not cleaner.do_one_cleaning(), "no busy loop while the transaction stays open"
    _end_txn(env, ControlRecordType.COMMIT, 5)
    env.log.roll()
    assert cleaner.do_one_cleaning()
    assert [r for r in read_all(env.log) if r[1] == b"k"] == [(20, b"k", b"w9")]
