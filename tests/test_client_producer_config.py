"""ProducerConfig: Kafka's keys and defaults, and the idempotence rules (I11)."""

import pytest

from broker.client.producer.config import ProducerConfig
from broker.config import ConfigError


def test_defaults_are_kafkas():
    c = ProducerConfig()
    assert c.acks == -1 and c.idempotence is True
    assert c.batch_size == 16384 and c.linger_ms == 5 and c.buffer_memory == 33554432
    assert c.max_block_ms == 60000 and c.max_in_flight == 5 and c.retries == 2**31 - 1
    assert c.delivery_timeout_ms == 120000 and c.request_timeout_ms == 30000
    assert c.compression_type == "none" and c.max_request_size == 1048576


def test_keys_with_dots_or_underscores():
    c = ProducerConfig({"linger.ms": 7}, batch_size=100, bootstrap_servers="a:1,b:2")
    assert c.linger_ms == 7 and c.batch_size == 100 and c["bootstrap.servers"] == ["a:1", "b:2"]


def test_unknown_key_is_an_error():
    with pytest.raises(ConfigError, match="lingerms"):
        ProducerConfig(lingerms=5)


@pytest.mark.parametrize("acks,expected", [("all", -1), ("-1", -1), (-1, -1), ("1", 1), (0, 0)])
def test_acks_values(acks, expected):
    assert ProducerConfig(acks=acks, enable_idempotence=False).acks == expected


def test_bad_acks_and_compression():
    with pytest.raises(ConfigError, match="acks"):
        ProducerConfig(acks="2")
    with pytest.raises(ConfigError, match="compression.type"):
        ProducerConfig(compression_type="brotli")


@pytest.mark.parametrize("key,value", [("acks", "1"), ("acks", 0), ("retries", 0),
                                       ("max.in.flight.requests.per.connection", 6)])
def test_i11_explicit_idempotence_conflicts_raise(key, value):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        ProducerConfig({"enable.idempotence": True, key: value})


@pytest.mark.parametrize("key,value", [("acks", "1"), ("acks", 0), ("retries", 0),
                                       ("max.in.flight.requests.per.connection", 6)])
def test_i11_default_idempotence_gives_way_quietly(key, value):
    c = ProducerConfig({key: value})
    assert c.idempotence is False


def test_i11_compatible_settings_keep_idempotence():
    c = ProducerConfig({"enable.idempotence": True, "max.in.flight.requests.per.connection": 5,
                        "acks": "all", "retries": 3})
    assert c.idempotence is True


def test_delivery_timeout_floor():
    c = ProducerConfig(linger_ms=1000, request_timeout_ms=200000)
    assert c.delivery_timeout_ms == 201000  # raised quietly when not set
    with pytest.raises(ConfigError, match="delivery.timeout.ms"):
        ProducerConfig(linger_ms=1000, request_timeout_ms=2000, delivery_timeout_ms=2500)


def test_batch_size_zero_becomes_one_and_transactional_id_rules():
    assert ProducerConfig(batch_size=0).batch_size == 1
    c = ProducerConfig(transactional_id="tx", transaction_timeout_ms=5000)
    assert (c["transactional.id"], c["transaction.timeout.ms"], c.idempotence) == ("tx", 5000, True)
    with pytest.raises(ConfigError, match="transactional.id"):
        ProducerConfig(transactional_id="")
    with pytest.raises(ConfigError, match="enable.idempotence"):
        ProducerConfig(transactional_id="tx", enable_idempotence=False)
    with pytest.raises(ConfigError, match="acks"):  # idempotence is implied, so acks=1 conflicts
        ProducerConfig(transactional_id="tx", acks=1)


def test_callables():
    c = ProducerConfig(partitioner_class=lambda t, k, v, n: 0)
    assert callable(c["partitioner.class"])
    with pytest.raises(ConfigError, match="partitioner.class"):
        ProducerConfig({"partitioner.class": "not callable"})
