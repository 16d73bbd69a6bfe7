"""broker.client.consumer (fetcher.py, offsets.py) against the REAL broker subprocess.

Data is produced by confluent-kafka (every codec; keys, null values, headers, explicit
timestamps) and by this project's KafkaProducer (send and send_arrow), then read back in
ranges by ``fetch_arrow`` / ``RangeFetcher`` and compared field by field with what was
produced and with a confluent-kafka Consumer; offset lookups are compared with
confluent's ``get_watermark_offsets`` / ``offsets_for_times``. read_committed runs over a
log holding transactions and markers written offline through ``broker.log`` (clients may
not write control batches), then served by the broker. Data loss: DeleteRecords, ranges
past the log end, a deleted topic. Faults: a Fetch response dropped by a proxy.
"""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest

from broker.client.consumer import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    ConsumerConfig,
    ConsumerNetworkClient,
    DataLoss,
    DataLossError,
    OffsetOutOfRangeError,
    RangeFetcher,
    TopicPartition,
    fetch_arrow,
    list_offsets,
    list_topics,
    offsets_for_times,
    partitions_for,
)
from broker.client.consumer import fetcher as fetcher_mod
from broker.client.consumer import offsets as offsets_mod
from broker.client.consumer.fetcher import aborted_ranges, scan_entries
from broker.client.errors import KafkaError
from broker.client.producer import KafkaProducer
from broker.config import ConfigError
from broker.protocol import ApiKey, ErrorCode
from broker.record.batch import encode_batch
from broker.record.control import ControlRecordType, encode_end_txn_marker_batch
from broker.record.limits import INT64_MAX
from tests.support.txn_log import write_transactions

TS0 = 1_700_000_000_000


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def rows_of(batches) -> list[dict]:
    """Decoded rows with headers as lists of (key, value) tuples (None when absent)."""
    out = []
    for rb in batches:
        for r in rb.to_pylist():
            if r.get("headers") is not None:
                r["headers"] = [(h["key"], h["value"]) for h in r["headers"]]
            out.append(r)
    return out


def record(i: int) -> tuple:
    """(key, value, headers, timestamp) of the i-th test record: some keys and values
    null, some headers (one with a null value), explicit increasing timestamps."""
    key = None if i % 5 == 0 else b"key-%d" % (i % 13)
    value = None if i % 11 == 3 else (b"value-%05d-" % i) * (1 + i % 4)
    headers = None
    if i % 3 == 0:
        headers = [("h1", b"%d" % i), ("h2", None if i % 2 else b"x" * (i % 7))]
    return key, value, headers, TS0 + i * 10


def produce_confluent(bootstrap: str, topic: str, codec: str, n: int,
                      partition: int = 0, first: int = 0) -> list[dict]:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                  "linger.ms": 5, "batch.num.messages": 37})
    offsets: dict[int, int] = {}

    def on_delivery(err, msg, i):
        assert err is None, err
        offsets[i] = msg.offset()

    for i in range(first, first + n):
        key, value, headers, ts = record(i)
        p.produce(topic, value=value, key=key, headers=headers, timestamp=ts, partition=partition,
                  on_delivery=lambda err, msg, i=i: on_delivery(err, msg, i))
        if i % 50 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    out = []
    for i in range(first, first + n):
        key, value, headers, ts = record(i)
        out.append({"offset": offsets[i], "timestamp": ts, "timestamp_type": 0, "key": key,
                    "value": value, "headers": headers})
    return sorted(out, key=lambda r: r["offset"])


def read_confluent(bootstrap: str, topic: str, partition: int, start: int, end: int,
                   isolation: str = "read_uncommitted") -> list[dict]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "auto.offset.reset": "earliest"})
    c.assign([CTP(topic, partition, start)])
    out = []
    deadline = time.time() + 20
    while time.time() < deadline:
        m = c.poll(0.2)
        if m is None:
            if out and out[-1]["offset"] >= end - 1:
                break
            continue
        assert not m.error(), m.error()
        if m.offset() >= end:
            break
        ts_type, ts = m.timestamp()
        out.append({"offset": m.offset(), "timestamp": ts, "timestamp_type": ts_type - 1,
                    "key": m.key(), "value": m.value(),
                    "headers": list(m.headers()) if m.headers() else None})
    c.close()
    return out


