"""Tests of the columnar decoder's fast paths (broker/record/columnar/_walk.py and the lz4
arena of decode.py) against batch.py's scalar decoder: the speculative walk of runs of
records of one size (runs broken by other sizes, by the 1/2/3-byte boundaries of the
length varint, damaged lengths), and lz4 payloads decompressed into a shared arena
(several batches, ratios past the arena's guess, the decompression budget)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.record import batch as B
from broker.record import columnar as C
from broker.record.codecs import CompressionType
from broker.record.columnar import decode as decode_module
from broker.record.errors import CorruptBatchError, DecodeError
from broker.record.varint import decode_varint


def encode(values: list[bytes | None], compression: int = 0, max_batch_bytes: int = 1 << 20,
           keys: list[bytes | None] | None = None) -> bytes:
    ts = pa.array([1_700_000_000_000 + i for i in range(len(values))], pa.int64())
    batches = C.encode_from_arrow(pa.array(values, pa.binary()),
                                  None if keys is None else pa.array(keys, pa.binary()), ts,
                                  compression=compression, max_batch_bytes=max_batch_bytes)
    return b"".join(b.data for b in batches)


def reference(buf: bytes) -> list[tuple]:
    out, pos = [], 0
    while pos < len(buf):
        h, recs = B.decode_batch(buf, pos)
        out += [(r.offset, r.timestamp, r.key, r.value) for r in recs]
        pos += h.batch_length + B.LOG_OVERHEAD
    return out


def decoded(buf: bytes, **kw) -> list[tuple]:
    rb = C.decode_to_arrow(buf, **kw)
    d = rb.to_pydict()
    return list(zip(d["offset"], d["timestamp"], d["key"], d["value"]))


def runs(rnd: random.Random, n: int, sizes: list[int | None]) -> list[bytes | None]:
    out: list[bytes | None] = []
    while len(out) < n:
        size = rnd.choice(sizes)
        for _ in range(rnd.choice([1, 3, 9, 40, 300])):
            out.append(None if size is None else rnd.randbytes(size))
    return out[:n]


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4,
                                   CompressionType.ZSTD])
@pytest.mark.parametrize("sizes", [[100], [1024], [0, 50, 56, 57, 58, 60],
                                   [8180, 8185, 8190, 9000], [None, 5, 100]])
def test_runs_of_one_size_decode_as_the_scalar_decoder_does(codec, sizes):
    rnd = random.Random(sum(s or 0 for s in sizes) + codec)
    n = 3000 if max(s or 0 for s in sizes) < 4096 else 300
    values = runs(rnd, n, sizes)
    keys = [None if i % 7 else b"k%d" % i for i in range(n)]
    buf = encode(values, codec, keys=keys)
    assert decoded(buf) == reference(buf)
    assert [v for *_, v in decoded(buf)] == values


def test_a_damaged_length_inside_a_run_is_reported_not_skipped():
    buf = bytearray(encode([bytes(100)] * 200))
    pos = B.RECORDS_OFFSET
    for _ in range(50):  # to record 50's length varint (records 0-63 are of one size)
        length, pos = decode_varint(buf, pos, len(buf))
        pos += length
    buf[pos] ^= 0x02  # its length one off: the run ends there, and so does the decode
    with pytest.raises(CorruptBatchError, match="offsets \\[0, 199\\]"):
        C.decode_to_arrow(bytes(buf), verify_crc=False)
    with pytest.raises(CorruptBatchError, match="CRC"):
        C.decode_to_arrow(bytes(buf))


def test_many_lz4_batches_share_one_arena_and_decode_exactly():
    rnd = random.Random(7)
    values = [rnd.randbytes(512) + bytes(512) for _ in range(4000)]
    buf = encode(values, CompressionType.LZ4, max_batch_bytes=64 * 1024)
    assert len(reference(buf)) == 4000
    assert decoded(buf) == reference(buf)
    # small units: a unit boundary inside the arena
    parts = list(C.iter_arrow(buf, max_bytes_per_batch=200_000))
    assert len(parts) > 1
    assert [v for p in parts for v in p.column(4).to_pylist()] == values


def test_lz4_inflating_past_the_arena_guess_and_past_the_budget():
    values = [bytes(1 << 16)] * 64  # ~250x: far past the arena's 8x guess
    buf = encode(values, CompressionType.LZ4, max_batch_bytes=8 << 20)
    assert decoded(buf) == reference(buf)
    with pytest.raises(DecodeError, match="budget"):
        C.decode_to_arrow(buf, max_decompressed=1 << 20)


# --- the plain-batch run of iter_arrow (decode._plain_run) against the general loop ---

def _log(draw_spec: list[tuple]) -> tuple[bytes, list[tuple[int, int, int]]]:
    """Back-to-back batches from (kind, count, value size, bad crc) specs; offsets follow on.
    Returns the bytes and the aborted transactions (producer 7's batches of kind "aborted")."""
    out, aborted, offset = [], [], 0
    for kind, count, size, bad_crc in draw_spec:
        recs = [(b"k%d" % (offset + i) if i % 3 else None, bytes([offset % 251]) * size,
                 1_700_000_000_000 + offset + i, [("h", b"v")] if kind == "headers" else ())
                for i in range(count)]
        raw = bytearray(B.encode_batch(
            recs, base_offset=offset,
            compression=CompressionType.LZ4 if kind == "lz4" else 0,
            timestamp_type=B.LOG_APPEND_TIME if kind == "append_time" else B.CREATE_TIME,
            producer_id=7 if kind in ("aborted", "committed") else -1,
            is_transactional=kind in ("aborted", "committed"), is_control=kind == "control"))
        if bad_crc:
            raw[-1] ^= 0x01
        if kind == "aborted":
            aborted.append((7, offset, offset + count - 1))
        out.append(bytes(raw))
        offset += count
    return b"".join(out), aborted


def _run_decode(buf: bytes, **kw) -> tuple[list, list, tuple]:
    bad: list = []
    progress = C.DecodeProgress()
    rows = []
    try:
        for rb in C.iter_arrow(buf, on_bad_batch=lambda e: bad.append(
                (e.base_offset, e.last_offset, e.position, str(e))), progress=progress, **kw):
            rows.append((rb.num_rows, rb.to_pydict()))
    except DecodeError as exc:  # both paths must fail alike
        rows.append(("error", type(exc).__name__, str(exc)))
    return rows, bad, (progress.position, progress.next_offset, progress.records)


_KINDS = st.sampled_from(["plain", "plain", "plain", "headers", "lz4", "control",
                          "aborted", "committed", "append_time"])


@settings(max_examples=200, deadline=None)
@given(spec=st.lists(st.tuples(_KINDS, st.integers(1, 12), st.sampled_from([0, 5, 100, 1024]),
                               st.integers(0, 9).map(lambda x: x == 0)),
                     min_size=1, max_size=30),
       start=st.one_of(st.none(), st.integers(0, 150)),
       end=st.one_of(st.none(), st.integers(0, 150)),
       max_rows=st.sampled_from([1, 7, 50, 1 << 16]),
       max_bytes=st.sampled_from([1, 3000, 50_000, 32 << 20]),
       verify_crc=st.booleans(), skip_control=st.booleans(), with_aborted=st.booleans(),
       include_headers=st.booleans(), cut=st.integers(0, 80))
def test_the_plain_batch_run_decodes_exactly_as_the_general_loop(
        spec, start, end, max_rows, max_bytes, verify_crc, skip_control,
        with_aborted, include_headers, cut):
    """Every option of iter_arrow, on logs mixing plain batches with those the run leaves
    to the general loop (compressed, control, transactional, log-append time, bad CRC),
    cut anywhere in the last batch: the same rows, batches, bad-batch reports, errors and
    progress with the run as without it."""
    buf, aborted = _log(spec)
    buf = buf[:len(buf) - cut]
    kw = dict(start_offset=start, end_offset=end, max_rows_per_batch=max_rows,
              max_bytes_per_batch=max_bytes, verify_crc=verify_crc, skip_control=skip_control,
              aborted=aborted if with_aborted else None, include_headers=include_headers)
    assert _run_decode(buf, **kw) == _general_decode(buf, **kw)


def _general_decode(buf: bytes, **kw) -> tuple[list, list, tuple]:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(decode_module, "_plain_run", lambda view, pos, *a: (pos, 0, 0, None))
        return _run_decode(buf, **kw)


def test_the_plain_batch_run_at_every_start_and_end_offset():
    """Offset bounds on, inside and between batches, for every pair of them."""
    buf, _ = _log([("plain", 3, 5, False)] * 3 + [("lz4", 3, 5, False)] + [("plain", 3, 5, False)] * 2)
    for start in range(-1, 20):
        for end in range(start, 21):
            for max_rows in (2, 100):
                kw = dict(start_offset=start, end_offset=end, max_rows_per_batch=max_rows)
                assert _run_decode(buf, **kw) == _general_decode(buf, **kw), (start, end)


# --- the gather of a unit's batch headers (decode._gather_headers) ---

@settings(max_examples=100, deadline=None)
@given(size=st.integers(61, 5000), picks=st.lists(st.integers(0, 1 << 30), min_size=1,
                                                   max_size=40), seed=st.integers(0, 1 << 16))
def test_the_strided_header_gather_reads_what_take_reads(size, picks, seed):
    """Any positions of the input (the last possible one included), as few or as many
    batches as the strided view's threshold: the same HEADER_DTYPE records, byte for byte,
    as the plain ``take`` of 61 bytes a position; a position past the last one is refused
    (IndexError), never read outside the input."""
    import numpy as np

    data = np.frombuffer(random.Random(seed).randbytes(size), np.uint8)
    last = size - B.RECORD_BATCH_OVERHEAD
    positions = np.array(sorted({p % (last + 1) for p in picks} | {last}), np.int64)
    for pos_arr in (positions, positions[:1], np.repeat(positions, 9)):
        got = decode_module._gather_headers(data, pos_arr)
        want = data.take(pos_arr[:, None] + np.arange(B.RECORD_BATCH_OVERHEAD)) \
            .view(decode_module.HEADER_DTYPE)[:, 0]
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
        assert got.tolist() == [B.HEADER.unpack_from(data, p) for p in pos_arr.tolist()]
    with pytest.raises(IndexError):
        decode_module._gather_headers(data, np.repeat(np.array([last + 1], np.int64), 9))
