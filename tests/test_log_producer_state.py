"""Tests of broker/log/producer_state.py: idempotent dedup (I1-I6), transactions, and the
``.snapshot`` files (layout from ProducerSnapshot.json, R9, R10, R11)."""

from __future__ import annotations

import json
import os
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import files
from broker.log.clock import MockTime
from broker.log.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from broker.log.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    CompletedTxn,
    InvalidTxnStateError,
    ProducerStateEntry,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
    decode_snapshot,
    encode_snapshot,
)
from broker.log.validator import AppendOrigin
from broker.record import batch as rb
from broker.record.batch import crc32c
from broker.record.control import ControlRecordType, encode_end_txn_marker_batch

NOW = 1_700_000_000_000
MAX_SEQ = 2**31 - 1
SPEC = Path(__file__).resolve().parent.parent / "tools" / "kafka-spec" / "storage" / "ProducerSnapshot.json"


class FakeLog:
    """The producer-state part of UnifiedLog.append around a ProducerStateManager: assign
    offsets from the LEO, look for a duplicate, validate, then 'write' and apply."""

    def __init__(self, directory: Path, **kw) -> None:
        self.dir = Path(directory)
        self.leo = 0
        self.kw = kw
        self.psm = ProducerStateManager(self.dir, time=MockTime(current_time_ms=NOW), **kw)
        self.aborted: list[tuple[CompletedTxn, int]] = []
        self.completed: list[tuple[CompletedTxn, int]] = []

    def _append(self, data: bytes, origin=AppendOrigin.CLIENT) -> tuple[int, int]:
        buf = bytearray(data)
        rb.write_base_offset(buf, 0, self.leo)
        header = rb.read_header(buf)
        before = self.psm.active_producers()
        try:
            analysis = self.psm.analyze_append(buf, [(0, header)], origin)
        except Exception:
            assert self.psm.active_producers() == before, "a rejected append changed the state"
            raise
        if analysis.duplicate is not None:
            return analysis.duplicate.first_offset, analysis.duplicate.last_offset
        self.leo = header.next_offset
        for completed, lso in self.psm.apply_append(analysis, self.leo):
            self.completed.append((completed, lso))
            if completed.is_aborted:
                self.aborted.append((completed, lso))
        return header.base_offset, header.last_offset

    def append(self, pid: int, epoch: int, seq: int, count: int = 1, *, txn: bool = False,
               ts: int = NOW) -> tuple[int, int]:
        data = rb.encode_batch([(b"k", b"v", ts)] * count, producer_id=pid, producer_epoch=epoch,
                               base_sequence=seq, is_transactional=txn)
        return self._append(data)

    def marker(self, pid: int, epoch: int, kind=ControlRecordType.COMMIT, coordinator_epoch: int = 0,
               ts: int = NOW) -> tuple[int, int]:
        data = encode_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=epoch,
                                           coordinator_epoch=coordinator_epoch, timestamp=ts)
        return self._append(data, AppendOrigin.COORDINATOR)

    def reopen(self) -> None:
        """Restart from the snapshot directory alone (no log tail to replay)."""
        self.psm = ProducerStateManager(self.dir, time=MockTime(current_time_ms=NOW), **self.kw)
        self.psm.truncate_and_reload(0, self.leo, NOW)


@pytest.fixture
def log(tmp_path: Path) -> FakeLog:
    return FakeLog(tmp_path)


# --- I1-I6 ---

def test_i1_tail_duplicate_returns_the_original_offsets(log):
    assert log.append(1, 0, 0, 3) == (0, 2)
    assert log.append(1, 0, 3, 2) == (3, 4)
    assert log.append(1, 0, 3, 2) == (3, 4)
    assert log.leo == 5
    assert log.append(1, 0, 5, 1) == (5, 5)


