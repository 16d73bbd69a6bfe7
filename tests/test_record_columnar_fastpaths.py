"""Tests of the columnar decoder's fast paths (broker/record/columnar/_walk.py and the lz4
arena of decode.py) against batch.py's scalar decoder: the speculative walk of runs of
records of one size (runs broken by other sizes, by the 1/2/3-byte boundaries of the
length varint, damaged lengths), and lz4 payloads decompressed into a shared arena
(several batches, ratios past the arena's guess, the decompression budget)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from broker.record import batch as B
from broker.record import columnar as C
from broker.record.codecs import CompressionType
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
