"""Property test of broker/log/unified_log.py's fused single-batch append (the path of every
Produce request since v3) against the general path (``_fused_single_batch = False``:
``analyze_and_validate_records``, ``assign_offsets``, ``LocalLog.append``).

Hypothesis drives the same random sequence of operations into two logs, one per path:
appends of one batch (sizes, record timestamps old and new, no producer id or producer ids
with epochs and sequences that make duplicates, gaps and fenced epochs, transactional
batches, COMMIT/ABORT markers from the coordinator, leader epochs, LogAppendTime topics,
segment.bytes / segment.ms / index sizes small enough to roll often), appends of two
batches, explicit rolls, truncations, DeleteRecords, clock moves and scheduler runs. After
every operation both logs must agree on the result (the ``LogAppendInfo``, or the error
type), the offsets (log end offset with its position, high watermark, last stable offset,
log start offset, recovery point), the producer state, the leader-epoch cache, the segment
set and each segment's in-memory roll/index state, and every file of the two partition
directories byte for byte (.log, .index, .timeindex, .txnindex, .snapshot,
leader-epoch-checkpoint); once more after both are closed."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log.clock import MockTime
from broker.log.config import LogConfig
from broker.log.scheduler import Scheduler
from broker.log.unified_log import UnifiedLog
from broker.log.validator import AppendOrigin
from broker.record.batch import NO_TIMESTAMP, encode_batch
from broker.record.control import ControlRecordType, encode_end_txn_marker_batch

PIDS = (-1, 3, 4)


def _config(props: dict) -> LogConfig:
    return LogConfig.from_props(props)


class Pair:
    """The two logs, each in its own directory with its own MockTime and scheduler."""

    def __init__(self, props: dict) -> None:
        self.roots = [Path(tempfile.mkdtemp(prefix="append-fused-")) for _ in range(2)]
        self.times = [MockTime() for _ in range(2)]
        self.schedulers = [Scheduler(t) for t in self.times]
        try:
            self.logs = [UnifiedLog.create(root / "topic-0", _config(props), time=t, scheduler=s)
                         for root, t, s in zip(self.roots, self.times, self.schedulers)]
        except BaseException:
            self.close()
            raise
        self.logs[0]._fused_single_batch = False  # the reference: the general path
        self.next_seq: dict[int, int] = {}  # producer id -> the sequence after its last append (any epoch)
        assert self.logs[1]._fused_single_batch

    def now(self) -> int:
        return self.times[0].milliseconds()

    def both(self, op):
        """Run ``op(log)`` on both logs; the results (or the error types) must agree."""
        outcomes = []
        for ulog in self.logs:
            try:
                outcomes.append(("ok", op(ulog)))
            except Exception as exc:  # the error type must agree, e.g. OutOfOrderSequenceError
                outcomes.append(("error", type(exc)))
        return outcomes

    def close(self) -> None:
        for root in self.roots:
            shutil.rmtree(root, ignore_errors=True)


def _normalise(outcome):
    kind, value = outcome
    if kind == "ok" and hasattr(value, "_replace") and hasattr(value, "record_max_timestamps"):
        # the general path keeps the per-batch record maxima it computed; the fused path has none
        return kind, value._replace(record_max_timestamps=None)
    if kind == "ok" and hasattr(value, "base_offset"):  # a LogSegment (roll)
        return kind, value.base_offset
    return kind, value


def _segment_state(segment) -> tuple:
    return (segment.base_offset, segment.size, segment._rolling_based_timestamp,
            segment._max_timestamp_and_offset, segment._bytes_since_last_index_entry,
            segment.roll_jitter_ms, segment.offset_index.entries, segment.time_index.entries,
            segment.time_index.last_entry, segment.offset_index.last_offset)


def _producers(ulog: UnifiedLog) -> dict:
    return {pid: (e.producer_epoch, e.coordinator_epoch, e.last_timestamp, e.current_txn_first_offset,
                  e.batch_metadata)
            for pid, e in ulog.producer_state_manager.active_producers().items()}


def _state(ulog: UnifiedLog) -> tuple:
    cache = ulog.leader_epoch_cache
    return (ulog.log_end_offset_metadata, ulog._high_watermark_metadata, ulog.last_stable_offset,
            ulog.first_unstable_offset, ulog.log_start_offset, ulog.recovery_point,
            ulog.producer_state_manager.map_end_offset, _producers(ulog),
            ulog.producer_state_manager.first_unstable_offset(),
            tuple(cache.epoch_entries()) if cache is not None else None,
            tuple(_segment_state(s) for s in ulog.segments),
            tuple(s.base_offset for s in ulog.local_log.pending_deletes))


def _contents(path: Path) -> tuple[int, bytes]:
    """The file's size and its bytes without their trailing zeros: equal for two files
    exactly when their bytes are. An active segment's indexes are sparse files of
    ``segment.index.bytes`` (up to 10 MiB here, read after every operation), so only the
    bytes before the file's last hole are read, where the file system can say where that is
    (``SEEK_DATA``/``SEEK_HOLE``); a hole reads as zeros."""
    with open(path, "rb") as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        end = 0
        try:
            while end < size:
                end = os.lseek(fd, os.lseek(fd, end, os.SEEK_DATA), os.SEEK_HOLE)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no data after ``end``
                end = size
        f.seek(0)
        return size, f.read(end).rstrip(b"\0")


def _files(ulog: UnifiedLog) -> dict:
    return {p.name: _contents(p) for p in sorted(ulog.dir.iterdir()) if p.is_file()}


def _assert_same(pair: Pair) -> None:
    ref, fused = pair.logs
    assert _state(fused) == _state(ref)
    ref_files, fused_files = _files(ref), _files(fused)
    assert sorted(fused_files) == sorted(ref_files)
    for name, data in ref_files.items():
        assert fused_files[name] == data, f"{name} differs"


# --- the operations ---

_record = st.tuples(st.integers(0, 300),  # value size
                    st.one_of(st.integers(-200_000, 2_000), st.just(None)))  # timestamp delta, None: no timestamp
_append = st.fixed_dictionaries({
    "op": st.just("append"),
    "records": st.lists(_record, min_size=1, max_size=5),
    "pid": st.sampled_from(PIDS),
    "epoch": st.integers(0, 2),
    "seq": st.one_of(st.just("next"), st.just("next"), st.integers(0, 12)),  # next: continue the sequence
    "txn": st.booleans(),
    "compression": st.sampled_from([0, 0, 0, 1]),
    "leader_epoch": st.integers(0, 4),
    "two": st.booleans() | st.just(False),  # two batches: the general path in both
})
_marker = st.fixed_dictionaries({
    "op": st.just("marker"),
    "commit": st.booleans(),
    "pid": st.sampled_from(PIDS[1:]),
    "epoch": st.integers(0, 2),
    "leader_epoch": st.integers(0, 4),
})
_other = st.one_of(
    st.fixed_dictionaries({"op": st.just("sleep"), "ms": st.integers(0, 5_000)}),
    st.fixed_dictionaries({"op": st.just("roll")}),
    st.fixed_dictionaries({"op": st.just("truncate"), "back": st.integers(0, 30)}),
    st.fixed_dictionaries({"op": st.just("delete_records"), "back": st.integers(0, 30)}),
    st.fixed_dictionaries({"op": st.just("run_scheduler")}),
)
_operations = st.lists(st.one_of(_append, _append, _append, _marker, _other), min_size=1, max_size=40)
_props = st.fixed_dictionaries({
    "segment.bytes": st.sampled_from([700, 2_000, 1 << 30]),
    "segment.ms": st.sampled_from([3_000, 20_000, 604_800_000]),
    "segment.index.bytes": st.sampled_from([40, 100, 10 * 1024 * 1024]),
    "index.interval.bytes": st.sampled_from([0, 150, 4096]),
    "message.timestamp.type": st.sampled_from(["CreateTime", "CreateTime", "LogAppendTime"]),
    "flush.messages": st.sampled_from([1 << 62, 1 << 62, 7]),
})


def _batch_bytes(op: dict, now: int, seq_shift: int = 0, next_seq: dict | None = None) -> bytes:
    records = [(b"k%d" % i, bytes([i]) * size, NO_TIMESTAMP if delta is None else now + delta)
               for i, (size, delta) in enumerate(op["records"])]
    if op["pid"] < 0:
        return encode_batch(records, compression=op["compression"])
    return encode_batch(records, compression=op["compression"], producer_id=op["pid"],
                        producer_epoch=op["epoch"], base_sequence=_seq(op, next_seq) + seq_shift,
                        is_transactional=op["txn"])


def _seq(op: dict, next_seq: dict | None) -> int:
    if op["seq"] == "next":
        return (next_seq or {}).get(op["pid"], 0)
    return op["seq"]


def _run(pair: Pair, op: dict) -> None:
    kind = op["op"]
    if kind == "append":
        data = _batch_bytes(op, pair.now(), next_seq=pair.next_seq)
        count = len(op["records"])
        if op["two"]:
            data += _batch_bytes(op, pair.now(), seq_shift=count, next_seq=pair.next_seq)
            count *= 2
        outcomes = pair.both(lambda ulog: ulog.append_as_leader(bytearray(data), op["leader_epoch"]))
        if op["pid"] >= 0 and outcomes[0][0] == "ok":
            pair.next_seq[op["pid"]] = _seq(op, pair.next_seq) + count
    elif kind == "marker":
        data = encode_end_txn_marker_batch(
            ControlRecordType.COMMIT if op["commit"] else ControlRecordType.ABORT, producer_id=op["pid"],
            producer_epoch=op["epoch"], coordinator_epoch=0, timestamp=pair.now())
        outcomes = pair.both(lambda ulog: ulog.append_as_leader(bytearray(data), op["leader_epoch"],
                                                                origin=AppendOrigin.COORDINATOR))
    elif kind == "sleep":
        for t in pair.times:
            t.sleep(op["ms"])
        return
    elif kind == "roll":
        outcomes = pair.both(lambda ulog: ulog.roll())
    elif kind == "truncate":
        outcomes = pair.both(lambda ulog: ulog.truncate_to(
            max(ulog.log_start_offset, ulog.log_end_offset - op["back"])))
    elif kind == "delete_records":
        outcomes = pair.both(lambda ulog: ulog.maybe_increment_log_start_offset(
            max(ulog.log_start_offset, ulog.high_watermark - op["back"])))
    else:
        for scheduler in pair.schedulers:
            scheduler.run_pending()
        return
    ref, fused = (_normalise(o) for o in outcomes)
    assert fused == ref, op


def _check(props: dict, operations: list[dict]) -> None:
    pair = Pair(props)
    try:
        _assert_same(pair)
        for op in operations:
            _run(pair, op)
            _assert_same(pair)
        for ulog in pair.logs:
            ulog.close()
        ref_files, fused_files = _files(pair.logs[0]), _files(pair.logs[1])
        assert fused_files == ref_files
    finally:
        try:
            for ulog in pair.logs:
                ulog.close_handlers()
        finally:
            pair.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(props=_props, operations=_operations)
def test_fused_single_batch_append_matches_the_general_path(props, operations):
    _check(props, operations)


def _plain(size: int = 100, delta: int | None = 0, pid: int = -1, seq: int = 0) -> dict:
    return {"op": "append", "records": [(size, delta)], "pid": pid, "epoch": 0, "seq": seq, "txn": False,
            "compression": 0, "leader_epoch": 0, "two": False}


def _batch_size() -> int:
    return len(_batch_bytes(_plain(), 0))


@pytest.mark.parametrize("pid", [-1, 3])
@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_segment_bytes_boundary(pid, extra):
    """A batch that exactly fills segment.bytes is appended; one byte more rolls."""
    ops = [_plain(pid=pid, seq=i) for i in range(7)]
    _check({"segment.bytes": 3 * _batch_size() + extra}, ops)


@pytest.mark.parametrize("pid", [-1, 3])
@pytest.mark.parametrize("delta", [0, None])  # None: no timestamp, the segment's creation time counts
@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_segment_ms_boundary(pid, delta, extra):
    """segment.ms: waiting exactly segment.ms does not roll, one millisecond more does."""
    ops = [_plain(delta=delta, pid=pid, seq=0), {"op": "sleep", "ms": 3_000 + extra},
           _plain(delta=delta, pid=pid, seq=1), {"op": "sleep", "ms": 1},
           _plain(delta=delta, pid=pid, seq=2)]
    _check({"segment.ms": 3_000}, ops)


@pytest.mark.parametrize("pid", [-1, 3])
@pytest.mark.parametrize("index_bytes", [12, 24, 36, 40])
def test_full_index_boundary(pid, index_bytes):
    """Rolls when the offset index or the time index (one slot reserved) is full."""
    ops = []
    for i in range(12):
        ops += [{"op": "sleep", "ms": 1}, _plain(pid=pid, seq=i)]
    _check({"segment.index.bytes": index_bytes, "index.interval.bytes": 0}, ops)


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_idempotent_runs_in_sequence_with_retries(timestamp_type):
    """The in-sequence producer-state path: long runs (more than the 5 retained batches),
    retries of retained and forgotten batches, gaps, a new epoch, another producer."""
    ops = [_plain(pid=3, seq=i) for i in range(8)]
    ops += [_plain(pid=3, seq=i) for i in (7, 3, 2, 9, 8)]
    ops += [_plain(pid=4, seq=0), _plain(pid=3, seq=9), dict(_plain(pid=3, seq=0), epoch=1),
            dict(_plain(pid=3, seq=1), epoch=1), dict(_plain(pid=3, seq=1), epoch=0),
            # the next sequence, but in an older epoch (fenced) or a newer one (must start at 0)
            dict(_plain(pid=3, seq=2), epoch=0), dict(_plain(pid=3, seq=2), epoch=2),
            dict(_plain(pid=3, seq=2), epoch=1)]
    # inside a transaction: a non-transactional batch in sequence is InvalidTxnStateError
    ops += [dict(_plain(pid=4, seq=1), txn=True), _plain(pid=4, seq=2), dict(_plain(pid=4, seq=2), txn=True),
            {"op": "marker", "commit": True, "pid": 4, "epoch": 0, "leader_epoch": 0},
            _plain(pid=4, seq=3), _plain(pid=4, seq=4),
            dict(_plain(pid=4, seq=5), txn=True),
            {"op": "marker", "commit": False, "pid": 4, "epoch": 0, "leader_epoch": 0}, _plain(pid=4, seq=6)]
    _check({"message.timestamp.type": timestamp_type, "segment.bytes": 5 * _batch_size()}, ops)


def test_the_fused_path_is_taken_for_one_batch(tmp_path, monkeypatch):
    """The property test compares two different paths: a one-batch append on a default log
    goes through ``LocalLog.append_batch_unless_roll`` (no producer id, or the next batch
    of a known producer's sequence) or ``LocalLog.append_batch`` (a new producer), never
    ``LocalLog.append``; with the flag off, through ``LocalLog.append`` only."""
    from broker.log.local_log import LocalLog

    calls = []
    for name in ("append", "append_batch", "append_batch_unless_roll"):
        original = getattr(LocalLog, name)

        def spy(self, *args, _name=name, _original=original, **kw):
            calls.append(_name)
            return _original(self, *args, **kw)

        monkeypatch.setattr(LocalLog, name, spy)
    time = MockTime()
    ulog = UnifiedLog.create(tmp_path / "topic-0", _config({}), time=time, scheduler=Scheduler(time))
    now = time.milliseconds()
    ulog.append_as_leader(bytearray(encode_batch([(b"k", b"v", now)])))
    ulog.append_as_leader(bytearray(encode_batch([(b"k", b"v", now)], producer_id=1, producer_epoch=0,
                                                 base_sequence=0)))
    ulog.append_as_leader(bytearray(encode_batch([(b"k", b"v", now)], producer_id=1, producer_epoch=0,
                                                 base_sequence=1)))  # next in sequence
    assert calls == ["append_batch_unless_roll", "append_batch", "append_batch_unless_roll"]
    calls.clear()
    ulog._fused_single_batch = False
    ulog.append_as_leader(bytearray(encode_batch([(b"k", b"v", now)])))
    assert calls == ["append"]
    ulog.close()