def test_i2_five_batch_window(log):
    offsets = [log.append(1, 0, seq, 1) for seq in range(6)]
    leo = log.leo
    for seq in range(1, 6):  # the last five
        assert log.append(1, 0, seq, 1) == offsets[seq]
    with pytest.raises(OutOfOrderSequenceError):
        log.append(1, 0, 0, 1)  # the sixth-oldest
    assert log.leo == leo
    assert len(log.psm.last_entry(1).batch_metadata) == NUM_BATCHES_TO_RETAIN


def test_i3_partial_overlap(log):
    log.append(1, 0, 0, 5)
    log.append(1, 0, 5, 5)
    for seq, count in ((7, 6), (3, 5), (5, 4), (9, 2)):
        with pytest.raises(OutOfOrderSequenceError):
            log.append(1, 0, seq, count)
    assert log.leo == 10


def test_i4_gap(log):
    log.append(1, 0, 0, 5)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(1, 0, 6, 1)
    assert log.leo == 5
    assert log.append(1, 0, 5, 1) == (5, 5)


def test_i5_epoch_fencing(log):
    log.append(1, 1, 0, 2)
    with pytest.raises(InvalidProducerEpochError):
        log.append(1, 0, 2, 1)
    with pytest.raises(InvalidProducerEpochError):
        log.append(1, 0, 0, 2)  # not a duplicate either: another epoch
    with pytest.raises(OutOfOrderSequenceError):
        log.append(1, 2, 5, 1)  # a new epoch must start at 0
    assert log.append(1, 2, 0, 1) == (2, 2)
    assert log.psm.last_entry(1).producer_epoch == 2


def test_i5_after_a_marker_alone_the_sequence_restarts_at_zero(log):
    log.marker(9, 3, ControlRecordType.ABORT)  # e.g. the coordinator bumped the epoch
    entry = log.psm.last_entry(9)
    assert entry.producer_epoch == 3 and entry.is_empty()
    with pytest.raises(OutOfOrderSequenceError):
        log.append(9, 3, 5, 1)
    assert log.append(9, 3, 0, 1) == (1, 1)


def test_i5_marker_with_a_bumped_epoch_forgets_the_old_batches(log):
    log.append(4, 0, 0, 2, txn=True)
    log.marker(4, 1, ControlRecordType.ABORT)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(4, 1, 2, 1)
    with pytest.raises(InvalidProducerEpochError):
        log.append(4, 0, 0, 2)
    assert log.append(4, 1, 0, 1) == (3, 3)


def test_i6_wraparound(log):
    log.append(1, 0, MAX_SEQ - 2, 3)  # unknown producer: any start; ends at 2**31-1
    assert log.psm.last_entry(1).last_seq == MAX_SEQ
    assert log.append(1, 0, 0, 1) == (3, 3)
    log.append(2, 0, MAX_SEQ, 1)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(2, 0, 1, 1)
    # a batch that straddles the wrap: 2**31-1, 0, 1
    log.append(3, 0, MAX_SEQ - 1, 1)
    first, last = log.append(3, 0, MAX_SEQ, 3)
    assert log.psm.last_entry(3).last_seq == 1
    assert log.append(3, 0, MAX_SEQ, 3) == (first, last)  # still deduplicated
    log.append(3, 0, 2, 1)


def test_unknown_producer_may_start_anywhere(log):
    # Kafka >= 2.5 (KIP-360): no UNKNOWN_PRODUCER_ID for a producer without state.
    assert log.append(77, 4, 1234, 2) == (0, 1)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(77, 4, 1237, 1)


def test_two_phase_update_changes_nothing_until_applied(log):
    log.append(1, 0, 0, 1)
    before = log.psm.active_producers()
    info = log.psm.prepare_update(1)
    data = bytearray(rb.encode_batch([(b"k", b"v", NOW)], base_offset=1, producer_id=1,
                                     producer_epoch=0, base_sequence=1))
    info.append(rb.read_header(data), data, 0)
    assert log.psm.active_producers() == before  # e.g. the disk write failed: drop info
    log.psm.update(info)
    assert log.psm.last_entry(1).last_seq == 1
    with pytest.raises(ValueError):
        log.psm.update(info)


