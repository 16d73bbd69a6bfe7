"""KafkaConsumer (broker/client/consumer/consumer.py) against the real broker, with
manual assignment: records produced by confluent-kafka come back through poll() and
poll_arrow(); commits round-trip and agree with confluent-kafka's committed(); seek,
position, pause/resume, offsets_for_times, read_committed over a log with transactions,
auto commit; subscribe() without a group.id fails with a clear error (group membership:
test_client_consumer_group.py)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition

from broker.client.consumer import (
    ARROW_SCHEMA,
    ConsumerConfig,
    KafkaConsumer,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    TopicPartition,
)
from broker.client.errors import IllegalStateError, KafkaError
from broker.config import ConfigError
from broker.protocol import ApiKey
from tests.support.broker import RawClient
from tests.support.txn_log import TS0, write_transactions

pytestmark = pytest.mark.timeout(120)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(bootstrap: str, name: str, partitions: int = 1) -> None:
    host, port = bootstrap.rsplit(":", 1)
    with RawClient(host, int(port)) as c:
        r = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": 1,
             "assignments": [], "configs": []}], "timeout_ms": 1000})
        assert r.topics[0].error_code == 0, r


def produce(bootstrap: str, topic: str, n: int, partitions: int = 1, ts0: int | None = None,
            **extra) -> None:
    p = CKProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, **extra})
    for i in range(n):
        kw = {"timestamp": ts0 + i} if ts0 is not None else {}
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions,
                  headers=[("h", b"%d" % i)], **kw)
    assert p.flush(30) == 0


def consumer(bootstrap: str, **extra) -> KafkaConsumer:
    cfg = {"bootstrap.servers": bootstrap, "default.api.timeout.ms": 20000,
           "fetch.max.wait.ms": 100}
    cfg.update(extra)
    return KafkaConsumer(cfg)


def drain(c: KafkaConsumer, want: int, arrow: bool = False, tries: int = 100) -> list:
    out: list = []
    for _ in range(tries):
        if len(out) >= want:
            break
        if arrow:
            for tp, rb in c.poll_arrow(500).items():
                assert rb.schema == ARROW_SCHEMA
                out.extend((tp.partition, r["offset"], r["key"], r["value"])
                           for r in rb.to_pylist())
        else:
            out.extend((r.partition, r.offset, r.key, r.value)
                       for r in c.poll(500))
    return out


@pytest.fixture
def bs(kafka_broker):
    return kafka_broker.bootstrap


@pytest.mark.parametrize("arrow", [False, True], ids=["records", "arrow"])
def test_poll_returns_what_confluent_produced(bs, arrow):
    topic = unique("kc")
    create(bs, topic, 3)
    produce(bs, topic, 300, partitions=3)
    with consumer(bs, auto_offset_reset="earliest", max_poll_records=50) as c:
        c.assign([TopicPartition(topic, p) for p in range(3)])
        assert c.assignment() == {TopicPartition(topic, p) for p in range(3)}
        got = drain(c, 300, arrow)
        assert len(got) == 300
        for p in range(3):
            mine = [g for g in got if g[0] == p]
            assert [g[1] for g in mine] == list(range(100))
            assert [g[3] for g in mine] == [b"v%d" % i for i in range(p, 300, 3)]
            assert c.position((topic, p)) == 100
        assert c.poll(0) == [] and c.poll_arrow(0) == {}


def test_record_fields_and_max_poll_records(bs):
    topic = unique("kc")
    create(bs, topic)
    produce(bs, topic, 20, ts0=TS0)
    with consumer(bs, auto_offset_reset="earliest", max_poll_records=7) as c:
        c.assign([(topic, 0)])
        first = []
        while not first:
            first = c.poll(1000)
        assert len(first) <= 7
        r = first[0]
        assert (r.topic, r.partition, r.offset, r.key, r.value, r.timestamp, r.timestamp_type,
                r.headers) == (topic, 0, 0, b"k0", b"v0", TS0, 0, (("h", b"0"),))


def test_auto_offset_reset_latest_and_none(bs):
    topic = unique("kc")
    create(bs, topic)
    produce(bs, topic, 5)
    with consumer(bs) as c:  # latest (Kafka's default)
        c.assign([(topic, 0)])
        assert c.position((topic, 0)) == 5
        produce(bs, topic, 2)
        assert [g[1] for g in drain(c, 2)] == [5, 6]
    with consumer(bs) as c:
        c.assign([(topic, 0)])
        c.poll(0)
        produce(bs, topic, 2)
        got = drain(c, 2)
        assert [g[1] for g in got] == [7, 8]
    with consumer(bs, auto_offset_reset="none") as c:
        c.assign([(topic, 0)])
        with pytest.raises(NoOffsetForPartitionError):
            c.poll(0)


def test_seek_position_and_seek_to(bs):
    topic = unique("kc")
    create(bs, topic)
    produce(bs, topic, 50)
    with consumer(bs, auto_offset_reset="earliest") as c:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        assert c.position(tp) == 0
        c.seek(tp, 40)
        assert c.position(tp) == 40
        got = drain(c, 10)
        assert [g[1] for g in got] == list(range(40, 50))
        c.seek(tp, 5)
        assert drain(c, 1)[0][1] == 5
        c.seek_to_end([tp])
        assert c.position(tp) == 50
        c.seek_to_beginning()
        assert c.position(tp) == 0
        assert c.beginning_offsets([tp]) == {tp: 0} and c.end_offsets([tp]) == {tp: 50}
        with pytest.raises(IllegalStateError):
            c.seek((topic, 9), 0)
        with pytest.raises(ValueError):
            c.seek(tp, -1)


def test_pause_and_resume(bs):
    topic = unique("kc")
    create(bs, topic, 2)
    produce(bs, topic, 40, partitions=2)
    with consumer(bs, auto_offset_reset="earliest") as c:
        a, b = TopicPartition(topic, 0), TopicPartition(topic, 1)
        c.assign([a, b])
        c.pause([b])
        assert c.paused() == {b}
        got = drain(c, 20)
        got += drain(c, 1, tries=3)  # nothing more: b stays paused
        assert {g[0] for g in got} == {0} and len(got) == 20
        assert c.position(b) == 0
        c.resume([b])
        assert c.paused() == set()
        got = drain(c, 20, arrow=True)
        assert {g[0] for g in got} == {1} and [g[1] for g in got] == list(range(20))


def test_offsets_for_times(bs):
    topic = unique("kc")
    create(bs, topic)
    produce(bs, topic, 10, ts0=TS0)
    with consumer(bs) as c:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        found = c.offsets_for_times({tp: TS0 + 4})
        assert found[tp].offset == 4 and found[tp].timestamp == TS0 + 4
        assert c.offsets_for_times({tp: TS0 + 1000})[tp] is None
        with pytest.raises(ValueError):
            c.offsets_for_times({tp: -5})


def test_commit_round_trip_and_confluent_agrees(bs):
    topic, group = unique("kc"), unique("g")
    create(bs, topic, 2)
    produce(bs, topic, 20, partitions=2)
    a, b = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with consumer(bs, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False) as c:
        c.assign([a, b])
        assert c.committed([a, b]) == {a: None, b: None}
        drain(c, 20)
        c.commit_sync()
        assert c.committed([a, b]) == {a: OffsetAndMetadata(10), b: OffsetAndMetadata(10)}
        c.commit_sync({a: 3, b: OffsetAndMetadata(4, "meta")})
        assert c.committed([a, b]) == {a: OffsetAndMetadata(3), b: OffsetAndMetadata(4)}
        seen = []
        c.commit_async({a: 6}, callback=lambda offs, err: seen.append((offs, err)))
        assert seen == [({a: 6}, None)]
    ck = CKConsumer({"bootstrap.servers": bs, "group.id": group})
    try:
        got = ck.committed([CKTopicPartition(topic, 0), CKTopicPartition(topic, 1)], timeout=20)
        assert [(t.partition, t.offset) for t in got] == [(0, 6), (1, 4)]
    finally:
        ck.close()
    # A new consumer of the group starts from the committed offsets.
    with consumer(bs, group_id=group, auto_offset_reset="latest") as c:
        c.assign([a, b])
        assert (c.position(a), c.position(b)) == (6, 4)
        got = drain(c, 10)
        assert sorted(g[1] for g in got if g[0] == 0) == [6, 7, 8, 9]


def test_auto_commit(bs):
    topic, group = unique("kc"), unique("g")
    create(bs, topic)
    produce(bs, topic, 10)
    tp = TopicPartition(topic, 0)
    with consumer(bs, group_id=group, auto_offset_reset="earliest",
                  auto_commit_interval_ms=0) as c:
        c.assign([tp])
        drain(c, 10)
        c.poll(0)  # the interval passed: this poll commits the position
        assert c.committed([tp]) == {tp: OffsetAndMetadata(10)}
        c.seek(tp, 2)
    # close() committed the position left by seek()
    with consumer(bs, group_id=group, enable_auto_commit=False) as c:
        assert c.committed([tp]) == {tp: OffsetAndMetadata(2)}


def test_no_group_no_commit_and_no_subscribe(bs):
    with consumer(bs) as c:
        with pytest.raises(KafkaError, match="group.id"):
            c.commit_sync({("t", 0): 1})
        with pytest.raises(KafkaError, match="group.id"):
            c.subscribe(["t"])
        with pytest.raises(IllegalStateError):
            c.poll(0)
    with pytest.raises(IllegalStateError):
        c.poll(0)


def test_config_keys():
    cfg = ConsumerConfig({"bootstrap.servers": "x:1", "group.protocol": "consumer",
                          "partition.assignment.strategy":
                          "org.apache.kafka.clients.consumer.RoundRobinAssignor,sticky"})
    assert cfg["partition.assignment.strategy"] == [
        "org.apache.kafka.clients.consumer.RoundRobinAssignor", "sticky"]
    with pytest.raises(ConfigError):
        ConsumerConfig({"group.protocol": "nope"})
    with pytest.raises((ConfigError, ValueError, KeyError)):
        KafkaConsumer({"bootstrap.servers": "x:1", "partition.assignment.strategy": "bogus"})


@pytest.mark.parametrize("arrow", [False, True], ids=["records", "arrow"])
def test_read_committed(broker_factory, arrow):
    broker = broker_factory(name="txn")
    topic = unique("txn")
    create(broker.bootstrap, topic)
    broker.stop()
    write_transactions(broker.log_dir, topic)
    broker.start()
    for mpfb in (1 << 20, 1):
        with consumer(broker.bootstrap, isolation_level="read_committed",
                      auto_offset_reset="earliest", max_partition_fetch_bytes=mpfb) as c:
            c.assign([(topic, 0)])
            got = drain(c, 7, arrow)
            assert [g[3] for g in got] == [b"a", b"b", b"c", b"d", b"f", b"g", b"j"]
            assert [g[1] for g in got] == [0, 1, 2, 3, 5, 7, 13]
            assert c.end_offsets([(topic, 0)]) == {TopicPartition(topic, 0): 14}
    with consumer(broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        assert len(drain(c, 11, arrow)) == 11


def test_prefetch_seek_and_mixed_poll_modes_keep_offsets_in_order(bs):
    # Small responses (many in flight and buffered), seeks back and forth, and the two poll
    # modes alternating: each offset comes once, in order, from wherever seek() put it.
    topic = unique("kc")
    create(bs, topic, 2)
    produce(bs, topic, 4000, partitions=2)
    a, b = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with consumer(bs, auto_offset_reset="earliest", max_partition_fetch_bytes=2000,
                  max_poll_records=37) as c:
        c.assign([a, b])
        seen: dict[int, list[int]] = {0: [], 1: []}

        def step(i):
            if i % 2:
                for tp, rb in c.poll_arrow(500).items():
                    seen[tp.partition].extend(rb.column("offset").to_pylist())
            else:
                for r in c.poll(500):
                    seen[r.partition].append(r.offset)

        i = 0
        while len(seen[0]) < 500:
            step(i)
            i += 1
        c.seek(a, 100)
        seen[0].clear()
        while len(seen[0]) < 300:
            step(i)
            i += 1
        assert seen[0] == list(range(100, 100 + len(seen[0])))
        c.pause([b])
        mark = len(seen[1])
        c.seek(a, 1500)
        seen[0].clear()
        while len(seen[0]) < 500:
            step(i)
            i += 1
        assert len(seen[1]) == mark  # paused: nothing of b
        assert seen[0] == list(range(1500, 1500 + len(seen[0])))
        c.resume([b])
        while len(seen[1]) < 2000 or len(seen[0]) < 500:
            step(i)
            i += 1
        assert seen[1] == list(range(2000))
        assert c.position(b) == 2000
