"""Legacy message sets (magic 0 and 1, Kafka before 0.11) in the log, at the log level:
``broker/record/entries.py``, ``legacy.legacy_entry_info`` / ``legacy_entry_to_v2`` and
their use by recovery (``LogSegment.recover`` through ``UnifiedLog.create`` after an
unclean shutdown), reads, timestamp searches, DeleteRecords, retention, the log cleaner
and remote segment reads.

Kafka 4 still reads and serves such sets (KIP-724): recovery never deletes valid data
(R1/R2: only a torn or corrupt tail is cut, and what is cut is logged with its counts). A
property test over generated logs that mix v2 batches and legacy sets of every magic and
codec shows that recovery truncates nothing from a valid log, and exactly the torn or
corrupt tail when one is appended. The end-to-end proof with an independent writer and
real clients is ``test_log_legacy_dir.py``."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log.clock import MockTime
from broker.log.config import LogConfig
from broker.log.reader import PartitionReader
from broker.log.scheduler import Scheduler
from broker.log.unified_log import UnifiedLog
from broker.record.batch import CURRENT_MAGIC, encode_batch, iter_batch_headers
from broker.record.codecs import CompressionType
from broker.record.entries import decode_entry, entry_header, iter_entry_headers
from broker.record.errors import CorruptRecordError, DecodeError, InvalidRecordError
from broker.record.legacy import encode_legacy_message_set, legacy_entry_info, legacy_entry_to_v2

TS0 = 1_700_000_000_000
LEGACY_CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4]


def _open(directory: Path, clean: bool = False, t: MockTime | None = None, **props) -> UnifiedLog:
    t = t or MockTime(current_time_ms=int(time.time() * 1000))
    base = {"index.interval.bytes": "64", "segment.bytes": str(1 << 20)}
    base.update({k: str(v) for k, v in props.items()})
    return UnifiedLog.create(directory, LogConfig.from_props(base), time=t, scheduler=Scheduler(t),
                             last_shutdown_clean=clean, recovery_point=0)


def _entry(kind: tuple, offset: int, records: list[tuple]) -> bytes:
    """One log entry at ``offset`` holding ``records`` ((key, value, timestamp) each), as a
    broker stored it: ('v2', codec) or (magic, codec); an uncompressed legacy kind takes
    one message per record (several entries, joined)."""
    fmt, codec = kind
    if fmt == "v2":
        return encode_batch(records, base_offset=offset, compression=codec)
    magic = fmt
    recs = [(k, v, ts if magic == 1 else -1) for k, v, ts in records]
    return encode_legacy_message_set(recs, magic, codec, base_offset=offset)


def _expected(kind: tuple, offset: int, records: list[tuple]) -> list[tuple]:
    magic = kind[0]
    return [(offset + i, k, v, -1 if magic == 0 else ts) for i, (k, v, ts) in enumerate(records)]


def _records_of(ulog: UnifiedLog) -> list[tuple]:
    """(offset, key, value, timestamp) of every record, read through ``UnifiedLog.read``
    from each offset in turn (each read must hold the offset asked for)."""
    out = []
    offset = ulog.log_start_offset
    while offset < ulog.log_end_offset:
        data = ulog.read(offset, 1 << 20).records.read_bytes()
        assert data, f"nothing read at {offset}"
        got = [r for pos, h in iter_entry_headers(data) for r in decode_entry(data, pos, h)
               if r.offset >= offset]
        assert got, f"the read at {offset} holds no record at or past it"
        out += [(r.offset, r.key, r.value, r.timestamp) for r in got]
        offset = got[-1].offset + 1
    return out


blobs = st.one_of(st.none(), st.binary(min_size=0, max_size=40))
kinds = st.one_of(st.tuples(st.just("v2"), st.sampled_from([0, 1, 2, 3, 4])),
                  st.tuples(st.sampled_from([0, 1]), st.sampled_from(LEGACY_CODECS)))
entries = st.lists(st.tuples(kinds, st.lists(st.tuples(blobs, blobs), min_size=1, max_size=6),
                             st.integers(0, 3)),  # the gap before the entry (a compacted log)
                   min_size=1, max_size=25)


def _build(spec) -> tuple[list[bytes], list[tuple]]:
    parts, expected, offset = [], [], 0
    for kind, kv, gap in spec:
        offset += gap
        records = [(k, v, TS0 + offset + i) for i, (k, v) in enumerate(kv)]
        parts.append(_entry(kind, offset, records))
        expected += _expected(kind, offset, records)
        offset += len(records)
    return parts, expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=entries, tail=st.sampled_from(["none", "torn", "corrupt", "zeros"]), data=st.data())
def test_r1_recovery_keeps_every_valid_entry_and_cuts_exactly_the_bad_tail(tmp_path, spec, tail, data) -> None:
    """R1/R2: a valid log mixing v2 batches and legacy sets loses no byte in recovery; a
    torn entry, a corrupt one (a flipped byte in a message) or a zero-filled tail after it
    is cut, and only that."""
    directory = Path(tempfile.mkdtemp(dir=tmp_path)) / "t-0"
    parts, expected = _build(spec)
    valid = b"".join(parts)
    extra_kind, extra_kv, _ = data.draw(entries.map(lambda e: e[0]))
    extra = _entry(extra_kind, expected[-1][0] + 1, [(k, v, TS0) for k, v in extra_kv])
    extra = extra[:entry_header(extra).size_in_bytes]  # one entry (several for plain legacy messages)
    if tail == "torn":
        bad = extra[:data.draw(st.integers(1, len(extra) - 1))]
    elif tail == "corrupt":
        flip = data.draw(st.integers(21 if extra_kind[0] == "v2" else 16, len(extra) - 1))
        bad = extra[:flip] + bytes([extra[flip] ^ 0x5A]) + extra[flip + 1:]
    elif tail == "zeros":
        bad = bytes(data.draw(st.integers(1, 100)))
    else:
        bad = b""
    directory.mkdir()
    (directory / "00000000000000000000.log").write_bytes(valid + bad)
    ulog = _open(directory)
    try:
        assert (directory / "00000000000000000000.log").read_bytes() == valid
        assert ulog.log_end_offset == expected[-1][0] + 1
        assert _records_of(ulog) == expected
        # the rebuilt offset index points each offset at the entry that holds it
        segment = ulog.active_segment
        for offset, *_ in expected:
            found = segment.translate_offset(offset)
            assert found is not None and found.offset >= offset
    finally:
        ulog.close()


def test_r1_every_kind_across_segments_with_indexes_rebuilt(tmp_path, caplog) -> None:
    """Several segments, every magic and codec, no index files, an unclean shutdown:
    nothing truncated, indexes rebuilt with entries, timestamps searchable (magic 1 and
    v2; magic 0 has none)."""
    directory = tmp_path / "legacy-0"
    directory.mkdir()
    offset, expected = 0, []
    kinds_cycle = [(0, c) for c in LEGACY_CODECS] + [(1, c) for c in LEGACY_CODECS] + [("v2", 0), ("v2", 3)]
    for seg in range(3):
        base = offset
        parts = []
        for i in range(30):
            kind = kinds_cycle[(seg * 30 + i) % len(kinds_cycle)]
            records = [(b"k%d" % ((offset + j) % 7), b"v%d" % (offset + j), TS0 + 10 * (offset + j)) for j in range(3)]
            parts.append(_entry(kind, offset, records))
            expected += _expected(kind, offset, records)
            offset += 3
        (directory / f"{base:020d}.log").write_bytes(b"".join(parts))
    sizes = {p.name: p.stat().st_size for p in directory.glob("*.log")}
    with caplog.at_level(logging.WARNING, logger="broker.log"):
        ulog = _open(directory)
    try:
        assert not [r for r in caplog.records if "Truncated" in r.getMessage()]
        assert {p.name: p.stat().st_size for p in directory.glob("*.log")} == sizes
        assert len(ulog.segments) == 3
        assert _records_of(ulog) == expected
        for segment in ulog.segments:
            assert segment.offset_index.entries > 0 and segment.time_index.entries > 0
        # ListOffsets by timestamp: the first record at or past it, magic 0 records skipped;
        # the read-only reader of direct mode answers the same from the files
        reader = PartitionReader(directory)
        assert (reader.log_start_offset, reader.log_end_offset) == (0, expected[-1][0] + 1)
        for target in (TS0, TS0 + 10 * 5 + 1, TS0 + 10 * 40, TS0 + 10 * 200, TS0 + 10 * 269):
            found = ulog.fetch_offset_by_timestamp(target)
            want = next((o for o, _, _, ts in expected if ts >= target), None)
            assert (found.offset if found is not None else None) == want, target
            assert reader.offset_for_timestamp(target) == want, target
        reader.close()
    finally:
        ulog.close()


def test_r2_a_corrupt_inner_message_cuts_from_its_wrapper_and_says_what_it_removed(tmp_path, caplog) -> None:
    """A wrapper whose own CRC is right but whose inner message is damaged (as a bad disk
    or a bad copy makes it) is the first invalid byte: the cut starts there, and the
    warning names the bytes, the whole batches and the records removed."""
    directory = tmp_path / "bad-0"
    directory.mkdir()
    good = encode_legacy_message_set([(b"a", b"1", TS0), (b"b", b"2", TS0)], 1, 0, base_offset=0)
    inner = encode_legacy_message_set([(b"c", b"3", TS0), (b"d", b"4", TS0)], 1, 0, base_offset=0)
    damaged_inner = inner[:-1] + bytes([inner[-1] ^ 1])  # breaks the inner message's CRC-32
    from broker.record.codecs import compress
    from broker.record.legacy import encode_legacy_message
    wrapper = encode_legacy_message(3, None, compress(CompressionType.GZIP, damaged_inner), 1, TS0,
                                    CompressionType.GZIP)
    after = encode_legacy_message_set([(b"e", b"5", TS0)], 1, 0, base_offset=4)
    (directory / "00000000000000000000.log").write_bytes(good + wrapper + after)
    with caplog.at_level(logging.WARNING, logger="broker.log"):
        ulog = _open(directory)
    try:
        assert (directory / "00000000000000000000.log").read_bytes() == good
        assert ulog.log_end_offset == 2
        warning = next(r.getMessage() for r in caplog.records if "Truncated" in r.getMessage())
        assert f"Truncated {len(wrapper) + len(after)} bytes from byte offset {len(good)}" in warning
        assert "legacy message CRC mismatch" in warning
        assert "removed 2 whole batches holding 2 records by their headers, and 0 bytes" in warning
    finally:
        ulog.close()


def test_entry_checks_of_legacy_sets() -> None:
    """legacy_entry_info: offsets inside a wrapper that go backwards or past the wrapper's
    own offset, nested compression and bad sizes are refused; a valid wrapper reports its
    first and last offsets, count and largest timestamp."""
    from broker.record.codecs import compress
    from broker.record.legacy import encode_legacy_message
    ok = encode_legacy_message_set([(b"a", b"1", TS0 + 5), (b"b", b"2", TS0 + 9)], 1, CompressionType.GZIP,
                                   base_offset=10)
    assert legacy_entry_info(ok) == (10, 11, 2, TS0 + 9, 11)
    assert legacy_entry_info(encode_legacy_message_set([(b"a", b"1")], 0, 0, base_offset=4)) == (4, 4, 1, -1, 4)
    # magic 0 wrapper whose absolute inner offsets go backwards
    inner = encode_legacy_message(5, None, b"x", 0) + encode_legacy_message(4, None, b"y", 0)
    backwards = encode_legacy_message(5, None, compress(CompressionType.GZIP, inner), 0, codec=CompressionType.GZIP)
    with pytest.raises(InvalidRecordError):
        legacy_entry_info(backwards)
    # magic 0 wrapper whose inner offsets end past its own offset
    inner = encode_legacy_message(5, None, b"x", 0) + encode_legacy_message(9, None, b"y", 0)
    past = encode_legacy_message(6, None, compress(CompressionType.GZIP, inner), 0, codec=CompressionType.GZIP)
    with pytest.raises(InvalidRecordError):
        legacy_entry_info(past)
    nested = encode_legacy_message(1, None, compress(CompressionType.GZIP, ok[:]), 1, TS0, CompressionType.GZIP)
    with pytest.raises(CorruptRecordError):
        legacy_entry_info(nested)
    with pytest.raises(DecodeError):
        legacy_entry_info(ok[:-3])
    # the shallow header of a legacy entry
    header = entry_header(ok)
    assert (header.magic, header.base_offset, header.last_offset, header.max_timestamp, header.compression,
            header.producer_id, header.partition_leader_epoch) == (1, 11, 11, TS0 + 9, 1, -1, -1)
    small = encode_legacy_message_set([(None, b"")], 0, 0, base_offset=7)
    assert len(small) == 26 and [h.last_offset for _, h in iter_entry_headers(small + small[:20])] == [7]


@pytest.mark.parametrize("kind", [(0, c) for c in LEGACY_CODECS] + [(1, c) for c in LEGACY_CODECS])
def test_legacy_entry_to_v2_keeps_offsets_keys_values_timestamps(kind) -> None:
    """KIP-724's conversion: an uncompressed message becomes a single-record v2 batch, a
    wrapper one batch of its inner messages with its codec; nothing else changes."""
    magic, codec = kind
    records = [(b"k%d" % i, None if i == 1 else b"v%d" % i, TS0 + i) for i in range(4)]
    data = _entry(kind, 20, records)
    want = _expected(kind, 20, records)
    out = b"".join(legacy_entry_to_v2(data[p:p + h.size_in_bytes]) for p, h in iter_entry_headers(data))
    headers = [h for _, h in iter_batch_headers(out)]
    assert all(h.magic == CURRENT_MAGIC and h.compression == codec for h in headers)
    assert len(headers) == (4 if codec == 0 else 1)
    got = [(r.offset, r.key, r.value, r.timestamp) for p, h in iter_batch_headers(out) for r in decode_entry(out, p, h)]
    assert got == want


def _legacy_compacted_log(directory: Path) -> list[tuple]:
    """A compacted topic's partition written by an old Kafka: five keys overwritten in
    every kind of legacy set, a tombstone, then a v2 tail."""
    directory.mkdir()
    offset, expected, parts, segment_base = 0, [], [], 0
    kinds_cycle = [(0, 0), (0, 1), (1, 0), (1, 2), (1, 3), (0, 3), (1, 1)]
    for i in range(40):
        kind = kinds_cycle[i % len(kinds_cycle)]
        records = [(b"key%d" % ((offset + j) % 5), b"value%d" % (offset + j), TS0 + offset + j) for j in range(2)]
        if i == 30:
            records[0] = (b"key4", None, TS0 + offset)  # a tombstone
        parts.append(_entry(kind, offset, records))
        expected += _expected(kind, offset, records)
        offset += 2
        if i in (12, 25):  # three segments
            (directory / f"{segment_base:020d}.log").write_bytes(b"".join(parts))
            parts, segment_base = [], offset
    parts.append(encode_batch([(b"key0", b"new", TS0 + offset)], base_offset=offset))
    expected += [(offset, b"key0", b"new", TS0 + offset)]
    (directory / f"{segment_base:020d}.log").write_bytes(b"".join(parts))
    return expected


def test_cleaner_rewrites_legacy_sets_as_v2_batches(tmp_path) -> None:
    """The log cleaner over legacy segments writes v2 batches only (KIP-724) and keeps the
    latest record of each key with its offset, value and timestamp (magic 0: none)."""
    from broker.log.cleaner.manager import CleanerConfig, LogCleaner

    directory = tmp_path / "compacted-0"
    expected = _legacy_compacted_log(directory)
    t = MockTime(current_time_ms=int(time.time() * 1000))
    ulog = _open(directory, clean=False, t=t, **{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                                 "delete.retention.ms": "0", "file.delete.delay.ms": "0"})
    try:
        assert _records_of(ulog) == expected
        ulog.roll()
        cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20, backoff_ms=1),
                             lambda: {("compacted", 0): ulog}, t)
        assert cleaner.do_one_cleaning(), "nothing was cleaned"
        latest = {key: (offset, key, value, ts) for offset, key, value, ts in expected}
        got = _records_of(ulog)
        # the latest of each key, unchanged; a tombstone stays until its delete horizon
        assert [r for r in got if r[2] is not None] == sorted(r for r in latest.values() if r[2] is not None)
        assert set(got) <= set(expected)
        for segment in ulog.segments:
            data = segment.log.path.read_bytes()
            assert all(h.magic == CURRENT_MAGIC for _, h in iter_entry_headers(data)), segment
    finally:
        ulog.close()


def test_delete_records_and_retention_over_legacy_segments(tmp_path) -> None:
    """DeleteRecords to an offset inside a legacy wrapper: reads from the new log start
    offset hold it and nothing below is returned past the consumer's filter; the segments
    wholly below it go; time retention of magic 0 segments (no timestamps) uses the file's
    modification time, as Kafka's."""
    directory = tmp_path / "del-0"
    directory.mkdir()
    first = encode_legacy_message_set([(None, b"a%d" % i) for i in range(10)], 0, CompressionType.GZIP)
    (directory / f"{0:020d}.log").write_bytes(first)
    now = int(time.time() * 1000)
    second = encode_legacy_message_set([(None, b"b%d" % i, now + i) for i in range(10)], 1, CompressionType.SNAPPY,
                                       base_offset=10)
    (directory / f"{10:020d}.log").write_bytes(second)
    ulog = _open(directory, **{"retention.ms": str(24 * 3600 * 1000), "file.delete.delay.ms": "0"})
    try:
        assert ulog.maybe_increment_log_start_offset(14)
        assert ulog.delete_old_segments() == 1  # the magic 0 segment, wholly below 14
        assert [s.base_offset for s in ulog.segments] == [10]
        assert _records_of(ulog) == [(o, None, b"b%d" % (o - 10), now + o - 10) for o in range(14, 20)]
    finally:
        ulog.close()
    # retention by time: a magic 0 segment (no timestamps) goes by its file's age
    directory = tmp_path / "old-0"
    directory.mkdir()
    (directory / f"{0:020d}.log").write_bytes(first)
    (directory / f"{10:020d}.log").write_bytes(
        encode_legacy_message_set([(None, b"c")], 0, 0, base_offset=10))
    week_ago = time.time() - 7 * 24 * 3600
    os.utime(directory / f"{0:020d}.log", (week_ago, week_ago))
    ulog = _open(directory, **{"retention.ms": str(24 * 3600 * 1000), "file.delete.delay.ms": "0"})
    try:
        assert ulog.delete_old_segments() == 1
        assert ulog.log_start_offset == 10
    finally:
        ulog.close()
    shutil.rmtree(directory)


