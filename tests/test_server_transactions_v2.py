"""Transaction version 2 (KIP-890 part 2) end to end, issue 17: the broker finalizes
``transaction.version`` 2 in ApiVersions; Produce v12 and TxnOffsetCommit v5 add partitions
to the transaction themselves; EndTxn v5 bumps the epoch at every commit and abort and
answers the producer id and epoch to go on with; a retried EndTxn (the old epoch) is
recognised, also after a restart (the state is logged as TransactionLogValue v1 with its
ClientTransactionVersion tag); a zombie at an older epoch is fenced; a timed-out TV2
transaction is aborted two epochs up. Our producer negotiates TV2 when the broker finalizes
it and stays on the KIP-98 requests when it does not. And the coordinator answers an EndTxn
whose markers cannot be written (a log directory offline) once its outcome is logged, and
completes it later (Kafka's marker channel)."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import pytest

from broker.client.producer import KafkaProducer
from broker.protocol import ApiKey, ErrorCode
from broker.record.batch import iter_batch_headers
from tests.support.broker import RawClient
from tests.support.txn_protocol import (
    RawTxn,
    committed_offset,
    committed_values,
    create_topic,
    data_values,
    describe,
    fetch_partition,
)
from tests.test_server_transactions_clients import consume_all


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def marker_epochs(client, topic: str, partition: int = 0) -> list[int]:
    records = bytes(fetch_partition(client, topic, partition, isolation=0).records or b"")
    return [h.producer_epoch for _pos, h in iter_batch_headers(records) if h.is_control]


def end_txn_v5(client, txn: RawTxn, commit: bool, epoch: int):
    """A raw EndTxn v5 (the answer, without updating ``txn``)."""
    return client.request(ApiKey.END_TXN, 5, {"transactional_id": txn.transactional_id,
                                              "producer_id": txn.producer_id, "producer_epoch": epoch,
                                              "committed": commit})


def test_produce_v12_adds_partitions_and_end_txn_v5_bumps_the_epoch(raw_client):
    c = raw_client()
    topic = unique("tv2")
    create_topic(c, topic, partitions=2)
    txn = RawTxn(c, unique("tid"))
    assert txn.init() == 0 and txn.epoch == 0
    pid = txn.producer_id
    # no AddPartitionsToTxn: Produce v12 adds the partition and starts the transaction
    assert txn.produce(topic, 0, [b"a", b"b"], version=12) == 0
    assert txn.produce(topic, 1, [b"c"], version=12) == 0
    d = describe(c, txn.transactional_id)
    assert (d.transaction_state, sorted((t.topic, sorted(t.partitions)) for t in d.topics)) == \
        ("Ongoing", [(topic, [0, 1])])
    # Produce v11 and below keep the KIP-98 rule: the partition must have been added
    other = RawTxn(c, unique("tid"))
    assert other.init() == 0
    assert other.produce(topic, 0, [b"v11"], version=11) == ErrorCode.INVALID_TXN_STATE
    assert txn.end_v5(commit=True) == 0
    assert (txn.producer_id, txn.epoch) == (pid, 1)  # bumped by the commit
    assert describe(c, txn.transactional_id).transaction_state == "CompleteCommit"
    assert describe(c, txn.transactional_id).producer_epoch == 1
    # a retry of that EndTxn (the answer was lost: the producer still has epoch 0)
    retry = end_txn_v5(c, txn, True, 0)
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (0, pid, 1)
    assert end_txn_v5(c, txn, False, 0).error_code == ErrorCode.INVALID_TXN_STATE  # abort after commit
    # the next transaction: epoch 1, sequences from 0 again
    assert txn.produce(topic, 0, [b"x"], version=12) == 0
    # a zombie still at epoch 0 is refused
    assert txn.produce(topic, 1, [b"zombie"], epoch=0, version=12) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert txn.end_v5(commit=False) == 0 and txn.epoch == 2
    assert end_txn_v5(c, txn, True, 0).error_code == ErrorCode.PRODUCER_FENCED  # two epochs behind
    assert committed_values(fetch_partition(c, topic, 0)) == [b"a", b"b"]
    assert committed_values(fetch_partition(c, topic, 1)) == [b"c"]
    # the markers carry the bumped epochs: commit at 1, abort at 2
    assert marker_epochs(c, topic, 0) == [1, 2]
    assert marker_epochs(c, topic, 1) == [1]


def test_txn_offset_commit_v5_adds_the_group_itself(raw_client):
    c = raw_client()
    topic, group = unique("tv2-offsets"), unique("g")
    create_topic(c, topic)
    txn = RawTxn(c, unique("tid"))
    assert txn.init() == 0
    assert txn.produce(topic, 0, [b"v"], version=12) == 0
    # v3 needs AddOffsetsToTxn first; v5 adds the group's __consumer_offsets partition itself
    assert txn.txn_offset_commit(group, topic, 0, 7, version=3) == ErrorCode.INVALID_TXN_STATE
    assert txn.txn_offset_commit(group, topic, 0, 7, version=5) == 0
    assert committed_offset(c, group, topic) == -1
    assert txn.end_v5(commit=True) == 0
    assert committed_offset(c, group, topic) == 7
    # an aborted transaction's offsets never appear
    assert txn.txn_offset_commit(group, topic, 0, 9, version=5) == 0
    assert txn.end_v5(commit=False) == 0
    assert committed_offset(c, group, topic) == 7


def test_a_retried_end_txn_is_recognised_after_a_restart(broker_factory):
    b = broker_factory({"transaction.state.log.num.partitions": "1"})
    topic, tid = unique("tv2-restart"), unique("tid")
    with RawClient(b.host, b.port) as c:
        create_topic(c, topic)
        txn = RawTxn(c, tid)
        assert txn.init() == 0
        assert txn.produce(topic, 0, [b"kept"], version=12) == 0
        assert txn.end_v5(commit=True) == 0 and txn.epoch == 1
        pid = txn.producer_id
    b.stop()
    b.start()
    with RawClient(b.host, b.port) as c:
        d = describe(c, tid)
        assert (d.transaction_state, d.producer_epoch) == ("CompleteCommit", 1)
        # the logged state kept the client's transaction version: epoch 0 + 1 is a retry
        retry = end_txn_v5(c, txn, True, 0)
        assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (0, pid, 1)
        txn.c = c
        assert txn.produce(topic, 0, [b"after"], version=12) == 0
        assert txn.end_v5(commit=True) == 0 and txn.epoch == 2
        assert data_values(fetch_partition(c, topic).records) == [b"kept", b"after"]


def test_a_timed_out_tv2_transaction_is_aborted_two_epochs_up(broker_factory):
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    topic = unique("tv2-timeout")
    with RawClient(b.host, b.port) as c:
        create_topic(c, topic)
        txn = RawTxn(c, unique("tid"), timeout_ms=500)
        assert txn.init() == 0
        assert txn.produce(topic, 0, [b"first"], version=12) == 0
        assert txn.end_v5(commit=True) == 0 and txn.epoch == 1
        assert txn.produce(topic, 0, [b"abandoned"], version=12) == 0
        deadline = time.monotonic() + 30
        while describe(c, txn.transactional_id).transaction_state != "CompleteAbort":
            assert time.monotonic() < deadline, describe(c, txn.transactional_id)
            time.sleep(0.1)
        # epoch 1 + 1 would be a retry of the producer's own EndTxn: the fence is 1 + 2
        assert describe(c, txn.transactional_id).producer_epoch == 3
        assert txn.end_v5(commit=True) == ErrorCode.PRODUCER_FENCED
        assert txn.produce(topic, 0, [b"late"], version=12) == ErrorCode.INVALID_PRODUCER_EPOCH
        assert committed_values(fetch_partition(c, topic)) == [b"first"]
        assert fetch_partition(c, topic).last_stable_offset == fetch_partition(c, topic).high_watermark


def test_our_producer_uses_transaction_version_2(kafka_broker):
    topic, group, tid = unique("own-tv2"), unique("g"), unique("tid")
    client_id = unique("tv2-producer")
    with RawClient(kafka_broker.host, kafka_broker.port) as raw:
        create_topic(raw, topic, partitions=2)
        with KafkaProducer({"bootstrap.servers": kafka_broker.bootstrap, "transactional.id": tid,
                            "client.id": client_id, "linger.ms": 5}) as p:
            p.init_transactions(30)
            epochs = [p.transaction_manager.producer_epoch]
            for n in range(3):
                p.begin_transaction()
                for i in range(10):
                    p.send(topic, b"t%d-%d" % (n, i), partition=i % 2)
                p.send_offsets_to_transaction({(topic, 0): 100 + n}, group, 30)
                if n == 1:
                    p.abort_transaction(30)
                else:
                    p.commit_transaction(30)
                epochs.append(p.transaction_manager.producer_epoch)
            assert p.transaction_manager.transaction_v2
        assert epochs == [0, 1, 2, 3]  # one bump per commit or abort, no InitProducerId in between
        assert committed_offset(raw, group, topic) == 102
    used = kafka_broker.api_versions_used(client_id)
    assert used["PRODUCE"] == {12} and used["END_TXN"] == {5} and used["TXN_OFFSET_COMMIT"] == {5}, used
    assert "ADD_PARTITIONS_TO_TXN" not in used and "ADD_OFFSETS_TO_TXN" not in used, used
    assert used["INIT_PRODUCER_ID"] == {4}
    # a real read_committed consumer sees the committed transactions only
    got = sorted(consume_all(kafka_broker.bootstrap, topic, 2, "read_committed"))
    assert got == sorted(b"t%d-%d" % (n, i) for n in (0, 2) for i in range(10))


def test_our_producer_stays_on_kip98_requests_below_transaction_version_2(broker_factory):
    b = broker_factory({"kafkalog.feature.transaction.version": "1"})
    topic, group, tid = unique("own-tv1"), unique("g"), unique("tid")
    client_id = unique("tv1-producer")
    with RawClient(b.host, b.port) as raw:
        create_topic(raw, topic)
        versions = raw.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert [(f.name, f.max_version_level) for f in versions.finalized_features
                if f.name == "transaction.version"] == [("transaction.version", 1)]
        with KafkaProducer({"bootstrap.servers": b.bootstrap, "transactional.id": tid,
                            "client.id": client_id}) as p:
            p.init_transactions(30)
            for n in range(2):
                p.begin_transaction()
                p.send(topic, b"v%d" % n, partition=0)
                p.send_offsets_to_transaction({(topic, 0): n + 1}, group, 30)
                p.commit_transaction(30)
            assert not p.transaction_manager.transaction_v2
            assert p.transaction_manager.producer_epoch == 0  # KIP-98: no bump per transaction
        assert committed_offset(raw, group, topic) == 2
        assert data_values(fetch_partition(raw, topic).records) == [b"v0", b"v1"]
    used = b.api_versions_used(client_id)
    assert used["PRODUCE"] == {11} and used["END_TXN"] == {3} and used["TXN_OFFSET_COMMIT"] == {3}, used
    assert used["ADD_PARTITIONS_TO_TXN"] == {3} and used["ADD_OFFSETS_TO_TXN"] == {3}, used


def _chattr(flag: str, path) -> subprocess.CompletedProcess:
    return subprocess.run(["chattr", "-R", flag, str(path)], capture_output=True, text=True, check=False)


def test_end_txn_is_answered_once_decided_and_markers_complete_later(broker_factory, tmp_path):
    """The data partition's log dir goes offline between the produce and the commit: the
    PrepareCommit is logged (the transaction log is in the other dir), EndTxn answers NONE,
    the next transaction waits (CONCURRENT_TRANSACTIONS), and the commit is completed when
    the directory is back (at the restart)."""
    if shutil.which("chattr") is None or _chattr("+i", tmp_path).returncode != 0:
        pytest.skip("chattr +i is refused here (needs CAP_LINUX_IMMUTABLE)")
    _chattr("-i", tmp_path)
    dir_a, dir_b = tmp_path / "a", tmp_path / "b"
    b = broker_factory({"log.dirs": f"{dir_a},{dir_b}", "transaction.state.log.num.partitions": "1",
                        "offsets.topic.num.partitions": "1", "kafkalog.transaction.marker.retry.interval.ms": "200"})
    topic, tid = unique("tv2-offline"), unique("tid")
    try:
        with RawClient(b.host, b.port) as c:
            txn = RawTxn(c, tid)
            assert txn.init() == 0  # creates __transaction_state-0 in a (the emptier dir first)
            create_topic(c, topic)  # then the data partition in b
            assert (dir_b / f"{topic}-0").is_dir() and (dir_a / "__transaction_state-0").is_dir()
            assert txn.produce(topic, 0, [b"decided"], version=12) == 0
            _chattr("+i", dir_b)
            assert txn.end_v5(commit=True) == 0  # decided: answered although no marker is written
            assert describe(c, tid).transaction_state == "PrepareCommit"
            assert txn.produce(topic, 0, [b"next"], version=12) == ErrorCode.NOT_ENOUGH_REPLICAS  # retriable
            assert txn.end_v5(commit=True, epoch=0) == ErrorCode.CONCURRENT_TRANSACTIONS  # its retry waits
        assert "writing the markers of transaction" in b.stderr_text()
    finally:
        _chattr("-i", dir_b)
    b.stop()
    b.start()
    with RawClient(b.host, b.port) as c:
        assert describe(c, tid).transaction_state == "CompleteCommit"
        assert data_values(fetch_partition(c, topic).records) == [b"decided"]


def _log_state_offline(log_dir, md) -> None:
    """Append ``md`` to ``__transaction_state-0`` of a stopped broker's log dir, as the
    coordinator would have logged it (to reach an exhausted epoch without 32k commits)."""
    from broker.log.config import LogConfig
    from broker.log.manager import LogManager
    from broker.log.scheduler import Scheduler
    from broker.log.validator import AppendOrigin
    from broker.record.batch import encode_batch
    from broker.server.txn import log as txn_log

    manager = LogManager([log_dir], LogConfig.from_props({}), scheduler=Scheduler(), initial_task_delay_ms=0)
    manager.startup()
    try:
        lg = manager.get_log("__transaction_state", 0)
        lg.append_as_leader(encode_batch([(txn_log.encode_key(md.transactional_id), txn_log.encode_value(md),
                                           int(time.time() * 1000))]), origin=AppendOrigin.COORDINATOR)
    finally:
        manager.shutdown()


def test_an_exhausted_epoch_moves_to_a_new_producer_id_after_the_markers(broker_factory):
    from broker.server.txn.state import TransactionMetadata, TransactionState

    b = broker_factory({"transaction.state.log.num.partitions": "1"})
    topic, tid = unique("tv2-overflow"), unique("tid")
    with RawClient(b.host, b.port) as c:
        create_topic(c, topic)
        txn = RawTxn(c, tid)
        assert txn.init() == 0
        pid = txn.producer_id
    b.stop()
    now = int(time.time() * 1000)
    _log_state_offline(b.log_dir, TransactionMetadata(tid, pid, 32765, 60000, TransactionState.COMPLETE_COMMIT,
                                                      txn_start_timestamp=now, txn_last_update_timestamp=now,
                                                      client_transaction_version=2))
    b.start()
    with RawClient(b.host, b.port) as c:
        txn.c, txn.epoch = c, 32765
        assert txn.produce(topic, 0, [b"e32765"], version=12) == 0
        assert txn.end_v5(commit=True) == 0 and (txn.producer_id, txn.epoch) == (pid, 32766)
        assert txn.produce(topic, 0, [b"e32766"], version=12) == 0
        # the bump would reach 32767 (kept for fencing): the markers carry it, then a new id
        assert txn.end_v5(commit=True) == 0
        new_pid = txn.producer_id
        assert new_pid != pid and txn.epoch == 0
        d = describe(c, tid)
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("CompleteCommit", new_pid, 0)
        assert marker_epochs(c, topic)[-1] == 32767
        # the retry of that EndTxn names the old id at 32766: recognised, answered with the new one
        retry = c.request(ApiKey.END_TXN, 5, {"transactional_id": tid, "producer_id": pid,
                                              "producer_epoch": 32766, "committed": True})
        assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (0, new_pid, 0)
        assert txn.produce(topic, 0, [b"new-id"], version=12) == 0
        assert txn.end_v5(commit=True) == 0 and (txn.producer_id, txn.epoch) == (new_pid, 1)
        assert committed_values(fetch_partition(c, topic)) == [b"e32765", b"e32766", b"new-id"]


def test_add_partitions_to_txn_v4_v5_verify_and_add_for_several_transactions(raw_client):
    """KIP-890 part 1's verification path (the batched, broker-to-broker AddPartitionsToTxn):
    verify_only answers which partitions are in each Ongoing transaction; without it the
    partitions are added (the implicit add of transaction version 2)."""
    c = raw_client()
    topic = unique("verify")
    create_topic(c, topic, partitions=3)
    t1, t2 = RawTxn(c, unique("tid")), RawTxn(c, unique("tid"))
    assert t1.init() == 0 and t2.init() == 0
    assert t1.add(topic, 0) == 0

    def batched(version: int, verify: bool, *txns_parts):
        r = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, {"transactions": [
            {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "producer_epoch": epoch,
             "verify_only": verify, "topics": [{"name": topic, "partitions": parts}]}
            for t, epoch, parts in txns_parts]})
        assert r.error_code == 0, r
        return {res.transactional_id: {p.partition_index: p.partition_error_code
                                       for tr in res.topic_results for p in tr.results_by_partition}
                for res in r.results_by_transaction}

    got = batched(4, True, (t1, t1.epoch, [0, 1]), (t2, t2.epoch, [2]))
    assert got == {t1.transactional_id: {0: 0, 1: ErrorCode.INVALID_TXN_STATE},
                   t2.transactional_id: {2: ErrorCode.INVALID_TXN_STATE}}
    assert batched(5, True, (t1, t1.epoch, [1]))[t1.transactional_id] == {1: ErrorCode.TRANSACTION_ABORTABLE}
    assert batched(5, True, (t1, t1.epoch + 1, [0]))[t1.transactional_id] == {0: ErrorCode.PRODUCER_FENCED}
    # not verify_only: added, and t2's transaction starts
    assert batched(5, False, (t1, t1.epoch, [1]), (t2, t2.epoch, [2])) == {
        t1.transactional_id: {1: 0}, t2.transactional_id: {2: 0}}
    assert batched(4, True, (t1, t1.epoch, [0, 1]), (t2, t2.epoch, [2])) == {
        t1.transactional_id: {0: 0, 1: 0}, t2.transactional_id: {2: 0}}
    assert describe(c, t2.transactional_id).transaction_state == "Ongoing"
    assert t1.end(commit=False) == 0 and t2.end(commit=False) == 0
