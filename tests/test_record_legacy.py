"""Tests of broker.record.legacy: magic 0/1 message sets, wrappers, interop with kafka-python."""

from __future__ import annotations

import os
import struct
import types
import zlib

import cramjam
import kafka.codec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from broker.record import legacy
from broker.record.codecs import CompressionType, compress
from broker.record.errors import (
    CorruptRecordError,
    DecodeError,
    EncodeError,
    InvalidRecordError,
    RecordTooLargeError,
    TruncatedError,
    UnsupportedCodecError,
    UnsupportedMagicError,
)
from broker.record.legacy import (
    LegacyRecord,
    encode_legacy_message,
    encode_legacy_message_set,
    iter_legacy_records,
)

LEGACY_CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY,
                 CompressionType.LZ4]
RECORDS = [
    (b"key-0", b"value-0", 1_700_000_000_000),
    (None, b"value with a null key", 1_700_000_000_005),
    (b"key with a null value", None, 1_700_000_000_003),
    (None, None, 1_700_000_000_009),
    (b"", b"", 1_700_000_000_010),
    (b"big", os.urandom(70_000), 1_700_000_000_011),
]


def read(buf, **kwargs):
    return list(iter_legacy_records(buf, **kwargs))


def kv(records):
    return [(r.key, r.value) for r in records]


def entry(offset: int, message_body: bytes, crc: int | None = None) -> bytes:
    """A set entry around ``message_body`` (magic onwards), with its CRC unless given."""
    crc = zlib.crc32(message_body) if crc is None else crc
    return struct.pack(">qiI", offset, 4 + len(message_body), crc) + message_body


# --- round trips -------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name)
def test_round_trip(magic, codec):
    buf = encode_legacy_message_set(RECORDS, magic, codec=codec, base_offset=1000)
    records = read(buf)
    assert kv(records) == [(k, v) for k, v, _ in RECORDS]
    assert [r.offset for r in records] == list(range(1000, 1000 + len(RECORDS)))
    assert all(r.magic == magic and r.attributes == 0 for r in records)
    if magic == 0:
        assert {(r.timestamp, r.timestamp_type) for r in records} == {(-1, -1)}
    else:
        assert [r.timestamp for r in records] == [ts for _, _, ts in RECORDS]
        assert {r.timestamp_type for r in records} == {legacy.CREATE_TIME}


def test_uncompressed_record_fields():
    buf = encode_legacy_message(42, b"k", b"v", 1, timestamp=77,
                                timestamp_type=legacy.LOG_APPEND_TIME)
    (record,) = read(buf)
    body = buf[16:]
    assert record == LegacyRecord(offset=42, timestamp=77, timestamp_type=1, key=b"k",
                                  value=b"v", magic=1, crc=zlib.crc32(body), attributes=0x08)


def test_wire_layout_of_a_magic_1_message():
    buf = encode_legacy_message(7, b"ab", None, 1, timestamp=9)
    body = struct.pack(">bbqi2si", 1, 0, 9, 2, b"ab", -1)
    assert buf == struct.pack(">qiI", 7, 4 + len(body), zlib.crc32(body)) + body


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_accepts_any_bytes_like(kind):
    buf = encode_legacy_message_set(RECORDS[:3], 1, codec=CompressionType.GZIP)
    assert kv(read(kind(buf))) == [(k, v) for k, v, _ in RECORDS[:3]]


def test_empty_buffer_has_no_records():
    assert read(b"") == []


# --- wrappers: offsets and timestamps ----------------------------------------------------


def test_magic_1_inner_offsets_are_relative_to_the_wrapper():
    buf = encode_legacy_message_set(RECORDS[:4], 1, codec=CompressionType.GZIP, base_offset=500)
    assert struct.unpack_from(">q", buf)[0] == 503  # the wrapper carries the last offset
    assert [r.offset for r in read(buf)] == [500, 501, 502, 503]


def test_magic_1_wrapper_offset_zero_leaves_relative_offsets():
    buf = encode_legacy_message_set(RECORDS[:3], 1, codec=CompressionType.GZIP,
                                    base_offset=10, wrapper_offset=0)
    assert [r.offset for r in read(buf)] == [0, 1, 2]


