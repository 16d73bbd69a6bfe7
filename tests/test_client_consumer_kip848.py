"""The project's own KafkaConsumer with ``group.protocol=consumer`` (KIP-848,
broker/client/consumer/consumer_membership.py) against the real broker in a subprocess:
the broker assigns, members heartbeat and reconcile from poll; a partition never has two
owners (the listeners' view), members joining and leaving move partitions, every record
is consumed and the member-epoch commits cover them; a mixed group with confluent-kafka
consumers of the same protocol; static members; commits with a stale epoch; pattern
subscriptions; fatal errors reach poll.

No timed assertion: waits are bounded loops on a condition.
"""

from __future__ import annotations

import threading
import time

import confluent_kafka
import pytest

from broker.client.consumer import KafkaConsumer
from broker.client.errors import KafkaError
from tests.support.broker import RawClient
from tests.test_server_group_consumers import (
    FAST,
    PARTITIONS,
    Ownership,
    committed_offsets,
    end_offsets,
    make_topic,
    produce,
    wait_for,
)
from tests.test_server_group_offsets import unique

FAST848 = {**FAST, "group.consumer.heartbeat.interval.ms": "500", "group.consumer.session.timeout.ms": "6000",
           "group.consumer.min.heartbeat.interval.ms": "100", "group.consumer.min.session.timeout.ms": "1000"}


class Member:
    """Our consumer with group.protocol=consumer, stepped by the test's thread."""

    def __init__(self, name: str, bootstrap: str, group: str, owners: Ownership, seen: set, **extra) -> None:
        self.name, self.owners, self.seen = name, owners, seen
        self.c = KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                "group.protocol": "consumer", "auto.offset.reset": "earliest",
                                "enable.auto.commit": False, **extra})

    def subscribe(self, topics=None, pattern=None) -> None:
        owners, name = self.owners, self.name

        class Listener:
            def on_partitions_revoked(self, partitions):
                owners.revoke(name, [tp.partition for tp in partitions])

            def on_partitions_assigned(self, partitions):
                owners.assign(name, [tp.partition for tp in partitions])

        if pattern is not None:
            self.c.subscribe(pattern=pattern, listener=Listener())
        else:
            self.c.subscribe(topics, Listener())

    def step(self) -> None:
        records = self.c.poll(100)
        self.seen.update(r.value.decode() for r in records)
        if records:
            try:
                self.c.commit_sync()
            except KafkaError:
                pass  # a rebalance raced the commit: the next owner reads them again


def test_broker_without_kip848_is_a_clear_error(broker_factory):
    """A broker that does not offer ConsumerGroupHeartbeat: poll raises, naming it."""
    broker = broker_factory({**FAST, "group.coordinator.rebalance.protocols": "classic"})
    topic = make_topic(broker.bootstrap)
    c = KafkaConsumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
                       "group.protocol": "consumer"})
    c.subscribe([topic])
    deadline = time.monotonic() + 60
    with pytest.raises(KafkaError, match="CONSUMER_GROUP_HEARTBEAT|ConsumerGroupHeartbeat|UNSUPPORTED"):
        while time.monotonic() < deadline:
            c.poll(100)
    c.close()


def test_members_share_and_move_partitions(broker_factory):
    broker = broker_factory(FAST848)
    topic, group = make_topic(broker.bootstrap), unique("kip848")
    owners, seen = Ownership(), set()
    expected = produce(broker.bootstrap, topic, 0, 600)
    a = Member("a", broker.bootstrap, group, owners, seen)
    a.subscribe([topic])
    wait_for(lambda: len(owners.of("a")) == PARTITIONS, a.step, what="a owns every partition")
    b = Member("b", broker.bootstrap, group, owners, seen)
    b.subscribe([topic])

    def both():
        a.step()
        b.step()

    wait_for(lambda: len(owners.of("a")) == 3 and len(owners.of("b")) == 3, both,
             what="the uniform assignor balances a and b")
    expected |= produce(broker.bootstrap, topic, 600, 600)
    wait_for(lambda: expected <= seen, both, what="every record consumed")
    a.c.close()  # revokes, commits and leaves (epoch -1): b gets everything
    wait_for(lambda: len(owners.of("b")) == PARTITIONS, b.step, what="b owns every partition")
    expected |= produce(broker.bootstrap, topic, 1200, 60)
    wait_for(lambda: expected <= seen, b.step, what="the last records consumed")
    wait_for(lambda: committed_offsets(broker, group, topic) == end_offsets(broker, topic), b.step,
             what="commits cover every record")
    b.c.close()
    assert owners.violations == [], owners.history
    assert broker.api_versions_used("a").get("CONSUMER_GROUP_HEARTBEAT")
    assert "Traceback" not in broker.stderr_text()


