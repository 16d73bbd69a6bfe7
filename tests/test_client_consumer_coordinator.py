"""The consumer's group-protocol core (broker/client/consumer/coordinator.py), without a
broker (the broker's group coordinator is not served yet): its JoinGroup / SyncGroup /
Heartbeat / LeaveGroup bodies encode and decode at every version of Kafka's specs, and
a group of members run through eager and cooperative rebalances on response bodies
built from their own requests, as the broker would answer."""

from __future__ import annotations

import pytest

from broker.client.consumer.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    StickyAssignor,
    decode_sticky_user_data,
)
from broker.client.consumer.coordinator import (
    ConsumerCoordinator,
    MemberState,
    RebalanceNeeded,
    RetriableGroupError,
)
from broker.client.consumer.offsets import TopicPartition as TP
from broker.client.consumer.protocol import decode_subscription
from broker.client.errors import KafkaError
from broker.protocol import ApiKey, ErrorCode, request_schema, response_schema
from broker.protocol.schema import decode_bytes, encode_bytes

COUNTS = {"a": 4, "b": 2}


def roundtrip(api_key, build, version):
    schema = request_schema(api_key, version)
    return decode_bytes(schema, version, encode_bytes(schema, version, build(version)))


@pytest.mark.parametrize("version", range(0, 10))
def test_join_group_request_every_version(version):
    c = ConsumerCoordinator("g", [CooperativeStickyAssignor(), RangeAssignor()],
                            group_instance_id="i-1", rack_id="r1")
    c.owned = [TP("a", 1)]
    body = roundtrip(ApiKey.JOIN_GROUP, c.join_group_request(["b", "a", "a"], "why"), version)
    assert body.group_id == "g" and body.protocol_type == "consumer"
    assert [p.name for p in body.protocols] == ["cooperative-sticky", "range"]
    sub = decode_subscription(bytes(body.protocols[0].metadata))
    assert sub.topics == ("a", "b") and sub.owned_partitions == (("a", 1),)
    assert sub.rack_id == "r1" and sub.generation_id == -1
    if version >= 5:
        assert body.group_instance_id == "i-1"


@pytest.mark.parametrize("version", range(0, 6))
def test_sync_heartbeat_leave_every_version(version):
    c = ConsumerCoordinator("g", [RangeAssignor()], group_instance_id="i-1")
    c.member_id, c.generation, c.protocol_name = "m-1", 7, "range"
    sync = roundtrip(ApiKey.SYNC_GROUP, c.sync_group_request({"m-1": b"\x00\x00"}), version)
    assert (sync.generation_id, sync.member_id, sync.assignments[0].member_id) == (7, "m-1", "m-1")
    hb = roundtrip(ApiKey.HEARTBEAT, c.heartbeat_request(), min(version, 4))
    assert (hb.generation_id, hb.member_id) == (7, "m-1")
    leave = roundtrip(ApiKey.LEAVE_GROUP, c.leave_group_request("bye"), version)
    if version >= 3:
        assert leave.members[0].member_id == "m-1" and leave.members[0].group_instance_id == "i-1"
    else:
        assert leave.member_id == "m-1"
    assert (c.member_id, c.generation, c.state) == ("", -1, MemberState.UNJOINED)


# -- a group run on response bodies ------------------------------------------------------------

def join_response(members: dict[str, ConsumerCoordinator], requests, leader, generation,
                  protocol, version=9):
    schema = response_schema(ApiKey.JOIN_GROUP, version)
    member_cls = schema.structs["JoinGroupResponseMember"]
    out = {}
    for mid in members:
        req = requests[mid]
        meta = next(p.metadata for p in req.protocols if p.name == protocol)
        out[mid] = meta
    for mid in members:
        yield mid, schema.cls(
            throttle_time_ms=0, error_code=0, generation_id=generation, protocol_type="consumer",
            protocol_name=protocol, leader=leader, skip_assignment=False, member_id=mid,
            members=[member_cls(member_id=m, group_instance_id=None, metadata=out[m])
                     for m in members] if mid == leader else [])


def sync_response(assignment: bytes, version=5):
    return response_schema(ApiKey.SYNC_GROUP, version).cls(
        throttle_time_ms=0, error_code=0, protocol_type="consumer", protocol_name="x",
        assignment=assignment)


def rebalance(members: dict[str, ConsumerCoordinator], generation: int, topics=("a", "b")):
    """One JoinGroup/SyncGroup round; the first member id (sorted) leads."""
    revoked_before = {m: c.on_join_prepare() for m, c in members.items()}
    requests = {m: roundtrip(ApiKey.JOIN_GROUP, c.join_group_request(topics), 9)
                for m, c in members.items()}
    protocol = requests[sorted(members)[0]].protocols[0].name
    leader = sorted(members)[0]
    assignments = {}
    for mid, body in join_response(members, requests, leader, generation, protocol):
        result = members[mid].handle_join_group(
            body, lambda ts: {t: COUNTS[t] for t in ts if t in COUNTS})
        assert result.leader == (mid == leader)
        assignments.update(result.assignments)
    results = {m: c.handle_sync_group(sync_response(assignments.get(m, b"")))
               for m, c in members.items()}
    return revoked_before, results


