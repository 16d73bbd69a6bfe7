"""broker.client's ``KafkaShareConsumer`` (KIP-932 share groups) against the broker in a
subprocess: two of ours sharing one partition get disjoint deliveries that together are
every record, and so do one of ours and confluent-kafka's ``ShareConsumer`` in one group;
RELEASE brings a record back with delivery count 2, REJECT never; an expired acquisition
lock hands the records to another member and the late ``commit_sync`` reports
INVALID_RECORD_STATE; ``close`` without acknowledging hands the records to another
member; ``poll_arrow`` returns what ``poll`` returns; explicit mode refuses a poll with
unacknowledged records; under ``share.isolation.level=read_committed`` aborted records are
never delivered; the configuration refuses keys a share consumer does not take; a share
session error resets the session and fails its acknowledgements; RENEW keeps records
from other members past the lock duration; a member the broker forgot joins again with
its member id; a group of another type, and missing READ on the group or the topic
(SASL_PLAINTEXT with ACLs), are fatal errors."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from broker.client import AcknowledgeType, KafkaShareConsumer
from broker.client.consumer import ConsumerNetworkClient, ShareConsumerRecord, TopicPartition
from broker.client.consumer import group_offsets as go
from broker.client.consumer.share import SHARE_ARROW_SCHEMA, partition_of
from broker.client.errors import FatalConsumerError, GroupAuthorizationError, IllegalStateError, TopicAuthorizationError
from broker.config import ConfigError
from broker.protocol import ApiKey, ErrorCode, request_schema

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def bs(tmp_path_factory):
    from support.broker import BrokerProcess

    broker = BrokerProcess(tmp_path_factory.mktemp("share-client"),
                           {"group.share.min.record.lock.duration.ms": "1000"}, name="share-client").start()
    yield broker.bootstrap
    broker.kill()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic(bootstrap: str, partitions: int = 1) -> str:
    name = _name("sc")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions)])[name].result(30)
    return name


def _group(bootstrap: str, client: dict | None = None, **configs: str) -> str:
    """A new share group id with ``configs`` (underscores for dots) set on its GROUP resource."""
    group = _name("g")
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
               for k, v in {"share_auto_offset_reset": "earliest", **configs}.items()]
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client or {})})
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                  incremental_configs=entries)]).values():
        future.result(30)
    return group


def _produce(bootstrap: str, topic: str, n: int, chunk: int = 0, client: dict | None = None) -> None:
    """``n`` records; flushed every ``chunk`` records (batches of at most ``chunk``: a
    member acquires whole batches, up to the group's in-flight limit)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **(client or {})})
    for i in range(n):
        headers = [("h", b"%d" % i)] if i % 3 == 0 else None
        p.produce(topic, value=b"v%d" % i, key=None if i % 4 == 0 else b"k%d" % i, headers=headers)
        if chunk and (i + 1) % chunk == 0:
            assert p.flush(30) == 0
    assert p.flush(30) == 0


def _consumer(bootstrap: str, group: str, topic: str, explicit: bool = False, **extra) -> KafkaShareConsumer:
    c = KafkaShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                            "share.acknowledgement.mode": "explicit" if explicit else "implicit", **extra})
    c.subscribe([topic])
    return c


