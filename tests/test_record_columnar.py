"""Tests of broker/record/columnar/: the Arrow decoder against batch.py's, legacy.py's,
kafka-python's and aiokafka's readers; the Arrow encoder read back by all of them;
budgets, trimming, transactions; Hypothesis round trips and fuzzing (differential against
batch.py's scalar decoder when only record bytes are damaged)."""

from __future__ import annotations

import random
import struct
import tracemalloc

import pyarrow as pa
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from broker.record import batch as B
from broker.record import columnar as C
from broker.record.codecs import CompressionType
from broker.record.control import ControlRecordType, encode_end_txn_marker_batch
from broker.record.errors import CorruptRecordError, DecodeError, EncodeError
from broker.record.legacy import encode_legacy_message_set, iter_legacy_records

T0 = 1_700_000_000_000
CODECS = list(CompressionType)
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --- helpers ----------------------------------------------------------------------------

def rows(rb: pa.RecordBatch) -> list[tuple]:
    """(offset, timestamp, timestamp_type, key, value, headers or None) per row."""
    d = rb.to_pydict()
    hs = d.get("headers", [None] * rb.num_rows)
    return [(o, t, tt, k, v, None if h is None else [(x["key"], x["value"]) for x in h])
            for o, t, tt, k, v, h in zip(d["offset"], d["timestamp"], d["timestamp_type"],
                                         d["key"], d["value"], hs)]


def reference(buf, start=None, end=None, *, skip_control=True, aborted=()) -> list[tuple]:
    """The same rows from batch.py's scalar decoder (and legacy.py for magic 0/1)."""
    out, pos = [], 0
    while len(buf) - pos > B.MAGIC_OFFSET:
        base, size, magic = B.peek_entry(buf, pos, len(buf))
        if size > len(buf) - pos:
            break
        if magic < 2:
            for r in iter_legacy_records(memoryview(buf)[pos:pos + size]):
                out.append((r.offset, r.timestamp, r.timestamp_type, r.key, r.value, None))
        else:
            h, recs = B.decode_batch(buf, pos)
            dead = skip_control and h.is_control or h.is_transactional and any(
                pid == h.producer_id and a <= h.base_offset <= b for pid, a, b in aborted)
            if not dead:
                out += [(r.offset, r.timestamp, h.timestamp_type, r.key, r.value,
                         list(r.headers) or None) for r in recs]
        pos += size
    lo = -(1 << 63) if start is None else start
    hi = 1 << 63 if end is None else end
    return [r for r in out if lo <= r[0] < hi]


def client_rows(mr_cls, buf) -> list[tuple]:
    out, mr = [], mr_cls(buf)
    while mr.has_next():
        b = mr.next_batch()
        if b is None:
            break
        assert b.validate_crc()
        for r in b:
            out.append((r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                        list(r.headers) or None))
    return out


def sample_records(n: int, seed: int = 0) -> list[tuple]:
    """(key, value, timestamp, headers): nulls, empties, unicode keys, several headers."""
    rnd = random.Random(seed)
    recs = []
    for i in range(n):
        key = [None, b"", b"k%d" % i, rnd.randbytes(rnd.randrange(30))][i % 4]
        value = [b"v" * rnd.randrange(300), None, b"", rnd.randbytes(rnd.randrange(2000))][i % 4]
        headers = []
        if i % 3 == 0:
            headers = [("h", b"1"), ("ключ-é", None), ("", b""), ("x" * 20, rnd.randbytes(40))]
            headers = headers[:1 + i % 4]
        recs.append((key, value, T0 + rnd.randrange(-5000, 5000), headers))
    return recs


def v2_log(n_batches=8, per_batch=30, codec=0, seed=0, base=0) -> bytes:
    parts, offset = [], base
    for b in range(n_batches):
        recs = sample_records(per_batch + b % 5, seed + b)
        parts.append(B.encode_batch(recs, base_offset=offset, compression=codec))
        offset += len(recs)
    return b"".join(parts)


