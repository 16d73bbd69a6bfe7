"""One consumer group of five different real clients against a real broker subprocess:
confluent-kafka (librdkafka), kafka-python, aiokafka, this project's own KafkaConsumer
and kcat -G, all speaking the classic protocol with the "range" assignor they share, over a
6-partition topic (issue 14's proof: mixed groups of real clients).

Each member runs on its own thread (kcat in a subprocess). Ownership is tracked from each
client's rebalance callbacks; kcat's come from the "assigned:" / "revoked:" lines it prints
on stderr, drained without blocking before any other member's assignment is recorded (kcat
prints a revocation before it rejoins, so the line is in the pipe by then).

Checks: at every moment a partition has at most one owner; members joining and leaving
move partitions; every produced record is consumed by someone; at the end the committed
offsets equal the log end offsets; the group ends Empty. No timed assertion: waits are
bounded loops on a condition.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import shutil
import signal
import subprocess
import threading

import confluent_kafka
import pytest

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
from tests.test_server_group_offsets import describe, unique

SESSION = {"session.timeout.ms": 10000, "heartbeat.interval.ms": 500}


class DrainedOwnership(Ownership):
    """Ownership that first drains the non-blocking sources (kcat's stderr) it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: list = []

    def assign(self, who: str, partitions) -> None:
        for drain in self.sources:
            drain()
        super().assign(who, partitions)


class Member(threading.Thread):
    """A member on its own thread: ``body`` runs until ``stop`` is set; failures kept."""

    def __init__(self, name: str, body) -> None:
        super().__init__(daemon=True, name=name)
        self.stop = threading.Event()
        self.body = body
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.body(self)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


class Kcat:
    """kcat -G as a member; its rebalances are parsed from stderr, its records from stdout."""

    LINE = re.compile(r"rebalanced \(memberid [^)]*\): (assigned|revoked): (.*)$")

    def __init__(self, bootstrap: str, group: str, topic: str, owners: DrainedOwnership, seen: set) -> None:
        self.owners, self.seen, self.topic = owners, seen, topic
        self.lock = threading.Lock()
        self.buffer = b""
        self.proc = subprocess.Popen(
            ["kcat", "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
             "-X", "partition.assignment.strategy=range", "-X", "auto.commit.interval.ms=300",
             "-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=500", "-X", "client.id=kcat",
             "-u", "-f", "%s\n", topic],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        fcntl.fcntl(self.proc.stderr, fcntl.F_SETFL, fcntl.fcntl(self.proc.stderr, fcntl.F_GETFL) | os.O_NONBLOCK)
        self.stderr_lines: list[str] = []
        self.reader = threading.Thread(target=self._read_stdout, daemon=True)
        self.reader.start()
        owners.sources.append(self.drain)

    def _read_stdout(self) -> None:
        for line in iter(self.proc.stdout.readline, b""):
            self.seen.add(line.decode().strip())

    def drain(self) -> None:
        with self.lock:
            try:
                chunk = self.proc.stderr.read()
            except (BlockingIOError, ValueError):
                chunk = None
            if not chunk:
                return
            self.buffer += chunk
            *lines, self.buffer = self.buffer.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace")
                self.stderr_lines.append(line)
                m = self.LINE.search(line)
                if m:
                    parts = [int(p) for p in re.findall(re.escape(self.topic) + r"\s*\[(\d+)\]", m.group(2))]
                    if m.group(1) == "assigned":
                        Ownership.assign(self.owners, "kcat", parts)
                    else:
                        self.owners.revoke("kcat", parts)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)  # kcat closes the consumer: commits and leaves
        self.proc.wait(60)
        self.reader.join(30)
        self.drain()


@pytest.mark.kcat
def test_mixed_group_of_five_clients(broker_factory):
    from aiokafka import AIOKafkaConsumer
    from aiokafka import ConsumerRebalanceListener as AioListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor as AioRange
    from kafka import KafkaConsumer as KpConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener as KpListener

    from broker.client.consumer import KafkaConsumer

    assert shutil.which("kcat")
    broker = broker_factory(FAST)
    bootstrap = broker.bootstrap
    topic, group = make_topic(bootstrap), unique("mixed-group")
    owners, seen = DrainedOwnership(), set()
    expected = produce(bootstrap, topic, 0, 600)

    def ck(m: Member) -> None:
        c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "ck",
                                      "group.protocol": "classic", "partition.assignment.strategy": "range",
                                      "auto.offset.reset": "earliest", "enable.auto.commit": "false",
                                      **{k: str(v) for k, v in SESSION.items()}})

        def revoke(consumer, partitions):
            try:
                consumer.commit(asynchronous=False)
            except confluent_kafka.KafkaException:
                pass
            owners.revoke("ck", [p.partition for p in partitions])

        c.subscribe([topic], on_assign=lambda _c, ps: owners.assign("ck", [p.partition for p in ps]),
                    on_revoke=revoke, on_lost=revoke)
        while not m.stop.is_set():
            msgs = c.consume(200, 0.05)
            seen.update(x.value().decode() for x in msgs if x.error() is None)
            if msgs:
                try:
                    c.commit(asynchronous=False)
                except confluent_kafka.KafkaException:
                    pass  # a rebalance raced the commit: the next owner gets the records again
        c.close()

    def kp(m: Member) -> None:
        class Listener(KpListener):
            def on_partitions_revoked(self, revoked):
                owners.revoke("kp", [tp.partition for tp in revoked])

            def on_partitions_assigned(self, assigned):
                owners.assign("kp", [tp.partition for tp in assigned])

        from kafka.coordinator.assignors.range import RangePartitionAssignor
        c = KpConsumer(bootstrap_servers=bootstrap, group_id=group, client_id="kp", auto_offset_reset="earliest",
                       enable_auto_commit=False, session_timeout_ms=SESSION["session.timeout.ms"],
                       heartbeat_interval_ms=SESSION["heartbeat.interval.ms"],
                       partition_assignment_strategy=[RangePartitionAssignor])
        c.subscribe([topic], listener=Listener())
        while not m.stop.is_set():
            batch = c.poll(200)
            for records in batch.values():
                seen.update(r.value.decode() for r in records)
            if batch:
                try:
                    c.commit()
                except Exception:  # noqa: BLE001 - CommitFailedError during a rebalance
                    pass
        c.close()  # commits (auto commit is off: nothing) and leaves the group
        owners.revoke("kp", owners.of("kp"))

    def aio(m: Member) -> None:
        class Listener(AioListener):
            async def on_partitions_revoked(self, revoked):
                owners.revoke("aio", [tp.partition for tp in revoked])

            async def on_partitions_assigned(self, assigned):
                owners.assign("aio", [tp.partition for tp in assigned])

        async def main() -> None:
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id="aio",
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 session_timeout_ms=SESSION["session.timeout.ms"],
                                 heartbeat_interval_ms=SESSION["heartbeat.interval.ms"],
                                 partition_assignment_strategy=(AioRange,))
            c.subscribe([topic], listener=Listener())
            await c.start()
            try:
                while not m.stop.is_set():
                    batch = await c.getmany(timeout_ms=200)
                    for records in batch.values():
                        seen.update(r.value.decode() for r in records)
                    if batch:
                        try:
                            await c.commit()
                        except Exception:  # noqa: BLE001 - CommitFailedError during a rebalance
                            pass
            finally:
                await c.stop()  # leaves the group; aiokafka calls no listener on stop()
                owners.revoke("aio", owners.of("aio"))

        asyncio.run(main())

    def ours(m: Member) -> None:
        class Listener:
            def on_partitions_revoked(self, partitions):
                owners.revoke("ours", [tp.partition for tp in partitions])

            def on_partitions_assigned(self, partitions):
                owners.assign("ours", [tp.partition for tp in partitions])

        with KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "ours",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "partition.assignment.strategy": "range", **SESSION}) as c:
            c.subscribe([topic], Listener())
            while not m.stop.is_set():
                records = c.poll(200)
                seen.update(r.value.decode() for r in records)
                if records:
                    try:
                        c.commit_sync()
                    except Exception:  # noqa: BLE001 - CommitFailedError during a rebalance
                        pass
            c.unsubscribe()  # revokes through the listener, then leaves

    idle = None  # wait_for pauses between its checks

    def everyone_healthy() -> None:  # a step of wait_for(..., interval=0.1)
        for m in members.values():
            assert m.error is None, f"{m.name}: {m.error!r}"
        assert kcat.proc.poll() is None, kcat.stderr_lines
        kcat.drain()

    members = {name: Member(name, body) for name, body in
               (("ck", ck), ("kp", kp), ("aio", aio), ("ours", ours))}
    kcat = None
    try:
        members["ck"].start()
        wait_for(lambda: len(owners.of("ck")) == PARTITIONS, idle, what="ck owns every partition")
        for name in ("kp", "aio", "ours"):
            members[name].start()
            wait_for(lambda n=name: owners.of(n) and len(owners.owner) == PARTITIONS, idle,
                     what=f"{name} gets partitions")
        kcat = Kcat(bootstrap, group, topic, owners, seen)
        wait_for(lambda: owners.of("kcat") and len(owners.owner) == PARTITIONS, everyone_healthy,
                 what="kcat gets partitions", interval=0.1)
        names = ["ck", "kp", "aio", "ours", "kcat"]
        assert all(owners.of(n) for n in names), owners.history
        with RawClient(broker.host, broker.port) as c:
            d = describe(c, [group])[0]
        assert d.protocol_data == "range" and {m.client_id for m in d.members} == set(names)
        expected |= produce(bootstrap, topic, 600, 600)
        wait_for(lambda: expected <= seen, everyone_healthy, what="every record consumed by the five", interval=0.1)

        # two members leave: their partitions move to the three that stay
        for name in ("kp", "aio"):
            members[name].stop.set()
            members[name].join(60)
            assert members[name].error is None, members[name].error
        wait_for(lambda: not owners.of("kp") and not owners.of("aio") and len(owners.owner) == PARTITIONS
                 and all(owners.of(n) for n in ("ck", "ours", "kcat")), everyone_healthy,
                 what="the three remaining members share the partitions", interval=0.1)
        expected |= produce(bootstrap, topic, 1200, 60)
        wait_for(lambda: expected <= seen, everyone_healthy, what="the last records consumed", interval=0.1)
        ends = end_offsets(broker, topic)
        assert ends == {p: 210 for p in range(PARTITIONS)}
        wait_for(lambda: committed_offsets(broker, group, topic) == ends, everyone_healthy,
                 what="commits cover every record", interval=0.1)
    finally:
        for m in members.values():
            m.stop.set()
        for m in members.values():
            if m.is_alive():
                m.join(60)
        if kcat is not None:
            kcat.stop()
    assert all(m.error is None for m in members.values()), {m.name: m.error for m in members.values()}
    assert owners.violations == [], owners.history
    assert kcat.proc.returncode == 0, kcat.stderr_lines
    assert committed_offsets(broker, group, topic) == ends
    with RawClient(broker.host, broker.port) as c:
        assert describe(c, [group])[0].group_state == "Empty"
    assert "Traceback" not in broker.stderr_text()