def _poll_until(c: KafkaShareConsumer, n: int, timeout: float = 30.0, ack=None) -> list[ShareConsumerRecord]:
    got: list[ShareConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        batch = c.poll(500)
        if ack is not None:
            for r in batch:
                c.acknowledge(r, ack(r))
        got += batch
    return got


def test_two_of_ours_share_one_partition_disjointly_and_completely(bs) -> None:
    topic, group = _topic(bs), _group(bs)
    n = 10_000
    _produce(bs, topic, n, chunk=500)
    seen: list[list[tuple[int, int]]] = [[], []]
    done = threading.Event()
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            with _consumer(bs, group, topic, max_poll_records=200) as c:
                deadline = time.monotonic() + 120
                while not done.is_set() and time.monotonic() < deadline:
                    for r in c.poll(500):
                        assert isinstance(r, ShareConsumerRecord) and r.topic == topic
                        seen[i].append((r.offset, r.delivery_count))
                    time.sleep(0.01 * (i + 1))  # scenario: members of different speeds
                    if sum(len(s) for s in seen) >= n:
                        done.set()
                assert c.commit_sync() is not None
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
            done.set()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not errors, errors
    offsets = [o for s in seen for o, _ in s]
    assert sorted(offsets) == list(range(n))  # each record once: disjoint and complete
    assert {c for s in seen for _, c in s} == {1}
    assert all(seen), [len(s) for s in seen]  # the partition really was shared


def test_ours_and_confluents_share_consumer_in_one_group(bs) -> None:
    topic, group = _topic(bs), _group(bs)
    n = 4000
    ours = _consumer(bs, group, topic, max_poll_records=100)
    theirs = ShareConsumer({"bootstrap.servers": bs, "group.id": group})
    theirs.subscribe([topic])
    try:
        ours.poll(1000)  # both members join before the records are there
        theirs.poll(1.0)
        _produce(bs, topic, n, chunk=200)
        got_ours: list[int] = []
        got_theirs: list[int] = []
        deadline = time.monotonic() + 90
        while len(got_ours) + len(got_theirs) < n and time.monotonic() < deadline:
            got_ours += [r.offset for r in ours.poll(200)]
            for m in theirs.poll(0.2):
                assert m.error() is None, m.error()
                got_theirs.append(m.offset())
        assert sorted(got_ours + got_theirs) == list(range(n))
        assert got_ours and got_theirs, (len(got_ours), len(got_theirs))
        assert ours.commit_sync() == {TopicPartition(topic, 0): None}
    finally:
        ours.close()
        theirs.close()


def test_release_comes_back_with_count_two_and_reject_never(bs) -> None:
    topic, group = _topic(bs), _group(bs)
    _produce(bs, topic, 9)
    outcomes: list[tuple[dict, object]] = []
    c = _consumer(bs, group, topic, explicit=True)
    c.set_acknowledgement_commit_callback(lambda offsets, exc: outcomes.append((offsets, exc)))
    try:
        kinds = (AcknowledgeType.RELEASE, AcknowledgeType.REJECT, AcknowledgeType.ACCEPT)
        got = _poll_until(c, 9, ack=lambda r: kinds[r.offset // 3])
        assert sorted(r.offset for r in got) == list(range(9))
        assert {r.delivery_count for r in got} == {1}
        tp = TopicPartition(topic, 0)
        assert c.commit_sync() == {tp: None}
        assert sorted(o for offsets, exc in outcomes for o in offsets[tp] if exc is None) == list(range(9))
        again = _poll_until(c, 3, ack=lambda r: AcknowledgeType.ACCEPT)
        assert [(r.offset, r.delivery_count) for r in again] == [(0, 2), (1, 2), (2, 2)]
        assert c.commit_sync() == {tp: None}
        end = time.monotonic() + 2.5
        while time.monotonic() < end:  # REJECTed 3-5 and ACCEPTed 0-2, 6-8: nothing more
            assert c.poll(500) == []
    finally:
        c.close()


def test_expired_lock_goes_to_another_member_and_the_late_commit_fails(bs) -> None:
    topic, group = _topic(bs), _group(bs, share_record_lock_duration_ms="1500")
    a = _consumer(bs, group, topic, explicit=True)
    b = _consumer(bs, group, topic, explicit=True)
    try:
        a.poll(500)
        b.poll(500)
        _produce(bs, topic, 10)
        held = _poll_until(a, 10)
        assert sorted(r.offset for r in held) == list(range(10))
        again = _poll_until(b, 10, ack=lambda r: AcknowledgeType.ACCEPT)  # a sits on them past 1.5 s
        assert sorted(r.offset for r in again) == list(range(10))
        assert {r.delivery_count for r in again} == {2}
        tp = TopicPartition(topic, 0)
        assert b.commit_sync() == {tp: None}
        for r in held:
            a.acknowledge(r, AcknowledgeType.ACCEPT)
        result = a.commit_sync()
        assert result[tp] is not None and result[tp].code == ErrorCode.INVALID_RECORD_STATE, result
    finally:
        a.close()
        b.close()


def test_close_without_acknowledging_hands_the_records_to_another_member(bs) -> None:
    topic, group = _topic(bs), _group(bs)
    _produce(bs, topic, 50)
    a = _consumer(bs, group, topic, explicit=True)
    held = _poll_until(a, 50)
    assert sorted(r.offset for r in held) == list(range(50))
    started = time.monotonic()
    a.close()  # explicit mode, nothing acknowledged: the session's records are released
    with _consumer(bs, group, topic) as b:
        got = _poll_until(b, 50)
        assert sorted(r.offset for r in got) == list(range(50))
        assert time.monotonic() - started < 20  # released at once, not after a lock timeout
        assert b.commit_sync() == {TopicPartition(topic, 0): None}


def test_poll_arrow_returns_what_poll_returns(bs) -> None:
    topic = _topic(bs, partitions=2)
    _produce(bs, topic, 600)
    with _consumer(bs, _group(bs), topic) as record_consumer:
        rows = _poll_until(record_consumer, 600)
    with _consumer(bs, _group(bs), topic, explicit=True) as arrow_consumer:
        batches: list = []
        deadline = time.monotonic() + 30
        while sum(b.num_rows for b in batches) < 600 and time.monotonic() < deadline:
            polled = arrow_consumer.poll_arrow(500)
            for b in polled:  # explicit mode: the rows are acknowledged by offset
                arrow_consumer.acknowledge_offsets(partition_of(b), b.column("offset").to_pylist())
            batches += polled
        assert all(error is None for error in arrow_consumer.commit_sync().values())
    assert batches and all(b.schema.equals(SHARE_ARROW_SCHEMA) for b in batches)
    from_arrow = sorted((partition_of(b).partition, row["offset"], row["timestamp"], row["timestamp_type"], row["key"],
                         row["value"], row["headers"] or [], row["delivery_count"])
                        for b in batches for row in b.to_pylist())
    from_poll = sorted((r.partition, r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                        [{"key": k, "value": v} for k, v in r.headers], r.delivery_count) for r in rows)
    assert len(from_poll) == 600 and from_arrow == from_poll
    assert {partition_of(b).topic for b in batches} == {topic}
    assert any(r.key is None for r in rows) and any(r.headers for r in rows)


def test_explicit_mode_refuses_a_poll_with_unacknowledged_records(bs) -> None:
    topic, group = _topic(bs), _group(bs)
    _produce(bs, topic, 5)
    outcomes: list[tuple[dict, object]] = []
    with _consumer(bs, group, topic, explicit=True) as c:
        c.set_acknowledgement_commit_callback(lambda offsets, exc: outcomes.append((offsets, exc)))
        got = _poll_until(c, 5)
        assert len(got) == 5
        c.acknowledge(got[0], AcknowledgeType.ACCEPT)
        with pytest.raises(IllegalStateError, match="must be acknowledged"):
            c.poll(100)
        for r in got[1:]:
            c.acknowledge(r)  # ACCEPT by default
        assert c.poll(200) == []  # the acknowledgements ride on its ShareFetch
        assert outcomes == [({TopicPartition(topic, 0): set(range(5))}, None)]
        with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
            c.acknowledge(got[0])  # not delivered by the last poll
        assert c.commit_sync() == {}  # nothing left to acknowledge
    with _consumer(bs, _group(bs), topic) as implicit:
        records = _poll_until(implicit, 5)
        with pytest.raises(IllegalStateError, match="explicit"):
            implicit.acknowledge(records[0])


def test_read_committed_never_delivers_aborted_records(bs) -> None:
    topic, group = _topic(bs), _group(bs, share_isolation_level="read_committed")
    p = Producer({"bootstrap.servers": bs, "transactional.id": _name("tx")})
    p.init_transactions(30)
    for outcome in ("c1", "a1", "c2", "a2", "c3"):
        p.begin_transaction()
        for i in range(20):
            p.produce(topic, value=f"{outcome}-{i}".encode())
        if outcome.startswith("c"):
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    with _consumer(bs, group, topic) as c:
        got = _poll_until(c, 60)
        values = sorted(r.value.decode() for r in got)
        assert values == sorted(f"c{t}-{i}" for t in (1, 2, 3) for i in range(20))
        assert not any(r.offset in (20, 41, 62, 83) for r in got)  # the transaction markers
        assert c.poll(1000) == []
        p.begin_transaction()  # the gaps (markers, aborted records) hold nothing back
        p.produce(topic, value=b"c4-0")
        p.commit_transaction(30)
        late = _poll_until(c, 1)
        assert [r.value for r in late] == [b"c4-0"]


def test_configuration_refuses_what_a_share_consumer_does_not_take() -> None:
    with pytest.raises(ConfigError, match="enable.auto.commit"):
        KafkaShareConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "enable.auto.commit": False})
    with pytest.raises(ConfigError, match="share.acknowledgement.mode"):
        KafkaShareConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                            "share.acknowledgement.mode": "sometimes"})
    with pytest.raises(ConfigError, match="no.such.key"):
        KafkaShareConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "no.such.key": 1})
    with pytest.raises(Exception, match="group.id"):
        KafkaShareConsumer({"bootstrap.servers": "127.0.0.1:1"})
    c = KafkaShareConsumer(bootstrap_servers="127.0.0.1:1", group_id="g", share_acquire_mode="record_limit",
                           max_partition_fetch_bytes=1024, client_rack="r1")
    try:
        assert c.config["share.acquire.mode"] == "record_limit" and c.subscription() == set()
        with pytest.raises(IllegalStateError, match="not subscribed"):
            c.poll(0)
    finally:
        c.close()


