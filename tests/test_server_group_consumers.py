"""Real clients' subscribe()-style consumer groups against a real broker subprocess
(the classic protocol, broker/server/group/membership.py): confluent-kafka (eager range /
roundrobin and cooperative-sticky), kafka-python, aiokafka and kcat -G.

Each test uses a 6-partition topic and checks, through the clients' rebalance callbacks,
that at every moment a partition has at most one owner; that members joining and leaving
move partitions; that every produced record is consumed; and that the committed offsets
cover them. Also: a consumer killed with SIGKILL (in a subprocess) is expired after its
session timeout and its partitions move; a broker restart in the middle keeps the
committed offsets and the group, and the consumer resumes.

No timed assertion: waits are bounded loops on a condition (generous bounds, the machine
is shared).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol import ApiKey
from tests.support.broker import ROOT, RawClient
from tests.support.waits import wait_until
from tests.test_server_group_offsets import describe, fetched, unique

PARTITIONS = 6
FAST = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}
CONSUMER = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "300", "auto.offset.reset": "earliest",
            "enable.auto.commit": "false", "group.protocol": "classic"}


class Ownership:
    """Who owns which partition, from the rebalance callbacks; asserts at most one owner."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}
        self.violations: list[str] = []
        self.events = 0
        self.history: list[str] = []

    def assign(self, who: str, partitions) -> None:
        with self.lock:
            self.events += 1
            self.history.append(f"{time.monotonic():.3f} assign {who} {sorted(partitions)}")
            for p in partitions:
                other = self.owner.get(p)
                if other is not None and other != who:
                    self.violations.append(f"partition {p} given to {who} while {other} owns it")
                self.owner[p] = who

    def revoke(self, who: str, partitions) -> None:
        with self.lock:
            self.events += 1
            self.history.append(f"{time.monotonic():.3f} revoke {who} {sorted(partitions)}")
            for p in partitions:
                if self.owner.get(p) == who:
                    del self.owner[p]

    def of(self, who: str) -> set[int]:
        with self.lock:
            return {p for p, o in self.owner.items() if o == who}


def wait_for(cond, step=None, timeout: float = 120.0, what: str = "condition",
             interval: float | None = None) -> None:
    """Wait (bounded) until ``cond``; between checks ``step`` (e.g. a member's poll, which
    takes its time) and a pause of ``interval`` s (default: 0.1 without a step, none with)."""
    if interval is None:
        interval = 0.1 if step is None else 0.0
    wait_until(cond, timeout, f"{what} not reached", step=step, interval=interval)


def make_topic(bootstrap: str) -> str:
    topic = unique("grp")
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    return topic


def produce(bootstrap: str, topic: str, start: int, count: int) -> set[str]:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    values = set()
    for i in range(start, start + count):
        p.produce(topic, str(i).encode(), partition=i % PARTITIONS)
        values.add(str(i))
    assert p.flush(30) == 0
    return values


def committed_offsets(broker, group: str, topic: str) -> dict[int, int]:
    with RawClient(broker.host, broker.port) as c:
        got = fetched(c, group, [(topic, p) for p in range(PARTITIONS)])
    return {p: got[(topic, p)][0] for p in range(PARTITIONS)}


def end_offsets(broker, topic: str) -> dict[int, int]:
    with RawClient(broker.host, broker.port) as c:
        r = c.request(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                           for p in range(PARTITIONS)]}]})
    return {p.partition_index: p.offset for p in r.topics[0].partitions}


# --- confluent-kafka ---

