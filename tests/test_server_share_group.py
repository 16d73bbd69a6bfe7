"""Share groups on the wire (KIP-932, Kafka 4.2's versions), with the raw client: the
heartbeat's validation and epochs, the simple assignor, share sessions (open, next epoch,
close; SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH), acquisition and
acknowledgement (AcquiredRecords, INVALID_RECORD_STATE, malformed batches: RELIABILITY I,
the broker keeps serving), the share offset APIs, ListGroups / DescribeGroups /
DeleteGroups of share groups, the state RPCs, and authorization (GROUP and TOPIC ACLs,
CLUSTER_ACTION for the state RPCs: RELIABILITY S)."""

from __future__ import annotations

import base64
import uuid

import pytest

from broker.protocol import ApiKey, ErrorCode
from tests.support.acl_admin import PASSWORDS, start_authz_broker

HB, DESCRIBE, FETCH, ACK = (ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.SHARE_FETCH,
                            ApiKey.SHARE_ACKNOWLEDGE)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def member_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def create(c, name: str, partitions: int = 1) -> uuid.UUID:
    r = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 1000})
    assert r.topics[0].error_code == 0, r
    m = c.request(ApiKey.METADATA, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": name}],
                                         "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False})
    return m.topics[0].topic_id


def produce(c, topic: str, n: int, partition: int = 0, size: int = 0) -> None:
    from broker.record.batch import encode_batch
    batch = encode_batch([(b"k%d" % i, b"v%d" % i + b"x" * size, 1_700_000_000_000 + i) for i in range(n)])
    r = c.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    assert r.responses[0].partition_responses[0].error_code == 0


def set_group_config(c, group: str, **configs: str) -> None:
    r = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, {"resources": [
        {"resource_type": 32, "resource_name": group, "configs": [
            {"name": k.replace("_", "."), "config_operation": 0, "value": v} for k, v in configs.items()]}],
        "validate_only": False})
    assert r.responses[0].error_code == 0, r


def hb(c, group: str, mid: str, epoch: int = 0, topics=None):
    return c.request(HB, 1, {"group_id": group, "member_id": mid, "member_epoch": epoch, "rack_id": None,
                             "subscribed_topic_names": topics})


