"""Tests of broker/record/validation.py, the record walker every produce runs (issue 13;
RELIABILITY.md F5, F6, F10).

Properties (Hypothesis): every batch this project's encoder, kafka-python's and aiokafka's
builders produce is accepted, with every codec; every single-byte change of an uncompressed
batch's records (CRC recomputed) is either refused or accepted only when this project's
decoder and kafka-python's both parse it into the same well-formed records. Plus the
streaming paths: long records walked with their values skipped, budgets, chunk boundaries.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log.validator import (
    AppendOrigin,
    ValidatorConfig,
    analyze_and_validate_records,
)
from broker.record import batch as rb
from broker.record import validation as rv
from broker.record.errors import (
    CorruptRecordError,
    DecodeError,
    InvalidRecordError,
    RecordTooLargeError,
)

NOW = 1_700_000_000_000
CODECS = [0, 1, 2, 3, 4]
BUDGET = 64 << 20

header_key = st.text(max_size=8)
blob = st.one_of(st.none(), st.binary(max_size=64))
record_st = st.tuples(blob, blob, st.integers(NOW - 10**6, NOW + 10**6),
                      st.lists(st.tuples(header_key, blob), max_size=3))


def check(raw: bytes, budget: int = BUDGET):
    h = rb.read_header(raw)
    return rv.check_records(raw, rb.RECORDS_OFFSET, len(raw), h.compression, h.records_count, budget)


def accepted(raw: bytes) -> bool:
    try:
        analyze_and_validate_records(raw, ValidatorConfig(timestamp_after_max_ms=1 << 62), now_ms=NOW)
        return True
    except Exception:  # noqa: BLE001 - any log error is a refusal here
        return False


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record_st, min_size=1, max_size=30), st.sampled_from(CODECS))
def test_every_batch_of_our_encoder_is_accepted(records, codec):
    raw = rb.encode_batch(records, compression=codec)
    lo, hi, hi_index, nulls = check(raw)
    deltas = [ts - records[0][2] for _, _, ts, _ in records]
    assert (lo, hi, hi_index) == (min(deltas), max(deltas), deltas.index(max(deltas)))
    assert nulls == sum(k is None for k, _, _, _ in records)
    assert accepted(raw)


def _builders():
    from aiokafka.record.default_records import DefaultRecordBatchBuilder as AK
    from kafka.record.default_records import DefaultRecordBatchBuilder as KP
    return [KP, AK]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record_st, min_size=1, max_size=20), st.sampled_from(CODECS), st.sampled_from([0, 1]))
def test_every_batch_of_kafka_python_and_aiokafka_is_accepted(records, codec, which):
    builder = _builders()[which](magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                                 producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, (k, v, ts, hs) in enumerate(records):
        builder.append(i, timestamp=ts, key=k, value=v, headers=[(hk, hv) for hk, hv in hs])
    raw = bytes(builder.build())
    check(raw)
    assert accepted(raw)


def _kafka_python_records(raw: bytes):
    from kafka.record.default_records import DefaultRecordBatch
    batch = DefaultRecordBatch(bytearray(raw))
    return [(r.offset, r.timestamp, r.key and bytes(r.key), r.value and bytes(r.value),
             [(k, v and bytes(v)) for k, v in r.headers]) for r in batch]


def _with_crc(raw: bytearray) -> bytes:
    struct.pack_into(">I", raw, rb.CRC_OFFSET, rb.compute_crc(raw, 0, len(raw)))
    return bytes(raw)


SAMPLE = [(b"key-0", b"value", NOW, [("h", b"x")]), (None, b"v" * 200, NOW + 1, []),
          (b"k2", None, NOW - 5, [("h\u00e9", None), ("b", b"")]), (b"", b"", NOW + 3000, [])]


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_every_single_byte_change_is_refused_or_readable_by_everyone(data):
    raw = bytearray(rb.encode_batch(SAMPLE))
    where = data.draw(st.integers(rb.RECORDS_OFFSET, len(raw) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda b: b != raw[where]))
    raw[where] = value
    mutated = _with_crc(raw)
    if not accepted(mutated):
        return
    header, ours = rb.decode_batch(mutated)
    theirs = _kafka_python_records(mutated)
    assert len(ours) == len(theirs) == header.records_count == len(SAMPLE)
    assert [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in ours] == \
        [(o, t, k, v, [tuple(h) for h in hs]) for o, t, k, v, hs in theirs]
    assert [r.offset for r in ours] == list(range(len(SAMPLE)))


@pytest.mark.parametrize("codec", CODECS)
def test_long_records_are_walked_with_their_values_skipped(codec):
    """Records longer than MAX_BUFFERED_RECORD (a value of 3 MiB, a header value of 2 MiB,
    a header key of 1.5 MiB) among small ones, across chunk boundaries."""
    big = rv.MAX_BUFFERED_RECORD * 3
    records = [(b"a", b"x" * 10, NOW, []), (None, b"y" * big, NOW + 7, [("k", b"z" * (2 << 20))]),
               (b"c", b"", NOW - 1, [("\u00e9" * (800 * 1024), None)]), (b"d", b"w" * 300_000, NOW + 2, [])]
    raw = rb.encode_batch(records, compression=codec)
    assert check(raw) == (-1, 7, 1, 1)
    assert rv.record_details(raw, rb.RECORDS_OFFSET, len(raw), codec, 4, BUDGET) == \
        [(0, False), (7, True), (-1, False), (2, False)]


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_budget_refuses_before_inflating_everything(codec):
    raw = rb.encode_batch([(b"k", b"\x00" * (8 << 20), NOW, [])], compression=codec)
    with pytest.raises(RecordTooLargeError):
        check(raw, budget=4 << 20)
    check(raw, budget=9 << 20)


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_a_bad_header_key_in_a_long_record_is_corrupt(codec):
    body = b"\x00\x00\x00" + b"\x02k" + b"\x00" + b"\x02" + rb.encode_varint(1 << 20) + b"\xff" * (1 << 20) + b"\x01"
    # length | attrs, ts delta, offset delta | key "k" | value "" | 1 header | key of 1 MiB
    # (varint 1 MiB zigzag) of 0xff bytes, not UTF-8 | null value
    length = rb.encode_varint(len(body))
    raw = rb.build_batch(length + body, count=1, compression=codec, base_timestamp=NOW, max_timestamp=NOW)
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        check(raw)


def test_gzip_trailing_bytes_and_second_lz4_frame_are_refused():
    import lz4.frame
    raw_records = b"".join(rb.encode_record(i, 0, b"k", b"v") for i in range(2))
    gz = zlib.compressobj(6, zlib.DEFLATED, 31)
    payload = gz.compress(raw_records) + gz.flush()
    two_lz4_frames = lz4.frame.compress(raw_records[:7]) + lz4.frame.compress(raw_records[7:])
    for codec, bad in ((1, payload + b"junk"), (3, two_lz4_frames)):
        with pytest.raises(DecodeError):
            rv.check_records(bad, 0, len(bad), codec, 2, BUDGET)
    # two gzip members are one stream, as for GZIPInputStream
    half = len(raw_records) // 2
    two = b"".join(zlib.compress(part, wbits=31) for part in (raw_records[:half], raw_records[half:]))
    assert rv.check_records(two, 0, len(two), 1, 2, BUDGET)[3] == 0


def test_offset_delta_error_names_the_record():
    raw = rb.encode_record(0, 0, b"k", b"v") + rb.encode_record(3, 0, b"k", b"v")
    with pytest.raises(InvalidRecordError) as info:
        rv.check_records(raw, 0, len(raw), 0, 2, BUDGET)
    assert info.value.batch_index == 1


def test_replication_appends_do_not_walk_records():
    """A follower or recovery append was validated by a leader: only the header is checked."""
    raw = bytearray(rb.build_batch(b"\x00" * 40, count=1, base_timestamp=NOW, max_timestamp=NOW))
    analyze_and_validate_records(raw, now_ms=NOW, origin=AppendOrigin.REPLICATION)
    with pytest.raises(Exception, match="record"):
        analyze_and_validate_records(raw, now_ms=NOW)


def _plain(raw: bytes, count: int):
    try:
        return rv.check_records(raw, rb.RECORDS_OFFSET, len(raw), 0, count, BUDGET, sink=[])  # sink: plain walk
    except DecodeError:
        return None


MANY = [(b"k%d" % i if i % 5 else None, b"v" * (i % 300), NOW + (i * 37) % 1000 - 500,
         [("h", b"x")] * (i % 3 == 0) + [("\u00e9", None)] * (i % 11 == 0)) for i in range(200)]


def test_vectorised_walk_agrees_with_the_plain_walk():
    raw = rb.encode_batch(MANY)
    assert rv._walk_vectorised(raw, rb.RECORDS_OFFSET, len(raw), len(MANY)) == _plain(raw, len(MANY))
    assert check(raw) == _plain(raw, len(MANY))


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_vectorised_walk_accepts_only_what_the_plain_walk_accepts(data):
    """A single-byte change anywhere in the records of a 200-record batch: the numpy walk
    returns the plain walk's summary, or None (the plain walk then reports the error)."""
    raw = bytearray(rb.encode_batch(MANY))
    where = data.draw(st.integers(rb.RECORDS_OFFSET, len(raw) - 1))
    raw[where] = data.draw(st.integers(0, 255).filter(lambda b: b != raw[where]))
    raw = bytes(raw)
    vector = rv._walk_vectorised(raw, rb.RECORDS_OFFSET, len(raw), len(MANY))
    plain = _plain(raw, len(MANY))
    if vector is not None:
        assert vector == plain
    # and check_records (which takes the numpy path here) agrees with the plain walk
    try:
        assert check(raw) == plain
    except DecodeError:
        assert plain is None


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1000])
@pytest.mark.parametrize("codec", [1, 3, 4])
def test_records_cut_anywhere_by_chunk_boundaries(monkeypatch, codec, chunk):
    """Decompressed chunks of a few bytes cut records (and their length varints) at every
    place: the walk gives what the plain walk of the uncompressed records gives."""
    monkeypatch.setattr(rv, "_CHUNK", chunk)
    plain = _plain(rb.encode_batch(MANY), len(MANY))
    assert check(rb.encode_batch(MANY, compression=codec)) == plain
    details = rv.record_details(raw := rb.encode_batch(MANY, compression=codec), rb.RECORDS_OFFSET, len(raw),
                                codec, len(MANY), BUDGET)
    assert [null for _, null in details] == [k is None for k, _, _, _ in MANY]


