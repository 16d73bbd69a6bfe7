"""KIP-848 consumer groups served to a REAL client: confluent-kafka (librdkafka) consumers
with ``group.protocol=consumer`` on a 6-partition topic. Consumers join and leave while
records flow; the on_assign / on_revoke callbacks track who owns what, and at every moment
a partition has at most one owner; every record is consumed and committed. A consumer
killed with SIGKILL (a subprocess) loses its partitions once its session expires."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.support.broker import ROOT  # noqa: E402

pytestmark = pytest.mark.timeout(300)

OVERRIDES = {"group.consumer.heartbeat.interval.ms": "300", "group.consumer.session.timeout.ms": "4000"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 6) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, n: int, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + n):
        p.produce(topic, str(i).encode(), partition=i % 6)
    assert p.flush(30) == 0


class Ownership:
    """Who owns which partition, from the rebalance callbacks; fails on a double owner."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}
        self.violations: list[str] = []

    def callbacks(self, name: str):
        def on_assign(consumer, partitions):
            with self.lock:
                for tp in partitions:
                    if tp.partition in self.owner and self.owner[tp.partition] != name:
                        self.violations.append(f"{name} got {tp.partition} still owned by {self.owner[tp.partition]}")
                    self.owner[tp.partition] = name

        def on_revoke(consumer, partitions):
            with self.lock:
                for tp in partitions:
                    if self.owner.get(tp.partition) == name:
                        del self.owner[tp.partition]

        return on_assign, on_revoke

    def of(self, name: str) -> set[int]:
        with self.lock:
            return {p for p, o in self.owner.items() if o == name}


def consumer(bootstrap: str, group: str, topic: str, name: str, ownership: Ownership) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": name})
    on_assign, on_revoke = ownership.callbacks(name)
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    return c


def poll_all(consumers: dict, seen: dict, rounds: int = 1) -> None:
    for _ in range(rounds):
        for name, c in consumers.items():
            m = c.poll(0.1)
            if m is None:
                continue
            assert m.error() is None, m.error()
            seen.setdefault(int(m.value()), []).append(name)
            c.commit(message=m, asynchronous=False)


def until(predicate, step, timeout: float = 90.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        step()
        if predicate():
            return True
    return False


def test_consumers_join_and_leave_one_owner_per_partition(broker_factory):
    b = broker_factory(OVERRIDES)
    topic, group = unique("t"), unique("g")
    create_topic(b.bootstrap, topic)
    produce(b.bootstrap, topic, 120)
    own = Ownership()
    seen: dict[int, list[str]] = {}
    consumers = {"c1": consumer(b.bootstrap, group, topic, "c1", own)}
    try:
        assert until(lambda: len(own.of("c1")) == 6, lambda: poll_all(consumers, seen))
        consumers["c2"] = consumer(b.bootstrap, group, topic, "c2", own)
        consumers["c3"] = consumer(b.bootstrap, group, topic, "c3", own)
        assert until(lambda: all(len(own.of(n)) == 2 for n in consumers), lambda: poll_all(consumers, seen))
        produce(b.bootstrap, topic, 120, start=120)
        assert until(lambda: len(seen) == 240, lambda: poll_all(consumers, seen))
        consumers.pop("c1").close()  # leaves (epoch -1): its partitions move to c2 and c3
        assert until(lambda: all(len(own.of(n)) == 3 for n in consumers), lambda: poll_all(consumers, seen))
        produce(b.bootstrap, topic, 60, start=240)
        assert until(lambda: len(seen) == 300, lambda: poll_all(consumers, seen))
    finally:
        for c in consumers.values():
            c.close()
    assert not own.violations, own.violations
    assert sorted(seen) == list(range(300))
    # everything consumed was committed: the group's committed offsets are the log ends
    check = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "group.protocol": "consumer"})
    try:
        committed = check.committed([TopicPartition(topic, p) for p in range(6)], timeout=30)
        assert [tp.offset for tp in committed] == [50] * 6
    finally:
        check.close()


KILLED_CONSUMER = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
                  "auto.offset.reset": "earliest"})
    c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
    while True:
        c.poll(0.2)
""")


def test_killed_member_expires_and_its_partitions_move(broker_factory):
    b = broker_factory(OVERRIDES)
    topic, group = unique("t"), unique("g")
    create_topic(b.bootstrap, topic)
    own = Ownership()
    proc = subprocess.Popen([sys.executable, "-c", KILLED_CONSUMER, b.bootstrap, group, topic],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    survivor = None
    try:
        assert proc.stdout.readline().startswith("assigned 6")
        survivor = consumer(b.bootstrap, group, topic, "survivor", own)
        consumers = {"survivor": survivor}
        assert until(lambda: len(own.of("survivor")) == 3, lambda: poll_all(consumers, {}))
        proc.kill()  # SIGKILL: no leave heartbeat; the session (4 s) expires
        proc.wait(30)
        assert until(lambda: len(own.of("survivor")) == 6, lambda: poll_all(consumers, {}))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if survivor is not None:
            survivor.close()
    assert not own.violations
    assert "session expired" in b.stderr_text()
