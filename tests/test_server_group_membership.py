"""Group membership of the classic protocol (JoinGroup / SyncGroup / Heartbeat /
LeaveGroup, broker/server/group/membership.py) on the wire, with the raw client against a
real broker subprocess: the MEMBER_ID_REQUIRED round trip, generations and the leader's
view, protocol selection, delayed joins, heartbeats during a rebalance, session expiry,
static membership, the limits, generation-checked commits, DescribeGroups / ListGroups /
DeleteGroups / OffsetDelete of a group with members, the group record in
__consumer_offsets and its reload after a restart, and the protected internal topic.

Members that must join at the same time join from threads (a JoinGroup is answered when
the rebalance completes). No timed assertion: waits are bounded loops on a condition.
"""

from __future__ import annotations

import struct
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from broker.protocol import ApiKey, ErrorCode
from tests.support import waits
from tests.support.broker import RawClient
from tests.test_server_group_offsets import (
    OFFSETS_TOPIC,
    commit,
    create,
    decode_offsets_record,
    delete_groups,
    describe,
    fetched,
    offsets_partition,
    offsets_records,
    unique,
)

FAST = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: the topics and empty user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def client(broker, client_id: str = "raw-member") -> RawClient:
    return RawClient(broker.host, broker.port, client_id=client_id, timeout=60)


def join(c: RawClient, group: str, member: str = "", *, version: int = 5, session: int = 10000,
         rebalance: int = 10000, instance: str | None = None, protocol_type: str = "consumer",
         protocols: list | None = None):
    if protocols is None:
        protocols = [("range", subscription("t"))]
    return c.request(ApiKey.JOIN_GROUP, version, {
        "group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance, "member_id": member,
        "group_instance_id": instance, "protocol_type": protocol_type,
        "protocols": [{"name": n, "metadata": m} for n, m in protocols]})


def join_new(c: RawClient, group: str, **kw):
    """v4+: the MEMBER_ID_REQUIRED round trip, then the real join."""
    r = join(c, group, **kw)
    assert r.error_code == ErrorCode.MEMBER_ID_REQUIRED and r.member_id.startswith(c.client_id + "-")
    assert (r.generation_id, r.leader, r.members) == (-1, "", [])
    return join(c, group, r.member_id, **kw)


def sync(c: RawClient, group: str, generation: int, member: str, assignments: dict | None = None,
         version: int = 3, instance: str | None = None):
    return c.request(ApiKey.SYNC_GROUP, version, {
        "group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance,
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]})


def heartbeat(c: RawClient, group: str, generation: int, member: str, instance: str | None = None) -> int:
    return c.request(ApiKey.HEARTBEAT, 3, {"group_id": group, "generation_id": generation, "member_id": member,
                                           "group_instance_id": instance}).error_code


def leave(c: RawClient, group: str, members: list, version: int = 3):
    if version >= 3:
        return c.request(ApiKey.LEAVE_GROUP, version, {"group_id": group, "members": [
            {"member_id": m, "group_instance_id": i} for m, i in members]})
    return c.request(ApiKey.LEAVE_GROUP, version, {"group_id": group, "member_id": members[0][0]})


def wait_until(cond, timeout: float = 60.0, what: str = "condition"):
    return waits.wait_until(cond, timeout, f"{what} not reached", interval=0.1)


def state_of(c: RawClient, group: str) -> str:
    return describe(c, [group])[0].group_state


@pytest.fixture
def broker(broker_factory):
    return broker_factory(FAST)


