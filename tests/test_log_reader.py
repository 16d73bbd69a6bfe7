"""Tests of broker/log/reader.py: read-only access to live, copied or damaged log
directories. Every answer is checked against the broker's own ``UnifiedLog`` (boundaries,
ListOffsets by timestamp, aborted transactions, recovery of a torn tail), with indexes
present, missing, preallocated or corrupt, and the directory is checked to be untouched."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from broker.log import files
from broker.log.clock import MockTime
from broker.log.config import LogConfig
from broker.log.reader import LogDirReader, PartitionReader
from broker.log.scheduler import Scheduler
from broker.log.unified_log import UnifiedLog
from broker.log.validator import AppendOrigin
from broker.record.batch import encode_batch, iter_batch_headers
from broker.record.columnar import iter_arrow
from broker.record.control import ControlRecordType, encode_end_txn_marker_batch

BASE_TS = 1_700_000_000_000


def config(**props) -> LogConfig:
    merged = {"segment.bytes": 1024, "index.interval.bytes": 64,
              "message.timestamp.after.max.ms": 2**62}
    merged.update({k.replace("_", "."): v for k, v in props.items()})
    return LogConfig.from_props(merged)


def open_log(directory: Path, **props) -> UnifiedLog:
    time = MockTime()
    return UnifiedLog.create(directory, config(**props), time=time, scheduler=Scheduler(time))


def fill(ulog: UnifiedLog, batches: int = 120, seed: int = 1) -> None:
    """Batches of 1-4 records, every codec, CreateTime timestamps that go back and forth."""
    rng = random.Random(seed)
    for i in range(batches):
        n = rng.randint(1, 4)
        records = [(b"k%d" % i if j % 2 else None, bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))),
                    BASE_TS + i * 10 + rng.randint(-25, 25)) for j in range(n)]
        ulog.append_as_leader(encode_batch(records, compression=i % 5))


def all_records(ulog: UnifiedLog) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record, from the segment files."""
    out = []
    for seg in ulog.segments:
        data = seg.log.path.read_bytes()
        for rb in iter_arrow(data):
            out.extend(zip(rb.column(0).to_pylist(), rb.column(1).to_pylist()))
    return out


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*")}


def decode_range(reader: PartitionReader, start: int, end: int, aborted=None) -> list[int]:
    offsets = []
    for seg in reader.segment_ranges(start, end):
        with open(seg.path, "rb") as f:
            f.seek(seg.start_position)
            data = f.read(seg.end_position - seg.start_position)
        for rb in iter_arrow(data, start, end, aborted=aborted):
            offsets.extend(rb.column(0).to_pylist())
    return offsets


@pytest.fixture
def log_dir(tmp_path):
    root = tmp_path / "logs"
    ulog = open_log(root / "orders-0")
    fill(ulog)
    ulog.close()
    reopened = open_log(root / "orders-0")  # read-side expectations from a clean reload
    yield root, reopened
    reopened.close()


# --- boundaries, ranges, timestamps ---

def test_boundaries_and_segments_match_the_broker(log_dir):
    root, ulog = log_dir
    reader = LogDirReader(root).partition("orders", 0)
    assert (reader.topic, reader.partition) == ("orders", 0)
    assert ulog.num_segments > 3
    assert [s.base_offset for s in reader.segments] == [s.base_offset for s in ulog.segments]
    assert reader.log_start_offset == ulog.log_start_offset == 0
    assert reader.log_end_offset == ulog.log_end_offset


def test_segment_ranges_decode_to_exactly_the_range(log_dir):
    root, ulog = log_dir
    reader = LogDirReader(root).partition("orders", 0)
    leo = ulog.log_end_offset
    bases = [s.base_offset for s in ulog.segments]
    cases = [(0, leo), (1, 2), (bases[1], bases[2]), (bases[1] - 1, bases[1] + 1), (leo - 1, leo),
             (5, leo - 7), (leo, leo), (3, 3)]
    for start, end in cases:
        assert decode_range(reader, start, end) == list(range(start, end)), (start, end)
    # past the first segment, the index floor moves the start position past byte 0
    middle = (bases[1] + bases[2]) // 2
    ranges = reader.segment_ranges(middle, leo)
    assert ranges[0].start_position > 0 and ranges[0].base_offset == bases[1]
    assert [r.base_offset for r in ranges] == bases[1:]