@pytest.fixture(scope="module")
def bootstrap(kafka_broker):
    return kafka_broker.bootstrap


def cfg(bootstrap: str, **extra) -> dict:
    return {"bootstrap.servers": bootstrap, **extra}


# -- unit level: the response walk and the aborted ranges -----------------------------------

def _batch(base: int, n: int, **kw) -> bytes:
    return encode_batch([(b"k", b"v%d" % i, TS0) for i in range(n)], base_offset=base, **kw)


def test_scan_entries_next_offset_end_and_partial_tail():
    buf = _batch(0, 3) + _batch(3, 2) + _batch(10, 4)  # a gap 5..9 (compaction)
    scan = scan_entries(memoryview(buf), INT64_MAX)
    assert scan.next_offset == 14 and not scan.reached_end
    scan = scan_entries(memoryview(buf[:-5]), INT64_MAX)  # the last batch cut
    assert scan.next_offset == 5 and not scan.reached_end
    scan = scan_entries(memoryview(buf), 7)  # the batch at 10 starts past the end
    assert scan.next_offset == 5 and scan.reached_end
    scan = scan_entries(memoryview(_batch(10, 4)), 7)
    assert scan.next_offset is None and scan.reached_end
    assert scan_entries(memoryview(b""), 7) == (None, False, [])


