"""The log cleaner's vectorised parts against plain per-record models.

- ``hash_keys`` (offset_map.py): equal keys, and only equal keys, hash equal, wherever a
  key sits in its buffer (the tail read at the end of a buffer, buffers under 8 bytes,
  empty keys, keys past 32 bytes, keys that differ by trailing zero bytes); its path for
  keys of one length against the general path.
- ``SkimpyOffsetMap.put_records`` against a dict put one record at a time that stops at
  the first new key once it holds ``max_entries`` (Kafka's ``is_full``), on random key
  sequences, random windows and maps far too small for them (collisions, wrap-around,
  growth), with the records deferred (sorted at the first read), in the table, or moved
  from one to the other mid-way (past ``defer_limit``, or a put after a read); the
  high-half-collision paths of ``dedupe_last`` and of the settling; a full table (load
  factor 1); ``reserved_bytes`` never above the map's memory; ``is_latest`` (bitmap or
  search) against membership in the model's offsets.
- ``rewrite_run`` (rewrite.py) against ``Cleaner._splice`` byte for byte.
- Whole cleanings against the model (key -> last offset over the dirty section up to
  where the map stops; a record of a rewritten segment is kept iff it has a key and its
  offset is >= the model's offset for its key), round after round, with random keys (null,
  empty, long, repeated), random batch boundaries, segment rolls, map sizes and window
  sizes (pass 2 reusing pass 1's walk of a segment's first windows, or not), the map's
  records deferred and sorted, in the table from the start, or switched mid-cleaning.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log.cleaner.checkpoint import CleanerCheckpoints
from broker.log.cleaner.cleaner import Cleaner
from broker.log.cleaner.offset_map import (
    BYTES_PER_ENTRY,
    SETTLE_BYTES_PER_RECORD,
    SkimpyOffsetMap,
    _hash_any_lengths,
    _hash_equal_lengths,
    _order_by_high_half,
    dedupe_last,
    hash_keys,
)
from broker.log.cleaner.rewrite import rewrite_run
from broker.log.cleaner.scan import RecordLayout
from broker.log.config import LogConfig
from broker.record.batch import encode_batch, iter_batch_headers
from tests.test_log_cleaner import TP, Env, read_all

SEEDS = (1, 2, 3, 4)

keys_st = st.one_of(
    st.binary(max_size=12),
    st.binary(min_size=33, max_size=90),  # past 32 bytes (once entered by MD5)
    st.sampled_from([b"", b"a", b"a\x00", b"a\x00\x00\x00\x00\x00\x00\x00", b"\x00" * 8, b"\x00" * 9]),
)


def _pack(keys: list[bytes], pad: bytes = b"") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    data = pad + b"".join(keys)
    lengths = np.array([len(k) for k in keys], np.int64)
    starts = np.cumsum(lengths) - lengths + len(pad)
    return np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8), starts, lengths


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(keys_st, min_size=1, max_size=40), pad=st.binary(max_size=9))
def test_hash_keys_equal_exactly_for_equal_keys(keys, pad) -> None:
    data, starts, lengths = _pack(keys, pad)
    hi, lo = hash_keys(data, starts, lengths, SEEDS)
    pairs = list(zip(hi.tolist(), lo.tolist()))
    for i, k in enumerate(keys):
        alone = hash_keys(*_pack([k]), SEEDS)  # the same key alone in a buffer of its size
        assert (int(alone[0][0]), int(alone[1][0])) == pairs[i]
    assert len(set(pairs)) == len(set(keys))
    assert {k: p for k, p in zip(keys, pairs)} == {k: p for k, p in reversed(list(zip(keys, pairs)))}


@settings(max_examples=200, deadline=None)
@given(length=st.integers(0, 41), n=st.integers(1, 12), pad=st.binary(max_size=9), gap=st.integers(0, 3),
       data=st.data())
def test_hash_of_equal_length_keys_is_the_general_hash(length, n, pad, gap, data) -> None:
    """The equal-length path (``hash_keys`` when every key has one length) against the
    general one, keys anywhere in their buffer: the last one ending at the buffer's end
    (``gap`` 0), buffers under 8 bytes, lengths 0..41 (not multiples of 8, past 32)."""
    keys = data.draw(st.lists(st.binary(min_size=length, max_size=length), min_size=n, max_size=n))
    buf = pad + b"".join(k + b"\xa5" * gap for k in keys)
    starts = np.array([len(pad) + i * (length + gap) for i in range(n)], np.int64)
    lengths = np.full(n, length, np.int64)
    arr = np.frombuffer(buf, np.uint8) if buf else np.zeros(0, np.uint8)
    fast = _hash_equal_lengths(arr, starts, length, SEEDS)
    general = _hash_any_lengths(arr, starts, lengths, SEEDS)
    assert fast[0].tolist() == general[0].tolist() and fast[1].tolist() == general[1].tolist()
    order = np.array(data.draw(st.permutations(range(n))), np.int64)  # starts in any order
    shuffled = hash_keys(arr, starts[order], lengths, SEEDS)
    assert shuffled[0].tolist() == general[0][order].tolist()


def test_hash_keys_seeds_and_halves_differ() -> None:
    data, starts, lengths = _pack([b"k1", b"k2"])
    hi, lo = hash_keys(data, starts, lengths, SEEDS)
    hi2, lo2 = hash_keys(data, starts, lengths, (5, 6, 7, 8))
    assert (hi != lo).all() and (hi != hi2).all() and (lo != lo2).all()


def model_put(state: dict, keys: list, offsets: list[int], max_entries: int) -> int:
    """Per record: a new key into a map of ``max_entries`` keys stops the window."""
    for i, (k, o) in enumerate(zip(keys, offsets)):
        if k not in state and len(state) >= max_entries:
            return i
        state[k] = o
    return len(keys)


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.integers(0, 60), min_size=1, max_size=300), cuts=st.lists(st.integers(1, 80), max_size=8),
       slots=st.integers(1, 70), load=st.sampled_from([0.5, 0.9, 1.0]),
       defer=st.sampled_from([None, 0, 1, 5, 40, 10_000]), reserve=st.sampled_from([None, 3, 100, 1000]),
       read_at=st.one_of(st.none(), st.integers(0, 8)), stride=st.sampled_from([1, 3, 20]))
def test_put_records_matches_per_record_puts(keys, cuts, slots, load, defer, reserve, read_at, stride) -> None:
    """The deferred records (sorted at the first read) and the table against the model,
    with the switch from one to the other mid-way: past ``defer_limit`` records, or at
    the first put after a read (``read_at``: after that many windows)."""
    m = SkimpyOffsetMap(slots * BYTES_PER_ENTRY + 7, load_factor=load)
    if defer is not None:
        m.defer_limit = min(defer, m.defer_limit)  # lowered only: memory stays bounded
    if reserve is not None:
        m.reserve(reserve)
    assert m.reserved_bytes <= m.memory
    raw = [b"key-%d" % k if k % 7 else b"long-key-%d-" % k + b"x" * 40 for k in keys]
    data, starts, lengths = _pack(raw)
    hi, lo = m.hash(data, starts, lengths)
    offsets = np.arange(len(keys), dtype=np.int64) * stride + 10  # is_latest: bitmap (1, 3) or search (20)
    state: dict = {}
    pos, stopped = 0, False
    bounds = sorted({min(c, len(keys)) for c in np.cumsum(cuts).tolist()} | {len(keys)})
    modes = []
    for w, end in enumerate(bounds):
        if end <= pos:
            continue
        if w == read_at:  # a read settles the deferred records; the next put goes to the table
            assert m.get_records(hi[:pos], lo[:pos]).tolist() == [state.get(k, -1) for k in raw[:pos]]
            assert m.sorted_offsets().tolist() == sorted(state.values())
            assert m.is_latest(offsets).tolist() == [o in state.values() for o in offsets.tolist()]
        want = model_put(state, raw[pos:end], offsets[pos:end].tolist(), m.max_entries)
        got = m.put_records(hi[pos:end], lo[pos:end], offsets[pos:end])
        modes.append(m.mode)
        assert got == want and m.reserved_bytes <= m.memory
        if got < end - pos:
            stopped = True
            break
        pos = end
    deferred = min(pos if not stopped else len(keys), len(keys))
    if modes and modes[-1] == "deferred":  # never past defer_limit records, nor read
        assert m.puts <= m.defer_limit and deferred <= m.defer_limit
    if pos > m.defer_limit:
        assert modes[-1] == "table"
    assert len(m) == len(state) <= m.max_entries <= m.slots and m.capacity <= m.slots
    assert m.is_full() == (len(state) >= m.max_entries)
    assert stopped == (len(set(raw)) > m.max_entries)
    expect_latest = max(state.values()) if state else -1
    assert m.latest_offset == expect_latest
    got_offsets = m.get_records(hi, lo).tolist()
    assert got_offsets == [state.get(k, -1) for k in raw]
    assert m.sorted_offsets().tolist() == sorted(state.values())
    probe = np.arange(0, int(offsets[-1]) + 30, dtype=np.int64)  # below, between, above the map's
    assert m.is_latest(probe).tolist() == [o in set(state.values()) for o in probe.tolist()]
    for k in raw[:5]:
        assert m.get(k) == state.get(k, -1)
    m.put(raw[0], 10_000)  # one more put after the reads: the table takes it
    assert m.mode == "table" and m.get(raw[0]) == 10_000 and m.latest_offset == 10_000
    state[raw[0]] = 10_000
    assert m.is_latest(probe).tolist() == [o in set(state.values()) for o in probe.tolist()]
    assert bool(m.is_latest(np.array([10_000], np.int64))[0])


@pytest.mark.parametrize("window", [1000, 7000, 40000])
@pytest.mark.parametrize("defer", [0, 50_000, None])
def test_a_growing_table_keeps_every_entry(window, defer) -> None:
    """The table (growing from the start, or after 50,000 deferred records) and the
    sorted form (every record deferred) hold the same."""
    m = SkimpyOffsetMap(200_000 * BYTES_PER_ENTRY * 2)
    if defer is not None:
        m.defer_limit = defer
    rng = np.random.default_rng(window)
    keys = rng.integers(0, 60_000, 120_000)
    raw = [b"k%d" % k for k in keys.tolist()]
    data, starts, lengths = _pack(raw)
    hi, lo = m.hash(data, starts, lengths)
    offsets = np.arange(keys.size, dtype=np.int64)
    for a in range(0, keys.size, window):
        assert m.put_records(hi[a:a + window], lo[a:a + window], offsets[a:a + window]) == min(window, keys.size - a)
    last = {k: i for i, k in enumerate(raw)}
    assert len(m) == len(last) and m.mode == ("sorted" if defer is None else "table")
    assert m.capacity > 16384 or defer is None
    assert m.get_records(hi, lo).tolist() == [last[k] for k in raw]
    assert m.sorted_offsets().tolist() == sorted(last.values())


def test_dedupe_last_with_equal_high_halves() -> None:
    hi = np.array([7, 7, 3, 7, 3, 7], np.uint64)
    lo = np.array([1, 2, 9, 1, 9, 2], np.uint64)
    firsts, lasts = dedupe_last(hi, lo)
    assert firsts.tolist() == [0, 1, 2] and lasts.tolist() == [3, 5, 4]


def test_deferred_records_with_equal_high_halves_go_to_the_table() -> None:
    """Equal high halves of different keys: the sorted form needs distinct high halves,
    so settling builds the table instead; lookups stay exact."""
    m = SkimpyOffsetMap(1000 * BYTES_PER_ENTRY)
    hi = np.array([7 << 40, 7 << 40, 3 << 40, 7 << 40, 3 << 40, 7 << 40], np.uint64)
    lo = np.array([1, 2, 9, 1, 9, 2], np.uint64)
    assert m.put_records(hi, lo, np.arange(6, dtype=np.int64) + 20) == 6 and m.mode == "deferred"
    assert m.get_records(hi, lo).tolist() == [23, 25, 24, 23, 24, 25] and m.mode == "table"
    assert m.get_records(np.array([7 << 40], np.uint64), np.array([3], np.uint64)).tolist() == [-1]
    assert m.sorted_offsets().tolist() == [23, 24, 25] and len(m) == 3
    m2 = SkimpyOffsetMap(1000 * BYTES_PER_ENTRY)  # distinct high halves: the sorted form
    assert m2.put_records(hi[[0, 2]], lo[[0, 2]], np.array([1, 2], np.int64)) == 2
    assert m2.get_records(hi, lo).tolist() == [1, -1, 2, 1, 2, -1] and m2.mode == "sorted"


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.one_of(st.integers(0, 40), st.integers(0, 2**64 - 1),
                                 st.integers(2**64 - 40, 2**64 - 1)), min_size=1, max_size=300))
def test_order_by_high_half_is_a_stable_argsort(values) -> None:
    """The value sort with the index in the low bits against a stable argsort: small
    values (they differ only in the bits the index takes: the argsort fallback) and
    large ones, repeated."""
    hi = np.array(values, np.uint64)
    order, shi = _order_by_high_half(hi)
    assert order.tolist() == np.argsort(hi, kind="stable").tolist()
    assert shi.tolist() == hi[order].tolist()


def test_reserved_bytes_bound_the_deferred_records() -> None:
    m = SkimpyOffsetMap(1000 * BYTES_PER_ENTRY)  # 900 entries; 500 deferred records at most
    assert (m.max_entries, m.defer_limit) == (900, 500)
    m.reserve(400)
    assert m.reserved_bytes == 400 * SETTLE_BYTES_PER_RECORD and m.table_bytes == 0
    m.reserve(700)  # past defer_limit: a table may be needed, its bytes are counted
    assert m.reserved_bytes == 1000 * BYTES_PER_ENTRY
    m.clear()
    assert m.reserved_bytes == 0 and m.mode == "deferred"


def test_full_table_at_load_factor_one() -> None:
    m = SkimpyOffsetMap(5 * BYTES_PER_ENTRY, load_factor=1.0)
    hi = np.array([1 << 40, 1 << 40, 2 << 40, 3 << 40, 4 << 40], np.uint64)  # all in slot 0 and up
    lo = np.array([1, 2, 3, 4, 5], np.uint64)
    assert m.put_records(hi, lo, np.arange(5, dtype=np.int64)) == 5
    assert m.get_records(hi, lo).tolist() == [0, 1, 2, 3, 4]
    assert m.get_records(np.array([1 << 40], np.uint64), np.array([99], np.uint64)).tolist() == [-1]
    assert m.put_records(hi[:2], lo[:2], np.array([7, 8], np.int64)) == 2  # present keys still go in
    assert m.put_records(np.array([9], np.uint64), lo[:1], np.array([9], np.int64)) == 0
    assert m.latest_offset == 8 and m.get_records(hi[:2], lo[:2]).tolist() == [7, 8]


# --- rewrite_run against _splice ---

record_st = st.tuples(st.one_of(st.none(), st.binary(max_size=40)), st.one_of(st.none(), st.binary(max_size=60)),
                      st.integers(0, 5000), st.booleans())


@settings(max_examples=100, deadline=None)
@given(batches=st.lists(st.tuples(st.lists(record_st, min_size=1, max_size=12), st.booleans(), st.booleans()),
                        min_size=1, max_size=8), data=st.data())
def test_rewrite_run_equals_splice(batches, data) -> None:
    buf = b""
    offset = 100
    for records, log_append_time, pid in batches:
        encoded = encode_batch([(k, v, 1_700_000_000_000 + ts, [("h", b"x")] if hdr else [])
                                for k, v, ts, hdr in records], base_offset=offset,
                               timestamp_type=1 if log_append_time else 0,
                               producer_id=7 if pid else -1, producer_epoch=0 if pid else -1,
                               base_sequence=offset if pid else -1)
        buf += encoded
        offset += len(records) + 3
    headers = list(iter_batch_headers(buf))
    layout = RecordLayout(buf, headers, 1 << 20)
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=layout.n, max_size=layout.n)), bool)
    nb = len(headers)
    kept = np.bincount(layout.batch, weights=keep, minlength=nb).astype(np.int64)
    kept_idx = np.flatnonzero(keep)
    ptr = np.zeros(nb + 1, np.int64)
    np.cumsum(kept, out=ptr[1:])
    max_delta = np.zeros(nb, np.int64)
    nonempty = np.flatnonzero(kept)
    if nonempty.size:
        max_delta[nonempty] = np.maximum.reduceat(layout.ts_delta[kept_idx], ptr[nonempty])
    starts, ends, run_ptr = layout.runs(kept_idx)
    positions = np.array([p for p, _ in headers], np.int64)
    sizes = np.array([h.size_in_bytes for _, h in headers], np.int64)
    counts = np.array([h.records_count for _, h in headers], np.int64)
    # the layout's gathered headers are the batches' own, field by field
    assert [tuple(row) for row in layout.header.tolist()] == [tuple(h) for _, h in headers]
    assert layout.positions.tolist() == positions.tolist() and layout.sizes.tolist() == sizes.tolist()
    out, emitted, out_headers = rewrite_run(buf, layout.region_bytes, layout.header, positions, sizes, kept,
                                            max_delta, starts, ends, run_ptr, headers=[h for _, h in headers])
    assert out_headers == list(iter_batch_headers(bytes(out)))  # the headers given back are the bytes'
    assert bytes(rewrite_run(buf, layout.region_bytes, layout.header, positions, sizes, kept, max_delta,
                             starts, ends, run_ptr)[0]) == bytes(out)
    expected = []
    for j, (pos, h) in enumerate(headers):
        if kept[j] == counts[j]:
            expected.append(buf[pos:pos + h.size_in_bytes])
        elif kept[j]:
            a, b = run_ptr[j], run_ptr[j + 1]
            body = layout.join(starts[a:b].tolist(), ends[a:b].tolist())
            expected.append(Cleaner._splice(body, h, int(kept[j]), int(max_delta[j])))
    assert bytes(out) == b"".join(expected)
    assert emitted.tolist() == [bool(k) for k in kept]


# --- whole cleanings against the model ---

log_keys = st.one_of(st.none(), st.sampled_from([b"", b"a", b"a\x00", b"b"]), st.binary(max_size=6),
                     st.binary(min_size=33, max_size=50))


def expected_cleaning(records, bases: list[int], active_base: int, dirty_start: int, max_entries: int):
    """(end offset, records after) of a cleaning from ``dirty_start`` to the active segment
    by the per-record model (no tombstones nor transactions here)."""
    state: dict = {}
    end = active_base
    last_put = None
    for o, k, _ in records:
        if o < dirty_start or o >= active_base or k is None:
            continue
        if k not in state and len(state) >= max_entries:
            end = last_put + 1
            break
        state[k] = o
        last_put = o
    rewritten = [b for b in bases if b < end and b < active_base]
    seg_ends = bases[1:] + [active_base]
    rewritten_ranges = [(b, e) for b, e in zip(bases, seg_ends) if b in rewritten]
    after = []
    for o, k, v in records:
        if not any(b <= o < e for b, e in rewritten_ranges):
            after.append((o, k, v))
        elif k is not None and (o >= end or o >= state.get(k, -1)):
            after.append((o, k, v))
    return end, after


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.tuples(st.lists(st.tuples(log_keys, st.binary(min_size=1, max_size=8)), min_size=1,
                                           max_size=6), st.booleans(), st.sampled_from([0, 0, 1])),
                        min_size=1, max_size=40),
       slots=st.sampled_from([2, 3, 5, 9, 40, 1000, 20000]), segment_bytes=st.sampled_from([600, 1200, 5000]),
       window=st.sampled_from([None, 150, 400]), defer=st.sampled_from([None, None, 0, 4, 30]))
def test_cleanings_match_the_per_record_model(tmp_path_factory, batches, slots, segment_bytes, window,
                                              defer) -> None:
    """Also with windows of a few batches (``window``), so that pass 2 takes the first
    windows of a segment from pass 1's walk, as far as the dedupe buffer's room beside
    the map allows (none with a few slots, some, or all with 20,000), and reads the
    rest again; and with the map's records deferred and sorted (``defer_limit`` as the
    memory gives it), its table from the start (0), or deferred then switched to the
    table mid-cleaning (4, 30: past that many records)."""
    # null keys are refused by a compacted topic: written under cleanup.policy=delete
    props = {"segment.bytes": segment_bytes, "min.cleanable.dirty.ratio": 0.01}
    env = Env(tmp_path_factory.mktemp("v"), **props, **{"cleanup.policy": "delete"})
    for records, roll, compression in batches:
        env.produce(records, compression=compression)
        if roll:
            env.log.roll()
    env.produce([(b"tail", b"in-active")])
    env.config = LogConfig.from_props({**props, "cleanup.policy": "compact"})
    env.log.update_config(env.config)
    max_entries = SkimpyOffsetMap(slots * BYTES_PER_ENTRY).max_entries
    dirty = 0
    for _ in range(4):
        before = read_all(env.log)
        bases = [s.base_offset for s in env.log.segments]
        active_base = env.log.active_segment.base_offset
        end, after = expected_cleaning(before, bases[:-1], active_base, dirty, max_entries)
        cleaner = env.cleaner(memory=slots * BYTES_PER_ENTRY)
        if window is not None:
            cleaner._cleaners[0].window_bytes = window
        omap = cleaner._cleaners[0].offset_map
        if defer is not None:
            omap.defer_limit = min(defer, omap.defer_limit)
        cleaned = cleaner.do_one_cleaning()
        if not cleaned:
            assert dirty >= active_base or not any(s.size for s in env.log.segments[:-1] if s.base_offset >= dirty)
            break
        assert CleanerCheckpoints().read(env.log.parent_dir)[TP] == end
        assert read_all(env.log) == after
        dirty = end
        if dirty >= active_base:
            break


def test_pass_2_takes_pass_1_walks_while_they_fit_in_the_buffer(tmp_path) -> None:
    """Pass 1 keeps its walks of a segment's first windows in the dedupe buffer's bytes the
    map leaves (``reserved_bytes``); pass 2 takes those and reads the rest again. With
    room for some of the windows, both kinds are met, and the log after is the same as
    with no room at all."""
    logs = []
    # 300 records: 10,000 bytes (416 slots, 208 deferred records at most): the table,
    # switched to past 208 records, leaves no room; 14,600 bytes: 300 records deferred
    # (48 bytes each: 14,400), no room; then room for some, all
    for memory in (10_000, 14_600, 34_500, 1 << 22):
        env = Env(tmp_path / str(memory), **{"segment.bytes": 1 << 20, "min.cleanable.dirty.ratio": 0.01})
        for b in range(60):
            env.produce([(b"k%d" % ((b * 7 + i) % 45), b"v%d-%d" % (b, i)) for i in range(5)])
        env.produce([(b"tail", b"in-active")])
        env.log.roll()
        log_cleaner = env.cleaner(memory=memory)
        cleaner = log_cleaner._cleaners[0]
        cleaner.window_bytes = 600
        given_layouts: list[bool] = []

        def spy(*args, clean_window=cleaner._clean_window, seen=given_layouts, **kw):
            seen.append(len(args) + len(kw) > 8)  # pass 1's layout given
            return clean_window(*args, **kw)

        cleaner._clean_window = spy  # type: ignore[method-assign]
        assert log_cleaner.do_one_cleaning()
        assert len(given_layouts) > 10
        expected = {10_000: {False}, 14_600: {False}, 34_500: {True, False}, 1 << 22: {True}}[memory]
        assert set(given_layouts) == expected, (memory, given_layouts)
        assert cleaner.offset_map.mode == ("table" if memory == 10_000 else "sorted")
        logs.append(read_all(env.log))
    assert logs[0] == logs[1] == logs[2] == logs[3]
    assert {k for _, k, _ in logs[0]} == {b"k%d" % i for i in range(45)} | {b"tail"}


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