def test_magic_1_wrapper_offset_below_last_inner_offset():
    buf = encode_legacy_message_set(RECORDS[:3], 1, codec=CompressionType.GZIP, wrapper_offset=1)
    with pytest.raises(InvalidRecordError):
        read(buf)


def test_magic_0_inner_offsets_are_absolute():
    buf = encode_legacy_message_set(RECORDS[:3], 0, codec=CompressionType.SNAPPY,
                                    base_offset=70, wrapper_offset=999)
    assert [r.offset for r in read(buf)] == [70, 71, 72]


def test_log_append_time_wrapper_gives_its_timestamp_to_inner_records():
    buf = encode_legacy_message_set(RECORDS[:3], 1, codec=CompressionType.LZ4,
                                    timestamp_type=legacy.LOG_APPEND_TIME,
                                    wrapper_timestamp=123)
    records = read(buf)
    assert [(r.timestamp, r.timestamp_type) for r in records] == [(123, 1)] * 3


def test_create_time_wrapper_keeps_inner_timestamps():
    buf = encode_legacy_message_set(RECORDS[:3], 1, codec=CompressionType.LZ4,
                                    wrapper_timestamp=123)
    assert [r.timestamp for r in read(buf)] == [ts for _, _, ts in RECORDS[:3]]


def test_several_wrappers_and_plain_messages_in_one_set():
    buf = (encode_legacy_message_set(RECORDS[:2], 1, codec=CompressionType.GZIP, base_offset=0)
           + encode_legacy_message(2, b"plain", b"p", 1, timestamp=5)
           + encode_legacy_message_set(RECORDS[2:4], 1, codec=CompressionType.SNAPPY,
                                       base_offset=3))
    assert [r.offset for r in read(buf)] == [0, 1, 2, 3, 4]


# --- corruption --------------------------------------------------------------------------


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("position", [12, 15, 16, 30, -1])
def test_crc_flip(codec, position):
    buf = bytearray(encode_legacy_message_set(RECORDS[:3], 1, codec=codec))
    buf[position] ^= 0x01
    with pytest.raises(CorruptRecordError):
        read(bytes(buf))


def test_inner_crc_is_checked():
    inner = bytearray(encode_legacy_message_set(RECORDS[:2], 1))
    inner[-1] ^= 0xFF
    buf = encode_legacy_message(1, None, compress(CompressionType.GZIP, bytes(inner)), 1,
                                codec=CompressionType.GZIP)
    with pytest.raises(CorruptRecordError):
        read(buf)


def test_truncated_trailing_entry_stops_silently():
    buf = encode_legacy_message_set(RECORDS, 1)
    full = read(buf)
    ends = [0]
    for _ in full:
        ends.append(ends[-1] + 12 + struct.unpack_from(">i", buf, ends[-1] + 8)[0])
    for cut in range(len(buf) + 1):
        complete = sum(1 for end in ends[1:] if end <= cut)
        assert read(buf[:cut]) == full[:complete], cut


def test_truncated_wrapper_stops_silently():
    buf = encode_legacy_message_set(RECORDS, 0, codec=CompressionType.GZIP)
    assert read(buf[:-1]) == []


def test_truncated_inner_message_set_is_an_error():
    inner = encode_legacy_message_set(RECORDS[:2], 1)
    for cut in (len(inner) - 1, len(inner) - 20, 5):
        buf = encode_legacy_message(1, None, compress(CompressionType.GZIP, inner[:cut]), 1,
                                    codec=CompressionType.GZIP)
        with pytest.raises(TruncatedError):
            read(buf)


def test_nested_wrapper_is_corrupt():
    inner = encode_legacy_message_set(RECORDS[:2], 1, codec=CompressionType.GZIP)
    buf = encode_legacy_message(0, None, compress(CompressionType.GZIP, inner), 1,
                                codec=CompressionType.GZIP)
    with pytest.raises(CorruptRecordError, match="nested"):
        read(buf)


def test_zstd_wrapper_needs_magic_2():
    inner = encode_legacy_message_set(RECORDS[:2], 1)
    buf = encode_legacy_message(1, None, compress(CompressionType.ZSTD, inner), 1,
                                codec=CompressionType.ZSTD)
    with pytest.raises(UnsupportedCodecError):
        read(buf)
    with pytest.raises(EncodeError):
        encode_legacy_message_set(RECORDS[:2], 1, codec=CompressionType.ZSTD)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_wrapper_codec(codec):
    with pytest.raises(UnsupportedCodecError):
        read(encode_legacy_message(0, None, b"whatever", 1, codec=codec))