def fetch(c, group: str, mid: str, epoch: int, parts=(), acks=None, forgotten=(), max_records=500,
          max_wait_ms=0, version: int = 1):
    """``parts``: [(topic id, partition)]; ``acks``: {(topic id, partition): [(first, last, [types])]}."""
    acks = acks or {}
    topics: dict = {}
    for tp in list(parts) + [tp for tp in acks if tp not in parts]:
        topics.setdefault(tp[0], []).append({"partition_index": tp[1], "acknowledgement_batches": [
            {"first_offset": a, "last_offset": b, "acknowledge_types": t} for a, b, t in acks.get(tp, [])]})
    body = {"group_id": group, "member_id": mid, "share_session_epoch": epoch, "max_wait_ms": max_wait_ms,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records, "batch_size": max_records,
            "topics": [{"topic_id": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [{"topic_id": t, "partitions": [p]} for t, p in forgotten]}
    if version >= 2:
        body["share_acquire_mode"] = 0
        body["is_renew_ack"] = False
    return c.request(FETCH, version, body)


def acknowledge(c, group: str, mid: str, epoch: int, acks):
    topics: dict = {}
    for (t, p), batches in acks.items():
        topics.setdefault(t, []).append({"partition_index": p, "acknowledgement_batches": [
            {"first_offset": a, "last_offset": b, "acknowledge_types": ts} for a, b, ts in batches]})
    return c.request(ACK, 1, {"group_id": group, "member_id": mid, "share_session_epoch": epoch,
                              "topics": [{"topic_id": t, "partitions": ps} for t, ps in topics.items()]})


def acquired(r) -> dict:
    return {(t.topic_id, p.partition_index): [(a.first_offset, a.last_offset, a.delivery_count)
                                               for a in p.acquired_records]
            for t in r.responses for p in t.partitions if p.acquired_records}


@pytest.mark.parametrize("body, code", [
    ({"member_id": ""}, ErrorCode.INVALID_REQUEST),
    ({"member_epoch": -2}, ErrorCode.INVALID_REQUEST),
    ({"subscribed_topic_names": None}, ErrorCode.INVALID_REQUEST),
    ({"subscribed_topic_names": []}, ErrorCode.INVALID_REQUEST),
    ({"group_id": ""}, ErrorCode.INVALID_REQUEST),
    ({"member_epoch": 3}, ErrorCode.GROUP_ID_NOT_FOUND),  # Kafka's: only epoch 0 creates a group
])
def test_heartbeat_validation(raw_client, body, code):
    c = raw_client()
    request = {"group_id": unique("g"), "member_id": member_id(), "member_epoch": 0, "rack_id": None,
               "subscribed_topic_names": ["t"], **body}
    r = c.request(HB, 1, request)
    assert r.error_code == code and r.member_epoch == -1 and r.error_message


def test_heartbeat_epochs_assignment_and_describe(raw_client):
    c = raw_client()
    topic, group = unique("t"), unique("g")
    tid = create(c, topic, partitions=3)
    a, b = member_id(), member_id()
    ra = hb(c, group, a, 0, [topic])
    assert ra.error_code == 0 and ra.member_epoch == 1 and ra.heartbeat_interval_ms == 5000
    assert {(tp.topic_id, p) for tp in ra.assignment.topic_partitions for p in tp.partitions} == \
        {(tid, 0), (tid, 1), (tid, 2)}
    rb = hb(c, group, b, 0, [topic])
    assert rb.member_epoch == 2
    ra2 = hb(c, group, a, 1)  # a learns the new epoch and its share of the partitions
    assert ra2.member_epoch == 2 and ra2.assignment is not None
    pa = {p for tp in ra2.assignment.topic_partitions for p in tp.partitions}
    pb = {p for tp in rb.assignment.topic_partitions for p in tp.partitions}
    assert pa | pb == {0, 1, 2} and pa and pb
    assert hb(c, group, a, 1).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert hb(c, group, member_id(), 2).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert hb(c, group, a, 2).assignment is None  # nothing changed: no assignment sent
    d = c.request(DESCRIBE, 1, {"group_ids": [group, unique("missing")], "include_authorized_operations": False})
    g, missing = d.groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignor_name) == (0, "Stable", 2, "simple")
    assert {m.member_id for m in g.members} == {a, b}
    assert {m.member_epoch for m in g.members} == {2}
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    lg = c.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
    assert [(x.group_id, x.group_type, x.group_state, x.protocol_type) for x in lg.groups
            if x.group_id == group] == [(group, "share", "Stable", "share")]
    assert all(x.group_type == "share" for x in lg.groups)
    dg = c.request(ApiKey.DELETE_GROUPS, 1, {"groups_names": [group]})
    assert dg.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    for m in (a, b):
        assert hb(c, group, m, -1).member_epoch == -1
    dg = c.request(ApiKey.DELETE_GROUPS, 1, {"groups_names": [group]})
    assert dg.results[0].error_code == 0
    d = c.request(DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})
    assert d.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_group_id_has_one_type(raw_client):
    c = raw_client()
    group = unique("g")
    r = c.request(ApiKey.OFFSET_COMMIT, 8, {"group_id": group, "generation_id_or_member_epoch": -1,
                                            "member_id": "", "group_instance_id": None, "topics": []})
    assert r is not None
    topic = unique("t")
    create(c, topic)
    # a committed offset makes it a (simple) consumer group with something of its own
    c.request(ApiKey.OFFSET_COMMIT, 8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                                        "group_instance_id": None, "topics": [
                                            {"name": topic, "partitions": [{"partition_index": 0,
                                                                            "committed_offset": 0,
                                                                            "committed_leader_epoch": -1,
                                                                            "committed_metadata": None}]}]})
    r = hb(c, group, member_id(), 0, [topic])
    assert r.error_code == ErrorCode.GROUP_ID_NOT_FOUND and "not a share group" in r.error_message


