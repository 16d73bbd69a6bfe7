"""Tests of broker/log/validator.py: the leader's append validation and in-place offset
assignment (I12, CRC kept valid, LogAppendTime, max.message.bytes, compacted keys)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords

from broker.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordBatchTooLargeError,
    UnsupportedForMessageFormatError,
)
from broker.log.validator import (
    AppendOrigin,
    ValidatorConfig,
    analyze_and_validate_records,
    analyze_single_batch,
    assign_offsets,
    assign_offsets_single,
)
from broker.record import batch as rb
from broker.record.control import ControlRecordType, encode_end_txn_marker_batch
from broker.record.legacy import encode_legacy_message

NOW = 1_700_000_000_000
DEFAULT = ValidatorConfig()


def records(n: int, ts: int = NOW, key: bytes | None = b"k", start: int = 0):
    return [(key, b"value-%d" % (start + i), ts + i) for i in range(n)]


def batch(n: int = 3, **kw) -> bytes:
    ts = kw.pop("ts", NOW)
    key = kw.pop("key", b"k")
    return rb.encode_batch(records(n, ts, key), **kw)


def idem(n: int, seq: int, pid: int = 7, epoch: int = 0, **kw) -> bytes:
    return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, **kw)


def run(buf: bytearray, config: ValidatorConfig = DEFAULT, leo: int = 100, epoch: int = 5,
        origin: AppendOrigin = AppendOrigin.CLIENT, now: int = NOW):
    """The leader's two steps as ``UnifiedLog.append_as_leader`` runs them: the fused
    single-batch path when it accepts the request, else the general one. Both are run
    and must agree (bytes written and the ``LogAppendInfo``)."""
    copy = bytearray(buf)
    fast = analyze_single_batch(copy, config, now, origin)
    info = analyze_and_validate_records(buf, config, now_ms=now, origin=origin)
    info = assign_offsets(buf, info, first_offset=leo, partition_leader_epoch=epoch, now_ms=now,
                          log_append_time=config.log_append_time)
    if fast is not None:
        fast_info = assign_offsets_single(copy, fast, leo, epoch, now, config.log_append_time)
        assert bytes(copy) == bytes(buf)
        assert fast_info._replace(record_max_timestamps=None) == info._replace(record_max_timestamps=None)
    return info


def assert_rejected(buf: bytearray, error: type[Exception], config: ValidatorConfig = DEFAULT,
                    **kw) -> Exception:
    before = bytes(buf)
    with pytest.raises(error) as info:
        run(buf, config, **kw)
    assert bytes(buf) == before, "a rejected append must leave the buffer untouched"
    assert analyze_single_batch(buf, config, kw.get("now", NOW), kw.get("origin", AppendOrigin.CLIENT)) is None
    return info.value


# --- offset assignment ---

def test_assigns_offsets_in_place_keeping_crc_valid():
    buf = bytearray(idem(2, 0) + idem(3, 2) + idem(1, 5))
    info = run(buf, leo=100, epoch=5)
    assert (info.first_offset, info.last_offset) == (100, 105)
    assert info.shallow_count == 3 and info.records_count == 6
    assert info.valid_bytes == len(buf)
    assert info.log_append_time == -1
    assert info.last_offset_of_first_batch == 101
    # each batch's maxTimestamp is NOW + n - 1: the 3-record batch (offsets 102-104) wins
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (NOW + 2, 104)
    positions = [p for p, _ in info.batches]
    assert positions == [0, len(idem(2, 0)), len(idem(2, 0)) + len(idem(3, 2))]
    bases = []
    for pos, header in info.batches:
        checked = rb.ensure_valid(buf, pos)
        assert checked == header
        assert header.partition_leader_epoch == 5
        bases.append(header.base_offset)
    assert bases == [100, 102, 105]
    # kafka-python reads the new offsets and validates the CRC.
    seen = []
    mr = MemoryRecords(bytes(buf))
    while mr.has_next():
        b = mr.next_batch()
        assert b.validate_crc()
        seen.extend(r.offset for r in b)
    assert seen == list(range(100, 106))


def test_max_timestamp_and_its_offset():
    buf = bytearray(batch(2, ts=NOW - 10) + batch(2, ts=NOW + 50) + batch(1, ts=NOW))
    info = run(buf, leo=0)
    assert info.max_timestamp == NOW + 51
    assert info.offset_of_max_timestamp == 3  # the last offset of the second batch (shallow)


def test_analyze_is_read_only_and_reports_client_offsets():
    buf = bytearray(batch(4))
    before = bytes(buf)
    info = analyze_and_validate_records(buf, now_ms=NOW)
    assert bytes(buf) == before
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 3, 4)


def test_read_only_buffer_is_refused():
    data = batch(2)
    info = analyze_and_validate_records(data, now_ms=NOW)
    with pytest.raises(TypeError):
        assign_offsets(data, info, first_offset=0, partition_leader_epoch=0, now_ms=NOW)


def test_compressed_batch_is_not_recompressed():
    buf = bytearray(batch(5, compression=1))  # gzip
    payload = bytes(buf[rb.RECORDS_OFFSET:])
    info = run(buf, leo=42)
    assert bytes(buf[rb.RECORDS_OFFSET:]) == payload
    assert info.source_compression == 1
    header, recs = rb.decode_batch(buf)
    assert [r.offset for r in recs] == [42, 43, 44, 45, 46]


# --- LogAppendTime ---

def test_log_append_time_rewrites_and_revalidates():
    buf = bytearray(batch(3, ts=NOW - 5_000_000) + batch(2, ts=NOW - 4_000_000))
    config = ValidatorConfig(log_append_time=True)
    append_time = NOW + 7
    info = run(buf, config, leo=10, epoch=1, now=append_time)
    assert info.log_append_time == append_time
    assert info.max_timestamp == append_time and info.offset_of_max_timestamp == 10
    for pos, header in info.batches:
        rb.ensure_valid(buf, pos)
        assert header.timestamp_type == rb.LOG_APPEND_TIME
        assert header.max_timestamp == append_time
    mr = MemoryRecords(bytes(buf))
    while mr.has_next():
        b = mr.next_batch()
        assert b.validate_crc()
        assert b.timestamp_type == 1
        assert all(r.timestamp == append_time for r in b)


def test_log_append_time_bit_from_a_client_is_cleared_on_create_time_topics():
    buf = bytearray(batch(2, timestamp_type=rb.LOG_APPEND_TIME))
    info = run(buf)
    header = rb.ensure_valid(buf)
    assert header.timestamp_type == rb.CREATE_TIME
    assert info.batches[0][1] == header


# --- I12 and the other rejections; the buffer is never modified ---

def test_i12_control_batch_from_a_client():
    marker = encode_end_txn_marker_batch(ControlRecordType.COMMIT, producer_id=7, producer_epoch=0,
                                         coordinator_epoch=1, timestamp=NOW)
    assert_rejected(bytearray(marker), InvalidRecordError)
    # ...but the broker's own coordinator writes it.
    info = run(bytearray(marker), origin=AppendOrigin.COORDINATOR)
    assert info.records_count == 1


def test_i12_last_offset_delta_disagrees_with_count():
    raw = b"".join(rb.encode_record(i, 0, b"k", b"v") for i in range(3))
    bad = rb.build_batch(raw, count=3, last_offset_delta=3, base_timestamp=NOW, max_timestamp=NOW)
    assert_rejected(bytearray(bad), InvalidRecordError)
    bad = rb.build_batch(raw, count=3, last_offset_delta=1, base_timestamp=NOW, max_timestamp=NOW)
    assert_rejected(bytearray(idem(1, 0) + bad), InvalidRecordError)


def test_i12_producer_id_with_negative_sequence():
    assert_rejected(bytearray(idem(2, -1)), InvalidRecordError)
    assert_rejected(bytearray(idem(2, -5)), InvalidRecordError)


def test_i12_mixed_magic():
    v1 = encode_legacy_message(0, b"k", b"v", magic=1, timestamp=NOW)
    assert_rejected(bytearray(batch(2) + v1), InvalidRecordError)
    assert_rejected(bytearray(v1 + batch(2)), InvalidRecordError)


def test_legacy_magic_is_unsupported():
    for magic in (0, 1):
        msg = encode_legacy_message(0, b"k", b"v", magic=magic, timestamp=NOW)
        assert_rejected(bytearray(msg + msg), UnsupportedForMessageFormatError)


def test_unknown_magic_is_corrupt():
    buf = bytearray(batch(1))
    buf[rb.MAGIC_OFFSET] = 7
    assert_rejected(buf, CorruptRecordError)


def test_zero_records():
    bad = rb.build_batch(b"", count=0, last_offset_delta=-1)
    assert_rejected(bytearray(bad), InvalidRecordError)


def test_non_zero_base_offset_from_a_client():
    assert_rejected(bytearray(batch(2, base_offset=9)), InvalidRecordError)
    info = run(bytearray(batch(2, base_offset=9)), origin=AppendOrigin.REPLICATION)
    assert info.first_offset == 100


def test_bad_crc_is_corrupt_even_after_a_good_batch():
    good = batch(2)
    bad = bytearray(batch(2))
    bad[-1] ^= 0xFF
    assert_rejected(bytearray(good + bad), CorruptRecordError)


def test_trailing_partial_batch_and_stray_bytes_are_corrupt():
    good = batch(2)
    assert_rejected(bytearray(good + batch(2)[:-3]), CorruptRecordError)
    assert_rejected(bytearray(good + b"\x00" * 5), CorruptRecordError)
    assert_rejected(bytearray(good[:40]), CorruptRecordError)
    short = bytearray(batch(1))
    struct.pack_into(">i", short, 8, 20)  # batchLength below the header size
    assert_rejected(short, CorruptRecordError)


def test_count_the_bytes_cannot_hold_is_corrupt():
    raw = rb.encode_record(0, 0, b"k", b"v")
    bad = rb.build_batch(raw, count=50, base_timestamp=NOW, max_timestamp=NOW)
    assert_rejected(bytearray(bad), CorruptRecordError)


def test_empty_request():
    assert_rejected(bytearray(), InvalidRecordError)


def test_mixed_producers_in_one_request():
    assert_rejected(bytearray(idem(1, 0, pid=1) + idem(1, 0, pid=2)), InvalidRecordError)
    assert_rejected(bytearray(idem(1, 0, epoch=0) + idem(1, 1, epoch=1)), InvalidRecordError)
    assert_rejected(bytearray(idem(1, 0) + batch(1)), InvalidRecordError)


def test_max_message_bytes():
    data = batch(10)
    assert_rejected(bytearray(data), RecordBatchTooLargeError,
                    ValidatorConfig(max_message_bytes=len(data) - 1))
    run(bytearray(data), ValidatorConfig(max_message_bytes=len(data)))


def test_create_time_bounds():
    config = ValidatorConfig(timestamp_before_max_ms=1000, timestamp_after_max_ms=500)
    run(bytearray(batch(1, ts=NOW - 1000)), config)
    run(bytearray(batch(1, ts=NOW + 500)), config)
    assert_rejected(bytearray(batch(1, ts=NOW - 1001)), InvalidTimestampError, config)
    assert_rejected(bytearray(batch(1, ts=NOW + 501)), InvalidTimestampError, config)
    # maxTimestamp is checked too, not only the base timestamp.
    assert_rejected(bytearray(batch(600, ts=NOW)), InvalidTimestampError, config)
    # Kafka's default after.max.ms is one hour; before.max.ms is unbounded.
    run(bytearray(batch(1, ts=0)))
    assert_rejected(bytearray(batch(1, ts=NOW + 3_600_001)), InvalidTimestampError)
    # NO_TIMESTAMP is not checked; LogAppendTime topics check nothing.
    run(bytearray(rb.encode_batch([(b"k", b"v", -1)])), config)
    run(bytearray(batch(1, ts=NOW - 10**9)), ValidatorConfig(log_append_time=True,
                                                             timestamp_before_max_ms=0))


# --- compacted topics: keys required, records decoded ---

def test_compacted_topic_rejects_a_null_key():
    config = ValidatorConfig(compacted=True)
    recs = [(b"a", b"1", NOW), (None, b"2", NOW), (b"c", b"3", NOW)]
    buf = bytearray(rb.encode_batch(recs))
    err = assert_rejected(buf, InvalidRecordError, config)
    assert err.record_errors[0][0] == 1
    # compressed: decoded too
    buf = bytearray(rb.encode_batch(recs, compression=1))
    assert_rejected(buf, InvalidRecordError, config)
    # without compaction a null key is fine
    run(bytearray(rb.encode_batch(recs)))


def test_compacted_topic_with_keys_and_exact_max_timestamp_offset():
    config = ValidatorConfig(compacted=True)
    recs = [(b"a", b"1", NOW), (b"b", b"2", NOW + 9), (b"c", b"3", NOW + 2)]
    buf = bytearray(rb.encode_batch(recs, compression=1))
    info = run(buf, config, leo=20)
    assert info.max_timestamp == NOW + 9
    assert info.offset_of_max_timestamp == 21
    rb.ensure_valid(buf)


def test_compacted_topic_checks_every_record_timestamp():
    config = ValidatorConfig(compacted=True, timestamp_before_max_ms=100)
    # base and max timestamps are in range; the middle record is not
    recs = [(b"a", b"1", NOW), (b"b", b"2", NOW - 1000), (b"c", b"3", NOW + 1)]
    assert_rejected(bytearray(rb.encode_batch(recs)), InvalidTimestampError, config)


def test_compacted_topic_fixes_a_wrong_max_timestamp():
    raw = b"".join(rb.encode_record(i, i, b"k", b"v") for i in range(3))
    lying = rb.build_batch(raw, count=3, base_timestamp=NOW, max_timestamp=NOW + 999)
    buf = bytearray(lying)
    info = run(buf, ValidatorConfig(compacted=True))
    header = rb.ensure_valid(buf)
    assert header.max_timestamp == NOW + 2 == info.max_timestamp


def test_compacted_non_sequential_offset_deltas():
    raw = rb.encode_record(0, 0, b"k", b"v") + rb.encode_record(5, 0, b"k", b"v")
    bad = rb.build_batch(raw, count=2, base_timestamp=NOW, max_timestamp=NOW)
    assert_rejected(bytearray(bad), InvalidRecordError, ValidatorConfig(compacted=True))


# --- properties ---

batch_specs = st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch_specs, st.data())
def test_any_flip_in_crc_covered_bytes_is_rejected_without_changes(counts, data):
    buf = bytearray(b"".join(batch(n) for n in counts))
    starts, pos = [], 0
    for n in counts:
        size = len(batch(n))
        starts.append((pos, size))
        pos += size
    index = data.draw(st.integers(0, len(counts) - 1))
    start, size = starts[index]
    where = data.draw(st.integers(start + rb.ATTRIBUTES_OFFSET, start + size - 1))
    buf[where] ^= data.draw(st.integers(1, 255))
    assert_rejected(buf, CorruptRecordError)


@settings(max_examples=60, deadline=None)
@given(batch_specs, st.integers(0, 2**40), st.integers(-1, 1000))
def test_assignment_is_contiguous_and_valid(counts, leo, leader_epoch):
    buf = bytearray(b"".join(batch(n) for n in counts))
    info = run(buf, leo=leo, epoch=leader_epoch)
    expected = leo
    for pos, header in info.batches:
        assert rb.ensure_valid(buf, pos) == header
        assert header.base_offset == expected and header.partition_leader_epoch == leader_epoch
        expected = header.next_offset
    assert info.last_offset == expected - 1 == leo + sum(counts) - 1


def test_config_from_log_config():
    from broker.log.config import LogConfig

    config = ValidatorConfig.from_log_config(LogConfig.from_props(
        {"cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime",
         "max.message.bytes": "2000"}))
    assert config == ValidatorConfig(max_message_bytes=2000, log_append_time=True, compacted=True)
    assert ValidatorConfig.from_log_config(LogConfig.from_props({})) == ValidatorConfig()


# --- every record walked (issue 13) ---

def test_every_topic_fixes_a_wrong_max_timestamp_and_reports_the_exact_offset():
    """Kafka's maxBatchTimestamp: the records' largest timestamp, whatever the header says;
    the offset of its first record, not the batch's last offset."""
    raw = b"".join(rb.encode_record(i, d, b"k", b"v") for i, d in enumerate((0, 9, 2)))
    for codec in (0, 4):
        buf = bytearray(rb.build_batch(raw, count=3, base_timestamp=NOW, max_timestamp=NOW + 999,
                                       compression=codec))
        info = run(buf, leo=50)
        header = rb.ensure_valid(buf)
        assert header.max_timestamp == NOW + 9 == info.max_timestamp
        assert info.offset_of_max_timestamp == 51


