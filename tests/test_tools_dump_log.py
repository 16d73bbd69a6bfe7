"""Tests of broker/tools/dump_log.py and log_dumper.py: ``kafkalog dump-log`` on a
real log directory written by ``broker.log`` (every codec, keys, null values, headers, an
idempotent producer, a committed and an aborted transaction, several segments with index
entries and producer snapshots), checked field by field against what was written and
against a scan of the files; damaged files (torn tail, bad header, bad CRC, corrupted
index and time index, corrupt snapshot); legacy magic 0/1 entries; option handling and
one-line errors; and the console script in a subprocess."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from broker.log.config import LogConfig
from broker.log.index import OFFSET_ENTRY, TIME_ENTRY
from broker.log.producer_state import read_snapshot
from broker.log.txn_index import ABORTED_TXN_SIZE, AbortedTxn
from broker.log.unified_log import UnifiedLog
from broker.log.validator import AppendOrigin
from broker.record.batch import LOG_APPEND_TIME, encode_batch, iter_batch_headers
from broker.record.codecs import CompressionType
from broker.record.control import ControlRecordType, encode_end_txn_marker_batch
from broker.record.legacy import encode_legacy_message_set
from broker.tools import log_dumper
from spark_kafkalog.cli.main import main

TS = 1_700_000_000_000
IDEMPOTENT_PID, IDEMPOTENT_EPOCH = 1000, 2
COMMIT_PID, ABORT_PID = 2000, 3000
CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY,
          CompressionType.LZ4, CompressionType.ZSTD]
FIELD = re.compile(r"(\w+): (\S+)")


# --- the log directory ---

@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("logs") / "events-0"
    config = LogConfig.from_props({"segment.bytes": 600, "index.interval.bytes": 100})
    log = UnifiedLog.create(directory, config)
    for n, codec in enumerate(CODECS):
        records = [(b"key-%d-%d" % (n, i), b"value-%d-%d " % (n, i) + b"x" * 30, TS + 3 * n + i,
                    [("h1", b"a"), ("h2", None)]) for i in range(3)]
        log.append_as_leader(encode_batch(records, compression=codec))
    log.append_as_leader(encode_batch([(None, None, TS + 20), (b"", b"", TS + 21)]))
    sequence = 0
    for count in (1, 3, 1, 2):
        records = [(b"idem", b"seq-%d" % (sequence + i), TS + 30 + sequence + i) for i in range(count)]
        log.append_as_leader(encode_batch(records, producer_id=IDEMPOTENT_PID,
                                          producer_epoch=IDEMPOTENT_EPOCH, base_sequence=sequence))
        sequence += count
    for pid, kind in ((COMMIT_PID, ControlRecordType.COMMIT), (ABORT_PID, ControlRecordType.ABORT)):
        log.append_as_leader(encode_batch([(b"t", b"in-txn-%d" % pid, TS + 50)], producer_id=pid,
                                          producer_epoch=0, base_sequence=0, is_transactional=True))
        log.append_as_leader(encode_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0,
                                                         coordinator_epoch=7, timestamp=TS + 51),
                             origin=AppendOrigin.COORDINATOR)
    log.append_as_leader(encode_batch([(b"last", b"one", TS + 60)]))
    log.close()
    return directory


def files_of(directory: Path, suffix: str) -> list[Path]:
    return sorted(directory.glob(f"*{suffix}"))


def dump(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["dump-log", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def batch_lines(out: str) -> list[dict[str, str]]:
    return [dict(FIELD.findall(line)) for line in out.splitlines() if line.startswith("baseOffset: ")]


def record_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("| ")]


def scan(path: Path):
    """(position, header) of every batch, the ground truth."""
    return list(iter_batch_headers(path.read_bytes()))


# --- .log ---

def test_layout_has_several_segments_indexes_snapshots_and_a_txn_index(logdir):
    assert len(files_of(logdir, ".log")) >= 3
    assert any(p.stat().st_size for p in files_of(logdir, ".index"))
    assert files_of(logdir, ".snapshot")
    assert files_of(logdir, ".txnindex")


def test_batch_lines_match_the_files(logdir, capsys):
    logs = files_of(logdir, ".log")
    code, out, err = dump(capsys, "--files", *map(str, logs))
    assert code == 0 and err == ""
    expected = [(path, pos, h) for path in logs for pos, h in scan(path)]
    lines = batch_lines(out)
    assert len(lines) == len(expected)
    for fields, (_path, pos, h) in zip(lines, expected):
        assert fields["baseOffset"] == str(h.base_offset)
        assert fields["lastOffset"] == str(h.last_offset)
        assert fields["count"] == str(h.records_count)
        assert fields["position"] == str(pos)
        assert fields["size"] == str(h.size_in_bytes)
        assert fields["CreateTime"] == str(h.max_timestamp)
        assert fields["crc"] == str(h.crc)
        assert fields["isvalid"] == "true"
        assert fields["magic"] == "2"
        assert fields["partitionLeaderEpoch"] == "0"
        assert fields["deleteHorizonMs"] == "OptionalLong.empty"
    for path in logs:
        assert f"Dumping {path}" in out
        assert f"Log starting offset: {int(path.name.split('.')[0])}" in out
    # offsets run 0..LEO-1 without gaps across the segments
    assert [int(f["baseOffset"]) for f in lines][0] == 0
    assert all(int(a["lastOffset"]) + 1 == int(b["baseOffset"]) for a, b in zip(lines, lines[1:]))


def test_batch_lines_carry_codecs_producers_and_flags(logdir, capsys):
    _, out, _ = dump(capsys, "--files", ",".join(map(str, files_of(logdir, ".log"))))
    lines = batch_lines(out)
    assert [f["compresscodec"] for f in lines[:5]] == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert all(f["count"] == "3" for f in lines[:5])
    plain = [f for f in lines if f["producerId"] == "-1"]
    assert all(f["producerEpoch"] == "-1" and f["baseSequence"] == "-1" and f["lastSequence"] == "-1"
               for f in plain)
    idem = [f for f in lines if f["producerId"] == str(IDEMPOTENT_PID)]
    assert [(f["baseSequence"], f["lastSequence"], f["count"]) for f in idem] == [
        ("0", "0", "1"), ("1", "3", "3"), ("4", "4", "1"), ("5", "6", "2")]
    assert all(f["producerEpoch"] == str(IDEMPOTENT_EPOCH) and f["isTransactional"] == "false"
               for f in idem)
    for pid in (COMMIT_PID, ABORT_PID):
        data, marker = [f for f in lines if f["producerId"] == str(pid)]
        assert (data["isTransactional"], data["isControl"]) == ("true", "false")
        assert (marker["isTransactional"], marker["isControl"]) == ("true", "true")
        assert marker["baseSequence"] == "-1" and marker["CreateTime"] == str(TS + 51)


def test_print_data_log_prints_records(logdir, capsys):
    code, out, err = dump(capsys, "--print-data-log", "--files", *map(str, files_of(logdir, ".log")))
    assert code == 0 and err == ""
    records = record_lines(out)
    assert records[0] == (f"| offset: 0 CreateTime: {TS} keySize: 7 valueSize: 40 sequence: -1 "
                          f"headerKeys: [h1,h2] key: key-0-0 payload: value-0-0 " + "x" * 30)
    # every codec decodes to what was written
    for n in range(5):
        for i in range(3):
            line = records[3 * n + i]
            assert line.startswith(f"| offset: {3 * n + i} CreateTime: {TS + 3 * n + i} ")
            assert f" key: key-{n}-{i} payload: value-{n}-{i} " in line
    assert records[15] == f"| offset: 15 CreateTime: {TS + 20} keySize: -1 valueSize: -1 sequence: -1 headerKeys: []"
    assert records[16] == (f"| offset: 16 CreateTime: {TS + 21} keySize: 0 valueSize: 0 sequence: -1 "
                           "headerKeys: [] key:  payload:")
    idem = [line for line in records if "key: idem " in line]
    assert [int(dict(FIELD.findall(line))["sequence"]) for line in idem] == list(range(7))
    markers = [line for line in records if "endTxnMarker" in line]
    assert len(markers) == 2
    assert markers[0].endswith("endTxnMarker: COMMIT coordinatorEpoch: 7")
    assert markers[1].endswith("endTxnMarker: ABORT coordinatorEpoch: 7")
    assert all("key:" not in line and "payload:" not in line for line in markers)
    offsets = [int(dict(FIELD.findall(line))["offset"]) for line in records]
    assert offsets == list(range(len(offsets)))


def test_deep_iteration_without_data_and_skip_metadata(logdir, capsys):
    first = str(files_of(logdir, ".log")[0])
    _, deep, _ = dump(capsys, "--deep-iteration", "--files", first)
    assert record_lines(deep) and all("key:" not in line for line in record_lines(deep))
    _, shallow, _ = dump(capsys, "--files", first)
    assert not record_lines(shallow)
    _, data_only, _ = dump(capsys, "--print-data-log", "--skip-record-metadata", "--files", first)
    assert record_lines(data_only)[0] == "| key: key-0-0 payload: value-0-0 " + "x" * 30


def test_read_chunk_boundaries_do_not_change_the_output(logdir, capsys, monkeypatch):
    args = ["--print-data-log", "--files", str(logdir)]
    _, reference, _ = dump(capsys, *args)
    monkeypatch.setattr(log_dumper, "READ_CHUNK", 100)  # smaller than most batches
    _, small, _ = dump(capsys, *args)
    assert small == reference


def test_torn_tail_is_reported_and_exits_0(logdir, tmp_path, capsys):
    source = files_of(logdir, ".log")[0]
    data = source.read_bytes()
    (pos, h), = scan(source)[-1:]
    target = tmp_path / source.name
    target.write_bytes(data + data[pos:pos + h.size_in_bytes - 5])
    code, out, err = dump(capsys, "--deep-iteration", "--files", str(target))
    assert code == 0 and err == ""
    assert len(batch_lines(out)) == len(scan(source))
    assert out.splitlines()[-1] == f"Found {h.size_in_bytes - 5} invalid bytes at the end of {target.name}"
    # a few bytes, fewer than a header
    target.write_bytes(data + b"\x00" * 7)
    _, out, _ = dump(capsys, "--files", str(target))
    assert out.splitlines()[-1] == f"Found 7 invalid bytes at the end of {target.name}"


def test_corrupt_header_stops_the_walk_with_one_warning(logdir, tmp_path, capsys):
    source = files_of(logdir, ".log")[0]
    batches = scan(source)
    data = bytearray(source.read_bytes())
    bad = batches[2][0]
    data[bad + 16] = 9  # magic
    target = tmp_path / source.name
    target.write_bytes(bytes(data))
    code, out, err = dump(capsys, "--files", str(target))
    assert code == 0
    assert len(batch_lines(out)) == 2
    assert out.splitlines()[-1] == f"Found {len(data) - bad} invalid bytes at the end of {target.name}"
    assert err.splitlines() == [f"kafkalog dump-log: warning: {target}: unknown magic 9 at position {bad}"]


def test_bad_crc_is_invalid_and_undecodable_records_are_reported(logdir, tmp_path, capsys):
    source = files_of(logdir, ".log")[0]
    data = bytearray(source.read_bytes())
    struct.pack_into(">i", data, 57, 1000)  # records count of the first batch (inside the CRC)
    target = tmp_path / source.name
    target.write_bytes(bytes(data))
    code, out, err = dump(capsys, "--print-data-log", "--files", str(target))
    # the undecodable batch is listed on stderr with its offsets and makes the exit code 1
    # (Kafka's DumpLogSegments dies at it; here the rest is dumped first)
    assert code == 1
    assert err.splitlines()[0] == f"Found 1 batches whose records could not be decoded in :{target}"
    assert err.splitlines()[1].startswith("  baseOffset: 0 lastOffset: 2 position: 0: records count 1000")
    lines = batch_lines(out)
    assert lines[0]["isvalid"] == "false" and lines[0]["count"] == "1000"
    assert all(f["isvalid"] == "true" for f in lines[1:])
    records = record_lines(out)
    assert records[0].startswith("| records could not be decoded: records count 1000")
    assert records[1].startswith("| offset: 3 ")  # the walk goes on


def test_max_bytes_stops_before_a_cut_batch(logdir, capsys):
    source = files_of(logdir, ".log")[0]
    batches = scan(source)
    limit = batches[2][0] + 10
    code, out, _ = dump(capsys, "--max-bytes", str(limit), "--files", str(source))
    assert code == 0
    assert len(batch_lines(out)) == 2 and "invalid bytes" not in out


def test_legacy_magic_0_and_1_entries(tmp_path, capsys):
    path = tmp_path / "00000000000000000000.log"
    v2 = encode_batch([(b"e", b"5", TS + 9)], base_offset=4, timestamp_type=LOG_APPEND_TIME)
    path.write_bytes(
        encode_legacy_message_set([(b"a", b"1"), (None, b"2")], magic=0, base_offset=0)
        + encode_legacy_message_set([(b"c", b"3", TS), (b"d", None, TS + 1)], magic=1,
                                    codec=CompressionType.GZIP, base_offset=2)
        + v2)
    code, out, err = dump(capsys, "--print-data-log", "--files", str(path))
    assert code == 0 and err == ""
    shallow = [dict(FIELD.findall(line)) for line in out.splitlines() if line.startswith("offset: ")]
    assert [(f["offset"], f["magic"], f["compresscodec"], f["isvalid"]) for f in shallow] == [
        ("0", "0", "none", "true"), ("1", "0", "none", "true"), ("3", "1", "gzip", "true")]
    assert shallow[0]["NoTimestampType"] == "-1" and shallow[2]["CreateTime"] == str(TS + 1)
    records = record_lines(out)
    assert records[0].startswith("| offset: 0 NoTimestampType: -1 keySize: 1 valueSize: 1 isValid: true crc: ")
    assert records[0].endswith(" key: a payload: 1")
    assert records[1].endswith(" payload: 2") and "key:" not in records[1]
    assert records[2].startswith(f"| offset: 2 CreateTime: {TS} ") and records[2].endswith("key: c payload: 3")
    assert records[3].startswith(f"| offset: 3 CreateTime: {TS + 1} keySize: 1 valueSize: -1 ")
    (v2_line,) = batch_lines(out)
    assert v2_line["LogAppendTime"] == str(TS + 9) and v2_line["baseOffset"] == "4"
    assert records[4].startswith(f"| offset: 4 LogAppendTime: {TS + 9} ")


# --- .index / .timeindex ---

def raw_entries(path: Path, entry: struct.Struct) -> list[tuple[int, int]]:
    data = path.read_bytes()
    return list(entry.iter_unpack(data[:len(data) - len(data) % entry.size]))


def test_offset_index_entries_match_the_file_and_the_log(logdir, capsys):
    indexes = [p for p in files_of(logdir, ".index") if p.stat().st_size]
    code, out, err = dump(capsys, "--files", *map(str, indexes))
    assert code == 0 and err == ""
    printed = [tuple(map(int, m)) for m in re.findall(r"^offset: (\d+) position: (\d+)$", out, re.M)]
    expected = []
    for path in indexes:
        base = int(path.name.split(".")[0])
        last_offset_at = {pos: h.last_offset for pos, h in scan(path.with_suffix(".log"))}
        for rel, pos in raw_entries(path, OFFSET_ENTRY):
            assert last_offset_at[pos] == base + rel  # the index points at its batch
            expected.append((base + rel, pos))
    assert printed == expected and expected


def test_time_index_entries_match_the_file(logdir, capsys):
    indexes = [p for p in files_of(logdir, ".timeindex") if p.stat().st_size]
    code, out, err = dump(capsys, "--files", *map(str, indexes))
    assert code == 0 and err == ""
    printed = [tuple(map(int, m)) for m in re.findall(r"^timestamp: (\d+) offset: (\d+)$", out, re.M)]
    expected = [(ts, int(p.name.split(".")[0]) + rel) for p in indexes
                for ts, rel in raw_entries(p, TIME_ENTRY)]
    assert printed == expected and expected


def copy_segment(logdir: Path, tmp_path: Path) -> Path:
    """The first segment's .log, .index and .timeindex in tmp_path; returns the .index."""
    index = next(p for p in files_of(logdir, ".index") if p.stat().st_size >= 2 * OFFSET_ENTRY.size)
    for suffix in (".log", ".index", ".timeindex"):
        shutil.copy(index.with_suffix(suffix), tmp_path / index.with_suffix(suffix).name)
    return tmp_path / index.name


