"""Offset expiry of topics a live group no longer subscribes to (KIP-496; Kafka's
offsetExpirationCondition / isSubscribedToTopic), on an in-process broker whose
expiration check is run by the test with a clock a week ahead:

* a Stable classic group of the "consumer" protocol (confluent-kafka) keeps the offsets of
  its subscribed topic and loses those of a topic it committed to but does not subscribe;
* a KIP-848 group (this project's KafkaConsumer, group.protocol=consumer) the same;
* a group that is rebalancing keeps everything;
* an Empty group loses everything, and disappears.
"""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.client.consumer import KafkaConsumer
from broker.server.broker import KafkaBroker
from tests.test_server_group_consumers import wait_for
from tests.test_server_group_offsets import unique

WEEK_MS = 8 * 24 * 3600 * 1000


@pytest.fixture
def broker(tmp_path):
    b = KafkaBroker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
                     "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
                     "log.retention.ms": "-1", "group.consumer.heartbeat.interval.ms": "500"})
    b.start()
    host, port = b.socket_server.bound_address("PLAINTEXT")
    b.bootstrap = f"{host}:{port}"
    yield b
    b.shutdown()


def topics(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(30)


def committed_topics(broker: KafkaBroker, group: str) -> set[str]:
    return {t for t, _ in broker.group_coordinator.fetch_offsets(group, None)}


def expire_a_week_later(broker: KafkaBroker) -> int:
    return broker.group_coordinator.delete_expired_offsets(now_ms=int(time.time() * 1000) + WEEK_MS)


def test_stable_classic_group_loses_only_unsubscribed_offsets(broker):
    a, b, group = unique("sub"), unique("old"), unique("kip496")
    topics(broker.bootstrap, a, b)
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                  "group.protocol": "classic", "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"})
    assigned = []
    c.subscribe([a], on_assign=lambda _c, ps: assigned.extend(ps))
    wait_for(lambda: assigned, lambda: c.poll(0.1), what="assigned")
    c.commit(offsets=[confluent_kafka.TopicPartition(a, 0, 3), confluent_kafka.TopicPartition(b, 0, 5)],
             asynchronous=False)
    assert committed_topics(broker, group) == {a, b}
    assert broker.group_coordinator.group(group).state_name() == "Stable"
    assert expire_a_week_later(broker) == 1
    assert committed_topics(broker, group) == {a}  # the subscribed topic's offset stays
    c.close()
    assert expire_a_week_later(broker) == 1  # Empty now: everything goes, then the group
    assert broker.group_coordinator.group(group) is None


def test_kip848_group_loses_only_unsubscribed_offsets(broker):
    a, b, group = unique("sub"), unique("old"), unique("kip848-496")
    topics(broker.bootstrap, a, b)
    with KafkaConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                        "enable.auto.commit": False, "auto.offset.reset": "earliest"}) as c:
        c.subscribe([a])
        wait_for(lambda: c.assignment(), lambda: c.poll(100), what="assigned")
        c.commit_sync({(a, 0): 3, (b, 0): 5})
        assert committed_topics(broker, group) == {a, b}
        assert expire_a_week_later(broker) == 1
        assert committed_topics(broker, group) == {a}


def test_rebalancing_group_keeps_everything(broker):
    a, group = unique("sub"), unique("rebalancing")
    topics(broker.bootstrap, a)
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                  "group.protocol": "classic", "enable.auto.commit": False})
    assigned = []
    c.subscribe([a], on_assign=lambda _c, ps: assigned.extend(ps))
    wait_for(lambda: assigned, lambda: c.poll(0.1), what="assigned")
    c.commit(offsets=[confluent_kafka.TopicPartition(a, 0, 3)], asynchronous=False)
    g = broker.group_coordinator.groups.classic(group)
    g.state = "PreparingRebalance"  # as during a rebalance
    try:
        assert expire_a_week_later(broker) == 0
    finally:
        g.state = "Stable"
    c.close()
