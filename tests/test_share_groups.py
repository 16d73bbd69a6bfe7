"""Share groups (KIP-932) from outside, with confluent-kafka's ``ShareConsumer``
(librdkafka 2.16) against the broker in a subprocess: two to four consumers sharing one
partition get disjoint deliveries that together are every record; RELEASE brings a record
back with a higher delivery count, REJECT never; an expired acquisition lock brings a
record back to another member and the late acknowledgement fails with
INVALID_RECORD_STATE; the delivery count limit archives a record; the state survives a
broker SIGKILL without redelivering an acknowledged record (RELIABILITY R: a crash loses
nothing acknowledged)."""

from __future__ import annotations

import random
import threading
import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from tests.support.history import History, check_share

pytestmark = pytest.mark.timeout(300)

BROKER = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.session.timeout.ms": "45000",
}


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory):
    from tests.support.broker import BrokerProcess

    broker = BrokerProcess(tmp_path_factory.mktemp("share-broker"), BROKER, name="share").start()
    yield broker
    broker.kill()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic(bootstrap: str, partitions: int = 1) -> str:
    name = _name("share")
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced until the result is in
    admin.create_topics([NewTopic(name, partitions)])[name].result(30)
    return name


def _group(bootstrap: str, **configs: str) -> str:
    """A new share group id with ``configs`` (dots for underscores) set on it, as
    kafka-configs.sh --entity-type groups does (GROUP config resource)."""
    group = _name("g")
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
               for k, v in {"share_auto_offset_reset": "earliest", **configs}.items()]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                  incremental_configs=entries)]).values():
        future.result(30)
    return group


def _produce(bootstrap: str, topic: str, n: int) -> None:
    # batches of 100: a share fetch acquires whole batches, so small ones are shared finely
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 100})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, key=b"%d" % i)
    assert p.flush(30) == 0


def _consumer(bootstrap: str, group: str, topic: str, explicit: bool = False) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit" if explicit else "implicit"})
    c.subscribe([topic])
    return c


def _poll(c: ShareConsumer, timeout: float = 1.0) -> list:
    out = []
    for m in c.poll(timeout):
        assert m.error() is None, m.error()
        out.append(m)
    return out


@pytest.mark.parametrize("members", [2, 4])
def test_members_share_one_partition_disjointly_and_completely(share_broker, members) -> None:
    bs = share_broker.bootstrap
    topic = _topic(bs)
    group = _group(bs)
    n = 10_000
    _produce(bs, topic, n)
    seen: list[list[tuple[int, int]]] = [[] for _ in range(members)]
    done = threading.Event()

    def run(i: int) -> None:
        c = _consumer(bs, group, topic)
        try:
            deadline = time.monotonic() + 120
            while not done.is_set() and time.monotonic() < deadline:
                for m in _poll(c, 0.5):
                    seen[i].append((m.offset(), m.delivery_count()))
                    time.sleep(0.0001 * (i + 1))  # scenario: members of different speeds
                if sum(len(s) for s in seen) >= n:
                    done.set()
            c.commit_sync()
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    offsets = [o for s in seen for o, _ in s]
    assert sorted(offsets) == list(range(n))  # every record once: disjoint and complete
    assert {c for s in seen for _, c in s} == {1}
    assert sum(1 for s in seen if s) >= 2  # the partition was really shared