class CkMember:
    def __init__(self, name: str, bootstrap: str, group: str, topic: str, strategy: str, owners: Ownership,
                 seen: set) -> None:
        self.name, self.owners, self.seen = name, owners, seen
        self.c = confluent_kafka.Consumer({**CONSUMER, "bootstrap.servers": bootstrap, "group.id": group,
                                           "client.id": name, "partition.assignment.strategy": strategy})
        self.c.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_revoke)

    def _on_assign(self, consumer, partitions) -> None:
        self.owners.assign(self.name, [p.partition for p in partitions])

    def _on_revoke(self, consumer, partitions) -> None:
        try:  # commit what was processed before giving the partitions away
            consumer.commit(asynchronous=False)
        except confluent_kafka.KafkaException:
            pass  # nothing to commit, or the generation is gone: redelivered to the next owner
        self.owners.revoke(self.name, [p.partition for p in partitions])

    def step(self) -> None:
        msgs = self.c.consume(200, 0.05)
        for m in msgs:
            assert m.error() is None or m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, m.error()
            if m.error() is None:
                self.seen.add(m.value().decode())
        if msgs:
            try:
                self.c.commit(asynchronous=False)
            except confluent_kafka.KafkaException as exc:  # a rebalance raced the commit
                assert exc.args[0].code() in (confluent_kafka.KafkaError.REBALANCE_IN_PROGRESS,
                                              confluent_kafka.KafkaError.ILLEGAL_GENERATION,
                                              confluent_kafka.KafkaError.UNKNOWN_MEMBER_ID,
                                              confluent_kafka.KafkaError._NO_OFFSET), exc


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_confluent_kafka_subscribe(broker_factory, strategy):
    broker = broker_factory(FAST)
    topic, group = make_topic(broker.bootstrap), unique("ck-group")
    owners, seen = Ownership(), set()
    expected = produce(broker.bootstrap, topic, 0, 600)
    a = CkMember("a", broker.bootstrap, group, topic, strategy, owners, seen)
    wait_for(lambda: len(owners.of("a")) == PARTITIONS, a.step, what="a owns every partition")
    b = CkMember("b", broker.bootstrap, group, topic, strategy, owners, seen)

    def both():
        a.step()
        b.step()

    wait_for(lambda: owners.of("a") and owners.of("b") and len(owners.owner) == PARTITIONS, both,
             what="a and b share the partitions")
    assert owners.of("a").isdisjoint(owners.of("b"))
    expected |= produce(broker.bootstrap, topic, 600, 600)
    wait_for(lambda: expected <= seen, both, what="every record consumed")
    d = describe(RawClient(broker.host, broker.port), [group])[0]
    assert d.group_state == "Stable" and len(d.members) == 2
    assert d.protocol_data == strategy and {m.client_id for m in d.members} == {"a", "b"}
    a.c.close()  # leaves the group: b gets everything
    wait_for(lambda: len(owners.of("b")) == PARTITIONS, b.step, what="b owns every partition")
    expected |= produce(broker.bootstrap, topic, 1200, 60)
    wait_for(lambda: expected <= seen, b.step, what="the last records consumed")
    assert end_offsets(broker, topic) == {p: 210 for p in range(PARTITIONS)}
    wait_for(lambda: committed_offsets(broker, group, topic) == end_offsets(broker, topic), b.step,
             what="commits cover every record")
    b.c.close()
    assert owners.violations == []
    with RawClient(broker.host, broker.port) as c:
        assert describe(c, [group])[0].group_state == "Empty"
    assert "Traceback" not in broker.stderr_text()


# --- kafka-python ---

