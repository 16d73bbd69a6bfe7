"""The producer through a fault-injecting proxy (I8, I9, I10 end to end, I13 under real
sockets): responses dropped after the broker wrote the batch, delays, a black hole that
forces request timeouts, connection resets. Pass: every future resolves exactly once within
delivery.timeout.ms, no duplicates and no reordering within a partition, and every
acknowledged record is in the log."""

import socket
import threading
import time
import uuid

import pytest
from test_client_producer_broker import create_topic, read_kafka_python

from broker.client.producer import KafkaProducer
from broker.protocol import ApiKey
from tests.support.fault_proxy import FaultProxy


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def proxied(broker_factory):
    """A broker that advertises the proxy's address, so every client byte goes through it."""
    port = free_port()
    proxy = FaultProxy("127.0.0.1", port).start()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{port}",
                             "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"},
                            name="proxied")
    yield broker, proxy, f"127.0.0.1:{proxy.port}"
    proxy.stop()


class Tracker:
    """Counts completions per record; the test's own history of what was acknowledged."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = {}
        self.acked = {}
        self.failed = {}

    def cb(self, value):
        def on_delivery(err, md):
            with self.lock:
                self.calls[value] = self.calls.get(value, 0) + 1
                if err is None:
                    self.acked[value] = (md.partition, md.offset)
                else:
                    self.failed[value] = err
        return on_delivery


def check_history(bootstrap, topic, partitions, tracker, sent):
    assert all(tracker.calls.get(v) == 1 for v in sent), "a callback fired twice or never"
    got = read_kafka_python(bootstrap, topic, partitions, len(tracker.acked))
    values = [v for _p, _o, _k, v, _h in got]
    assert len(values) == len(set(values)), "duplicates in the log"
    for v, (p, o) in tracker.acked.items():
        assert (p, o, None, v, ()) in got, f"acknowledged {v!r} missing at {p}/{o}"
    for part in range(partitions):
        seq = [int(v.split(b"-")[1]) for p, _o, _k, v, _h in got if p == part and v[:2] == b"r-"]
        assert seq == sorted(seq), "reordered within a partition"


def produce(p, topic, n, tracker, partitions=1, pause_every=0, pause=0.0, start=0):
    sent = []
    for i in range(start, start + n):
        v = b"r-%06d" % i
        sent.append(v)
        p.send(topic, v, partition=i % partitions, on_delivery=tracker.cb(v))
        if pause_every and i % pause_every == pause_every - 1:
            time.sleep(pause)
    return sent


def test_i8_response_dropped_after_the_write_is_deduplicated(proxied):
    broker, proxy, bootstrap = proxied
    topic = "i8-" + uuid.uuid4().hex[:6]
    tracker = Tracker()
    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, retry_backoff_ms=20,
                       request_timeout_ms=3000, delivery_timeout_ms=20000) as p:
        p.send(topic, b"w-0").get(20)  # metadata, producer id, connection
        proxy.drop_response(ApiKey.PRODUCE, count=3)
        sent = produce(p, topic, 300, tracker, pause_every=50, pause=0.05)
        p.flush(30)
    assert proxy.dropped == 3
    assert len(tracker.acked) == 300 and not tracker.failed
    check_history(broker.bootstrap, topic, 1, tracker, sent)


def test_i9_black_hole_then_recovery_keeps_sequences(proxied):
    broker, proxy, bootstrap = proxied
    topic = "i9-" + uuid.uuid4().hex[:6]
    create_topic(broker.bootstrap, topic, 2)
    tracker = Tracker()
    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, retry_backoff_ms=50,
                       request_timeout_ms=800, delivery_timeout_ms=15000,
                       reconnect_backoff_max_ms=200) as p:
        p.send(topic, b"w-0", partition=0).get(20)
        sent = produce(p, topic, 100, tracker, partitions=2)
        proxy.black_hole()
        sent += produce(p, topic, 100, tracker, partitions=2, start=100)
        time.sleep(1.5)  # scenario: the hole outlasts request.timeout.ms; retries go into it too
        proxy.pass_through()
        proxy.reset()  # drop the black-holed connections
        proxy.pass_through()
        with proxy._lock:
            proxy._mode = "pass"
        p.flush(30)
    assert not tracker.failed and p.metrics()["record-retry-total"] > 0
    check_history(broker.bootstrap, topic, 2, tracker, sent)


def test_delays_and_resets_lose_and_duplicate_nothing(proxied):
    broker, proxy, bootstrap = proxied
    topic = "mix-" + uuid.uuid4().hex[:6]
    create_topic(broker.bootstrap, topic, 3)
    tracker = Tracker()
    t0 = time.monotonic()
    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=1, batch_size=2048,
                       retry_backoff_ms=20, request_timeout_ms=1500, delivery_timeout_ms=10000,
                       reconnect_backoff_max_ms=100) as p:
        p.send(topic, b"w-0", partition=0).get(20)
        proxy.delay(150)
        sent = produce(p, topic, 600, tracker, partitions=3, pause_every=100, pause=0.05)
        proxy.delay(0)
        proxy.reset()
        with proxy._lock:
            proxy._mode = "pass"
        proxy.drop_response(ApiKey.PRODUCE, count=2)
        sent += produce(p, topic, 600, tracker, partitions=3, pause_every=100, pause=0.05,
                        start=600)
        p.flush(30)
    assert time.monotonic() - t0 < 40
    assert len(tracker.calls) == len(sent)
    check_history(broker.bootstrap, topic, 3, tracker, sent)


def test_delivery_timeout_bounds_every_future(proxied):
    broker, proxy, bootstrap = proxied
    topic = "dt-" + uuid.uuid4().hex[:6]
    tracker = Tracker()
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=400,
                      delivery_timeout_ms=1500, retry_backoff_ms=50)
    p.send(topic, b"w-0").get(20)
    proxy.black_hole()
    t0 = time.monotonic()
    sent = produce(p, topic, 50, tracker)
    deadline = t0 + 6
    while len(tracker.calls) < 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    elapsed = time.monotonic() - t0
    assert len(tracker.calls) == 50 and len(tracker.failed) == 50
    assert elapsed < 1.5 + 1.0  # within delivery.timeout.ms (plus scheduling slack)
    with proxy._lock:
        proxy._mode = "pass"
    proxy.reset()
    with proxy._lock:
        proxy._mode = "pass"
    # After the unresolved sequences the producer bumps its epoch and carries on.
    f = p.send(topic, b"r-000100")
    assert f.get(20).offset >= 1
    p.close(10)
    assert all(tracker.calls[v] == 1 for v in sent)