def test_garbage_records_with_a_right_crc_are_corrupt():
    for codec in (0, 1, 2, 3, 4):
        bad = rb.build_batch(b"\x07" * 64, count=2, compression=codec, base_timestamp=NOW, max_timestamp=NOW)
        assert_rejected(bytearray(bad), CorruptRecordError)


def test_offset_deltas_out_of_order_on_any_topic_name_the_record():
    raw = rb.encode_record(0, 0, b"k", b"v") + rb.encode_record(0, 0, b"k", b"v")
    for codec in (0, 3):
        bad = rb.build_batch(raw, count=2, base_timestamp=NOW, max_timestamp=NOW, compression=codec)
        err = assert_rejected(bytearray(bad), InvalidRecordError)
        assert [i for i, _ in err.record_errors] == [1]


def test_a_decompression_bomb_is_message_too_large():
    bomb = rb.encode_batch([(b"k", b"\x00" * (3 << 20), NOW)], compression=4)
    assert_rejected(bytearray(bomb), RecordBatchTooLargeError, ValidatorConfig(max_decompressed_bytes=1 << 20))
    run(bytearray(bomb), ValidatorConfig(max_decompressed_bytes=4 << 20))
    assert ValidatorConfig().decompression_budget == 64 * ValidatorConfig().max_message_bytes
    assert ValidatorConfig(max_message_bytes=1000).decompression_budget == rb.DEFAULT_MAX_DECOMPRESSED_BYTES


def test_every_record_timestamp_is_checked_on_every_topic():
    config = ValidatorConfig(timestamp_before_max_ms=100)
    raw = b"".join(rb.encode_record(i, d, b"k", b"v") for i, d in enumerate((0, -1000, 1, -2000)))
    bad = rb.build_batch(raw, count=4, base_timestamp=NOW, max_timestamp=NOW + 1)
    err = assert_rejected(bytearray(bad), InvalidTimestampError, config)
    assert [i for i, _ in err.record_errors] == [1, 3]
    # NO_TIMESTAMP records are not checked, as in Kafka
    raw = rb.encode_record(0, 0, b"k", b"v")
    run(bytearray(rb.build_batch(raw, count=1, base_timestamp=-1, max_timestamp=-1)), config)


def test_log_append_time_set_by_a_producer_on_a_log_append_time_topic():
    """Kafka's validateTimestamp: "Producer should not set timestamp type to LogAppendTime"."""
    buf = bytearray(batch(2, timestamp_type=rb.LOG_APPEND_TIME))
    err = assert_rejected(buf, InvalidTimestampError, ValidatorConfig(log_append_time=True))
    assert [i for i, _ in err.record_errors] == [0, 1]
