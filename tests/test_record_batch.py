"""Tests of broker/record/batch.py and control.py: golden bytes, CRC, cross-implementation
with kafka-python's and aiokafka's record code, Hypothesis round trips and fuzzing."""

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.record import batch as B
from broker.record.codecs import CompressionType
from broker.record.control import (
    ControlRecordType,
    encode_end_txn_marker_batch,
    is_abort_marker,
    parse_end_txn_marker,
)
from broker.record.errors import CorruptRecordError, DecodeError, TruncatedError

# A batch built by kafka-python 3.0.12's DefaultRecordBatchBuilder (pid 1000, epoch 3,
# base sequence 7; records: (b"key", b"value", t0, [("h1", b"v1")]) and (None, b"", t0 + 5)).
KAFKA_PYTHON_BATCH = bytes.fromhex(
    "00000000000000000000004d0000000002e56dd9930000000000010000018bcfe568000000018bcfe568"
    "0500000000000003e80003000000070000000228000000066b65790a76616c7565020468310476310c00"
    "0a02010000")
# A batch built by aiokafka 0.14's Cython DefaultRecordBatchBuilder: (b"k", b"v" * 10, t0).
AIOKAFKA_BATCH = bytes.fromhex(
    "000000000000000000000043ffffffff02da91d5630000000000000000018bcfe568000000018bcfe568"
    "00ffffffffffffffffffffffffffff0000000122000000026b147676767676767676767600")
# A batch produced by confluent-kafka 2.16 (librdkafka, idempotent: pid 0, epoch 0, base
# sequence 0) to this broker, as stored in the .log file (offset 0, leader epoch 0):
# (b"k1", b"value-1", t0, [("h", b"v")]) and (None, b"value-2", t0 + 1).
LIBRDKAFKA_BATCH = bytes.fromhex(
    "0000000000000000000000530000000002b704d8b30000000000010000018bcfe568000000018bcfe568"
    "0100000000000000000000000000000000000226000000046b310e76616c75652d3102026802761a0002"
    "02010e76616c75652d3200")
T0 = 1700000000000
CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY,
          CompressionType.LZ4, CompressionType.ZSTD]


def test_crc32c_golden():
    assert B.crc32c(b"a") == 0xC1D04330
    assert B.crc32c(b"123456789") == 0xE3069283


def test_header_layout_constants():
    assert B.HEADER.size == B.RECORD_BATCH_OVERHEAD == 61


def test_decode_kafka_python_golden_batch():
    header, records = B.decode_batch(KAFKA_PYTHON_BATCH)
    assert header.producer_id == 1000 and header.producer_epoch == 3
    assert header.base_sequence == 7 and header.last_sequence == 8
    assert header.records_count == 2 and header.last_offset_delta == 1
    assert header.base_timestamp == T0 and header.max_timestamp == T0 + 5
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (0, T0, b"key", b"value", (("h1", b"v1"),)),
        (1, T0 + 5, None, b"", ()),
    ]


def test_decode_librdkafka_golden_batch():
    header, records = B.decode_batch(LIBRDKAFKA_BATCH)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (0, 0, 0)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (0, T0, b"k1", b"value-1", (("h", b"v"),)),
        (1, T0 + 1, None, b"value-2", ()),
    ]
    # byte for byte what our encoder makes of the same records and producer fields
    assert B.encode_batch([(b"k1", b"value-1", T0, [("h", b"v")]), (None, b"value-2", T0 + 1)],
                          producer_id=0, producer_epoch=0, base_sequence=0,
                          partition_leader_epoch=0) == LIBRDKAFKA_BATCH


def test_encode_reproduces_kafka_python_golden_bytes():
    ours = B.encode_batch([(b"key", b"value", T0, [("h1", b"v1")]), (None, b"", T0 + 5)],
                          producer_id=1000, producer_epoch=3, base_sequence=7,
                          partition_leader_epoch=0)
    assert ours == KAFKA_PYTHON_BATCH


