"""The KIP-848 consumer group protocol on the broker, at the wire level with ``RawClient``:
ConsumerGroupHeartbeat (join, epochs, errors, revocation before reassignment, static
members, session expiry, topic changes, regex), ConsumerGroupDescribe, OffsetCommit /
OffsetFetch v9 member-epoch checks, ListGroups v4/v5 filters, DescribeGroups, DeleteGroups,
classic/consumer exclusivity, and the group surviving a broker restart.
(Real clients: ``test_server_consumer_group_clients.py``.)"""

from __future__ import annotations

import time
import uuid

import pytest

from broker.protocol import ApiKey, ErrorCode

pytestmark = pytest.mark.timeout(240)

HB = ApiKey.CONSUMER_GROUP_HEARTBEAT
FAST = {"group.consumer.heartbeat.interval.ms": "200", "group.initial.rebalance.delay.ms": "0"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(c, name: str, partitions: int = 6) -> None:
    r = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 1000})
    assert r.topics[0].error_code == 0, r


def hb(c, group: str, member_id: str = "", epoch: int = 0, *, topics=None, regex=None, owned=None,
       instance=None, assignor=None, rebalance_timeout=30000, version: int = 1):
    body = {"group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": instance,
            "rack_id": None, "rebalance_timeout_ms": rebalance_timeout if epoch == 0 else -1,
            "subscribed_topic_names": topics, "server_assignor": assignor,
            "topic_partitions": None if owned is None else [
                {"topic_id": t, "partitions": sorted(ps)} for t, ps in owned.items()]}
    if version >= 1:
        body["subscribed_topic_regex"] = regex
    return c.request(HB, version, body)


def parts(response) -> dict:
    """{topic id: set of partitions} of a heartbeat response's assignment (None: no assignment)."""
    if response.assignment is None:
        return None
    return {tp.topic_id: set(tp.partitions) for tp in response.assignment.topic_partitions if tp.partitions}


def count(assignment) -> int:
    return sum(len(ps) for ps in (assignment or {}).values())


class Member:
    """A raw KIP-848 member that remembers its id, epoch and owned partitions, and revokes
    at once what the coordinator takes away."""

    def __init__(self, client, group, topics=None, regex=None, instance=None, assignor=None, member_id=""):
        self.c, self.group, self.topics, self.regex = client, group, topics, regex
        self.instance, self.assignor = instance, assignor
        self.member_id, self.epoch, self.owned = member_id, 0, {}

    def heartbeat(self, send_owned: bool = True):
        r = hb(self.c, self.group, self.member_id, self.epoch, topics=self.topics if self.epoch == 0 else None,
               regex=self.regex if self.epoch == 0 else None, owned=self.owned if send_owned and self.epoch else None,
               instance=self.instance, assignor=self.assignor)
        assert r.error_code == 0, r
        self.member_id, self.epoch = r.member_id, r.member_epoch
        got = parts(r)
        if got is not None:
            self.owned = got
        return r

    def leave(self, epoch: int = -1):
        return hb(self.c, self.group, self.member_id, epoch, instance=self.instance)


def describe(c, group):
    r = c.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group], "include_authorized_operations": False})
    return r.groups[0]


