"""Real transactional clients against the broker (one shared broker subprocess):
confluent-kafka (librdkafka), kafka-python and aiokafka producers commit and abort;
read_committed consumers (confluent-kafka, kafka-python) see only committed records,
read_uncommitted ones everything; consume-transform-produce with
send_offsets_to_transaction commits the group's offsets with the transaction; a second
producer with the same transactional.id fences the first."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_topic(bootstrap: str, partitions: int = 1) -> str:
    name = unique("txn")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def consume_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value up to the end of each partition (partition EOF) at ``isolation``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "auto.offset.reset": "earliest",
                  "isolation.level": isolation, "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        eof: set[int] = set()
        deadline = time.monotonic() + 60
        while len(eof) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
                continue
            values.append(m.value())
        assert len(eof) == partitions, "did not reach the end of every partition"
        return sorted(values)
    finally:
        c.close()


def txn_producer(bootstrap: str, transactional_id: str, **extra) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **extra})


def test_confluent_commit_and_abort(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    topic = make_topic(bootstrap, 2)
    p = txn_producer(bootstrap, unique("tid"))
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, value=b"committed-%d" % i, partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"aborted-%d" % i, partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"last", partition=0)
    p.commit_transaction(30)
    committed = sorted([b"committed-%d" % i for i in range(6)] + [b"last"])
    assert consume_all(bootstrap, topic, 2, "read_committed") == committed
    assert consume_all(bootstrap, topic, 2, "read_uncommitted") == sorted(
        committed + [b"aborted-%d" % i for i in range(4)])


def test_confluent_consume_transform_produce_with_send_offsets(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    source, sink = make_topic(bootstrap), make_topic(bootstrap)
    feeder = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        feeder.produce(source, value=b"%d" % i)
    feeder.flush(30)
    group = unique("ctp")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    producer = txn_producer(bootstrap, unique("tid"))
    producer.init_transactions(30)
    try:
        consumer.subscribe([source])
        seen: list = []
        deadline = time.monotonic() + 60
        while len(seen) < 10 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                seen.append(m)
        assert len(seen) == 10
        # first attempt aborted: neither the output nor the offsets stay
        producer.begin_transaction()
        for m in seen[:5]:
            producer.produce(sink, value=b"x" + m.value())
        producer.send_offsets_to_transaction([TopicPartition(source, 0, seen[4].offset() + 1)],
                                             consumer.consumer_group_metadata(), 30)
        producer.abort_transaction(30)
        assert consumer.committed([TopicPartition(source, 0)], 30)[0].offset < 0
        producer.begin_transaction()
        for m in seen:
            producer.produce(sink, value=b"x" + m.value())
        producer.send_offsets_to_transaction([TopicPartition(source, 0, seen[-1].offset() + 1)],
                                             consumer.consumer_group_metadata(), 30)
        assert consumer.committed([TopicPartition(source, 0)], 30)[0].offset < 0  # not before the commit
        producer.commit_transaction(30)
        assert consumer.committed([TopicPartition(source, 0)], 30)[0].offset == 10
    finally:
        consumer.close()
    assert consume_all(bootstrap, sink, 1, "read_committed") == sorted(b"x%d" % i for i in range(10))


def test_confluent_second_producer_fences_the_first(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    topic = make_topic(bootstrap)
    tid = unique("tid")
    zombie = txn_producer(bootstrap, tid)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    zombie.flush(30)
    successor = txn_producer(bootstrap, tid)
    successor.init_transactions(30)  # aborts the zombie's open transaction
    successor.begin_transaction()
    successor.produce(topic, value=b"successor")
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(30)
    err = info.value.args[0]
    assert err.fatal() and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                          KafkaError.INVALID_PRODUCER_EPOCH), err
    assert consume_all(bootstrap, topic, 1, "read_committed") == [b"successor"]
    assert consume_all(bootstrap, topic, 1, "read_uncommitted") == [b"successor", b"zombie"]


def test_kafka_python_transactional_producer_and_read_committed_consumer(kafka_broker):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition as KTopicPartition

    bootstrap = kafka_broker.bootstrap
    topic = make_topic(bootstrap)
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique("kp-tid"))
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(3):
            p.send(topic, b"kp-committed-%d" % i, partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"kp-aborted", partition=0)
        p.flush()
        p.abort_transaction()
    finally:
        p.close()
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                      consumer_timeout_ms=3000)
    try:
        tp = KTopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = sorted(m.value for m in c)
    finally:
        c.close()
    assert got == [b"kp-committed-%d" % i for i in range(3)]
    assert consume_all(bootstrap, topic, 1, "read_uncommitted") == sorted(
        [b"kp-committed-%d" % i for i in range(3)] + [b"kp-aborted"])


def test_aiokafka_transactional_producer(kafka_broker):
    from aiokafka import AIOKafkaProducer

    bootstrap = kafka_broker.bootstrap
    topic = make_topic(bootstrap)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique("aio-tid"))
        await p.start()
        try:
            async with p.transaction():
                for i in range(3):
                    await p.send(topic, b"aio-%d" % i, partition=0)
            await p.begin_transaction()
            await p.send(topic, b"aio-aborted", partition=0)
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(run())
    assert consume_all(bootstrap, topic, 1, "read_committed") == [b"aio-0", b"aio-1", b"aio-2"]