# --- decoder: equality with the references ------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_decode_matches_references(codec):
    buf = v2_log(codec=codec, seed=int(codec))
    got = rows(C.decode_to_arrow(buf))
    assert got == reference(buf)
    assert got == client_rows(KpMemoryRecords, buf) == client_rows(AioMemoryRecords, buf)
    assert len(got) > 200 and any(r[5] for r in got) and any(r[3] is None for r in got)


def test_schema_and_null_headers():
    buf = B.encode_batch([(b"k", b"v", T0), (None, None, T0 + 1, [("a", None)])])
    rb = C.decode_to_arrow(buf)
    assert rb.schema == C.arrow_schema()
    assert rb.column("headers").to_pylist() == [None, [{"key": "a", "value": None}]]
    assert rb.column("key").null_count == 1 and rb.column("value").null_count == 1
    no_headers = C.decode_to_arrow(buf, include_headers=False)
    assert no_headers.schema == C.arrow_schema(False) and "headers" not in no_headers.schema.names


def test_log_append_time_batches():
    b1 = bytearray(B.encode_batch([(b"a", b"1", T0), (b"b", b"2", T0 + 7)], base_offset=5))
    B.write_log_append_time(b1, 0, T0 + 999)
    b2 = B.encode_batch([(b"c", b"3", T0 + 3)], base_offset=7)
    buf = bytes(b1) + b2
    got = rows(C.decode_to_arrow(buf))
    assert [(r[0], r[1], r[2]) for r in got] == [(5, T0 + 999, 1), (6, T0 + 999, 1), (7, T0 + 3, 0)]
    assert got == reference(buf) == client_rows(KpMemoryRecords, buf)


def transactional_log() -> tuple[bytes, list[tuple[int, int, int]]]:
    def txn(pid, offset, recs):
        return B.encode_batch(recs, base_offset=offset, producer_id=pid, producer_epoch=0,
                              base_sequence=0, is_transactional=True)

    def marker(kind, pid, offset):
        return encode_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0,
                                           coordinator_epoch=1, timestamp=T0, base_offset=offset)
    parts = [
        B.encode_batch([(b"plain", b"0", T0)], base_offset=0),
        txn(1, 1, [(b"a1", b"x", T0), (b"a2", b"y", T0)]),    # aborted
        txn(2, 3, [(b"c1", b"z", T0)]),                        # committed
        txn(1, 4, [(b"a3", b"w", T0)]),                        # aborted
        marker(ControlRecordType.ABORT, 1, 5),
        marker(ControlRecordType.COMMIT, 2, 6),
        txn(1, 7, [(b"n1", b"v", T0)]),                        # a later, committed txn
        marker(ControlRecordType.COMMIT, 1, 8),
    ]
    return b"".join(parts), [(1, 1, 5)]


def test_transactions_control_and_aborted():
    buf, aborted = transactional_log()
    keys = [r[3] for r in rows(C.decode_to_arrow(buf, aborted=aborted))]
    assert keys == [b"plain", b"c1", b"n1"]
    assert rows(C.decode_to_arrow(buf, aborted=aborted)) == reference(buf, aborted=aborted)
    everything = rows(C.decode_to_arrow(buf, skip_control=False))
    assert [r[0] for r in everything] == list(range(9))
    assert everything == reference(buf, skip_control=False)
    assert len(rows(C.decode_to_arrow(buf))) == 6  # read_uncommitted: data, no markers


@pytest.mark.parametrize("codec", [0, 4])
def test_offset_trimming(codec):
    buf = v2_log(n_batches=6, per_batch=20, codec=codec, base=100)
    full = reference(buf)
    for start, end in [(100, None), (113, 171), (None, 101), (150, 151), (0, 100), (500, 600)]:
        got = rows(C.decode_to_arrow(buf, start, end))
        assert got == reference(buf, start, end), (start, end)
        assert all((start or 0) <= r[0] < (end or 1 << 62) for r in got)
    assert len(full) == len(rows(C.decode_to_arrow(buf, None, None)))


