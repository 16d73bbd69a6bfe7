"""Our producer's transactional API against a real broker subprocess: init / begin /
send / commit and abort (read back with confluent-kafka read_committed and
read_uncommitted consumers), send_offsets_to_transaction (the group's offsets appear with
the commit only), fencing by a second producer with the same transactional.id
(ProducerFencedError, fatal), an abortable failure (a record the broker refuses: commit
raises TransactionAbortableError, abort then works and the producer goes on), the state
rules (send outside a transaction, begin before init)."""

from __future__ import annotations

import uuid

import pytest

from broker.client.errors import (
    IllegalStateError,
    ProducerFencedError,
    RecordTooLargeError,
    TransactionAbortableError,
    TransactionAbortedError,
)
from broker.client.producer import KafkaProducer
from tests.support.broker import RawClient
from tests.support.txn_protocol import committed_offset, create_topic, describe
from tests.test_server_transactions_clients import consume_all


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def raw(kafka_broker):
    with RawClient(kafka_broker.host, kafka_broker.port) as c:
        yield c


def producer(kafka_broker, tid: str, **extra) -> KafkaProducer:
    return KafkaProducer({"bootstrap.servers": kafka_broker.bootstrap, "transactional.id": tid, **extra})


def test_commit_abort_and_offsets(kafka_broker, raw):
    topic = unique("own-txn")
    create_topic(raw, topic, partitions=2)
    group = unique("g")
    tid = unique("tid")
    with producer(kafka_broker, tid, linger_ms=5) as p:
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.begin_transaction()  # init_transactions() first
        p.init_transactions(30)
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.send(topic, b"outside", partition=0)
        p.begin_transaction()
        futures = [p.send(topic, b"c%d" % i, partition=i % 2) for i in range(6)]
        p.send(topic, b"sticky")  # partition chosen by the accumulator joins the transaction too
        p.send_offsets_to_transaction({(topic, 0): 11}, group, 30)
        assert committed_offset(raw, group, topic) == -1
        p.commit_transaction(30)
        assert all(f.get(10).offset >= 0 for f in futures)
        assert committed_offset(raw, group, topic) == 11
        assert describe(raw, tid).transaction_state == "CompleteCommit"
        p.begin_transaction()
        p.send(topic, b"aborted-sent", partition=0)
        p.flush(30)
        queued = p.send(topic, b"aborted-queued", partition=1)
        p.send_offsets_to_transaction({(topic, 0): 99}, group, 30)
        p.abort_transaction(30)
        # Still in the accumulator at the abort, it is dropped (TransactionAbortedError); sent
        # before it (linger.ms=5 can pass first on a loaded machine), it is in the log and
        # aborted by the marker. Either way it is never committed: read_committed below.
        try:
            queued.get(10)
        except TransactionAbortedError:
            pass
        assert committed_offset(raw, group, topic) == 11
        p.begin_transaction()
        p.send(topic, b"after", partition=1)
        p.commit_transaction(30)
    committed = sorted([b"c%d" % i for i in range(6)] + [b"sticky", b"after"])
    assert consume_all(kafka_broker.bootstrap, topic, 2, "read_committed") == committed
    assert b"aborted-sent" in consume_all(kafka_broker.bootstrap, topic, 2, "read_uncommitted")


def test_a_second_producer_fences_the_first(kafka_broker, raw):
    topic = unique("own-fence")
    create_topic(raw, topic)
    tid = unique("tid")
    with producer(kafka_broker, tid) as zombie, producer(kafka_broker, tid) as successor:
        zombie.init_transactions(30)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie", partition=0)
        zombie.flush(30)
        successor.init_transactions(30)
        successor.begin_transaction()
        successor.send(topic, b"successor", partition=0)
        successor.commit_transaction(30)
        with pytest.raises(ProducerFencedError):
            zombie.commit_transaction(30)
        with pytest.raises(ProducerFencedError):  # fatal: every later call says so
            zombie.begin_transaction()
        with pytest.raises(ProducerFencedError):
            zombie.send(topic, b"more", partition=0)
    assert consume_all(kafka_broker.bootstrap, topic, 1, "read_committed") == [b"successor"]


def test_an_abortable_error_then_abort_and_go_on(kafka_broker, raw):
    topic = unique("own-abortable")
    create_topic(raw, topic)
    with producer(kafka_broker, unique("tid"), max_request_size=2_000_000) as p:
        raw.request(*_max_message_bytes(topic, 1000))
        p.init_transactions(30)
        p.begin_transaction()
        p.send(topic, b"small", partition=0)
        p.flush(30)
        too_big = p.send(topic, b"x" * 5000, partition=0)  # alone over the topic's max.message.bytes
        with pytest.raises(RecordTooLargeError):
            too_big.get(30)
        with pytest.raises(TransactionAbortableError):
            p.commit_transaction(30)
        with pytest.raises(TransactionAbortableError):
            p.send(topic, b"refused", partition=0)
        p.abort_transaction(30)
        p.begin_transaction()  # the producer goes on (its epoch bumped after the failed batch)
        p.send(topic, b"next", partition=0)
        p.commit_transaction(30)
    assert consume_all(kafka_broker.bootstrap, topic, 1, "read_committed") == [b"next"]


def _max_message_bytes(topic: str, value: int):
    from broker.protocol import ApiKey

    return ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, {"resources": [{
        "resource_type": 2, "resource_name": topic,
        "configs": [{"name": "max.message.bytes", "config_operation": 0, "value": str(value)}]}],
        "validate_only": False}


def test_send_arrow_in_transactions(kafka_broker, raw):
    import pyarrow as pa

    topic = unique("own-arrow")
    create_topic(raw, topic, partitions=3)
    with producer(kafka_broker, unique("tid")) as p:
        p.init_transactions(30)
        with pytest.raises(IllegalStateError):
            p.send_arrow(topic, pa.array([b"outside"]))
        p.begin_transaction()
        done = p.send_arrow(topic, pa.array([b"a%d" % i for i in range(30)]),
                            partitions=pa.array([i % 3 for i in range(30)], pa.int32()))
        p.commit_transaction(30)
        assert done.result(10).records == 30
        p.begin_transaction()
        p.send_arrow(topic, pa.array([b"gone%d" % i for i in range(6)]),
                     partitions=pa.array([i % 3 for i in range(6)], pa.int32()))
        p.flush(30)
        p.abort_transaction(30)
    assert consume_all(kafka_broker.bootstrap, topic, 3, "read_committed") == sorted(b"a%d" % i for i in range(30))


def test_close_aborts_an_open_transaction(kafka_broker, raw):
    topic = unique("own-close")
    create_topic(raw, topic)
    tid = unique("tid")
    p = producer(kafka_broker, tid)
    p.init_transactions(30)
    p.begin_transaction()
    p.send(topic, b"sent", partition=0)
    p.flush(30)
    p.send(topic, b"queued", partition=0)  # sent or dropped: never committed
    p.close(30)
    assert describe(raw, tid).transaction_state == "CompleteAbort"
    assert consume_all(kafka_broker.bootstrap, topic, 1, "read_committed") == []