def test_eager_range_group():
    members = {m: ConsumerCoordinator("g", [RangeAssignor()]) for m in ("m1", "m2")}
    for m, c in members.items():
        c.member_id = m
    _, results = rebalance(members, 1)
    got = {m: set(r.assigned) for m, r in results.items()}
    assert got == {"m1": {TP("a", 0), TP("a", 1), TP("b", 0)},
                   "m2": {TP("a", 2), TP("a", 3), TP("b", 1)}}
    assert all(c.state == MemberState.STABLE and c.generation == 1 for c in members.values())
    # Eager: every partition is revoked before the next join.
    revoked, _ = rebalance(members, 2)
    assert set(revoked["m1"]) == got["m1"]


def test_sticky_group_keeps_partitions_in_user_data():
    members = {m: ConsumerCoordinator("g", [StickyAssignor()]) for m in ("m1", "m2")}
    for m, c in members.items():
        c.member_id = m
    _, first = rebalance(members, 1)
    req = roundtrip(ApiKey.JOIN_GROUP, members["m1"].join_group_request(["a", "b"]), 9)
    prev, gen = decode_sticky_user_data(
        bytes(decode_subscription(bytes(req.protocols[0].metadata)).user_data))
    assert set(prev) == set(first["m1"].assigned) and gen == 1
    members["m3"] = ConsumerCoordinator("g", [StickyAssignor()])
    members["m3"].member_id = "m3"
    _, second = rebalance(members, 2)
    for m in ("m1", "m2"):
        assert len(set(first[m].assigned) & set(second[m].assigned)) == 2
    assert sorted(len(r.assigned) for r in second.values()) == [2, 2, 2]


def test_cooperative_group_revokes_then_moves():
    members = {"m1": ConsumerCoordinator("g", [CooperativeStickyAssignor()])}
    members["m1"].member_id = "m1"
    revoked, r = rebalance(members, 1)
    assert len(r["m1"].assigned) == 6 and revoked["m1"] == [] and not r["m1"].rejoin
    members["m2"] = ConsumerCoordinator("g", [CooperativeStickyAssignor()])
    members["m2"].member_id = "m2"
    revoked, r = rebalance(members, 2)
    assert revoked == {"m1": [], "m2": []}  # cooperative: nothing revoked up front
    assert len(r["m1"].assigned) == 3 and len(r["m1"].revoked) == 3 and r["m1"].rejoin
    assert r["m2"].assigned == []
    moving = set(r["m1"].revoked)
    _, r = rebalance(members, 3)
    assert set(r["m2"].added) == moving and not r["m1"].revoked and not r["m1"].rejoin


def test_join_and_heartbeat_errors():
    c = ConsumerCoordinator("g", [RangeAssignor()])
    schema = response_schema(ApiKey.JOIN_GROUP, 9)

    def resp(code, member_id=""):
        return schema.cls(throttle_time_ms=0, error_code=code, generation_id=-1,
                          protocol_type=None, protocol_name=None, leader="",
                          skip_assignment=False, member_id=member_id, members=[])

    with pytest.raises(RebalanceNeeded):
        c.handle_join_group(resp(ErrorCode.MEMBER_ID_REQUIRED, "given-1"), dict)
    assert c.member_id == "given-1"  # KIP-394: rejoin with it
    c.generation = 4
    with pytest.raises(RebalanceNeeded):
        c.handle_join_group(resp(ErrorCode.UNKNOWN_MEMBER_ID), dict)
    assert (c.member_id, c.generation) == ("", -1)
    with pytest.raises(RetriableGroupError):
        c.handle_join_group(resp(ErrorCode.NOT_COORDINATOR), dict)
    with pytest.raises(KafkaError, match="INCONSISTENT_GROUP_PROTOCOL"):
        c.handle_join_group(resp(ErrorCode.INCONSISTENT_GROUP_PROTOCOL), dict)
    hb = response_schema(ApiKey.HEARTBEAT, 4)
    c.generation, c.member_id = 5, "m"
    assert c.handle_heartbeat(hb.cls(throttle_time_ms=0, error_code=0)) is None
    with pytest.raises(RebalanceNeeded):
        c.handle_heartbeat(hb.cls(throttle_time_ms=0, error_code=ErrorCode.REBALANCE_IN_PROGRESS))
    with pytest.raises(RebalanceNeeded):
        c.handle_heartbeat(hb.cls(throttle_time_ms=0, error_code=ErrorCode.ILLEGAL_GENERATION))
    assert c.generation == -1 and c.member_id == "m"
    with pytest.raises(KafkaError, match="INVALID_GROUP_ID"):
        ConsumerCoordinator("", [RangeAssignor()])
