"""RecordAccumulator and ProducerBatch: appends, the bytes they build, ready/drain, retries
in sequence order, splitting, expiry, futures and callbacks."""

import pytest

from broker.client.errors import KafkaTimeoutError
from broker.client.metadata import Cluster, Node, PartitionInfo
from broker.client.producer.accumulator import RecordAccumulator
from broker.client.producer.batch import ProducerBatch
from broker.client.producer.buffer_pool import BufferPool
from broker.client.producer.transaction_manager import TransactionManager
from broker.record.batch import decode_batch, ensure_valid


def make_cluster(partitions=2, nodes=(1,)):
    parts = [PartitionInfo("t", i, nodes[i % len(nodes)]) for i in range(partitions)]
    return Cluster([Node(n, "h", n) for n in nodes], parts)


def make_acc(batch_size=1024, linger_ms=10, tm=None, memory=1 << 20, codec=0, **kw):
    return RecordAccumulator(batch_size=batch_size, linger_ms=linger_ms, retry_backoff_ms=100,
                             retry_backoff_max_ms=1000, delivery_timeout_ms=kw.pop("dt", 5000),
                             pool=BufferPool(memory, batch_size), codec=codec,
                             transaction_manager=tm, **kw)


def append(acc, cluster, partition, value, key=None, ts=1000, now=0.0, headers=None, cb=None):
    return acc.append("t", partition, ts, key, value, headers, cb, 100, now, cluster)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_batch_bytes_decode_to_what_was_appended(codec):
    b = ProducerBatch("t", 0, bytearray(4096), 0.0, codec=codec)
    recs = [(None, b"v0", 1000, None), (b"k1", None, 1003, [("h", b"x"), ("n", None)]),
            (b"", b"v" * 300, 999, None), (b"k" * 200, b"w" * 20000 if False else b"w", 2000, None)]
    for k, v, ts, h in recs:
        assert b.try_append(ts, k, v, h, None, 0.0) is not None
    b.set_producer_state(7, 3, 11)
    data = b.close()
    header, records = decode_batch(bytes(data))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 11)
    assert header.compression == codec and header.records_count == 4
    assert header.base_timestamp == 1000 and header.max_timestamp == 2000
    assert [(r.key, r.value, r.timestamp) for r in records] == [(k, v, ts) for k, v, ts, _ in recs]
    assert records[1].headers == (("h", b"x"), ("n", None))


def test_restamp_after_reset_changes_sequence_and_crc():
    b = ProducerBatch("t", 0, bytearray(1024), 0.0)
    b.try_append(1, None, b"x", None, None, 0.0)
    b.set_producer_state(1, 0, 5)
    b.close()
    b.reset_producer_state(1, 1, 0)
    data = b.close()
    h = ensure_valid(bytes(data))
    assert (h.producer_epoch, h.base_sequence) == (1, 0) and b.sequence_reset


def test_batch_fills_to_batch_size_then_a_new_one_starts():
    acc = make_acc(batch_size=256)
    c = make_cluster()
    results = [append(acc, c, 0, b"x" * 40) for _ in range(10)]
    assert results[0][1] is True  # a new batch wakes the Sender
    assert results[1][1] is False  # an append into the open batch does not
    assert acc.queue_depth("t", 0) >= 2
    assert all(wake for _, wake in results[-3:])  # behind a full batch: wake


def test_ready_waits_for_linger_unless_full_or_flushing():
    acc = make_acc(linger_ms=10)
    c = make_cluster()
    append(acc, c, 0, b"x")
    r = acc.ready(c, 5.0)
    assert not r.ready_nodes and r.next_ready_check_delay_ms == pytest.approx(5.0)
    assert acc.ready(c, 10.0).ready_nodes == {1}
    acc.begin_flush()
    assert acc.ready(c, 1.0).ready_nodes == {1}
    acc.end_flush()


def test_unknown_leader_is_reported():
    acc = make_acc()
    c = Cluster([Node(1, "h", 1)], [PartitionInfo("t", 0, -1)])
    append(acc, c, 0, b"x")
    assert acc.ready(c, 100.0).unknown_leader_topics == {"t"}


def test_drain_round_robin_one_batch_per_partition_and_max_size():
    acc = make_acc(batch_size=200, linger_ms=0)
    c = make_cluster(partitions=3)
    for p in range(3):
        for _ in range(6):
            append(acc, c, p, b"y" * 50)
    first = acc.drain(c, [1], 10_000, 1.0)[1]
    assert sorted(b.partition for b in first) == [0, 1, 2]  # one per partition
    second = acc.drain(c, [1], 250, 2.0)[1]
    assert len(second) == 1  # the size limit stops after one batch
    third = acc.drain(c, [1], 250, 3.0)[1]
    assert third[0].partition != second[0].partition  # the next drain starts further on