def test_kafka_python_group(broker_factory):
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    broker = broker_factory(FAST)
    topic, group = make_topic(broker.bootstrap), unique("kp-group")
    owners, seen, lock = Ownership(), set(), threading.Lock()
    expected = produce(broker.bootstrap, topic, 0, 600)
    stops = {name: threading.Event() for name in ("a", "b")}
    errors: list[BaseException] = []

    class Listener(ConsumerRebalanceListener):
        def __init__(self, name):
            self.name = name

        def on_partitions_revoked(self, revoked):
            owners.revoke(self.name, [tp.partition for tp in revoked])

        def on_partitions_assigned(self, assigned):
            owners.assign(self.name, [tp.partition for tp in assigned])

    def run(name: str) -> None:
        try:
            c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, client_id=name,
                              auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                              heartbeat_interval_ms=300)
            c.subscribe([topic], listener=Listener(name))
            while not stops[name].is_set():
                # kafka-python 3.0.12 loses a rebalance it leads when poll's timeout expires
                # between its SyncGroup request and the response, and the rejoin came from a
                # metadata change (its first assignment ran before the topic's metadata): the
                # next poll sees no need to rejoin, so it never applies the assignment nor
                # re-enables its heartbeat, and the broker expires the member a session later.
                # A poll long enough for a join under the suite's load keeps clear of it
                # (poll returns as soon as records come).
                batch = c.poll(2000)
                for records in batch.values():
                    with lock:
                        seen.update(r.value.decode() for r in records)
                if batch:
                    try:
                        c.commit()
                    except Exception:  # noqa: BLE001 - CommitFailedError during a rebalance
                        pass
            c.commit()
            c.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = {n: threading.Thread(target=run, args=(n,), daemon=True) for n in ("a", "b")}
    threads["a"].start()
    idle = None  # wait_for pauses between its checks
    wait_for(lambda: len(owners.of("a")) == PARTITIONS, idle, what="a owns every partition")
    threads["b"].start()
    wait_for(lambda: owners.of("a") and owners.of("b") and len(owners.owner) == PARTITIONS, idle,
             what="a and b share the partitions")
    expected |= produce(broker.bootstrap, topic, 600, 600)
    wait_for(lambda: expected <= seen, idle, what="every record consumed")
    stops["a"].set()
    threads["a"].join(60)
    wait_for(lambda: len(owners.of("b")) == PARTITIONS, idle, what="b owns every partition")
    expected |= produce(broker.bootstrap, topic, 1200, 60)
    wait_for(lambda: expected <= seen, idle, what="the last records consumed")
    wait_for(lambda: committed_offsets(broker, group, topic) == end_offsets(broker, topic), idle,
             what="commits cover every record")
    stops["b"].set()
    threads["b"].join(60)
    assert errors == [] and owners.violations == []
    assert broker.api_versions_used("a")["JOIN_GROUP"]  # the group protocol really ran
    assert "Traceback" not in broker.stderr_text()


# --- aiokafka ---

def test_aiokafka_group(broker_factory):
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    broker = broker_factory(FAST)
    topic, group = make_topic(broker.bootstrap), unique("aio-group")
    owners, seen = Ownership(), set()
    expected = produce(broker.bootstrap, topic, 0, 600)

    class Listener(ConsumerRebalanceListener):
        def __init__(self, name):
            self.name = name

        async def on_partitions_revoked(self, revoked):
            owners.revoke(self.name, [tp.partition for tp in revoked])

        async def on_partitions_assigned(self, assigned):
            owners.assign(self.name, [tp.partition for tp in assigned])

    async def until(cond, what: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            assert time.monotonic() < deadline, f"{what} not reached"
            await asyncio.sleep(0.1)

    async def consume(c, stop: asyncio.Event) -> None:
        while not stop.is_set():
            batch = await c.getmany(timeout_ms=200)
            for records in batch.values():
                seen.update(r.value.decode() for r in records)
            if batch:
                try:
                    await c.commit()
                except Exception:  # noqa: BLE001 - CommitFailedError during a rebalance
                    pass

    async def main() -> None:
        consumers, stops, tasks = {}, {}, {}
        for name in ("a", "b"):
            consumers[name] = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, client_id=name,
                                               auto_offset_reset="earliest", enable_auto_commit=False,
                                               session_timeout_ms=6000, heartbeat_interval_ms=300)
            consumers[name].subscribe([topic], listener=Listener(name))
            stops[name] = asyncio.Event()
        await consumers["a"].start()
        tasks["a"] = asyncio.create_task(consume(consumers["a"], stops["a"]))
        await until(lambda: len(owners.of("a")) == PARTITIONS, "a owns every partition")
        await consumers["b"].start()
        tasks["b"] = asyncio.create_task(consume(consumers["b"], stops["b"]))
        await until(lambda: owners.of("a") and owners.of("b") and len(owners.owner) == PARTITIONS,
                    "a and b share the partitions")
        expected.update(await asyncio.to_thread(produce, broker.bootstrap, topic, 600, 600))
        await until(lambda: expected <= seen, "every record consumed")
        stops["a"].set()
        await tasks["a"]
        await consumers["a"].stop()  # leaves the group; aiokafka calls no listener on stop():
        owners.revoke("a", owners.of("a"))  # the partitions are a's no more once it left
        await until(lambda: len(owners.of("b")) == PARTITIONS, "b owns every partition")
        expected.update(await asyncio.to_thread(produce, broker.bootstrap, topic, 1200, 60))
        await until(lambda: expected <= seen, "the last records consumed")
        stops["b"].set()
        await tasks["b"]
        await consumers["b"].commit()
        await consumers["b"].stop()

    asyncio.run(main())
    assert owners.violations == [], owners.history
    assert committed_offsets(broker, group, topic) == end_offsets(broker, topic)
    assert "Traceback" not in broker.stderr_text()


