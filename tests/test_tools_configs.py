"""kafkalog configs (broker/tools/configs.py), like kafka-configs.sh, against the real
broker in a subprocess: quotas of users, clients and IPs (named and default entities,
added, described, deleted), a user's quotas and SCRAM credentials in one --add-config,
client-metrics subscriptions, topic configs, the brokers' dynamic configs, and one-line
errors."""

from __future__ import annotations

import pytest

from broker.protocol import ApiKey
from spark_kafkalog.cli.main import main
from tests.support.broker import RawClient
from tests.test_server_protocol import create_topic, unique


def configs(capsys, broker, *argv: str) -> tuple[int, str, str]:
    code = main(["configs", "--bootstrap-server", broker.bootstrap, *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_client_user_and_ip_quotas(kafka_broker, capsys):
    b = kafka_broker
    assert configs(capsys, b, "--alter", "--entity-type", "clients", "--entity-name", "etl",
                   "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")[:2] == \
        (0, "Completed updating config for client etl.\n")
    assert configs(capsys, b, "--alter", "--entity-type", "clients", "--entity-default",
                   "--add-config", "request_percentage=50")[:2] == \
        (0, "Completed updating default config for clients in the cluster.\n")
    code, out, _ = configs(capsys, b, "--describe", "--entity-type", "clients")
    assert code == 0
    assert "Quota configs for client-id 'etl' are consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0" in out
    assert "Quota configs for the default client-id are request_percentage=50.0" in out
    assert configs(capsys, b, "--alter", "--entity-type", "clients", "--entity-name", "etl",
                   "--delete-config", "consumer_byte_rate")[0] == 0
    code, out, _ = configs(capsys, b, "--describe", "--entity-type", "clients", "--entity-name", "etl")
    assert out == "Quota configs for client-id 'etl' are producer_byte_rate=1048576.0\n"
    # a user's quotas and SCRAM credentials in one go are refused without SASL only for SCRAM
    assert configs(capsys, b, "--alter", "--entity-type", "users", "--entity-name", "alice",
                   "--add-config", "controller_mutation_rate=10")[0] == 0
    code, out, _ = configs(capsys, b, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert "Quota configs for user-principal 'alice' are controller_mutation_rate=10.0" in out
    assert configs(capsys, b, "--alter", "--entity-type", "ips", "--entity-name", "10.1.2.3",
                   "--add-config", "connection_creation_rate=5")[0] == 0
    code, out, _ = configs(capsys, b, "--describe", "--entity-type", "ips")
    assert "Quota configs for ip '10.1.2.3' are connection_creation_rate=5.0" in out


def test_client_metrics_topics_and_brokers(kafka_broker, capsys):
    b = kafka_broker
    assert configs(capsys, b, "--alter", "--entity-type", "client-metrics", "--entity-name", "producers",
                   "--add-config", "metrics=[org.apache.kafka.producer.,org.apache.kafka.consumer.],interval.ms=60000",
                   )[0] == 0
    code, out, _ = configs(capsys, b, "--describe", "--entity-type", "client-metrics", "--entity-name", "producers")
    assert code == 0 and "  interval.ms=60000" in out and "  metrics=" in out
    topic = unique("cfg")
    with RawClient(b.host, b.port) as c:
        create_topic(c, topic)
    assert configs(capsys, b, "--alter", "--entity-type", "topics", "--entity-name", topic,
                   "--add-config", "retention.ms=60000")[:2] == (0, f"Completed updating config for topic {topic}.\n")
    code, out, _ = configs(capsys, b, "--describe", "--entity-type", "topics", "--entity-name", topic)
    assert out == f"Dynamic configs for topic {topic} are:\n  retention.ms=60000\n"
    code, out, _ = configs(capsys, b, "--describe", "--entity-type", "brokers", "--entity-default")
    assert code == 0 and out.startswith("Dynamic configs for broker <default> are:")
    # a broker key that cannot change live: Kafka's INVALID_REQUEST, one line
    code, _, err = configs(capsys, b, "--alter", "--entity-type", "brokers", "--entity-default",
                           "--add-config", "log.retention.ms=10")
    assert code == 1 and err.count("\n") == 1 and "INVALID_REQUEST" in err
    assert "Cannot update these configs dynamically: log.retention.ms" in err


def test_dynamic_broker_configs_limit_connections_live_and_persist(broker_factory, capsys):
    """kafka-configs.sh --entity-type brokers --entity-default --add-config
    max.connections.per.ip=N: applied at once to new connections,
    a per-broker value wins over the default, deleting it restores the static limit,
    and the values survive a restart."""
    b = broker_factory()

    def open_connections(n: int) -> tuple[list[RawClient], int]:
        clients, refused = [], 0
        for _ in range(n):
            c = RawClient(b.host, b.port)
            try:
                c.request(ApiKey.API_VERSIONS, 0, {})  # an accepted connection answers
                clients.append(c)
            except OSError:  # over the limit: closed by the broker
                refused += 1
                c.close()
        return clients, refused

    assert configs(capsys, b, "--alter", "--entity-type", "brokers", "--entity-default",
                   "--add-config", "max.connections.per.ip=3")[:2] == (0, "Completed updating config for broker "
                                                                         "<default>.\n")
    code, out, _ = configs(capsys, b, "--describe", "--entity-type", "brokers", "--entity-default")
    assert code == 0 and "  max.connections.per.ip=3" in out
    clients, refused = open_connections(5)
    assert (len(clients), refused) == (3, 2)
    for c in clients:
        c.close()
    # this broker's own value wins over the cluster default
    assert configs(capsys, b, "--alter", "--entity-type", "brokers", "--entity-name", "1",
                   "--add-config", "max.connections.per.ip=4")[0] == 0
    code, out, _ = configs(capsys, b, "--describe", "--entity-type", "brokers", "--entity-name", "1")
    assert "  max.connections.per.ip=4" in out
    b.restart()
    clients, refused = open_connections(6)
    assert (len(clients), refused) == (4, 2)
    for c in clients:
        c.close()
    # an invalid value is INVALID_CONFIG and changes nothing
    code, _, err = configs(capsys, b, "--alter", "--entity-type", "brokers", "--entity-default",
                           "--add-config", "max.connections.per.ip=-5")
    assert code == 1 and "INVALID_CONFIG" in err
    for entity in (["--entity-name", "1"], ["--entity-default"]):
        assert configs(capsys, b, "--alter", "--entity-type", "brokers", *entity,
                       "--delete-config", "max.connections.per.ip")[0] == 0
    clients, refused = open_connections(6)
    assert (len(clients), refused) == (6, 0)
    for c in clients:
        c.close()


@pytest.mark.parametrize("argv, message", [
    (["--alter", "--entity-type", "clients", "--entity-name", "c", "--add-config", "nope=1"], "unknown config"),
    (["--alter", "--entity-type", "clients", "--entity-name", "c", "--add-config", "producer_byte_rate=x"],
     "takes a number"),
    (["--alter", "--entity-type", "ips", "--entity-name", "not-an-ip", "--add-config",
      "connection_creation_rate=5"], "INVALID_REQUEST"),
    (["--describe", "--entity-type", "widgets"], "--entity-type widgets"),
    (["--alter", "--entity-type", "clients", "--entity-name", "c"], "--add-config or --delete-config"),
])
def test_errors_are_one_line(kafka_broker, capsys, argv, message):
    code, _, err = configs(capsys, kafka_broker, *argv)
    assert code == 1 and message in err and err.count("\n") == 1