def test_find_duplicate(log):
    log.append(1, 0, 0, 2)
    data = rb.encode_batch([(b"k", b"v", NOW)] * 2, producer_id=1, producer_epoch=0, base_sequence=0)
    assert log.psm.find_duplicate(rb.read_header(data)) == BatchMetadata(1, 1, 1, NOW)
    other = rb.encode_batch([(b"k", b"v", NOW)] * 2, producer_id=2, producer_epoch=0, base_sequence=0)
    assert log.psm.find_duplicate(rb.read_header(other)) is None


# --- transactions ---

def test_transactions_complete_with_kafkas_last_stable_offset(log):
    log.leo = 100
    log.append(1, 0, 0, 2, txn=True)  # 100-101
    log.append(2, 0, 0, 2, txn=True)  # 102-103
    log.append(2, 0, 2, 2, txn=True)  # 104-105
    assert log.psm.first_unstable_offset() == 100
    assert [t.first_offset for t in log.psm.ongoing_transactions()] == [100, 102]
    log.marker(2, 0, ControlRecordType.ABORT)  # 106
    log.marker(1, 0, ControlRecordType.COMMIT)  # 107
    assert log.completed == [(CompletedTxn(2, 102, 106, True), 100),
                             (CompletedTxn(1, 100, 107, False), 108)]
    assert log.aborted == [(CompletedTxn(2, 102, 106, True), 100)]
    # completed but not yet below the high watermark: still unstable
    assert log.psm.first_unstable_offset() == 100
    log.psm.on_high_watermark_updated(107)
    assert log.psm.first_unstable_offset() == 100
    log.psm.on_high_watermark_updated(108)
    assert log.psm.first_unstable_offset() is None
    assert log.psm.last_entry(1).current_txn_first_offset is None


def test_non_transactional_write_inside_a_transaction(log):
    log.append(1, 0, 0, 1, txn=True)
    with pytest.raises(InvalidTxnStateError):
        log.append(1, 0, 1, 1, txn=False)


def test_marker_from_a_fenced_coordinator_or_an_old_epoch(log):
    log.append(1, 2, 0, 1, txn=True)
    log.marker(1, 2, ControlRecordType.COMMIT, coordinator_epoch=5)
    log.append(1, 2, 1, 1, txn=True)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.marker(1, 2, ControlRecordType.COMMIT, coordinator_epoch=4)
    with pytest.raises(InvalidProducerEpochError):
        log.marker(1, 1, ControlRecordType.COMMIT, coordinator_epoch=6)
    assert log.psm.first_undecided_offset() == 2
    log.marker(1, 2, ControlRecordType.ABORT, coordinator_epoch=5)
    assert log.aborted == [(CompletedTxn(1, 2, 3, True), 4)]


def test_replay_rebuilds_state_and_aborted_txns_without_raising(tmp_path):
    """LogSegment.recover-style replay (R13's shape): pid 1 commits, pid 2 aborts."""
    segment = bytearray()
    offset = 100

    def add(data: bytes) -> None:
        nonlocal offset
        buf = bytearray(data)
        rb.write_base_offset(buf, 0, offset)
        offset = rb.read_header(buf).next_offset
        segment.extend(buf)

    def data(pid, seq, n, epoch=0):
        return rb.encode_batch([(b"k", b"v", NOW)] * n, producer_id=pid, producer_epoch=epoch,
                               base_sequence=seq, is_transactional=True)

    add(data(1, 0, 2))  # 100-101
    add(data(2, 0, 2))  # 102-103
    add(data(2, 2, 3))  # 104-106
    add(_kind_marker(2, ControlRecordType.ABORT))  # 107
    add(_kind_marker(1, ControlRecordType.COMMIT))  # 108
    add(data(3, 10, 1, epoch=1))  # 109; then a stale epoch and a gap: accepted on replay
    add(data(3, 0, 1, epoch=0))
    psm = ProducerStateManager(tmp_path, time=MockTime(current_time_ms=NOW))
    psm.truncate_and_reload(0, 100, NOW)
    result = psm.load_producers_from_records(segment)
    assert result == [(CompletedTxn(2, 102, 107, True), 100), (CompletedTxn(1, 100, 108, False), 109)]
    assert psm.map_end_offset == offset
    assert psm.last_entry(3).last_seq == 0
    assert psm.first_undecided_offset() == 109  # pid 3's batches are transactional and open