def wait_for(predicate, timeout: float = 60.0, step=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if step is not None:
            step()
        if predicate():
            return True
        time.sleep(0.1)
    return False


# --- ApiVersions and the first heartbeat ---

def test_api_versions_advertise_the_consumer_group_apis(raw_client):
    r = raw_client().request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    versions = {a.api_key: (a.min_version, a.max_version) for a in r.api_keys}
    assert versions[HB] == (0, 1)
    assert versions[ApiKey.CONSUMER_GROUP_DESCRIBE] == (0, 0)
    assert versions[ApiKey.OFFSET_COMMIT][1] >= 9 and versions[ApiKey.OFFSET_FETCH][1] >= 9
    assert versions[ApiKey.LIST_GROUPS][1] == 5


def test_join_generates_or_accepts_member_ids_and_assigns_everything(raw_client):
    c = raw_client()
    topic, group = unique("t"), unique("g")
    create(c, topic)
    r = hb(c, group, topics=[topic], version=0)
    assert r.error_code == 0 and len(r.member_id) == 22 and r.member_epoch == 1
    assert r.heartbeat_interval_ms == 5000
    assert count(parts(r)) == 6
    own_id = uuid.uuid4().hex
    r2 = hb(c, unique("g"), own_id, topics=[topic])  # v1: the client's own member id
    assert r2.error_code == 0 and r2.member_id == own_id and count(parts(r2)) == 6


@pytest.mark.parametrize("kwargs,code", [
    ({"group": "", "topics": ["x"]}, ErrorCode.INVALID_REQUEST),
    ({"epoch": 3}, ErrorCode.INVALID_REQUEST),  # no member id
    ({"topics": None}, ErrorCode.INVALID_REQUEST),  # no subscription on join
    ({"topics": ["x"], "rebalance_timeout": -1}, ErrorCode.INVALID_REQUEST),
    ({"epoch": -3, "member_id": "m"}, ErrorCode.INVALID_REQUEST),
    ({"epoch": -2, "member_id": "m"}, ErrorCode.INVALID_REQUEST),  # -2 without an instance id
    ({"topics": ["x"], "assignor": "sticky"}, ErrorCode.UNSUPPORTED_ASSIGNOR),
    ({"topics": None, "regex": "(unclosed"}, ErrorCode.INVALID_REGULAR_EXPRESSION),
])
def test_malformed_heartbeats(raw_client, kwargs, code):
    c = raw_client()
    kwargs = dict(kwargs)
    group = kwargs.pop("group", unique("g"))
    member_id = kwargs.pop("member_id", "")
    epoch = kwargs.pop("epoch", 0)
    r = hb(c, group, member_id, epoch, **kwargs)
    assert r.error_code == code, r
    assert r.member_epoch == -1 and r.member_id is None


def test_unknown_member_and_fenced_epochs(raw_client):
    c = raw_client()
    topic, group = unique("t"), unique("g")
    create(c, topic)
    assert hb(c, group, "nobody", 3).error_code == ErrorCode.GROUP_ID_NOT_FOUND  # no such group
    m = Member(c, group, [topic])
    m.heartbeat()
    assert hb(c, group, "nobody", 3).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert hb(c, group, m.member_id, m.epoch + 1).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    other = Member(c, group, [topic])
    other.heartbeat()
    assert other.epoch == 2
    assert hb(c, group, other.member_id, 1, owned={}).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert hb(c, group, "nobody", -1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    r = m.leave()
    assert r.error_code == 0 and r.member_epoch == -1


def test_group_max_size(broker_factory):
    b = broker_factory({"group.consumer.max.size": "1"})
    from tests.support.broker import RawClient
    with RawClient(b.host, b.port) as c:
        topic, group = unique("t"), unique("g")
        create(c, topic)
        Member(c, group, [topic]).heartbeat()
        assert hb(c, group, topics=[topic]).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


# --- reconciliation ---

def test_revocation_before_reassignment(raw_client):
    c = raw_client()
    topic, group = unique("t"), unique("g")
    create(c, topic)
    a, b = Member(c, group, [topic]), Member(c, group, [topic])
    a.heartbeat()
    assert count(a.owned) == 6 and a.epoch == 1
    b.heartbeat()
    assert b.epoch == 2 and count(b.owned) == 0  # a still owns everything
    owned_by_a = dict(a.owned)
    r = hb(c, group, a.member_id, a.epoch, owned=owned_by_a)  # a learns it must give 3 up...
    assert r.member_epoch == 1 and count(parts(r)) == 3  # ... at its old epoch
    b.heartbeat()
    assert count(b.owned) == 0  # the 3 are pending revocation at a: not given to b yet
    assert describe(c, group).group_state == "Reconciling"
    a.owned = parts(r)
    a.heartbeat()  # acknowledges the revocation (omits the revoked partitions)
    assert a.epoch == 2 and count(a.owned) == 3
    b.heartbeat()
    assert count(b.owned) == 3
    flat_a = {(t, p) for t, ps in a.owned.items() for p in ps}
    flat_b = {(t, p) for t, ps in b.owned.items() for p in ps}
    assert not flat_a & flat_b and len(flat_a | flat_b) == 6
    a.heartbeat()
    b.heartbeat()
    d = describe(c, group)
    assert d.group_state == "Stable" and d.group_epoch == 2 and d.assignment_epoch == 2
    assert d.assignor_name == "uniform"
    assert {m.member_id: m.member_epoch for m in d.members} == {a.member_id: 2, b.member_id: 2}
    for m in d.members:
        assert [tp.topic_name for tp in m.assignment.topic_partitions] == [topic]
        assert m.assignment == m.target_assignment
    # b leaves: a gets everything back at the next epoch
    assert b.leave().error_code == 0
    a.heartbeat()
    assert a.epoch == 3 and count(a.owned) == 6


def test_range_assignor_chosen_by_the_client(raw_client):
    c = raw_client()
    t1, t2, group = unique("t"), unique("t"), unique("g")
    create(c, t1, 4)
    create(c, t2, 4)
    a = Member(c, group, [t1, t2], assignor="range")
    b = Member(c, group, [t1, t2], assignor="range")
    for _ in range(3):
        a.heartbeat()
        b.heartbeat()
    assert describe(c, group).assignor_name == "range"
    for m in (a, b):
        ps = list(m.owned.values())
        assert len(ps) == 2 and ps[0] == ps[1]  # co-partitioned


def test_new_partitions_and_regex_subscriptions(raw_client):
    c = raw_client()
    prefix = unique("rx")
    create(c, prefix + "-a", 2)
    group = unique("g")
    m = Member(c, group, regex=prefix.replace("-", "\\-") + "-.*")
    m.heartbeat()
    assert count(m.owned) == 0  # the regex is resolved at the next heartbeat (as Kafka: asynchronously)
    m.heartbeat()
    assert count(m.owned) == 2 and m.epoch == 2
    create(c, prefix + "-b", 3)
    m.heartbeat()
    assert count(m.owned) == 5 and m.epoch == 3
    r = c.request(ApiKey.CREATE_PARTITIONS, 1, {"topics": [{"name": prefix + "-b", "count": 4, "assignments": None}],
                                                "timeout_ms": 1000, "validate_only": False})
    assert r.results[0].error_code == 0
    m.heartbeat()
    assert count(m.owned) == 6 and m.epoch == 4


# --- static membership ---

def test_static_members(raw_client):
    c = raw_client()
    topic, group = unique("t"), unique("g")
    create(c, topic)
    a = Member(c, group, [topic], instance="i1")
    a.heartbeat()
    assert hb(c, group, topics=[topic], instance="i1").error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    assert hb(c, group, "other", a.epoch, instance="i1").error_code == ErrorCode.FENCED_INSTANCE_ID
    r = a.leave(-2)
    assert r.error_code == 0 and r.member_epoch == -2
    assert describe(c, group).group_epoch == 1  # a temporary leave changes nothing
    back = Member(c, group, [topic], instance="i1")
    back.heartbeat()
    assert (back.member_id != a.member_id, back.epoch, back.owned) == (True, 1, a.owned)
    assert [m.member_id for m in describe(c, group).members] == [back.member_id]
    assert back.leave().error_code == 0
    assert describe(c, group).group_state == "Empty"


# --- offsets ---

def commit(c, group, topic, member_id, epoch, version=9):
    r = c.request(ApiKey.OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member_id,
        "group_instance_id": None, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})
    return r.topics[0].partitions[0].error_code


def fetch(c, group, topic, member_id=None, epoch=-1):
    r = c.request(ApiKey.OFFSET_FETCH, 9, {"groups": [{"group_id": group, "member_id": member_id,
                                                       "member_epoch": epoch, "topics": [
                                                           {"name": topic, "partition_indexes": [0]}]}],
                                           "require_stable": False})
    g = r.groups[0]
    return g.error_code, (g.topics[0].partitions[0].committed_offset if g.topics else None)


def test_offset_commit_and_fetch_member_epochs(raw_client):
    c = raw_client()
    topic, group = unique("t"), unique("g")
    create(c, topic)
    a, b = Member(c, group, [topic]), Member(c, group, [topic])
    a.heartbeat()
    b.heartbeat()  # b at epoch 2, a still at 1
    assert commit(c, group, topic, a.member_id, 1) == ErrorCode.NONE
    assert commit(c, group, topic, b.member_id, 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert commit(c, group, topic, b.member_id, 3) == ErrorCode.FENCED_MEMBER_EPOCH
    assert commit(c, group, topic, "nobody", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(c, group, topic, "", -1) == ErrorCode.UNKNOWN_MEMBER_ID  # admin commit: empty groups only
    assert fetch(c, group, topic, a.member_id, 1) == (ErrorCode.NONE, 5)
    assert fetch(c, group, topic) == (ErrorCode.NONE, 5)
    assert fetch(c, group, topic, b.member_id, 1)[0] == ErrorCode.STALE_MEMBER_EPOCH
    assert fetch(c, group, topic, "nobody", 1)[0] == ErrorCode.UNKNOWN_MEMBER_ID
    a.leave()
    b.leave()
    assert commit(c, group, topic, "", -1) == ErrorCode.NONE


# --- listing, describing, deleting; classic vs consumer ---

def test_list_describe_delete(raw_client):
    c = raw_client()
    topic, group = unique("t"), unique("g")
    create(c, topic)
    m = Member(c, group, [topic])
    m.heartbeat()

    def listed(version=5, states=(), types=()):
        body = {"states_filter": list(states), "types_filter": list(types)}
        return {g.group_id: g for g in c.request(ApiKey.LIST_GROUPS, version, body).groups}

    g = listed()[group]
    assert (g.protocol_type, g.group_state, g.group_type) == ("consumer", "Stable", "consumer")
    assert group in listed(types=["Consumer"]) and group not in listed(types=["classic"])
    assert group in listed(states=["stable"]) and group not in listed(states=["Empty"])
    assert group in listed(version=4, states=["Stable"])
    d = c.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False}).groups[0]
    assert (d.error_code, d.group_state) == (0, "Dead")  # Kafka 4 (DescribeGroups <= v5)
    missing = describe(c, unique("nope"))
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    r = c.request(ApiKey.DELETE_GROUPS, 1, {"groups_names": [group]})
    assert r.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    m.leave()
    r = c.request(ApiKey.DELETE_GROUPS, 1, {"groups_names": [group]})
    assert r.results[0].error_code == 0
    assert group not in listed()


def test_classic_and_consumer_groups_exclude_each_other(broker_factory):
    from tests.support.broker import RawClient
    b = broker_factory(FAST)
    with RawClient(b.host, b.port) as c:
        topic, group = unique("t"), unique("g")
        create(c, topic)
        m = Member(c, group, [topic])
        m.heartbeat()
        r = c.request(ApiKey.JOIN_GROUP, 3, {
            "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
        assert r.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        m.leave()
        # an empty consumer group becomes a classic group...
        r = c.request(ApiKey.JOIN_GROUP, 3, {
            "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
        assert r.error_code == 0 and r.generation_id == 1
        # ... and a classic group with members is not a consumer group
        assert hb(c, group, topics=[topic]).error_code == ErrorCode.GROUP_ID_NOT_FOUND
        lr = c.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["classic"]})
        assert group in {g.group_id for g in lr.groups}


# --- sessions and restarts ---

def test_session_expiry_moves_partitions(broker_factory):
    from tests.support.broker import RawClient
    b = broker_factory({**FAST, "group.consumer.session.timeout.ms": "1500"})
    with RawClient(b.host, b.port) as c:
        topic, group = unique("t"), unique("g")
        create(c, topic)
        a, z = Member(c, group, [topic]), Member(c, group, [topic])
        a.heartbeat()
        z.heartbeat()
        for _ in range(3):
            a.heartbeat()
            z.heartbeat()
        assert count(a.owned) == 3 and count(z.owned) == 3
        # z stops heartbeating: its session expires and a gets everything
        assert wait_for(lambda: count(a.owned) == 6, step=a.heartbeat)
        assert hb(c, group, z.member_id, z.epoch, owned=z.owned).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_group_survives_a_restart(broker_factory):
    from tests.support.broker import RawClient
    b = broker_factory(FAST)
    topic, group = unique("t"), unique("g")
    with RawClient(b.host, b.port) as c:
        create(c, topic)
        a, z = Member(c, group, [topic], instance="ia"), Member(c, group, [topic])
        for _ in range(3):
            a.heartbeat()
            z.heartbeat()
        before = describe(c, group)
        assert commit(c, group, topic, a.member_id, a.epoch) == 0
    b.stop()
    b.start()
    with RawClient(b.host, b.port) as c:
        after = describe(c, group)
        assert (after.group_epoch, after.assignment_epoch, after.group_state) == \
            (before.group_epoch, before.assignment_epoch, "Stable")
        assert sorted((m.member_id, m.member_epoch, m.instance_id, str(m.assignment)) for m in after.members) == \
            sorted((m.member_id, m.member_epoch, m.instance_id, str(m.assignment)) for m in before.members)
        a.c = z.c = c
        a.heartbeat()  # members resume with their epochs
        z.heartbeat()
        assert a.epoch == before.group_epoch and count(a.owned) + count(z.owned) == 6
        assert fetch(c, group, topic, a.member_id, a.epoch) == (0, 5)
        a.leave()
        z.leave()
    b.stop()
    b.start()
    with RawClient(b.host, b.port) as c:
        d = describe(c, group)
        assert d.group_state == "Empty" and d.members == []


def test_revocation_timeout_fences_the_member(raw_client):
    c = raw_client()
    topic, group = unique("t"), unique("g")
    create(c, topic)
    a = Member(c, group, [topic])
    r = hb(c, group, topics=[topic], rebalance_timeout=800)  # a joins with a short rebalance timeout
    a.member_id, a.epoch, a.owned = r.member_id, r.member_epoch, parts(r)
    b = Member(c, group, [topic])
    b.heartbeat()
    everything = dict(a.owned)

    def stubborn():  # a keeps heartbeating but never gives anything up
        r = hb(c, group, a.member_id, a.epoch, owned=everything)
        stubborn.code = r.error_code
    stubborn.code = 0
    assert wait_for(lambda: stubborn.code == ErrorCode.UNKNOWN_MEMBER_ID, step=stubborn)
    b.heartbeat()
    assert count(b.owned) == 6


def test_deleted_topic_is_taken_away(raw_client):
    c = raw_client()
    t1, t2, group = unique("t"), unique("t"), unique("g")
    create(c, t1, 2)
    create(c, t2, 3)
    m = Member(c, group, [t1, t2])
    m.heartbeat()
    assert count(m.owned) == 5
    r = c.request(ApiKey.DELETE_TOPICS, 3, {"topic_names": [t2], "timeout_ms": 1000})
    assert r.responses[0].error_code == 0
    m.heartbeat()  # the revocation of t2's partitions...
    m.heartbeat()  # ... acknowledged
    assert count(m.owned) == 2 and m.epoch == 2


def test_join_retried_with_the_same_member_id_keeps_the_member(raw_client):
    c = raw_client()
    topic, group = unique("t"), unique("g")
    create(c, topic)
    own_id = uuid.uuid4().hex
    first = hb(c, group, own_id, topics=[topic])
    again = hb(c, group, own_id, topics=[topic])  # the first response was "lost"
    assert (again.error_code, again.member_id, again.member_epoch) == (0, own_id, first.member_epoch)
    assert parts(again) == parts(first)
    assert describe(c, group).group_epoch == 1


def test_offset_delete_knows_the_subscribed_topics(raw_client):
    c = raw_client()
    t1, t2, group = unique("t"), unique("t"), unique("g")
    create(c, t1, 1)
    create(c, t2, 1)
    m = Member(c, group, [t1])
    m.heartbeat()
    assert commit(c, group, t1, m.member_id, m.epoch) == 0
    assert commit(c, group, t2, m.member_id, m.epoch) == 0

    def delete(topic):
        r = c.request(ApiKey.OFFSET_DELETE, 0, {"group_id": group, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0}]}]})
        return r.error_code, r.topics[0].partitions[0].error_code

    assert delete(t1) == (0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
    assert delete(t2) == (0, 0)
    assert fetch(c, group, t2) == (0, -1) and fetch(c, group, t1) == (0, 5)


def test_empty_consumer_group_without_offsets_is_cleaned_up(broker_factory):
    from tests.support.broker import RawClient
    b = broker_factory({"offsets.retention.check.interval.ms": "200"})
    topic, group, kept = unique("t"), unique("g"), unique("g")
    with RawClient(b.host, b.port) as c:
        create(c, topic)
        m, k = Member(c, group, [topic]), Member(c, kept, [topic])
        m.heartbeat()
        k.heartbeat()
        assert commit(c, kept, topic, k.member_id, k.epoch) == 0
        m.leave()
        k.leave()
        assert wait_for(lambda: describe(c, group).error_code == ErrorCode.GROUP_ID_NOT_FOUND)
        assert describe(c, kept).group_state == "Empty"  # its offsets keep it
    b.restart()
    with RawClient(b.host, b.port) as c:
        assert describe(c, group).error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert describe(c, kept).group_state == "Empty"


# --- the records in __consumer_offsets, read with the test's own spec-driven decoder ---

def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _read(t: str, f: dict, data: bytes, pos: int):
    import struct as st
    if t in ("int8", "int16", "int32", "int64"):
        fmt = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q"}[t]
        return st.unpack_from(fmt, data, pos)[0], pos + st.calcsize(fmt)
    if t == "uuid":
        return uuid.UUID(bytes=data[pos:pos + 16]), pos + 16
    if t == "string":
        n, pos = _uvarint(data, pos)
        return (None if n == 0 else data[pos:pos + n - 1].decode()), pos + max(n - 1, 0)
    if t.startswith("[]"):
        n, pos = _uvarint(data, pos)
        items = []
        for _ in range(n - 1):
            item, pos = _read(t[2:], f, data, pos)
            items.append(item)
        return items, pos
    return flexible_decode(f["fields"], data, pos)  # a struct


def flexible_decode(fields: list, data: bytes, pos: int = 0) -> tuple[dict, int]:
    """Decode version 0 (flexible) of a kafka-spec struct with the test's own reader:
    compact strings and arrays (uvarint length + 1), uuids, and a tagged-field section
    ending every struct (skipped)."""
    out = {}
    for f in fields:
        if "taggedVersions" in f:
            continue
        out[f["name"]], pos = _read(f["type"], f, data, pos)
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
    return out, pos


def decode_consumer_record(key: bytes, value: bytes | None):
    """(key type, key fields, value fields or None) of a KIP-848 record, read with the
    JSON specs of tools/kafka-spec/group-coordinator (independent of the broker's codec)."""
    import json
    import re
    import struct as st

    from tests.support.broker import ROOT
    spec_dir = ROOT / "tools" / "kafka-spec" / "group-coordinator"

    def spec(name):
        return json.loads(re.sub(r"^\s*//.*$", "", (spec_dir / f"{name}.json").read_text(), flags=re.M))

    (key_type,) = st.unpack_from(">h", key)
    names = {3: "ConsumerGroupMetadata", 4: "ConsumerGroupPartitionMetadata", 5: "ConsumerGroupMemberMetadata",
             6: "ConsumerGroupTargetAssignmentMetadata", 7: "ConsumerGroupTargetAssignmentMember",
             8: "ConsumerGroupCurrentMemberAssignment"}
    key_spec = spec(names[key_type] + "Key")
    assert key_spec["validVersions"] == str(key_type) and key_spec["flexibleVersions"] == "none"
    k, pos = {}, 2
    for f in key_spec["fields"]:
        (n,) = st.unpack_from(">h", key, pos)
        k[f["name"]] = key[pos + 2:pos + 2 + n].decode()
        pos += 2 + n
    assert pos == len(key)
    if value is None:
        return key_type, k, None
    assert st.unpack_from(">h", value)[0] == 0
    value_spec = spec(names[key_type] + "Value")
    common = {cs["name"]: cs["fields"] for cs in value_spec.get("commonStructs", [])}
    for f in value_spec["fields"]:  # common structs, used by name
        if f["type"].lstrip("[]") in common:
            f["fields"] = common[f["type"].lstrip("[]")]
    v, end = flexible_decode(value_spec["fields"], value, 2)
    assert end == len(value)
    return key_type, k, v


def test_records_are_kafkas_and_tombstone_a_leaving_member(broker_factory):
    from tests.support.broker import RawClient
    from tests.test_server_group_offsets import offsets_partition, offsets_records
    b = broker_factory(FAST)
    topic, group = unique("t"), unique("g")
    with RawClient(b.host, b.port) as c:
        create(c, topic)
        a, z = Member(c, group, [topic], instance="ia"), Member(c, group, [topic])
        for _ in range(3):
            a.heartbeat()
            z.heartbeat()
        z.leave()
        a.heartbeat()
        a.heartbeat()
        d = describe(c, group)
    b.stop()
    decoded = [decode_consumer_record(bytes(r.key), None if r.value is None else bytes(r.value))
               for _, r in offsets_records(b.log_dir, offsets_partition(group))
               if r.key is not None and r.key[:2] in (b"\x00\x03", b"\x00\x04", b"\x00\x05", b"\x00\x06",
                                                      b"\x00\x07", b"\x00\x08")]
    assert {t for t, _, _ in decoded} == {3, 4, 5, 6, 7, 8}
    assert all(k["GroupId"] == group for _, k, _ in decoded)
    latest = {}
    for t, k, v in decoded:
        latest[(t, k.get("MemberId"))] = v
    assert latest[(3, None)]["Epoch"] == d.group_epoch
    assert latest[(6, None)]["AssignmentEpoch"] == d.assignment_epoch
    assert latest[(4, None)]["Topics"][0]["TopicName"] == topic
    assert latest[(4, None)]["Topics"][0]["NumPartitions"] == 6
    # z's three records end as tombstones (current assignment, target, metadata)
    assert latest[(8, z.member_id)] is None and latest[(7, z.member_id)] is None
    assert latest[(5, z.member_id)] is None
    meta = latest[(5, a.member_id)]
    assert (meta["InstanceId"], meta["SubscribedTopicNames"], meta["ClientId"]) == ("ia", [topic], "raw-test")
    current = latest[(8, a.member_id)]
    assert current["MemberEpoch"] == a.epoch and current["State"] == 0
    assert sum(len(tp["Partitions"]) for tp in current["AssignedPartitions"]) == 6
    target = latest[(7, a.member_id)]
    assert sorted(p for tp in target["TopicPartitions"] for p in tp["Partitions"]) == list(range(6))
