"""broker.server.group.assignors and the reconciliation of consumer_group: balance,
stickiness, range co-partitioning, and "never two owners" under random membership changes."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.server.group.assignors import RANGE, UNIFORM, assign
from broker.server.group.consumer_group import (
    MEMBER_STABLE,
    MEMBER_UNREVOKED_PARTITIONS,
    ConsumerGroup,
    ConsumerGroupMember,
    reconcile,
)

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


def _flat(assignment):
    return {(t, p) for a in assignment.values() for t, ps in a.items() for p in ps}


def _count(a):
    return sum(len(ps) for ps in a.values())


def _check_complete(result, subscriptions, partitions):
    """Every subscribed partition exactly once, each to a subscriber."""
    seen = []
    for m, a in result.items():
        for t, ps in a.items():
            assert t in subscriptions[m]
            seen.extend((t, p) for p in ps)
    assert len(seen) == len(set(seen))
    wanted = {(t, p) for t, n in partitions.items() if any(t in s for s in subscriptions.values()) for p in range(n)}
    assert set(seen) == wanted


@pytest.mark.parametrize("name", [UNIFORM, RANGE])
def test_every_partition_once_and_balanced_for_equal_subscriptions(name):
    subs = {f"m{i}": {T1, T2} for i in range(4)}
    parts = {T1: 6, T2: 3}
    result = assign(name, subs, parts)
    _check_complete(result, subs, parts)
    counts = sorted(_count(a) for a in result.values())
    if name == UNIFORM:
        assert counts[-1] - counts[0] <= 1
    assert set(result) == set(subs)


def test_uniform_is_sticky_when_a_member_joins():
    subs = {"a": {T1}, "b": {T1}}
    parts = {T1: 6}
    first = assign(UNIFORM, subs, parts)
    subs["c"] = {T1}
    second = assign(UNIFORM, subs, parts, first)
    _check_complete(second, subs, parts)
    assert sorted(_count(a) for a in second.values()) == [2, 2, 2]
    for m in ("a", "b"):  # what stays with a and b was theirs: only moves to c
        assert second[m][T1] <= first[m][T1]


def test_uniform_is_sticky_when_a_member_leaves():
    subs = {"a": {T1}, "b": {T1}, "c": {T1}}
    parts = {T1: 6}
    first = assign(UNIFORM, subs, parts)
    del subs["c"]
    second = assign(UNIFORM, subs, parts, {m: first[m] for m in subs})
    for m in ("a", "b"):
        assert first[m][T1] <= second[m][T1]


def test_range_co_partitions_topics_of_equal_size():
    subs = {"a": {T1, T2}, "b": {T1, T2}, "c": {T1, T2}}
    result = assign(RANGE, subs, {T1: 7, T2: 7})
    for a in result.values():
        assert a[T1] == a[T2]
    assert result["a"][T1] == frozenset({0, 1, 2})  # first member gets the extra partition


def test_heterogeneous_subscriptions():
    subs = {"a": {T1}, "b": {T1, T2}, "c": {T2, T3}}
    parts = {T1: 4, T2: 4, T3: 1}
    for name in (UNIFORM, RANGE):
        result = assign(name, subs, parts)
        _check_complete(result, subs, parts)


def test_unknown_assignor():
    with pytest.raises(ValueError):
        assign("sticky", {}, {})


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sets(st.sampled_from([T1, T2, T3]), min_size=1), min_size=1, max_size=6),
       st.sampled_from([UNIFORM, RANGE]), st.integers(0, 8), st.integers(0, 8))
def test_property_complete_and_exclusive(subscription_list, name, n1, n2):
    subs = {f"m{i}": s for i, s in enumerate(subscription_list)}
    parts = {T1: n1, T2: n2, T3: 3}
    result = assign(name, subs, parts)
    _check_complete(result, subs, parts)
    if name == UNIFORM and len({frozenset(s) for s in subs.values()}) == 1:
        counts = [_count(a) for a in result.values()]
        assert max(counts) - min(counts) <= 1


# --- reconciliation: a member never gets a partition another member still holds ---

def _owners_exclusive(group: ConsumerGroup):
    held: dict = {}
    for m in group.members.values():
        for t, ps in m.assigned.items():
            for p in ps:
                assert (t, p) not in held, f"{(t, p)} assigned to {held.get((t, p))} and {m.member_id}"
                held[(t, p)] = m.member_id
    for m in group.members.values():
        for t, ps in m.pending_revocation.items():
            for p in ps:
                assert held.get((t, p)) in (None,), f"{(t, p)} pending revocation at {m.member_id} but assigned"


def _new_target(group: ConsumerGroup):
    group.group_epoch += 1
    subs = {m: {T1} for m in group.members}
    group.target = assign(UNIFORM, subs, {T1: 6}, group.target)
    group.assignment_epoch = group.group_epoch


def test_revocation_before_reassignment():
    g = ConsumerGroup("g")
    a = ConsumerGroupMember("a")
    g.add_member(a)
    _new_target(g)
    reconcile(g, a, None)
    assert a.assigned[T1] == frozenset(range(6)) and a.state == MEMBER_STABLE and a.member_epoch == 1
    b = ConsumerGroupMember("b")
    g.add_member(b)
    _new_target(g)
    reconcile(g, b, None)  # b at epoch 2 but a still owns everything: b gets nothing yet
    assert b.member_epoch == 2 and not b.assigned
    _owners_exclusive(g)
    reconcile(g, a, {T1: frozenset(range(6))})  # a must revoke half first, at its old epoch
    assert a.state == MEMBER_UNREVOKED_PARTITIONS and a.member_epoch == 1
    assert len(a.assigned[T1]) == 3 and len(a.pending_revocation[T1]) == 3
    reconcile(g, b, {})
    assert not b.assigned  # still held by a (pending revocation)
    _owners_exclusive(g)
    reconcile(g, a, {T1: a.assigned[T1]})  # a acknowledges: omits the revoked partitions
    assert a.state == MEMBER_STABLE and a.member_epoch == 2 and not a.pending_revocation
    reconcile(g, b, {})
    assert b.assigned[T1] == g.target["b"][T1] and b.state == MEMBER_STABLE
    _owners_exclusive(g)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["join", "leave", "hb"]), st.integers(0, 5)), max_size=40))
def test_property_never_two_owners(ops):
    g = ConsumerGroup("g")
    for op, i in ops:
        mid = f"m{i}"
        if op == "join" and mid not in g.members:
            g.add_member(ConsumerGroupMember(mid))
            _new_target(g)
        elif op == "leave" and mid in g.members:
            g.remove_member(mid)
            _new_target(g)
        elif op == "hb" and mid in g.members:
            m = g.members[mid]
            reconcile(g, m, dict(m.assigned))  # a client that revokes at once
        _owners_exclusive(g)
    # enough heartbeats converge everybody to the target
    for _ in range(4):
        for m in list(g.members.values()):
            reconcile(g, m, dict(m.assigned))
    for m in g.members.values():
        assert m.assigned == {t: ps for t, ps in g.target.get(m.member_id, {}).items() if ps}
        assert m.member_epoch == g.assignment_epoch