def test_corrupted_index_reports_mismatches(logdir, tmp_path, capsys):
    index = copy_segment(logdir, tmp_path)
    entries = raw_entries(index, OFFSET_ENTRY)
    base = int(index.name.split(".")[0])
    data = bytearray(index.read_bytes())
    OFFSET_ENTRY.pack_into(data, 0, entries[0][0], entries[1][1])  # entry 0 -> batch of entry 1
    index.write_bytes(bytes(data))
    mismatch = f"  Index offset: {base + entries[0][0]}, log offset: {base + entries[1][0]}"

    code, out, err = dump(capsys, "--verify-index-only", "--files", str(index))
    assert code == 0
    assert out == f"Dumping {index}\n"
    assert err.splitlines() == [f"Mismatches in :{index.absolute()}", mismatch]

    code, out, err = dump(capsys, "--files", str(index))
    assert code == 0 and len(out.splitlines()) == 1 + len(entries)
    assert mismatch in err.splitlines()

    # the sanity check is about the file's shape, which this corruption keeps
    code, out, err = dump(capsys, "--index-sanity-check", "--files", str(index))
    assert (code, out.splitlines()[-1], err) == (0, f"{index} passed sanity check.", "")


def test_failed_sanity_check_exits_1_with_one_line(logdir, tmp_path, capsys):
    index = copy_segment(logdir, tmp_path)
    index.write_bytes(index.read_bytes() + b"\x01\x02\x03")  # not a multiple of 8
    code, out, err = dump(capsys, "--index-sanity-check", "--files", str(index))
    assert code == 1
    assert out == f"Dumping {index}\n"
    (line,) = err.splitlines()
    assert line.startswith(f"kafkalog dump-log: error: {index} failed sanity check: ")
    timeindex = index.with_suffix(".timeindex")
    code, out, _ = dump(capsys, "--index-sanity-check", "--files", str(timeindex))
    assert code == 0 and out.splitlines()[-1] == f"{timeindex} passed sanity check."


