"""Tests of the log cleaner's KIP-534 delete horizons (the batch layout Kafka writes:
attribute bit 6, the horizon in the base timestamp field, record timestamps unchanged), the
readers of such batches (log reads, recovery, ``kafkalog dump-log``), and the cleaner's
metrics and summary line. Time is a MockTime: horizons are reached by moving it."""

from __future__ import annotations

import logging
import re
import struct
from pathlib import Path

from broker.log.cleaner.manager import LogCleaner
from broker.record.batch import (
    ATTRIBUTES_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    encode_batch,
    ensure_valid,
    iter_batch_headers,
    iter_batches,
)
from broker.record.control import ControlRecordType
from spark_kafkalog.cli.main import main
from tests.test_log_cleaner import TP, Env, _end_txn, read_all

DAY = 86_400_000
FIELD = re.compile(r"(\w+): (\S+)")


def _batches(env: Env) -> list[tuple[object, bytes]]:
    """(header, raw bytes) of every batch of every segment, in offset order."""
    out = []
    for seg in env.log.segments:
        data = Path(seg.log.path).read_bytes()
        out += [(h, bytes(data[p:p + h.size_in_bytes])) for p, h in iter_batch_headers(data)]
    return out


def _tombstone_env(tmp_path, retention: int = DAY) -> tuple[Env, int]:
    env = Env(tmp_path, **{"delete.retention.ms": retention})
    t0 = env.time.milliseconds() - 5000
    env.log.append_as_leader(encode_batch([(b"a", b"1", t0), (b"b", b"1", t0 + 1)]))           # 0-1
    env.log.append_as_leader(encode_batch([(b"a", None, t0 + 2), (b"c", b"1", t0 + 3)]))        # 2-3
    env.log.append_as_leader(encode_batch([(b"d", b"1", t0 + 4)]))                               # 4
    env.log.roll()
    return env, t0


def _dirty(env: Env, n: int) -> None:
    """Make the log dirty enough for another cleaning (a new segment of its own)."""
    env.produce([(b"other", b"%d" % n)])
    env.log.roll()


def test_first_cleaning_stamps_the_delete_horizon_as_kafka(tmp_path) -> None:
    env, t0 = _tombstone_env(tmp_path)
    before = {h.base_offset: raw for h, raw in _batches(env)}
    cleaner = env.cleaner()
    now = env.time.milliseconds()
    assert cleaner.do_one_cleaning()
    batches = {h.base_offset: (h, raw) for h, raw in _batches(env)}
    # the tombstone's batch: bit 6 set, base timestamp = cleaning time + delete.retention.ms
    h, raw = batches[2]
    (attributes,) = struct.unpack_from(">h", raw, ATTRIBUTES_OFFSET)
    assert attributes & DELETE_HORIZON_FLAG_MASK and h.has_delete_horizon
    assert struct.unpack_from(">q", raw, 27)[0] == h.delete_horizon_ms == now + DAY
    ensure_valid(raw)  # the CRC covers the new attributes and base timestamp
    (header, records), = iter_batches(raw)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (2, b"a", None, t0 + 2), (3, b"c", b"1", t0 + 3)], "every record keeps its timestamp"
    assert header.max_timestamp == t0 + 3
    # batches without tombstones: no horizon; one kept whole is byte for byte the same
    assert batches[4][1] == before[4] and not batches[4][0].has_delete_horizon
    assert not batches[0][0].has_delete_horizon  # rewritten (a dropped): no tombstone in it
    assert [r[1:] for r in read_all(env.log)] == [(b"b", b"1"), (b"a", None), (b"c", b"1"), (b"d", b"1")]


def test_tombstones_stay_until_their_horizon_then_go(tmp_path) -> None:
    env, _ = _tombstone_env(tmp_path)
    cleaner = env.cleaner()
    assert cleaner.do_one_cleaning()
    horizon = {h.base_offset: h.delete_horizon_ms for h, _ in _batches(env)}[2]
    env.time.sleep(DAY - 1000)  # one second before the horizon
    _dirty(env, 1)
    assert cleaner.do_one_cleaning()
    stamped = {h.base_offset: h.delete_horizon_ms for h, _ in _batches(env)}
    assert stamped[2] == horizon, "a later cleaning keeps the first horizon"
    assert (2, b"a", None) in read_all(env.log)
    env.time.sleep(1000)  # the horizon: now >= deleteHorizonMs
    _dirty(env, 2)
    assert cleaner.do_one_cleaning()
    records = read_all(env.log)
    assert not [r for r in records if r[2] is None], "past its horizon the tombstone goes"
    assert (3, b"c", b"1") in records
    # the batch that held it, rewritten without it, keeps the horizon flag (Kafka does too)
    assert {h.base_offset: h.delete_horizon_ms for h, _ in _batches(env)}[2] == horizon