def test_decode_aiokafka_golden_batch():
    header, records = B.decode_batch(AIOKAFKA_BATCH)
    assert header.partition_leader_epoch == -1 and header.producer_id == -1
    assert [(r.key, r.value, r.timestamp) for r in records] == [(b"k", b"v" * 10, T0)]
    assert B.encode_batch([(b"k", b"v" * 10, T0)]) == AIOKAFKA_BATCH


def test_crc_mismatch_is_corrupt():
    bad = bytearray(KAFKA_PYTHON_BATCH)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        B.decode_batch(bytes(bad))
    assert not B.is_crc_valid(bad)


def test_in_place_rewrites_keep_crc_valid():
    buf = bytearray(KAFKA_PYTHON_BATCH)
    B.write_base_offset(buf, 0, 42)
    B.write_partition_leader_epoch(buf, 0, 9)
    header = B.ensure_valid(buf)
    assert header.base_offset == 42 and header.partition_leader_epoch == 9
    B.write_log_append_time(buf, 0, T0 + 1000)
    header, records = B.decode_batch(bytes(buf))
    assert header.timestamp_type == B.LOG_APPEND_TIME
    assert [r.timestamp for r in records] == [T0 + 1000, T0 + 1000]
    assert [r.offset for r in records] == [42, 43]


def test_header_walker_stops_at_partial_batch():
    a = B.encode_batch([(b"a", b"1", T0)], base_offset=0)
    b = B.encode_batch([(b"b", b"2", T0)], base_offset=1)
    buf = a + b + b[:40]
    seen = [(pos, h.base_offset) for pos, h in B.iter_batch_headers(buf)]
    assert seen == [(0, 0), (len(a), 1)]
    buf = a + b + b[:B.RECORD_BATCH_OVERHEAD + 3]
    assert len(list(B.iter_batch_headers(buf))) == 2


def test_header_walker_rejects_impossible_length():
    bad = bytearray(B.encode_batch([(b"a", b"1", T0)]))
    struct.pack_into(">i", bad, 8, 10)
    with pytest.raises(CorruptRecordError):
        list(B.iter_batch_headers(bad))


def test_record_count_beyond_payload_is_rejected_before_allocation():
    raw = bytearray(B.encode_batch([(b"a", b"1", T0)]))
    struct.pack_into(">i", raw, 57, 2 ** 31 - 1)
    with pytest.raises(CorruptRecordError):
        B.decode_batch(raw, verify_crc=False)


@pytest.mark.parametrize("kind", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_control_batches(kind):
    raw = encode_end_txn_marker_batch(kind, producer_id=77, producer_epoch=2,
                                      coordinator_epoch=5, timestamp=T0, base_offset=10)
    header, records = B.decode_batch(raw)
    assert header.is_control and header.is_transactional and header.producer_id == 77
    assert len(records) == 1
    marker = parse_end_txn_marker(records[0].key, records[0].value)
    assert marker.type == kind and marker.coordinator_epoch == 5
    # kafka-python recognises the control batch and its type
    from kafka.record.default_records import DefaultRecordBatch
    kb = DefaultRecordBatch(raw)
    assert kb.is_control_batch and kb.is_transactional
    assert kb.validate_crc()


def test_is_abort_marker():
    def at_7(kind):  # a marker 7 bytes into the buffer
        return b"\x00" * 7 + encode_end_txn_marker_batch(kind, producer_id=77, producer_epoch=2,
                                                         coordinator_epoch=5, timestamp=T0)

    abort, commit = at_7(ControlRecordType.ABORT), at_7(ControlRecordType.COMMIT)
    assert is_abort_marker(abort, 7)
    assert is_abort_marker(abort, 7, B.read_header(abort, 7))
    assert not is_abort_marker(commit, 7)
    data = B.encode_batch([(b"k", b"v", T0)], producer_id=77, is_transactional=True)
    assert not is_abort_marker(data)
    with pytest.raises(DecodeError):
        is_abort_marker(abort[:-3], 7)


def test_header_field_positions_and_entry_prefix():
    raw = B.encode_batch([(b"k", b"v", T0), (None, b"w", T0 + 5)], base_offset=42, producer_id=9,
                         producer_epoch=3, base_sequence=11, partition_leader_epoch=4)
    header = B.read_header(raw)
    fields = B.HEADER.unpack_from(raw, 0)
    names = {"H_" + name.upper(): getattr(header, name) for name in B.BatchHeader._fields}
    assert {n: fields[getattr(B, n)] for n in names} == names
    assert B.LOG_ENTRY_PREFIX.unpack_from(raw, 0) == (42, len(raw) - B.LOG_OVERHEAD)


def _sample_records():
    return [
        (b"key-0", b"value-0", T0, [("a", b"1"), ("b", None)]),
        (None, b"no key", T0 + 1, []),
        (b"no value", None, T0 + 2, []),
        (b"", b"", T0 - 5, [("\u00e9t\u00e9", b"\x00\xff")]),
        (b"k" * 300, b"v" * 5000, T0 + 100, []),
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_ours_read_by_kafka_python(codec):
    from kafka.record.default_records import DefaultRecordBatch
    raw = B.encode_batch(_sample_records(), base_offset=100, compression=codec)
    kb = DefaultRecordBatch(raw)
    assert kb.validate_crc() and kb.compression_type == codec
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in kb]
    want = [(100 + i, ts, k, v, [tuple(h) for h in hs]) for i, (k, v, ts, hs) in enumerate(_sample_records())]
    assert got == want


@pytest.mark.parametrize("codec", CODECS)
def test_ours_read_by_aiokafka(codec):
    from aiokafka.record.default_records import DefaultRecordBatch
    raw = B.encode_batch(_sample_records(), base_offset=100, compression=codec)
    ab = DefaultRecordBatch(bytearray(raw))
    assert ab.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in ab]
    want = [(100 + i, ts, k, v, [tuple(h) for h in hs]) for i, (k, v, ts, hs) in enumerate(_sample_records())]
    assert got == want