def test_corrupted_time_index_reports_mismatches(logdir, tmp_path, capsys):
    index = copy_segment(logdir, tmp_path)
    timeindex = index.with_suffix(".timeindex")
    entries = raw_entries(timeindex, TIME_ENTRY)
    base = int(index.name.split(".")[0])
    data = bytearray(timeindex.read_bytes())
    TIME_ENTRY.pack_into(data, 0, entries[0][0] + 1000, entries[0][1])
    TIME_ENTRY.pack_into(data, 12, entries[1][0], entries[1][1] + 1)  # not a batch's last offset
    timeindex.write_bytes(bytes(data))
    code, out, err = dump(capsys, "--verify-index-only", "--files", str(timeindex))
    assert code == 0 and out == f"Dumping {timeindex}\n"
    lines = err.splitlines()
    assert lines[:2] == [f"Found timestamp mismatch in :{timeindex.absolute()}",
                         f"  Index timestamp: {entries[0][0] + 1000}, log timestamp: {entries[0][0]}"]
    assert "The following indexed offsets are not found in the log." in lines
    assert any(line.startswith(f"Indexed offset: {base + entries[1][1] + 1}, found log offset: ")
               for line in lines)


def test_index_without_its_log_is_printed_with_a_warning(logdir, tmp_path, capsys):
    index = copy_segment(logdir, tmp_path)
    index.with_suffix(".log").unlink()
    code, out, err = dump(capsys, "--files", str(index))
    assert code == 0 and len(out.splitlines()) == 1 + len(raw_entries(index, OFFSET_ENTRY))
    assert err.splitlines() == [
        f"kafkalog dump-log: warning: {index}: no {index.with_suffix('.log').name} beside it, "
        "entries are not verified"]