# --- kcat -G ---

@pytest.mark.kcat
def test_kcat_balanced_consumer(broker_factory):
    broker = broker_factory(FAST)
    topic, group = make_topic(broker.bootstrap), unique("kcat-group")
    expected = produce(broker.bootstrap, topic, 0, 300)
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-e", "-q",
                          "-X", "session.timeout.ms=6000", "-f", "%s\n", topic],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert set(out.stdout.split()) == expected
    assert committed_offsets(broker, group, topic) == end_offsets(broker, topic)
    # a second run of the group starts from the committed offsets: only the new records
    expected2 = produce(broker.bootstrap, topic, 300, 60)
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-e", "-q",
                          "-X", "session.timeout.ms=6000", "-f", "%s\n", topic],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert set(out.stdout.split()) == expected2
    assert broker.api_versions_used()["JOIN_GROUP"]


# --- a member killed with SIGKILL ---

VICTIM = r"""
import sys, confluent_kafka
bootstrap, group, topic = sys.argv[1:4]
c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "victim",
                              "session.timeout.ms": "6000", "heartbeat.interval.ms": "300",
                              "auto.offset.reset": "earliest", "enable.auto.commit": "false",
                              "group.protocol": "classic"})
def on_assign(consumer, partitions):
    print("assigned", " ".join(str(p.partition) for p in partitions), flush=True)
c.subscribe([topic], on_assign=on_assign)
while True:
    c.poll(0.1)
"""


def test_killed_member_expires_and_its_partitions_move(broker_factory, tmp_path):
    broker = broker_factory(FAST)
    topic, group = make_topic(broker.bootstrap), unique("kill-group")
    owners, seen = Ownership(), set()
    expected = produce(broker.bootstrap, topic, 0, 120)
    survivor = CkMember("survivor", broker.bootstrap, group, topic, "range", owners, seen)
    wait_for(lambda: len(owners.of("survivor")) == PARTITIONS, survivor.step, what="survivor owns everything")
    script = tmp_path / "victim.py"
    script.write_text(VICTIM)
    victim = subprocess.Popen([sys.executable, str(script), broker.bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(victim.stdout.readline, "")), daemon=True)
        reader.start()
        wait_for(lambda: any(line.split()[1:] for line in lines) and len(owners.of("survivor")) < PARTITIONS
                 and owners.of("survivor"), survivor.step, what="the victim has partitions")
        with RawClient(broker.host, broker.port) as c:
            assert {m.client_id for m in describe(c, [group])[0].members} == {"survivor", "victim"}
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(30)
        # the victim never leaves: its session (6 s) expires, then the survivor gets everything
        wait_for(lambda: len(owners.of("survivor")) == PARTITIONS, survivor.step, what="partitions moved")
        expected |= produce(broker.bootstrap, topic, 120, 120)
        wait_for(lambda: expected <= seen, survivor.step, what="every record consumed")
        with RawClient(broker.host, broker.port) as c:
            d = describe(c, [group])[0]
            assert d.group_state == "Stable" and [m.client_id for m in d.members] == ["survivor"]
        assert "session expired" in broker.stderr_text()
        survivor.c.close()
        assert owners.violations == []
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()