def test_trailing_partial_batch_and_progress():
    buf = v2_log(n_batches=5, per_batch=10)
    sizes = [h.size_in_bytes for _, h in B.iter_batch_headers(buf)]
    for cut in [len(buf) - 1, len(buf) - sizes[-1] + 61, len(buf) - sizes[-1] + 5, 10, 0]:
        progress = C.DecodeProgress()
        got = [r for rb in C.iter_arrow(buf[:cut], progress=progress) for r in rows(rb)]
        complete = sum(1 for p, h in B.iter_batch_headers(buf) if p + h.size_in_bytes <= cut)
        assert got == reference(buf[:sum(sizes[:complete])])
        assert progress.position == sum(sizes[:complete])
        assert progress.records == len(got)
        if complete:
            assert progress.next_offset == got[-1][0] + 1


@pytest.mark.parametrize("magic,codec", [(0, 0), (1, 0), (0, 1), (1, 1), (1, 2)])
def test_legacy_message_sets_mixed_with_v2(magic, codec):
    legacy = encode_legacy_message_set(
        [(b"k%d" % i if i % 2 else None, b"v" * i, T0 + i) for i in range(12)], magic, codec,
        base_offset=0)
    legacy2 = encode_legacy_message_set([(b"z", None, T0)], magic, 0, base_offset=12)
    v2 = B.encode_batch(sample_records(9), base_offset=13)
    buf = legacy + legacy2 + v2 + legacy2.replace(struct.pack(">q", 12), struct.pack(">q", 22), 1)
    got = rows(C.decode_to_arrow(buf))
    assert got == reference(buf)
    assert [r[0] for r in got] == list(range(23))
    assert {r[2] for r in got[:12]} == ({-1} if magic == 0 else {0})
    assert rows(C.decode_to_arrow(buf, 5, 15)) == reference(buf, 5, 15)


@pytest.mark.parametrize("builder", [AioBuilder, KpBuilder], ids=["aiokafka", "kafka-python"])
@pytest.mark.parametrize("codec", CODECS)
def test_decode_third_party_batches(builder, codec):
    parts, offset = [], 0
    for b in range(4):
        bld = builder(2, int(codec), 0, -1, -1, -1, 1 << 20)
        for i, (k, v, ts, hs) in enumerate(sample_records(25, seed=b)):
            bld.append(i, ts, k, v, hs)
        raw = bytearray(bld.build())
        B.write_base_offset(raw, 0, offset)
        offset += 25
        parts.append(bytes(raw))
    buf = b"".join(parts)
    assert rows(C.decode_to_arrow(buf)) == client_rows(AioMemoryRecords, buf) == reference(buf)


def test_budgets_bound_each_record_batch():
    buf = v2_log(n_batches=40, per_batch=25)
    full = rows(C.decode_to_arrow(buf))
    for max_rows, max_bytes in [(1, 1 << 30), (7, 1 << 30), (1000, 4096), (10_000, 1)]:
        parts = list(C.iter_arrow(buf, max_rows_per_batch=max_rows, max_bytes_per_batch=max_bytes))
        assert all(0 < p.num_rows <= max_rows for p in parts)
        assert [r for p in parts for r in rows(p)] == full
    with pytest.raises(ValueError):
        next(C.iter_arrow(buf, max_rows_per_batch=0))


def test_walks_vectorised_and_scalar_paths():
    """Many batches (vectorised walk), a few long ones (the scalar tail), 3-byte length
    varints (records over 8 KiB), records with many headers (both header paths)."""
    rnd = random.Random(3)
    parts, offset = [], 0
    for b in range(60):
        n = 3 if b < 50 else 80 + b
        recs = []
        for i in range(n):
            big = rnd.random() < 0.05
            value = rnd.randbytes(9000 if big else rnd.randrange(200))
            many = 60 if i == 0 and b >= 50 else 5 if i % 17 == 0 else i % 2
            hs = [(f"h{j}", b"x" * j) for j in range(many)]
            recs.append((b"k", value, T0 + rnd.randrange(1 << 40), hs))
        parts.append(B.encode_batch(recs, base_offset=offset, compression=b % 2 * 3))
        offset += n
    buf = b"".join(parts)
    assert rows(C.decode_to_arrow(buf)) == reference(buf)


