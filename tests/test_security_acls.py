"""ACLs end to end (issue 16, authorization): a broker with the built-in authorizer
(``authorizer.class.name`` = Kafka's StandardAuthorizer, ``super.users=User:admin``) on a
SASL_PLAINTEXT listener (PLAIN users admin, alice, bob) next to PLAINTEXT (User:ANONYMOUS).
ACLs are created, listed and deleted through confluent-kafka's admin API (librdkafka's
CreateAcls/DescribeAcls/DeleteAcls) and take effect for produce, consume, groups,
transactions and metadata; denials are audited; ACLs survive a restart.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.support.broker import BrokerProcess
from tests.support.waits import wait_until

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" '
              'user_bob="bob-secret";')
OVERRIDES = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "auto.create.topics.enable": "false",
}
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("acl-broker"), OVERRIDES, name="acl")
    broker.start()
    yield broker
    broker.kill()


def conf(broker: BrokerProcess, user: str | None, **extra) -> dict:
    if user is None:  # the PLAINTEXT listener: User:ANONYMOUS
        return {"bootstrap.servers": f"{broker.host}:{broker.listener_port('PLAINTEXT')}", **extra}
    return {"bootstrap.servers": f"{broker.host}:{broker.listener_port('SASL_PLAINTEXT')}",
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": PASSWORDS[user], **extra}


_ADMINS: dict = {}


@pytest.fixture(autouse=True)
def _admins_end_with_the_test():
    """The cached admin clients go when the test ends (their futures are all done): kept,
    they would reconnect to the test's stopped broker for the rest of the run, every
    second, on stderr."""
    yield
    _ADMINS.clear()


def admin(broker: BrokerProcess, user: str = "admin") -> AdminClient:
    """One admin client per (broker, user), kept alive: librdkafka fails the futures of a
    client destroyed before they complete."""
    key = (id(broker), broker.listener_port("SASL_PLAINTEXT"), user)
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(conf(broker, user))
    return _ADMINS[key]


def create_topic(broker: BrokerProcess, name: str, partitions: int = 1) -> None:
    for f in admin(broker).create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)


def add_acls(broker: BrokerProcess, *bindings: AclBinding) -> None:
    for f in admin(broker).create_acls(list(bindings)).values():
        assert f.result(30) is None


def allow(rt, name, user, op, pattern=ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(rt, name, pattern, f"User:{user}", "*", op, AclPermissionType.ALLOW)


def produce(broker: BrokerProcess, user: str | None, topic: str, value: bytes, **extra) -> KafkaError | None:
    """Produce one record; the delivery error (None when delivered)."""
    errors: list = []
    results: list = []
    p = Producer(conf(broker, user, **{"error_cb": errors.append, "message.timeout.ms": 10000,
                                       "retries": 0, **extra}))
    p.produce(topic, value, on_delivery=lambda err, msg: results.append(err))
    p.flush(30)
    assert results, errors
    return results[0]


def consume_one(broker: BrokerProcess, user: str, topic: str, group: str) -> tuple[bytes | None, KafkaError | None]:
    c = Consumer(conf(broker, user, **{"group.id": group, "auto.offset.reset": "earliest",
                                       "enable.auto.commit": False}))
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                return None, msg.error()
            c.commit(msg, asynchronous=False)
            return msg.value(), None
        return None, None
    finally:
        c.close()


def join_group(broker: BrokerProcess, user: str, topic: str, group: str) -> None:
    """A consumer of ``user`` joins ``group`` and is assigned ``topic``'s partitions, then leaves."""
    c = Consumer(conf(broker, user, **{"group.id": group, "enable.auto.commit": False}))

    def poll() -> None:
        msg = c.poll(0.2)
        assert msg is None or msg.error() is None, msg.error()

    try:
        c.subscribe([topic])
        wait_until(c.assignment, 30, f"{user} was not assigned {topic} in group {group}", interval=0, step=poll)
    finally:
        c.close()


