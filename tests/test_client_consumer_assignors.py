"""Partition assignors (broker/client/consumer/assignors.py): range equals kafka-python's
and roundrobin aiokafka's on random groups; sticky user data encodes as Java and
librdkafka do (kafka-python's StickyAssignorUserData without its version prefix); sticky
and cooperative-sticky hold Kafka's properties (every subscribed partition exactly once,
balance, stickiness across rebalances, generations, cooperative revocation before
reassignment)."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
from aiokafka.coordinator.assignors.roundrobin import (
    RoundRobinPartitionAssignor as AioRoundRobin,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KSub

from broker.client.consumer.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    assignor_name,
    decode_sticky_user_data,
    encode_sticky_user_data,
    get_assignor,
)
from broker.client.consumer.offsets import TopicPartition as TP
from broker.client.consumer.protocol import Subscription

TOPICS = ["a", "b", "c", "d"]

group_st = st.tuples(
    st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), min_size=1),
    st.dictionaries(st.text("mnopqrs", min_size=1, max_size=3),
                    st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True),
                    min_size=1, max_size=7),
)


def _kafka_python(assignor, counts, members):
    cluster = SimpleNamespace(partitions_for_topic=lambda t: set(range(counts[t]))
                              if t in counts else None)
    ms = [SimpleNamespace(member_id=m, group_instance_id=None,
                          metadata=KSub(version=0, topics=topics, user_data=b""))
          for m, topics in members.items()]
    out = assignor.assign(cluster, ms)
    return {m: sorted(TP(t, p) for t, ps in a.assigned_partitions for p in ps)
            for m, a in out.items()}


def _aiokafka(assignor, counts, members):
    cluster = SimpleNamespace(partitions_for_topic=lambda t: set(range(counts[t]))
                              if t in counts else None)
    ms = {m: SimpleNamespace(subscription=topics) for m, topics in members.items()}
    out = assignor.assign(cluster, ms)
    return {m: sorted(TP(t, p) for t, ps in a.assignment for p in ps) for m, a in out.items()}


def _ours(assignor, counts, members, **kw):
    subs = {m: Subscription(tuple(ts)) for m, ts in members.items()}
    return assignor.assign(counts, subs, **kw)


@settings(max_examples=300, deadline=None)
@given(group_st)
def test_range_equals_kafka_python(group):
    counts, members = group
    ours = {m: sorted(a) for m, a in _ours(RangeAssignor(), counts, members).items()}
    assert ours == _kafka_python(RangePartitionAssignor, counts, members)


@settings(max_examples=300, deadline=None)
@given(group_st)
def test_roundrobin_equals_aiokafka(group):
    # (kafka-python 3.0.12's roundrobin fails with KeyError when it must skip a member
    # not subscribed to a topic; aiokafka's copy of it does not.)
    counts, members = group
    ours = {m: sorted(a) for m, a in _ours(RoundRobinAssignor(), counts, members).items()}
    assert ours == _aiokafka(AioRoundRobin, counts, members)


def test_range_and_roundrobin_examples():
    # Kafka's javadoc examples.
    members = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
    counts = {"t0": 3, "t1": 3}
    assert _ours(RangeAssignor(), counts, members) == {
        "C0": [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)],
        "C1": [TP("t0", 2), TP("t1", 2)]}
    assert _ours(RoundRobinAssignor(), counts, members) == {
        "C0": [TP("t0", 0), TP("t0", 2), TP("t1", 1)],
        "C1": [TP("t0", 1), TP("t1", 0), TP("t1", 2)]}
    # Different subscriptions (RoundRobinAssignor's javadoc).
    got = _ours(RoundRobinAssignor(), {"t0": 1, "t1": 2, "t2": 3},
                {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]})
    assert got == {"C0": [TP("t0", 0)], "C1": [TP("t1", 0)],
                   "C2": [TP("t1", 1), TP("t2", 0), TP("t2", 1), TP("t2", 2)]}
    # Static members sort first, by group.instance.id.
    got = _ours(RangeAssignor(), {"t0": 3}, {"a": ["t0"], "b": ["t0"], "c": ["t0"]},
                group_instance_ids={"c": "i1", "b": "i2", "a": None})
    assert got == {"c": [TP("t0", 0)], "b": [TP("t0", 1)], "a": [TP("t0", 2)]}


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=5),
                       st.lists(st.integers(0, 1000), min_size=1, max_size=4, unique=True),
                       max_size=3), st.integers(-1, 1000))
def test_sticky_user_data_matches_kafka_python(parts, generation):
    tps = [(t, p) for t, ps in parts.items() for p in ps]
    ours = encode_sticky_user_data(tps, generation)
    # kafka-python 3.0.12 prefixes an int16 version; Java and librdkafka
    # (rdkafka_sticky_assignor.c) write the struct alone, as we do.
    theirs = StickyAssignorUserData(list(parts.items()), generation).encode()[2:]
    assert ours == theirs
    assert decode_sticky_user_data(theirs) == ([TP(t, p) for t, p in tps], generation)
    assert decode_sticky_user_data(encode_sticky_user_data(tps, None))[1] is None


def test_names():
    assert assignor_name("org.apache.kafka.clients.consumer.CooperativeStickyAssignor") == \
        "cooperative-sticky"
    assert isinstance(get_assignor(" roundrobin"), RoundRobinAssignor)
    with pytest.raises(ValueError, match="range"):
        assignor_name("nope")


# -- sticky ---------------------------------------------------------------------------------

def _sticky_subs(members, owned, generation, cooperative):
    subs = {}
    for m, topics in members.items():
        mine = owned.get(m, [])
        if cooperative:
            subs[m] = Subscription(tuple(topics), None, tuple(mine), generation, None, 3)
        else:
            subs[m] = Subscription(tuple(topics), encode_sticky_user_data(mine, generation))
    return subs


def _check_valid(counts, members, out):
    want = Counter(TP(t, p) for t in {t for ts in members.values() for t in ts} if t in counts
                   for p in range(counts[t]))
    got = Counter(tp for a in out.values() for tp in a)
    assert got == want  # every subscribed partition exactly once
    for m, a in out.items():
        assert all(tp.topic in members[m] for tp in a)


def _check_balanced(members, out):
    sizes = {m: len(a) for m, a in out.items()}
    if len({frozenset(ts) for ts in members.values()}) == 1:
        assert max(sizes.values()) - min(sizes.values()) <= 1
    else:  # no partition could move to an eligible member with 2+ fewer
        for m, a in out.items():
            for tp in a:
                for other, ts in members.items():
                    if tp.topic in ts:
                        assert sizes[m] - sizes[other] <= 1, (tp, m, other, sizes)


@settings(max_examples=200, deadline=None)
@given(group_st, st.data())
def test_sticky_valid_balanced_and_sticky(group, data):
    counts, members = group
    a = StickyAssignor()
    first = a.assign(counts, _sticky_subs(members, {}, 1, False))
    _check_valid(counts, members, first)
    _check_balanced(members, first)
    # A member leaves and another joins: the next generation keeps what balance allows.
    names = sorted(members)
    gone = data.draw(st.sampled_from(names))
    members2 = {m: ts for m, ts in members.items() if m != gone}
    members2["zz"] = data.draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4,
                                        unique=True))
    second = a.assign(counts, _sticky_subs(members2, first, 1, False))
    _check_valid(counts, members2, second)
    _check_balanced(members2, second)
    if len({frozenset(ts) for ts in members2.values()}) == 1:
        # Equal subscriptions: a member keeps min(what it had, its quota).
        total = sum(len(x) for x in second.values())
        quota_min = total // len(members2)
        for m in members2:
            kept = set(first.get(m, [])) & set(second[m])
            assert len(kept) >= min(len(first.get(m, [])), quota_min)


def test_sticky_keeps_everything_when_nothing_changes():
    counts = {"a": 5, "b": 4}
    members = {"m1": ["a", "b"], "m2": ["a", "b"], "m3": ["a"]}
    a = StickyAssignor()
    first = a.assign(counts, _sticky_subs(members, {}, 3, False))
    again = a.assign(counts, _sticky_subs(members, first, 3, False))
    assert {m: set(x) for m, x in again.items()} == {m: set(x) for m, x in first.items()}


def test_sticky_example_member_leaves():
    # Kafka's StickyAssignor javadoc: 3 members, t0..t3 with 2 partitions each; C1 leaves.
    counts = {f"t{i}": 2 for i in range(4)}
    members = {c: list(counts) for c in ("C0", "C1", "C2")}
    a = StickyAssignor()
    first = a.assign(counts, _sticky_subs(members, {}, 1, False))
    assert first == {"C0": [TP("t0", 0), TP("t1", 1), TP("t3", 0)],
                     "C1": [TP("t0", 1), TP("t2", 0), TP("t3", 1)],
                     "C2": [TP("t1", 0), TP("t2", 1)]}
    del members["C1"]
    second = a.assign(counts, _sticky_subs(members, first, 1, False))
    assert set(first["C0"]) <= set(second["C0"]) and set(first["C2"]) <= set(second["C2"])
    assert sorted(map(len, second.values())) == [4, 4]


def test_generations_and_double_claims():
    counts = {"t": 4}
    members = {"a": ["t"], "b": ["t"]}
    subs = {"a": Subscription(("t",), encode_sticky_user_data([("t", 0), ("t", 1)], 5)),
            # b's claim is from an older generation: ignored
            "b": Subscription(("t",), encode_sticky_user_data([("t", 0), ("t", 2)], 4))}
    out = StickyAssignor().assign(counts, subs)
    assert {TP("t", 0), TP("t", 1)} <= set(out["a"])
    # the same generation claiming the same partition: nobody keeps it by claim
    subs = {"a": Subscription(("t",), None, (("t", 0), ("t", 1)), 7, None, 3),
            "b": Subscription(("t",), None, (("t", 0), ("t", 2)), 7, None, 3)}
    c = CooperativeStickyAssignor()
    out = c.assign(counts, subs)
    assert TP("t", 0) in c.partitions_transferring_ownership
    assert TP("t", 0) not in out["a"] + out["b"]  # withheld this round
    _ = members


def test_cooperative_revokes_before_moving():
    counts = {"t": 6}
    c = CooperativeStickyAssignor()
    # Round 0: one member owns everything; a second joins.
    subs = {"m1": Subscription(("t",), None, tuple(("t", p) for p in range(6)), 3, None, 3),
            "m2": Subscription(("t",), None, (), -1, None, 3)}
    r1 = c.assign(counts, subs)
    assert len(r1["m1"]) == 3 and r1["m2"] == []  # m1 revokes 3; nobody gets them yet
    moving = set(c.partitions_transferring_ownership)
    assert len(moving) == 3 and moving.isdisjoint(r1["m1"])
    # Round 1: m1 owns 3; the revoked ones are free and go to m2.
    subs = {"m1": Subscription(("t",), None, tuple(r1["m1"]), 4, None, 3),
            "m2": Subscription(("t",), None, (), 4, None, 3)}
    r2 = c.assign(counts, subs)
    assert r2["m1"] == r1["m1"] and set(r2["m2"]) == moving
    assert c.partitions_transferring_ownership == {}
    # Older subscriptions carry the generation in user_data.
    sub_v1 = Subscription(("t",), c.subscription_user_data(["t"], (), 9), (("t", 1),), -1, None, 1)
    assert c.member_data(sub_v1).generation == 9


@settings(max_examples=150, deadline=None)
@given(group_st, st.data())
def test_cooperative_never_gives_an_owned_partition_to_another(group, data):
    counts, members = group
    c = CooperativeStickyAssignor()
    start = RoundRobinAssignor().assign(counts, {m: Subscription(tuple(ts))
                                                 for m, ts in members.items()})
    newcomer = data.draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True))
    members2 = dict(members, zz=newcomer)
    subs = {m: Subscription(tuple(ts), None, tuple(start.get(m, ())), 2, None, 3)
            for m, ts in members2.items()}
    out = c.assign(counts, subs)
    owner = {tp: m for m, tps in start.items() for tp in tps}
    for m, tps in out.items():
        for tp in tps:
            assert owner.get(tp, m) == m  # only free or own partitions
    # Owners revoke and members rejoin until nothing moves (each round hands over what
    # the previous one freed): this settles in a few rounds, complete and balanced.
    final = out
    for generation in range(3, 8):
        subs = {m: Subscription(tuple(ts), None, tuple(final[m]), generation, None, 3)
                for m, ts in members2.items()}
        final = c.assign(counts, subs)
        if not c.partitions_transferring_ownership:
            break
    assert c.partitions_transferring_ownership == {}
    _check_valid(counts, members2, final)
    _check_balanced(members2, final)