def _kind_marker(pid: int, kind: ControlRecordType) -> bytes:
    return encode_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                       timestamp=NOW)


# --- snapshots ---

def _spec_format() -> tuple[str, list[str], str]:
    """(header struct format, entry field names, entry struct format) from the JSON spec."""
    text = "\n".join(line for line in SPEC.read_text().splitlines() if not line.strip().startswith("//"))
    spec = json.loads(text)
    assert spec["validVersions"] == "1" and spec["flexibleVersions"] == "none"  # no tagged fields
    codes = {"int16": "h", "int32": "i", "int64": "q", "uint32": "I"}
    top = spec["fields"]
    assert [f["name"] for f in top] == ["Crc", "ProducerEntries"]
    entry_fields = top[1]["fields"]
    return (">h" + codes[top[0]["type"]], [f["name"] for f in entry_fields],
            ">" + "".join(codes[f["type"]] for f in entry_fields))


def test_snapshot_byte_layout_follows_producer_snapshot_json(log):
    log.leo = 40
    log.append(5, 2, 0, 3, ts=NOW + 1)  # 40-42
    log.append(5, 2, 3, 2, ts=NOW + 2)  # 43-44
    log.append(3, 0, 0, 1, txn=True, ts=NOW + 3)  # 45
    log.marker(8, 1, ControlRecordType.ABORT, coordinator_epoch=4, ts=NOW + 4)  # 46
    path = log.psm.take_snapshot()
    assert path.name == "00000000000000000047.snapshot"
    header_fmt, names, entry_fmt = _spec_format()
    values = {  # by producer id, in the JSON's field order
        3: dict(ProducerId=3, Epoch=0, LastSequence=0, LastOffset=45, OffsetDelta=0, Timestamp=NOW + 3,
                CoordinatorEpoch=-1, CurrentTxnFirstOffset=45),
        5: dict(ProducerId=5, Epoch=2, LastSequence=4, LastOffset=44, OffsetDelta=1, Timestamp=NOW + 2,
                CoordinatorEpoch=-1, CurrentTxnFirstOffset=-1),
        8: dict(ProducerId=8, Epoch=1, LastSequence=-1, LastOffset=-1, OffsetDelta=0, Timestamp=NOW + 4,
                CoordinatorEpoch=4, CurrentTxnFirstOffset=-1),
    }
    body = struct.pack(">i", 3) + b"".join(
        struct.pack(entry_fmt, *(values[pid][n] for n in names)) for pid in sorted(values))
    expected = struct.pack(header_fmt, 1, crc32c(body)) + body
    assert struct.calcsize(entry_fmt) == 46
    assert path.read_bytes() == expected


def test_snapshot_round_trip_keeps_only_the_last_batch(log):
    for seq in range(4):
        log.append(1, 0, seq * 2, 2)
    log.append(2, 3, 0, 1, txn=True)
    log.marker(6, 2)
    assert log.psm.take_snapshot() is not None
    assert log.psm.take_snapshot() is None  # nothing new since
    expected = log.psm.active_producers()
    log.reopen()
    assert log.psm.map_end_offset == log.leo
    loaded = log.psm.active_producers()
    assert set(loaded) == set(expected)
    for pid, entry in expected.items():
        got = loaded[pid]
        assert got.batch_metadata == entry.batch_metadata[-1:]
        assert (got.producer_epoch, got.coordinator_epoch, got.last_timestamp,
                got.current_txn_first_offset) == (entry.producer_epoch, entry.coordinator_epoch,
                                                  entry.last_timestamp, entry.current_txn_first_offset)
    assert log.psm.first_undecided_offset() == 8
    # Kafka's format keeps one batch per producer: the last one still deduplicates, an
    # older one is out of order after the restart.
    assert log.append(1, 0, 6, 2) == (6, 7)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(1, 0, 4, 2)
    assert log.append(1, 0, 8, 1) == (10, 10)