def test_share_sessions_acquisition_and_acknowledgement(raw_client):
    c = raw_client()
    topic, group = unique("t"), unique("g")
    tid = create(c, topic)
    set_group_config(c, group, share_auto_offset_reset="earliest")
    produce(c, topic, 10)
    mid = member_id()
    assert hb(c, group, mid, 0, [topic]).error_code == 0
    tp = (tid, 0)
    assert fetch(c, group, mid, 1, [tp]).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert fetch(c, group, member_id(), 0, [tp]).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert fetch(c, group, mid, 0, [tp], acks={tp: [(0, 0, [1])]}).error_code == ErrorCode.INVALID_REQUEST
    r = fetch(c, group, mid, 0, [tp])
    assert r.error_code == 0 and acquired(r) == {tp: [(0, 9, 1)]} and r.acquisition_lock_timeout_ms == 30000
    part = r.responses[0].partitions[0]
    assert part.current_leader.leader_id == 1 and len(bytes(part.records)) > 0
    assert fetch(c, group, mid, 5, [tp]).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    # accept 0-4, release 5-6, reject 7, gap 8, accept 9; nothing new to acquire but 5-6 again
    r = fetch(c, group, mid, 1, acks={tp: [(0, 4, [1]), (5, 9, [2, 2, 3, 0, 1])]})
    assert r.error_code == 0 and r.responses[0].partitions[0].acknowledge_error_code == 0
    assert acquired(r) == {tp: [(5, 6, 2)]}
    # an acknowledgement of records no longer held: INVALID_RECORD_STATE, nothing changes
    r = acknowledge(c, group, mid, 2, {tp: [(0, 6, [1])]})
    assert r.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
    # malformed batches: INVALID_REQUEST for that partition; the broker goes on
    r = acknowledge(c, group, mid, 3, {tp: [(6, 5, [1])]})
    assert r.responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
    r = acknowledge(c, group, mid, 4, {tp: [(5, 6, [1, 1, 1])]})
    assert r.responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
    r = acknowledge(c, group, mid, 5, {tp: [(5, 6, [7])]})
    assert r.responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
    assert acknowledge(c, group, mid, 0, {tp: [(5, 6, [1])]}).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    r = acknowledge(c, group, mid, 6, {tp: [(5, 6, [1])]})
    assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
    off = c.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": group, "topics": None}]})
    p = off.groups[0].topics[0].partitions[0]
    assert (off.groups[0].error_code, p.start_offset, p.lag) == (0, 10, 0)
    produce(c, topic, 3)
    r = fetch(c, group, mid, 7, max_records=2, version=2)  # the session remembers the partition
    assert acquired(r) == {tp: [(10, 12, 1)]}  # batch-optimized: the whole batch
    off = c.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": group, "topics": None}]})
    assert off.groups[0].topics[0].partitions[0].lag == 3
    r = fetch(c, group, mid, -1, acks={tp: [(10, 10, [1])]})  # close: 11-12 released
    assert r.error_code == 0
    assert fetch(c, group, mid, 9, [tp]).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    r = fetch(c, group, mid, 0, [tp], max_records=1, version=2)
    assert acquired(r) == {tp: [(11, 12, 2)]}


