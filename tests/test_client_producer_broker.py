"""KafkaProducer against this project's broker (subprocess), read back by confluent-kafka
and kafka-python consumers: every codec, keys and headers, the columnar path, flush and
close semantics."""

import threading
import time
import uuid

import pyarrow as pa
import pytest

from broker.client.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    RecordTooLargeError,
)
from broker.client.producer import KafkaProducer
from broker.client.producer.murmur2 import partition_for_key


def topic_name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def read_kafka_python(bootstrap, topic, partitions, expected):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      consumer_timeout_ms=3000, auto_offset_reset="earliest")
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    out = []
    deadline = time.time() + 30
    while len(out) < expected and time.time() < deadline:
        for msgs in c.poll(timeout_ms=500).values():
            out.extend((m.partition, m.offset, m.key, m.value, tuple(m.headers or ())) for m in msgs)
    c.close()
    return sorted(out)


def read_confluent(bootstrap, topic, partitions, expected):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + topic,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.time() + 30
    while len(out) < expected and time.time() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        out.append((m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ())))
    c.close()
    return sorted(out)


@pytest.fixture(scope="module")
def bootstrap(kafka_broker):
    return kafka_broker.bootstrap


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_records_are_read_by_kafka_python_and_confluent(bootstrap, codec):
    topic = topic_name(f"interop-{codec}")
    create_topic(bootstrap, topic, 3)
    n = 60
    with KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=20) as p:
        futs = []
        for i in range(n):
            key = None if i % 5 == 0 else b"key-%d" % (i % 7)
            headers = [("h", b"%d" % i)] if i % 3 == 0 else None
            futs.append((key, p.send(topic, b"value-%d" % i, key=key, headers=headers)))
        p.flush(30)
        meta = [(k, f.result(10)) for k, f in futs]
    for key, m in meta:
        if key is not None:
            assert m.partition == partition_for_key(key, 3)  # same as the Java client
    produced = sorted((m.partition, m.offset) for _, m in meta)
    assert len(set(produced)) == n
    for reader in (read_kafka_python, read_confluent):
        got = reader(bootstrap, topic, 3, n)
        assert [(p, o) for p, o, *_ in got] == produced
        values = {v for *_, v, _h in got}
        assert values == {b"value-%d" % i for i in range(n)}
        with_headers = [h for *_, h in got if h]
        assert len(with_headers) == n // 3


def test_send_order_callbacks_and_close_from_callback(bootstrap):
    topic = topic_name("order")
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=1, batch_size=512)
    seen = []
    errors = []

    def cb(err, md):
        seen.append(md.offset if md else None)
        if len(seen) == 1:
            try:
                p.flush()
            except IllegalStateError as e:
                errors.append(e)

    futs = [p.send(topic, b"%05d" % i, partition=0, on_delivery=cb) for i in range(500)]
    p.flush(30)
    assert seen == list(range(500))  # once each, in send order
    assert len(errors) == 1  # flush() inside a callback is refused
    assert [f.result(0).offset for f in futs] == list(range(500))
    closed = threading.Event()
    p.send(topic, b"last", on_delivery=lambda e, m: (p.close(), closed.set()))
    assert closed.wait(10)  # close() from a callback does not deadlock
    p.close(10)
    assert p.closed and not p.sender.is_alive()
    with pytest.raises(IllegalStateError):
        p.send(topic, b"after close")


def test_send_arrow_partitions_and_offsets(bootstrap):
    topic = topic_name("arrow")
    create_topic(bootstrap, topic, 4)
    n = 5000
    keys = pa.array([None if i % 10 == 0 else b"k%d" % (i % 97) for i in range(n)], pa.binary())
    values = pa.array([b"v%06d" % i for i in range(n)], pa.binary())
    headers = pa.array([[{"key": "i", "value": b"%d" % i}] if i % 2 else None for i in range(n)],
                       pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    ts = pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64())
    with KafkaProducer(bootstrap_servers=bootstrap, compression_type="lz4", batch_size=4096) as p:
        p.send(topic, b"first", partition=1).get(10)  # per-record and columnar interleave
        res = p.send_arrow(topic, values, keys=keys, headers=headers, timestamps=ts).result(60)
        after = p.send(topic, b"after", partition=1).get(10)
    assert res.records == n and sum(r.count for r in res.partitions.values()) == n
    assert res.partitions[1].first_offset == 1 and after.offset == res.partitions[1].last_offset + 1
    got = read_kafka_python(bootstrap, topic, 4, n + 2)
    assert len(got) == n + 2
    by_value = {v: (part, h) for part, _o, _k, v, h in got}
    for i in range(0, n, 37):
        part, h = by_value[b"v%06d" % i]
        k = keys[i].as_py()
        if k is not None:
            assert part == partition_for_key(k, 4)
        assert h == ((("i", b"%d" % i),) if i % 2 else ())
    # Within a partition the rows keep their order.
    for part in range(4):
        vals = [v for pp, _o, _k, v, _h in got if pp == part and v.startswith(b"v")]
        assert vals == sorted(vals)