def test_a_tombstone_produced_after_a_horizon_gets_its_own(tmp_path) -> None:
    env, _ = _tombstone_env(tmp_path, retention=1000)
    cleaner = env.cleaner()
    assert cleaner.do_one_cleaning()
    env.time.sleep(500)
    env.produce([(b"d", None)])  # offset 5, a new tombstone
    env.log.roll()
    assert cleaner.do_one_cleaning()
    horizons = {h.base_offset: h.delete_horizon_ms for h, _ in _batches(env)}
    assert horizons[5] == env.time.milliseconds() + 1000 and horizons[2] == horizons[5] - 500
    env.time.sleep(600)  # past the first horizon, not the second
    _dirty(env, 1)
    assert cleaner.do_one_cleaning()
    tombstones = [r for r in read_all(env.log) if r[2] is None]
    assert tombstones == [(5, b"d", None)]


def test_a_stamped_log_reopens_and_recovers(tmp_path) -> None:
    env, _ = _tombstone_env(tmp_path)
    env.produce([(b"x", b"1")], producer_id=4, producer_epoch=0, base_sequence=0, is_transactional=True)
    _end_txn(env, ControlRecordType.ABORT, 4)
    env.log.roll()
    assert env.cleaner().do_one_cleaning()
    records = read_all(env.log)
    env.log.close_handlers()
    reopened = env.open(clean=False)  # recovery re-reads every batch (CRC, offsets, markers)
    assert read_all(reopened) == records
    assert reopened.first_unstable_offset is None
    reopened.close()


def test_markers_are_stamped_once_their_transaction_is_empty(tmp_path) -> None:
    env = Env(tmp_path, **{"delete.retention.ms": DAY})
    env.produce([(b"k", b"txn")], producer_id=3, producer_epoch=0, base_sequence=0, is_transactional=True)  # 0
    _end_txn(env, ControlRecordType.COMMIT, 3)                                                             # 1
    env.produce([(b"k", b"later")], producer_id=3, producer_epoch=0, base_sequence=1)                     # 2
    env.log.roll()
    cleaner = env.cleaner()
    assert cleaner.do_one_cleaning()  # the batch at 0 is met (then dropped): the marker stays as is
    marker = {h.base_offset: h for h, _ in _batches(env)}[1]
    assert marker.is_control and not marker.has_delete_horizon
    _dirty(env, 1)
    assert cleaner.do_one_cleaning()  # its transaction is empty now: stamped, kept
    marker = {h.base_offset: h for h, _ in _batches(env)}[1]
    assert marker.is_control and marker.delete_horizon_ms == env.time.milliseconds() + DAY
    env.time.sleep(DAY)
    _dirty(env, 2)
    assert cleaner.do_one_cleaning()
    assert not [h for h, _ in _batches(env) if h.is_control], "past its horizon the marker goes"


def test_dump_log_prints_a_cleaned_segment(tmp_path, capsys) -> None:
    env, t0 = _tombstone_env(tmp_path)
    assert env.cleaner().do_one_cleaning()
    horizon = {h.base_offset: h.delete_horizon_ms for h, _ in _batches(env)}[2]
    files = sorted(str(p) for p in env.dir.glob("*.log"))
    assert main(["dump-log", "--print-data-log", "--files", *files]) == 0
    out = capsys.readouterr().out
    batch_lines = [dict(FIELD.findall(line)) for line in out.splitlines() if line.startswith("baseOffset:")]
    by_base = {int(b["baseOffset"]): b for b in batch_lines}
    assert by_base[2]["deleteHorizonMs"] == f"OptionalLong[{horizon}]"
    assert by_base[4]["deleteHorizonMs"] == "OptionalLong.empty"
    assert all(b["isvalid"] == "true" for b in batch_lines)
    records = [dict(FIELD.findall(line)) for line in out.splitlines() if line.startswith("| offset:")]
    assert [(int(r["offset"]), int(r["CreateTime"]), r["valueSize"]) for r in records] == [
        (1, t0 + 1, "1"), (2, t0 + 2, "-1"), (3, t0 + 3, "1"), (4, t0 + 4, "1")]