def test_walk_uneven_batch_counts():
    """Thirty long batches among hundreds of one-record ones: the vectorised walk keeps
    going on the long ones, in record order."""
    parts, offset = [], 0
    for b in range(330):
        n = 300 if b % 11 == 0 else 1
        recs = [(b"k%d" % i, b"v" * (i % 90), T0 + i, [("h", b"x")] if i % 5 == 0 else [])
                for i in range(n)]
        parts.append(B.encode_batch(recs, base_offset=offset))
        offset += n
    buf = b"".join(parts)
    assert rows(C.decode_to_arrow(buf)) == reference(buf)


def test_empty_and_count_zero_batch():
    assert C.decode_to_arrow(b"").num_rows == 0
    empty = B.build_batch(b"", count=0, last_offset_delta=0)
    buf = empty + B.encode_batch([(b"a", b"b", T0)], base_offset=1)
    assert [r[0] for r in rows(C.decode_to_arrow(buf))] == [1]


def test_malformed_records_raise_decode_errors():
    good = B.encode_batch([(b"key", b"value", T0, [("h", b"v")])])
    cases = {
        "count too large": B.build_batch(B.encode_record(0, 0, b"k", b"v"), count=2),
        "bytes after last record": B.build_batch(B.encode_record(0, 0, b"k", b"v") + b"\0", count=1),
        "bad utf-8 key": B.build_batch(b"\x12\x00\x00\x00\x01\x01\x02\x02\xff\x01", count=1),
        "null header key": B.build_batch(b"\x10\x00\x00\x00\x01\x01\x02\x01\x01", count=1),
        "record too short": B.build_batch(b"\x08\x00\x00\x00\x01", count=1),
    }
    for _name, buf in cases.items():
        with pytest.raises(DecodeError):
            C.decode_to_arrow(buf)
    bad = bytearray(good)
    bad[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        C.decode_to_arrow(bytes(bad))  # CRC


# --- encoder ----------------------------------------------------------------------------

def arrow_columns(recs):
    keys = pa.array([r[0] for r in recs], pa.binary())
    values = pa.array([r[1] for r in recs], pa.binary())
    ts = pa.array([r[2] for r in recs], pa.int64())
    headers = pa.array([[{"key": k, "value": v} for k, v in r[3]] if r[3] else None
                        for r in recs], C.HEADERS_TYPE)
    return values, keys, ts, headers


def expected_rows(recs, base=0):
    return [(base + i, r[2], 0, r[0], r[1], list(r[3]) or None) for i, r in enumerate(recs)]


@pytest.mark.parametrize("codec", CODECS)
def test_encode_read_by_every_reader(codec):
    recs = sample_records(400, seed=9)
    values, keys, ts, headers = arrow_columns(recs)
    out = C.encode_from_arrow(values, keys, ts, headers, compression=codec, max_batch_bytes=16384,
                              producer_id=7, producer_epoch=2, base_sequence=10)
    assert out[0].row_start == 0 and out[-1].row_end == 400 and len(out) > 3
    assert all(a.row_end == b.row_start for a, b in zip(out, out[1:]))
    buf = b"".join(b.data for b in out)
    for b in out:
        h = B.ensure_valid(b.data)
        assert h.records_count == b.record_count
        assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 10 + b.row_start)
        assert h.compression == codec
        if b.record_count > 1:
            assert len(B.records_payload(b.data, 0, h, 1 << 30)) + 61 <= 16384
    expected = expected_rows(recs)
    assert client_rows(KpMemoryRecords, buf) == expected
    assert client_rows(AioMemoryRecords, buf) == expected
    assert reference(buf) == expected
    assert rows(C.decode_to_arrow(buf)) == expected


