"""The broker's Fetch responses through TLS (issue 16): no sendfile through an SSL socket,
so ``Connection._send_tls`` (broker/server/socket_server.py) reads the segment file slices
with ``os.preadv`` into a staging buffer of ``TLS_WRITE_CHUNK`` bytes and writes it with
large SSL writes, small buffers (headers between partitions) joined into the same stage.

Proven against the PLAINTEXT listener of the same broker (``sendmsg`` + ``os.sendfile``): a
Fetch of several partitions whose slices are megabytes long (many stages, slice and stage
boundaries not aligned) arrives byte for byte the same through the SSL listener, also
when two Fetches are pipelined on one connection (the stage is reused between
responses) and when a response holds only small buffers.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import uuid

import pytest

from broker.client.producer.producer import KafkaProducer
from broker.protocol import ApiKey, RequestHeader, decode_response, encode_request
from broker.server.socket_server import TLS_WRITE_CHUNK

PARTITIONS = 3
TIMEOUT = 30
_I32 = struct.Struct(">i")


@pytest.fixture(scope="module")
def fetch_broker(tmp_path_factory, pki):
    from tests.support.broker import BrokerProcess
    b = BrokerProcess(tmp_path_factory.mktemp("tls-fetch"), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "num.partitions": str(PARTITIONS), "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.path("server.pem")}, name="tls-fetch")
    b.start()
    yield b
    assert b.stop() == 0, b.stderr_text()[-3000:]


@pytest.fixture(scope="module")
def big_topic(fetch_broker):
    """A topic of PARTITIONS partitions holding about 1.5 MB of incompressible values
    each, in record sizes that put batch (and so slice) ends off any power of two."""
    topic = f"tls-fetch-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer({"bootstrap.servers": fetch_broker.bootstrap, "linger.ms": 5,
                              "batch.size": 65536})
    try:
        futures = [producer.send(topic, os.urandom(5000 + 37 * (i % 50)), key=b"k%d" % i, partition=i % PARTITIONS)
                   for i in range(900)]
        producer.flush()
        for f in futures:
            f.result(TIMEOUT)
    finally:
        producer.close()
    return topic


def _fetch_frame(topic: str, offsets: list[int], correlation_id: int, partition_max_bytes: int) -> bytes:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 64 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                 "partition_max_bytes": partition_max_bytes} for p, offset in enumerate(offsets)]}],
            "forgotten_topics_data": [], "rack_id": ""}
    return b"".join(bytes(b) for b in encode_request(RequestHeader(ApiKey.FETCH, 11, correlation_id, "tls-fetch"),
                                                     body))


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, have = memoryview(buf), 0
    while have < n:
        got = sock.recv_into(view[have:])
        assert got, "closed by the broker"
        have += got
    return bytes(buf)


def _responses(broker, listener: str, pki, frames: list[bytes]) -> list[bytes]:
    """Send ``frames`` back to back on one connection, return the response frames."""
    sock = socket.create_connection(("127.0.0.1", broker.ports[listener]), timeout=TIMEOUT)
    if listener == "SSL":
        sock = ssl.create_default_context(cafile=pki.path("ca.pem")).wrap_socket(sock, server_hostname="localhost")
    with sock:
        sock.sendall(b"".join(frames))
        return [_recv_exactly(sock, _I32.unpack(_recv_exactly(sock, 4))[0]) for _ in frames]


def _records(frame: bytes) -> list[bytes]:
    _, body = decode_response(memoryview(frame), ApiKey.FETCH, 11)
    parts = body.responses[0].partitions
    assert [p.error_code for p in parts] == [0] * len(parts)
    return [bytes(p.records) for p in parts]


def test_large_multi_partition_fetch_is_the_same_through_tls(fetch_broker, big_topic, pki):
    request = _fetch_frame(big_topic, [0] * PARTITIONS, 7, 16 << 20)
    plain, = _responses(fetch_broker, "PLAINTEXT", pki, [request])
    tls, = _responses(fetch_broker, "SSL", pki, [request])
    assert len(plain) > 3 * TLS_WRITE_CHUNK  # several stages, slices across their boundaries
    records = _records(plain)
    assert all(len(r) > TLS_WRITE_CHUNK for r in records)
    assert tls == plain


def test_pipelined_fetches_reuse_the_stage(fetch_broker, big_topic, pki):
    """Two Fetches in flight on one TLS connection: the second response (other offsets,
    slices bounded by partition_max_bytes) follows the first one whole."""
    requests = [_fetch_frame(big_topic, [0] * PARTITIONS, 1, 16 << 20),
                _fetch_frame(big_topic, [5, 17, 101], 2, 300_000)]
    plain = _responses(fetch_broker, "PLAINTEXT", pki, requests)
    tls = _responses(fetch_broker, "SSL", pki, requests)
    assert [r[:4] for r in tls] == [struct.pack(">i", 1), struct.pack(">i", 2)]  # correlation ids, in order
    assert tls == plain
    assert all(0 < len(r) <= 300_000 + 64 * 1024 for r in _records(plain[1]))


def test_first_batch_only_and_an_error_partition_through_tls(fetch_broker, big_topic, pki):
    """partition_max_bytes=1 (one batch each, KIP-74) with a partition fetched past its end
    (OFFSET_OUT_OF_RANGE, no records): small buffers and short slices through the stage."""
    request = _fetch_frame(big_topic, [0, 10**6, 0], 4, 1)
    plain, = _responses(fetch_broker, "PLAINTEXT", pki, [request])
    tls, = _responses(fetch_broker, "SSL", pki, [request])
    _, body = decode_response(memoryview(plain), ApiKey.FETCH, 11)
    assert [p.error_code for p in body.responses[0].partitions] == [0, 1, 0]
    assert tls == plain