def test_mixed_with_confluent_kafka_consumer_protocol(broker_factory):
    """Our members and librdkafka's (group.protocol=consumer) in one KIP-848 group."""
    broker = broker_factory(FAST848)
    topic, group = make_topic(broker.bootstrap), unique("kip848-mixed")
    owners, seen = Ownership(), set()
    expected = produce(broker.bootstrap, topic, 0, 600)
    ours = Member("ours", broker.bootstrap, group, owners, seen)
    ours.subscribe([topic])
    ck = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "ck",
                                   "group.protocol": "consumer", "auto.offset.reset": "earliest",
                                   "enable.auto.commit": "false"})

    def ck_revoke(consumer, partitions):
        try:
            consumer.commit(asynchronous=False)
        except confluent_kafka.KafkaException:
            pass
        owners.revoke("ck", [p.partition for p in partitions])

    ck.subscribe([topic], on_assign=lambda _c, ps: owners.assign("ck", [p.partition for p in ps]),
                 on_revoke=ck_revoke, on_lost=ck_revoke)

    def ck_step():
        msgs = ck.consume(200, 0.05)
        seen.update(m.value().decode() for m in msgs if m.error() is None)
        if msgs:
            try:
                ck.commit(asynchronous=False)
            except confluent_kafka.KafkaException:
                pass

    def both():
        ours.step()
        ck_step()

    wait_for(lambda: owners.of("ours") and owners.of("ck") and len(owners.owner) == PARTITIONS, both,
             what="ours and ck share the partitions")
    expected |= produce(broker.bootstrap, topic, 600, 300)
    wait_for(lambda: expected <= seen, both, what="every record consumed")
    ck.close()
    wait_for(lambda: len(owners.of("ours")) == PARTITIONS, ours.step, what="ours owns every partition")
    wait_for(lambda: committed_offsets(broker, group, topic) == end_offsets(broker, topic), ours.step,
             what="commits cover every record")
    ours.c.close()
    assert owners.violations == [], owners.history


def test_pattern_subscription_follows_new_topics(broker_factory):
    broker = broker_factory(FAST848)
    prefix = unique("pat")
    group = unique("kip848-pattern")
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(f"{prefix}-one", 2, 1)])[f"{prefix}-one"].result(30)
    owners, seen = Ownership(), set()
    m = Member("m", broker.bootstrap, group, owners, seen, **{"metadata.max.age.ms": 500})
    m.subscribe(pattern=f"{prefix}-.*")
    wait_for(lambda: m.c.assignment() and {tp.topic for tp in m.c.assignment()} == {f"{prefix}-one"}, m.step,
             what="the first topic assigned")
    admin.create_topics([NewTopic(f"{prefix}-two", 3, 1)])[f"{prefix}-two"].result(30)
    wait_for(lambda: len(m.c.assignment()) == 5, m.step, what="the new topic assigned too")
    m.c.close()


def test_static_member_keeps_its_place(broker_factory):
    """A static member (group.instance.id) that closes leaves with epoch -2 and gets the
    same partitions back when it restarts within the session."""
    broker = broker_factory(FAST848)
    topic, group = make_topic(broker.bootstrap), unique("kip848-static")
    owners, seen = Ownership(), set()
    produce(broker.bootstrap, topic, 0, 60)
    a = Member("a", broker.bootstrap, group, owners, seen, **{"group.instance.id": "i-a"})
    b = Member("b", broker.bootstrap, group, owners, seen, **{"group.instance.id": "i-b"})
    a.subscribe([topic])
    b.subscribe([topic])

    def both():
        a.step()
        b.step()

    wait_for(lambda: len(owners.of("a")) == 3 and len(owners.of("b")) == 3, both, what="balanced")
    before = owners.of("a")
    a.c.close()
    a2 = Member("a2", broker.bootstrap, group, owners, seen, **{"group.instance.id": "i-a"})
    a2.subscribe([topic])

    def both2():
        a2.step()
        b.step()

    wait_for(lambda: len(owners.of("a2")) == 3, both2, what="a2 back")
    assert owners.of("a2") == before and len(owners.of("b")) == 3
    a2.c.close()
    b.c.close()
    assert owners.violations == [], owners.history