def test_encode_batch_sizes_are_tight():
    values = pa.array([b"x" * 100] * 10_000)
    out = C.encode_from_arrow(values, now_ms=T0)
    sizes = [len(b.data) for b in out]
    assert max(sizes) <= 16384 and min(sizes[:-1]) > 16384 - 2 * 110
    huge = C.encode_from_arrow(pa.array([b"y" * 50_000, b"z"]), max_batch_bytes=1000)
    assert [(b.row_start, b.row_end) for b in huge] == [(0, 1), (1, 2)]


def test_encode_input_types_and_defaults():
    values = pa.chunked_array([pa.array(["a", None], pa.string()), pa.array(["ü"], pa.string())])
    keys = pa.array([b"1", b"2", None], pa.large_binary())
    ts = pa.array([T0 * 1000, None, (T0 + 1) * 1000], pa.timestamp("us"))
    out = C.encode_from_arrow(values, keys, ts, now_ms=42)
    assert rows(C.decode_to_arrow(out[0].data)) == [
        (0, T0, 0, b"1", b"a", None), (1, 42, 0, b"2", None, None),
        (2, T0 + 1, 0, None, "ü".encode(), None)]
    assert C.encode_from_arrow(pa.array([], pa.binary())) == []
    sliced = pa.array([b"q", b"r", b"s", b"t"]).slice(1, 2)
    assert [r[4] for r in rows(C.decode_to_arrow(
        C.encode_from_arrow(sliced, keys=pa.array([b"k1", b"k2", b"k3"]).slice(1, 2))[0].data))
    ] == [b"r", b"s"]
    with pytest.raises(EncodeError):
        C.encode_from_arrow(pa.array([1, 2]))
    with pytest.raises(EncodeError):
        C.encode_from_arrow(pa.array([b"a"]), keys=pa.array([b"a", b"b"]))
    bad_headers = pa.array([[{"key": None, "value": b"v"}]], C.HEADERS_TYPE)
    with pytest.raises(EncodeError):
        C.encode_from_arrow(pa.array([b"a"]), headers=bad_headers)


def test_encode_header_columns_sliced_chunked_and_ghost_entries():
    """A null list that still spans child entries (legal in Arrow) encodes no headers;
    slices, chunks and large_list encode like the plain array; [] and null read as null."""
    values = pa.array([{"key": k, "value": v} for k, v in
                       [("a", b"1"), ("b", None), ("c", b""), ("GHOST", b"g"), ("é", b"z")]],
                      C.HEADERS_TYPE.value_type)
    headers = pa.ListArray.from_arrays(pa.array([0, 1, 3, 4, 4, 5], pa.int32()), values,
                                       type=C.HEADERS_TYPE,
                                       mask=pa.array([False, False, True, False, False]))
    expected = [[("a", b"1")], [("b", None), ("c", b"")], None, None, [("é", b"z")]]
    variants = [headers, pa.chunked_array([headers.slice(0, 2), headers.slice(2)]),
                headers.cast(pa.large_list(C.HEADERS_TYPE.value_type))]
    for h in variants:
        out = C.encode_from_arrow(pa.array([b"x"] * 5), headers=h, now_ms=T0)
        assert [r[5] for r in rows(C.decode_to_arrow(out[0].data))] == expected
    out = C.encode_from_arrow(pa.array([b"x"] * 3), headers=headers.slice(1, 3), now_ms=T0)
    assert [r[5] for r in rows(C.decode_to_arrow(out[0].data))] == expected[1:4]


def test_stamp_producer_fields():
    out = C.encode_from_arrow(pa.array([b"a", b"b", b"c"]), now_ms=T0)
    data = bytearray(out[0].data)
    C.stamp_producer_fields(data, 99, 4, 1234, is_transactional=True)
    h = B.ensure_valid(data)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (99, 4, 1234, True)
    C.stamp_producer_fields(data, 99, 4, 5, is_transactional=False)
    h = B.ensure_valid(data)
    assert (h.base_sequence, h.is_transactional) == (5, False)
    assert client_rows(AioMemoryRecords, bytes(data))[2][4] == b"c"