def test_join_sync_heartbeat_leave_one_member(broker):
    group = unique("g-one")
    with client(broker, "solo") as c:
        j = join_new(c, group)
        assert j.error_code == 0 and j.generation_id == 1 and j.protocol_name == "range"
        assert j.leader == j.member_id  # the only member leads and gets every member's metadata
        assert [(m.member_id, bytes(m.metadata)) for m in j.members] == [(j.member_id, subscription("t"))]
        assert state_of(c, group) == "CompletingRebalance"
        s = sync(c, group, 1, j.member_id, {j.member_id: b"assignment-1"})
        assert (s.error_code, bytes(s.assignment)) == (0, b"assignment-1")
        assert heartbeat(c, group, 1, j.member_id) == 0
        d = describe(c, [group])[0]
        assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
        assert [(m.member_id, m.client_id, m.client_host, bytes(m.member_metadata), bytes(m.member_assignment))
                for m in d.members] == [(j.member_id, "solo", "/127.0.0.1", subscription("t"), b"assignment-1")]
        listed = c.request(ApiKey.LIST_GROUPS, 2, {}).groups
        assert [(g.protocol_type) for g in listed if g.group_id == group] == ["consumer"]
        # a stable follower-less rejoin with the same protocols changes nothing... but the
        # leader's rejoin rebalances (it may need to reassign)
        j2 = join(c, group, j.member_id)
        assert (j2.error_code, j2.generation_id) == (0, 2)
        assert sync(c, group, 2, j.member_id, {j.member_id: b"a2"}).error_code == 0
        r = leave(c, group, [(j.member_id, None)], version=1)
        assert r.error_code == 0
        d = describe(c, [group])[0]
        assert (d.group_state, d.members) == ("Empty", [])
        assert heartbeat(c, group, 2, j.member_id) == ErrorCode.UNKNOWN_MEMBER_ID
        assert delete_groups(c, [group]) == {group: 0}


def test_two_members_rebalance_and_leader_assigns(broker):
    group = unique("g-two")
    with client(broker, "a") as a, client(broker, "b") as b, ThreadPoolExecutor(2) as pool:
        ja = join_new(a, group, protocols=[("range", subscription("t")), ("roundrobin", subscription("t"))])
        assert sync(a, group, 1, ja.member_id, {ja.member_id: b"all"}).error_code == 0
        # b arrives: a learns of the rebalance from its heartbeat and rejoins
        b_id = join(b, group).member_id
        fb = pool.submit(join, b, group, b_id, protocols=[("roundrobin", subscription("t")),
                                                          ("range", subscription("t"))])
        wait_until(lambda: state_of(a, group) == "PreparingRebalance", what="rebalance")
        assert heartbeat(a, group, 1, ja.member_id) == ErrorCode.REBALANCE_IN_PROGRESS
        # a commit of the current generation is still accepted while preparing (Kafka)
        create(a, "t", 2)
        assert commit(a, group, {("t", 0): 5}, generation=1, member=ja.member_id) == {("t", 0): 0}
        ja2 = join(a, group, ja.member_id, protocols=[("range", subscription("t")),
                                                        ("roundrobin", subscription("t"))])
        jb = fb.result(timeout=60)
        assert ja2.error_code == jb.error_code == 0
        assert ja2.generation_id == jb.generation_id == 2
        assert ja2.leader == jb.leader == ja.member_id
        assert ja2.protocol_name == jb.protocol_name  # both support both: a tie, the leader's choice
        assert sorted(m.member_id for m in ja2.members) == sorted([ja.member_id, jb.member_id])
        assert jb.members == []  # followers get no metadata
        # the follower's sync waits for the leader's
        fs = pool.submit(sync, b, group, 2, jb.member_id)
        sa = sync(a, group, 2, ja.member_id, {ja.member_id: b"A", jb.member_id: b"B"})
        sb = fs.result(timeout=60)
        assert (sa.error_code, bytes(sa.assignment), sb.error_code, bytes(sb.assignment)) == (0, b"A", 0, b"B")
        # wrong generation, unknown member
        assert heartbeat(a, group, 1, ja.member_id) == ErrorCode.ILLEGAL_GENERATION
        assert heartbeat(a, group, 2, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
        assert sync(a, group, 1, ja.member_id).error_code == ErrorCode.ILLEGAL_GENERATION
        assert commit(a, group, {("t", 0): 6}, generation=1, member=ja.member_id) == \
            {("t", 0): ErrorCode.ILLEGAL_GENERATION}
        assert commit(a, group, {("t", 0): 6}, generation=2, member="nobody") == \
            {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
        assert commit(a, group, {("t", 0): 7}, generation=2, member=jb.member_id) == {("t", 0): 0}
        # a simple (generation -1) commit into a group with members is refused
        assert commit(a, group, {("t", 0): 8}) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
        assert commit(a, group, {("t", 0): 8}, member=jb.member_id) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
        assert fetched(a, group, [("t", 0)]) == {("t", 0): (7, "", -1)}
        # DeleteGroups refuses a group with members; OffsetDelete a subscribed topic
        assert delete_groups(a, [group]) == {group: ErrorCode.NON_EMPTY_GROUP}
        r = a.request(ApiKey.OFFSET_DELETE, 0, {"group_id": group, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0}]}]})
        assert (r.error_code, r.topics[0].partitions[0].error_code) == (0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
        # v3 batch leave: one known, one unknown
        r = leave(a, group, [(jb.member_id, None), ("ghost", None)])
        assert r.error_code == 0 and [m.error_code for m in r.members] == [0, ErrorCode.UNKNOWN_MEMBER_ID]
        assert heartbeat(a, group, 2, ja.member_id) == ErrorCode.REBALANCE_IN_PROGRESS
        ja3 = join(a, group, ja.member_id)
        assert (ja3.error_code, ja3.generation_id, len(ja3.members)) == (0, 3, 1)
        leave(a, group, [(ja.member_id, None)])
        r = a.request(ApiKey.OFFSET_DELETE, 0, {"group_id": group, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0}, {"partition_index": 9}]}]})
        assert [p.error_code for p in r.topics[0].partitions] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert fetched(a, group, [("t", 0)]) == {("t", 0): (-1, "", -1)}


