"""Spark's network mode over TLS (issue 16): ``kafka.security.protocol=SSL`` and
``kafka.ssl.*`` options reach the driver's planning client and the executors' fetchers, as
with Spark's Kafka connector. Real Spark local mode, real broker subprocess with a
PLAINTEXT and an SSL listener; the data is produced by confluent-kafka over PLAINTEXT.
"""

from __future__ import annotations

import uuid

import pytest

from tests.support.broker import BrokerProcess
from tests.support.tls import STORE_PASSWORD, TRUST_PASSWORD


@pytest.fixture(scope="module")
def ssl_broker(tmp_path_factory, pki):
    b = BrokerProcess(tmp_path_factory.mktemp("spark-tls"), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": pki.path("server.p12"),
        "ssl.keystore.password": STORE_PASSWORD}, name="spark-tls")
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