def test_stale_epoch_commit_is_refused_with_kafkas_codes(broker_factory):
    """OffsetCommit v9 of a KIP-848 member: the member's epoch commits; an older one gets
    STALE_MEMBER_EPOCH, a newer one FENCED_MEMBER_EPOCH, an unknown member UNKNOWN_MEMBER_ID."""
    from broker.client.consumer import commit_offsets
    from broker.protocol import ErrorCode

    broker = broker_factory(FAST848)
    topic, group = make_topic(broker.bootstrap), unique("kip848-commit")
    owners, seen = Ownership(), set()
    m = Member("m", broker.bootstrap, group, owners, seen)
    m.subscribe([topic])
    wait_for(lambda: len(owners.of("m")) == PARTITIONS, m.step, what="m owns every partition")
    fields = m.c._group.commit_fields()
    epoch, member = fields["generation"], fields["member_id"]
    assert epoch >= 1 and member
    commit_offsets(broker.bootstrap and {"bootstrap.servers": broker.bootstrap}, group, {(topic, 0): 0},
                   generation=epoch, member_id=member, versions=(9, 9))
    for bad_epoch, bad_member, code in ((epoch - 1, member, ErrorCode.STALE_MEMBER_EPOCH),
                                        (epoch + 1, member, ErrorCode.FENCED_MEMBER_EPOCH),
                                        (epoch, "nobody", ErrorCode.UNKNOWN_MEMBER_ID)):
        with pytest.raises(KafkaError) as info:
            commit_offsets({"bootstrap.servers": broker.bootstrap}, group, {(topic, 0): 0},
                           generation=bad_epoch, member_id=bad_member, versions=(9, 9))
        assert info.value.code == code
    with RawClient(broker.host, broker.port):
        pass
    m.c.close()


def test_poll_loop_thread_owns_listener_calls(broker_factory):
    """Listeners run on the thread that calls poll (never on the heartbeat thread)."""
    broker = broker_factory(FAST848)
    topic, group = make_topic(broker.bootstrap), unique("kip848-thread")
    threads = set()

    class Listener:
        def on_partitions_assigned(self, partitions):
            threads.add(threading.current_thread().name)

        def on_partitions_revoked(self, partitions):
            threads.add(threading.current_thread().name)

    c = KafkaConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer"})
    c.subscribe([topic], Listener())
    wait_for(lambda: len(c.assignment()) == PARTITIONS, lambda: c.poll(100), what="assigned")
    c.close()
    assert threads == {threading.current_thread().name}


def test_admin_and_tool_describe_a_consumer_protocol_group(broker_factory):
    """describe_groups (and `kafkalog groups --describe`) use ConsumerGroupDescribe for a
    KIP-848 group, as Kafka's admin client: members, hosts, assignments, the assignor."""
    import subprocess
    import sys

    from broker.client.consumer import describe_groups, list_groups
    from tests.support.broker import ROOT

    broker = broker_factory(FAST848)
    topic, group = make_topic(broker.bootstrap), unique("kip848-describe")
    owners, seen = Ownership(), set()
    m = Member("m", broker.bootstrap, group, owners, seen, **{"group.remote.assignor": "range"})
    m.subscribe([topic])
    wait_for(lambda: len(owners.of("m")) == PARTITIONS, m.step, what="m owns every partition")
    d = describe_groups({"bootstrap.servers": broker.bootstrap}, [group])[group]
    assert (d.group_type, d.protocol_type, d.protocol, d.state) == ("consumer", "consumer", "range", "Stable")
    assert [x.client_id for x in d.members] == ["m"]
    assert {tp.partition for tp in d.members[0].assignment} == set(range(PARTITIONS))
    listing = {g.group_id: g for g in list_groups({"bootstrap.servers": broker.bootstrap})}
    assert listing[group].state == "Stable" and listing[group].protocol_type == "consumer"
    out = subprocess.run([sys.executable, "-m", "spark_kafkalog.cli.main", "groups", "--bootstrap-server",
                          broker.bootstrap, "--describe", "--group", group, "--members"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert d.members[0].member_id in out.stdout and " 6 " in out.stdout
    m.c.close()
    d = describe_groups({"bootstrap.servers": broker.bootstrap}, [group])[group]
    assert d.state == "Empty" and d.members == ()