def test_a_share_session_error_resets_the_session_and_fails_its_acknowledgements(bs) -> None:
    topic, group = _topic(bs), _group(bs, share_record_lock_duration_ms="1500")
    tp = TopicPartition(topic, 0)
    outcomes: list[tuple[dict, object]] = []
    with _consumer(bs, group, topic, explicit=True) as c:
        c.set_acknowledgement_commit_callback(lambda offsets, exc: outcomes.append((offsets, exc)))
        c.poll(300)
        _produce(bs, topic, 5)
        got = _poll_until(c, 5, ack=lambda r: AcknowledgeType.ACCEPT)
        assert sorted(r.offset for r in got) == list(range(5))
        for session in c._fetcher.sessions.values():
            session.epoch += 7  # an epoch the broker does not expect
        result = c.commit_sync()
        assert result[tp] is not None and result[tp].code == ErrorCode.INVALID_SHARE_SESSION_EPOCH, result
        assert outcomes == [({tp: set(range(5))}, result[tp])]
        # a new session (epoch 0, every partition); the records, never accepted, come back
        # to this member once their lock expired
        again = _poll_until(c, 5, ack=lambda r: AcknowledgeType.ACCEPT)
        assert sorted((r.offset, r.delivery_count) for r in again) == [(o, 2) for o in range(5)]
        assert c.commit_sync() == {tp: None}