def test_aborted_ranges_end_at_the_producers_abort_marker():
    def marker(kind, pid, base):
        return encode_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0,
                                           coordinator_epoch=0, timestamp=TS0, base_offset=base)

    txn = dict(producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    buf = (_batch(0, 2, **txn) + marker(ControlRecordType.ABORT, 7, 2)
           + _batch(3, 1, **txn) + marker(ControlRecordType.COMMIT, 7, 4)
           + _batch(5, 1, **txn) + marker(ControlRecordType.ABORT, 7, 6) + _batch(7, 1, **txn))
    scan = scan_entries(memoryview(buf), INT64_MAX, {7})
    assert scan.aborts == [(7, 2), (7, 6)] and scan.next_offset == 8

    class T:
        def __init__(self, pid, first):
            self.producer_id, self.first_offset = pid, first

    got = aborted_ranges([T(7, 0), T(7, 5), T(7, 7), T(9, 1)], scan.aborts)
    assert got == [(7, 0, 2), (7, 5, 6), (7, 7, INT64_MAX), (9, 1, INT64_MAX)]


def test_config_keys_and_errors():
    c = ConsumerConfig({"bootstrap.servers": "h:1", "isolation.level": "READ_COMMITTED",
                        "group.id": "spark-group"}, fetch_max_bytes=1000)
    assert c.isolation_level == 1 and c["fetch.max.bytes"] == 1000
    assert c["receive.buffer.bytes"] == -1 and c["allow.auto.create.topics"] is False
    with pytest.raises(ConfigError):
        ConsumerConfig({"bootstrap.servers": "h:1", "fetch.max.byte": 1})
    with pytest.raises(ConfigError):
        ConsumerConfig({"bootstrap.servers": "h:1", "security.protocol": "BOGUS"})


# -- ranges of confluent-produced data, every codec -----------------------------------------

@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_fetch_ranges_match_what_confluent_produced(bootstrap, codec):
    topic = topic_name(f"fetch-{codec}")
    create_topic(bootstrap, topic)
    expected = produce_confluent(bootstrap, topic, codec, 400)
    assert [r["offset"] for r in expected] == list(range(400))
    conf = cfg(bootstrap, client_id=f"fetch-test-{codec}")
    ranges = [(0, 400), (37, 211), (100, 101), (399, 400), (5, 5)]
    for start, end in ranges:
        got = rows_of(fetch_arrow(conf, topic, 0, start, end))
        assert got == expected[start:end], (start, end)
    # Many small fetches (one batch each, KIP-74), starting inside a batch.
    with RangeFetcher(conf, max_partition_fetch_bytes=1, max_rows_per_batch=16) as f:
        got = rows_of(f.fetch(topic, 0, 3, 397))
        assert got == expected[3:397]
        assert f.stats.fetches >= 400 // 37 and f.stats.records == 394
        assert f.stats.next_offset == 397 and f.stats.lost == []
        assert f.stats.high_watermark == 400
        assert rows_of(f.fetch(topic, 0, 0, 1)) == expected[:1]  # the fetcher is reusable
    if codec == "zstd":
        assert read_confluent(bootstrap, topic, 0, 50, 150) == expected[50:150]


def test_headers_can_be_left_out(bootstrap):
    topic = topic_name("no-headers")
    create_topic(bootstrap, topic)
    expected = produce_confluent(bootstrap, topic, "lz4", 30)
    batches = list(fetch_arrow(cfg(bootstrap), topic, 0, 0, 30, include_headers=False))
    assert all("headers" not in rb.schema.names for rb in batches)
    got = rows_of(batches)
    assert got == [{k: v for k, v in r.items() if k != "headers"} for r in expected]


# -- our own producer, record by record and columnar ----------------------------------------

def test_fetch_what_kafka_producer_sent_and_send_arrow(bootstrap):
    topic = topic_name("own-producer")
    create_topic(bootstrap, topic, 2)
    n = 3000
    keys = pa.array([None if i % 10 == 0 else b"k%d" % (i % 97) for i in range(n)], pa.binary())
    values = pa.array([None if i % 17 == 5 else b"v%06d" % i for i in range(n)], pa.binary())
    headers = pa.array([[{"key": "i", "value": b"%d" % i}] if i % 2 else None for i in range(n)],
                       pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    ts = pa.array([TS0 + i for i in range(n)], pa.int64())
    with KafkaProducer(bootstrap_servers=bootstrap, compression_type="zstd", batch_size=4096) as p:
        first = [p.send(topic, b"single-%d" % i, key=None if i % 2 else b"sk",
                        partition=1, timestamp_ms=TS0 - 100 + i,
                        headers=[("a", b"b")] if i == 3 else None) for i in range(20)]
        res = p.send_arrow(topic, values, keys=keys, headers=headers, timestamps=ts,
                           partitions=pa.array([1] * n, pa.int32())).result(60)
        p.flush(30)
    assert [f.get(10).offset for f in first] == list(range(20))
    assert res.partitions[1].first_offset == 20 and res.partitions[1].last_offset == 20 + n - 1
    got = rows_of(fetch_arrow(cfg(bootstrap), topic, 1, 0, 20 + n))
    assert [r["offset"] for r in got] == list(range(20 + n))
    for i, r in enumerate(got[:20]):
        assert (r["key"], r["value"], r["timestamp"]) == (
            None if i % 2 else b"sk", b"single-%d" % i, TS0 - 100 + i)
        assert r["headers"] == ([("a", b"b")] if i == 3 else None)
    for i, r in enumerate(got[20:]):
        assert r["key"] == keys[i].as_py() and r["value"] == values[i].as_py()
        assert r["timestamp"] == TS0 + i and r["timestamp_type"] == 0
        assert r["headers"] == ([("i", b"%d" % i)] if i % 2 else None)
    # The same rows as confluent-kafka reads them.
    assert read_confluent(bootstrap, topic, 1, 1000, 1400) == got[1000:1400]
    # The other partition is empty: its range [0, 0) yields nothing.
    assert rows_of(fetch_arrow(cfg(bootstrap), topic, 0, 0, 0)) == []


def test_pipelining_keeps_one_fetch_in_flight_ahead(bootstrap):
    topic = topic_name("pipeline")
    create_topic(bootstrap, topic)
    produce_confluent(bootstrap, topic, "none", 370)  # 10 batches of 37
    with RangeFetcher(cfg(bootstrap), max_partition_fetch_bytes=1) as f:
        sends = []
        real_send = f.client.send

        def counting_send(node, api_key, *a, **kw):
            if api_key == ApiKey.FETCH:
                sends.append(node)
            return real_send(node, api_key, *a, **kw)

        f.client.send = counting_send
        at_yield = []
        for _rb in f.fetch(topic, 0, 0, 370):
            at_yield.append(len(sends))
        assert len(at_yield) == 10  # one batch per response
        # While response k is decoded, request k+1 is already out; none past the end.
        assert at_yield == [k + 2 for k in range(9)] + [10]
        assert len(sends) == f.stats.fetches == 10


def test_a_finished_fetch_leaves_no_reference_cycle(bootstrap):
    """A completed request lets go of its callback: no ClientRequest -> future -> response
    -> request cycle keeps a response (and its receive buffer, megabytes for a large
    Fetch) alive until the cyclic collector runs; plain reference counting frees it."""
    import gc

    from broker.client.network import ClientResponse

    topic = topic_name("nocycle")
    create_topic(bootstrap, topic)
    produce_confluent(bootstrap, topic, "none", 370)
    with RangeFetcher(cfg(bootstrap), max_partition_fetch_bytes=1) as f:
        list(f.fetch(topic, 0, 0, 10))  # connections, metadata and versions settled
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            rows = sum(rb.num_rows for rb in f.fetch(topic, 0, 0, 370))
            gc.collect()
            leaked = [o for o in gc.garbage if isinstance(o, ClientResponse)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    assert rows == 370 and f.stats.fetches == 10
    assert leaked == []


# -- offsets and topics ---------------------------------------------------------------------

def test_list_offsets_match_confluent(bootstrap):
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP
    topic = topic_name("offsets")
    create_topic(bootstrap, topic, 2)
    produce_confluent(bootstrap, topic, "none", 100, partition=0)
    produce_confluent(bootstrap, topic, "gzip", 60, partition=1, first=100)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    conf = cfg(bootstrap)
    earliest = list_offsets(conf, {tp: EARLIEST for tp in tps})
    latest = list_offsets(conf, {tp: LATEST for tp in tps})
    committed_latest = list_offsets(conf, {tp: LATEST for tp in tps},
                                    isolation_level="read_committed")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + topic})
    try:
        for tp in tps:
            low, high = c.get_watermark_offsets(CTP(tp.topic, tp.partition), timeout=10)
            assert (earliest[tp].offset, latest[tp].offset) == (low, high)
            assert committed_latest[tp].offset == high
        probes = [TS0 - 5, TS0, TS0 + 1, TS0 + 555, TS0 + 995, TS0 + 1005, TS0 + 1599,
                  TS0 + 10**6]
        for ts in probes:
            ours = offsets_for_times(conf, {tp: ts for tp in tps})
            theirs = c.offsets_for_times([CTP(tp.topic, tp.partition, ts) for tp in tps], 10)
            for tp, t in zip(tps, theirs):
                assert (ours[tp].offset if ours[tp] is not None else -1) == t.offset, (tp, ts)
    finally:
        c.close()
    # -3: the record with the largest timestamp; timestamps of the lookups by time.
    top = list_offsets(conf, {tp: MAX_TIMESTAMP for tp in tps})
    assert top[tps[0]] == (99, TS0 + 990, top[tps[0]].leader_epoch)
    assert top[tps[1]].offset == 59 and top[tps[1]].timestamp == TS0 + 1590
    by_time = offsets_for_times(conf, {tps[0]: TS0 + 555})
    assert by_time[tps[0]].offset == 56 and by_time[tps[0]].timestamp == TS0 + 560
    # A shared client is reused and left open.
    with ConsumerNetworkClient(conf) as client:
        a = list_offsets(client, {(topic, 0): EARLIEST})
        b = list_offsets(client, {(topic, 0): LATEST})
        assert a[(topic, 0)].offset == 0 and b[(topic, 0)].offset == 100
        assert not client.closed


def test_list_topics_and_partitions_for(bootstrap):
    t1, t2 = topic_name("listed"), topic_name("listed")
    create_topic(bootstrap, t1, 3)
    create_topic(bootstrap, t2, 1)
    missing = topic_name("missing")
    topics = list_topics(cfg(bootstrap))
    assert topics[t1] == 3 and topics[t2] == 1 and missing not in topics
    parts = partitions_for(cfg(bootstrap), [t1, missing])
    assert list(parts) == [t1]
    assert [p.partition for p in parts[t1]] == [0, 1, 2]
    assert all(p.leader >= 0 and p.error == 0 for p in parts[t1])
    assert missing not in list_topics(cfg(bootstrap))  # asking never created it


def test_unknown_partition_fails_fast(bootstrap, monkeypatch):
    monkeypatch.setattr(offsets_mod, "UNKNOWN_TOPIC_GRACE_MS", 300.0)
    topic = topic_name("unknown")
    start = time.monotonic()
    with pytest.raises(KafkaError) as exc:
        list_offsets(cfg(bootstrap), {(topic, 0): LATEST}, timeout_ms=20000)
    assert exc.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and topic in str(exc.value)
    assert time.monotonic() - start < 10


# -- data loss ------------------------------------------------------------------------------

def _delete_records(raw_client, topic: str, offset: int) -> None:
    body = raw_client().request(ApiKey.DELETE_RECORDS, 1, {
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}],
        "timeout_ms": 5000})
    assert body.topics[0].partitions[0].error_code == 0
    assert body.topics[0].partitions[0].low_watermark == offset


