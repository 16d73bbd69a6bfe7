"""The columnar encoder byte for byte against the general path: every batch of
``encode_from_arrow`` (``writable`` or not) equals ``batch.encode_batch`` of the same rows
with the same header fields, for every codec but gzip (whose frame carries no state of
ours but is not compared here: its bytes depend on zlib's build, the same for both, and
are covered by the round-trip tests), with keys, nulls, headers and timestamps."""

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.record import batch as B
from broker.record import columnar as C
from broker.record.codecs import CompressionType

CODECS = [c for c in CompressionType if c != CompressionType.GZIP]

record_st = st.tuples(
    st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=200, max_size=3000)),
    st.one_of(st.none(), st.binary(max_size=300), st.binary(min_size=1000, max_size=4000)),
    st.integers(min_value=0, max_value=1 << 50),
    st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))),
             max_size=4),
)


def columns(recs, with_headers):
    keys = pa.array([r[0] for r in recs], pa.binary())
    values = pa.array([r[1] for r in recs], pa.binary())
    ts = pa.array([r[2] for r in recs], pa.int64())
    headers = None
    if with_headers:
        headers = pa.array([[{"key": k, "value": v} for k, v in r[3]] if r[3] else None
                            for r in recs], C.HEADERS_TYPE)
    return values, keys, ts, headers


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(st.lists(record_st, min_size=1, max_size=60), st.sampled_from(CODECS),
       st.sampled_from([200, 2000, 16384, 1 << 20]), st.booleans(), st.booleans(),
       st.integers(-1, (1 << 31) - 1))
def test_encode_from_arrow_equals_encode_batch(recs, codec, max_batch_bytes, with_headers,
                                               transactional, base_sequence):
    producer = dict(producer_id=-1, producer_epoch=-1, base_sequence=-1)
    if base_sequence >= 0:
        producer = dict(producer_id=7, producer_epoch=3, base_sequence=base_sequence)
    kwargs = dict(compression=codec, max_batch_bytes=max_batch_bytes, base_offset=100,
                  is_transactional=transactional, **producer)
    cols = columns(recs, with_headers)
    plain = C.encode_from_arrow(*cols, **kwargs)
    writable = C.encode_from_arrow(*cols, writable=True, **kwargs)
    assert [(b.row_start, b.row_end) for b in plain] == [(b.row_start, b.row_end) for b in writable]
    assert plain[0].row_start == 0 and plain[-1].row_end == len(recs)
    for p, w in zip(plain, writable):
        assert isinstance(w.data, bytearray)
        assert bytes(w.data) == p.data
        rows = [(k, v, ts, list(h) if with_headers else None)
                for k, v, ts, h in recs[p.row_start:p.row_end]]
        seq = producer["base_sequence"]
        if seq >= 0:
            seq = (seq + p.row_start) % (1 << 31)
        expected = B.encode_batch(rows, base_offset=100 + p.row_start, compression=codec,
                                  producer_id=producer["producer_id"],
                                  producer_epoch=producer["producer_epoch"], base_sequence=seq,
                                  is_transactional=transactional)
        assert p.data == expected


def test_writable_batch_can_be_stamped():
    out = C.encode_from_arrow(pa.array([b"a" * 100] * 50), writable=True, now_ms=1000,
                              compression=CompressionType.LZ4)
    data = out[0].data
    C.stamp_producer_fields(data, 9, 1, 0)
    h = B.ensure_valid(bytes(data))
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (9, 1, 0)