def test_drain_stamps_sequences_in_order_and_retries_go_back_in_sequence_order():
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(5, 0)
    acc = make_acc(batch_size=100, linger_ms=0, tm=tm)
    c = make_cluster(partitions=1)
    for _ in range(12):
        append(acc, c, 0, b"z" * 30)
    drained = []
    for i in range(3):
        drained += acc.drain(c, [1], 10_000, float(i))[1]
    seqs = [b.base_sequence for b in drained]
    assert seqs == sorted(seqs) and seqs[0] == 0
    assert seqs[1] == drained[0].record_count
    # Retry the second and first out of order: they line up again by sequence.
    acc.reenqueue(drained[1], 10.0)
    acc.reenqueue(drained[0], 10.0)
    info = acc._topics["t"].queues[0]
    assert [b.base_sequence for b in list(info.batches)[:2]] == seqs[:2]
    # A retried batch that is not the first in flight may not go yet.
    assert tm.should_stop_drain(drained[1], ("t", 0))
    assert not tm.should_stop_drain(drained[0], ("t", 0))


def test_split_keeps_order_futures_and_callbacks():
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(9, 1)
    acc = make_acc(batch_size=4096, linger_ms=0, tm=tm)
    c = make_cluster(partitions=1)
    seen = []
    futs = [append(acc, c, 0, b"%03d" % i * 20, cb=lambda e, m, i=i: seen.append((i, m.offset)))[0]
            for i in range(40)]
    big = acc.drain(c, [1], 1 << 20, 0.0)[1][0]
    acc.batch_size = 300
    n = acc.split_and_reenqueue(big, 1.0)
    assert n > 1
    pieces = acc.drain(c, [1], 1 << 20, 200.0)[1]
    assert pieces[0].base_sequence == 0
    offset = 100
    while pieces:
        for b in pieces:
            b.close()
            tm.handle_completed_batch(b, offset)
            b.complete(offset, -1)
            offset += b.record_count
        pieces = acc.drain(c, [1], 1 << 20, 400.0 + offset).get(1, [])
    assert [f.result().offset for f in futs] == list(range(100, 140))
    assert seen == [(i, 100 + i) for i in range(40)]


def test_expired_batches_and_callback_isolation():
    acc = make_acc(dt=100)
    c = make_cluster()
    calls = []

    def bad(e, m):
        calls.append("bad")
        raise RuntimeError("user bug")

    f1, _ = append(acc, c, 0, b"a", cb=bad)
    f2, _ = append(acc, c, 0, b"b", cb=lambda e, m: calls.append(type(e).__name__))
    assert acc.expired_batches(50.0) == []
    expired = acc.expired_batches(100.0)
    assert len(expired) == 1
    expired[0].fail(KafkaTimeoutError("expired"))
    expired[0].fail(KafkaTimeoutError("again"))  # FAILED -> FAILED is ignored
    assert calls == ["bad", "KafkaTimeoutError"]  # one bad callback does not stop the next
    with pytest.raises(KafkaTimeoutError):
        f1.result(0)
    assert f2.done() and isinstance(f2.exception(), KafkaTimeoutError)


def test_future_add_done_callback_before_and_after_completion():
    acc = make_acc()
    c = make_cluster()
    f, _ = append(acc, c, 1, b"x")
    seen = []
    f.add_done_callback(lambda fut: seen.append(("before", fut.result().offset)))
    b = acc.drain(c, [1], 1 << 20, 1000.0)[1][0]
    b.close()
    b.complete(41, -1)
    f.add_done_callback(lambda fut: seen.append(("after", fut.result().offset)))
    assert seen == [("before", 41), ("after", 41)]
    assert f.result().partition == 1 and not f.cancel()


def test_keyless_records_stick_to_a_partition():
    acc = make_acc(batch_size=1000)
    c = make_cluster(partitions=4)
    parts = [append(acc, c, -1, b"x" * 10)[0][0].partition for _ in range(30)]
    assert len(set(parts)) == 1  # 30 small records stay on one partition


def test_closed_accumulator_refuses_appends_and_aborts():
    acc = make_acc()
    c = make_cluster()
    f, _ = append(acc, c, 0, b"x")
    acc.close()
    with pytest.raises(Exception, match="closed"):
        append(acc, c, 0, b"y")
    acc.abort_incomplete_batches(RuntimeError("gone"))
    assert isinstance(f.exception(0), RuntimeError)
    assert acc.pool.available_memory() == acc.pool.total_memory