def test_acls_created_listed_and_deleted_through_confluent_kafka_take_effect(acl_broker):
    topic, group = unique("orders"), unique("billing")
    create_topic(acl_broker, topic)
    # no ACL on the topic: only the super user may use it (allow.everyone.if.no.acl.found=false)
    err = produce(acl_broker, "alice", topic, b"x")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    add_acls(acl_broker,
             allow(ResourceType.TOPIC, topic[:7], "alice", AclOperation.WRITE, ResourcePatternType.PREFIXED),
             allow(ResourceType.TOPIC, topic, "alice", AclOperation.READ),
             allow(ResourceType.GROUP, group, "alice", AclOperation.READ))
    assert produce(acl_broker, "alice", topic, b"v1") is None
    err = produce(acl_broker, "bob", topic, b"x")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    err = produce(acl_broker, None, topic, b"x")  # PLAINTEXT: User:ANONYMOUS
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert consume_one(acl_broker, "alice", topic, group) == (b"v1", None)

    # DescribeAcls: by pattern and principal, and MATCH
    found = admin(acl_broker).describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY,
        AclPermissionType.ANY)).result(30)
    mine = {(b.restype, b.name, b.resource_pattern_type, b.operation) for b in found
            if b.name in (topic, topic[:7], group)}
    assert mine == {(ResourceType.TOPIC, topic[:7], ResourcePatternType.PREFIXED, AclOperation.WRITE),
                    (ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, AclOperation.READ),
                    (ResourceType.GROUP, group, ResourcePatternType.LITERAL, AclOperation.READ)}
    matching = admin(acl_broker).describe_acls(AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(30)
    assert {b.name for b in matching} >= {topic, topic[:7]}

    # a group alice has no READ on
    other = unique("other")
    value, err = consume_one(acl_broker, "alice", topic, other)
    assert value is None and err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED

    # DeleteAcls: alice loses READ on the topic
    deleted = admin(acl_broker).delete_acls([AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", None, AclOperation.READ,
        AclPermissionType.ANY)])
    for f in deleted.values():
        assert [b.name for b in f.result(30)] == [topic]
    value, err = consume_one(acl_broker, "alice", topic, group)
    assert value is None and err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # every denial is in the audit log with principal, operation and resource
    text = acl_broker.stderr_text() + acl_broker.stdout_text()
    # (librdkafka asks Metadata first: bob is denied DESCRIBE there, before any Produce)
    assert f"Principal = User:bob is Denied operation = DESCRIBE from host = 127.0.0.1 on resource = " \
           f"Topic:LITERAL:{topic} for request = METADATA" in text
    assert f"Principal = User:alice is Denied operation = DESCRIBE from host = 127.0.0.1 on resource = " \
           f"Group:LITERAL:{other} for request = FIND_COORDINATOR" in text


