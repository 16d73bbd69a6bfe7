"""The log cleaner in a real broker subprocess, seen by real clients: ``__consumer_offsets``
stays small under a commit loop while the committed offsets stay right across a restart,
and a compacted topic (tombstones stamped with their delete horizon) read after cleaning
by confluent-kafka and kafka-python. Waits are for outcomes (bounded), never for a time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker.record.batch import iter_batch_headers

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.support.workload import wait_for_outcome  # noqa: E402

SEGMENT = 2048  # offsets.topic.segment.bytes of the commit-loop test


def _segments(directory: Path) -> list[bytes]:
    """The bytes of the live segments of a partition, in offset order (the ``.log`` files;
    ``.deleted`` ones wait for file.delete.delay.ms and are not the log's any more). The
    cleaner renames files meanwhile: a listing that changed under the read is taken again."""
    for _ in range(100):
        try:
            return [p.read_bytes() for p in sorted(directory.glob("*.log"))]
        except FileNotFoundError:
            continue
    raise AssertionError(f"{directory} kept changing")


def _log_bytes(directory: Path) -> int:
    return sum(map(len, _segments(directory)))


def test_consumer_offsets_stay_small_under_a_commit_loop(broker_factory) -> None:
    broker = broker_factory({"log.cleaner.backoff.ms": "20", "offsets.topic.num.partitions": "1",
                             "offsets.topic.segment.bytes": str(SEGMENT)})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("data", 3, 1)])["data"].result(30)
    tp = confluent_kafka.TopicPartition
    offsets_dir = broker.log_dir / "__consumer_offsets-0"
    bound = 16 * SEGMENT  # the active segment, dirty ones awaiting the next pass, the cleaned rest
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "loop",
                                         "enable.auto.commit": False})
    commits, largest = 2000, 0
    try:
        for i in range(1, commits + 1):
            consumer.commit(offsets=[tp("data", p, 10 * i + p) for p in range(3)], asynchronous=False)
            if i % 250 == 0:  # the cleaner brings the log back under the bound each time
                wait_for_outcome(lambda: _log_bytes(offsets_dir) <= bound, f"__consumer_offsets <= {bound} B")
                largest = max(largest, _log_bytes(offsets_dir))
        committed = consumer.committed([tp("data", p) for p in range(3)], timeout=30)
        assert [c.offset for c in committed] == [10 * commits + p for p in range(3)]
    finally:
        consumer.close()
    assert largest <= bound
    # what was written: 3 records a commit, each commit a batch of ~200 B (far above the bound)
    written = sum(1 for data in _segments(offsets_dir) for _ in iter_batch_headers(data))
    assert written < commits // 10
    assert "cleaned log __consumer_offsets-0" in broker.stdout_text() + broker.stderr_text()
    broker.restart()  # the coordinator reloads the group from the compacted log
    assert _log_bytes(offsets_dir) <= bound
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "loop",
                                         "enable.auto.commit": False})
    try:
        committed = consumer.committed([tp("data", p) for p in range(3)], timeout=30)
        assert [c.offset for c in committed] == [10 * commits + p for p in range(3)]
    finally:
        consumer.close()


# --- a compacted topic read after cleaning by real clients ---

N, KEYS = 300, 12
TS0 = int(time.time() * 1000) - 60_000


def _expected() -> tuple[dict, list]:
    """(latest value per key, None for a tombstone; the produced (key, value, ts) list)."""
    produced, latest = [], {}
    for i in range(N):
        k = i % KEYS
        if i >= N - 3 * KEYS and k in (3, 7):
            k = 0  # keys 3 and 7 are deleted (below) and never written again
        key = b"key-%02d" % k
        value = None if (k in (3, 7) and i >= N - 4 * KEYS) else (b"value-%d-" % i) * 4
        produced.append((key, value, TS0 + i))
        latest[key] = value
    return latest, produced


@pytest.fixture(scope="module")
def compacted_broker(tmp_path_factory):
    from tests.support.broker import BrokerProcess
    broker = BrokerProcess(tmp_path_factory.mktemp("compacted"), {"log.cleaner.backoff.ms": "20"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("kv", 1, 1, config={
            "cleanup.policy": "compact", "internal.segment.bytes": "1024",
            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400000"})])["kv"].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                                             "batch.num.messages": 1})
        errors: list = []
        for key, value, ts in _expected()[1]:
            producer.produce("kv", key=key, value=value, timestamp=ts,
                             on_delivery=lambda err, msg: err and errors.append(err))
            producer.poll(0)
        assert producer.flush(30) == 0 and errors == []
        kv_dir = broker.log_dir / "kv-0"

        def cleaned_with_horizons() -> bool:
            segments = _segments(kv_dir)[:-1]  # not the active one
            headers = [h for data in segments for _, h in iter_batch_headers(data)]
            tombstones_stamped = sum(1 for h in headers if h.has_delete_horizon)
            return len(headers) < N // 2 and tombstones_stamped >= 1
        wait_for_outcome(cleaned_with_horizons, "the cleaner compacted kv-0 and stamped its tombstones")
        yield broker
    finally:
        broker.stop()


def _check(records: list[tuple[int, bytes, bytes | None, int]]) -> None:
    latest, produced = _expected()
    offsets = [o for o, _, _, _ in records]
    assert offsets == sorted(set(offsets)) and offsets[-1] == N - 1
    assert len(offsets) < N // 2 and any(b - a > 1 for a, b in zip(offsets, offsets[1:])), "gaps"
    seen = {}
    for offset, key, value, ts in records:
        assert (key, value, ts) == produced[offset], f"offset {offset} is what was produced there"
        seen[key] = value
    assert seen == latest, "the latest value of every key (None: a tombstone still kept)"
    assert [k for k, v in seen.items() if v is None] == [b"key-03", b"key-07"]


def test_confluent_kafka_reads_the_cleaned_topic(compacted_broker) -> None:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": compacted_broker.bootstrap,
                                         "group.id": "reader-c", "enable.auto.commit": False,
                                         "enable.partition.eof": True})
    records = []
    try:
        consumer.assign([confluent_kafka.TopicPartition("kv", 0, confluent_kafka.OFFSET_BEGINNING)])
        for _ in range(1200):
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, msg.error()
                break
            records.append((msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))
        else:
            raise AssertionError("never reached the end of kv-0")
    finally:
        consumer.close()
    _check(records)


def test_kafka_python_reads_the_cleaned_topic(compacted_broker) -> None:
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(bootstrap_servers=compacted_broker.bootstrap, enable_auto_commit=False,
                                   group_id=None)
    records = []
    try:
        part = kafka.TopicPartition("kv", 0)
        consumer.assign([part])
        consumer.seek_to_beginning(part)
        end = consumer.end_offsets([part])[part]
        assert end == N
        for _ in range(600):
            if consumer.position(part) >= end:
                break
            for msgs in consumer.poll(timeout_ms=100).values():
                records += [(m.offset, m.key, m.value, m.timestamp) for m in msgs]
        else:
            raise AssertionError("never reached the end of kv-0")
    finally:
        consumer.close()
    _check(records)


def test_a_keyless_record_on_a_compacted_topic_is_invalid_record(compacted_broker) -> None:
    """Kafka's LogValidator: a compacted topic refuses a record without a key
    (INVALID_RECORD), and the log is left as it was."""
    producer = confluent_kafka.Producer({"bootstrap.servers": compacted_broker.bootstrap, "linger.ms": 0,
                                         "retries": 0})
    errors: list = []
    producer.produce("kv", value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0
    assert [e.code() for e in errors] == [confluent_kafka.KafkaError.INVALID_RECORD]
    consumer = confluent_kafka.Consumer({"bootstrap.servers": compacted_broker.bootstrap, "group.id": "w"})
    try:
        low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition("kv", 0), timeout=30)
    finally:
        consumer.close()
    assert high == N