def test_encode_decode_entries():
    entries = [ProducerStateEntry(9, 1, 2, NOW, 55, [BatchMetadata(10, 60, 3, NOW)]),
               ProducerStateEntry(4, 0, -1, NOW, None, [])]
    assert decode_snapshot(encode_snapshot(entries)) == sorted(entries, key=lambda e: e.producer_id)


def _two_snapshots(log: FakeLog) -> tuple[Path, Path, dict]:
    log.append(1, 0, 0, 5)
    old = log.psm.take_snapshot()
    old_state = log.psm.active_producers()
    log.append(1, 0, 5, 5)
    log.append(2, 0, 0, 1)
    new = log.psm.take_snapshot()
    log.append(1, 0, 10, 1)
    return old, new, old_state


@pytest.mark.parametrize("damage", ["empty", "half", "zeros37"])
def test_r9_corrupt_latest_snapshot_falls_back_to_the_previous(log, damage):
    old, new, old_state = _two_snapshots(log)
    data = new.read_bytes()
    new.write_bytes({"empty": b"", "half": data[:len(data) // 2], "zeros37": bytes(37)}[damage])
    log.reopen()  # no exception
    assert not new.exists(), "the corrupt snapshot must be deleted"
    assert old.exists()
    assert log.psm.map_end_offset == 5  # replay would start from the older snapshot
    assert log.psm.active_producers() == old_state
    assert log.psm.last_entry(1).last_data_offset == 4
    assert log.psm.snapshot_files() == [old]


def test_r9_all_snapshots_corrupt_starts_empty(log):
    old, new, _ = _two_snapshots(log)
    old.write_bytes(b"\x00\x01garbage")
    new.write_bytes(b"")
    log.reopen()
    assert log.psm.is_empty() and log.psm.map_end_offset == 0
    assert log.psm.snapshot_files() == []


def test_r10_any_flipped_byte_after_the_crc_field_is_corrupt(log):
    log.append(1, 0, 0, 3)
    log.append(2, 1, 0, 1, txn=True)
    data = log.psm.take_snapshot().read_bytes()
    decode_snapshot(data)
    for i in range(len(data)):
        for flip in (0x01, 0x80):
            damaged = bytearray(data)
            damaged[i] ^= flip
            with pytest.raises(CorruptSnapshotError):
                decode_snapshot(bytes(damaged))
    # a count that runs past the end, with a CRC that matches it
    body = struct.pack(">i", 5) + data[10:]
    with pytest.raises(CorruptSnapshotError, match="entries"):
        decode_snapshot(struct.pack(">hI", 1, crc32c(body)) + body)
    with pytest.raises(CorruptSnapshotError, match="version"):
        decode_snapshot(struct.pack(">hI", 2, crc32c(data[6:])) + data[6:])


def test_r10_flipped_byte_through_the_manager(log):
    old, new, old_state = _two_snapshots(log)
    damaged = bytearray(new.read_bytes())
    damaged[20] ^= 0x10
    new.write_bytes(bytes(damaged))
    log.reopen()
    assert not new.exists() and log.psm.active_producers() == old_state


def _no_tmp(directory: Path) -> None:
    assert [p.name for p in directory.iterdir() if p.name.endswith(files.TMP_FILE_SUFFIX)] == []


@pytest.mark.parametrize("where", ["fsync", "open", "write", "replace"])
def test_r11_failed_snapshot_write_propagates_and_keeps_the_old_one(log, monkeypatch, where):
    old, new, _ = _two_snapshots(log)
    new.unlink()
    log.psm = ProducerStateManager(log.dir, time=MockTime(current_time_ms=NOW))
    log.psm.truncate_and_reload(0, 10, NOW)  # state from the old snapshot, then replay...
    log.psm.update_map_end_offset(log.leo)  # ...pretend the tail was replayed
    old_bytes = old.read_bytes()

    def boom(*args, **kwargs):
        raise OSError(5, "injected I/O error")

    if where == "fsync":
        monkeypatch.setattr(os, "fsync", boom)
    elif where == "replace":
        monkeypatch.setattr(os, "replace", boom)
    elif where == "open":
        monkeypatch.setattr(files, "open", boom, raising=False)
    else:
        real_open = open

        class FailingFile:
            def __init__(self, *a, **k):
                self.f = real_open(*a, **k)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.f.close()

            def write(self, data):
                self.f.write(data[:3])
                raise OSError(28, "No space left on device")

        monkeypatch.setattr(files, "open", FailingFile, raising=False)
    with pytest.raises(OSError):
        log.psm.take_snapshot()
    monkeypatch.undo()
    _no_tmp(log.dir)
    assert old.read_bytes() == old_bytes
    assert log.psm.latest_snapshot_offset() == 5
    log.reopen()
    assert log.psm.map_end_offset == 5
    # the next attempt succeeds
    log.psm.update_map_end_offset(log.leo)
    assert log.psm.take_snapshot() is not None


def test_r11_directory_fsync_failure_after_the_rename(log, monkeypatch):
    log.append(1, 0, 0, 2)
    monkeypatch.setattr(files, "fsync_dir", lambda d: (_ for _ in ()).throw(OSError(5, "dir")))
    with pytest.raises(OSError):
        log.psm.take_snapshot()
    monkeypatch.undo()
    _no_tmp(log.dir)
    # the renamed file is complete and tracked
    assert log.psm.latest_snapshot_offset() == 2
    log.reopen()
    assert log.psm.last_entry(1).last_seq == 1


def test_stray_tmp_files_are_removed_on_open(tmp_path):
    (tmp_path / "00000000000000000007.snapshot.tmp").write_bytes(b"half")
    ProducerStateManager(tmp_path)
    _no_tmp(tmp_path)


def test_snapshot_bookkeeping(tmp_path):
    log = FakeLog(tmp_path)
    for i in range(5):
        log.append(1, 0, i, 1)
        log.psm.take_snapshot()
    psm = log.psm
    assert [files.offset_from_file_name(p.name) for p in psm.snapshot_files()] == [1, 2, 3, 4, 5]
    assert (psm.oldest_snapshot_offset(), psm.latest_snapshot_offset()) == (1, 5)
    psm.delete_snapshots_before(3)
    assert psm.oldest_snapshot_offset() == 3
    assert psm.fetch_snapshot(4) == files.producer_snapshot_file(tmp_path, 4)
    # truncation removes snapshots above the new end (and at or below the start), reloads
    psm.truncate_and_reload(3, 4, NOW)
    assert [files.offset_from_file_name(p.name) for p in psm.snapshot_files()] == [4]
    assert psm.map_end_offset == 4 and psm.last_entry(1).last_seq == 3
    (tmp_path / files.producer_snapshot_file(tmp_path, 9).name).write_bytes(b"")
    (tmp_path / files.producer_snapshot_file(tmp_path, 2).name).write_bytes(b"")
    psm.remove_stray_snapshots([0, 4])
    assert [files.offset_from_file_name(p.name) for p in psm.snapshot_files()] == [4, 9]
    psm.truncate_fully_and_start_at(50)
    assert psm.snapshot_files() == [] and list(tmp_path.glob("*.snapshot")) == []
    assert psm.map_end_offset == 50 and psm.is_empty()


def test_producer_expiration(tmp_path):
    log = FakeLog(tmp_path, producer_id_expiration_ms=1000)
    log.psm.time = MockTime(current_time_ms=NOW - 4500)
    log.append(1, 0, 0, 1, ts=NOW - 5000)
    log.append(2, 0, 0, 1, ts=NOW - 5000, txn=True)  # open txn: never expires
    log.append(3, 0, 0, 1, ts=NOW - 10)
    log.psm.take_snapshot()
    assert log.psm.remove_expired_producers() == []  # the clock: idle for 500 ms only ...
    log.psm.time.sleep(4500)  # ... now NOW: producers 1 and 2 idle for 5 s
    assert sorted(log.psm.remove_expired_producers()) == [1]
    assert sorted(log.psm.active_producers()) == [2, 3]
    log.reopen()  # expired entries are dropped on load too
    assert sorted(log.psm.active_producers()) == [2, 3]


# --- model-based property test ---

class Model:
    def __init__(self) -> None:
        self.epoch: dict[int, int] = {}
        self.next_seq: dict[int, int] = {}
        self.window: dict[int, list[tuple[int, int, int, int, int]]] = {}  # epoch, fseq, lseq, foff, loff
        self.history: dict[int, list[tuple[int, int, int, int, int]]] = {}


actions = st.lists(st.tuples(st.sampled_from(["new", "new", "new", "retry", "gap", "overlap", "bump",
                                              "stale", "reload"]),
                             st.integers(1, 3), st.integers(1, 3), st.integers(0, 20)),
                   min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions)
def test_random_appends_retries_and_restarts_match_a_model(script):
    with tempfile.TemporaryDirectory() as d:
        log, m = FakeLog(Path(d)), Model()
        for kind, pid, count, k in script:
            epoch = m.epoch.setdefault(pid, 0)
            nxt = m.next_seq.setdefault(pid, 0)
            window = m.window.setdefault(pid, [])
            history = m.history.setdefault(pid, [])
            leo = log.leo
            if kind in ("new", "bump"):
                if kind == "bump":
                    epoch = m.epoch[pid] = epoch + 1
                    nxt = 0
                    window.clear()
                    if k % 2 and history:
                        with pytest.raises(OutOfOrderSequenceError):
                            log.append(pid, epoch, 1 + k, count)
                        assert log.leo == leo
                first, last = log.append(pid, epoch, nxt, count)
                assert (first, last) == (leo, leo + count - 1)
                rec = (epoch, nxt, (nxt + count - 1) % 2**31, first, last)
                window.append(rec)
                del window[:-5]
                history.append(rec)
                m.next_seq[pid] = (nxt + count) % 2**31
            elif kind == "retry" and history:
                rec = history[k % len(history)]
                rec_epoch, fseq, lseq, foff, loff = rec
                count_ = (lseq - fseq) % 2**31 + 1
                if rec in window:
                    assert log.append(pid, rec_epoch, fseq, count_) == (foff, loff)
                else:
                    error = InvalidProducerEpochError if rec_epoch < epoch else OutOfOrderSequenceError
                    with pytest.raises(error):
                        log.append(pid, rec_epoch, fseq, count_)
                assert log.leo == leo
            elif kind == "gap" and window:
                with pytest.raises(OutOfOrderSequenceError):
                    log.append(pid, epoch, nxt + 1 + k, count)
                assert log.leo == leo
            elif kind == "overlap" and window:
                lseq = window[-1][2]
                with pytest.raises(OutOfOrderSequenceError):
                    log.append(pid, epoch, lseq, 2)
                assert log.leo == leo
            elif kind == "stale" and epoch > 0:
                with pytest.raises(InvalidProducerEpochError):
                    log.append(pid, epoch - 1, nxt, count)
            elif kind == "reload":
                log.psm.take_snapshot()
                log.reopen()
                for w in m.window.values():
                    del w[:-1]  # the snapshot keeps each producer's last batch only
