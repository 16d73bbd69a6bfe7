"""Typed Spark reads and writes (``valueFormat=avro``) against a Schema Registry that takes
HTTP Basic auth (the broker's SASL PLAIN users) and serves HTTPS from the broker's key store:
the ``schema.registry.basic.auth.user.info`` and ``schema.registry.ssl.ca.location`` options
reach the registry client on the driver and on the executors.

- A typed write registers ``<topic>-value`` through the secured registry, and
  confluent-kafka's ``AvroDeserializer`` (with the same credentials and CA) reads the rows
  back; a typed read of the topic gives the same rows.
- Wrong credentials fail the read on the driver with a one-line error naming 401 (and a
  typed write with them fails on the driver, naming 401, before anything is sent); the
  password is in neither error, nor in the records of this process's ``spark_kafkalog`` and
  ``broker`` loggers; a CA that did not sign the registry's certificate fails the read
  naming the certificate problem.

Spark jobs cost seconds each: one write and one read.
"""

from __future__ import annotations

import json
import logging
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, DeserializingConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import StringDeserializer

from tests.support.broker import BrokerProcess
from tests.support.tls import STORE_PASSWORD

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
ROWS = [(f"k{i}", (f"user-{i}", i)) for i in range(8)]
WRONG_PASSWORD = "not-alices-password-7f3e"


@pytest.fixture(scope="module")
def secured(tmp_path_factory, pki):
    broker = BrokerProcess(tmp_path_factory.mktemp("typed-sec"), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "schema.registry.listeners": "https://127.0.0.1:0",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": pki.path("server.p12"),
        "ssl.keystore.password": STORE_PASSWORD,
        "ssl.key.password": STORE_PASSWORD,
    }, name="typed-sec")
    broker.start()
    assert broker.schema_registry_url.startswith("https://")
    yield broker
    broker.kill()


def _registry_options(broker: BrokerProcess, pki, user_info: str = "admin:admin-secret",
                      ca: str = "ca.pem") -> dict[str, str]:
    return {"schema.registry.url": broker.schema_registry_url,
            "schema.registry.basic.auth.user.info": user_info,
            "schema.registry.ssl.ca.location": pki.path(ca)}


def _read(spark, broker, topic, options: dict[str, str]):
    reader = (spark.read.format("kafkalog").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("valueFormat", "avro").option("keyFormat", "string"))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _consume(broker, topic, count, deserializer) -> dict[str, object]:
    consumer = DeserializingConsumer({
        "bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "key.deserializer": StringDeserializer(), "value.deserializer": deserializer})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
    got: dict[str, object] = {}
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got[msg.key()] = msg.value()
    finally:
        consumer.close()
    return got


@pytest.fixture(scope="module")
def written(secured, pki):
    """A topic written by a typed Spark write through the secured registry."""
    from tests.support.spark import get_spark

    spark = get_spark()
    topic = f"sec-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(30)
    df = spark.createDataFrame(ROWS, "key STRING, value STRUCT<name: STRING, age: INT>")
    writer = (df.write.format("kafkalog").mode("append").option("kafka.bootstrap.servers", secured.bootstrap)
              .option("topic", topic).option("valueFormat", "avro"))
    for k, v in _registry_options(secured, pki).items():
        writer = writer.option(k, v)
    writer.save()
    return topic


def test_typed_write_and_read_through_basic_auth_and_https(spark, secured, pki, written):
    topic = written
    sr = SchemaRegistryClient({"url": secured.schema_registry_url, "basic.auth.user.info": "alice:alice-secret",
                               "ssl.ca.location": pki.path("ca.pem")})
    assert sr.get_versions(f"{topic}-value") == [1]
    assert json.loads(sr.get_latest_version(f"{topic}-value").schema.schema_str)["name"] == "topLevelRecord"
    expected = {k: {"name": v[0], "age": v[1]} for k, v in ROWS}
    assert _consume(secured, topic, len(ROWS), AvroDeserializer(sr)) == expected

    # read back by a typed read, as alice (any authenticated principal reads)
    df = _read(spark, secured, topic, _registry_options(secured, pki, "alice:alice-secret"))
    assert df.schema["value"].dataType.simpleString() == "struct<name:string,age:int>"
    rows = {r.key: r.value.asDict() for r in df.select("key", "value").collect()}
    assert rows == expected


def _driver_failure(spark, secured, topic, options, caplog) -> str:
    caplog.set_level(logging.DEBUG, logger="spark_kafkalog")
    caplog.set_level(logging.DEBUG, logger="broker")
    with pytest.raises(Exception) as info:
        _read(spark, secured, topic, options).schema  # noqa: B018 - the driver resolves the schemas
    return str(info.value)


def _error_line(text: str) -> str:
    """The raised error's own line (after pyspark's prefix and the frames that raised it)."""
    return next((line for line in text.splitlines() if line.startswith("broker.client.")), "")


def test_wrong_credentials_fail_on_the_driver_naming_401_without_the_password(spark, secured, pki, written, caplog):
    text = _driver_failure(spark, secured, written, _registry_options(secured, pki, f"alice:{WRONG_PASSWORD}"),
                           caplog)
    lines = text.splitlines()
    # pyspark's prefix and the frames that raised, then the one line of the registry's answer
    assert lines[0].startswith("[PYTHON_DATA_SOURCE_ERROR]"), text
    assert _error_line(text) == ("broker.client.registry_http.SchemaRegistryError: "
                                 "Unauthorized (HTTP 401, error code 401)"), text
    assert WRONG_PASSWORD not in text, text
    assert WRONG_PASSWORD not in caplog.text

    # a typed write with them fails on the driver too, before any record is sent
    df = spark.createDataFrame(ROWS[:1], "key STRING, value STRUCT<name: STRING, age: INT>")
    writer = (df.write.format("kafkalog").mode("append").option("kafka.bootstrap.servers", secured.bootstrap)
              .option("topic", written).option("valueFormat", "avro"))
    for k, v in _registry_options(secured, pki, f"alice:{WRONG_PASSWORD}").items():
        writer = writer.option(k, v)
    with pytest.raises(Exception) as info:
        writer.save()
    line = next((x for x in str(info.value).splitlines() if x.startswith("spark_kafkalog.")), "")
    assert line == ("spark_kafkalog.writers.common.KafkaLogWriteError: valueFormat=avro: the writer schema could "
                    "not be resolved: Unauthorized (HTTP 401, error code 401)"), info.value
    assert WRONG_PASSWORD not in str(info.value) and WRONG_PASSWORD not in caplog.text


def test_an_untrusted_ca_fails_naming_the_certificate_problem(spark, secured, pki, written, caplog):
    text = _driver_failure(spark, secured, written, _registry_options(secured, pki, ca="other-ca.pem"), caplog)
    assert _error_line(text).startswith("broker.client.registry_http.SchemaRegistryUnreachableError: "
                                        f"no schema registry of {secured.schema_registry_url} reachable "
                                        "(TLS handshake failed: certificate verify failed: "), text
    assert "admin-secret" not in text and "admin-secret" not in caplog.text, text