def test_send_arrow_partitioner_class_ignore_keys_and_explicit_partitions(bootstrap):
    from broker.client.producer import ArrowSendResult, PartitionRange
    topic = topic_name("arrow-parts")
    create_topic(bootstrap, topic, 3)
    n = 300
    values = pa.array([b"v%d" % i for i in range(n)], pa.binary())
    keys = pa.array([b"k%d" % i for i in range(n)], pa.binary())
    seen = []

    def by_value(t, k, v, count):
        seen.append((t, k, count))
        return int(v[1:]) % count

    with KafkaProducer(bootstrap_servers=bootstrap, partitioner_class=by_value) as p:
        res = p.send_arrow(topic, values, keys=keys).result(60)
    assert isinstance(res, ArrowSendResult) and res.topic == topic and res.records == n
    assert {part: r.count for part, r in res.partitions.items()} == {0: 100, 1: 100, 2: 100}
    assert all(isinstance(r, PartitionRange) for r in res.partitions.values())
    assert len(seen) == n and seen[0] == (topic, b"k0", 3)
    # partitioner.ignore.keys: keyed rows go to the sticky partitioner, in runs of batch.size.
    with KafkaProducer(bootstrap_servers=bootstrap, partitioner_ignore_keys=True,
                       batch_size=1 << 20) as p:
        res = p.send_arrow(topic, values, keys=keys).result(60)
    assert res.records == n and len(res.partitions) == 1  # one run: everything fits a batch
    # Explicit partitions win; a partition outside the topic is refused before queueing.
    with KafkaProducer(bootstrap_servers=bootstrap) as p:
        res = p.send_arrow(topic, values, partitions=[2] * n).result(60)
        assert list(res.partitions) == [2] and res.partitions[2].count == n
        with pytest.raises(KafkaError, match="outside 0..2"):
            p.send_arrow(topic, values, partitions=[3] * n)
    got = read_kafka_python(bootstrap, topic, 3, 3 * n)
    assert len(got) == 3 * n


def test_columnar_path_does_not_import_the_producer():
    """columnar.py owns send_arrow and its result types; producer.py imports it, never the
    other way round (it gets an ArrowSendContext instead of the producer)."""
    import ast
    import pathlib

    import broker.client.producer.columnar as columnar
    tree = ast.parse(pathlib.Path(columnar.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "broker.client.producer.producer" not in imported
    assert not any(m and m.startswith("broker.client.producer") and m.endswith("producer")
                   for m in imported), imported
    assert "producer._" not in pathlib.Path(columnar.__file__).read_text()


def test_metadata_wait_is_bounded_by_max_block_ms():
    p = KafkaProducer(bootstrap_servers="127.0.0.1:1", max_block_ms=300)
    t0 = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        p.send("nowhere", b"x")
    assert time.monotonic() - t0 < 3
    p.close(0)


def test_too_large_record_fails_its_future_at_once(bootstrap):
    with KafkaProducer(bootstrap_servers=bootstrap, max_request_size=1000) as p:
        calls = []
        f = p.send(topic_name("big"), b"x" * 2000, on_delivery=lambda e, m: calls.append(e))
        assert isinstance(f.exception(0), RecordTooLargeError) and len(calls) == 1


@pytest.mark.parametrize("acks", [0, 1])
def test_acks_without_idempotence(bootstrap, acks):
    topic = topic_name(f"acks{acks}")
    with KafkaProducer(bootstrap_servers=bootstrap, acks=acks) as p:
        assert p.transaction_manager is None
        futs = [p.send(topic, b"a%d" % i) for i in range(20)]
        p.flush(20)
        offsets = [f.result(0).offset for f in futs]
    assert offsets == ([-1] * 20 if acks == 0 else list(range(20)))
    assert len(read_kafka_python(bootstrap, topic, 1, 20)) == 20


def test_close_delivers_what_was_queued(bootstrap):
    topic = topic_name("close")
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=200)
    futs = [p.send(topic, b"c%d" % i) for i in range(100)]
    p.close(30)
    assert [f.result(0).offset for f in futs] == list(range(100))
    assert p.metrics()["buffer-available-bytes"] == p.metrics()["buffer-total-bytes"]
