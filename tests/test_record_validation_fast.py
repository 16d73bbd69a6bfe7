"""Tests of the lean loop of broker/record/validation.py (``_walk_plain``, issue 20): the
record walk of every uncompressed produce takes it, so it must return and raise exactly
what the general walk (``_walk``) does, record for record.

Properties (Hypothesis): on batches of every shape (the common one, and keys, values,
timestamp deltas, offset deltas, headers and lengths that leave it at any record), on the
same batches with bytes changed, inserted or cut anywhere, and on sections cut short or
read past their end, ``_walk_plain`` and ``_walk`` give the same summary or raise the same
error with the same message; and ``check_records`` with no sink (the lean loop) agrees
with ``check_records`` with a sink (the general walk). A plain check that the lean loop
really walks the common shape by itself (else the properties would hold vacuously).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.record import batch as rb
from broker.record import codecs
from broker.record import validation as rv
from broker.record.errors import DecodeError

NOW = 1_700_000_000_000
BIG = rv._BIG
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Mostly the common shape (short keys or none, values from empty to 2 KiB, deltas of
# 0-63 ms, no headers), with every way out of it mixed in: long keys, values over 8 KiB
# (three-byte lengths), tiny records (one-byte lengths), negative and large deltas, headers.
common_key = st.one_of(st.none(), st.binary(max_size=20))
common_value = st.one_of(st.binary(min_size=60, max_size=2048), st.binary(max_size=60), st.none())
odd_key = st.one_of(common_key, st.binary(min_size=60, max_size=200))
odd_value = st.one_of(common_value, st.binary(min_size=8100, max_size=9000))
delta = st.one_of(st.integers(0, 63), st.integers(-100, 10_000))
headers = st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=8))), max_size=2)
common_record = st.tuples(common_key, common_value, st.integers(0, 63), st.just([]))
any_record = st.tuples(odd_key, odd_value, delta, st.one_of(st.just([]), headers))
records_st = st.one_of(st.lists(common_record, min_size=1, max_size=150),
                       st.lists(st.one_of(common_record, any_record), min_size=1, max_size=150))


def section(records) -> tuple[bytes, int]:
    """An uncompressed batch of ``records`` (key, value, timestamp delta, headers) and its count."""
    raw = rb.encode_batch([(k, v, NOW + d, h) for k, v, d, h in records])
    return raw, len(records)


def outcome(fn, *args):
    try:
        return fn(*args)
    except (DecodeError, IndexError) as exc:  # check_records maps IndexError itself
        return type(exc), str(exc), getattr(exc, "batch_index", None)


def general(buf, end: int, count: int):
    return outcome(rv._walk, buf, rb.RECORDS_OFFSET, end, 0, count, BIG, -BIG, -1, 0, None)


def lean(buf, end: int, count: int):
    return outcome(rv._walk_plain, buf, rb.RECORDS_OFFSET, end, 0, count, BIG, -BIG, -1, 0)


def agree(buf, end: int, count: int) -> None:
    assert lean(buf, end, count) == general(buf, end, count)
    # check_records: with no sink the lean loop (or numpy), with a sink the walk
    assert outcome(rv.check_records, buf, rb.RECORDS_OFFSET, end, 0, count, 1 << 30) == \
        outcome(rv.check_records, buf, rb.RECORDS_OFFSET, end, 0, count, 1 << 30, [])


@SETTINGS
@given(records_st)
def test_the_lean_loop_agrees_with_the_walk_on_valid_batches(records):
    raw, count = section(records)
    agree(raw, len(raw), count)
    assert lean(raw, len(raw), count)[1] == count  # valid: accepted, every record walked


@SETTINGS
@given(records_st, st.data())
def test_the_lean_loop_agrees_with_the_walk_on_changed_bytes(records, data):
    raw, count = section(records)
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.integers(rb.RECORDS_OFFSET, len(buf) - 1))
        # bytes that matter to the lean loop's tests: varint bits, small values, zero
        buf[where] = data.draw(st.one_of(st.integers(0, 255), st.sampled_from([0, 1, 2, 0x7F, 0x80, 0x81, 0xFF])))
    agree(bytes(buf), len(buf), count)
    agree(buf, len(buf), count)  # a bytearray, as the broker's requests are


@SETTINGS
@given(records_st, st.data())
def test_the_lean_loop_agrees_with_the_walk_on_cut_and_grown_sections(records, data):
    raw, count = section(records)
    cut = data.draw(st.integers(rb.RECORDS_OFFSET, len(raw)))
    agree(raw, cut, count)  # the section ends early inside the buffer
    agree(raw[:cut], cut, count)  # the buffer itself ends early
    where = data.draw(st.integers(rb.RECORDS_OFFSET, len(raw)))
    grown = raw[:where] + data.draw(st.binary(min_size=1, max_size=3)) + raw[where:]
    agree(grown, len(grown), count)  # bytes inserted (or appended after the last record)
    agree(raw, len(raw), data.draw(st.integers(0, count + 2)))  # a wrong records count


@pytest.mark.parametrize("count, size", [(16, 984), (120, 100)])
def test_the_lean_loop_walks_the_common_shape_alone(monkeypatch, count, size):
    """Records of 1 KiB values (and 100 B ones past the one-byte offset deltas), keys and
    null keys, deltas 0..63: no record for _walk."""
    records = [(b"key-%d" % i if i % 3 else None, bytes([i]) * (size + i % 7), (i * 5) % 64, [])
               for i in range(count)]
    raw, count = section(records)
    expected = general(raw, len(raw), count)

    def fail(*args):
        raise AssertionError("the general walk was called")

    monkeypatch.setattr(rv, "_walk", fail)
    assert lean(raw, len(raw), count) == expected
    deltas = [d for _, _, d, _ in records]
    nulls = sum(k is None for k, _, _, _ in records)
    assert expected == (len(raw), count, min(deltas), max(deltas), deltas.index(max(deltas)), nulls)


@pytest.mark.parametrize("shape", ["tiny", "negative delta", "header", "long value", "2-byte offset delta"])
def test_the_walk_takes_over_from_the_first_record_of_another_shape(shape):
    base = [(b"k", b"v" * 100, i % 64, []) for i in range(80)]
    other = {"tiny": (b"k", b"v", 3, []), "negative delta": (b"k", b"v" * 100, -5, []),
             "header": (b"k", b"v" * 100, 3, [("h", b"x")]), "long value": (None, b"w" * 9000, 3, []),
             "2-byte offset delta": (b"k" * 70, b"v" * 100, 3, [])}[shape]
    base[5] = other  # and again after the one-byte offset deltas
    base[70] = other
    raw, count = section(base)
    result = lean(raw, len(raw), count)
    assert result == general(raw, len(raw), count)
    assert result[:2] == (len(raw), count)


@SETTINGS
@given(records_st, st.data())
def test_the_lean_loop_agrees_with_the_walk_from_any_record(records, data):
    """Started at record k with the summary of the first k (as the compressed-stream walk
    calls it, chunk after chunk), on valid and changed batches."""
    raw, count = section(records)
    buf = bytearray(raw)
    if data.draw(st.booleans()):
        buf[data.draw(st.integers(rb.RECORDS_OFFSET, len(buf) - 1))] = data.draw(st.integers(0, 255))
    k = data.draw(st.integers(0, count))
    state = outcome(rv._walk, buf, rb.RECORDS_OFFSET, len(buf), 0, k, BIG, -BIG, -1, 0, None)
    if len(state) != 6 or state[1] != k:
        return  # the first k records do not parse
    pos, index, lo, hi, hi_index, nulls = state
    assert outcome(rv._walk_plain, buf, pos, len(buf), k, count, lo, hi, hi_index, nulls) == \
        outcome(rv._walk, buf, pos, len(buf), k, count, lo, hi, hi_index, nulls, None)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(records_st, st.sampled_from([1, 3, 4]), st.sampled_from([7, 300, 4096, 256 * 1024]), st.data())
def test_compressed_walks_agree_with_the_walk(records, codec, chunk, data):
    """A compressed batch's records (changed or not), decompressed in chunks of any size:
    ``check_records`` (the lean loop on each chunk) agrees with the walk (a sink)."""
    raw, count = section(records)
    plain = bytearray(raw[rb.RECORDS_OFFSET:])
    if data.draw(st.booleans()):
        plain[data.draw(st.integers(0, len(plain) - 1))] = data.draw(st.integers(0, 255))
    payload = codecs.compress(codec, bytes(plain))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rv, "_CHUNK", chunk)
        assert outcome(rv.check_records, payload, 0, len(payload), codec, count, 1 << 30) == \
            outcome(rv.check_records, payload, 0, len(payload), codec, count, 1 << 30, [])
