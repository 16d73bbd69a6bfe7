"""Spark over TLS (issue 16): ``kafka.security.protocol=SSL`` and ``kafka.ssl.*`` options
reach the driver's planning client, the executors' fetchers and the sink's producers, as
with Spark's Kafka connector. Real Spark local mode, a real broker subprocess with a
PLAINTEXT, an SSL and a mutual-TLS listener (MTLS: ssl.client.auth=required).
"""

from __future__ import annotations

import uuid

import pytest

from tests.support.broker import BrokerProcess
from tests.support.tls import STORE_PASSWORD, TRUST_PASSWORD


@pytest.fixture(scope="module")
def ssl_broker(tmp_path_factory, pki):
    b = BrokerProcess(tmp_path_factory.mktemp("spark-tls"), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": pki.path("server.p12"),
        "ssl.keystore.password": STORE_PASSWORD,
        "listener.name.mtls.ssl.client.auth": "required", "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": pki.path("ca.pem")}, name="spark-tls")
    b.start()
    yield b
    assert b.stop() == 0, b.stderr_text()[-3000:]


def test_spark_network_read_over_ssl(spark, ssl_broker, pki):
    import confluent_kafka as ck

    topic = f"spark-tls-{uuid.uuid4().hex[:8]}"
    producer = ck.Producer({"bootstrap.servers": ssl_broker.bootstrap})
    for i in range(500):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(30) == 0
    reader = (spark.read.format("kafkalog")
              .option("kafka.bootstrap.servers", f"localhost:{ssl_broker.ports['SSL']}")
              .option("kafka.security.protocol", "SSL")
              .option("kafka.ssl.truststore.type", "PEM")
              .option("kafka.ssl.truststore.location", pki.path("ca.pem"))
              .option("subscribe", topic))
    df = reader.load()
    rows = df.select("key", "value", "offset").orderBy("offset").collect()
    assert [(bytes(r.key), bytes(r.value), r.offset) for r in rows] == \
        [(b"k%d" % i, b"v%d" % i, i) for i in range(500)]
    # a PKCS12 trust store with its password: the password is not in the plan string
    df = (reader.option("kafka.ssl.truststore.type", "PKCS12")
          .option("kafka.ssl.truststore.location", pki.path("truststore.p12"))
          .option("kafka.ssl.truststore.password", TRUST_PASSWORD).load())
    assert df.count() == 500
    plan = df._jdf.queryExecution().toString()
    assert TRUST_PASSWORD not in plan


def test_spark_write_over_mutual_tls(spark, ssl_broker, pki):
    """The sink's producers (on the executors) take kafka.ssl.*: a PKCS12 key store for
    mutual TLS and an inline PEM trust store; read back with confluent-kafka over TLS."""
    from confluent_kafka import Consumer, TopicPartition

    with open(pki.path("ca.pem")) as f:
        ca = f.read()
    topic = f"spark-tls-w-{uuid.uuid4().hex[:8]}"
    df = spark.range(300).selectExpr("CAST(id AS STRING) AS key", "CONCAT('value-', id) AS value")
    (df.write.format("kafkalog").mode("append")
       .option("kafka.bootstrap.servers", f"localhost:{ssl_broker.ports['MTLS']}")
       .option("kafka.security.protocol", "SSL")
       .option("kafka.ssl.truststore.type", "PEM")
       .option("kafka.ssl.truststore.certificates", ca)
       .option("kafka.ssl.keystore.type", "PKCS12")
       .option("kafka.ssl.keystore.location", pki.path("client.p12"))
       .option("kafka.ssl.keystore.password", STORE_PASSWORD)
       .option("topic", topic)
       .save())
    c = Consumer({"bootstrap.servers": f"localhost:{ssl_broker.ports['SSL']}", "security.protocol": "SSL",
                  "ssl.ca.location": pki.path("ca.pem"), "group.id": topic, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = set()
    while len(got) < 300:
        m = c.poll(30)
        assert m is not None and not m.error()
        got.add((m.key(), m.value()))
    c.close()
    assert got == {(str(i).encode(), f"value-{i}".encode()) for i in range(300)}