def test_renew_keeps_the_records_from_other_members(bs) -> None:
    topic, group = _topic(bs), _group(bs, share_record_lock_duration_ms="1500")
    tp = TopicPartition(topic, 0)
    a = _consumer(bs, group, topic, explicit=True)
    b = _consumer(bs, group, topic, explicit=True)
    try:
        a.poll(300)
        b.poll(300)
        _produce(bs, topic, 5)
        held = _poll_until(a, 5)
        assert len(held) == 5
        end = time.monotonic() + 4  # well past the 1.5 s lock
        while time.monotonic() < end:
            for r in held:
                a.acknowledge(r, AcknowledgeType.RENEW)
            assert a.commit_sync() == {tp: None}
            assert b.poll(600) == []
        for r in held:
            a.acknowledge(r, AcknowledgeType.ACCEPT)
        assert a.commit_sync() == {tp: None}
        assert b.poll(2000) == []
    finally:
        a.close()
        b.close()


def test_a_group_of_another_type_is_a_fatal_error(bs) -> None:
    topic, group = _topic(bs), _name("classic")
    classic = Consumer({"bootstrap.servers": bs, "group.id": group})  # a classic group with a member
    classic.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while not classic.assignment() and time.monotonic() < deadline:
            classic.poll(0.2)
        assert classic.assignment()
        with _consumer(bs, group, topic) as c:
            with pytest.raises(FatalConsumerError) as raised:
                c.poll(10_000)
            assert raised.value.code == ErrorCode.GROUP_ID_NOT_FOUND
            with pytest.raises(FatalConsumerError):
                c.poll(0)  # raised again until the consumer is closed
    finally:
        classic.close()


PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def test_authorization_failures_are_fatal_and_sasl_works(tmp_path) -> None:
    from support.broker import BrokerProcess

    broker = BrokerProcess(tmp_path / "acl", {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "security.inter.broker.protocol": "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin", "group.share.min.record.lock.duration.ms": "1000"}, name="share-acl")
    broker.start()
    try:
        bs = f"{broker.host}:{broker.listener_port('SASL_PLAINTEXT')}"

        def sasl(user: str) -> dict:
            return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
                    "sasl.password": f"{user}-secret"}

        admin = AdminClient({"bootstrap.servers": bs, **sasl("admin")})
        topic = _name("sc")
        admin.create_topics([NewTopic(topic, 1)])[topic].result(30)
        group = _group(bs, sasl("admin"))

        def alice() -> KafkaShareConsumer:
            return _consumer(bs, group, topic, **sasl("alice"))

        def allow(rt: ResourceType, name: str) -> None:
            for f in admin.create_acls([AclBinding(rt, name, ResourcePatternType.LITERAL, "User:alice", "*",
                                                   AclOperation.READ, AclPermissionType.ALLOW)]).values():
                f.result(30)

        with alice() as c:
            with pytest.raises(GroupAuthorizationError):
                c.poll(10_000)
        allow(ResourceType.GROUP, group)
        with alice() as c:
            with pytest.raises(TopicAuthorizationError):
                c.poll(10_000)
        allow(ResourceType.TOPIC, topic)
        _produce(bs, topic, 5, client=sasl("admin"))
        with alice() as c:
            got = _poll_until(c, 5)
            assert sorted(r.offset for r in got) == list(range(5))
            assert c.commit_sync() == {TopicPartition(topic, 0): None}
    finally:
        broker.kill()


def test_a_removed_member_joins_again_with_its_member_id(bs) -> None:
    topic, group = _topic(bs), _group(bs, share_record_lock_duration_ms="1500")
    tp = TopicPartition(topic, 0)
    outcomes: list[tuple[dict, object]] = []
    with _consumer(bs, group, topic) as c:
        c.set_acknowledgement_commit_callback(lambda offsets, exc: outcomes.append((offsets, exc)))
        c.poll(300)
        _produce(bs, topic, 5)
        assert sorted(r.offset for r in _poll_until(c, 5)) == list(range(5))
        member, epoch = c.member_id, c._membership.member_epoch
        # the member's leave heartbeat (epoch -1) from another connection: the broker forgets
        # it; its next ShareFetch / heartbeat gets UNKNOWN_MEMBER_ID and it joins again
        with ConsumerNetworkClient({"bootstrap.servers": bs}) as client:
            deadline = client.deadline(10_000)
            node = go._find_coordinator(client, group, deadline)
            body, _ = go._request(client, node, ApiKey.SHARE_GROUP_HEARTBEAT, (1, 1), lambda v: request_schema(
                ApiKey.SHARE_GROUP_HEARTBEAT, v).cls(group_id=group, member_id=member, member_epoch=-1, rack_id=None,
                                                    subscribed_topic_names=None), deadline)
            assert body.error_code == ErrorCode.NONE
        _produce(bs, topic, 5)
        got = _poll_until(c, 10)
        # the implicit acceptance of 0-4 rode on the refused ShareFetch: it failed, and they
        # come back with delivery count 2 once their lock expired (the member joined again at
        # once, so its leave released nothing)
        first, first_error = outcomes[0]
        assert first == {tp: set(range(5))} and first_error.code == ErrorCode.UNKNOWN_MEMBER_ID
        assert all(exc is None for _, exc in outcomes[1:])
        assert sorted((r.offset, r.delivery_count) for r in got) == [(o, 1 + (o < 5)) for o in range(10)]
        assert c.member_id == member and len(member) == 22
        assert c._membership.member_epoch > epoch  # joined again: a new group epoch
        assert c.commit_sync() == {TopicPartition(topic, 0): None}