def test_offset_for_timestamp_matches_list_offsets(log_dir):
    root, ulog = log_dir
    reader = LogDirReader(root).partition("orders", 0)
    stamps = sorted({ts for _, ts in all_records(ulog)})
    targets = [0, BASE_TS - 100, stamps[-1], stamps[-1] + 1] + stamps[::7] + [s + 1 for s in stamps[::11]]
    for ts in targets:
        expected = ulog.fetch_offset_by_timestamp(ts)
        assert reader.offset_for_timestamp(ts) == (expected.offset if expected else None), ts
    # the definition, independently of the broker: first offset whose timestamp >= target
    records = all_records(ulog)
    for ts in targets:
        first = next((o for o, t in records if t >= ts), None)
        assert reader.offset_for_timestamp(ts) == first


def damage_indexes(directory: Path, how: str) -> None:
    for path in list(directory.glob("*.index")) + list(directory.glob("*.timeindex")):
        if how == "missing":
            path.unlink()
        elif how == "preallocated":
            with open(path, "ab") as f:  # a zero tail, as after an unclean shutdown
                f.write(bytes(4096 * 12))
        elif how == "torn":
            with open(path, "ab") as f:  # not a whole number of entries: fails the sanity check
                f.write(b"\x01\x02\x03")
        elif how == "stale" and path.suffix == ".index":
            # entries pointing at positions that are not batch starts
            data = bytearray(path.read_bytes())
            for i in range(0, len(data), 8):
                if not any(data[i:i + 8]):
                    break  # the preallocated zero tail of the active segment's index
                data[i + 4:i + 8] = (7 + i).to_bytes(4, "big")
            path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["missing", "preallocated", "torn", "stale"])
def test_damaged_or_missing_indexes_give_the_same_answers(log_dir, tmp_path, how):
    root, ulog = log_dir
    copy = tmp_path / f"copy-{how}"
    shutil.copytree(root, copy)
    damage_indexes(copy / "orders-0", how)
    reader = LogDirReader(copy).partition("orders", 0)
    good = LogDirReader(root).partition("orders", 0)
    leo = ulog.log_end_offset
    assert reader.log_end_offset == leo and reader.log_start_offset == 0
    for start, end in [(0, leo), (17, 60), (leo - 3, leo)]:
        assert decode_range(reader, start, end) == list(range(start, end))
    for ts in [BASE_TS, BASE_TS + 333, BASE_TS + 900, BASE_TS + 5000]:
        assert reader.offset_for_timestamp(ts) == good.offset_for_timestamp(ts)


def test_log_start_offset_from_the_checkpoint(log_dir):
    root, ulog = log_dir
    files.write_offset_checkpoint(root / files.LOG_START_OFFSET_CHECKPOINT_FILE,
                                  {("orders", 0): 17, ("other", 3): 5})
    reader = LogDirReader(root).partition("orders", 0)
    assert reader.log_start_offset == 17
    assert PartitionReader(root / "orders-0").log_start_offset == 17  # read beside the dir
    # offsets for timestamps never point below the log start offset
    assert reader.offset_for_timestamp(0) == 17
    # a stale checkpoint below the first segment does not lower it; a torn one is ignored
    (root / files.LOG_START_OFFSET_CHECKPOINT_FILE).write_text("0\n1\norders 0\n")
    assert PartitionReader(root / "orders-0").log_start_offset == 0


def test_retention_and_delete_records_through_the_log_manager(tmp_path):
    from broker.log.manager import LogManager
    root = tmp_path / "logs"
    manager = LogManager([root], config(retention_ms=-1))
    manager.startup()
    try:
        ulog = manager.get_or_create_log("events", 0)
        fill(ulog, 80)
        assert ulog.maybe_increment_log_start_offset(ulog.segments[2].base_offset + 2)
        ulog.delete_old_segments()
        manager.checkpoint_log_start_offsets()
        reader = LogDirReader(root).partition("events", 0)
        assert reader.log_start_offset == ulog.log_start_offset > reader.segments[0].base_offset
        assert reader.log_end_offset == ulog.log_end_offset
        assert decode_range(reader, reader.log_start_offset, reader.log_end_offset) == \
            list(range(ulog.log_start_offset, ulog.log_end_offset))
    finally:
        manager.shutdown()


# --- torn tails ---