def test_release_reject_accept_and_the_delivery_limit(share_broker) -> None:
    bs = share_broker.bootstrap
    topic = _topic(bs)
    group = _group(bs)
    _produce(bs, topic, 9)
    c = _consumer(bs, group, topic, explicit=True)
    try:
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < 9 and time.monotonic() < deadline:
            batch = _poll(c)
            for m in batch:
                kind = (AcknowledgeType.RELEASE, AcknowledgeType.REJECT, AcknowledgeType.ACCEPT)[m.offset() // 3]
                c.acknowledge(m, kind)
            got += batch
        assert sorted(m.offset() for m in got) == list(range(9))
        c.commit_sync()
        # RELEASEd 0-2 come back with delivery count 2; REJECTed 3-5 and ACCEPTed 6-8 never
        counts: dict[int, list[int]] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (len(counts) == 3 and all(len(v) >= 4 for v in counts.values())):
            for m in _poll(c):
                assert m.offset() in (0, 1, 2), m.offset()
                counts.setdefault(m.offset(), []).append(m.delivery_count())
                c.acknowledge(m, AcknowledgeType.RELEASE)
            c.commit_sync()
        # deliveries 2-5, then none: the 5th was the last (group.share.delivery.count.limit=5)
        assert counts == {o: [2, 3, 4, 5] for o in (0, 1, 2)}, counts
        end = time.monotonic() + 3
        while time.monotonic() < end:
            assert _poll(c, 0.5) == []
    finally:
        c.close()


def test_expired_lock_redelivers_and_the_late_acknowledgement_fails(share_broker) -> None:
    bs = share_broker.bootstrap
    topic = _topic(bs)
    group = _group(bs, share_record_lock_duration_ms="1500")
    _produce(bs, topic, 10)
    a = _consumer(bs, group, topic, explicit=True)
    b = _consumer(bs, group, topic, explicit=True)
    try:
        held: list = []
        deadline = time.monotonic() + 30
        while len(held) < 10 and time.monotonic() < deadline:
            held += _poll(a)
        assert sorted(m.offset() for m in held) == list(range(10))
        again: list = []
        deadline = time.monotonic() + 30
        while len(again) < 10 and time.monotonic() < deadline:  # a sits on them past the 1.5 s lock
            for m in _poll(b):
                again.append(m)
                b.acknowledge(m, AcknowledgeType.ACCEPT)
        assert sorted(m.offset() for m in again) == list(range(10))
        assert {m.delivery_count() for m in again} == {2}
        b.commit_sync()
        for m in held:
            a.acknowledge(m, AcknowledgeType.ACCEPT)
        results = a.commit_sync()  # {TopicPartition: None or KafkaException}
        codes = {tp.partition: (None if e is None else e.args[0].code()) for tp, e in results.items()}
        assert codes == {0: 121}, results  # INVALID_RECORD_STATE: a no longer holds them
    finally:
        a.close()
        b.close()


def test_state_survives_a_broker_sigkill(tmp_path) -> None:
    from tests.support.broker import BrokerProcess

    broker = BrokerProcess(tmp_path / "b", BROKER, name="share-kill").start()
    try:
        bs = broker.bootstrap
        topic = _topic(bs)
        group = _group(bs)
        n = 10_000
        _produce(bs, topic, n)
        first: list[int] = []
        c = _consumer(bs, group, topic)
        deadline = time.monotonic() + 60
        while len(first) < n // 2 and time.monotonic() < deadline:
            first += [m.offset() for m in _poll(c)]
        c.commit_sync()  # every record delivered so far is acknowledged (implicit mode)
        broker.kill()  # SIGKILL: no clean shutdown, the consumer never closes
        try:
            c.close()
        except KafkaException:
            pass
        broker.start()
        bs = broker.bootstrap
        rest: list[int] = []
        c2 = _consumer(bs, group, topic)
        try:
            deadline = time.monotonic() + 120
            while len(first) + len(rest) < n and time.monotonic() < deadline:
                rest += [m.offset() for m in _poll(c2)]
            end = time.monotonic() + 2
            while time.monotonic() < end:
                rest += [m.offset() for m in _poll(c2, 0.5)]
            c2.commit_sync()
        finally:
            c2.close()
        assert not set(first) & set(rest), "an acknowledged record was delivered again"
        assert sorted(first + rest) == list(range(n))
    finally:
        broker.kill()


def test_archived_records_go_to_the_dead_letter_topic(share_broker) -> None:
    """REJECTed records and records past the delivery limit are copied to the group's
    errors.deadletterqueue.topic.name, with the context headers (and the record itself
    with errors.deadletterqueue.copy.record.enable)."""
    from confluent_kafka import Consumer

    bs = share_broker.bootstrap
    topic = _topic(bs)
    dlq = "dlq." + topic
    group = _group(bs, share_delivery_count_limit="2", errors_deadletterqueue_topic_name=dlq,
                   errors_deadletterqueue_copy_record_enable="true")
    _produce(bs, topic, 4)
    c = _consumer(bs, group, topic, explicit=True)
    try:
        seen: dict[int, list[int]] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (len(seen) < 4 or any(len(seen.get(o, [])) < 2 for o in (2, 3))):
            for m in _poll(c):
                seen.setdefault(m.offset(), []).append(m.delivery_count())
                kind = {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.REJECT}.get(m.offset(), AcknowledgeType.RELEASE)
                c.acknowledge(m, kind)
            c.commit_sync()
        assert seen == {0: [1], 1: [1], 2: [1, 2], 3: [1, 2]}
    finally:
        c.close()
    reader = Consumer({"bootstrap.servers": bs, "group.id": _name("dlq"), "auto.offset.reset": "earliest"})
    try:
        reader.subscribe([dlq])
        letters = []
        deadline = time.monotonic() + 30
        while len(letters) < 3 and time.monotonic() < deadline:
            m = reader.poll(0.5)
            if m is not None and m.error() is None:
                letters.append(m)
        headers = [dict(m.headers()) for m in letters]
        assert sorted(int(h["__dlq.errors.offset"]) for h in headers) == [1, 2, 3]
        by_offset = {int(h["__dlq.errors.offset"]): (m, h) for m, h in zip(letters, headers, strict=True)}
        m, h = by_offset[1]
        assert h["__dlq.errors.disposition"] == b"REJECTED" and h["__dlq.errors.group.id"] == group.encode()
        assert h["__dlq.errors.topic"] == topic.encode() and h["__dlq.errors.delivery.count"] == b"1"
        assert (m.key(), m.value()) == (b"1", b"v1")  # copied
        m, h = by_offset[3]
        assert h["__dlq.errors.disposition"] == b"MAX_DELIVERY_ATTEMPTS_REACHED"
        assert h["__dlq.errors.delivery.count"] == b"2"
    finally:
        reader.close()


def test_random_acknowledgements_keep_the_share_model(share_broker) -> None:
    """Three members, two partitions, random ACCEPT / RELEASE / REJECT, recorded in a
    history and checked against the share-group model (RELIABILITY H, share model S1-S5:
    nothing acknowledged twice, nothing redelivered after its acknowledgement, delivery
    counts increasing up to the limit, everything delivered)."""
    bs = share_broker.bootstrap
    topic = _topic(bs, partitions=2)
    group = _group(bs, share_delivery_count_limit="3")
    history = History()
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.num.messages": 50, "enable.idempotence": True})
    for i in range(1500):
        value = history.value()
        op = history.send("producer", i % 2, value)
        p.produce(topic, value=value.encode(), partition=i % 2,
                  on_delivery=lambda err, msg, op=op: op.ok(msg.offset()) if err is None else op.info())
    assert p.flush(30) == 0
    stop = threading.Event()
    rng = random.Random(7)

    def run(name: str) -> None:
        c = _consumer(bs, group, topic, explicit=True)
        try:
            while not stop.is_set():
                batch = _poll(c, 0.3)
                history.deliver(name, [(m.partition(), m.offset(), m.value().decode(), m.delivery_count())
                                       for m in batch])
                acks: dict[int, list] = {}
                for m in batch:
                    kind = rng.choices(("accept", "release", "reject"), (6, 3, 1))[0]
                    c.acknowledge(m, {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE,
                                      "reject": AcknowledgeType.REJECT}[kind])
                    acks.setdefault(m.partition(), []).append((m.partition(), m.offset(), kind))
                if acks:
                    ops = {part: history.acknowledge(name, recs) for part, recs in acks.items()}
                    for tp, err in c.commit_sync().items():
                        op = ops.pop(tp.partition, None)
                        if op is not None:
                            (op.ok if err is None else op.fail)()
                    for op in ops.values():
                        op.fail()
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(f"c{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(1)  # scenario: let the members work until nothing is left to deliver
        report = check_share(history, limit=3, drained=True)
        if not report.anomalies["S4 not-delivered"]:
            break
    stop.set()
    for t in threads:
        t.join(60)
    report = check_share(history, limit=3, drained=True)
    assert report.valid, report.anomalies
    assert report.sends_ok == 1500 and report.values_polled == 1500
