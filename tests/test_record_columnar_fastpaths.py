"""Tests of the columnar decoder's fast paths (broker/record/columnar/_walk.py and the lz4
arena of decode.py) against batch.py's scalar decoder: the speculative walk of runs of
records of one size (runs broken by other sizes, by the 1/2/3-byte boundaries of the
length varint, damaged lengths), and lz4 payloads decompressed into a shared arena
(several batches, ratios past the arena's guess, the decompression budget)."""

from __future__ import annotations

import random

import lz4.block
import lz4.frame
import pyarrow as pa
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.record import batch as B
from broker.record import codecs
from broker.record import columnar as C
from broker.record.codecs import CompressionType
from broker.record.columnar import decode as decode_module
from broker.record.columnar._walk import HEADER_DTYPE, gather_headers
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


def _general_decode(buf: bytes, lz4_run: bool = False, **kw) -> tuple[list, list, tuple]:
    """The decode with the plain-batch run (and the lz4 run, unless ``lz4_run``) off."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(decode_module, "_plain_run", lambda view, pos, *a: (pos, 0, 0, None))
        if not lz4_run:
            m.setattr(decode_module, "_lz4_run", lambda view, pos, *a: (pos, 0, 0, None, False))
        return _run_decode(buf, **kw)


def test_the_plain_batch_run_at_every_start_and_end_offset():
    """Offset bounds on, inside and between batches, for every pair of them."""
    buf, _ = _log([("plain", 3, 5, False)] * 3 + [("lz4", 3, 5, False)] + [("plain", 3, 5, False)] * 2)
    for start in range(-1, 20):
        for end in range(start, 21):
            for max_rows in (2, 100):
                kw = dict(start_offset=start, end_offset=end, max_rows_per_batch=max_rows)
                assert _run_decode(buf, **kw) == _general_decode(buf, **kw), (start, end)


# --- the lz4 run of iter_arrow (decode._lz4_run, codecs.lz4_frames_into) against the general
# loop (decode._inflate, codecs.decompress_into with cramjam's frame decoder) ---

def _lz4_framings(records: bytes, framing: str, rnd: random.Random) -> bytes:
    """The records compressed as Kafka's writers frame them: ours and Java's (no checksum,
    no size), aiokafka's (block checksums), kafka-python's (content size), librdkafka's
    (content checksum in some versions), all options at once with 64 KiB blocks, stored
    blocks, and cramjam's linked blocks (left to the frame decoder)."""
    if framing == "ours":
        return codecs.compress(CompressionType.LZ4, records)
    if framing == "linked":
        return lz4.frame.compress(records, block_linked=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    options = {"aiokafka": dict(block_checksum=True), "kafka-python": dict(store_size=True),
               "librdkafka": dict(content_checksum=True),
               "all": dict(block_checksum=True, content_checksum=True, store_size=True)}
    if framing in options:
        return lz4.frame.compress(records, block_linked=False,
                                  block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                  **{"block_checksum": False, "content_checksum": False,
                                     "store_size": False, **options[framing]})
    # by hand: blocks cut anywhere, stored or compressed, block checksums, content size
    checksum = rnd.random() < 0.5
    descriptor = bytes([0x70 if checksum else 0x60, 0x40])
    if rnd.random() < 0.5:
        descriptor = bytes([descriptor[0] | 0x08, 0x40]) + len(records).to_bytes(8, "little")
    out = [b"\x04\x22\x4d\x18", descriptor,
           bytes([xxhash.xxh32_intdigest(descriptor) >> 8 & 0xFF])]
    marks = {rnd.randrange(len(records) + 1) for _ in range(3)}
    bounds = sorted(marks | set(range(0, len(records), 1 << 16)) | {0, len(records)})
    for a, b in zip(bounds, bounds[1:]):
        body = lz4.block.compress(records[a:b], store_size=False)
        size = len(body)
        if rnd.random() < 0.5 or size > 1 << 16:
            body, size = records[a:b], (b - a) | 0x80000000
        out += [size.to_bytes(4, "little"), body]
        if checksum:
            out.append(xxhash.xxh32_intdigest(body).to_bytes(4, "little"))
    return b"".join(out) + bytes(4)


def _lz4_log(spec: list[tuple], seed: int) -> bytes:
    """Back-to-back batches from (kind, count, value size, framing, damage) specs: lz4
    batches framed as ``_lz4_framings`` says (kind "lz4"), or plain ones; damage "crc"
    breaks the CRC, "frame" a byte of the frame (CRC recomputed), "cut" the frame's end."""
    rnd = random.Random(seed)
    out, offset = [], 0
    for kind, count, size, framing, damage in spec:
        recs = [(b"k%d" % (offset + i), bytes([offset % 251]) * size + rnd.randbytes(size % 7),
                 1_700_000_000_000 + offset + i, ()) for i in range(count)]
        raw = bytearray(B.encode_batch(recs, base_offset=offset))
        if kind == "lz4":
            payload = bytearray(_lz4_framings(bytes(raw[B.RECORDS_OFFSET:]), framing, rnd))
            if damage == "frame":
                payload[rnd.randrange(len(payload))] ^= 1 << rnd.randrange(8)
            elif damage == "cut":
                payload = payload[:-1 - rnd.randrange(len(payload) // 2)]
            raw = raw[:B.RECORDS_OFFSET] + payload
            raw[B.ATTRIBUTES_OFFSET + 1] |= CompressionType.LZ4  # attributes: int16 BE
            raw[8:12] = (len(raw) - B.LOG_OVERHEAD).to_bytes(4, "big")
            raw[B.CRC_OFFSET:B.ATTRIBUTES_OFFSET] = B.crc32c(
                memoryview(raw)[B.ATTRIBUTES_OFFSET:]).to_bytes(4, "big")
        if damage == "crc":
            raw[-1] ^= 0x01
        out.append(bytes(raw))
        offset += count
    return b"".join(out)


_FRAMINGS = st.sampled_from(["ours", "ours", "aiokafka", "kafka-python", "librdkafka", "all",
                             "handmade", "linked"])
_DAMAGE = st.sampled_from([None] * 12 + ["crc", "frame", "cut"])


@settings(max_examples=200, deadline=None)
@given(spec=st.lists(st.tuples(st.sampled_from(["lz4"] * 5 + ["plain"]), st.integers(1, 40),
                               st.sampled_from([0, 5, 100, 1024, 70_000]), _FRAMINGS, _DAMAGE),
                     min_size=1, max_size=25),
       seed=st.integers(0, 1 << 16),
       start=st.one_of(st.none(), st.integers(0, 300)),
       max_rows=st.sampled_from([1, 7, 50, 1 << 16]),
       max_bytes=st.sampled_from([1, 3000, 50_000, 200_000, 32 << 20]),
       max_decompressed=st.sampled_from([1000, 100_000, 64 << 20]),
       verify_crc=st.booleans(), cut=st.integers(0, 80))
def test_the_lz4_batch_run_decodes_exactly_as_the_general_loop(
        spec, seed, start, max_rows, max_bytes, max_decompressed, verify_crc, cut):
    """Runs of lz4 batches of every framing Kafka's writers use, with bad CRCs, damaged
    and truncated frames, payloads over the decompression budget, every unit budget (the
    unit boundaries and the arena rewound between units), cut anywhere in the last batch:
    the same rows, batches, bad-batch reports, errors and progress with the fast runs as
    through the general loop alone. Damage that only the frame's own checksums would see
    (skipped by the fast path, covered by the batch CRC) is left out when verify_crc is
    off."""
    if not verify_crc:
        spec = [(k, n, s, f, None if d == "frame" else d) for k, n, s, f, d in spec]
    buf = _lz4_log(spec, seed)
    buf = buf[:len(buf) - cut]
    kw = dict(start_offset=start, max_rows_per_batch=max_rows, max_bytes_per_batch=max_bytes,
              max_decompressed=max_decompressed, verify_crc=verify_crc)
    fast = _run_decode(buf, **kw)
    assert fast == _general_decode(buf, **kw)
    assert fast == _general_decode(buf, lz4_run=True, **kw)  # the lz4 run alone


def test_lz4_batches_decoded_in_many_units_own_their_memory():
    """The arena is rewound and written again for every unit: the RecordBatches already
    yielded must not change (they own their memory)."""
    rnd = random.Random(11)
    values = [rnd.randbytes(100) * 5 for _ in range(3000)]
    buf = encode(values, CompressionType.LZ4, max_batch_bytes=16 * 1024)
    parts = list(C.iter_arrow(buf, max_bytes_per_batch=100_000))
    assert len(parts) > 10
    assert [v for p in parts for v in p.column(4).to_pylist()] == values


# --- the gather of many batch headers (_walk.gather_headers) ---

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
        got = gather_headers(data, pos_arr)
        want = data.take(pos_arr[:, None] + np.arange(B.RECORD_BATCH_OVERHEAD)) \
            .view(HEADER_DTYPE)[:, 0]
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
        assert got.tolist() == [B.HEADER.unpack_from(data, p) for p in pos_arr.tolist()]
    with pytest.raises(IndexError):
        gather_headers(data, np.repeat(np.array([last + 1], np.int64), 9))