def test_offset_out_of_range_after_delete_records(bootstrap, raw_client):
    topic = topic_name("deleted-records")
    create_topic(bootstrap, topic)
    expected = produce_confluent(bootstrap, topic, "snappy", 100)
    _delete_records(raw_client, topic, 50)
    with pytest.raises(OffsetOutOfRangeError) as exc:
        list(fetch_arrow(cfg(bootstrap), topic, 0, 10, 80))
    e = exc.value
    assert (e.topic, e.partition, e.start_offset, e.end_offset) == (topic, 0, 10, 80)
    assert (e.lost_start, e.lost_end, e.log_start_offset, e.high_watermark) == (10, 50, 50, 100)
    assert e.code == ErrorCode.OFFSET_OUT_OF_RANGE and f"{topic}-0" in str(e)
    assert isinstance(e, DataLossError)
    # With a callback: reported once, and the rows that remain.
    lost: list[DataLoss] = []
    got = rows_of(fetch_arrow(cfg(bootstrap), topic, 0, 10, 80, on_data_loss=lost.append))
    assert got == expected[50:80]
    assert [(d.topic, d.partition, d.start, d.end) for d in lost] == [(topic, 0, 10, 50)]
    assert "starts at offset 50" in lost[0].reason
    lost.clear()
    assert rows_of(fetch_arrow(cfg(bootstrap), topic, 0, 0, 40, on_data_loss=lost.append)) == []
    assert [(d.start, d.end) for d in lost] == [(0, 40)]
    assert list_offsets(cfg(bootstrap), {(topic, 0): EARLIEST})[(topic, 0)].offset == 50