def test_wrapper_with_null_value_is_corrupt():
    with pytest.raises(CorruptRecordError):
        read(encode_legacy_message(0, None, None, 0, codec=CompressionType.GZIP))


def test_wrapper_without_inner_messages_is_invalid():
    buf = encode_legacy_message(0, None, compress(CompressionType.GZIP, b""), 1,
                                codec=CompressionType.GZIP)
    with pytest.raises(InvalidRecordError):
        read(buf)


def test_wrapper_inflating_past_the_budget():
    buf = encode_legacy_message_set([(None, bytes(2 << 20))], 1, codec=CompressionType.GZIP)
    assert len(buf) < 10_000
    with pytest.raises(RecordTooLargeError):
        read(buf, max_bytes=1 << 20)
    assert len(read(buf, max_bytes=3 << 20)[0].value) == 2 << 20


def test_magic_2_entry_is_not_legacy():
    with pytest.raises(UnsupportedMagicError):
        read(entry(0, bytes([2, 0]) + bytes(60)))


def test_message_size_below_minimum():
    with pytest.raises(CorruptRecordError):
        read(struct.pack(">qi", 0, 13) + bytes(13))


def test_magic_1_message_shorter_than_its_header():
    with pytest.raises(CorruptRecordError):
        read(entry(0, struct.pack(">bbii", 1, 0, -1, -1) + bytes(2)))  # 16 < 22 bytes


@pytest.mark.parametrize("body, error", [
    (struct.pack(">bbi", 0, 0, -2) + struct.pack(">i", -1), InvalidRecordError),
    (struct.pack(">bbii", 0, 0, -1, -5), InvalidRecordError),
    (struct.pack(">bbi", 0, 0, 100) + struct.pack(">i", -1), TruncatedError),
    (struct.pack(">bbii", 0, 0, -1, 4) + b"abc", TruncatedError),
    (struct.pack(">bbi", 0, 0, 4) + b"abcdefg", TruncatedError),  # no room for value length
    (struct.pack(">bbii", 0, 0, -1, -1) + b"extra", CorruptRecordError),
])
def test_bad_lengths_inside_a_message(body, error):
    with pytest.raises(error):
        read(entry(0, body))


# --- the LZ4 header checksum of Kafka 0.8/0.9 at magic 0 ----------------------------------


def _xxhash_shim():
    """What kafka.codec wants from the xxhash package, from legacy's own xxh32."""
    class _Digest:
        def __init__(self, data):
            self._value = legacy._xxh32_short(bytes(data))

        def digest(self):
            return self._value.to_bytes(4, "big")

    return types.SimpleNamespace(xxh32=_Digest)


def test_xxh32_matches_lz4_frame_header_checksums():
    import lz4.frame
    for kwargs in ({}, {"store_size": False}, {"block_size": lz4.frame.BLOCKSIZE_MAX4MB},
                   {"content_checksum": True, "block_linked": False}):
        frame = lz4.frame.compress(b"payload" * 10, **kwargs)
        end = 6 + (8 if frame[4] & 0x08 else 0)
        assert frame[end] == legacy._xxh32_short(frame[4:end]) >> 8 & 0xFF
    assert legacy._xxh32_short(b"") == 0x02CC5D05  # the published XXH32("") with seed 0


def test_magic_0_lz4_with_the_old_broken_header_checksum(kafka_codecs):
    inner = encode_legacy_message_set(RECORDS[:3], 0, base_offset=5)
    payload = kafka_codecs.lz4_encode_old_kafka(inner)
    buf = encode_legacy_message(7, None, payload, 0, codec=CompressionType.LZ4)
    assert kv(read(buf)) == [(k, v) for k, v, _ in RECORDS[:3]]


# --- interop with kafka-python's legacy record builder and reader ------------------------


