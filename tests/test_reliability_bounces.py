"""E1/E2 of RELIABILITY.md on the whole system: an idempotent acks=all producer
(confluent-kafka) and a committing consumer group (confluent-kafka, classic protocol)
run against the real broker in a subprocess while it is bounced, cleanly (SIGTERM) and
hard (SIGKILL), on the same port; every send, ack and poll goes into a Jepsen-style
history (tests/support/history.py), and the assertion is the checker's verdict (H1-H8)
after a final drain.

With ``flush.messages=1`` every acknowledged record is on disk before its ack, so even a
SIGKILL loses nothing acknowledged (H3/H4 must hold). ``make test`` runs two clean and two
hard bounces; ``KAFKALOG_SOAK=1`` runs five of each (``make soak``).

No timed assertion: the waits are bounded loops on conditions.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.history import History, check

PARTITIONS = 3
BOUNCES = 5 if os.environ.get("KAFKALOG_SOAK") else 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Producer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, history: History) -> None:
        super().__init__(daemon=True)
        self.history, self.topic = history, topic
        self.stop = threading.Event()
        self.p = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "client.id": "e-producer", "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 500})
        self.sent = 0

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            value = self.history.value("e")
            partition = i % PARTITIONS
            op = self.history.send("e-producer", partition, value)

            def delivered(err, msg, op=op):
                if err is None:
                    op.ok(msg.offset())
                else:  # an idempotent producer's give-up: the record may or may not be there
                    op.info()

            while True:
                try:
                    self.p.produce(self.topic, value.encode(), partition=partition, on_delivery=delivered)
                    break
                except BufferError:
                    self.p.poll(0.05)
            self.p.poll(0)
            i += 1
            self.sent = i
            if i % 50 == 0:
                time.sleep(0.02)
        self.p.flush(180)


class Consumer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, group: str, history: History) -> None:
        super().__init__(daemon=True)
        self.history = history
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.c = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": "e-consumer",
            "group.protocol": "classic", "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 500, "isolation.level": "read_committed",
            "reconnect.backoff.max.ms": 500})
        self.c.subscribe([topic], on_assign=lambda _c, ps: history.assign("e-consumer", [p.partition for p in ps]))

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                msgs = self.c.consume(500, 0.2)
                records = [(m.partition(), m.offset(), m.value().decode()) for m in msgs if m.error() is None]
                if records:
                    self.history.poll("e-consumer", records, read_committed=True)
                    try:
                        self.c.commit(asynchronous=False)
                    except confluent_kafka.KafkaException:
                        pass  # the broker is down or the group rebalances: the next commit covers it
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.c.close()


def test_e1_e2_bounces_lose_nothing_acknowledged(broker_factory):
    port = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{port}", "flush.messages": "1",
                             "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"})
    topic = "e-bounces"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    history = History()
    producer = Producer(broker.bootstrap, topic, history)
    consumer = Consumer(broker.bootstrap, topic, "e-group", history)
    producer.start()
    consumer.start()
    try:
        for bounce in range(2 * BOUNCES):
            target = producer.sent + 300
            deadline = time.monotonic() + 120
            while producer.sent < target and time.monotonic() < deadline:
                time.sleep(0.05)
            if bounce % 2 == 0:
                broker.stop()  # clean
            else:
                broker.kill()  # hard: SIGKILL
            broker.start()
        target = producer.sent + 300
        deadline = time.monotonic() + 120
        while producer.sent < target and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        producer.stop.set()
        producer.join(240)
    # the final drain: every acknowledged value polled (bounded wait), then the verdict
    acked = {o.value for o in history.snapshot() if o.kind == "send" and o.status == "ok"}
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        polled = {v for o in history.snapshot() if o.kind == "poll" for _, _, v in o.records}
        if acked <= polled:
            break
        time.sleep(0.2)
    consumer.stop.set()
    consumer.join(60)
    assert consumer.error is None, consumer.error
    report = check(history, drained=True)
    assert report.sends_ok > 1000
    assert report.valid, report.summary() + "\n" + "\n".join(
        f"{k}: {v[:5]}" for k, v in report.anomalies.items() if v)
    assert "Traceback" not in broker.stderr_text()