def _builders():
    from aiokafka.record.default_records import DefaultRecordBatchBuilder as AK
    from kafka.record.default_records import DefaultRecordBatchBuilder as KP
    return [("kafka-python", KP), ("aiokafka", AK)]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("name,builder_cls", _builders())
def test_theirs_read_by_ours(codec, name, builder_cls):
    bb = builder_cls(magic=2, compression_type=int(codec), is_transactional=0,
                     producer_id=5, producer_epoch=1, base_sequence=0, batch_size=1 << 20)
    for i, (k, v, ts, hs) in enumerate(_sample_records()):
        bb.append(i, timestamp=ts, key=k, value=v, headers=hs)
    raw = bytes(bb.build())
    header, records = B.decode_batch(raw)
    assert header.compression == codec and header.producer_id == 5
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]
    want = [(i, ts, k, v, list(hs)) for i, (k, v, ts, hs) in enumerate(_sample_records())]
    assert got == want


header_key = st.text(max_size=8)
blob = st.one_of(st.none(), st.binary(max_size=64))
record_st = st.tuples(blob, blob, st.integers(0, 2 ** 42),
                      st.lists(st.tuples(header_key, blob), max_size=3))


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record_st, min_size=1, max_size=20), st.sampled_from(CODECS),
       st.integers(0, 2 ** 40))
def test_round_trip(records, codec, base_offset):
    raw = B.encode_batch(records, base_offset=base_offset, compression=codec)
    header, decoded = B.decode_batch(raw)
    assert header.records_count == len(records)
    assert header.max_timestamp == max(r[2] for r in records)
    assert [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in decoded] == [
        (base_offset + i, k, v, ts, list(hs)) for i, (k, v, ts, hs) in enumerate(records)]


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_fuzz_random_bytes_only_decode_errors(data):
    try:
        B.decode_batch(data)
    except DecodeError:
        pass
    try:
        list(B.iter_batches(data, verify_crc=False))
    except DecodeError:
        pass


@settings(max_examples=300)
@given(st.data())
def test_fuzz_mutated_batches_only_decode_errors(data):
    raw = bytearray(B.encode_batch(_sample_records(), compression=data.draw(st.sampled_from(CODECS))))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    try:
        B.decode_batch(bytes(raw[:cut]), verify_crc=False)
    except DecodeError:
        pass


def test_truncated_batch_is_typed():
    with pytest.raises(TruncatedError):
        B.decode_batch(KAFKA_PYTHON_BATCH[:70])
