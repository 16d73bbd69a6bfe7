"""Share groups under broker crashes (RELIABILITY R and H, with the share-group model of
the history checker): three confluent-kafka ``ShareConsumer`` members acknowledge two
partitions at random (ACCEPT / RELEASE / REJECT) while the broker is SIGKILLed and
restarted on the same port; after the drain the history must show no record accepted
twice, no record delivered after its acknowledgement was confirmed, delivery counts that
only grow up to the limit (they are written before the records leave the broker), and
every record delivered. ``make test`` kills the broker once, ``make soak``
(``KAFKALOG_SOAK=1``) five times."""

from __future__ import annotations

import os
import random
import threading
import time
import uuid

from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from tests.support.history import History, check_share
from tests.support.soak import soak_row
from tests.support.workload import free_port

KILLS = 5 if os.environ.get("KAFKALOG_SOAK") else 1
RECORDS = 3000 if os.environ.get("KAFKALOG_SOAK") else 1500
LIMIT = 4
KINDS = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE, "reject": AcknowledgeType.REJECT}


def test_share_group_survives_sigkills(broker_factory) -> None:
    port = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{port}",
                             "group.share.min.record.lock.duration.ms": "1000"})
    bs = broker.bootstrap
    topic, group = f"share-kill-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 2)])[topic].result(30)
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in (
        ("share.auto.offset.reset", "earliest"), ("share.delivery.count.limit", str(LIMIT)),
        ("share.record.lock.duration.ms", "5000"))]
    for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                             incremental_configs=entries)]).values():
        f.result(30)
    history = History()
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.num.messages": 50, "enable.idempotence": True})
    for i in range(RECORDS):
        value = history.value()
        op = history.send("producer", i % 2, value)
        p.produce(topic, value=value.encode(), partition=i % 2,
                  on_delivery=lambda err, msg, op=op: op.ok(msg.offset()) if err is None else op.info())
    assert p.flush(30) == 0
    stop, finishing = threading.Event(), threading.Event()
    rounds = [0, 0, 0]  # per member: poll-acknowledge rounds completed
    errors: list[BaseException] = []

    def run(index: int, seed: int) -> None:
        name = f"c{index}"
        rng = random.Random(seed)
        c = ShareConsumer({"bootstrap.servers": bs, "group.id": group, "share.acknowledgement.mode": "explicit"})
        c.subscribe([topic])
        try:
            while not stop.is_set():
                try:
                    batch = [m for m in c.poll(0.3) if m.error() is None]
                except KafkaException:
                    continue  # the broker is down: poll again
                history.deliver(name, [(m.partition(), m.offset(), m.value().decode(), m.delivery_count())
                                       for m in batch])
                acks: dict[int, list] = {}
                accept_all = finishing.is_set()
                for m in batch:
                    kind = "accept" if accept_all else rng.choices(("accept", "release", "reject"), (6, 3, 1))[0]
                    c.acknowledge(m, KINDS[kind])
                    acks.setdefault(m.partition(), []).append((m.partition(), m.offset(), kind))
                if not acks:
                    rounds[index] += 1
                    continue
                ops = {part: history.acknowledge(name, recs) for part, recs in acks.items()}
                try:
                    results = c.commit_sync(10)
                except KafkaException:
                    results = {}
                for tp, err in results.items():
                    op = ops.pop(tp.partition, None)
                    if op is not None:
                        (op.ok if err is None else op.fail)()
                for op in ops.values():
                    op.fail()  # unknown outcome counts as not confirmed: the model asks nothing of it
                rounds[index] += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(i, i)) for i in range(3)]
    for t in threads:
        t.start()
    delivered = 0
    for _ in range(KILLS):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # scenario: kill while records are being delivered
            delivered = sum(len(o.records) for o in history.snapshot() if o.kind == "deliver")
            if delivered >= (_ + 1) * RECORDS // (KILLS + 2):
                break
            time.sleep(0.05)
        broker.kill()
        broker.start()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        time.sleep(1)  # scenario: members drain what is left (released records come back)
        if not check_share(history, limit=LIMIT, drained=True, crashes=True).anomalies["S4 not-delivered"]:
            break
    # The members would go on releasing at random until they stop, and a record released in
    # their last round would never come back: from here they accept what they get, and they
    # stop once every round that began before this point has ended and every record
    # released meanwhile has come back.
    finishing.set()
    started = list(rounds)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if (all(now >= then + 2 for now, then in zip(rounds, started))
                and not check_share(history, limit=LIMIT, drained=True, crashes=True).anomalies["S4 not-delivered"]):
            break
    stop.set()
    for t in threads:
        t.join(60)
    assert not errors, errors
    report = check_share(history, limit=LIMIT, drained=True, crashes=True)
    soak_row("share group, random acks, broker SIGKILLs", 1, KILLS, report.sends_ok,
             sum(len(v) for v in report.anomalies.values()))
    assert report.valid, {k: v[:5] for k, v in report.anomalies.items() if v}
    assert report.sends_ok == RECORDS and report.values_polled == RECORDS