def test_offsets_apis_need_an_empty_group(raw_client):
    c = raw_client()
    topic, group = unique("t"), unique("g")
    tid = create(c, topic)
    produce(c, topic, 10)
    r = c.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
        {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 4}]}]})
    assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0  # a new group is created
    mid = member_id()
    hb(c, group, mid, 0, [topic])
    assert acquired(fetch(c, group, mid, 0, [(tid, 0)])) == {(tid, 0): [(4, 9, 1)]}
    r = c.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
        {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 0}]}]})
    assert r.error_code == ErrorCode.NON_EMPTY_GROUP
    r = c.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
    assert r.error_code == ErrorCode.NON_EMPTY_GROUP
    hb(c, group, mid, -1)
    r = c.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
        {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 99}]}]})
    assert r.responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST  # past the log end
    r = c.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
    assert r.error_code == 0 and r.responses[0].error_code == 0
    off = c.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": group, "topics": [
        {"topic_name": topic, "partitions": [0]}]}]})
    assert off.groups[0].topics[0].partitions[0].start_offset == -1  # no state: starts at the reset policy
    # the state RPCs (no authorizer here: served), then the state a member sees
    state = c.request(ApiKey.READ_SHARE_GROUP_STATE, 0, {"group_id": group, "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
    assert state.results[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    init = c.request(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, {"group_id": group, "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0, "state_epoch": 3, "start_offset": 7}]}]})
    assert init.results[0].partitions[0].error_code == 0
    state = c.request(ApiKey.READ_SHARE_GROUP_STATE, 0, {"group_id": group, "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
    assert (state.results[0].partitions[0].state_epoch, state.results[0].partitions[0].start_offset) == (3, 7)
    hb(c, group, mid, 0, [topic])
    assert acquired(fetch(c, group, mid, 0, [(tid, 0)])) == {(tid, 0): [(7, 9, 1)]}


@pytest.fixture(scope="module")
def authz_broker(tmp_path_factory):
    b = start_authz_broker(tmp_path_factory.mktemp("share-authz"))
    yield b
    b.kill()


def test_acls_guard_share_groups_and_the_state_rpcs(authz_broker):
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    from tests.support.acl_admin import ck_conf
    from tests.support.broker import RawClient

    admin = AdminClient(ck_conf(authz_broker, "admin"))
    topic, group = unique("t"), unique("g")
    admin.create_topics([NewTopic(topic, 1)])[topic].result(30)

    def grant(rt, name, op) -> None:
        binding = AclBinding(rt, name, ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW)
        for f in admin.create_acls([binding]).values():
            f.result(30)

    def poll_error(user: str) -> int | None:
        c = ShareConsumer(ck_conf(authz_broker, user, **{"group.id": group}))
        c.subscribe([topic])
        try:
            for _ in range(10):
                try:
                    for m in c.poll(0.5):
                        if m.error() is not None:
                            return m.error().code()
                except Exception as exc:  # noqa: BLE001 - a fatal error surfaces as an exception
                    return exc.args[0].code()
            return None
        finally:
            c.close()

    assert poll_error("alice") == ErrorCode.GROUP_AUTHORIZATION_FAILED
    grant(ResourceType.GROUP, group, AclOperation.READ)
    assert poll_error("alice") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    grant(ResourceType.TOPIC, topic, AclOperation.READ)
    assert poll_error("alice") is None
    # the state RPCs: CLUSTER_ACTION only (PLAINTEXT is User:ANONYMOUS, without ACLs)
    with RawClient(authz_broker.host, authz_broker.listener_port("PLAINTEXT")) as raw:
        r = raw.request(ApiKey.READ_SHARE_GROUP_STATE, 0, {"group_id": group, "topics": [
            {"topic_id": uuid.uuid4(), "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
        assert r.results[0].partitions[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert PASSWORDS["alice"]


def test_share_fetch_counts_against_the_fetch_quota(broker_factory):
    """RELIABILITY Q2 for ShareFetch: the bytes a share fetch returns count against the
    client's consumer_byte_rate like a Fetch's; a fetch over the quota carries
    throttle_time_ms > 0 (the acquired records are still sent: they are locked for the
    member already)."""
    from tests.support.broker import RawClient
    from tests.test_server_client_quotas import alter

    broker = broker_factory()
    topic, group = unique("t"), unique("g")
    with RawClient(broker.host, broker.port, client_id="admin") as c:
        tid = create(c, topic)
        set_group_config(c, group, share_auto_offset_reset="earliest")
        for _ in range(4):
            produce(c, topic, 100, size=150)  # batches of about 16 KB
        assert alter(c, [([("client-id", "slow-share")], [("consumer_byte_rate", 1000, False)])]) == [(0, None)]
    with RawClient(broker.host, broker.port, client_id="slow-share") as c:
        mid = member_id()
        assert hb(c, group, mid, 0, [topic]).error_code == 0
        r = fetch(c, group, mid, 0, [(tid, 0)], max_records=400)
        # max_bytes is clamped to one quota window's worth (1000 B/s x 10 s): the first batch
        # only (a batch is always whole), and the answer is throttled
        assert acquired(r) == {(tid, 0): [(0, 99, 1)]}
        assert r.throttle_time_ms > 0