def test_join_errors(broker_factory):
    broker = broker_factory({**FAST, "group.max.size": "2"})
    group = unique("g-err")
    with client(broker, "e") as c, client(broker, "e2") as c2:
        # session timeouts outside [6000, 1800000]
        assert join(c, group, session=5999).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        assert join(c, group, session=1800001).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        # empty protocol type or list
        assert join(c, group, protocol_type="").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert join(c, group, protocols=[]).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert join(c, "").error_code == ErrorCode.INVALID_GROUP_ID
        # a member id the group never gave
        assert join(c, group, "made-up").error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert describe(c, [group])[0].group_state == "Dead"  # the failures left no group behind
        j = join_new(c, group)
        assert sync(c, group, 1, j.member_id, {j.member_id: b"x"}).error_code == 0
        # another protocol type, or no protocol in common with the members
        assert join(c2, group, protocol_type="connect").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert join(c2, group, protocols=[("sticky", b"")]).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        # SyncGroup v5-style protocol checks are not reachable at v3; a wrong sync generation
        assert sync(c, group, 7, j.member_id).error_code == ErrorCode.ILLEGAL_GENERATION
        assert sync(c, group, 1, "nobody").error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert sync(c, unique("nogroup"), 1, "x").error_code == ErrorCode.UNKNOWN_MEMBER_ID
        # group.max.size=2: one pending member fills the group
        pending = join(c2, group)
        assert pending.error_code == ErrorCode.MEMBER_ID_REQUIRED
        assert join(c2, group).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
        # LeaveGroup v0-2: the member's error is the top-level one
        assert leave(c2, unique("nogroup"), [("x", None)], version=1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert leave(c2, group, [(pending.member_id, None)], version=2).error_code == 0  # a pending member
        assert heartbeat(c, group, 1, j.member_id) == 0  # the group was not disturbed


def test_join_v0_and_eager_rejoin_without_member_id_required(broker):
    """JoinGroup v0-3 (no MEMBER_ID_REQUIRED): a member joins at once; v0 has no rebalance
    timeout (the session timeout is used)."""
    group = unique("g-v0")
    with client(broker, "old") as c:
        j = join(c, group, version=0)
        assert j.error_code == 0 and j.generation_id == 1 and j.leader == j.member_id
        assert sync(c, group, 1, j.member_id, {j.member_id: b"z"}, version=0).error_code == 0
        assert c.request(ApiKey.HEARTBEAT, 0, {"group_id": group, "generation_id": 1,
                                               "member_id": j.member_id}).error_code == 0


def test_session_expiry_and_rebalance_timeout(broker):
    """A member that stops heartbeating is removed after its session timeout; a member
    that does not rejoin a rebalance is removed when the rebalance timeout passes."""
    group = unique("g-expire")
    with client(broker, "live") as a, client(broker, "dead") as b, ThreadPoolExecutor(1) as pool:
        jb = join_new(b, group, session=6000, rebalance=6000)
        assert sync(b, group, 1, jb.member_id, {jb.member_id: b"b"}).error_code == 0
        # b goes silent; a joins: the rebalance waits for b until the rebalance timeout
        a_id = join(a, group, session=6000, rebalance=6000).member_id
        ja = join(a, group, a_id, session=6000, rebalance=6000)
        assert ja.error_code == 0 and ja.generation_id == 2 and ja.leader == a_id
        assert [m.member_id for m in ja.members] == [a_id]  # b was removed
        assert heartbeat(b, group, 1, jb.member_id) == ErrorCode.UNKNOWN_MEMBER_ID
        assert sync(a, group, 2, a_id, {a_id: b"a"}).error_code == 0
        # a stops heartbeating: after its session the group is empty again
        wait_until(lambda: state_of(b, group) == "Empty", what="session expiry")
        assert heartbeat(a, group, 2, a_id) == ErrorCode.UNKNOWN_MEMBER_ID
        pool.shutdown()


def test_initial_rebalance_delay_collects_members(broker_factory):
    """group.initial.rebalance.delay.ms: members arriving during the delay join the first
    generation together."""
    broker = broker_factory({**FAST, "group.initial.rebalance.delay.ms": "1500"})
    group = unique("g-delay")
    with client(broker, "x") as x, client(broker, "y") as y, ThreadPoolExecutor(2) as pool:
        fx = pool.submit(join, x, group, version=3)
        wait_until(lambda: state_of(y, group) == "PreparingRebalance")
        fy = pool.submit(join, y, group, version=3)
        jx, jy = fx.result(60), fy.result(60)
        assert jx.error_code == jy.error_code == 0 and jx.generation_id == jy.generation_id == 1
        assert len(jx.members) + len(jy.members) == 2


def test_static_membership(broker):
    group = unique("g-static")
    with client(broker, "s1") as c, client(broker, "s2") as c2:
        j = join(c, group, instance="inst-1")  # a static member gets its id without the round trip
        assert j.error_code == 0 and j.generation_id == 1
        assert sync(c, group, 1, j.member_id, {j.member_id: b"s"}, instance="inst-1").error_code == 0
        # a restart of the same instance: a new member id, same generation, no rebalance
        j2 = join(c2, group, instance="inst-1")
        assert j2.error_code == 0 and j2.member_id != j.member_id and j2.generation_id == 1
        assert j2.leader == j.member_id  # the old leader id: the new member does not assign
        s2 = sync(c2, group, 1, j2.member_id, instance="inst-1")
        assert (s2.error_code, bytes(s2.assignment)) == (0, b"s")
        # the old member id is fenced
        assert heartbeat(c, group, 1, j.member_id, instance="inst-1") == ErrorCode.FENCED_INSTANCE_ID
        assert join(c, group, j.member_id, instance="inst-1").error_code == ErrorCode.FENCED_INSTANCE_ID
        assert commit(c, group, {("t", 0): 1}, generation=1, member=j.member_id, instance="inst-1") == \
            {("t", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}  # unknown topic answered first
        create(c, "t", 1)
        assert commit(c, group, {("t", 0): 1}, generation=1, member=j.member_id, instance="inst-1") == \
            {("t", 0): ErrorCode.FENCED_INSTANCE_ID}
        assert heartbeat(c2, group, 1, j2.member_id, instance="inst-1") == 0
        d = describe(c2, [group])[0]
        assert [(m.member_id, m.group_instance_id) for m in d.members] == [(j2.member_id, "inst-1")]
        # leave by instance id
        r = leave(c2, group, [("", "inst-1")])
        assert [m.error_code for m in r.members] == [0]
        assert state_of(c2, group) == "Empty"


def test_group_record_persisted_and_reloaded(broker):
    group = unique("g-persist")
    with client(broker, "p") as c:
        create(c, "t", 1)
        j = join_new(c, group)
        assert sync(c, group, 1, j.member_id, {j.member_id: b"my-assignment"}).error_code == 0
        assert commit(c, group, {("t", 0): 42}, generation=1, member=j.member_id) == {("t", 0): 0}
    broker.restart()
    with client(broker, "p") as c:
        # loaded Stable with its member; the member resumes without rejoining
        d = describe(c, [group])[0]
        assert (d.group_state, d.protocol_data) == ("Stable", "range")
        assert [(m.member_id, bytes(m.member_assignment)) for m in d.members] == [(j.member_id, b"my-assignment")]
        assert heartbeat(c, group, 1, j.member_id) == 0
        s = sync(c, group, 1, j.member_id)
        assert (s.error_code, bytes(s.assignment)) == (0, b"my-assignment")
        assert fetched(c, group, [("t", 0)]) == {("t", 0): (42, "", -1)}
        leave(c, group, [(j.member_id, None)])
        assert delete_groups(c, [group]) == {group: 0}
    broker.stop()
    records = offsets_records(broker.log_dir, offsets_partition(group, 3))
    decoded = [decode_offsets_record(bytes(r.key), None if r.value is None else bytes(r.value))
               for _, r in records]
    group_records = [(kv, v) for kv, k, vv, v in decoded if kv == 2 and k["group"] == group]
    # generation 1 with its member (v3, Kafka's layout), generation 2 empty, then the tombstone
    assert [v["generation"] if v else None for _, v in group_records] == [1, 2, None]
    first = group_records[0][1]
    assert (first["protocolType"], first["protocol"], first["leader"]) == ("consumer", "range", j.member_id)
    assert [(m["memberId"], m["clientId"], m["clientHost"], m["sessionTimeout"], m["rebalanceTimeout"],
             m["subscription"], m["assignment"]) for m in first["members"]] == [
        (j.member_id, "p", "/127.0.0.1", 10000, 10000, subscription("t"), b"my-assignment")]
    assert group_records[1][1]["members"] == [] and group_records[1][1]["protocol"] is None


def test_internal_topic_is_protected(broker):
    with client(broker, "evil") as c:
        assert commit(c, unique("g"), {("t-int", 0): 1}) == {("t-int", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        create(c, "t-int", 1)
        commit(c, unique("g"), {("t-int", 0): 1})  # __consumer_offsets exists now
        from broker.record.batch import encode_batch
        r = c.request(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": -1, "timeout_ms": 1000, "topic_data": [
            {"name": OFFSETS_TOPIC, "partition_data": [{"index": 0, "records": encode_batch([(b"k", b"v", 0)])}]}]})
        p = r.responses[0].partition_responses[0]
        assert p.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION and "internal topic" in p.error_message
        r = c.request(ApiKey.DELETE_TOPICS, 3, {"topic_names": [OFFSETS_TOPIC], "timeout_ms": 1000})
        assert r.responses[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        r = c.request(ApiKey.DELETE_RECORDS, 1, {"topics": [{"name": OFFSETS_TOPIC, "partitions": [
            {"partition_index": 0, "offset": -1}]}], "timeout_ms": 1000})
        assert r.topics[0].partitions[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_shutdown_answers_a_waiting_join(broker):
    """A JoinGroup waiting on a rebalance does not hold up the broker's shutdown."""
    group = unique("g-shut")
    with client(broker, "w1") as a, client(broker, "w2") as b:
        ja = join_new(a, group, rebalance=600000, session=60000)
        assert sync(a, group, 1, ja.member_id, {ja.member_id: b""}).error_code == 0
        result = {}

        def waiting_join():
            try:
                result["r"] = join(b, group, version=3, rebalance=600000, session=60000)
            except Exception as exc:  # noqa: BLE001 - the connection may close first
                result["r"] = exc

        t = threading.Thread(target=waiting_join)
        t.start()
        wait_until(lambda: state_of(a, group) == "PreparingRebalance")
        assert broker.stop(timeout=30) == 0
        t.join(30)
        r = result["r"]
        assert isinstance(r, Exception) or r.error_code == ErrorCode.NOT_COORDINATOR


def test_out_of_order_requests_never_leave_the_group_stuck(broker):
    """Requests out of protocol order get Kafka's codes; a leader that leaves instead of
    syncing releases the waiting follower, and the group rebalances without it."""
    group = unique("g-order")
    with client(broker, "l") as lead, client(broker, "f") as follower, ThreadPoolExecutor(2) as pool:
        # before any join: sync, heartbeat and leave of a group that does not exist
        assert sync(lead, group, 1, "m").error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert heartbeat(lead, group, 0, "m") == ErrorCode.UNKNOWN_MEMBER_ID
        assert [m.error_code for m in leave(lead, group, [("m", None)]).members] == [ErrorCode.UNKNOWN_MEMBER_ID]
        jl = join_new(lead, group)
        f_id = join(follower, group).member_id
        fj = pool.submit(join, follower, group, f_id)
        wait_until(lambda: heartbeat(lead, group, 1, jl.member_id) == ErrorCode.REBALANCE_IN_PROGRESS)
        assert sync(lead, group, 1, jl.member_id).error_code == ErrorCode.REBALANCE_IN_PROGRESS
        jl2 = join(lead, group, jl.member_id)
        jf = fj.result(60)
        assert jl2.generation_id == jf.generation_id == 2 and jl2.leader == jl.member_id
        fs = pool.submit(sync, follower, group, 2, jf.member_id)
        wait_until(lambda: state_of(lead, group) == "CompletingRebalance")
        # a commit during CompletingRebalance
        create(lead, "t", 1)
        assert commit(lead, group, {("t", 0): 1}, generation=2, member=jf.member_id) == \
            {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}
        # the leader leaves instead of syncing: the follower's sync is answered
        assert leave(lead, group, [(jl.member_id, None)]).members[0].error_code == 0
        assert fs.result(60).error_code == ErrorCode.REBALANCE_IN_PROGRESS
        jf2 = join(follower, group, jf.member_id)
        assert (jf2.error_code, jf2.generation_id, jf2.leader) == (0, 3, jf.member_id)
        assert [m.member_id for m in jf2.members] == [jf.member_id]
        # the leader's assignment may name unknown members: ignored; missing ones get b""
        s = sync(follower, group, 3, jf.member_id, {"stranger": b"x"})
        assert (s.error_code, bytes(s.assignment)) == (0, b"")
        assert state_of(follower, group) == "Stable"


def test_empty_group_without_offsets_is_removed(broker_factory):
    """An Empty group with no offsets left goes at the next expiration check, with a
    tombstone for its group record; a group with members stays."""
    broker = broker_factory({**FAST, "offsets.retention.check.interval.ms": "200"})
    gone, kept = unique("g-gone"), unique("g-kept")
    with client(broker, "x") as c:
        j = join_new(c, gone)
        assert sync(c, gone, 1, j.member_id, {j.member_id: b""}).error_code == 0
        k = join_new(c, kept)
        assert sync(c, kept, 1, k.member_id, {k.member_id: b""}).error_code == 0
        leave(c, gone, [(j.member_id, None)])
        wait_until(lambda: state_of(c, gone) == "Dead", what="the empty group removed")
        assert heartbeat(c, kept, 1, k.member_id) == 0 and state_of(c, kept) == "Stable"
    broker.stop()
    records = offsets_records(broker.log_dir, offsets_partition(gone, 3))
    values = [None if r.value is None else decode_offsets_record(bytes(r.key), bytes(r.value))[3]["generation"]
              for _, r in records if decode_offsets_record(bytes(r.key), None)[1].get("group") == gone]
    assert values == [1, 2, None]


def test_leader_that_never_syncs_is_removed(broker):
    """Kafka's pending-sync timer: a leader that joins but never sends SyncGroup (while
    heartbeating) is removed after the rebalance timeout; the follower's sync is answered
    and the group rebalances without it."""
    group = unique("g-nosync")
    with client(broker, "l") as lead, client(broker, "f") as follower, ThreadPoolExecutor(2) as pool:
        jl = join_new(lead, group, rebalance=3000, session=6000)
        assert sync(lead, group, 1, jl.member_id, {jl.member_id: b""}).error_code == 0
        f_id = join(follower, group, rebalance=3000, session=6000).member_id
        fj = pool.submit(join, follower, group, f_id, rebalance=3000, session=6000)
        wait_until(lambda: heartbeat(lead, group, 1, jl.member_id) == ErrorCode.REBALANCE_IN_PROGRESS)
        jl2 = join(lead, group, jl.member_id, rebalance=3000, session=6000)
        jf = fj.result(60)
        assert jl2.generation_id == jf.generation_id == 2
        fs = pool.submit(sync, follower, group, 2, jf.member_id)
        # the leader heartbeats but never syncs
        wait_until(lambda: heartbeat(lead, group, 2, jl.member_id) == ErrorCode.UNKNOWN_MEMBER_ID,
                   what="the leader removed")
        assert fs.result(60).error_code == ErrorCode.REBALANCE_IN_PROGRESS
        jf2 = join(follower, group, jf.member_id, rebalance=3000, session=6000)
        assert (jf2.error_code, jf2.generation_id, jf2.leader) == (0, 3, jf.member_id)
        assert "did not sync generation 2 in time" in broker.stderr_text()