@pytest.mark.parametrize("chunk", [3, 64, 4096])
@pytest.mark.parametrize("codec", [1, 4])
def test_every_record_walked_from_the_stream(monkeypatch, codec, chunk):
    """MAX_BUFFERED_RECORD lowered so that every record takes the skipping walk."""
    monkeypatch.setattr(rv, "_CHUNK", chunk)
    monkeypatch.setattr(rv, "MAX_BUFFERED_RECORD", 8)
    assert check(rb.encode_batch(MANY, compression=codec)) == _plain(rb.encode_batch(MANY), len(MANY))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record_st, min_size=1, max_size=30), st.sampled_from(CODECS))
def test_every_batch_of_the_client_producer_and_the_columnar_encoder_is_accepted(records, codec):
    """The two other encoders of this project: the client producer's ``encode_one`` (framed
    as its accumulator does, with ``build_batch``) and the Spark sink's ``encode_from_arrow``."""
    import pyarrow as pa

    from broker.client.producer.batch import encode_one
    from broker.record.columnar.encode import encode_from_arrow

    base = records[0][2]
    raw = b"".join(encode_one(i, ts - base, k, v, hs) for i, (k, v, ts, hs) in enumerate(records))
    framed = rb.build_batch(raw, count=len(records), base_timestamp=base,
                            max_timestamp=max(r[2] for r in records), compression=codec)
    check(framed)
    assert accepted(framed)
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    batches = encode_from_arrow(
        pa.array([v for _, v, _, _ in records], pa.binary()), pa.array([k for k, _, _, _ in records], pa.binary()),
        pa.array([ts for _, _, ts, _ in records], pa.int64()),
        pa.array([[{"key": hk, "value": hv} for hk, hv in hs] for _, _, _, hs in records], header_type),
        compression=codec, max_batch_bytes=1024)
    assert sum(b.record_count for b in batches) == len(records)
    for b in batches:
        check(b.data)
        data = bytearray(b.data)
        struct.pack_into(">q", data, 0, 0)  # a producer's batch starts at offset 0 (outside the CRC)
        assert accepted(bytes(data))