def test_empty_and_preallocated_indexes(tmp_path, capsys):
    empty = tmp_path / "00000000000000000000.index"
    empty.write_bytes(b"")
    zeros = tmp_path / "00000000000000000100.index"
    zeros.write_bytes(bytes(800))
    zero_time = tmp_path / "00000000000000000100.timeindex"
    zero_time.write_bytes(bytes(1200))
    code, out, err = dump(capsys, "--files", str(empty), str(zeros), str(zero_time))
    assert code == 0
    assert out.splitlines() == [f"Dumping {empty}", f"{empty} is empty.", f"Dumping {zeros}",
                                f"{zeros} is empty.", f"Dumping {zero_time}"]


# --- .snapshot / .txnindex ---

def test_snapshots_are_decoded(logdir, capsys):
    snapshots = files_of(logdir, ".snapshot")
    code, out, err = dump(capsys, "--files", *map(str, snapshots))
    assert code == 0 and err == ""
    lines = [dict(FIELD.findall(line)) for line in out.splitlines() if line.startswith("producerId: ")]
    expected = [e for path in snapshots for e in read_snapshot(path)]
    assert len(lines) == len(expected) and expected
    for fields, entry in zip(lines, expected):
        assert int(fields["producerId"]) == entry.producer_id
        assert int(fields["producerEpoch"]) == entry.producer_epoch
        assert int(fields["coordinatorEpoch"]) == entry.coordinator_epoch
        assert int(fields["lastTimestamp"]) == entry.last_timestamp
        assert fields["currentTxnFirstOffset"] == "OptionalLong.empty"
        meta = entry.batch_metadata[0]
        assert (int(fields["firstSequence"]), int(fields["lastSequence"]), int(fields["lastOffset"]),
                int(fields["offsetDelta"])) == (meta.first_seq, meta.last_seq, meta.last_offset,
                                                meta.offset_delta)
    last = {int(f["producerId"]): f for f in lines}  # the newest snapshot wins
    assert last[IDEMPOTENT_PID]["lastSequence"] == "6" and last[IDEMPOTENT_PID]["firstSequence"] == "5"
    assert last[IDEMPOTENT_PID]["offsetDelta"] == "1"
    assert last[COMMIT_PID]["coordinatorEpoch"] == "7"