# --- a broker restart in the middle ---

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_broker_restart_keeps_offsets_and_the_consumer_resumes(broker_factory):
    broker = broker_factory({**FAST, "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"})
    topic, group = make_topic(broker.bootstrap), unique("restart-group")
    owners, seen = Ownership(), set()
    expected = produce(broker.bootstrap, topic, 0, 300)
    member = CkMember("m", broker.bootstrap, group, topic, "range", owners, seen)
    wait_for(lambda: expected <= seen, member.step, what="first records consumed")
    before = {p: 50 for p in range(PARTITIONS)}
    wait_for(lambda: committed_offsets(broker, group, topic) == before, member.step, what="committed")
    broker.restart()  # same port: the consumer reconnects
    assert committed_offsets(broker, group, topic) == before
    with RawClient(broker.host, broker.port) as c:
        d = describe(c, [group])[0]  # the group and its member were reloaded
        assert d.group_state == "Stable" and [m.client_id for m in d.members] == ["m"]
    expected |= produce(broker.bootstrap, topic, 300, 300)
    wait_for(lambda: expected <= seen, member.step, what="records after the restart consumed")
    wait_for(lambda: committed_offsets(broker, group, topic) == {p: 100 for p in range(PARTITIONS)}, member.step,
             what="committed after the restart")
    member.c.close()
    # a new consumer of the group starts where the group left off
    late_seen: set = set()
    late = CkMember("late", broker.bootstrap, group, topic, "range", owners, late_seen)
    more = produce(broker.bootstrap, topic, 600, 60)
    wait_for(lambda: more <= late_seen, late.step, what="the new records consumed")
    assert late_seen == more  # nothing below the committed offsets again
    late.c.close()
    assert owners.violations == []


def test_confluent_kafka_static_member_restart(broker_factory):
    """A static member (group.instance.id) that restarts within its session takes its
    place back without a rebalance: same partitions, and the group never left Stable."""
    broker = broker_factory(FAST)
    topic, group = make_topic(broker.bootstrap), unique("static-group")
    owners, seen = Ownership(), set()
    expected = produce(broker.bootstrap, topic, 0, 120)

    def member(name: str) -> CkMember:
        m = CkMember.__new__(CkMember)
        m.name, m.owners, m.seen = name, owners, seen
        m.c = confluent_kafka.Consumer({**CONSUMER, "bootstrap.servers": broker.bootstrap, "group.id": group,
                                        "client.id": name, "group.instance.id": "instance-1",
                                        "session.timeout.ms": "30000"})
        m.c.subscribe([topic], on_assign=m._on_assign, on_revoke=m._on_revoke, on_lost=m._on_revoke)
        return m

    first = member("first")
    wait_for(lambda: expected <= seen and len(owners.of("first")) == PARTITIONS, first.step, what="first consumed")
    wait_for(lambda: committed_offsets(broker, group, topic) == end_offsets(broker, topic), first.step,
             what="first committed")
    first.c.close()  # a static member sends no LeaveGroup: it stays in the group
    owners.revoke("first", owners.of("first"))
    with RawClient(broker.host, broker.port) as c:
        d = describe(c, [group])[0]
        assert d.group_state == "Stable" and [m.group_instance_id for m in d.members] == ["instance-1"]
    generations = broker.stderr_text().count("is stable")
    second = member("second")
    expected |= produce(broker.bootstrap, topic, 120, 60)
    wait_for(lambda: expected <= seen and len(owners.of("second")) == PARTITIONS, second.step,
             what="second consumed")
    assert broker.stderr_text().count("is stable") == generations  # no new generation
    assert "static member instance-1 rejoined" in broker.stderr_text()
    second.c.close()
    assert owners.violations == []