record_st = st.tuples(
    st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=200, max_size=3000)),
    st.one_of(st.none(), st.binary(max_size=300), st.binary(min_size=1000, max_size=4000)),
    st.integers(min_value=0, max_value=1 << 50),
    st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))),
             max_size=4),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(st.lists(record_st, min_size=1, max_size=60), st.sampled_from(CODECS),
       st.sampled_from([200, 2000, 16384]))
def test_hypothesis_round_trip(recs, codec, max_batch_bytes):
    out = C.encode_from_arrow(*arrow_columns(recs), compression=codec,
                              max_batch_bytes=max_batch_bytes)
    buf = b"".join(b.data for b in out)
    expected = expected_rows(recs)
    assert rows(C.decode_to_arrow(buf)) == expected
    assert reference(buf) == expected
    assert client_rows(AioMemoryRecords, buf) == expected


# --- fuzzing ------------------------------------------------------------------------------

def decode_all(buf, verify_crc):
    return [r for rb in C.iter_arrow(buf, verify_crc=verify_crc, max_decompressed=1 << 22,
                                     max_rows_per_batch=500) for r in rows(rb)]


@FUZZ
@given(st.binary(max_size=2000), st.booleans())
def test_fuzz_random_bytes(data, verify_crc):
    try:
        decode_all(data, verify_crc)
    except DecodeError:
        pass


SEEDS = [
    v2_log(n_batches=3, per_batch=6, seed=1),
    v2_log(n_batches=2, per_batch=5, codec=CompressionType.LZ4, seed=2),
    v2_log(n_batches=30, per_batch=2, seed=4),  # enough batches for the vectorised walk
    encode_legacy_message_set([(b"k", b"v", T0)] * 3, 1, 1) + v2_log(1, 3),
]


@FUZZ
@given(st.sampled_from(range(len(SEEDS))),
       st.lists(st.tuples(st.integers(min_value=0), st.integers(1, 255)), max_size=6),
       st.one_of(st.none(), st.integers(min_value=0)), st.booleans())
def test_fuzz_mutations(seed, flips, cut, verify_crc):
    buf = bytearray(SEEDS[seed])
    for pos, xor in flips:
        buf[pos % len(buf)] ^= xor
    if cut is not None:
        del buf[cut % (len(buf) + 1):]
    tracemalloc.start()
    try:
        decode_all(bytes(buf), verify_crc)
    except DecodeError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 256 * len(SEEDS[seed]) + (8 << 20)


@FUZZ
@given(st.sampled_from([0, 2]), st.lists(st.tuples(st.integers(min_value=0), st.integers(1, 255)),
                                         min_size=1, max_size=4))
def test_fuzz_records_differential(seed, flips):
    """Damage only record bytes of uncompressed batches, skip the CRC: our decoder must
    accept exactly what batch.py's scalar decoder accepts, with the same rows."""
    buf = bytearray(SEEDS[seed])
    regions = [(p + B.RECORDS_OFFSET, p + h.size_in_bytes) for p, h in B.iter_batch_headers(buf)]
    for pos, xor in flips:
        start, end = regions[pos % len(regions)]
        buf[start + pos % (end - start)] ^= xor
    buf = bytes(buf)
    try:
        expected = [(r.offset, r.timestamp, h.timestamp_type, r.key, r.value,
                     list(r.headers) or None)
                    for h, recs in B.iter_batches(buf, verify_crc=False) for r in recs]
    except DecodeError:
        expected = None
    if expected is not None and any(not -(1 << 63) <= r[1] < 1 << 63 for r in expected):
        return  # a timestamp delta pushed past int64: Arrow's int64 column cannot hold it
    try:
        got = decode_all(buf, verify_crc=False)
    except DecodeError as exc:
        assert expected is None, f"ours rejected what batch.py accepts: {exc!r}"
        return
    assert got == expected
