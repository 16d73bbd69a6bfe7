"""The transaction coordinator through raw protocol requests (a real broker subprocess):
the codes of Kafka's TransactionCoordinator for each misuse, what DescribeTransactions /
ListTransactions show, markers, the LSO and the aborted list of read_committed fetches,
and TxnOffsetCommit offsets visible only once the transaction commits."""

from __future__ import annotations

import uuid

from broker.protocol import ApiKey, ErrorCode
from tests.support.txn_protocol import (
    RawTxn,
    committed_offset,
    create_topic,
    data_values,
    describe,
    fetch_partition,
)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_commit_then_abort_markers_lso_and_aborted_list(raw_client):
    c = raw_client()
    topic = unique("txn")
    create_topic(c, topic)
    txn = RawTxn(c, unique("tid"))
    assert txn.init() == 0 and txn.epoch == 0
    assert describe(c, txn.transactional_id).transaction_state == "Empty"
    assert txn.add(topic) == 0
    assert txn.produce(topic, 0, [b"a", b"b"]) == 0
    d = describe(c, txn.transactional_id)
    assert (d.transaction_state, [(t.topic, t.partitions) for t in d.topics]) == ("Ongoing", [(topic, [0])])
    open_fetch = fetch_partition(c, topic)
    assert open_fetch.last_stable_offset == 0 and data_values(open_fetch.records) == []
    assert txn.end(commit=True) == 0
    assert describe(c, txn.transactional_id).transaction_state == "CompleteCommit"
    assert txn.end(commit=True) == 0  # a retried EndTxn of a completed transaction
    assert txn.add(topic) == 0
    assert txn.produce(topic, 0, [b"x"]) == 0
    assert txn.end(commit=False) == 0
    p = fetch_partition(c, topic)
    # a(0) b(1) COMMIT(2) x(3) ABORT(4): everything is stable, x is in the aborted list
    assert (p.high_watermark, p.last_stable_offset) == (5, 5)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(txn.producer_id, 3)]
    assert data_values(p.records) == [b"a", b"b", b"x"]  # the consumer drops x with the aborted list


def test_error_codes_of_misuse(raw_client):
    c = raw_client()
    topic = unique("txn-err")
    create_topic(c, topic)
    txn = RawTxn(c, unique("tid"))
    assert txn.init(timeout_ms=0) == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert txn.init(timeout_ms=900001) == ErrorCode.INVALID_TRANSACTION_TIMEOUT  # transaction.max.timeout.ms
    unknown = RawTxn(c, unique("never-initialised"))
    assert unknown.add(topic) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert unknown.end(True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert txn.init() == 0
    assert txn.end(commit=True) == ErrorCode.INVALID_TXN_STATE  # nothing to commit
    # a transactional batch to a partition not added to the transaction
    assert txn.produce(topic, 0, [b"nope"]) == ErrorCode.INVALID_TXN_STATE
    assert txn.add(unique("no-such-topic")) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert txn.add("__consumer_offsets") in (ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert txn.add(topic) == 0
    assert txn.produce(topic, 0, [b"ok"]) == 0
    assert txn.end(commit=True, epoch=txn.epoch + 1) == ErrorCode.PRODUCER_FENCED
    assert txn.end(commit=True, epoch=txn.epoch + 1, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
    other = RawTxn(c, txn.transactional_id)
    other.producer_id, other.epoch = txn.producer_id + 1000, txn.epoch
    assert other.end(True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert txn.end(commit=False) == 0
    assert txn.end(commit=True) == ErrorCode.INVALID_TXN_STATE  # commit after abort
    assert txn.produce(topic, 0, [b"late"]) == ErrorCode.INVALID_TXN_STATE  # the transaction is over


def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction(raw_client):
    c = raw_client()
    topic = unique("txn-fence")
    create_topic(c, topic)
    tid = unique("tid")
    old = RawTxn(c, tid)
    assert old.init() == 0 and old.add(topic) == 0 and old.produce(topic, 0, [b"zombie"]) == 0
    new = RawTxn(c, tid)
    assert new.init() == 0
    assert new.producer_id == old.producer_id and new.epoch > old.epoch + 1  # fenced, then bumped
    p = fetch_partition(c, topic)
    assert p.last_stable_offset == p.high_watermark == 2  # zombie + its ABORT marker
    assert [a.first_offset for a in p.aborted_transactions] == [0]
    assert old.produce(topic, 0, [b"again"]) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert old.end(True) == ErrorCode.PRODUCER_FENCED
    assert old.add(topic, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH  # before KIP-588
    # KIP-360: the old instance naming its stale epoch is fenced; the new one may bump itself
    stale = c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                                   "producer_id": old.producer_id, "producer_epoch": old.epoch})
    assert stale.error_code == ErrorCode.PRODUCER_FENCED
    bump = c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                                  "producer_id": new.producer_id, "producer_epoch": new.epoch})
    assert (bump.error_code, bump.producer_epoch) == (0, new.epoch + 1)


def test_a_replaced_idle_instance_cannot_pass_its_epoch_bump_off_as_a_retry(raw_client):
    """KIP-360 and a new instance: the old instance (no transaction open) is replaced by an
    InitProducerId without producer id/epoch (epoch + 1); the old one then asks for its own
    epoch bump naming its epoch, which is now the previous one: PRODUCER_FENCED (Kafka
    clears the last epoch for a new instance), not the new instance's epoch (found by the
    transaction coordinator crash loop: librdkafka's zombie fenced the recovered producer)."""
    c = raw_client()
    tid = unique("tid")
    old = RawTxn(c, tid)
    assert old.init() == 0
    new = RawTxn(c, tid)
    assert new.init() == 0 and new.epoch == old.epoch + 1
    stale = c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                                   "producer_id": old.producer_id, "producer_epoch": old.epoch})
    assert (stale.error_code, stale.producer_id, stale.producer_epoch) == (ErrorCode.PRODUCER_FENCED, -1, -1)
    assert describe(c, tid).producer_epoch == new.epoch  # the new instance goes on
    # the new instance's own bump, retried, is still recognised as a retry
    bump = c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                                  "producer_id": new.producer_id, "producer_epoch": new.epoch})
    assert (bump.error_code, bump.producer_epoch) == (0, new.epoch + 1)
    again = c.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                                   "producer_id": new.producer_id, "producer_epoch": new.epoch})
    assert (again.error_code, again.producer_epoch) == (0, new.epoch + 1)


