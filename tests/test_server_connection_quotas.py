"""Connection quotas in the acceptor (broker/server/quota/connection_quotas.py) on an
in-process broker: max.connections.per.ip (and its overrides) close the extra connections
of one address while another address still connects; max.connections blocks the acceptor
(no busy loop) until a slot frees, then serves the waiting client; an IP's
connection_creation_rate (AlterClientQuotas) refuses a burst and un-records it."""

from __future__ import annotations

import socket
import time

import pytest

from broker.protocol import ApiKey
from broker.server.broker import KafkaBroker
from tests.support.broker import RawClient
from tests.test_server_client_quotas import alter


@pytest.fixture
def make_broker(tmp_path):
    brokers = []

    def make(**overrides):
        b = KafkaBroker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / f"logs{len(brokers)}"),
                         "log.retention.ms": "-1", **overrides})
        b.start()
        brokers.append(b)
        return b

    yield make
    for b in brokers:
        b.shutdown()


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    s = socket.socket()
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def closed_by_broker(s: socket.socket, timeout: float = 10.0) -> bool:
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def api_versions_ok(port: int, source: str = "127.0.0.1") -> bool:
    """An ApiVersions v0 round trip from ``source``."""
    from broker.protocol import FrameDecoder, RequestHeader, decode_response, encode_request
    with connect(port, source) as s:
        s.sendall(b"".join(bytes(x) for x in encode_request(RequestHeader(ApiKey.API_VERSIONS, 0, 7, "t"), {})))
        s.settimeout(10)
        decoder, frames = FrameDecoder(), []
        while not frames:
            data = s.recv(65536)
            if not data:
                return False
            frames = decoder.feed(data)
        header, body = decode_response(frames[0], ApiKey.API_VERSIONS, 0)
        return header.correlation_id == 7 and body.error_code == 0


def wait_until(cond, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_per_ip_limit_and_overrides(make_broker):
    b = make_broker(**{"max.connections.per.ip": "5", "max.connections.per.ip.overrides": "127.0.0.3:1"})
    port = b.bound_address()[1]
    burst = [connect(port) for _ in range(12)]
    try:
        assert wait_until(lambda: b.socket_server.connection_quotas.connection_count("127.0.0.1") == 5)
        refused = [s for s in burst if closed_by_broker(s, 0.5)]
        assert len(refused) == 7
        # another address still gets in and is served
        assert api_versions_ok(port, "127.0.0.2")
        first = connect(port, "127.0.0.3")
        second = connect(port, "127.0.0.3")  # the override allows one
        assert closed_by_broker(second) and not closed_by_broker(first, 0.5)
        first.close()
    finally:
        for s in burst:
            s.close()
    assert wait_until(lambda: b.socket_server.connection_quotas.connection_count() == 0)


def test_max_connections_blocks_the_acceptor_until_a_slot_frees(make_broker):
    b = make_broker(**{"max.connections": "4"})
    port = b.bound_address()[1]
    held = [connect(port) for _ in range(4)]
    assert wait_until(lambda: b.socket_server.connection_count == 4)
    waiting = connect(port)  # the kernel accepts it; the broker's acceptor waits for a slot
    from broker.protocol import RequestHeader, encode_request
    waiting.sendall(b"".join(bytes(x) for x in encode_request(RequestHeader(ApiKey.API_VERSIONS, 0, 1, "w"), {})))
    assert wait_until(lambda: b.socket_server.connection_quotas.waiting == 1)  # the acceptor blocks
    assert b.socket_server.connection_count == 4
    assert b.socket_server.connection_quotas.connection_count() == 4
    held.pop().close()  # a slot frees: the waiting connection is admitted and served
    assert wait_until(lambda: b.socket_server.connection_count == 4 and
                      b.socket_server.connection_quotas.blocked_ms > 0)
    waiting.settimeout(10)
    assert len(waiting.recv(4)) == 4  # its ApiVersions v0 is answered
    for s in held + [waiting]:
        s.close()


def test_ip_connection_creation_rate_refuses_a_burst(make_broker):
    b = make_broker()
    port = b.bound_address()[1]
    with RawClient("127.0.0.1", port) as c:
        assert alter(c, [([("ip", "127.0.0.4")], [("connection_creation_rate", 2, False)])]) == [(0, None)]
    burst = [connect(port, "127.0.0.4") for _ in range(40)]
    try:
        # 2/s over the padded 10-s window: about 20 get in, the rest are held, then closed
        assert wait_until(lambda: sum(1 for s in burst if closed_by_broker(s, 0.01)) >= 10, 60)
        admitted = b.socket_server.connection_quotas.connection_count("127.0.0.4")
        assert 0 < admitted < 40
        assert api_versions_ok(port, "127.0.0.5")  # other addresses are not affected
    finally:
        for s in burst:
            s.close()