@pytest.mark.parametrize("tail", ["garbage", "partial-batch", "zeros", "bad-crc"])
def test_torn_tail_of_a_copied_live_log(log_dir, tmp_path, tail):
    root, ulog = log_dir
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    last = sorted((copy / "orders-0").glob("*.log"))[-1]
    data = bytearray(last.read_bytes())
    positions = [p for p, _ in iter_batch_headers(bytes(data))]
    if tail == "garbage":
        data += bytes(random.Random(3).randrange(256) for _ in range(70))
    elif tail == "partial-batch":
        batch = encode_batch([(None, b"x" * 200, BASE_TS)])
        data += batch[:150]
    elif tail == "zeros":
        data += bytes(8192)
    else:
        data[positions[-1] + 70] ^= 0xFF  # the last batch fails its CRC
    last.write_bytes(bytes(data))
    reader = LogDirReader(copy).partition("orders", 0)
    # what the broker's recovery of the same files finds
    shutil.copytree(copy / "orders-0", tmp_path / "recover" / "orders-0")
    time = MockTime()
    recovered = UnifiedLog.create(tmp_path / "recover" / "orders-0", config(), time=time,
                                  scheduler=Scheduler(time), last_shutdown_clean=False, recovery_point=0)
    try:
        assert reader.log_end_offset == recovered.log_end_offset
        if tail == "bad-crc":
            assert reader.log_end_offset < ulog.log_end_offset
        else:
            assert reader.log_end_offset == ulog.log_end_offset
        leo = reader.log_end_offset
        assert decode_range(reader, 0, leo) == list(range(0, leo))
    finally:
        recovered.close()


# --- transactions ---

def test_aborted_transactions_across_segments_match_the_broker(tmp_path):
    root = tmp_path / "logs"
    ulog = open_log(root / "txn-0", segment_bytes=600)
    seq = {}

    def txn(pid, *values):
        s = seq.get(pid, 0)
        seq[pid] = s + len(values)
        ulog.append_as_leader(encode_batch([(None, v, BASE_TS) for v in values], producer_id=pid,
                                           producer_epoch=0, base_sequence=s, is_transactional=True))

    def marker(pid, commit):
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        ulog.append_as_leader(encode_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0,
                                                          coordinator_epoch=0, timestamp=BASE_TS),
                              origin=AppendOrigin.COORDINATOR)

    for round_ in range(6):
        txn(1, b"a" * 50, b"b" * 50)
        txn(2, b"c" * 50)
        for _i in range(4):
            ulog.append_as_leader(encode_batch([(None, b"plain" * 10, BASE_TS)]))
        marker(2, commit=False)
        txn(1, b"d" * 50)
        marker(1, commit=round_ % 2 == 0)
    leo = ulog.log_end_offset
    assert ulog.num_segments > 3
    reader = LogDirReader(root).partition("txn", 0)
    for start, end in [(0, leo), (0, 3), (5, 30), (leo - 5, leo), (20, 21)]:
        expected = sorted(ulog.collect_aborted_transactions(start, end))
        got = sorted(reader.aborted_transactions(start, end))
        assert got == expected, (start, end)
    # a range before the ABORT marker still sees the transaction it aborts
    first_abort = reader.aborted_transactions(0, leo)[0]
    assert reader.aborted_transactions(first_abort.first_offset, first_abort.first_offset + 1) == [first_abort]
    ulog.close()


def test_last_stable_offset_matches_the_broker_with_snapshots_without_and_corrupt(tmp_path, caplog):
    """``PartitionReader.last_stable_offset`` (direct mode's read_committed "latest") equals
    the broker's at every step of interleaved transactions across rolls: from the newest
    producer snapshot plus the headers after it, from the headers alone once every
    snapshot is gone, and past a corrupt newest snapshot."""
    root = tmp_path / "logs"
    ulog = open_log(root / "lso-0", segment_bytes=500)
    seq: dict[int, int] = {}

    def txn(pid, n=1):
        s = seq.get(pid, 0)
        seq[pid] = s + n
        ulog.append_as_leader(encode_batch([(None, b"t" * 40, BASE_TS)] * n, producer_id=pid,
                                           producer_epoch=0, base_sequence=s, is_transactional=True))

    def marker(pid, commit=True):
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        ulog.append_as_leader(encode_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0,
                                                          coordinator_epoch=0, timestamp=BASE_TS),
                              origin=AppendOrigin.COORDINATOR)

    def plain():
        ulog.append_as_leader(encode_batch([(None, b"p" * 40, BASE_TS)]))

    def check():
        got = PartitionReader(root / "lso-0").last_stable_offset()
        assert got == ulog.last_stable_offset, (got, ulog.last_stable_offset, ulog.log_end_offset)
        return got

    assert check() == 0  # empty
    steps = [lambda: plain(), lambda: txn(1), lambda: plain(), lambda: txn(2, 2), lambda: plain(),
             lambda: txn(1), lambda: marker(1), lambda: plain(), lambda: marker(2, commit=False),
             lambda: txn(3)] + [lambda: plain()] * 12 + [lambda: txn(4), lambda: marker(3)] + \
            [lambda: plain()] * 10 + [lambda: marker(4), lambda: plain()]
    seen = set()
    for step in steps:
        step()
        seen.add(check() < ulog.log_end_offset)
    assert seen == {True, False}  # both open transactions and none were checked
    assert ulog.num_segments > 3 and list((root / "lso-0").glob("*.snapshot"))
    txn(5)  # open, then rolled past: its first offset only in a snapshot's entry or the headers
    first5 = ulog.log_end_offset - 1
    for _ in range(15):
        plain()
    assert check() == first5
    newest = max((root / "lso-0").glob("*.snapshot"))
    assert int(newest.name[:20]) > first5  # the snapshot path was taken
    assert "not using" not in caplog.text
    newest.write_bytes(b"garbage")  # corrupt: an older snapshot (or the walk) answers
    assert check() == first5
    assert f"not using {newest}" in caplog.text
    for snap in (root / "lso-0").glob("*.snapshot"):
        snap.unlink()
    assert check() == first5  # the headers alone
    assert "no usable producer snapshot near the log end; reading the batch headers of" in caplog.text
    ulog.close()


