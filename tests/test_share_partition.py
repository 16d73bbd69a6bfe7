"""The share-partition state machine (``broker.server.share.partition``): acquisition,
acknowledgement, release, lock expiry, the delivery count limit and persistence, against a
per-offset model driven by generated operations (hypothesis), plus the cases KIP-932
names one by one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.server.share.partition import (
    ACK_ACCEPT,
    ACK_GAP,
    ACK_REJECT,
    ACK_RELEASE,
    ACK_RENEW,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    InvalidRecordState,
    SharePartition,
)

LIMIT = 3


def test_acquire_acknowledge_and_advance() -> None:
    sp = SharePartition(0, LIMIT)
    assert sp.acquire("a", [(0, 9, False)], 5, 100) == [(0, 9, 1)]  # batch-optimized: the whole batch
    assert sp.acquire("b", [(0, 9, False), (10, 19, False)], 5, 100) == [(10, 19, 1)]
    sp.acknowledge("a", 0, 4, [ACK_ACCEPT])
    assert sp.advance() and sp.start_offset == 5
    with pytest.raises(InvalidRecordState):  # b does not hold a's records
        sp.acknowledge("b", 5, 6, [ACK_ACCEPT])
    sp.acknowledge("a", 5, 9, [ACK_RELEASE, ACK_REJECT, ACK_ACCEPT, ACK_GAP, ACK_RELEASE])
    assert [sp.state_of(o) for o in range(5, 10)] == [(AVAILABLE, 1), (ARCHIVED, 1), (ACKNOWLEDGED, 1),
                                                     (ARCHIVED, 1), (AVAILABLE, 1)]
    assert sp.next_fetch_offset() == 5
    assert sp.acquire("b", [(0, 9, False)], 10, 200) == [(5, 5, 2), (9, 9, 2)]


def test_strict_mode_takes_exactly_max_records() -> None:
    sp = SharePartition(0, LIMIT)
    assert sp.acquire("a", [(0, 9, False), (10, 19, False)], 13, 100, strict=True) == [(0, 12, 1)]
    assert sp.next_fetch_offset() == 13


def test_release_past_the_delivery_limit_archives() -> None:
    sp = SharePartition(0, LIMIT)
    for count in range(1, LIMIT + 1):
        assert sp.acquire("a", [(0, 0, False)], 1, 100) == [(0, 0, count)]
        sp.acknowledge("a", 0, 0, [ACK_RELEASE])
    assert sp.state_of(0) == (ARCHIVED, LIMIT)
    sp.advance()
    assert sp.state_of(0) == (ACKNOWLEDGED, 0)  # archived at the limit, then passed by the start offset
    assert sp.start_offset == 1 and sp.acquire("a", [(0, 0, False)], 1, 100) == []


def test_lock_expiry_and_renew() -> None:
    sp = SharePartition(0, LIMIT)
    sp.acquire("a", [(0, 4, False)], 5, 100)
    sp.acknowledge("a", 0, 1, [ACK_RENEW], deadline=300)
    changed = sp.release(None, now=150)
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in changed] == [(2, 4, AVAILABLE)]
    assert sp.state_of(0) == (ACQUIRED, 1) and sp.state_of(3) == (AVAILABLE, 1)
    assert sp.earliest_deadline() == 300


def test_control_and_aborted_batches_are_never_delivered() -> None:
    sp = SharePartition(0, LIMIT)
    got = sp.acquire("a", [(0, 1, False), (2, 2, True), (3, 4, True), (5, 6, False)], 10, 100)
    assert got == [(0, 1, 1), (5, 6, 1)]
    assert sp.state_of(2) == (ARCHIVED, 0)
    sp.acknowledge("a", 2, 2, [ACK_GAP])  # a GAP for an archived offset is harmless


def test_max_in_flight_bounds_new_records() -> None:
    sp = SharePartition(0, LIMIT)
    assert sp.acquire("a", [(0, 9, False), (10, 19, False)], 100, 100, max_in_flight=10) == [(0, 9, 1)]
    assert sp.in_flight() == 10


def test_log_start_moving_past_the_start_offset() -> None:
    sp = SharePartition(0, LIMIT)
    sp.acquire("a", [(0, 9, False)], 10, 100)
    sp.move_start(6)
    assert sp.start_offset == 6 and sp.state_of(6) == (ACQUIRED, 1)
    with pytest.raises(InvalidRecordState):
        sp.acknowledge("a", 4, 7, [ACK_ACCEPT])


def test_malformed_acknowledgements_are_refused() -> None:
    sp = SharePartition(0, LIMIT)
    sp.acquire("a", [(0, 9, False)], 10, 100)
    for first, last, types in ((5, 4, [1]), (0, 3, [1, 1]), (0, 0, [9]), (0, 0, [])):
        with pytest.raises(ValueError):
            sp.acknowledge("a", first, last, types)


# --- the model ---

class Model:
    """One (state, count, member, deadline) per offset."""

    def __init__(self) -> None:
        self.start = 0
        self.end = 0
        self.o: dict[int, list] = {}

    def advance(self) -> None:
        while self.start < self.end and self.o[self.start][0] in (ACKNOWLEDGED, ARCHIVED):
            del self.o[self.start]
            self.start += 1


ops = st.lists(st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from("ab"), st.integers(1, 12), st.integers(0, 3),
              st.booleans(), st.integers(100, 400)),
    st.tuples(st.just("ack"), st.sampled_from("ab"), st.integers(0, 40), st.integers(1, 6),
              st.lists(st.sampled_from([ACK_ACCEPT, ACK_RELEASE, ACK_REJECT, ACK_GAP]), min_size=1, max_size=6)),
    st.tuples(st.just("expire"), st.integers(0, 500)),
    st.tuples(st.just("leave"), st.sampled_from("ab")),
), max_size=40)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_matches_a_per_offset_model(operations) -> None:
    sp, m = SharePartition(0, LIMIT), Model()
    log_batches = [(b * 4, b * 4 + 3, b % 5 == 4) for b in range(12)]  # 48 offsets, every 5th batch a control batch
    for op in operations:
        if op[0] == "acquire":
            _, member, n, skip, strict, deadline = op
            got = sp.acquire(member, log_batches[skip:], n, deadline, strict=strict)
            taken = 0
            expect = []
            for base, last, control in log_batches[skip:]:
                if taken >= n:
                    break
                for o in range(m.end, base):  # a hole in the log: gaps, archived
                    m.o[o] = [ARCHIVED, 0, None, 0]
                    m.end = o + 1
                for o in range(max(base, m.start), last + 1):
                    if o >= m.end:
                        m.o[o] = [AVAILABLE, 0, None, 0]
                        m.end = o + 1
                if control:
                    for o in range(max(base, m.start), last + 1):
                        if m.o[o][0] == AVAILABLE:
                            m.o[o][0] = ARCHIVED
                    continue
                for o in range(max(base, m.start), last + 1):
                    if m.o[o][0] == AVAILABLE and (not strict or taken < n):
                        m.o[o] = [ACQUIRED, m.o[o][1] + 1, member, deadline]
                        expect.append(o)
                        taken += 1
            assert [o for a, b, _ in got for o in range(a, b + 1)] == expect
            assert all(m.o[o][1] == c for a, b, c in got for o in range(a, b + 1))
        elif op[0] == "ack":
            _, member, first, n, types = op
            last = first + n - 1
            types = types[:1] if len(types) != n else types
            ok = m.start <= first and last < m.end and all(
                (m.o[o][0] == ACQUIRED and m.o[o][2] == member)
                or (m.o[o][0] == ARCHIVED and all(t == ACK_GAP for t in types)) for o in range(first, last + 1))
            if not ok:
                before = [sp.state_of(o) for o in range(0, 50)]
                with pytest.raises(InvalidRecordState):
                    sp.acknowledge(member, first, last, types)
                assert [sp.state_of(o) for o in range(0, 50)] == before
                continue
            sp.acknowledge(member, first, last, types)
            for i, o in enumerate(range(first, last + 1)):
                t = types[0] if len(types) == 1 else types[i]
                if m.o[o][0] != ACQUIRED:
                    continue
                if t == ACK_ACCEPT:
                    m.o[o] = [ACKNOWLEDGED, m.o[o][1], None, 0]
                elif t in (ACK_REJECT, ACK_GAP):
                    m.o[o] = [ARCHIVED, m.o[o][1], None, 0]
                else:
                    m.o[o] = [ARCHIVED if m.o[o][1] >= LIMIT else AVAILABLE, m.o[o][1], None, 0]
        elif op[0] == "expire":
            sp.release(None, now=op[1])
            for o, v in m.o.items():
                if v[0] == ACQUIRED and v[3] <= op[1]:
                    m.o[o] = [ARCHIVED if v[1] >= LIMIT else AVAILABLE, v[1], None, 0]
        else:
            sp.release(op[1])
            for o, v in m.o.items():
                if v[0] == ACQUIRED and v[2] == op[1]:
                    m.o[o] = [ARCHIVED if v[1] >= LIMIT else AVAILABLE, v[1], None, 0]
        sp.advance()
        m.advance()
        assert (sp.start_offset, sp.end_offset) == (m.start, m.end)
        for o in range(m.start, m.end):
            assert sp.state_of(o) == tuple(m.o[o][:2]), o
        runs = sp.runs
        assert all(r.first <= r.last for r in runs)
        assert all(a.last + 1 == b.first for a, b in zip(runs, runs[1:], strict=False))
        assert not runs or (runs[0].first == sp.start_offset and runs[-1].last + 1 == sp.end_offset)
        # persistence: what is written reads back as the same state, locks dropped
        back = SharePartition(0, LIMIT)
        back.load(sp.start_offset, sp.state_batches())
        for o in range(m.start, m.end):
            state, count = m.o[o][:2]
            if state == ACQUIRED:
                state = AVAILABLE
            if state == AVAILABLE and count == 0 and o >= back.end_offset:
                continue  # never delivered, past the last written batch: not in flight after a restart
            assert back.state_of(o) == (state, count), o
