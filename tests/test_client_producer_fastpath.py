"""send()'s fused fast path (keyless bytes values appended in ``KafkaProducer.send`` itself)
checked byte for byte against the general path (``ProducerBatch.try_append``), against a
real broker: records mixing fast-path ones with ones that must fall back (keys, large
values, timestamps before the batch's first), then the open batches compared with
batches built by the general path from the same records; and the records read back."""

import random
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.client.producer import KafkaProducer
from broker.client.producer.batch import ProducerBatch
from broker.record.batch import RECORD_BATCH_OVERHEAD

BATCH = 4 << 20


@pytest.fixture(scope="module")
def producer(kafka_broker):
    # linger.ms of 10 minutes and batches larger than any example: nothing drains until
    # the test flushes, so the open batches can be compared with the general path's.
    p = KafkaProducer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 600000,
                       "batch.size": BATCH, "buffer.memory": 64 << 20, "acks": "all"})
    yield p
    p.close()


def _open_batches(p, topic):
    info = p.accumulator._topics[topic]
    out = []
    for q in info.queues.values():
        with q.lock:
            out.extend(q.batches)
    return out


def _general(batch_records, created):
    """The same records appended by the general path into a fresh batch."""
    ref = ProducerBatch("ref", 0, bytearray(BATCH), created)
    for ts, key, value in batch_records:
        assert ref.try_append(ts, key, value, None, None, created) is not None
    return ref


def _send_all(producer, topic, recs, rnd, sent, futs, delivered):
    for kind, size in recs:
        value = rnd.randbytes(size)
        key = None
        ts = None
        if kind == "key":
            key = rnd.randbytes(rnd.randrange(0, 20))
        elif kind == "early":
            ts = 1000  # before the batch's base timestamp: a negative delta
        elif kind == "explicit":
            ts = 1_600_000_000_000 + 10**9  # far after it: a delta beyond the varint table
        futs.append(producer.send(topic, value, key=key, timestamp_ms=ts,
                                  on_delivery=lambda err, md: delivered.append((err, md))))
        sent.append((key, value))


record = st.tuples(
    st.sampled_from(["fast", "fast", "fast", "key", "early", "explicit"]),
    st.one_of(st.integers(0, 2000), st.sampled_from([0, 1, 63, 64, 127, 128, 16254, 16255,
                                                     16319, 16320, 16383, 16384, 20000])),
)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(record, min_size=1, max_size=40), st.integers(0, 2**32))
def test_fast_path_bytes_equal_general_path(producer, recs, seed):
    rnd = random.Random(seed)
    topic = f"fast-{uuid.uuid4().hex[:8]}"
    producer.send(topic, b"first")  # the batch's first record (general path)
    sent = [(None, b"first")]
    futs = []
    delivered = []
    general = [0]
    append = producer._append

    def counting_append(*args):
        general[0] += 1
        return append(*args)

    producer._append = counting_append  # the general path's call into the accumulator
    try:
        _send_all(producer, topic, recs, rnd, sent, futs, delivered)
    finally:
        producer._append = append
    fast = sum(1 for kind, size in recs if kind == "fast" and size < 16254)
    assert len(recs) - general[0] >= fast  # the fast path took at least these
    batches = _open_batches(producer, topic)
    assert len(batches) == 1
    b = batches[0]
    assert b.record_count == len(sent)
    # every future points at its record's index, with the timestamp it was given
    assert [f[1] for f in futs] == list(range(1, len(sent)))
    tss = [b.base_ts] + [f[2] for f in futs]
    ref = _general([(ts, k, v) for ts, (k, v) in zip(tss, sent)], b.created_ms)
    assert bytes(b.buffer[RECORD_BATCH_OVERHEAD:b.pos]) == bytes(ref.buffer[RECORD_BATCH_OVERHEAD:ref.pos])
    assert (b.base_ts, b.max_ts, b.record_count) == (ref.base_ts, ref.max_ts, ref.record_count)
    producer.flush()
    assert len(delivered) == len(futs)
    assert all(err is None for err, _ in delivered)
    offsets = [f.get(30).offset for f in futs]
    assert offsets == list(range(1, len(sent)))


def test_fast_path_records_read_back(kafka_broker):
    """Many batches (a small batch.size, sticky partition switches over 3 partitions):
    every record is in the log once, in send order per partition."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"fast-rb-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    rnd = random.Random(5)
    values = [rnd.randbytes(rnd.randrange(0, 3000)) for _ in range(3000)]
    with KafkaProducer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 5,
                        "batch.size": 16384, "compression.type": "lz4"}) as p:
        futs = [p.send(topic, v) for v in values]
        p.flush()
        md = [f.get(30) for f in futs]
    c = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "g-" + topic,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(3)])
    got = {}
    while len(got) < len(values):
        m = c.poll(10)
        assert m is not None, f"only {len(got)} of {len(values)} records read"
        assert not m.error()
        got[(m.partition(), m.offset())] = m.value()
    c.close()
    assert len({m.partition for m in md}) > 1  # the sticky partitioner switched
    assert [got[(m.partition, m.offset)] for m in md] == values


def test_arrow_batch_bytes_defaults():
    """send_arrow's batch bound: the user's batch.size when set, else librdkafka's 1000000
    (within max.request.size and half of buffer.memory)."""
    from broker.client.producer.columnar import DEFAULT_ARROW_BATCH_BYTES, arrow_batch_bytes
    from broker.client.producer.config import ProducerConfig

    def bound(**kw):
        return arrow_batch_bytes(ProducerConfig({"bootstrap.servers": "h:1", **kw}))

    assert DEFAULT_ARROW_BATCH_BYTES == 1_000_000
    assert bound() == 1_000_000
    assert bound(**{"batch.size": 16384}) == 16384  # set by the user: kept, even Kafka's default
    assert bound(**{"batch.size": 4 << 20}) == 4 << 20
    assert bound(**{"max.request.size": 500_000}) == 500_000
    assert bound(**{"buffer.memory": 1 << 20}) == 1 << 19
