"""Client telemetry (KIP-714) and the operators' /metrics endpoint on the real broker in
a subprocess: a client-metrics subscription set with IncrementalAlterConfigs (resource
type 16), described and listed; librdkafka (confluent-kafka, enable.metrics.push=true,
its default) completes the subscription handshake and pushes, and its metrics appear on
/metrics next to the broker's own; the broker refuses what Kafka refuses (unknown
subscription id, a push too early, an unsupported compression type, a payload over
telemetry.max.bytes, a push after a terminating one)."""

from __future__ import annotations

import re
import time
import urllib.request
import uuid

import confluent_kafka

from broker.protocol import ApiKey, ErrorCode
from tests.support.broker import RawClient
from tests.test_server_protocol import unique

CLIENT_METRICS = 16


def set_subscription(c: RawClient, name: str, configs: dict[str, str | None]) -> tuple[int, str | None]:
    r = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, {"validate_only": False, "resources": [
        {"resource_type": CLIENT_METRICS, "resource_name": name, "configs": [
            {"name": k, "config_operation": 0 if v is not None else 1, "value": v} for k, v in configs.items()]}]})
    return r.responses[0].error_code, r.responses[0].error_message


def metrics_url(broker) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = re.search(r"metrics served at (http://\S+/metrics)", broker.stderr_text())
        if m:
            return m.group(1)
        time.sleep(0.1)
    raise AssertionError("the broker did not report its metrics endpoint")


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def test_librdkafka_pushes_and_its_metrics_reach_the_endpoint(broker_factory):
    broker = broker_factory({"kafkalog.metrics.port": "0"})
    url = metrics_url(broker)
    with RawClient(broker.host, broker.port) as c:
        assert set_subscription(c, "all", {"metrics": "*", "interval.ms": "500"}) == (0, None)
        assert set_subscription(c, "bad", {"interval.ms": "5"})[0] == ErrorCode.INVALID_CONFIG
        assert set_subscription(c, "bad", {"match": "nonsense"})[0] == ErrorCode.INVALID_CONFIG
        d = c.request(ApiKey.DESCRIBE_CONFIGS, 3, {"include_synonyms": False, "include_documentation": False,
                                                    "resources": [{"resource_type": CLIENT_METRICS,
                                                                   "resource_name": "all",
                                                                   "configuration_keys": None}]})
        assert {x.name: x.value for x in d.results[0].configs} == {"metrics": "*", "interval.ms": "500"}
        listed = c.request(ApiKey.LIST_CLIENT_METRICS_RESOURCES, 0, {})
        assert [x.name for x in listed.client_metrics_resources] == ["all"]
    topic = unique("telemetry")
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "client.id": "pushing-client"})
    try:
        deadline = time.monotonic() + 90
        text = ""
        while time.monotonic() < deadline:
            p.produce(topic, b"x")
            p.poll(0.2)
            text = scrape(url)
            if 'client_id="pushing-client"' in text and "kafka_client_" in text:
                break
        assert 'client_id="pushing-client"' in text, text[-3000:]
        assert re.search(r'^kafka_client_org_apache_kafka_producer\S*\{[^}]*client_id="pushing-client"', text,
                         re.M), text[-3000:]
        assert broker.api_versions_used("pushing-client").get("PUSH_TELEMETRY")
        # the broker's own figures are there too
        assert re.search(r'^kafka_server_requests_total\{api="PRODUCE"\} [1-9]', text, re.M)
        assert re.search(rf'^kafka_server_bytes_in_total\{{topic="{topic}"\}} [1-9]', text, re.M)
        assert re.search(r"^kafka_server_connections [1-9]", text, re.M)
        assert re.search(rf'^kafka_log_size_bytes\{{partition="0",topic="{topic}"\}} [1-9]', text, re.M)
    finally:
        p.flush(10)


def test_push_errors_are_kafkas(broker_factory):
    broker = broker_factory({"telemetry.max.bytes": "100"})
    with RawClient(broker.host, broker.port, client_id="raw") as c:
        assert set_subscription(c, "all", {"metrics": "org.apache.kafka.", "interval.ms": "60000",
                                           "match": "client_id=raw"}) == (0, None)
        g = c.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": uuid.UUID(int=0)})
        assert g.error_code == 0 and g.client_instance_id.int != 0
        assert g.requested_metrics == ["org.apache.kafka."] and g.push_interval_ms == 60000
        assert g.accepted_compression_types == [4, 3, 1, 2] and g.delta_temporality
        iid, sub = g.client_instance_id, g.subscription_id
        again = c.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": iid})
        assert again.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED and again.throttle_time_ms > 0

        def push(sub_id=sub, terminating=False, compression=0, metrics=b""):
            return c.request(ApiKey.PUSH_TELEMETRY, 0, {
                "client_instance_id": iid, "subscription_id": sub_id, "terminating": terminating,
                "compression_type": compression, "metrics": metrics}).error_code

        assert push(sub_id=sub + 1) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        assert push() == ErrorCode.NONE  # the first push after a Get
        assert push() == ErrorCode.THROTTLING_QUOTA_EXCEEDED  # too early
        assert push(terminating=True, compression=9) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert push(terminating=True, metrics=b"\x0a" * 101) == ErrorCode.TELEMETRY_TOO_LARGE
        assert push(terminating=True, metrics=b"\xff\xff") == ErrorCode.INVALID_RECORD  # not OTLP
        assert push(terminating=True) == ErrorCode.INVALID_REQUEST  # nothing after a terminating push
    with RawClient(broker.host, broker.port, client_id="other") as c:
        g = c.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": uuid.UUID(int=0)})
        assert g.error_code == 0 and g.requested_metrics == []  # the match selects client_id=raw only
    assert "Traceback" not in broker.stderr_text()


def test_pushed_telemetry_is_exported_to_a_topic(broker_factory):
    """``kafkalog.telemetry.export.topic``: every accepted push is a record of the topic
    (OTLP MetricsData, keyed by the client instance id), as a client telemetry reporter
    plugin writes them; a share consumer's org.apache.kafka.consumer.share.* metrics
    arrive."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    broker = broker_factory({"kafkalog.telemetry.export.topic": "client-telemetry-metrics"})
    topic, group = unique("telemetry"), unique("g")
    with RawClient(broker.host, broker.port) as c:
        assert set_subscription(c, "share", {"metrics": "org.apache.kafka.consumer.share.",
                                             "interval.ms": "500"}) == (0, None)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                             incremental_configs=[entry])]).values():
        f.result(30)
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(50):
        p.produce(topic, b"%d" % i)
    p.flush(10)
    share = confluent_kafka.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                           "client.id": "share-pusher", "enable.metrics.push": True})
    share.subscribe([topic])
    reader = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("r"),
                                       "auto.offset.reset": "earliest"})
    reader.subscribe(["client-telemetry-metrics"])
    names: set[str] = set()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(n.startswith("org.apache.kafka.consumer.share.fetch")
                                                      for n in names):
            share.poll(0.2)
            m = reader.poll(0.2)
            if m is None or m.error() is not None:
                continue
            assert dict(m.headers())["client_id"] == b"share-pusher"
            data = metrics_pb2.MetricsData()
            data.ParseFromString(m.value())
            names |= {x.name for rm in data.resource_metrics for sm in rm.scope_metrics for x in sm.metrics}
    finally:
        share.close()
        reader.close()
    assert any(n.startswith("org.apache.kafka.consumer.share.fetch.manager.") for n in names), names
    assert all(n.startswith("org.apache.kafka.consumer.share.") for n in names), names
