"""The client's group-offset API (``broker/client/consumer/group_offsets.py``) against the
real broker: commit and fetch through a config or a reused ``ConsumerNetworkClient``,
typed errors, group listing / description / deletion, ``GroupsNotSupportedError`` from a
broker that does not advertise the group APIs, retries after a lost response, deadlines;
and interoperability with real clients: what kafka-python's and confluent-kafka's
assign()-based consumers commit, the others read (and start consuming from).
(subscribe()-style consumers: tests/test_server_group_membership.py.)
"""

from __future__ import annotations

import socket
import time
import uuid

import pytest

from broker.client.consumer import (
    ConsumerNetworkClient,
    GroupsNotSupportedError,
    TopicPartition,
    commit_offsets,
    delete_groups,
    describe_groups,
    fetch_committed,
    list_groups,
)
from broker.client.errors import KafkaError, KafkaTimeoutError
from broker.protocol import ApiKey, ErrorCode
from tests.support.broker import RawClient
from tests.support.fault_proxy import FaultProxy

pytestmark = pytest.mark.timeout(120)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def create(bootstrap: str, name: str, partitions: int = 1) -> None:
    host, port = bootstrap.rsplit(":", 1)
    with RawClient(host, int(port)) as c:
        r = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
             "configs": []}], "timeout_ms": 1000})
        assert r.topics[0].error_code == 0, r


def raw_metadata(bootstrap: str, group: str, topic: str, partition: int) -> str:
    host, port = bootstrap.rsplit(":", 1)
    with RawClient(host, int(port)) as c:
        r = c.request(ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": [
            {"name": topic, "partition_indexes": [partition]}]})
        return r.topics[0].partitions[0].metadata


@pytest.fixture
def cfg(kafka_broker):
    return {"bootstrap.servers": kafka_broker.bootstrap, "default.api.timeout.ms": 20000}


# --- the API against the broker ---

def test_commit_and_fetch(kafka_broker, cfg):
    topic, group = unique("co-topic"), unique("co-group")
    create(kafka_broker.bootstrap, topic, 3)
    assert commit_offsets(cfg, group, {(topic, 0): 5, TopicPartition(topic, 1): 6}, "run-1") is None
    got = fetch_committed(cfg, group, [(topic, 0), (topic, 1), (topic, 2)])
    assert got == {TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 6, TopicPartition(topic, 2): None}
    assert all(isinstance(tp, TopicPartition) for tp in got)
    assert raw_metadata(kafka_broker.bootstrap, group, topic, 1) == "run-1"
    with ConsumerNetworkClient(cfg) as client:  # a reused client stays open between calls
        commit_offsets(client, group, {(topic, 2): 0})
        commit_offsets(client, group, {(topic, 0): 2})  # going back is allowed
        assert fetch_committed(client, group, [(topic, 0), (topic, 2)]) == {
            TopicPartition(topic, 0): 2, TopicPartition(topic, 2): 0}
        assert not client.closed
    assert fetch_committed(cfg, group, []) == {}
    commit_offsets(cfg, group, {})  # nothing to commit: no request, no error
    assert fetch_committed(cfg, unique("never"), [(topic, 0)]) == {TopicPartition(topic, 0): None}


def test_typed_errors(kafka_broker, cfg):
    topic, group = unique("co-err"), unique("co-err")
    create(kafka_broker.bootstrap, topic, 1)
    with pytest.raises(KafkaError) as e:
        commit_offsets(cfg, group, {(topic, 0): 1, (topic, 4): 1})
    assert e.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and f"{topic}-4" in str(e.value)
    assert fetch_committed(cfg, group, [(topic, 0)]) == {TopicPartition(topic, 0): 1}  # the valid one landed
    with pytest.raises(KafkaError) as e:
        commit_offsets(cfg, group, {(topic, 0): 1}, metadata="m" * 5000)
    assert e.value.code == ErrorCode.OFFSET_METADATA_TOO_LARGE
    for bad in ("", None):
        with pytest.raises(KafkaError) as e:
            fetch_committed(cfg, bad, [(topic, 0)])
        assert e.value.code == ErrorCode.INVALID_GROUP_ID
    for offset in (-1, 1.5, True):
        with pytest.raises(ValueError, match="invalid offset"):
            commit_offsets(cfg, group, {(topic, 0): offset})


