"""Sender against a scripted network client: the error table, retries with the same
sequence (I9), epoch bump and renumbering (I10), splitting, expiry, muting, acks=0, and a
stateful check of buffer lifetime (I13)."""

from types import SimpleNamespace

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from broker.client.errors import KafkaError, KafkaTimeoutError, RecordTooLargeError
from broker.client.producer.accumulator import RecordAccumulator
from broker.client.producer.buffer_pool import BufferPool
from broker.client.producer.config import ProducerConfig
from broker.client.producer.sender import Sender
from broker.client.producer.transaction_manager import TransactionManager, increment_sequence
from broker.protocol import ErrorCode
from broker.record.batch import decode_batch, ensure_valid
from tests.support.producer import MockClient, StaticMetadata

E = ErrorCode


def make(topics=None, **cfg):
    cfg.setdefault("linger_ms", 0)
    cfg.setdefault("retry_backoff_ms", 10)
    config = ProducerConfig(bootstrap_servers="x:1", **cfg)
    pool = BufferPool(config.buffer_memory, config.batch_size)
    tm = TransactionManager() if config.idempotence else None
    acc = RecordAccumulator(batch_size=config.batch_size, linger_ms=config.linger_ms,
                            retry_backoff_ms=config.retry_backoff_ms,
                            retry_backoff_max_ms=config.retry_backoff_max_ms,
                            delivery_timeout_ms=config.delivery_timeout_ms, pool=pool,
                            transaction_manager=tm)
    md = StaticMetadata(topics or {"t": 1})
    client = MockClient()
    sender = Sender(client=client, metadata=md, accumulator=acc, config=config,
                    transaction_manager=tm)
    return SimpleNamespace(acc=acc, md=md, client=client, sender=sender, tm=tm, pool=pool)


def send(env, value, partition=0, now=0.0, cb=None, topic="t", max_block_ms=1000):
    return env.acc.append(topic, partition, 1000, None, value, None, cb, max_block_ms, now,
                          env.md.cluster)[0]


def run(env, now):
    env.sender.run_once(now)
    env.sender.run_once(now)  # the first round may only fetch the producer id


def seq_of(env, req):
    return [decode_batch(data)[0].base_sequence for _, _, data, _ in env.client.snapshots[req.correlation_id]]


def test_success_assigns_offsets_and_fires_callbacks_in_order():
    env = make()
    seen = []
    futs = [send(env, b"v%d" % i, cb=lambda e, m, i=i: seen.append((i, e, m.offset))) for i in range(3)]
    run(env, 1.0)
    (req,) = env.client.requests
    assert seq_of(env, req) == [0]
    env.client.respond(req, offsets={("t", 0): 50})
    env.sender.run_once(2.0)
    assert [f.result(0).offset for f in futs] == [50, 51, 52]
    assert seen == [(0, None, 50), (1, None, 51), (2, None, 52)]
    assert env.pool.available_memory() == env.pool.total_memory


@pytest.mark.parametrize("fault", ["retriable", "disconnect", "timeout"])
def test_i9_retry_keeps_the_sequence_and_duplicate_is_success(fault):
    env = make()
    f = send(env, b"x")
    run(env, 1.0)
    req = env.client.requests[0]
    if fault == "retriable":
        env.client.respond(req, errors={("t", 0): E.NOT_LEADER_OR_FOLLOWER})
    elif fault == "disconnect":
        env.client.disconnect(req)
    else:
        env.client.time_out(req)
    env.sender.run_once(2.0)
    assert not f.done()
    assert env.tm.sequence_number(("t", 0)) == 1  # not advanced by the retry
    env.sender.run_once(3.0)  # still backing off (10 ms)
    assert len(env.client.requests) == 1
    env.sender.run_once(100.0)
    retry = env.client.requests[1]
    assert seq_of(env, retry) == [0]  # same sequence, same bytes
    assert env.client.snapshots[retry.correlation_id][0][2] == env.client.snapshots[req.correlation_id][0][2]
    env.client.respond(retry, errors={("t", 0): E.DUPLICATE_SEQUENCE_NUMBER})
    env.sender.run_once(101.0)
    assert f.result(0).offset == -1  # delivered, offset unknown
    assert env.sender.fatal_error is None and env.tm.epoch_bumps == 0