@pytest.fixture
def kafka_codecs(monkeypatch):
    """kafka.codec with cramjam / legacy.xxh32 standing in for python-snappy / xxhash when
    those optional packages are missing."""
    if kafka.codec.snappy is None:
        monkeypatch.setattr(kafka.codec, "snappy", types.SimpleNamespace(
            compress=lambda b: bytes(cramjam.snappy.compress_raw(bytes(b))),
            decompress=lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b)))))
    if kafka.codec.xxhash is None:
        monkeypatch.setattr(kafka.codec, "xxhash", _xxhash_shim())
    return kafka.codec


def kafka_python_build(magic, codec, records, first_offset=0):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec),
                                       batch_size=1 << 30)
    for i, (key, value, ts) in enumerate(records):
        assert builder.append(first_offset + i, timestamp=ts, key=key, value=value) is not None
    return bytes(builder.build())


def kafka_python_read(buf):
    records = MemoryRecords(buf)
    out = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        for record in batch:
            assert record.validate_crc()
            out.append(record)
    return out


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name)
def test_kafka_python_output_is_read_field_for_field(kafka_codecs, magic, codec):
    buf = kafka_python_build(magic, codec, RECORDS)
    theirs = kafka_python_read(buf)
    ours = read(buf)
    assert len(ours) == len(theirs) == len(RECORDS)
    for mine, their in zip(ours, theirs):
        assert mine.offset == their.offset
        assert mine.key == their.key and mine.value == their.value
        assert mine.crc == their.checksum
        assert mine.magic == their.magic == magic
        if magic == 0:  # kafka-python says None where Kafka says -1
            assert (mine.timestamp, mine.timestamp_type) == (-1, -1)
            assert their.timestamp_type is None
        else:
            assert mine.timestamp == their.timestamp
            assert mine.timestamp_type == their.timestamp_type == 0


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name)
def test_our_output_is_read_by_kafka_python(kafka_codecs, magic, codec):
    ts_type = legacy.LOG_APPEND_TIME if magic == 1 and codec else legacy.CREATE_TIME
    buf = encode_legacy_message_set(RECORDS, magic, codec=codec, base_offset=300,
                                    timestamp_type=ts_type, wrapper_timestamp=4242)
    theirs = kafka_python_read(buf)
    ours = read(buf)
    assert [(r.offset, r.key, r.value, r.crc) for r in ours] == \
           [(r.offset, r.key, r.value, r.checksum) for r in theirs]
    if magic == 1:
        assert [(r.timestamp, r.timestamp_type) for r in ours] == \
               [(r.timestamp, r.timestamp_type) for r in theirs]


# --- fuzz --------------------------------------------------------------------------------

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
optional_bytes = st.none() | st.binary(max_size=64)
record_lists = st.lists(
    st.tuples(optional_bytes, optional_bytes, st.integers(0, 2**62)), min_size=1, max_size=8)


def consume(buf):
    try:
        for record in iter_legacy_records(buf, max_bytes=1 << 20):
            assert isinstance(record, LegacyRecord)
    except DecodeError:
        pass


@FUZZ
@given(st.binary(max_size=512))
def test_fuzz_arbitrary_bytes_raise_only_decode_errors(data):
    consume(data)


@FUZZ
@given(st.binary(max_size=256), st.integers(0, 1), st.integers(0, 7), st.integers())
def test_fuzz_valid_crc_arbitrary_body(body, magic, attributes, offset):
    # a correct CRC over random bytes reaches the length checks and the wrappers
    consume(entry(offset % 2**63, bytes([magic, attributes]) + body))


@FUZZ
@given(records=record_lists, magic=st.integers(0, 1), codec=st.sampled_from(LEGACY_CODECS),
       base=st.integers(0, 2**40))
def test_fuzz_round_trip(records, magic, codec, base):
    buf = encode_legacy_message_set(records, magic, codec=codec, base_offset=base)
    out = read(buf)
    assert kv(out) == [(k, v) for k, v, _ in records]
    assert [r.offset for r in out] == list(range(base, base + len(records)))


@FUZZ
@given(records=record_lists, magic=st.integers(0, 1), codec=st.sampled_from(LEGACY_CODECS),
       position=st.integers(min_value=0), byte=st.integers(0, 255), cut=st.integers(0))
def test_fuzz_mutated_sets_raise_only_decode_errors(records, magic, codec, position, byte, cut):
    buf = bytearray(encode_legacy_message_set(records, magic, codec=codec))
    buf[position % len(buf)] = byte
    consume(bytes(buf[:len(buf) - cut % 16]))