def test_list_describe_and_delete(kafka_broker, cfg):
    topic = unique("co-admin")
    create(kafka_broker.bootstrap, topic, 1)
    a, b, ghost = unique("ca"), unique("cb"), unique("ghost")
    commit_offsets(cfg, a, {(topic, 0): 1})
    commit_offsets(cfg, b, {(topic, 0): 2})
    listed = {g.group_id: g for g in list_groups(cfg)}
    assert (listed[a].protocol_type, listed[a].state) == ("", "Empty") and b in listed and ghost not in listed
    described = describe_groups(cfg, [a, ghost])
    assert (described[a].state, described[a].protocol_type, described[a].members) == ("Empty", "", ())
    assert described[ghost].state == "Dead"
    delete_groups(cfg, [a])
    assert fetch_committed(cfg, a, [(topic, 0)]) == {TopicPartition(topic, 0): None}
    assert a not in {g.group_id for g in list_groups(cfg)}
    with pytest.raises(KafkaError) as e:
        delete_groups(cfg, [a])
    assert e.value.code == ErrorCode.GROUP_ID_NOT_FOUND and a in str(e.value)
    with pytest.raises(KafkaError, match="deleting 2 groups failed") as e:
        delete_groups(cfg, [ghost, a])
    assert ghost in str(e.value) and a in str(e.value)
    assert fetch_committed(cfg, b, [(topic, 0)]) == {TopicPartition(topic, 0): 2}


def test_groups_not_supported_names_the_broker(tmp_path):
    """The real broker, in process, advertising less (as a broker without group support
    would): every call fails at once with GroupsNotSupportedError naming it."""
    from broker.server import KafkaBroker

    broker = KafkaBroker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs")})
    broker.start()
    try:
        state = broker.apis.state
        full = state.api_versions
        cfg = {"bootstrap.servers": broker.bootstrap_servers, "default.api.timeout.ms": 20000}
        state.api_versions = tuple(a for a in full if a[0] != ApiKey.FIND_COORDINATOR)
        for call in (lambda: fetch_committed(cfg, "g", [("t", 0)]), lambda: commit_offsets(cfg, "g", {("t", 0): 1}),
                     lambda: describe_groups(cfg, ["g"]), lambda: delete_groups(cfg, ["g"])):
            with pytest.raises(GroupsNotSupportedError) as e:
                call()
            assert broker.bootstrap_servers in str(e.value) and "FIND_COORDINATOR" in str(e.value)
        state.api_versions = tuple(a for a in full if a[0] != ApiKey.LIST_GROUPS)
        with pytest.raises(GroupsNotSupportedError, match="LIST_GROUPS"):
            list_groups(cfg)
        state.api_versions = tuple(a for a in full if a[0] != ApiKey.OFFSET_COMMIT)
        with pytest.raises(GroupsNotSupportedError, match="OFFSET_COMMIT .*does not advertise it"):
            commit_offsets(cfg, "g", {("t", 0): 1})
        assert fetch_committed(cfg, "g", [("t", 0)]) == {TopicPartition("t", 0): None}
        assert isinstance(GroupsNotSupportedError("x"), KafkaError)
    finally:
        broker.shutdown()


def test_unreachable_broker_times_out():
    cfg = {"bootstrap.servers": f"127.0.0.1:{free_port()}", "reconnect.backoff.max.ms": 100}
    with pytest.raises(KafkaTimeoutError, match=r"reachable \(connection refused\); waited 1500 ms"):
        fetch_committed(cfg, "g", [("t", 0)], timeout_ms=1500)