def test_message_too_large_splits_without_charging_a_retry():
    env = make(batch_size=8192)
    futs = [send(env, b"%04d" % i * 50) for i in range(30)]  # one batch of 30
    run(env, 1.0)
    req = env.client.requests[0]
    env.client.respond(req, errors={("t", 0): E.MESSAGE_TOO_LARGE})
    env.acc.batch_size = 1000
    env.sender.run_once(2.0)
    assert env.sender.metrics["batch-split-total"] == 1
    offset = 0
    for _ in range(40):
        env.sender.run_once(5.0)  # completes the answers of the previous round
        env.sender.run_once(5.0)  # drains the next piece
        pending = list(env.client.in_flight)
        if not pending:
            break
        for r in pending:
            env.client.respond(r, offsets={("t", 0): offset})
            offset += sum(decode_batch(d)[0].records_count for _, _, d, _ in env.client.snapshots[r.correlation_id])
    assert [f.result(0).offset for f in futs] == list(range(30))
    seqs = [s for r in env.client.requests[1:] for s in seq_of(env, r)]
    assert seqs == sorted(seqs) and seqs[0] == 0


def test_single_record_too_large_is_fatal_for_the_record():
    env = make()
    f = send(env, b"x" * 100)
    run(env, 1.0)
    env.client.respond(env.client.requests[0], errors={("t", 0): E.MESSAGE_TOO_LARGE})
    env.sender.run_once(2.0)
    assert isinstance(f.exception(0), RecordTooLargeError)


def test_fatal_error_fails_the_batch_and_bumps_the_epoch():
    env = make()
    f = send(env, b"a")
    run(env, 1.0)
    env.client.respond(env.client.requests[0], errors={("t", 0): E.TOPIC_AUTHORIZATION_FAILED})
    env.sender.run_once(2.0)
    assert isinstance(f.exception(0), KafkaError) and f.exception(0).code == E.TOPIC_AUTHORIZATION_FAILED
    g = send(env, b"b")
    env.sender.run_once(3.0)
    env.sender.run_once(3.0)
    req = env.client.requests[-1]
    header = decode_batch(env.client.snapshots[req.correlation_id][0][2])[0]
    assert (header.producer_epoch, header.base_sequence) == (1, 0)  # new epoch, from 0
    env.client.respond(req)
    env.sender.run_once(4.0)
    assert g.result(0).offset == 0


def test_i10_unknown_producer_id_renumbers_in_flight_batches_in_order():
    env = make(batch_size=220, max_in_flight_requests_per_connection=5)
    futs = [send(env, b"r" * 40) for _ in range(9)]  # 3 records per batch -> 3 batches
    for i in range(4):
        env.sender.run_once(1.0 + i)
    reqs = list(env.client.in_flight)
    assert [seq_of(env, r)[0] for r in reqs] == [0, 3, 6]
    # The first fails with UNKNOWN_PRODUCER_ID (state lost); the others are rejected as
    # out of order because the broker never saw sequence 0.
    env.client.respond(reqs[0], errors={("t", 0): E.UNKNOWN_PRODUCER_ID})
    env.client.respond(reqs[1], errors={("t", 0): E.OUT_OF_ORDER_SEQUENCE_NUMBER})
    env.client.respond(reqs[2], errors={("t", 0): E.OUT_OF_ORDER_SEQUENCE_NUMBER})
    env.sender.run_once(10.0)  # handles the answers
    env.sender.run_once(11.0)  # bumps the epoch
    assert env.tm.producer_epoch == 1
    offset = 0
    sent = []
    for i in range(20):
        env.sender.run_once(200.0 + 100 * i)
        for r in list(env.client.in_flight):
            sent.append(seq_of(env, r)[0])
            env.client.respond(r, offsets={("t", 0): offset})
            offset += 3
        if all(f.done() for f in futs):
            break
    assert sent == [0, 3, 6]  # new epoch, ascending in the old order
    assert [f.result(0).offset for f in futs] == list(range(9))


def test_delivery_timeout_expires_queued_and_in_flight_batches_once():
    env = make(delivery_timeout_ms=1000, request_timeout_ms=500, linger_ms=0)
    calls = []
    f = send(env, b"a", cb=lambda e, m: calls.append(e))
    run(env, 1.0)
    req = env.client.requests[0]
    env.client.not_ready.add(1)
    g = send(env, b"b", now=2.0, cb=lambda e, m: calls.append(e))
    env.sender.run_once(1500.0)
    assert isinstance(f.exception(0), KafkaTimeoutError) and isinstance(g.exception(0), KafkaTimeoutError)
    assert len(calls) == 2
    # The in-flight batch's buffer stays out of the pool until its request completes.
    assert env.pool.available_memory() < env.pool.total_memory
    env.client.respond(req, offsets={("t", 0): 0}, now=1600.0)  # a late success
    env.sender.run_once(1600.0)
    assert len(calls) == 2  # no second callback
    assert env.pool.available_memory() == env.pool.total_memory