def test_tiered_storage_copies_and_serves_legacy_segments(tmp_path) -> None:
    """Tiered storage over legacy segments: they are copied as they are, deleted locally,
    and a remote Fetch and a remote ListOffsets by timestamp read them."""
    from broker.log.remote.errors import OffsetMovedToTieredStorageError
    from broker.log.remote.log_manager import RemoteLogManager
    from broker.log.remote.storage_manager import FileSystemRemoteStorageManager

    directory = tmp_path / "logs" / "tiered-0"
    directory.mkdir(parents=True)
    now = int(time.time() * 1000)
    expected, timestamps, offset = [], [], 0
    kinds_cycle = [(0, 0), (0, 1), (1, 0), (1, 2), (1, 3), (0, 3), ("v2", 0)]
    for seg in range(4):
        base, parts = offset, []
        for i in range(6):
            kind = kinds_cycle[(seg * 6 + i) % len(kinds_cycle)]
            records = [(None, b"v%d" % (offset + j), now + offset + j) for j in range(3)]
            parts.append(_entry(kind, offset, records))
            expected += [(o, v) for o, _, v, _ in _expected(kind, offset, records)]
            timestamps += [(o, ts) for o, _, _, ts in _expected(kind, offset, records)]
            offset += 3
        (directory / f"{base:020d}.log").write_bytes(b"".join(parts))
    t = MockTime(current_time_ms=now)
    config = LogConfig.from_props({"segment.bytes": "100000", "remote.storage.enable": "true",
                                   "local.retention.bytes": "1", "retention.ms": "-1"})
    ulog = UnifiedLog.create(directory, config, time=t, scheduler=Scheduler(t), last_shutdown_clean=False,
                             recovery_point=0, remote_storage_system_enable=True)
    ulog.update_high_watermark(ulog.log_end_offset)
    rlm = RemoteLogManager(FileSystemRemoteStorageManager(str(tmp_path / "remote")), lambda: [ulog], time=t)
    rlm.startup()
    try:
        rlm.run_once()
        assert len(rlm.remote_segments("tiered", 0)) == 3  # all but the active segment
        assert ulog.local_log_start_offset == 54
        out, at = [], 0
        while at < ulog.log_end_offset:
            try:
                data = ulog.read(at, 300).records.read_bytes()
            except OffsetMovedToTieredStorageError:
                data = rlm.read(ulog, at, 300).records
            got = [(r.offset, r.value) for p, h in iter_entry_headers(data) for r in decode_entry(data, p, h)
                   if r.offset >= at]
            assert got, f"nothing read at {at}"
            out += got
            at = got[-1][0] + 1
        assert out == expected
        for target in (now, now + 7, now + 20, now + 40, now + 60):  # remote, then local
            want = next((o for o, ts in timestamps if ts >= target), None)
            found = ulog.fetch_offset_by_timestamp(target)
            assert (found.offset if found is not None else None) == want, (target - now, found)
    finally:
        ulog.close()
        rlm.close()