# --- metrics and the summary line ---

def test_metrics_follow_kafkas_gauges(tmp_path, caplog) -> None:
    env = Env(tmp_path, **{"max.compaction.lag.ms": 60_000})
    for i in range(40):
        env.produce([(b"k%d" % (i % 4), b"v%d" % i)])
    env.log.roll()
    cleaner = env.cleaner(memory=1000)  # 41 slots, 36 entries at the 0.9 load factor
    m = cleaner.metrics()
    assert m["max-buffer-utilization-percent"] == 0 and m["cleaner-recopy-percent"] == 0
    assert m["uncleanable-partitions-count"] == 0 and m["DeadThreadCount"] == 0
    env.time.sleep(120_000)  # 60 s past max.compaction.lag.ms
    with caplog.at_level(logging.INFO, logger="broker.log.cleaner.manager"):
        assert cleaner.do_one_cleaning()
    m = cleaner.metrics()
    assert m["max-buffer-utilization-percent"] == int(100 * 4 / 41)
    stats = cleaner._last_stats[0]
    assert 0 < m["cleaner-recopy-percent"] == int(100 * stats.bytes_written / stats.bytes_read) < 100
    assert m["max-compaction-delay-secs"] >= 60
    assert m["max-dirty-percent"] == 100, "nothing was clean before this first cleaning"
    assert m["time-since-last-run-ms"] == 0
    env.time.sleep(250)
    assert cleaner.metrics()["time-since-last-run-ms"] == 250
    assert not cleaner.do_one_cleaning()
    assert cleaner.metrics()["max-dirty-percent"] == 0, "nothing cleanable at the last look"
    (line,) = [r.getMessage() for r in caplog.records if "cleaned log" in r.getMessage()]
    assert line.startswith("Log cleaner thread 0 cleaned log t-0 (dirty section = [0, 40], dirty ratio 1.00)")
    for part in ("MB of log processed in", "MB/sec", "indexed", "(40 messages)", "buffer utilization",
                 "start size", "end size", "(4 messages)", "size reduction", "90.0% fewer messages"):
        assert part in line, part


def test_an_uncleanable_partition_is_counted(tmp_path) -> None:
    env = Env(tmp_path)
    for i in range(10):
        env.produce([(b"k", b"v%d" % i)])
    env.log.roll()
    cleaner: LogCleaner = env.cleaner()
    cleaner.manager.mark_uncleanable(TP)
    assert cleaner.metrics()["uncleanable-partitions-count"] == 1
    cleaner.manager.resume_cleaning(TP)
    assert cleaner.metrics()["uncleanable-partitions-count"] == 0


def test_dead_thread_count_sees_live_threads(tmp_path) -> None:
    env = Env(tmp_path)
    cleaner = env.cleaner()
    cleaner.startup()
    try:
        assert cleaner.metrics()["DeadThreadCount"] == 0
    finally:
        cleaner.shutdown()


def test_the_columnar_reader_reads_stamped_batches(tmp_path) -> None:
    """The Spark source's reader (``decode_to_arrow``) sees every record of a stamped
    batch with its own timestamp (deltas from the horizon), as Java's DefaultRecordBatch."""
    from broker.record.columnar.decode import decode_to_arrow
    env, t0 = _tombstone_env(tmp_path)
    assert env.cleaner().do_one_cleaning()
    assert any(h.has_delete_horizon for h, _ in _batches(env))
    data = b"".join(raw for _, raw in _batches(env))
    table = decode_to_arrow(data).to_pydict()
    assert list(zip(table["offset"], table["key"], table["value"], table["timestamp"])) == [
        (1, b"b", b"1", t0 + 1), (2, b"a", None, t0 + 2), (3, b"c", b"1", t0 + 3), (4, b"d", b"1", t0 + 4)]
