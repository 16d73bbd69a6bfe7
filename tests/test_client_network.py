"""NetworkClient against a scripted fake broker: ApiVersions negotiation (with the v0
fallback), in-order responses, throttle_time_ms honoured, request timeouts, reconnect
backoff, and MetadataUpdater / Metadata over the same connection."""

import socket
import threading
import time

import pytest

from broker.client.errors import KafkaTimeoutError, NetworkError, RequestTimedOutError
from broker.client.metadata import Metadata, MetadataUpdater
from broker.client.network import NetworkClient, now_ms
from broker.protocol import ApiKey, FrameDecoder, decode_request, encode_response, request_schema
from tests.support.waits import wait_until


class FakeBroker:
    """Answers ApiVersions (advertising Metadata 0-8, or refusing v3 like an old broker)
    and Metadata (one topic, with a configurable throttle); stays silent when asked."""

    def __init__(self, refuse_v3=False, throttle_ms=0):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.refuse_v3 = refuse_v3
        self.throttle_ms = throttle_ms
        self.silent = False
        self.seen = []
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        self.sock.settimeout(0.2)
        deadline = time.time() + 30
        while not self.stop.is_set() and time.time() < deadline:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn):
        dec = FrameDecoder()
        conn.settimeout(0.2)
        deadline = time.time() + 30
        while not self.stop.is_set() and time.time() < deadline:
            try:
                data = conn.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            for frame in dec.feed(data):
                req = decode_request(frame) if not (
                    self.refuse_v3 and frame[1] == 18 and frame[3] == 3) else None
                if req is None:  # an old broker: UNSUPPORTED_VERSION with a v0 body
                    from broker.protocol import RequestHeader
                    cid = int.from_bytes(frame[4:8], "big")
                    body = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0,
                                                            "max_version": 2}]}
                    conn.sendall(b"".join(bytes(b) for b in encode_response(
                        RequestHeader(18, 0, cid, None), body, version=0)))
                    continue
                h = req.header
                self.seen.append((h.api_key, h.api_version))
                if self.silent:
                    continue
                if h.api_key == ApiKey.API_VERSIONS:
                    body = {"error_code": 0, "api_keys": [
                        {"api_key": 18, "min_version": 0, "max_version": 3},
                        {"api_key": 3, "min_version": 0, "max_version": 8}]}
                else:
                    body = {"throttle_time_ms": self.throttle_ms, "brokers": [
                        {"node_id": 7, "host": "127.0.0.1", "port": self.port}],
                        "cluster_id": "c", "controller_id": 7, "topics": [
                        {"error_code": 0, "name": "t", "partitions": [
                            {"error_code": 0, "partition_index": 0, "leader_id": 7,
                             "replica_nodes": [7], "isr_nodes": [7]}]}]}
                conn.sendall(b"".join(bytes(b) for b in encode_response(h, body)))

    def close(self):
        self.stop.set()
        self.sock.close()


def metadata_body(version, topics=("t",)):
    schema = request_schema(ApiKey.METADATA, version)
    return schema.cls(topics=[schema.structs["MetadataRequestTopic"](name=t) for t in topics])


def wait_ready(client, node, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if client.ready(node, now_ms()):
            return True
        client.poll(20)
    return False


@pytest.mark.parametrize("refuse_v3", [False, True])
def test_negotiation_and_pipelined_requests(refuse_v3):
    fb = FakeBroker(refuse_v3=refuse_v3)
    c = NetworkClient(client_id="t")
    c.add_node(1, "127.0.0.1", fb.port)
    assert wait_ready(c, 1)
    assert c.api_version(1, ApiKey.METADATA, 12) == 8
    assert c.api_version(1, ApiKey.PRODUCE, 11) is None  # not advertised
    got = []
    for _ in range(3):
        c.send(1, ApiKey.METADATA, metadata_body, our_max=8, callback=got.append)
    deadline = time.time() + 5
    while len(got) < 3 and time.time() < deadline:
        c.poll(50)
    assert [r.request.correlation_id for r in got] == sorted(r.request.correlation_id for r in got)
    assert all(r.error is None and r.body.topics[0].name == "t" for r in got)
    if refuse_v3:
        assert (18, 2) in fb.seen  # retried with the version the broker named
    c.close()
    fb.close()


def test_throttle_time_delays_the_next_send():
    fb = FakeBroker(throttle_ms=400)
    c = NetworkClient()
    c.add_node(1, "127.0.0.1", fb.port)
    assert wait_ready(c, 1)
    done = []
    c.send(1, ApiKey.METADATA, metadata_body, our_max=8, callback=done.append)
    while not done:
        c.poll(50)
    now = now_ms()
    assert not c.is_ready(1, now)
    assert 200 < c.poll_delay_ms(1, now) <= 400
    assert wait_ready(c, 1, 2.0)
    c.close()
    fb.close()


def test_request_timeout_closes_the_connection_and_fails_requests():
    fb = FakeBroker()
    c = NetworkClient(request_timeout_ms=300, reconnect_backoff_ms=100)
    c.add_node(1, "127.0.0.1", fb.port)
    assert wait_ready(c, 1)
    fb.silent = True
    got = []
    c.send(1, ApiKey.METADATA, metadata_body, our_max=8, callback=got.append)
    c.send(1, ApiKey.METADATA, metadata_body, our_max=8, callback=got.append)
    deadline = time.time() + 3
    while len(got) < 2 and time.time() < deadline:
        c.poll(50)
    assert isinstance(got[0].error, RequestTimedOutError) and got[0].timed_out
    assert isinstance(got[1].error, NetworkError)
    assert c.state(1) == "DISCONNECTED" and c.connection_delay(1, now_ms()) > 0
    c.close()
    fb.close()


def test_refused_connection_backs_off_exponentially():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    c = NetworkClient(reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000)
    c.add_node(1, "127.0.0.1", port)
    delays = []
    for _ in range(3):
        c.ready(1, now_ms())
        wait_until(lambda: c.state(1) == "DISCONNECTED", 3, "the refused connection never failed",
                   step=lambda: c.poll(20), interval=0)
        delays.append(c.connection_delay(1, now_ms()))
        wait_until(lambda: c.connection_delay(1, now_ms()) == 0, 3, "the reconnect backoff never ended",
                   interval=0.01)
    assert delays[0] < delays[2]
    c.close()


def test_metadata_updater_bootstraps_and_waits_are_bounded():
    fb = FakeBroker()
    md = Metadata([f"127.0.0.1:{fb.port}"], retry_backoff_ms=50)
    c = NetworkClient(metadata=md, metadata_updater=MetadataUpdater(md))
    md.add_topic("t")
    stop = threading.Event()
    t = threading.Thread(target=lambda: [c.poll(20) for _ in iter(lambda: stop.is_set(), True)])
    t.start()
    try:
        md.await_update(0, 5000)
        cluster = md.fetch()
        assert cluster.partition_count("t") == 1 and cluster.leader_for("t", 0) == 7
        assert cluster.node(7).port == fb.port
        with pytest.raises(KafkaTimeoutError):
            md.await_update(md.version + 100, 100)  # nothing asked: times out
    finally:
        stop.set()
        t.join(5)
        c.close()
        fb.close()