def test_ours_reach_the_delivery_limit_and_the_dead_letter_topic(bs) -> None:
    """A record released at every delivery is delivered share.delivery.count.limit times,
    then archived and copied to the group's dead-letter topic."""
    topic = _topic(bs)
    dlq = "dlq." + topic
    group = _group(bs, share_delivery_count_limit="3", errors_deadletterqueue_topic_name=dlq)
    _produce(bs, topic, 1)
    c = _consumer(bs, group, topic, explicit=True)
    counts = []
    try:
        deadline = time.monotonic() + 30
        while len(counts) < 3 and time.monotonic() < deadline:
            for r in c.poll(500):
                counts.append(r.delivery_count)
                c.acknowledge(r, AcknowledgeType.RELEASE)
            c.commit_sync()
        end = time.monotonic() + 2
        while time.monotonic() < end:
            assert c.poll(300) == []  # archived after the 3rd delivery
    finally:
        c.close()
    assert counts == [1, 2, 3]
    reader = Consumer({"bootstrap.servers": bs, "group.id": _name("r"), "auto.offset.reset": "earliest"})
    try:
        reader.subscribe([dlq])
        deadline = time.monotonic() + 20
        m = None
        while time.monotonic() < deadline and (m is None or m.error() is not None):
            m = reader.poll(0.5)
        assert m is not None and m.error() is None
        headers = dict(m.headers())
        assert headers["__dlq.errors.disposition"] == b"MAX_DELIVERY_ATTEMPTS_REACHED"
        assert headers["__dlq.errors.delivery.count"] == b"3" and m.value() is None  # no copy asked
    finally:
        reader.close()


def test_ours_keep_their_acknowledgements_across_a_broker_sigkill(tmp_path) -> None:
    """Half the records accepted (commit_sync confirmed), the broker SIGKILLed and started
    again: our consumers get the other half only."""
    from support.broker import BrokerProcess

    broker = BrokerProcess(tmp_path / "b", {"group.share.min.record.lock.duration.ms": "1000"},
                           name="share-client-kill").start()
    try:
        bootstrap = broker.bootstrap
        topic = _topic(bootstrap)
        group = _group(bootstrap)
        _produce(bootstrap, topic, 2000, chunk=100)
        c = _consumer(bootstrap, group, topic, explicit=True)
        first = [r.offset for r in _poll_until(c, 1000, ack=lambda r: AcknowledgeType.ACCEPT)]
        assert c.commit_sync() == {TopicPartition(topic, 0): None}
        broker.kill()  # SIGKILL: the consumer is never closed
        c.close(timeout_ms=500)
        broker.start()
        bootstrap = broker.bootstrap
        c2 = _consumer(bootstrap, group, topic)
        try:
            rest = [r.offset for r in _poll_until(c2, 2000 - len(first), timeout=60)]
            end = time.monotonic() + 1.5
            while time.monotonic() < end:
                rest += [r.offset for r in c2.poll(300)]
            c2.commit_sync()
        finally:
            c2.close()
        assert not set(first) & set(rest), "an acknowledged record was delivered again"
        assert sorted(first + rest) == list(range(2000))
    finally:
        broker.kill()