def test_range_past_the_end_of_the_log(bootstrap):
    topic = topic_name("short-log")
    create_topic(bootstrap, topic)
    expected = produce_confluent(bootstrap, topic, "none", 100)
    conf = cfg(bootstrap, fetch_max_wait_ms=50)
    got = []
    with pytest.raises(DataLossError) as exc:
        for rb in fetch_arrow(conf, topic, 0, 90, 120):
            got.append(rb)
    assert rows_of(got) == expected[90:100]  # the rows before the loss came through
    assert (exc.value.lost_start, exc.value.lost_end) == (100, 120)
    assert "high watermark" in str(exc.value) and f"{topic}-0" in str(exc.value)
    lost: list[DataLoss] = []
    with RangeFetcher(conf, on_data_loss=lost.append) as f:
        assert rows_of(f.fetch(topic, 0, 95, 130)) == expected[95:100]
        assert [(d.start, d.end) for d in lost] == [(100, 130)]
        assert f.stats.next_offset == 130 and f.stats.lost == lost
    # Starting past the end: OFFSET_OUT_OF_RANGE.
    with pytest.raises(OffsetOutOfRangeError) as exc:
        list(fetch_arrow(conf, topic, 0, 105, 120))
    assert (exc.value.lost_start, exc.value.lost_end, exc.value.high_watermark) == (105, 120, 100)