def test_metadata_lists_only_topics_the_principal_may_describe(acl_broker):
    visible, hidden = unique("visible"), unique("hidden")
    create_topic(acl_broker, visible)
    create_topic(acl_broker, hidden)
    add_acls(acl_broker, allow(ResourceType.TOPIC, visible, "bob", AclOperation.DESCRIBE))
    bob = admin(acl_broker, "bob").list_topics(timeout=30).topics
    assert visible in bob and hidden not in bob
    assert {visible, hidden} <= set(admin(acl_broker).list_topics(timeout=30).topics)
    # a named topic bob may not describe: TOPIC_AUTHORIZATION_FAILED, existing or not
    for name in (hidden, unique("missing")):
        md = admin(acl_broker, "bob").list_topics(topic=name, timeout=30).topics[name]
        assert md.error is not None and md.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_authorized_operations_in_describe_topics_and_groups(acl_broker):
    from confluent_kafka import TopicCollection

    topic, group = unique("ops"), unique("opsg")
    create_topic(acl_broker, topic)
    add_acls(acl_broker, allow(ResourceType.TOPIC, topic, "bob", AclOperation.READ),
             allow(ResourceType.GROUP, group, "bob", AclOperation.READ))
    join_group(acl_broker, "bob", topic, group)  # creates the group
    described = admin(acl_broker, "bob").describe_topics(TopicCollection([topic]),
                                                         include_authorized_operations=True)
    ops = described[topic].result(30).authorized_operations
    assert set(ops) == {AclOperation.READ, AclOperation.DESCRIBE}
    groups = admin(acl_broker, "bob").describe_consumer_groups([group], include_authorized_operations=True)
    assert set(groups[group].result(30).authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    everything = admin(acl_broker).describe_topics(TopicCollection([topic]), include_authorized_operations=True)
    assert AclOperation.ALTER_CONFIGS in everything[topic].result(30).authorized_operations


def test_only_super_users_or_cluster_alter_may_change_acls(acl_broker):
    futures = admin(acl_broker, "alice").create_acls([allow(ResourceType.TOPIC, "t", "alice", AclOperation.ALL)])
    for f in futures.values():
        with pytest.raises(KafkaException) as info:
            f.result(30)
        assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # DescribeAcls is refused too (librdkafka drops DescribeAcls' top-level error code and
    # returns an empty list: what matters is that nothing leaks, and the audit log)
    add_acls(acl_broker, allow(ResourceType.TOPIC, "secret", "bob", AclOperation.READ))
    assert admin(acl_broker, "alice").describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(30) == []
    assert "Principal = User:alice is Denied operation = DESCRIBE from host = 127.0.0.1 on resource = " \
           "Cluster:LITERAL:kafka-cluster for request = DESCRIBE_ACLS" in acl_broker.stderr_text()
    # an invalid binding is refused with INVALID_REQUEST and creates nothing
    bad = AclBinding(ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, "User:", "*", AclOperation.READ,
                     AclPermissionType.ALLOW)
    for f in admin(acl_broker).create_acls([bad]).values():
        with pytest.raises(KafkaException) as info:
            f.result(30)
        assert info.value.args[0].code() == KafkaError.INVALID_REQUEST


def test_topic_admin_and_configs_need_their_operations(acl_broker):
    from confluent_kafka.admin import ConfigResource

    topic = unique("adm")
    for f in admin(acl_broker, "bob").create_topics([NewTopic(topic, 1, 1)]).values():
        with pytest.raises(KafkaException) as info:
            f.result(30)
        assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    add_acls(acl_broker, allow(ResourceType.TOPIC, "adm-", "bob", AclOperation.CREATE, ResourcePatternType.PREFIXED))
    for f in admin(acl_broker, "bob").create_topics([NewTopic(topic, 1, 1)]).values():
        assert f.result(30) is None
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    for f in admin(acl_broker, "bob").describe_configs([resource]).values():
        with pytest.raises(KafkaException) as info:
            f.result(30)
        assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    for f in admin(acl_broker, "bob").delete_topics([topic]).values():
        with pytest.raises(KafkaException) as info:
            f.result(30)
        assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    broker_resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    for f in admin(acl_broker, "bob").describe_configs([broker_resource]).values():
        with pytest.raises(KafkaException) as info:
            f.result(30)
        assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_transactions_need_write_on_the_transactional_id(acl_broker):
    topic, txn_id = unique("txt"), unique("txid")
    create_topic(acl_broker, topic)
    add_acls(acl_broker, allow(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE))
    p = Producer(conf(acl_broker, "alice", **{"transactional.id": txn_id, "transaction.timeout.ms": 10000}))
    with pytest.raises(KafkaException) as info:
        p.init_transactions(30)
    assert info.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    add_acls(acl_broker, allow(ResourceType.TRANSACTIONAL_ID, txn_id, "alice", AclOperation.WRITE))
    p = Producer(conf(acl_broker, "alice", **{"transactional.id": txn_id, "transaction.timeout.ms": 10000}))
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"in-txn")
    p.commit_transaction(30)


def test_acls_survive_a_restart(tmp_path):
    broker = BrokerProcess(tmp_path / "b", OVERRIDES, name="acl-restart").start()
    try:
        topic = unique("kept")
        create_topic(broker, topic)
        add_acls(broker, allow(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE))
        assert broker.stop() == 0
        broker.start()
        assert produce(broker, "alice", topic, b"after-restart") is None
        err = produce(broker, "bob", topic, b"x")
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        broker.kill()


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(kafka_broker):
    a = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})  # kept alive by the name
    for f in a.create_acls([allow(ResourceType.TOPIC, "t", "alice", AclOperation.READ)]).values():
        with pytest.raises(KafkaException) as info:
            f.result(30)
        assert info.value.args[0].code() == KafkaError.SECURITY_DISABLED
