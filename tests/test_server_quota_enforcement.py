"""Client quotas on the request path (broker/server/handlers/throttling.py) of a real
broker in a subprocess: Q2 of RELIABILITY.md (a throttled response carries
throttle_time_ms > 0), the fetch's throttled empty response, the request-time quota, the
fast path (no quota: no throttle), and real clients held to their quota."""

from __future__ import annotations

from broker.protocol import ApiKey
from tests.support.broker import RawClient
from tests.test_server_client_quotas import alter
from tests.test_server_protocol import batch_of, create_topic, fetch_body, produce_body, unique


def test_q2_produce_and_fetch_over_quota_are_throttled(broker_factory):
    broker = broker_factory()
    topic = unique("q2")
    with RawClient(broker.host, broker.port, client_id="admin") as c:
        create_topic(c, topic)
        assert alter(c, [([("client-id", "slow")], [("producer_byte_rate", 1000, False),
                                                    ("consumer_byte_rate", 1000, False)])]) == [(0, None)]
    batch = batch_of(200, size=200)  # about 40 KB: far over 1000 B/s for the padded 10 s window
    small = batch_of(10, size=150)  # about 1.7 KB
    with RawClient(broker.host, broker.port, client_id="fast") as other:
        r = other.request(ApiKey.PRODUCE, 8, produce_body(topic, batch))
        assert r.throttle_time_ms == 0  # no quota for this client id
        for _ in range(20):
            other.request(ApiKey.PRODUCE, 8, produce_body(topic, small))
    with RawClient(broker.host, broker.port, client_id="slow") as c:
        r = c.request(ApiKey.PRODUCE, 8, produce_body(topic, batch))
        assert r.responses[0].partition_responses[0].error_code == 0  # accepted, then throttled
        assert r.throttle_time_ms > 0
    with RawClient(broker.host, broker.port, client_id="slow") as c:
        # the fetch quota clamps max_bytes to one window's worth (1000 B/s x 10 s)...
        f = c.request(ApiKey.FETCH, 11, fetch_body(topic, offset=200))
        assert f.throttle_time_ms == 0
        size = len(bytes(f.responses[0].partitions[0].records))
        assert 0 < size <= 10_000
        # ...and the next fetch goes over: Kafka's throttled (empty) response
        f2 = c.request(ApiKey.FETCH, 11, fetch_body(topic, offset=300))
        assert f2.throttle_time_ms > 0 and f2.responses == []
    assert "Traceback" not in broker.stderr_text()


def test_request_percentage_quota_throttles_any_api(broker_factory):
    broker = broker_factory()
    with RawClient(broker.host, broker.port, client_id="admin") as c:
        assert alter(c, [([("client-id", "busy")], [("request_percentage", 1e-9, False)])]) == [(0, None)]
    with RawClient(broker.host, broker.port, client_id="busy") as c:
        r = c.request(ApiKey.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False,
                                            "include_cluster_authorized_operations": False,
                                            "include_topic_authorized_operations": False})
        assert r.throttle_time_ms > 0
        assert r.throttle_time_ms <= 1000  # the request quota is capped at one window
        v = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert v.throttle_time_ms == 0  # ApiVersions is exempt


def test_controller_mutation_quota_throttles_topic_creation(broker_factory):
    """KIP-599 on the served (permissive) versions: partitions created past the token
    bucket are created, and the response is throttled (the bucket's debt / the rate)."""
    broker = broker_factory({"controller.quota.window.num": "2", "controller.quota.window.size.seconds": "1"})
    with RawClient(broker.host, broker.port, client_id="admin") as c:
        assert alter(c, [([("client-id", "mutator")], [("controller_mutation_rate", 5, False)])]) == [(0, None)]
    with RawClient(broker.host, broker.port, client_id="mutator") as c:
        def create(name: str, partitions: int):
            return c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
                {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                 "configs": []}], "timeout_ms": 10000, "validate_only": False})
        first = create(unique("m"), 8)  # burst 2 x 1 s x 5/s = 10 credits: fine
        assert first.topics[0].error_code == 0 and first.throttle_time_ms == 0
        second = create(unique("m"), 8)  # 10 - 16 = -6 credits: created, then throttled 1.2 s
        assert second.topics[0].error_code == 0 and second.throttle_time_ms > 0
    assert "Traceback" not in broker.stderr_text()