def test_lost_responses_are_retried(broker_factory):
    port = free_port()
    with FaultProxy("127.0.0.1", port) as proxy:
        broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{port}",
                                 "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}",
                                 "offsets.topic.num.partitions": "2"})
        bootstrap = f"127.0.0.1:{proxy.port}"
        create(broker.bootstrap, "lost", 1)
        cfg = {"bootstrap.servers": bootstrap, "request.timeout.ms": 5000, "default.api.timeout.ms": 30000}
        proxy.drop_response(ApiKey.FIND_COORDINATOR)
        commit_offsets(cfg, "g-lost", {("lost", 0): 3})
        proxy.drop_response(ApiKey.OFFSET_COMMIT)  # stored by the broker, the answer lost: committed again
        commit_offsets(cfg, "g-lost", {("lost", 0): 4})
        proxy.drop_response(ApiKey.OFFSET_FETCH)
        assert fetch_committed(cfg, "g-lost", [("lost", 0)]) == {TopicPartition("lost", 0): 4}
        assert proxy.dropped == 3
        assert proxy.requests[ApiKey.OFFSET_COMMIT] == 3 and proxy.requests[ApiKey.OFFSET_FETCH] == 2


# --- interoperability with real clients ---

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=0)
    assert p.flush(20) == 0


def test_kafka_python_and_confluent_read_each_others_commits(kafka_broker, cfg):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    topic, group = unique("co-interop"), unique("co-interop")
    create(kafka_broker.bootstrap, topic, 2)
    _produce(kafka_broker.bootstrap, topic, 10)
    kp = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, group_id=group, enable_auto_commit=False,
                       client_id="kp-groups")
    try:
        kp.assign([KTP(topic, 0), KTP(topic, 1)])
        kp.commit({KTP(topic, 0): OffsetAndMetadata(3, "from-kafka-python", -1)})
        assert kp.committed(KTP(topic, 0)) == 3 and kp.committed(KTP(topic, 1)) is None
    finally:
        kp.close()
    assert fetch_committed(cfg, group, [(topic, 0), (topic, 1)]) == {
        TopicPartition(topic, 0): 3, TopicPartition(topic, 1): None}
    assert raw_metadata(kafka_broker.bootstrap, group, topic, 0) == "from-kafka-python"

    TP = confluent_kafka.TopicPartition
    ck = confluent_kafka.Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": group,
                                   "enable.auto.commit": False, "client.id": "ck-groups",
                                   "auto.offset.reset": "earliest"})
    try:
        got = ck.committed([TP(topic, 0), TP(topic, 1)], timeout=15)
        assert [(p.partition, p.offset) for p in got] == [(0, 3), (1, confluent_kafka.OFFSET_INVALID)]
        ck.assign([TP(topic, 0)])  # no offset given: starts from the group's committed one
        first = None
        deadline = time.monotonic() + 30
        while first is None and time.monotonic() < deadline:
            m = ck.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                first = m
        assert first is not None and first.offset() == 3 and first.value() == b"v3"
        ck.commit(offsets=[TP(topic, 0, 7), TP(topic, 1, 0)], asynchronous=False)
    finally:
        ck.close()
    assert fetch_committed(cfg, group, [(topic, 0), (topic, 1)]) == {
        TopicPartition(topic, 0): 7, TopicPartition(topic, 1): 0}

    commit_offsets(cfg, group, {(topic, 0): 5}, metadata="from-kafkalog")
    kp = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, group_id=group, enable_auto_commit=False,
                       client_id="kp-groups")
    try:
        assert kp.committed(KTP(topic, 0), metadata=True) == OffsetAndMetadata(5, "from-kafkalog", -1)
        assert kp.committed(KTP(topic, 1)) == 0
        kp.assign([KTP(topic, 0)])  # starts from the committed offset too
        records = []
        deadline = time.monotonic() + 30
        while not records and time.monotonic() < deadline:
            records = [r for batch in kp.poll(500).values() for r in batch]
        assert records and records[0].offset == 5 and records[0].value == b"v5"
    finally:
        kp.close()
    used = kafka_broker.api_versions_used("ck-groups")
    assert used["FIND_COORDINATOR"] == {2} and used["OFFSET_COMMIT"] == {9} and used["OFFSET_FETCH"] == {9}
    used = kafka_broker.api_versions_used("kp-groups")
    assert (used["OFFSET_COMMIT"], used["OFFSET_FETCH"]) == ({8}, {8}), used