def test_max_in_flight_one_mutes_the_partition():
    env = make(enable_idempotence=False, max_in_flight_requests_per_connection=1,
               batch_size=100)
    for _ in range(6):
        send(env, b"m" * 40)
    env.sender.run_once(1.0)
    env.sender.run_once(2.0)
    assert len(env.client.requests) == 1 and ("t", 0) in env.acc.muted
    env.client.respond(env.client.requests[0])
    env.sender.run_once(3.0)
    env.sender.run_once(4.0)
    assert len(env.client.requests) == 2


def test_acks_zero_completes_on_write_with_unknown_offset():
    env = make(acks=0)
    f = send(env, b"z")
    env.sender.run_once(1.0)
    env.sender.run_once(2.0)
    assert env.tm is None and f.result(0).offset == -1


def test_sequences_wrap_like_the_broker():
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 2, 5) == 3


class BufferLifetime(RuleBasedStateMachine):
    """I13: expire batches by delivery timeout while their request is in flight; a
    buffer is never reused before its request is done, and every payload sent still
    CRC-validates and carries the topic it was built for."""

    def __init__(self):
        super().__init__()
        self.env = make(topics={"a": 2, "b": 1}, batch_size=128, buffer_memory=1024,
                        delivery_timeout_ms=300, request_timeout_ms=100, linger_ms=0,
                        max_block_ms=0)
        self.now = 1.0
        self.futures = []

    @rule(topic=st.sampled_from([("a", 0), ("a", 1), ("b", 0)]), size=st.integers(1, 150))
    def append(self, topic, size):
        try:
            self.futures.append(send(self.env, bytes([size % 251]) * size, partition=topic[1],
                                     now=self.now, topic=topic[0], max_block_ms=0))
        except KafkaTimeoutError:
            pass  # buffer.memory exhausted: allowed

    @rule(ms=st.integers(0, 400))
    def tick(self, ms):
        self.now += ms
        self.env.sender.run_once(self.now)

    # No precondition on what is in flight: the rules drawn must not depend on the state
    # (Hypothesis replays a choice sequence and requires the same draws), so an answer with
    # nothing in flight is a tick of 0 ms.
    @rule(i=st.integers(0, 10), how=st.sampled_from(["ok", "retry", "drop", "dup"]))
    def answer(self, i, how):
        client = self.env.client
        if not client.in_flight:
            self.env.sender.run_once(self.now)
            return
        req = client.in_flight[i % len(client.in_flight)]
        tps = client.partitions(req)
        if how == "ok":
            client.respond(req, now=self.now)
        elif how == "retry":
            client.respond(req, errors={tp: E.NOT_ENOUGH_REPLICAS for tp in tps}, now=self.now)
        elif how == "dup":
            client.respond(req, errors={tp: E.DUPLICATE_SEQUENCE_NUMBER for tp in tps}, now=self.now)
        else:
            client.disconnect(req, now=self.now)
        self.env.sender.run_once(self.now)

    @invariant()
    def in_flight_payloads_are_intact(self):
        for req in self.env.client.in_flight:
            for topic, partition, snap, view in self.env.client.snapshots[req.correlation_id]:
                assert bytes(view) == snap, "a buffer in flight was reused"
                ensure_valid(snap)
                batch = next(b for b in self.env.sender.in_flight_batches() + [None]
                             if b is None or b.payload is view)
                if batch is not None:
                    assert (batch.topic, batch.partition) == (topic, partition)

    @invariant()
    def memory_is_bounded(self):
        assert 0 <= self.env.pool.available_memory() <= self.env.pool.total_memory

    def teardown(self):
        self.now += 10_000
        self.env.sender.run_once(self.now)
        self.env.client.close()
        self.env.sender.run_once(self.now)
        for f in self.futures:
            assert f.done()
        assert self.env.pool.available_memory() == self.env.pool.total_memory


TestBufferLifetime = BufferLifetime.TestCase
TestBufferLifetime.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)