def test_txn_offset_commit_is_visible_only_after_commit(raw_client):
    c = raw_client()
    topic = unique("txn-offsets")
    create_topic(c, topic)
    group = unique("g")
    txn = RawTxn(c, unique("tid"))
    assert txn.init() == 0
    assert txn.txn_offset_commit(group, topic, 0, 5) == ErrorCode.INVALID_TXN_STATE  # AddOffsetsToTxn first
    assert txn.add_offsets(group) == 0
    assert txn.txn_offset_commit(group, topic, 0, 5) == 0
    assert committed_offset(c, group, topic) == -1
    assert txn.end(commit=True) == 0
    assert committed_offset(c, group, topic) == 5
    assert txn.add_offsets(group) == 0 and txn.txn_offset_commit(group, topic, 0, 9) == 0
    assert txn.end(commit=False) == 0
    assert committed_offset(c, group, topic) == 5


def test_describe_and_list_transactions(raw_client):
    c = raw_client()
    topic = unique("txn-list")
    create_topic(c, topic)
    ongoing, empty = RawTxn(c, unique("tid-a")), RawTxn(c, unique("tid-b"))
    assert ongoing.init() == 0 and empty.init() == 0
    assert ongoing.add(topic) == 0
    missing = describe(c, unique("nobody"))
    assert missing.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    r = c.request(ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [],
                                                "duration_filter": -1})
    listed = {t.transactional_id: t.transaction_state for t in r.transaction_states}
    assert listed.get(ongoing.transactional_id) == "Ongoing" and empty.transactional_id not in listed
    assert r.unknown_state_filters == ["Bogus"]
    r = c.request(ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": [empty.producer_id]})
    assert [(t.transactional_id, t.transaction_state) for t in r.transaction_states] == [
        (empty.transactional_id, "Empty")]
    assert ongoing.end(commit=False) == 0


def test_transaction_state_topic_is_internal_compacted_and_refuses_clients(raw_client):
    c = raw_client()
    txn = RawTxn(c, unique("tid"))
    assert txn.init() == 0  # creates __transaction_state
    md = c.request(ApiKey.METADATA, 8, {"topics": [{"name": "__transaction_state"}],
                                        "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
    t = md.topics[0]
    assert (t.error_code, t.is_internal, len(t.partitions)) == (0, True, 50)  # transaction.state.log.num.partitions
    cfg = c.request(ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": "__transaction_state", "configuration_keys": ["cleanup.policy"]}],
        "include_synonyms": False})
    assert [(e.name, e.value) for e in cfg.results[0].configs] == [("cleanup.policy", "compact")]
    from broker.record.batch import encode_batch

    r = c.request(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "__transaction_state", "partition_data": [{"index": 0, "records": encode_batch([(b"k", b"v", 0)])}]}]})
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_describe_producers_shows_the_open_transaction(raw_client):
    c = raw_client()
    topic = unique("txn-producers")
    create_topic(c, topic)
    txn = RawTxn(c, unique("tid"))
    assert txn.init() == 0 and txn.add(topic) == 0 and txn.produce(topic, 0, [b"a", b"b", b"c"]) == 0

    def producers(partition: int = 0):
        r = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [partition]}]})
        return r.topics[0].partitions[0]

    p = producers()
    assert p.error_code == 0
    assert [(s.producer_id, s.producer_epoch, s.last_sequence, s.current_txn_start_offset)
            for s in p.active_producers] == [(txn.producer_id, txn.epoch, 2, 0)]
    assert txn.end(commit=True) == 0
    assert [s.current_txn_start_offset for s in producers().active_producers] == [-1]
    assert producers(7).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_write_txn_markers_ends_a_hanging_transaction(raw_client):
    """WriteTxnMarkers (what kafka-transactions.sh abort sends the partition leader): an ABORT
    marker for the open transaction's producer moves the LSO past it and lists it as aborted;
    an unknown partition gets UNKNOWN_TOPIC_OR_PARTITION."""
    c = raw_client()
    topic = unique("txn-hanging")
    create_topic(c, topic)
    txn = RawTxn(c, unique("tid"))
    assert txn.init() == 0 and txn.add(topic) == 0 and txn.produce(topic, 0, [b"h1", b"h2"]) == 0
    assert fetch_partition(c, topic).last_stable_offset == 0
    r = c.request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [{
        "producer_id": txn.producer_id, "producer_epoch": txn.epoch, "transaction_result": False,
        "coordinator_epoch": 0, "topics": [{"name": topic, "partition_indexes": [0, 9]}]}]})
    assert [(p.partition_index, p.error_code) for p in r.markers[0].topics[0].partitions] == \
        [(0, ErrorCode.NONE), (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    p = fetch_partition(c, topic)
    assert (p.high_watermark, p.last_stable_offset) == (3, 3)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(txn.producer_id, 0)]