def test_corrupt_snapshot_is_a_warning(logdir, tmp_path, capsys):
    source = files_of(logdir, ".snapshot")[-1]
    data = bytearray(source.read_bytes())
    data[-1] ^= 0xFF
    target = tmp_path / source.name
    target.write_bytes(bytes(data))
    code, out, err = dump(capsys, "--files", str(target))
    assert code == 0 and out == f"Dumping {target}\n"
    (line,) = err.splitlines()
    assert line.startswith(f"kafkalog dump-log: warning: {target}: snapshot CRC mismatch")


def test_txn_index_lists_the_aborted_transaction(logdir, capsys, tmp_path):
    (txnindex,) = files_of(logdir, ".txnindex")
    code, out, err = dump(capsys, "--files", str(txnindex))
    assert code == 0 and err == ""
    assert txnindex.stat().st_size == ABORTED_TXN_SIZE  # one aborted transaction
    txn = AbortedTxn.decode(txnindex.read_bytes())
    assert txn.producer_id == ABORT_PID
    assert out.splitlines()[1:] == [
        f"version: 0 producerId: {ABORT_PID} firstOffset: {txn.first_offset} "
        f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}"]
    torn = tmp_path / txnindex.name
    torn.write_bytes(txnindex.read_bytes() + b"\x00" * 5)
    _, out, _ = dump(capsys, "--files", str(torn))
    assert out.splitlines()[-1] == f"Found 5 invalid bytes at the end of {torn.name}"


