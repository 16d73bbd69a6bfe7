"""KafkaConsumer.subscribe() (broker/client/consumer/group_driver.py) against a real
broker subprocess, alongside confluent-kafka consumers in the same group.

Ownership is tracked through the rebalance listeners of every member: a partition never
has two owners at once, and after each rebalance settles every partition has exactly
one. Every member runs on its own thread (a JoinGroup blocks until the whole group has
joined, as in Kafka). No timed assertion: waits are bounded loops on a condition.
"""

from __future__ import annotations

import threading
import uuid

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.client.consumer import CommitFailedError, KafkaConsumer, TopicPartition
from broker.client.consumer.group_driver import ConsumerRebalanceListener
from broker.client.consumer.group_offsets import describe_groups, fetch_committed
from tests.support.waits import wait_until

PARTITIONS = 6
FAST = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}
OURS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "metadata.max.age.ms": 500}
THEIRS = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "300",
          "auto.offset.reset": "earliest", "enable.auto.commit": "false",
          "group.protocol": "classic"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def broker(broker_factory):
    return broker_factory(FAST)


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, count: int, partitions: int = PARTITIONS) -> set[str]:
    """``count`` records with values never produced before (round robin over partitions)."""
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    values = set()
    batch = uuid.uuid4().hex[:6]
    for i in range(count):
        v = f"{topic}-{batch}-{i}"
        values.add(v)
        p.produce(topic, value=v.encode(), partition=i % partitions)
    assert p.flush(30) == 0
    return values