# --- listing, read-only ---

def test_log_dir_listing(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root, name in [(a, "my-topic-1-0"), (a, "my-topic-1-2"), (b, "other-0"),
                       (a, "gone-0.0123456789abcdef-delete"), (a, "moving-0.abc-future")]:
        open_log(root / name).close()
    (a / "not-a-partition").mkdir()
    (a / "meta.properties").write_text("version=1\n")
    reader = LogDirReader([a, b])
    assert reader.topic_partitions() == [("my-topic-1", 0), ("my-topic-1", 2), ("other", 0)]
    assert reader.topics() == ["my-topic-1", "other"]
    assert reader.partitions_of("my-topic-1") == [0, 2]
    empty = reader.partition("other", 0)
    assert (empty.log_start_offset, empty.log_end_offset) == (0, 0)
    assert empty.segment_ranges(0, 10) == [] and empty.offset_for_timestamp(0) is None
    with pytest.raises(KeyError, match="my-topic-1-1"):
        reader.partition("my-topic-1", 1)
    open_log(b / "my-topic-1-0").close()
    with pytest.raises(ValueError, match="my-topic-1-0"):
        LogDirReader([a, b])
    with pytest.raises(FileNotFoundError):
        LogDirReader(tmp_path / "nope")


def test_reading_never_creates_or_modifies_a_file(log_dir):
    root, ulog = log_dir
    files.write_offset_checkpoint(root / files.LOG_START_OFFSET_CHECKPOINT_FILE, {("orders", 0): 3})
    before = snapshot(root)
    reader = LogDirReader(root).partition("orders", 0)
    leo = reader.log_end_offset
    decode_range(reader, 3, leo)
    reader.offset_for_timestamp(BASE_TS + 500)
    reader.aborted_transactions(0, leo)
    reader.close()
    assert snapshot(root) == before


def test_a_read_only_directory_is_readable(log_dir):
    if os.geteuid() == 0:
        pytest.skip("root ignores file permissions")
    root, ulog = log_dir
    for p in [root, *root.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        reader = LogDirReader(root).partition("orders", 0)
        assert reader.log_end_offset == ulog.log_end_offset
        assert decode_range(reader, 0, 10) == list(range(10))
    finally:
        for p in [root, *root.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)


def test_a_segment_renamed_while_the_directory_is_listed_is_never_missed(tmp_path):
    """The cleaner's last step renames ``X.log.swap`` to ``X.log``; readdir may miss an
    entry renamed during the listing, so a reader of a live directory lists it until two
    listings agree. A directory of many files (the listing takes a while) and a rename
    during most listings: the first segment is always found."""
    import threading

    def rename_after(delay: float) -> None:
        threading.Event().wait(delay)
        os.rename(swap, live)

    d = tmp_path / "t-0"
    d.mkdir()
    for i in range(2000):
        (d / f"junk{i:05d}.txt").write_bytes(b"")
    (d / "00000000000000000100.log").write_bytes(b"")
    live, swap = d / "00000000000000000000.log", d / "00000000000000000000.log.swap"
    live.write_bytes(b"")
    rnd = random.Random(7)
    missed = 0
    for _ in range(60):
        os.rename(live, swap)
        renamer = threading.Thread(target=rename_after, args=(rnd.random() * 0.002,))
        renamer.start()
        reader = PartitionReader(d)
        renamer.join()
        if not reader.segments or reader.segments[0].base_offset != 0:
            missed += 1
    assert missed == 0