# --- --files resolution and errors ---

def test_a_directory_means_its_files_in_offset_order(logdir, capsys):
    _, from_dir, _ = dump(capsys, "--files", str(logdir))
    dumped = re.findall(r"^Dumping (.+)$", from_dir, re.M)
    names = [Path(p).name for p in dumped]
    assert "leader-epoch-checkpoint" not in names
    assert names == sorted(names, key=lambda n: (int(n.split(".")[0]), [".log", ".index", ".timeindex",
                                                                       ".txnindex", ".snapshot"].index(Path(n).suffix)))
    _, listed, _ = dump(capsys, "--files", ",".join(dumped))
    assert listed == from_dir


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.log", "no such file"),
    (lambda d: d / "leader-epoch-checkpoint", "not a log, index or snapshot file"),
    (lambda d: d / "segment.index", "must be named after its segment's base offset"),
    (lambda d: d / "empty", "no .log, .index, .timeindex, .txnindex, .snapshot files"),
])
def test_bad_files_exit_1_with_one_line_and_no_output(tmp_path, capsys, make, message):
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n0\n")
    (tmp_path / "segment.index").write_bytes(b"")
    (tmp_path / "empty").mkdir()
    good = tmp_path / "00000000000000000000.snapshot"
    good.write_bytes(b"")
    code, out, err = dump(capsys, "--files", str(good), str(make(tmp_path)))
    assert code == 1 and out == ""
    (line,) = err.splitlines()
    assert line.startswith("kafkalog dump-log: error: ") and message in line