class Ownership:
    """Owners from the listeners; records violations (two owners at once)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[TopicPartition, str] = {}
        self.violations: list[str] = []

    def assign(self, who: str, tps) -> None:
        with self.lock:
            for tp in tps:
                tp = TopicPartition(tp.topic, tp.partition)
                other = self.owner.get(tp)
                if other is not None and other != who:
                    self.violations.append(f"{tp} given to {who} while {other} owns it")
                self.owner[tp] = who

    def revoke(self, who: str, tps) -> None:
        with self.lock:
            for tp in tps:
                tp = TopicPartition(tp.topic, tp.partition)
                if self.owner.get(tp) == who:
                    del self.owner[tp]

    def of(self, who: str) -> set[TopicPartition]:
        with self.lock:
            return {tp for tp, o in self.owner.items() if o == who}

    def owned(self) -> set[TopicPartition]:
        with self.lock:
            return set(self.owner)


def wait_for(cond, timeout: float = 120.0, what: str = "condition") -> None:
    wait_until(cond, timeout, f"{what} not reached")


class Member(threading.Thread):
    """One consumer (ours or confluent-kafka's) polling on its own thread; commits what it
    consumed before every revocation (and after every poll)."""

    def __init__(self, name: str, bootstrap: str, group: str, topics, own: Ownership, *,
                 ours: bool = True, strategy: str = "range", extra: dict | None = None,
                 pattern: str | None = None) -> None:
        super().__init__(name=name, daemon=True)
        self.who, self.own, self.ours = name, own, ours
        self.records: list[tuple[str, int, int, str]] = []
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None
        self.generations = 0
        if ours:
            self.c = KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                    "partition.assignment.strategy": strategy,
                                    **OURS, **(extra or {})})
            member = self

            class L(ConsumerRebalanceListener):
                def on_partitions_revoked(self, tps):
                    member.c.commit_sync() if member.c.assignment() else None
                    own.revoke(member.who, tps)

                def on_partitions_assigned(self, tps):
                    member.generations += 1
                    own.assign(member.who, tps)

                def on_partitions_lost(self, tps):
                    own.revoke(member.who, tps)

            if pattern is not None:
                self.c.subscribe(pattern=pattern, listener=L())
            else:
                self.c.subscribe(topics, listener=L())
        else:
            self.c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                               "partition.assignment.strategy": strategy,
                                               **THEIRS, **(extra or {})})
            cooperative = strategy == "cooperative-sticky"

            def on_assign(c, tps):
                self.generations += 1
                own.assign(self.who, tps)
                if cooperative:
                    c.incremental_assign(tps)

            def on_revoke(c, tps):
                try:
                    c.commit(asynchronous=False)
                except confluent_kafka.KafkaException:
                    pass
                own.revoke(self.who, tps)
                if cooperative:
                    c.incremental_unassign(tps)

            self.c.subscribe(list(topics), on_assign=on_assign, on_revoke=on_revoke,
                             on_lost=lambda c, tps: own.revoke(self.who, tps))

    def run(self) -> None:
        try:
            while not self.stop_flag.is_set():
                if self.ours:
                    batch = self.c.poll(200)
                    for r in batch:
                        self.records.append((r.topic, r.partition, r.offset, r.value.decode()))
                    if batch:
                        self.c.commit_sync()
                else:
                    m = self.c.poll(0.2)
                    if m is None or m.error():
                        continue
                    self.records.append((m.topic(), m.partition(), m.offset(), m.value().decode()))
                    self.c.commit(message=m, asynchronous=False)
            self.c.close()
        except BaseException as e:  # noqa: BLE001
            self.error = e

    def finish(self) -> None:
        self.stop_flag.set()
        self.join(60)
        assert not self.is_alive(), f"{self.who} did not stop"
        assert self.error is None, f"{self.who}: {self.error!r}"


def all_assigned(own: Ownership, tps: set[TopicPartition], members) -> bool:
    if own.owned() != tps:
        return False
    return all(own.of(m.who) for m in members)


def test_two_of_ours_and_confluent_share_a_topic_each_record_once(broker):
    topic, group = unique("grp"), unique("g")
    create_topic(broker.bootstrap, topic)
    values = produce(broker.bootstrap, topic, 300)
    own = Ownership()
    tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    a = Member("a", broker.bootstrap, group, [topic], own)
    b = Member("b", broker.bootstrap, group, [topic], own)
    c = Member("c", broker.bootstrap, group, [topic], own, ours=False)
    for m in (a, b, c):
        m.start()
    wait_for(lambda: all_assigned(own, tps, (a, b, c)), what="three members own all partitions")
    values |= produce(broker.bootstrap, topic, 300)
    got = lambda: [r[3] for m in (a, b, c) for r in m.records]  # noqa: E731
    wait_for(lambda: set(got()) >= values, what="every record consumed")
    # a member closing: its partitions move to the others
    a.finish()
    wait_for(lambda: all_assigned(own, tps, (b, c)), what="b and c own all partitions")
    values |= produce(broker.bootstrap, topic, 120)
    wait_for(lambda: set(got()) >= values, what="records after a left consumed")
    b.finish()
    c.finish()
    assert own.violations == []
    consumed = got()
    assert sorted(consumed) == sorted(values), "a record was consumed twice or never"
    committed = fetch_committed({"bootstrap.servers": broker.bootstrap}, group, sorted(tps))
    assert sum(committed.values()) == len(values)


def test_cooperative_sticky_with_confluent(broker):
    topic, group = unique("coop"), unique("g")
    create_topic(broker.bootstrap, topic)
    values = produce(broker.bootstrap, topic, 120)
    own = Ownership()
    tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    a = Member("a", broker.bootstrap, group, [topic], own, strategy="cooperative-sticky")
    a.start()
    wait_for(lambda: all_assigned(own, tps, (a,)), what="a owns all")
    before = own.of("a")
    c = Member("c", broker.bootstrap, group, [topic], own, ours=False,
               strategy="cooperative-sticky")
    c.start()
    wait_for(lambda: all_assigned(own, tps, (a, c)) and len(own.of("a")) == 3,
             what="a and c share the partitions")
    # a kept what it did not give away: only the moved partitions were revoked
    assert own.of("a") <= before
    got = lambda: [r[3] for m in (a, c) for r in m.records]  # noqa: E731
    values |= produce(broker.bootstrap, topic, 120)
    wait_for(lambda: set(got()) >= values, what="every record consumed")
    c.finish()
    wait_for(lambda: all_assigned(own, tps, (a,)), what="a owns all again")
    a.finish()
    assert own.violations == []
    assert sorted(got()) == sorted(values)


def test_static_member_rejoins_without_rebalance(broker):
    topic, group = unique("static"), unique("g")
    create_topic(broker.bootstrap, topic)
    own = Ownership()
    tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    extra_a = {"group.instance.id": "static-a", "session.timeout.ms": 30000}
    a = Member("a", broker.bootstrap, group, [topic], own, extra=extra_a)
    b = Member("b", broker.bootstrap, group, [topic], own,
               extra={"group.instance.id": "static-b", "session.timeout.ms": 30000})
    a.start()
    b.start()
    wait_for(lambda: all_assigned(own, tps, (a, b)), what="a and b own all")
    cfg = {"bootstrap.servers": broker.bootstrap}
    wait_for(lambda: describe_groups(cfg, [group])[group].state == "Stable", what="stable")
    b_before, b_gens = own.of("b"), b.generations
    a.finish()  # a static member closing does not leave the group
    desc = describe_groups(cfg, [group])[group]
    assert {m.group_instance_id for m in desc.members} == {"static-a", "static-b"}
    a2 = Member("a2", broker.bootstrap, group, [topic], own, extra=extra_a)
    a2.start()
    wait_for(lambda: own.of("a2") and own.owned() == tps, what="a2 takes a's partitions")
    assert own.of("b") == b_before and b.generations == b_gens, "b saw a rebalance"
    a2.finish()
    b.finish()
    assert own.violations == []


def test_commit_carries_the_generation(broker):
    topic, group = unique("gen"), unique("g")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 60)
    cfg = {"bootstrap.servers": broker.bootstrap, "group.id": group, **OURS}
    with KafkaConsumer(cfg) as c:
        c.subscribe([topic])
        got: list = []
        while len(got) < 60:
            got += c.poll(500)
        c.commit_sync()
        committed = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)])
        assert sum(o.offset for o in committed.values()) == 60
        # a simple (generation -1) commit is refused while the member is active
        with pytest.raises(Exception, match="active members"):
            from broker.client.consumer.group_offsets import commit_offsets
            commit_offsets({"bootstrap.servers": broker.bootstrap}, group,
                           {TopicPartition(topic, 0): 0})
        # a stale generation is refused with CommitFailedError
        c._group.coordinator.generation += 5
        with pytest.raises(CommitFailedError, match="rebalanced"):
            c.commit_sync()
        c._group.coordinator.generation -= 5
        generation = c._group.coordinator.generation
        c.poll(100)  # the failed commit asked for a rejoin: a new generation
        assert c._group.coordinator.generation > generation
        c.commit_sync()
        assert c.assignment() == {TopicPartition(topic, p) for p in range(PARTITIONS)}


def test_pattern_subscribe_picks_up_a_new_topic(broker):
    prefix = unique("pat")
    create_topic(broker.bootstrap, f"{prefix}-one", 2)
    values = produce(broker.bootstrap, f"{prefix}-one", 10, 2)
    own = Ownership()
    a = Member("a", broker.bootstrap, unique("g"), None, own, pattern=rf"{prefix}-.*")
    a.start()
    wait_for(lambda: len(own.of("a")) == 2, what="a owns the first topic")
    create_topic(broker.bootstrap, f"{prefix}-two", 3)
    values |= produce(broker.bootstrap, f"{prefix}-two", 10, 3)
    wait_for(lambda: len(own.of("a")) == 5, what="a owns the new topic too")
    wait_for(lambda: {r[3] for r in a.records} >= values, what="both topics consumed")
    a.finish()
    assert own.violations == []


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, frozenset]] = []

    def on_partitions_revoked(self, tps):
        self.events.append(("revoked", frozenset(tps)))

    def on_partitions_assigned(self, tps):
        self.events.append(("assigned", frozenset(tps)))

    def on_partitions_lost(self, tps):
        self.events.append(("lost", frozenset(tps)))


def test_eager_revokes_everything_before_rejoining(broker):
    topic, group = unique("eager"), unique("g")
    create_topic(broker.bootstrap, topic)
    tps = frozenset(TopicPartition(topic, p) for p in range(PARTITIONS))
    own = Ownership()
    rec = Recorder()
    cfg = {"bootstrap.servers": broker.bootstrap, "group.id": group, **OURS,
           "partition.assignment.strategy": "roundrobin"}
    a = KafkaConsumer(cfg)
    a.subscribe([topic], listener=rec)
    wait_for(lambda: a.poll(100) is not None and a.assignment() == tps, what="a owns all")
    b = Member("b", broker.bootstrap, group, [topic], own, strategy="roundrobin")
    b.start()
    wait_for(lambda: a.poll(100) is not None and own.of("b") and len(a.assignment()) == 3,
             what="a and b share")
    assert ("revoked", tps) in rec.events  # eager: everything, not only what moved
    assert rec.events[-1] == ("assigned", frozenset(a.assignment()))
    b.finish()
    wait_for(lambda: a.poll(100) is not None and a.assignment() == tps, what="a owns all again")
    a.unsubscribe()
    assert a.assignment() == set() and a.subscription() == set()
    assert rec.events[-1] == ("revoked", tps)
    a.close()


def test_max_poll_interval_leaves_the_group_and_poll_rejoins(broker):
    topic, group = unique("slow"), unique("g")
    create_topic(broker.bootstrap, topic)
    tps = frozenset(TopicPartition(topic, p) for p in range(PARTITIONS))
    rec = Recorder()
    cfg = {"bootstrap.servers": broker.bootstrap, "group.id": group, **OURS,
           "max.poll.interval.ms": 1000}
    admin = {"bootstrap.servers": broker.bootstrap}
    with KafkaConsumer(cfg) as c:
        c.subscribe([topic], listener=rec)
        wait_for(lambda: c.poll(100) is not None and c.assignment() == tps, what="assigned")
        # no poll(): the heartbeat thread leaves the group once max.poll.interval.ms passed
        wait_for(lambda: describe_groups(admin, [group])[group].state == "Empty",
                 what="the member left")
        wait_for(lambda: c.poll(100) is not None and c.assignment() == tps, what="rejoined")
        assert ("lost", tps) in rec.events
        assert describe_groups(admin, [group])[group].state == "Stable"


def test_subscribe_argument_errors(broker):
    cfg = {"bootstrap.servers": broker.bootstrap, "group.id": unique("g"), **OURS}
    with KafkaConsumer(cfg) as c:
        with pytest.raises(ValueError, match="not both"):
            c.subscribe(["a"], pattern="a.*")
        with pytest.raises(ValueError, match="empty topic"):
            c.subscribe([""])
        c.assign([TopicPartition("a", 0)])
        with pytest.raises(Exception, match="mutually exclusive"):
            c.subscribe(["a"])
