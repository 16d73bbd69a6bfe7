"""AdminClient's transaction calls (broker/client/admin.py, admin_txn.py) against the shared
broker subprocess, with real transactional producers: a confluent-kafka producer that
commits, one that aborts, and ours left with an open transaction. ListTransactions (every
broker, state and producer id filters, duration filter), DescribeTransactions (through the
id's coordinator, TRANSACTIONAL_ID_NOT_FOUND for an unknown id), DescribeProducers (the
open transaction's start offset, none for the finished ones, UNKNOWN_TOPIC_OR_PARTITION),
and abort_transaction's WriteTxnMarkers ABORT closing a raw open transaction so that
read_committed reaches the high watermark."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from broker.client.admin import AdminClient, TransactionDescription, UnknownTopicOrPartitionError
from broker.client.consumer import offsets
from broker.client.consumer.offsets import TopicPartition
from broker.client.errors import KafkaError
from broker.client.producer import KafkaProducer
from broker.protocol import ErrorCode
from tests.support.txn_protocol import RawTxn, create_topic


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _confluent_txn(bootstrap: str, tid: str, topic: str, commit: bool) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"ck", partition=0)
    p.flush(30)
    (p.commit_transaction if commit else p.abort_transaction)(30)


def test_list_describe_and_describe_producers(kafka_broker, raw_client):
    topic = unique("admin-txn")
    create_topic(raw_client(), topic, 2)
    committed, aborted, open_tid = unique("ck-commit"), unique("ck-abort"), unique("ours-open")
    _confluent_txn(kafka_broker.bootstrap, committed, topic, commit=True)
    _confluent_txn(kafka_broker.bootstrap, aborted, topic, commit=False)
    ours = KafkaProducer({"bootstrap.servers": kafka_broker.bootstrap, "transactional.id": open_tid})
    try:
        ours.init_transactions()
        ours.begin_transaction()
        start = ours.send(topic, b"open", partition=0).get(30).offset
        with AdminClient(bootstrap_servers=kafka_broker.bootstrap) as admin:
            by_broker = admin.list_transactions_by_broker()
            assert list(by_broker) == [1]  # the broker's node id: the coordinator column
            mine = {t.transactional_id: t for t in by_broker[1] if t.transactional_id in (committed, aborted, open_tid)}
            assert {t: listing.state for t, listing in mine.items()} == {
                committed: "CompleteCommit", aborted: "CompleteAbort", open_tid: "Ongoing"}
            ongoing = {t.transactional_id for t in admin.list_transactions(states=["Ongoing"])}
            assert open_tid in ongoing and committed not in ongoing
            assert [t.transactional_id for t in admin.list_transactions(producer_ids=[mine[committed].producer_id])] \
                == [committed]
            # v1's duration filter: only transactions running longer than that
            assert open_tid not in {t.transactional_id for t in admin.list_transactions(duration_filter_ms=3_600_000)}

            described = admin.describe_transactions([open_tid, committed, "no-such-id"])
            d = described[open_tid].result()
            assert isinstance(d, TransactionDescription)
            assert (d.coordinator_id, d.state, d.producer_id, d.topic_partitions) == (
                1, "Ongoing", mine[open_tid].producer_id, (TopicPartition(topic, 0),))
            assert d.transaction_start_time_ms is not None and d.transaction_timeout_ms > 0
            done = described[committed].result()
            assert (done.state, done.topic_partitions) == ("CompleteCommit", ())
            with pytest.raises(KafkaError) as err:
                described["no-such-id"].result()
            assert err.value.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND

            states = admin.describe_producers([(topic, 0), (topic, 1), (topic, 9)])
            by_pid = {s.producer_id: s for s in states[(topic, 0)].result()}
            assert by_pid[mine[open_tid].producer_id].current_transaction_start_offset == start
            assert by_pid[mine[committed].producer_id].current_transaction_start_offset is None
            assert by_pid[mine[committed].producer_id].coordinator_epoch is not None  # a marker was written
            assert states[(topic, 1)].result() == []
            with pytest.raises(UnknownTopicOrPartitionError):
                states[(topic, 9)].result()
        ours.commit_transaction()
    finally:
        ours.close()


def test_abort_transaction_closes_an_open_transaction(kafka_broker, raw_client):
    c = raw_client()
    topic = unique("admin-abort")
    create_topic(c, topic)
    txn = RawTxn(c, unique("raw"))
    assert txn.init() == 0 and txn.add(topic) == 0 and txn.produce(topic, 0, [b"a", b"b"]) == 0
    tp = TopicPartition(topic, 0)
    with AdminClient(bootstrap_servers=kafka_broker.bootstrap) as admin:
        def latest(isolation: str) -> int:
            return admin.list_offsets({tp: offsets.LATEST}, isolation_level=isolation)[tp].offset

        assert (latest("read_committed"), latest("read_uncommitted")) == (0, 2)
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.abort_transaction(unique("missing"), 0, txn.producer_id, txn.epoch, 0)
        with pytest.raises(ValueError, match="producer epoch"):
            admin.abort_transaction(topic, 0, txn.producer_id, -1, 0)
        admin.abort_transaction(topic, 0, txn.producer_id, txn.epoch, -1)
        # a b ABORT: everything is stable
        assert latest("read_committed") == latest("read_uncommitted") == 3
        [state] = admin.describe_producers([tp])[tp].result()
        assert (state.producer_id, state.current_transaction_start_offset) == (txn.producer_id, None)
        assert admin.describe_producers([tp], broker_id=1)[tp].result() == [state]  # the replica on broker 1
        with pytest.raises(KafkaError) as err:
            admin.describe_producers([tp], broker_id=99)[tp].result()
        assert err.value.code == ErrorCode.BROKER_NOT_AVAILABLE and "broker 99 is not in the cluster" in str(err.value)