# --- the console script ---

def kafkalog_script() -> Path:
    script = Path(sys.executable).parent / "kafkalog"
    if not script.exists():
        pytest.skip("the kafkalog console script is not installed (pip install -e .)")
    return script


def test_console_script_prints_the_same_dump(logdir, capsys):
    script = kafkalog_script()
    args = ["dump-log", "--print-data-log", "--files", str(logdir)]
    assert main(args) == 0
    expected = capsys.readouterr().out
    proc = subprocess.run([str(script), *args], capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == expected


def test_console_script_help_and_errors():
    script = kafkalog_script()
    for args in (["--help"], ["dump-log", "--help"]):
        proc = subprocess.run([str(script), *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and "usage: kafkalog" in proc.stdout
    proc = subprocess.run([str(script), "dump-log", "--files", "/nonexistent/0.log"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == "kafkalog dump-log: error: /nonexistent/0.log: no such file\n"


def test_console_script_stops_quietly_on_a_closed_pipe(logdir, tmp_path):
    script = kafkalog_script()
    big = tmp_path / "00000000000000000000.log"
    big.write_bytes(files_of(logdir, ".log")[0].read_bytes() * 200)
    proc = subprocess.run(f"'{script}' dump-log --print-data-log --files '{big}' | head -n 1",
                          shell=True, capture_output=True, text=True, timeout=120)
    assert proc.stdout == f"Dumping {big}\n"
    assert proc.stderr == ""