# --- altering an active group, OffsetDelete, assignments ---

def test_commit_to_a_group_with_active_members_is_refused_clearly(kafka_broker, cfg):
    """A group with a live member (a confluent-kafka consumer that subscribed) answers a
    simple (generation -1) commit with UNKNOWN_MEMBER_ID (Kafka's
    ClassicGroup.validateOffsetCommit): the error says what is wrong, and nothing is stored."""
    topic, group = unique("active"), unique("busy")
    create(kafka_broker.bootstrap, topic, 1)
    member = confluent_kafka.Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": group,
                                       "session.timeout.ms": 10000, "enable.auto.commit": False})
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 30
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        assert member.assignment(), "the consumer joined the group"
        with pytest.raises(KafkaError) as e:
            commit_offsets(cfg, group, {(topic, 0): 3})
        assert e.value.code == ErrorCode.UNKNOWN_MEMBER_ID
        assert f"group {group}" in str(e.value) and "active members" in str(e.value)
        assert fetch_committed(cfg, group, [(topic, 0)]) == {TopicPartition(topic, 0): None}
    finally:
        member.close()


def test_delete_group_offsets(kafka_broker, cfg):
    """OffsetDelete (API key 47) removes the named partitions' offsets of an empty group and
    leaves the others."""
    from broker.client.consumer.group_offsets import delete_group_offsets

    topic, group = unique("od"), unique("od-g")
    create(kafka_broker.bootstrap, topic, 2)
    commit_offsets(cfg, group, {(topic, 0): 1, (topic, 1): 1})
    result = delete_group_offsets(cfg, group, [(topic, 0)])
    assert result == {TopicPartition(topic, 0): None}
    assert fetch_committed(cfg, group, [(topic, 0), (topic, 1)]) == {TopicPartition(topic, 0): None,
                                                                      TopicPartition(topic, 1): 1}


def test_describe_decodes_consumer_assignments_and_names_the_coordinator(kafka_broker, cfg):
    import struct

    from broker.client.consumer.group_offsets import member_partitions

    def assignment(version: int, topics: dict[str, list[int]], tail: bytes = b"") -> bytes:
        out = struct.pack(">hi", version, len(topics))
        for name, parts in topics.items():
            raw = name.encode()
            out += struct.pack(">h", len(raw)) + raw + struct.pack(f">i{len(parts)}i", len(parts), *parts)
        return out + struct.pack(">i", -1) + tail  # null user data (+ later versions' fields)

    assert member_partitions(assignment(0, {"b": [1, 0], "a": [2]})) == (
        TopicPartition("a", 2), TopicPartition("b", 0), TopicPartition("b", 1))
    assert member_partitions(assignment(3, {"t": [0]}, tail=b"\x00\x00")) == (TopicPartition("t", 0),)
    assert member_partitions(b"") == () and member_partitions(None) == ()
    assert member_partitions(b"\x00\x00\x00\x00\x00\x05\x00") == ()  # truncated: no partitions, no error
    group = unique("coord")
    create(kafka_broker.bootstrap, group, 1)
    commit_offsets(cfg, group, {(group, 0): 0})
    desc = describe_groups(cfg, [group])[group]
    assert desc.coordinator is not None and desc.coordinator.node_id >= 0
    assert f"{desc.coordinator.host}:{desc.coordinator.port}" == kafka_broker.bootstrap