def test_deleted_topic_is_data_loss(bootstrap, monkeypatch):
    from confluent_kafka.admin import AdminClient
    monkeypatch.setattr(fetcher_mod, "UNKNOWN_TOPIC_GRACE_MS", 300.0)
    topic = topic_name("deleted-topic")
    create_topic(bootstrap, topic)
    produce_confluent(bootstrap, topic, "none", 20)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    lost: list[DataLoss] = []
    assert rows_of(fetch_arrow(cfg(bootstrap), topic, 0, 0, 20, on_data_loss=lost.append)) == []
    assert [(d.start, d.end) for d in lost] == [(0, 20)] and "no longer exists" in lost[0].reason
    with pytest.raises(DataLossError):
        list(fetch_arrow(cfg(bootstrap), topic, 0, 0, 20))


# -- read_committed over a log with transactions --------------------------------------------

def test_read_committed_skips_aborted_transactions(broker_factory):
    broker = broker_factory(name="txn")
    topic = topic_name("txn")
    create_topic(broker.bootstrap, topic)
    broker.stop()
    write_transactions(broker.log_dir, topic)
    broker.start()
    bs = broker.bootstrap
    values = lambda rows: [r["value"] for r in rows]  # noqa: E731
    tp = (topic, 0)
    assert list_offsets(cfg(bs), {tp: LATEST}, isolation_level="read_committed")[tp].offset == 14
    assert list_offsets(cfg(bs), {tp: LATEST})[tp].offset == 15
    committed = cfg(bs, isolation_level="read_committed")
    want = [b"a", b"b", b"c", b"d", b"f", b"g", b"j"]
    for mpfb in (1 << 20, 1):  # one response; one batch per response (markers in later ones)
        got = rows_of(fetch_arrow(committed, topic, 0, 0, 14, max_partition_fetch_bytes=mpfb))
        assert values(got) == want, mpfb
        assert [r["offset"] for r in got] == [0, 1, 2, 3, 5, 7, 13]
        assert values(rows_of(fetch_arrow(committed, topic, 0, 4, 12,
                                          max_partition_fetch_bytes=mpfb))) == [b"f", b"g"]
    assert values(rows_of(fetch_arrow(cfg(bs), topic, 0, 0, 15))) == [
        b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"i", b"j", b"k"]
    # Ranges holding only markers or aborted data: nothing, and no data loss.
    for start, end in ((6, 7), (10, 13), (12, 13)):
        with RangeFetcher(committed) as f:
            assert rows_of(f.fetch(topic, 0, start, end)) == [] and f.stats.lost == []
    # confluent-kafka agrees.
    theirs = read_confluent(bs, topic, 0, 0, 14, isolation="read_committed")
    assert values(theirs) == want


# -- faults ---------------------------------------------------------------------------------

def test_fetch_resumes_after_a_dropped_response(broker_factory):
    import socket

    from tests.support.fault_proxy import FaultProxy

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proxy = FaultProxy("127.0.0.1", port).start()
    try:
        broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{port}",
                                 "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"},
                                name="proxied")
        bs = f"127.0.0.1:{proxy.port}"
        topic = topic_name("dropped")
        create_topic(bs, topic)
        expected = produce_confluent(bs, topic, "lz4", 300)
        got = []
        with RangeFetcher(cfg(bs, retry_backoff_ms=10), max_partition_fetch_bytes=1) as f:
            for i, rb in enumerate(f.fetch(topic, 0, 0, 300)):
                if i == 2:
                    proxy.drop_response(ApiKey.FETCH, count=2)
                got.append(rb)
        assert rows_of(got) == expected  # each record exactly once, in order
        assert proxy.dropped >= 1
    finally:
        proxy.stop()
