"""The transaction coordinator across restarts and crashes (real broker subprocesses):
a crash at each step of ending a transaction (after the Prepare record, after the first
marker, before the Complete record; ``KAFKALOG_TXN_CRASH_POINT``, see
``broker/server/txn/markers.py``) converges at the next startup to the outcome that was
decided; an Ongoing transaction survives a clean restart and is then committed, also by
a confluent-kafka producer that reconnects; a transaction left open past its timeout is
aborted by the coordinator (the LSO moves on, the producer is fenced); an idle
transactional id expires."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from broker.protocol import ErrorCode
from tests.support.broker import RawClient
from tests.support.txn_protocol import (
    RawTxn,
    committed_offset,
    create_topic,
    data_values,
    describe,
    fetch_partition,
)
from tests.support.waits import wait_until

CRASH_ENV = "KAFKALOG_TXN_CRASH_POINT"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_for(predicate, what: str, timeout: float = 60.0):
    return wait_until(predicate, timeout, f"timed out waiting for {what}", interval=0.1)


@pytest.mark.parametrize("crash_point,commit", [
    ("after-prepare", True), ("after-first-marker", True), ("before-complete", True),
    ("after-first-marker", False)])
def test_a_crash_while_ending_converges_at_restart(broker_factory, monkeypatch, crash_point, commit):
    monkeypatch.setenv(CRASH_ENV, crash_point)
    b = broker_factory()
    topic, group = unique("txn-crash"), unique("g")
    with RawClient(b.host, b.port) as c:
        create_topic(c, topic, partitions=2)
        txn = RawTxn(c, unique("tid"))
        assert txn.init() == 0
        for p in (0, 1):
            assert txn.add(topic, p) == 0 and txn.produce(topic, p, [b"v%d" % p]) == 0
        assert txn.add_offsets(group) == 0 and txn.txn_offset_commit(group, topic, 0, 7) == 0
        c.send(*_end_txn_request(txn, commit))
        assert b.proc.wait(30) == 86, b.stderr_text()[-2000:]  # the crash hook's exit code
    assert f"{CRASH_ENV}={crash_point}" in b.stderr_text()
    monkeypatch.delenv(CRASH_ENV)
    b.start()
    with RawClient(b.host, b.port) as c:
        txn.c = c
        d = describe(c, txn.transactional_id)
        assert d.transaction_state == ("CompleteCommit" if commit else "CompleteAbort")
        for p in (0, 1):
            part = fetch_partition(c, topic, p)
            assert part.last_stable_offset == part.high_watermark  # every marker is there
            assert data_values(part.records) == [b"v%d" % p]
            assert bool(part.aborted_transactions) is not commit
        assert committed_offset(c, group, topic) == (7 if commit else -1)
        assert txn.end(commit) == 0  # the client's retry is answered as done
        assert txn.end(not commit) == ErrorCode.INVALID_TXN_STATE


def _end_txn_request(txn: RawTxn, commit: bool):
    from broker.protocol import ApiKey

    return ApiKey.END_TXN, 3, {"transactional_id": txn.transactional_id, "producer_id": txn.producer_id,
                               "producer_epoch": txn.epoch, "committed": commit}


def test_an_ongoing_transaction_survives_a_restart_and_commits(broker_factory):
    b = broker_factory()
    topic, group = unique("txn-restart"), unique("g")
    with RawClient(b.host, b.port) as c:
        create_topic(c, topic)
        txn = RawTxn(c, unique("tid"))
        assert txn.init() == 0 and txn.add(topic) == 0 and txn.produce(topic, 0, [b"before"]) == 0
        assert txn.add_offsets(group) == 0 and txn.txn_offset_commit(group, topic, 0, 3) == 0
    assert b.stop() == 0
    b.start()
    with RawClient(b.host, b.port) as c:
        txn.c = c
        assert describe(c, txn.transactional_id).transaction_state == "Ongoing"
        assert fetch_partition(c, topic).last_stable_offset == 0
        assert txn.produce(topic, 0, [b"after"]) == 0
        assert committed_offset(c, group, topic) == -1
        assert txn.end(commit=True) == 0
        part = fetch_partition(c, topic)
        assert data_values(part.records) == [b"before", b"after"] and part.last_stable_offset == 3
        assert committed_offset(c, group, topic) == 3  # read back from the log after the restart


def test_confluent_producer_commits_across_a_broker_restart(broker_factory):
    b = broker_factory()
    b.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{b.port}"  # the same port after the restart
    topic = unique("txn-restart-ck")
    with RawClient(b.host, b.port) as c:
        create_topic(c, topic)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": unique("tid")})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"one")
    p.flush(30)
    assert b.stop() == 0
    b.start()
    p.produce(topic, value=b"two")
    p.commit_transaction(60)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("r"), "isolation.level": "read_committed",
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        values = []
        while True:
            m = c.poll(30)
            assert m is not None, "no partition EOF"
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF
                break
            values.append(m.value())
    finally:
        c.close()
    assert values == [b"one", b"two"]


def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(broker_factory):
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    topic = unique("txn-timeout")
    with RawClient(b.host, b.port) as c:
        create_topic(c, topic)
        txn = RawTxn(c, unique("tid"), timeout_ms=300)
        assert txn.init() == 0 and txn.add(topic) == 0 and txn.produce(topic, 0, [b"late"]) == 0
        assert fetch_partition(c, topic).last_stable_offset == 0
        wait_for(lambda: describe(c, txn.transactional_id).transaction_state == "CompleteAbort",
                 "the coordinator to abort the transaction")
        part = fetch_partition(c, topic)
        assert (part.last_stable_offset, part.high_watermark) == (2, 2)
        assert [a.first_offset for a in part.aborted_transactions] == [0]
        assert describe(c, txn.transactional_id).producer_epoch == txn.epoch + 1
        assert txn.end(commit=True) == ErrorCode.PRODUCER_FENCED
        assert txn.produce(topic, 0, [b"zombie"]) == ErrorCode.INVALID_PRODUCER_EPOCH
        assert txn.init() == 0  # a new instance starts again


def test_an_idle_transactional_id_expires(broker_factory):
    b = broker_factory({"transactional.id.expiration.ms": "1",
                        "transaction.remove.expired.transaction.cleanup.interval.ms": "100"})
    with RawClient(b.host, b.port) as c:
        txn = RawTxn(c, unique("tid"))
        assert txn.init() == 0
        wait_for(lambda: describe(c, txn.transactional_id).error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
                 "the transactional id to expire")
        assert txn.end(commit=True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert b.stop() == 0
    b.start()
    with RawClient(b.host, b.port) as c:  # the tombstone keeps it gone
        assert describe(c, txn.transactional_id).error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
