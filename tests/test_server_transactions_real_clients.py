"""Issue 17's proof with aiokafka and confluent-kafka transactional producers beyond commit
and abort (``test_server_transactions_clients.py``): aiokafka's consume-transform-produce
with ``send_offsets_to_transaction``, a zombie fenced by a second instance, a transaction
left open past its ``transaction_timeout_ms`` (aborted by the coordinator, the last stable
offset moves on, the producer is fenced), and a broker restart in the middle of a
transaction; confluent-kafka's producer past its timeout too. Read back with
confluent-kafka's read_committed consumer."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import KafkaException, Producer

from tests.support.broker import RawClient
from tests.support.txn_protocol import committed_offset, create_topic, describe, fetch_partition
from tests.support.waits import wait_until
from tests.test_server_transactions_clients import consume_all


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _produce_plain(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0


def _wait_for(condition, what: str, timeout: float = 30) -> None:
    wait_until(condition, timeout, f"timed out waiting for {what}", interval=0.1)


def test_aiokafka_consume_transform_produce_with_send_offsets(kafka_broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    bootstrap = kafka_broker.bootstrap
    source, sink, group = unique("aio-in"), unique("aio-out"), unique("aio-g")
    with RawClient(kafka_broker.host, kafka_broker.port) as raw:
        create_topic(raw, source)
        create_topic(raw, sink)
    _produce_plain(bootstrap, source, [b"v%d" % i for i in range(6)])

    async def run() -> None:
        consumer = AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=group,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    isolation_level="read_committed")
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique("aio-ctp"))
        await consumer.start()
        await producer.start()
        try:
            done = 0
            while done < 6:
                batch = await consumer.getmany(timeout_ms=1000, max_records=3)
                for tp, messages in batch.items():
                    async with producer.transaction():
                        for m in messages:
                            await producer.send(sink, m.value.upper(), partition=0)
                        await producer.send_offsets_to_transaction(
                            {TopicPartition(tp.topic, tp.partition): messages[-1].offset + 1}, group)
                    done += len(messages)
            # one more transaction, aborted: neither its records nor its offsets count
            await producer.begin_transaction()
            await producer.send(sink, b"ABORTED", partition=0)
            await producer.send_offsets_to_transaction({TopicPartition(source, 0): 1}, group)
            await producer.abort_transaction()
        finally:
            await producer.stop()
            await consumer.stop()

    asyncio.run(run())
    assert consume_all(bootstrap, sink, 1, "read_committed") == sorted(b"V%d" % i for i in range(6))
    with RawClient(kafka_broker.host, kafka_broker.port) as raw:
        assert committed_offset(raw, group, source) == 6


def test_aiokafka_zombie_is_fenced_by_a_second_instance(kafka_broker):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AioKafkaError

    bootstrap = kafka_broker.bootstrap
    topic, tid = unique("aio-fence"), unique("aio-tid")
    with RawClient(kafka_broker.host, kafka_broker.port) as raw:
        create_topic(raw, topic)

    async def run() -> type:
        zombie = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
        await zombie.start()
        await zombie.begin_transaction()
        await zombie.send_and_wait(topic, b"zombie", partition=0)
        successor = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
        await successor.start()  # InitProducerId: bumps the epoch, aborts the zombie's transaction
        try:
            async with successor.transaction():
                await successor.send(topic, b"successor", partition=0)
            with pytest.raises(AioKafkaError) as fenced:
                await zombie.commit_transaction()
            return type(fenced.value)
        finally:
            await successor.stop()
            try:
                await zombie.stop()
            except AioKafkaError:
                pass

    error = asyncio.run(run())
    assert "Fenced" in error.__name__ or "Epoch" in error.__name__, error
    assert consume_all(bootstrap, topic, 1, "read_committed") == [b"successor"]


def test_aiokafka_transaction_past_its_timeout_is_aborted_and_the_lso_moves_on(broker_factory):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AioKafkaError

    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    topic, tid = unique("aio-timeout"), unique("aio-tid")
    with RawClient(b.host, b.port) as raw:
        create_topic(raw, topic)

        async def run() -> None:
            p = AIOKafkaProducer(bootstrap_servers=b.bootstrap, transactional_id=tid, transaction_timeout_ms=1000)
            await p.start()
            try:
                await p.begin_transaction()
                await p.send_and_wait(topic, b"abandoned", partition=0)
                assert fetch_partition(raw, topic).last_stable_offset == 0  # held back while open
                await asyncio.to_thread(_wait_for, lambda: describe(raw, tid).transaction_state == "CompleteAbort",
                                        "the coordinator's abort")
                with pytest.raises(AioKafkaError):
                    await p.commit_transaction()
            finally:
                try:
                    await p.stop()
                except AioKafkaError:
                    pass

        asyncio.run(run())
        part = fetch_partition(raw, topic)
        assert part.last_stable_offset == part.high_watermark == 2  # the record and the ABORT marker
    assert consume_all(b.bootstrap, topic, 1, "read_committed") == []


def test_aiokafka_commits_across_a_broker_restart(broker_factory):
    from aiokafka import AIOKafkaProducer

    b = broker_factory()
    b.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{b.port}"  # the same port after the restart
    topic = unique("aio-restart")
    with RawClient(b.host, b.port) as raw:
        create_topic(raw, topic)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=b.bootstrap, transactional_id=unique("aio-tid"),
                             request_timeout_ms=10000, retry_backoff_ms=200)
        await p.start()
        try:
            await p.begin_transaction()
            await p.send_and_wait(topic, b"before", partition=0)
            await asyncio.to_thread(b.stop)
            await asyncio.to_thread(b.start)
            await p.send_and_wait(topic, b"after", partition=0)
            await p.commit_transaction()
        finally:
            await p.stop()

    asyncio.run(run())
    assert consume_all(b.bootstrap, topic, 1, "read_committed") == [b"after", b"before"]


def test_confluent_transaction_past_its_timeout_is_aborted_and_a_new_instance_goes_on(broker_factory):
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    topic, tid = unique("ck-timeout"), unique("ck-tid")
    with RawClient(b.host, b.port) as raw:
        create_topic(raw, topic)
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid, "transaction.timeout.ms": 1000})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, b"abandoned", partition=0)
        assert p.flush(30) == 0
        _wait_for(lambda: describe(raw, tid).transaction_state == "CompleteAbort", "the coordinator's abort")
        part = fetch_partition(raw, topic)
        assert part.last_stable_offset == part.high_watermark == 2
        with pytest.raises(KafkaException):
            p.commit_transaction(30)  # fenced: the coordinator bumped the epoch
        successor = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid})
        successor.init_transactions(30)
        successor.begin_transaction()
        successor.produce(topic, b"next", partition=0)
        successor.commit_transaction(30)
    assert consume_all(b.bootstrap, topic, 1, "read_committed") == [b"next"]
